"""A write whose commit went through but whose answer was lost (the connection dropped during
``COMMIT``) is retried by the chat like any failed write: the store recognises its own rows
and its own claim, so the retry is not mistaken for another process driving the chat, and
nothing runs twice. On SQLite and on PostgreSQL."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from typing import Any

import pytest

from nbagent import Chat, StoreError, tool
from nbagent.store import StoreConflictWarning
from nbagent.testing import ScriptedProvider, call_tools, reply

sys.path.insert(0, str(Path(__file__).parent))
from _agent import Refund
from _helpers import store_ext

ran: list[str] = []


@tool
def lookup(key: str) -> str:
    """Look a key up.

    Args:
        key: The key.
    """
    ran.append(key)
    return f"value of {key}"


def _lose_answer(store: Any, method: str, when: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``store.<method>`` commits, then raises once as if the answer had been lost, for the
    first call whose entries hold an event of type ``when``."""
    real = getattr(store, method)
    armed = [True]

    def lossy(chat_id: str, *args: Any, **kwargs: Any) -> Any:
        result = real(chat_id, *args, **kwargs)
        entries = args[2] if method == "claim" and len(args) > 2 else args[0]
        if armed[0] and any(e.type == when for e in entries):
            armed[0] = False
            raise StoreError("the connection was lost while committing")
        return result

    monkeypatch.setattr(store, method, lossy)


def _same_as_stored(chat: Chat, backend: Any, tool: Any = lookup) -> None:
    with backend.open() as other:
        loaded = Chat.load(chat.id, store=other, tools=[tool])
        assert loaded.transcript == chat.transcript
        assert [(c.id, c.status) for c in loaded.tool_calls] == [
            (c.id, c.status) for c in chat.tool_calls
        ]
        seqs = [e.seq for e in other.iter_events(chat.id)]
        assert len(seqs) == len(set(seqs))
        loaded.close()


def test_a_result_written_twice_is_the_same_result(
    store: Any, backend: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran.clear()
    _lose_answer(store, "write", "tool_call_finished", monkeypatch)
    chat = Chat(model="demo", store=store).with_tools(lookup)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        chat.ask("lookup the key alpha")
        chat.ask("lookup the key beta")
    assert not [w for w in caught if issubclass(w.category, StoreConflictWarning)]
    assert store_ext(chat).detached is None
    assert chat.status == "complete" and ran == ["alpha", "beta"]
    chat.close()
    _same_as_stored(chat, backend)


def test_a_claim_committed_twice_is_still_this_processs_claim(
    store: Any, backend: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran.clear()
    _lose_answer(store, "claim", "model_request_finished", monkeypatch)
    chat = Chat(model="demo", store=store).with_tools(lookup)
    with pytest.raises(StoreError, match="was not run, and runs at the next step"):
        chat.ask("lookup the key alpha")
    assert ran == []
    with warnings.catch_warnings():
        warnings.simplefilter("error", StoreConflictWarning)
        chat.complete()  # claims again: the claim it already holds
    assert chat.status == "complete" and ran == ["alpha"]
    chat.close()
    _same_as_stored(chat, backend)


def test_a_decision_committed_with_its_answer_lost_is_this_chats_decision(
    store: Any, backend: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``chat.approve`` writes the decision to the store first; when that commit went
    through but its answer was lost, the chat finds its own decision there: it is
    approved here as in the store, never left awaiting approval in memory while the
    store holds it decided (a panel elsewhere would see no pending call, and the chat
    would show one)."""
    chat = Chat(model="demo", store=store).with_tools(Refund)
    chat.ask("Refund order 7")
    assert chat.status == "awaiting_approval"
    call = chat.pending_approvals[0]
    _lose_answer(store, "write", "approval_decided", monkeypatch)
    chat.approve(call)
    assert call.decision is not None and call.decision.verdict == "approved"
    assert store.pending_approvals(chat.id) == []
    chat.complete()
    assert chat.status == "complete"
    assert [c.status for c in chat.tool_calls] == ["ok"]
    chat.close()
    _same_as_stored(chat, backend, Refund)


@tool(external=True)
def sign_contract(party: str) -> str:
    """Have the contract signed by a person.

    Args:
        party: Who signs.
    """
    raise AssertionError("an external tool never runs here")


def test_an_answer_committed_with_its_answer_lost_is_this_chats_answer(
    store: Any, backend: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same for an answer to a pending input (``chat.answer``): the chat finds the
    answer it gave in the store and records it, instead of raising while the store
    holds the input answered."""
    provider = ScriptedProvider(
        [call_tools(("sign_contract", {"party": "ACME"}, "c1")), reply("signed")]
    )
    chat = Chat(provider=provider, display=False, store=store).with_tools(sign_contract)
    chat.ask("go")
    assert [i.id for i in chat.pending_inputs] == ["c1"]
    real = store.record_answer

    def lossy(*args: Any, **kwargs: Any) -> Any:
        monkeypatch.setattr(store, "record_answer", real)
        real(*args, **kwargs)
        raise StoreError("the connection was lost while committing")

    monkeypatch.setattr(store, "record_answer", lossy)
    chat.answer("c1", "signed by hand", by="alice")
    assert chat.pending_inputs == []
    assert store.pending_inputs(chat.id) == []
    assert chat.complete() is not None and chat.status == "complete"
    (answered,) = store.inputs(chat.id)
    assert (answered.data, answered.answered_by, answered.applied) == (
        "signed by hand",
        "alice",
        True,
    )
    chat.close()


def test_a_decision_whose_write_failed_is_not_recorded_and_the_chat_still_waits(
    store: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write that failed before committing (nothing reached the store) still raises:
    the read-back finds no decision, the call waits here and in the store alike."""
    chat = Chat(model="demo", store=store).with_tools(Refund)
    chat.ask("Refund order 7")
    call = chat.pending_approvals[0]

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise StoreError("the disk is full")

    monkeypatch.setattr(store, "write", broken)
    with pytest.raises(StoreError, match="the disk is full") as raised:
        chat.approve(call)
    assert f"the approval of refund({call.id}) could not be written to {store.location}" in str(
        raised.value
    )  # which decision, where: not the store's bare "the disk is full"
    assert f"Nothing is decided: refund({call.id}) still awaits approval" in str(raised.value)
    monkeypatch.undo()
    assert chat.pending_approvals == [call] and call.decision is None
    assert [c.id for c in store.pending_approvals(chat.id)] == [call.id]
    chat.close()


def test_an_answer_whose_write_failed_is_not_recorded_and_says_so(
    store: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    provider = ScriptedProvider(
        [call_tools(("sign_contract", {"party": "ACME"}, "c1")), reply("signed")]
    )
    chat = Chat(provider=provider, display=False, store=store).with_tools(sign_contract)
    chat.ask("go")

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise StoreError("the disk is full")

    monkeypatch.setattr(store, "record_answer", broken)
    with pytest.raises(StoreError) as raised:
        chat.answer("c1", "signed by hand", by="alice")
    text = str(raised.value)
    assert "the answer to external request c1 could not be written" in text
    assert "the disk is full" in text and "Nothing is answered: it still waits" in text
    monkeypatch.undo()
    assert [i.id for i in chat.pending_inputs] == ["c1"]
    assert [i.id for i in store.pending_inputs(chat.id)] == ["c1"]
    chat.answer("c1", "signed by hand", by="alice")
    assert chat.complete() is not None and chat.status == "complete"
    chat.close()
