"""The view reads the core's chat record: what it shows of calls, steps and totals is the record's.

The display state (``ChatState``) has no fold of its own: it follows ``chat.record``'s
changes, and one made later (a ``display(chat)`` after the fact, a loaded chat) is built
from the record. Both must show the same conversation.
"""

from __future__ import annotations

import contextlib
import re
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from nbagent import Chat, ProviderError, tool
from nbagent.notebook._fallback import bundle_for
from nbagent.notebook._state import BudgetEntry, CallEntry, ChatState, StepEntry, state_for
from nbagent.testing._scripted import ScriptedProvider, call_tools, reply


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    if key == "boom":
        raise RuntimeError("no such key")
    return f"value of {key}"


@tool(requires_approval=True)
def wire(amount: int) -> str:
    """Send money."""
    return f"sent {amount}"


class Flaky(ScriptedProvider):
    """Fails the requests whose number (from 0) is in ``fail``, once each."""

    def __init__(self, script: list[Any], fail: set[int]):
        super().__init__(script)
        self.fail, self.asked = set(fail), 0

    def complete(self, request: Any) -> Any:
        n, self.asked = self.asked, self.asked + 1
        if n in self.fail:
            raise ProviderError("server hiccup", provider="scripted")
        return super().complete(request)


def _shown(state: ChatState) -> tuple[Any, ...]:
    """What a state shows (budget cards aside: a rebuilt state shows only the last one; and
    a tool's traceback, which only an ``after_tool_result`` callback ever sees)."""
    with state.lock:
        entries = [e for e in state.entries if not isinstance(e, BudgetEntry)]
        rows = [(e.key, e.turn, e.kind) for e in entries]
        bundle = bundle_for(state)
        html = re.sub(r'<details class="nba-tb">.*?</details>', "", bundle["text/html"], flags=re.S)
        body = re.sub(r"<[^>]*nba-status.*", "", html, flags=re.S)  # the phase is the view's
        totals = {t: state.totals_for(t) for t in sorted({e.turn for e in entries})}
        sums = [(t, x.steps, x.calls, x.input_tokens, x.output_tokens) for t, x in totals.items()]
        return rows, body, sums


_round = st.lists(
    st.sampled_from(["a", "b", "boom", "wire"]), min_size=1, max_size=3
)  # the calls of one response


@settings(max_examples=40, deadline=None)
@given(
    turns=st.lists(st.lists(_round, max_size=3), min_size=1, max_size=3),
    fail=st.sets(st.integers(0, 8), max_size=2),
    verdicts=st.lists(st.booleans(), max_size=12),
)
def test_a_state_built_from_the_record_shows_what_the_live_one_showed(
    turns: list[list[list[str]]], fail: set[int], verdicts: list[bool]
) -> None:
    script: list[Any] = []
    for t, rounds in enumerate(turns):
        for calls in rounds:
            script.append(
                call_tools(
                    *[
                        ("wire", {"amount": 5}) if c == "wire" else ("lookup", {"key": c})
                        for c in calls
                    ]
                )
            )
        script.append(reply(f"**answer {t}**"))
    chat = Chat(provider=Flaky(script, fail), display=False).with_tools(lookup, wire)
    live = state_for(chat)
    decide = iter(verdicts)
    for t in range(len(turns)):
        with contextlib.suppress(ProviderError):
            chat.ask(f"turn {t}")
        while chat.status != "complete":
            for c in chat.pending_approvals:
                if next(decide, True):
                    chat.approve(c)
                else:
                    chat.deny(c, reason="not today")
            with contextlib.suppress(ProviderError):
                chat.complete()
    rebuilt = ChatState.from_chat(chat)
    assert _shown(rebuilt) == _shown(live)
    # And the facts are the record's: every call's entry reads the record itself, no copy.
    calls = [e for e in live.entries if isinstance(e, CallEntry)]
    assert all(e.r is chat.record.call(e.r.call_id) for e in calls)
    for e in calls:
        assert e.verdict == (e.r.decided.verdict if e.r.decided else None)
    steps = [e for e in live.entries if isinstance(e, StepEntry)]
    done = [s for s in chat.record.steps if s.usage is not None]
    assert all(e.r in chat.record.steps for e in steps)  # the record's own, no copy
    said = [e.r for e in steps if e.status == "done"]
    assert sum(s.usage.input_tokens for s in said) == sum(s.usage.input_tokens for s in done)  # type: ignore[union-attr]


def test_a_loaded_chat_shows_its_steps_tokens_and_timings(tmp_path: Path) -> None:
    """Chat.load: the view of the reloaded chat says what each step spent and took, as the
    live view did (a view rebuilt from the transcript alone knew neither)."""
    db = str(tmp_path / "chats.db")
    script = [call_tools(("lookup", {"key": "a"})), reply("done")]
    chat = Chat(provider=ScriptedProvider(script), store=db, display=False).with_tools(lookup)
    chat.ask("go")
    before = bundle_for(state_for(chat))["text/plain"]
    loaded = Chat.load(
        chat.id, store=db, provider=ScriptedProvider([]), tools=[lookup], display=False
    )
    after = bundle_for(state_for(loaded))["text/plain"]
    step_lines = [line for line in after.splitlines() if re.search(r"\bstep \d", line)]
    assert len(step_lines) == 2
    assert all(re.search(r"\d+ in / \d+ out tokens", line) for line in step_lines), after
    assert [line for line in before.splitlines() if "step " in line] == step_lines


