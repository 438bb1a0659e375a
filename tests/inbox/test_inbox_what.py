"""What approve/deny are given names exactly the calls they decide: nothing (None, an empty
filter) is refused rather than read as "everything", and a call object decides the call of
its own chat, even when a fork shares its call ids."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nbagent
from nbagent import Chat, StoreError, Tool
from nbagent.inbox import Filter
from nbagent.store import SQLiteStore
from nbagent.testing import ScriptedProvider, call_tools, reply

RAN: list[int] = []


class Refund(Tool):
    """Refund an order."""

    requires_approval = True

    def execute(self, order_id: int) -> str:
        RAN.append(order_id)
        return f"refunded {order_id}"


def parked(order_id: int, **kw: Any) -> Chat:
    script = [call_tools(("refund", {"order_id": order_id}, "call_1")), reply("done")]
    chat = Chat(provider=ScriptedProvider(script), display=False, **kw).with_tools(Refund)
    chat.ask(f"refund {order_id}")
    assert chat.status == "awaiting_approval"
    return chat


@pytest.fixture
def orders() -> list[Chat]:
    RAN.clear()
    return [parked(i) for i in (41, 42, 43)]


# ------------------------------------------------------------ nothing is not all
def test_approve_or_deny_of_none_decides_nothing(orders: list[Chat]) -> None:
    box = nbagent.inbox(orders, continue_chats=False)
    found = next((r for _, r in box.pending.iterrows() if r["arguments"]["order_id"] == 9), None)
    for decide in (box.approve, box.deny):
        with pytest.raises(TypeError, match="None, which names no call"):
            decide(found)
    assert all(c.status == "awaiting_approval" and c.pending_approvals for c in orders)
    assert len(box.preview(None)) == 3  # preview still lists what the filter covers


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    spec=st.fixed_dictionaries(
        {},
        optional={
            "text": st.sampled_from(["", " ", "\t\n"]),
            "where": st.just({}),
            "tool": st.none(),
            "server": st.none(),
        },
    )
)
def test_a_dict_filter_asking_for_nothing_decides_nothing(
    orders: list[Chat], spec: dict[str, Any]
) -> None:
    """Any dict filter that asks for nothing (``{}``, ``{"text": ""}``, ``{"where": {}}``...)
    would match every call: refused, whatever the verdict."""
    box = nbagent.inbox(orders, continue_chats=False)
    for decide in (box.approve, box.deny):
        with pytest.raises(ValueError, match="asks for nothing"):
            decide(spec)
    assert all(c.pending_approvals for c in orders)
    assert len(box.preview(spec)) == 3


def test_everything_is_asked_for_by_name(orders: list[Chat]) -> None:
    box = nbagent.inbox(orders, continue_chats=False)
    box.filter(where={"order_id": 42})
    assert box.preview("all")["arguments"].tolist() == [{"order_id": 42}]
    out = box.approve("all")  # what the current filter covers
    assert out["outcome"].tolist() == ["approved"]
    assert [bool(c.pending_approvals) for c in orders] == [True, False, True]
    out = box.deny(Filter(), reason="not today")  # every pending call, whatever the filter
    assert out["outcome"].tolist() == ["denied", "denied"]
    assert not any(c.pending_approvals for c in orders)


# --------------------------------------------------------- a call's own chat
def test_a_call_object_decides_the_call_of_its_own_chat(tmp_path: Path) -> None:
    """A fork copies its parent's pending call with the same id: ``approve(call)`` /
    ``deny(call)`` of either chat's ``ToolCall`` decides that chat's call, live or stored."""
    RAN.clear()
    path = tmp_path / "chats.db"
    parent = parked(7, store=path)
    fork = parent.fork()
    assert fork.pending_approvals[0].id == parent.pending_approvals[0].id
    stored = nbagent.inbox(path)
    try:
        out = stored.deny(fork.pending_approvals[0], reason="fork only")
        assert out[["chat_id", "outcome"]].values.tolist() == [[fork.id, "denied"]]
        store = SQLiteStore(path)
        call = parent.pending_approvals[0]
        assert store.call(call.id, chat_id=parent.id).decision is None  # the parent waits
        store.close()
    finally:
        stored.close()

    live = nbagent.inbox([parent, fork], continue_chats=False)
    out = live.approve(parent.pending_approvals[0])
    assert out[["chat_id", "outcome"]].values.tolist() == [[parent.id, "approved"]]
    assert parent.tool_calls[0].decision.verdict == "approved"
    assert fork.tool_calls[0].decision.verdict == "denied"  # what the stored inbox recorded
    parent.close()
    fork.close()


# --------------------------------------------------------------- a mistyped path
def test_a_path_where_no_store_is_is_refused_and_not_created(tmp_path: Path) -> None:
    """``nbagent.inbox("agnet.db")`` (a typo) named no store: it made an empty one and said
    nothing waits, while the calls waited in the real one."""
    real = tmp_path / "agent.db"
    with parked(5, store=real) as chat:
        chat_id = chat.id
    for typo in (tmp_path / "agnet.db", str(tmp_path / "agnet.db"), [real, tmp_path / "x.db"]):
        with pytest.raises(StoreError, match=r"no store at .*(agnet|x)\.db: the file does not"):
            nbagent.inbox(typo)
    assert not (tmp_path / "agnet.db").exists() and not (tmp_path / "x.db").exists()
    with pytest.raises(StoreError, match="is a directory"):
        nbagent.inbox(tmp_path)
    with nbagent.inbox(str(real)) as box:
        assert box.pending["chat_id"].tolist() == [chat_id]


@pytest.mark.parametrize("by", ["resolver", "rule", "policy:desk", "policy:always_allow:x"])
def test_an_inbox_cannot_be_named_as_a_chats_own_decider(tmp_path: Any, by: str) -> None:
    # a person's denial named "policy:desk" read as a policy's, which a click may overrule
    with pytest.raises(ValueError, match="names nbagent's own decider"):
        nbagent.inbox(Chat(model="demo", display=False), by=by)
    assert nbagent.inbox(Chat(model="demo", display=False), by="policy-desk").by == "policy-desk"
