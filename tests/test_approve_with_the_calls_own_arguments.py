"""Approving with arguments equal to the call's own is a plain approval: nothing was edited, so
no edit is recorded, shown ("approved with edited arguments") or told to the model ("[The user
edited the arguments before approving ...]"). A real edit still is, however small (a number
written as a float, a boolean for a number: the tool would get another value)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nbagent import Chat, DecisionError, Tool
from nbagent.notebook._fallback import chat_mimebundle
from nbagent.store import SQLiteStore
from nbagent.testing import ScriptedProvider, call_tools, reply

RAN: list[dict[str, Any]] = []


class Refund(Tool):
    """Refund an order."""

    requires_approval = True

    def execute(self, order_id: int, note: str = "", meta: dict[str, Any] | None = None) -> str:
        RAN.append({"order_id": order_id, "note": note, "meta": meta})
        return "refunded"


def parked(arguments: dict[str, Any], store: Any = None) -> Chat:
    RAN.clear()
    chat = Chat(
        provider=ScriptedProvider([call_tools(("refund", arguments, "c1")), reply("done")]),
        display=False,
        store=store,
    ).with_tools(Refund)
    chat.ask("refund it")
    assert [c.id for c in chat.pending_approvals] == ["c1"]
    return chat


def tool_message(chat: Chat) -> str:
    (m,) = [m for m in chat.transcript if getattr(m, "role", "") == "tool"]
    return str(m.content)


def assert_plain_approval(chat: Chat) -> None:
    call = chat.get_call("c1")
    assert call.decision is not None and call.decision.verdict == "approved"
    assert call.decision.arguments is None
    assert chat.record.get("c1").edited_arguments is None
    assert chat.log["edited_arguments"].tolist() == [None]
    assert "edited" not in tool_message(chat)
    assert "edited" not in chat_mimebundle(chat)["text/plain"]


def test_approve_with_the_models_own_arguments_is_a_plain_approval() -> None:
    chat = parked({"order_id": 4})
    chat.approve("c1", arguments={"order_id": 4})
    chat.complete()
    assert RAN == [{"order_id": 4, "note": "", "meta": None}]
    assert tool_message(chat) == "refunded"
    assert_plain_approval(chat)


def test_key_order_is_no_edit_and_a_plain_approve_after_it_is_the_same_decision() -> None:
    chat = parked({"order_id": 4, "note": "late", "meta": {"a": 1, "b": [1, 2]}})
    chat.approve("c1", arguments={"meta": {"b": [1, 2], "a": 1}, "note": "late", "order_id": 4})
    chat.approve("c1")  # the same decision again: a no-op, not "already approved with edits"
    chat.approve("c1", arguments={"order_id": 4, "note": "late", "meta": {"a": 1, "b": [1, 2]}})
    with pytest.raises(DecisionError, match="already approved"):
        chat.approve("c1", arguments={"order_id": 5, "note": "late", "meta": {"a": 1, "b": [1, 2]}})
    chat.complete()
    assert_plain_approval(chat)


def test_a_real_edit_is_still_recorded_and_told() -> None:
    chat = parked({"order_id": 4})
    chat.approve("c1", arguments={"order_id": 5})
    chat.complete()
    assert RAN == [{"order_id": 5, "note": "", "meta": None}]
    assert chat.get_call("c1").decision.arguments == {"order_id": 5}
    assert tool_message(chat).startswith("[The user edited the arguments before approving")
    assert "approved with edited arguments" in chat_mimebundle(chat)["text/plain"]


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.floats(-3, 3, allow_nan=False)
    | st.text(max_size=3),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=2), inner, max_size=3)
    ),
    max_leaves=6,
)
OBJECTS = st.dictionaries(st.text(max_size=2), JSON, max_size=3)


@settings(max_examples=60, deadline=None)
@given(own=OBJECTS, other=st.none() | OBJECTS)
def test_an_approval_is_an_edit_exactly_when_the_json_differs(
    own: dict[str, Any], other: Any
) -> None:
    """1 and 1.0, 1 and True, 0 and False are equal in Python and other values in JSON (and to
    the tool): an edit. The same JSON (key order aside) is no edit."""
    model = {"order_id": 4, "meta": own}
    for given_meta in (own, json.loads(json.dumps(own)), other):
        chat = parked(model)
        chat.approve("c1", arguments={"order_id": 4, "meta": given_meta})
        same = json.dumps(given_meta, sort_keys=True) == json.dumps(own, sort_keys=True)
        decided = chat.get_call("c1").decision
        assert decided is not None
        assert (decided.arguments is None) is same
        if not same:
            assert decided.arguments == {"order_id": 4, "meta": given_meta}
        chat.close()


def test_store_approve_with_the_calls_own_arguments_reaches_the_chat_as_a_plain_approval(
    tmp_path: Path,
) -> None:
    db = tmp_path / "agent.db"
    chat = parked({"order_id": 4}, store=db)
    with SQLiteStore(db) as other:  # another process's decision
        other.approve("c1", arguments={"order_id": 4}, by="alice")
    chat.complete()
    assert RAN == [{"order_id": 4, "note": "", "meta": None}]
    assert chat.get_call("c1").decision.by == "alice"
    assert_plain_approval(chat)
    loaded = Chat.load(chat.id, store=db, tools=[Refund], provider=ScriptedProvider([]))
    assert loaded.get_call("c1").decision.arguments is None
    chat.close()
    loaded.close()
