"""A recorded call's arguments are read-only: the record, the log, the store and the model
always read what the tool ran with (issue: changed in place, they parted ways)."""

from __future__ import annotations

import copy
import json
import pickle
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import nbagent
from nbagent import Chat, Tool, ToolCall, tool
from nbagent._frozen import FrozenDict, FrozenList, frozen, thawed
from nbagent.testing import ScriptedProvider, call_tools, reply

ran: list[Any] = []


class IssueRefund(Tool):
    """Refunds an order."""

    requires_approval = True

    def execute(self, order_id: int) -> str:
        ran.append(order_id)
        return f"refunded {order_id}"


@tool
def tally(items: list[dict[str, Any]], extra: Any = None) -> str:
    """Sums the items (and changes its own inputs, as a tool may)."""
    items.append({"n": 100})
    if isinstance(extra, dict):
        extra["seen"] = True
    ran.append(sum(i["n"] for i in items))
    return "ok"


@pytest.fixture(autouse=True)
def _clear() -> None:
    ran.clear()


def _chat(*script: Any, store: Any = None) -> Chat:
    return Chat(provider=ScriptedProvider(list(script)), display=False, store=store).with_tools(
        IssueRefund, tally
    )


@pytest.mark.parametrize("how", ["in place", "replaced whole"])
def test_a_callback_changing_a_calls_arguments_is_refused_and_nothing_runs_unrecorded(
    how: str,
) -> None:
    chat = _chat(call_tools(("issue_refund", {"order_id": 42}, "r")), reply("done"))

    def bump(call: Any) -> None:
        if how == "in place":
            call.arguments["order_id"] = 666
        else:
            call.arguments = {"order_id": 666}

    chat.before_tool_call(bump)
    chat.ask("refund 42")
    chat.approve(chat.pending_approvals[0])
    chat.complete()
    assert ran == []  # neither 42 behind the record's back nor 666
    (call,) = chat.tool_calls
    assert call.arguments == {"order_id": 42} and call.status == "skipped"
    assert "read-only" in call.result.content  # type: ignore[union-attr]
    assert chat.log["arguments"].tolist() == [{"order_id": 42}]


def test_a_pending_call_changed_in_place_is_refused_and_an_edit_goes_through_approve(
    tmp_path: Any,
) -> None:
    store = nbagent.open_store(tmp_path / "s.db")
    chat = _chat(call_tools(("issue_refund", {"order_id": 42}, "r")), reply("done"), store=store)
    chat.ask("refund 42")
    pending = chat.pending_approvals[0]
    for change in (
        lambda a: a.__setitem__("order_id", 7),
        lambda a: a.pop("order_id"),
        lambda a: a.update(order_id=7),
        lambda a: a.clear(),
        lambda a: a.setdefault("x", 1),
    ):
        with pytest.raises(TypeError, match=r"chat\.approve\(call, arguments="):
            change(pending.arguments)
    with pytest.raises(TypeError, match=r"chat\.approve\(call, arguments="):
        pending.arguments = {"order_id": 7}
    assert pending.arguments == {"order_id": 42}
    edit = {"order_id": 7}
    chat.approve(pending, arguments=edit)
    edit["order_id"] = 8  # the caller's dict is theirs: the decision kept a copy
    chat.complete()
    assert ran == [7]
    (call,) = chat.tool_calls
    assert call.arguments == {"order_id": 42} and call.decision is not None
    assert call.decision.arguments == {"order_id": 7}
    with pytest.raises(TypeError):
        call.decision.arguments["order_id"] = 9
    again = Chat.load(chat.id, store=store, provider=ScriptedProvider([]))
    with pytest.raises(TypeError):
        again.tool_calls[0].arguments["order_id"] = 1
    with pytest.raises(TypeError):
        again.tool_calls[0].arguments = {}
    unrecorded = ToolCall(id="c1", name="issue_refund", arguments={"order_id": 1})
    unrecorded.arguments = {"order_id": 2}  # a call no chat has recorded is the caller's own
    assert unrecorded.arguments == {"order_id": 2}


def test_a_tool_changing_its_own_inputs_changes_only_its_copy() -> None:
    args = {"items": [{"n": 1}, {"n": 2}], "extra": {"k": [1]}}
    chat = _chat(call_tools(("tally", args, "t")), reply("done"))
    chat.ask("sum")
    assert ran == [103]  # the tool could append to its list and set a key of its dict
    (call,) = chat.tool_calls
    assert call.arguments == {"items": [{"n": 1}, {"n": 2}], "extra": {"k": [1]}}
    assert chat.log["arguments"].tolist() == [args]


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


def _plain(value: Any) -> bool:
    if isinstance(value, dict):
        return type(value) is dict and all(_plain(v) for v in value.values())
    if isinstance(value, list):
        return type(value) is list and all(_plain(v) for v in value)
    return True


def _read_only(value: Any) -> bool:
    if isinstance(value, dict):
        return isinstance(value, FrozenDict) and all(_read_only(v) for v in value.values())
    if isinstance(value, list):
        return isinstance(value, FrozenList) and all(_read_only(v) for v in value)
    return True


@given(JSON)
def test_frozen_values_read_as_the_same_json_and_copies_are_free_to_change(value: Any) -> None:
    f = frozen(value)
    assert f == value and _read_only(f)
    assert json.dumps(f, sort_keys=True) == json.dumps(value, sort_keys=True)
    back = pickle.loads(pickle.dumps(f))
    assert back == value and _read_only(back)
    for copied in (thawed(f), copy.deepcopy(f)):
        assert copied == value and _plain(copied)
    assert frozen(f) is f


def test_every_way_of_changing_a_list_in_place_is_refused() -> None:
    f = frozen([3, 1, 2])
    for change in (
        lambda a: a.append(1),
        lambda a: a.extend([1]),
        lambda a: a.insert(0, 1),
        lambda a: a.pop(),
        lambda a: a.remove(1),
        lambda a: a.clear(),
        lambda a: a.sort(),
        lambda a: a.reverse(),
        lambda a: a.__setitem__(0, 9),
        lambda a: a.__delitem__(0),
        lambda a: a.__iadd__([1]),
        lambda a: a.__imul__(2),
    ):
        with pytest.raises(TypeError, match="read-only"):
            change(f)
    assert f == [3, 1, 2]
    mine = copy.copy(f)
    mine.append(4)
    assert (mine, f) == ([3, 1, 2, 4], [3, 1, 2]) and type(mine) is list
