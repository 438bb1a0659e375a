"""A row continued from the store goes on as the chat its ``make_chat`` made: the
callbacks, subscriptions, extensions and ``always_allow`` predicates it was set up with in
code (no store keeps code), and the settings ``make_chat`` gives now (a budget raised for
the rerun), whether it continues on its live chat in this process or loaded from the
store (a new process, a Ray worker: ``tests/batch/ray/test_ray_continue_as_made.py``).

Before, a loaded row lost all of that: an extension vetoing a refund through ``claim()``
no longer vetoed it (the refund ran), an audit subscriber heard nothing, a conditional
``always_allow`` approved nothing (the row parked again, with a warning), and a row that
spent its budget never continued though its error said a rerun would (the stored budget
won over the raised one).
"""

from __future__ import annotations

import gc
import warnings
from pathlib import Path
from typing import Any

import pytest
from _batch_setup import first_user_text, tool_messages

import nbagent
from nbagent import Chat, Extension, tool
from nbagent._events import ToolCallStarted
from nbagent.batch._run import get_run
from nbagent.providers import OpenAIProvider
from nbagent.store import SQLiteStore
from nbagent.testing import FakeLLMServer, FakeToolCall, ScriptedProvider, Turn, call_tools, reply

NOTES: list[str] = []


def note(*what: str) -> None:
    NOTES.append(" ".join(what))


@tool(requires_approval=True)
def refund(item: str) -> str:
    """Refund an item.

    Args:
        item: The item.
    """
    return f"refunded {item}"


def _script(request: Any) -> Any:
    """Asks to refund the prompt's item; for g2 then a second refund its ``always_allow``
    predicate approves; then answers. Read off the transcript: a loaded chat goes on."""
    prompt = next(m.content for m in request.messages if getattr(m, "role", None) == "user")
    item = prompt.rsplit(" ", 1)[-1]
    results = sum(1 for m in request.messages if getattr(m, "role", None) == "tool")
    if results == 0:
        return call_tools(("refund", {"item": item}))
    if results == 1 and item == "g2":
        return call_tools(("refund", {"item": "g2-auto"}))
    return reply(f"finished {item}")


class Veto(Extension):
    """Refuses to run g1's refund here (an extension's at-most-once claim says no)."""

    def claim(self, call: Any) -> bool:
        ok = call.arguments["item"] != "g1"
        note("claim", "ok" if ok else "VETO", call.arguments["item"])
        return ok


def make_chat(row: dict[str, Any]) -> Chat:
    chat = Chat(provider=ScriptedProvider([_script], repeat_last=True)).with_tools(refund)
    chat.on(ToolCallStarted, lambda e: note("audit", e.call.arguments["item"]))
    chat.before_tool_call(lambda c: note("before", c.arguments["item"]))
    chat.after_tool_result(lambda r: note("after", r.call.arguments["item"]))
    chat.extend(Veto())
    chat.always_allow(refund, when=lambda c: c.arguments["item"].endswith("-auto"))
    return chat


ROWS = [{"item": k} for k in ("g0", "g1", "g2")]
RAN = ["claim ok", "before", "audit", "after"]
EXPECTED = {"g0": RAN, "g1": ["claim VETO"], "g2": RAN, "g2-auto": RAN}
"""The second run's notes by item, in order: each hook once, g1's refund vetoed, g2-auto's
approved by the predicate (the rows run at once: their notes interleave)."""