def test_a_state_made_while_another_thread_drives_the_chat_misses_nothing() -> None:
    """``display(chat)`` while a worker thread drives it: the state reads the record and
    subscribes to it in one step, so it hears every change after what it read, none twice.
    Repeated at random moments of a dense chat (many calls a response)."""
    import random
    import sys

    rng = random.Random(7)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # the threads take turns as often as they can
    try:
        _race_a_state_with_its_driver(rng)
    finally:
        sys.setswitchinterval(interval)


def _race_a_state_with_its_driver(rng: Any) -> None:
    import threading
    import time

    for _ in range(60):
        calls = [("lookup", {"key": f"k{i}"}) for i in range(12)]
        script = [call_tools(*calls), call_tools(*calls), reply("done")]
        chat = Chat(provider=ScriptedProvider(script), display=False).with_tools(lookup)
        driver = threading.Thread(target=chat.ask, args=("go",))
        driver.start()
        time.sleep(rng.uniform(0, 0.004))
        state = state_for(chat)
        driver.join(30)
        assert chat.status == "complete"
        assert _shown(state) == _shown(ChatState.from_chat(chat))


def test_what_a_kernel_keeps_for_a_view_made_later() -> None:
    """In a kernel every chat is followed quietly, not folded: a chat nobody shows (a
    batch's) has no display state, yet a view made later shows a failed tool's traceback
    and a decision made in code, as a view made at once would."""
    from nbagent.notebook._state import existing_state, follow_quietly

    script = [call_tools(("lookup", {"key": "boom"}), ("wire", {"amount": 5})), reply("ok")]
    chat = Chat(provider=ScriptedProvider(script), display=False).with_tools(lookup, wire)
    follow_quietly(chat)  # what install_auto_display does in a kernel
    chat.ask("go")
    chat.approve(chat.pending_approvals[0])  # in code
    chat.complete()
    assert existing_state(chat) is None
    entries = {e.r.tool: e for e in state_for(chat).entries if isinstance(e, CallEntry)}
    assert "no such key" in (entries["lookup"].traceback or "")
    assert "in lookup" in (entries["lookup"].traceback or "")  # from the tool's own frame
    assert entries["wire"].decided_in_code


def test_a_state_hears_what_was_folded_while_it_was_being_made(
    monkeypatch: Any,
) -> None:
    """The same guarantee, deterministically: the driver is let go the moment the state has
    read the record and before it subscribes. Made in one step with its subscription,
    the state cannot miss what the driver folds then (the driver waits for it)."""
    import threading
    import time

    gate = threading.Event()

    @tool
    def slow(key: str) -> str:
        """Wait for the test, then answer."""
        gate.wait(10)
        return f"value of {key}"

    script = [call_tools(("slow", {"key": "a"})), reply("done")]
    chat = Chat(provider=ScriptedProvider(script), display=False).with_tools(slow)
    driver = threading.Thread(target=chat.ask, args=("go",))
    driver.start()
    deadline = time.monotonic() + 10
    while not any(c.status == "running" for c in chat.tool_calls):
        assert time.monotonic() < deadline
        time.sleep(0.001)
    made = ChatState.from_chat

    def read_then_let_go(cls: Any, c: Any) -> ChatState:
        state = made.__func__(cls, c)  # type: ignore[attr-defined]
        gate.set()  # the tool returns; its result, the answer, the end are folded next
        time.sleep(0.2)
        return state

    monkeypatch.setattr(ChatState, "from_chat", classmethod(read_then_let_go))
    state = state_for(chat)
    driver.join(30)
    monkeypatch.undo()
    assert chat.status == "complete"
    assert _shown(state) == _shown(ChatState.from_chat(chat))


def test_showing_a_chat_asks_no_tool_source_for_its_tools(tmp_path: Path) -> None:
    """A chat shown with an MCP server it has not connected yet (a loaded chat whose server
    is down, a server added after the last step) is drawn from the tools it has: showing it
    neither starts the server nor waits on it (it waited the connect timeout per call)."""
    import sys

    from nbagent import MCPServer

    @tool
    def refund(order_id: int, currency: str = "EUR") -> str:
        """Refund an order."""
        return f"refunded {order_id}"

    started = tmp_path / "started"
    server = MCPServer.stdio(
        sys.executable,
        ["-c", f"open({str(started)!r}, 'w').close(); import time; time.sleep(60)"],
        connect_timeout=60,
    )
    script = [call_tools(("refund", {"order_id": 42}, "r1")), reply("Done.")]
    chat = Chat(provider=ScriptedProvider(script), display=False).with_tools(refund)
    chat.ask("Refund order 42")
    chat.with_tools(server)  # a source not connected: the next step would start it
    try:
        state = ChatState.from_chat(chat)
        (entry,) = [e for e in state.entries if isinstance(e, CallEntry)]
        assert entry.defaults == {"currency": "EUR"}  # the local tool's schema was read
        assert "currency</span> = &quot;EUR&quot;" in bundle_for(state)["text/html"]
        assert not started.exists()
    finally:
        chat.close()
