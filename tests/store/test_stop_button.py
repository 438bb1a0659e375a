"""The stop button at any moment of a stored chat breaks nothing (a repeated race).

The notebook's stop button raises ``KeyboardInterrupt`` in the kernel's main thread,
wherever it is: inside a store write, between a chat recording an event and the store
hearing it. ``_stop_button.py`` presses it at a random moment of each of hundreds of
chats (approvals, denials, several turns), then runs the cell again. Found this way:

- an interrupt between a transaction's ``BEGIN`` and the ``try`` that would roll it back
  left it open: every later write failed ("cannot start a transaction within a
  transaction"), and the chat could neither go on nor close until a restart;
- an interrupt inside a subscriber (the store's write) stopped the event from reaching
  the others, and the events after it from reaching anyone: a denial the chat recorded
  stayed "awaiting approval" in the file, for a panel elsewhere to approve;
- an interrupt while the store encoded its queue dropped the queue: a whole turn never
  reached the file;
- an interrupt inside ``chat.deny()``, after the call took its verdict and before its
  status: the call stayed "awaiting approval" with a decision, nothing asked for it again
  and nothing ran it (the chat ended stuck; the file said denied). A decision is now made
  whole with the stop button held, and the interrupt comes after it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent


def _pressed(target: str, seed: int, runs: int) -> None:
    proc = subprocess.run(
        [sys.executable, str(HERE / "_stop_button.py"), target, str(runs), str(seed)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.splitlines()[-1])
    assert out["broken"] == [], "\n\n".join(out["broken"][:5])
    # the interrupt landed in the chat's work, not after it (delays span a whole chat)
    assert out["interrupted"] >= 0.9 * out["runs"], out


@pytest.mark.parametrize("seed", [1, 2])
def test_the_stop_button_at_any_moment_loses_nothing_and_runs_nothing_twice(
    tmp_path: Path, seed: int
) -> None:
    _pressed(str(tmp_path), seed, 150)


def test_the_same_on_postgresql(postgres_dsn: str) -> None:
    """Found here too: a transaction left open wedged the connection, and a read cut short
    in its query raised "another command is already in progress" instead of the
    interrupt (its COMMIT failed and replaced it)."""
    _pressed(postgres_dsn, 3, 60)


@pytest.mark.parametrize("verdict", ["approve", "deny"])
def test_the_stop_button_during_a_decision_comes_after_the_whole_decision(
    tmp_path: Path, verdict: str
) -> None:
    """Pressed as the store has just written the decision (an extension's hook after the
    store's presses it): the decision is made whole, here and in the file, and the
    interrupt comes after it; the chat then goes on from there."""
    import _thread
    import signal

    from nbagent import Chat, Extension, tool
    from nbagent.store import open_store
    from nbagent.testing import ScriptedProvider, call_tools, reply

    ran: list[int] = []

    @tool(requires_approval=True)
    def refund(order_id: int) -> str:
        """Refund an order."""
        ran.append(order_id)
        return f"refunded {order_id}"

    class PressStop(Extension):
        def decide(self, call, decision):  # type: ignore[no-untyped-def]
            _thread.interrupt_main()  # the store (extended first) has written it
            return None

    db = str(tmp_path / "chats.db")
    script = [call_tools(("refund", {"order_id": 7}, "r1")), reply("done")]
    chat = Chat(provider=ScriptedProvider(script), store=db, display=False).with_tools(refund)
    chat.extend(PressStop())
    chat.ask("refund 7")
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            getattr(chat, verdict)("r1")
    finally:
        signal.signal(signal.SIGINT, previous)
    call = chat.get_call("r1")
    status = "approved" if verdict == "approve" else "denied"
    assert call.status == status and call.decision is not None
    assert chat.complete().content == "done"  # type: ignore[union-attr]
    assert ran == ([7] if verdict == "approve" else [])
    chat.close()
    with open_store(db) as store:
        assert store.call("r1").status == ("ok" if verdict == "approve" else "denied")


def test_the_stop_button_while_a_response_is_applied_comes_after_it_is_recorded(
    tmp_path: Path,
) -> None:
    """Pressed while the chat takes in the model's answer (here: as a call's resolver is
    consulted, which happens as its calls are registered): the answer is applied whole and recorded,
    and the interrupt comes after. Landing between two of its changes, it left the chat
    holding a call "requested" that the file never got and nothing ran: the chat ended
    "ready" however often the cell ran again (found by the stop-button property, 2 runs in
    150, on a loaded machine)."""
    import _thread
    import signal

    from nbagent import Chat, ToolCall, tool
    from nbagent.store import open_store
    from nbagent.testing import ScriptedProvider, call_tools, reply

    ran: list[int] = []
    pressed: list[bool] = []

    def press_once(call: ToolCall) -> bool | None:
        if not pressed:
            pressed.append(True)
            _thread.interrupt_main()
        return None  # a person decides

    @tool(requires_approval=press_once)
    def refund(order_id: int) -> str:
        """Refund an order."""
        ran.append(order_id)
        return f"refunded {order_id}"

    db = str(tmp_path / "chats.db")
    provider = ScriptedProvider([call_tools(("refund", {"order_id": 7}, "r1")), reply("done")])
    chat = Chat(provider=provider, store=db, display=False).with_tools(refund)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            chat.ask("refund 7")
    finally:
        signal.signal(signal.SIGINT, previous)
    assert pressed
    assert [c.status for c in chat.tool_calls] == ["awaiting_approval"]  # taken in whole
    chat.approve("r1")
    assert chat.complete().content == "done"  # type: ignore[union-attr]
    assert ran == [7]
    mine = [(c.id, c.status, c.decision and c.decision.verdict) for c in chat.tool_calls]
    chat.close()
    with open_store(db) as store:  # the file holds what the chat did
        loaded = Chat.load(chat.id, store=store, tools=[refund], provider=ScriptedProvider([]))
        assert [
            (c.id, c.status, c.decision and c.decision.verdict) for c in loaded.tool_calls
        ] == mine
        assert loaded.transcript == chat.transcript
        loaded.close()


@pytest.mark.parametrize("stored", [True, False])
def test_the_stop_button_as_a_result_is_read_records_the_call_ended(
    tmp_path: Path, stored: bool
) -> None:
    """Pressed after the tool returned, while its value is turned into text (a slow
    ``__str__``, a big frame): the call stayed "running" for good, the chat could not go on
    (``complete()`` returned at once, nothing ran) and the file, reloaded, said in doubt. It
    ran, so it ends ``ok`` with a result saying its value was lost and not to run it again,
    the interrupt comes after, and the chat goes on; the tool ran once."""
    import _thread
    import signal

    from nbagent import Chat, tool
    from nbagent.store import open_store
    from nbagent.testing import ScriptedProvider, call_tools, reply

    ran: list[str] = []

    class Slow:
        def __str__(self) -> str:
            if len(ran) == 1:
                ran.append("read")
                _thread.interrupt_main()
                for _ in range(10_000):  # the interrupt lands in here
                    pass
            return "Oslo: found"

    @tool
    def lookup(city: str) -> object:
        """Look a city up."""
        ran.append(city)
        return Slow()

    db = str(tmp_path / "chats.db") if stored else None
    script = [call_tools(("lookup", {"city": "Oslo"}, "c1")), reply("done")]
    chat = Chat(provider=ScriptedProvider(script), store=db, display=False).with_tools(lookup)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            chat.ask("look Oslo up")
    finally:
        signal.signal(signal.SIGINT, previous)
    call = chat.get_call("c1")
    assert call.status == "ok" and call.result is not None
    assert "result was lost" in call.result.content and "Do not run it again" in call.result.content
    assert chat.complete().content == "done"  # type: ignore[union-attr]
    assert ran == ["Oslo", "read"]  # the tool ran once
    chat.close()
    if db is not None:
        with open_store(db) as store:
            assert store.call("c1").status == "ok"