def _by_item(notes: list[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in notes:
        what, item = line.rsplit(" ", 1)
        out.setdefault(item, []).append(what)
    return out


def _run(db: Path) -> Any:
    return nbagent.batch(
        ROWS,
        make_chat,
        prompt="Work on {item}",
        key="item",
        store=str(db),
        name="as-made",
        progress=False,
        wait_for_decisions=False,
    )


@pytest.mark.parametrize("where", ["live", "loaded"])
def test_a_continued_row_keeps_what_make_chat_set_up(tmp_path: Path, where: str) -> None:
    db = tmp_path / "b.db"
    first = _run(db)
    assert list(first["status"]) == ["awaiting_approval"] * 3
    if where == "loaded":  # as in a new process: no live chat of the batch left here
        del first
        gc.collect()
        assert get_run("as-made") is None
    with SQLiteStore(db) as store:  # decided elsewhere, while no batch runs
        for call in store.pending_approvals():
            store.approve(call, by="ops")
    NOTES.clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        second = _run(db)
    assert _by_item(NOTES) == EXPECTED
    assert not [w for w in caught if "predicate" in str(w.message)], [
        str(w.message) for w in caught
    ]
    assert list(second["status"][[0, 2]]) == ["done", "done"]
    assert second.loc[2, "calls"] == 2  # g2-auto approved by the predicate, never parked
    with SQLiteStore(db) as store:
        ran = {
            c.arguments["item"]: c.status
            for chat_id in second["chat_id"]
            for c in store.load(chat_id).calls
        }
    assert ran["g0"] == ran["g2"] == ran["g2-auto"] == "ok"
    assert ran["g1"] != "ok"  # vetoed: it never ran


def test_a_loaded_row_has_each_wing_once(tmp_path: Path) -> None:
    """What every chat gets as it is made (the batch's store, a process-wide extension) is
    the loaded chat's own; only what make_chat added moves over, once."""
    from nbagent._extension import auto_extend, stop_auto_extend

    class Everywhere(Extension):
        pass

    seen: list[list[str]] = []

    class Looks(Extension):
        """Says, as a call is claimed, which extensions the chat running it has."""

        def attach(self, host: Any) -> None:
            self.host = host

        def claim(self, call: Any) -> bool:
            seen.append([type(e).__name__ for e in self.host.chat.extensions])
            return True

    def factory(chat: Any) -> Extension:
        return Everywhere()

    def make(row: dict[str, Any]) -> Chat:
        return make_chat(row).extend(Looks())

    db = tmp_path / "b.db"
    auto_extend(factory)
    try:
        first = nbagent.batch(
            ROWS[:1], make, prompt="Work on {item}", key="item", store=str(db), progress=False
        )
        assert list(first["status"]) == ["awaiting_approval"]
        del first
        gc.collect()
        with SQLiteStore(db) as store:
            for call in store.pending_approvals():
                store.approve(call, by="ops")
        second = nbagent.batch(
            ROWS[:1], make, prompt="Work on {item}", key="item", store=str(db), progress=False
        )
    finally:
        stop_auto_extend(factory)
    assert list(second["status"]) == ["done"]
    assert seen == [["Everywhere", "Veto", "Looks", "StoreExtension"]]


class Wired(Chat):
    """A chat class that sets itself up as it is made (as the notebook view does each chat
    in a kernel): the loaded chat, of this class too, has that of its own, never twice."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.on(ToolCallStarted, lambda e: note("wired", e.call.arguments["item"]))
        self.after_tool_result(self._done)

    def _done(self, result: Any) -> None:
        note("wired-after", result.call.arguments["item"])


def test_what_a_chat_class_sets_up_itself_is_not_doubled(tmp_path: Path) -> None:
    def make(row: dict[str, Any]) -> Chat:
        chat = Wired(provider=ScriptedProvider([_script], repeat_last=True)).with_tools(refund)
        chat.on(ToolCallStarted, lambda e: note("audit", e.call.arguments["item"]))
        return chat

    db = tmp_path / "b.db"
    first = nbagent.batch(
        ROWS[:1], make, prompt="Work on {item}", key="item", store=str(db), progress=False
    )
    del first
    gc.collect()
    with SQLiteStore(db) as store:
        for call in store.pending_approvals():
            store.approve(call, by="ops")
    NOTES.clear()
    second = nbagent.batch(
        ROWS[:1], make, prompt="Work on {item}", key="item", store=str(db), progress=False
    )
    assert list(second["status"]) == ["done"]
    assert _by_item(NOTES) == {"g0": ["wired", "audit", "wired-after"]}


# ------------------------------------------------------------------------- budgets
def _costly(request: Any) -> Any:
    """Tool rounds at 2,000 tokens each ($0.002 on gpt-4.1-mini), an answer after 8."""
    if tool_messages(request) < 8:
        n = tool_messages(request)
        call = FakeToolCall("lookup", {"item": f"{first_user_text(request)}#{n}"})
        return Turn(tool_calls=[call], usage={"input_tokens": 1000, "output_tokens": 1000})
    return Turn(text="all looked up")


@tool
def lookup(item: str) -> str:
    """Look an item up.

    Args:
        item: The item.
    """
    return f"{item}: found"


@pytest.mark.parametrize("where", ["live", "loaded"])
@pytest.mark.parametrize("budget", ["cost", "steps"])
def test_a_budget_raised_in_make_chat_continues_the_row(
    tmp_path: Path, where: str, budget: str
) -> None:
    """The row stops on its budget; rerun as it is, a spent cost budget stops it again
    before any request (and its error says so); raised in make_chat, the rerun finishes it."""
    db = tmp_path / "b.db"
    small, large = ({"max_cost_usd": 0.005}, {"max_cost_usd": 1.0})
    if budget == "steps":
        small, large = {"max_steps": 3}, {"max_steps": 100}
    with FakeLLMServer(handler=_costly, strict=True) as server:

        def factory(settings: dict[str, Any]) -> Any:
            def make() -> Chat:
                provider = OpenAIProvider(
                    "gpt-4.1-mini", base_url=server.openai_base_url, api_key="sk-x"
                )
                return Chat(provider=provider, **settings).with_tools(lookup)

            return make

        def run(settings: dict[str, Any]) -> Any:
            result = nbagent.batch(
                ["Look it all up"],
                factory(settings),
                store=str(db),
                name="budget",
                progress=False,
            )
            row = {c: result.loc[0, c] for c in ("status", "error", "error_type", "reply", "calls")}
            if where == "loaded":  # the next run loads the chat, as a new process does
                del result
                gc.collect()
                assert get_run("budget") is None
            return row

        first = run(small)
        assert first["error_type"] == "budget_exhausted"
        if budget == "cost":
            assert "raise max_cost_usd in make_chat" in first["error"]
            before = len(server.requests)
            again = run(small)  # as it is: stops again, asking nothing, and says so
            assert len(server.requests) == before
            assert again["error"] == first["error"]
        else:
            assert "max_steps=3" in first["error"]
            assert "continues it for max_steps more" in first["error"]
        last = run(large)
    assert last["status"] == "done", last["error"]
    assert last["reply"] == "all looked up"
    assert last["calls"] == 8


# ------------------------------------------------- an extension that hooks itself up
class SelfWired(Extension):
    """Hooks itself up when attached, through the chat (an approval guard, an audit):
    a loaded row's chat attaches it again, so what it registered on ``make_chat``'s chat
    must not move over as well (it did: each ran twice on a loaded row, once live)."""

    def __init__(self, tag: str = "") -> None:
        self.tag = f" {tag}" if tag else ""

    def attach(self, host: Any) -> None:
        host.chat.on(ToolCallStarted, self.started)
        host.chat.before_tool_call(self.before)

    def started(self, e: Any) -> None:
        note(f"audit{self.tag}", e.call.arguments["item"])

    def before(self, call: Any) -> None:
        note(f"before{self.tag}", call.arguments["item"])

    def heard(self, e: Any) -> None:
        note(f"user{self.tag}", e.call.arguments["item"])


def _self_wired(make: Any, tmp_path: Path, where: str) -> Any:
    """Runs one row that parks, approves it from the store, reruns: the rerun's notes."""
    db = tmp_path / "b.db"

    def run() -> Any:
        return nbagent.batch(
            ROWS[:1],
            make,
            prompt="Work on {item}",
            key="item",
            store=str(db),
            name="self-wired",
            progress=False,
            wait_for_decisions=False,
        )

    first = run()
    assert list(first["status"]) == ["awaiting_approval"]
    if where == "loaded":
        del first
        gc.collect()
        assert get_run("self-wired") is None
    with SQLiteStore(db) as store:
        for call in store.pending_approvals():
            store.approve(call, by="ops")
    NOTES.clear()
    second = run()
    assert list(second["status"]) == ["done"], second.loc[0, "error"]
    return _by_item(NOTES)


@pytest.mark.parametrize("where", ["live", "loaded"])
def test_an_extension_that_hooks_itself_up_in_attach_runs_once(tmp_path: Path, where: str) -> None:
    def make(row: dict[str, Any]) -> Chat:
        chat = Chat(provider=ScriptedProvider([_script], repeat_last=True)).with_tools(refund)
        return chat.extend(SelfWired())

    assert _self_wired(make, tmp_path, where) == {"g0": ["before", "audit"]}


@pytest.mark.parametrize("where", ["live", "loaded"])
def test_what_the_user_gave_an_extensions_methods_moves_once(tmp_path: Path, where: str) -> None:
    """Its bound methods registered by make_chat (not by its attach) are make_chat's setup:
    they move, once each, beside what the new attach registers (one its attach registers
    too runs twice, as on the chat make_chat made)."""

    def make(row: dict[str, Any]) -> Chat:
        chat = Chat(provider=ScriptedProvider([_script], repeat_last=True)).with_tools(refund)
        wing = SelfWired()
        chat.on(ToolCallStarted, wing.heard)
        chat.extend(wing)
        chat.before_tool_call(wing.before)
        return chat

    notes = _self_wired(make, tmp_path, where)
    assert sorted(notes["g0"]) == ["audit", "before", "before", "user"]


@pytest.mark.parametrize("where", ["live", "loaded"])
def test_make_chats_extension_of_a_process_wide_type_is_kept(tmp_path: Path, where: str) -> None:
    """A process-wide extension is the loaded chat's own; one of the same type that
    make_chat adds, configured otherwise, is make_chat's and moves (it was dropped)."""
    from nbagent._extension import auto_extend, stop_auto_extend

    def factory(chat: Any) -> Extension:
        return SelfWired("everywhere")

    def make(row: dict[str, Any]) -> Chat:
        chat = Chat(provider=ScriptedProvider([_script], repeat_last=True)).with_tools(refund)
        return chat.extend(SelfWired("mine"))

    auto_extend(factory)
    try:
        notes = _self_wired(make, tmp_path, where)
    finally:
        stop_auto_extend(factory)
    assert notes == {"g0": ["before everywhere", "before mine", "audit everywhere", "audit mine"]}
