"""The store keeps reasoning exactly, so a resumed chat continues a thinking model's tool round."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from _setup import KEY, provider, server

import nbagent
from nbagent import AssistantToolCallMessage, Reasoning
from nbagent.store import SQLiteStore
from nbagent.testing import FakeToolCall, Turn


class Refund(nbagent.Tool):
    """Refund an order."""

    name = "refund"
    requires_approval = True

    def execute(self, order_id: int) -> str:
        """Refund.

        Args:
            order_id: The order to refund.
        """
        return f"refunded {order_id}"


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("kind", ["anthropic", "responses"])
def test_a_resumed_chat_continues_the_thinking_round(
    kind: str, stream: bool, tmp_path: Path
) -> None:
    db = tmp_path / "chats.db"
    with server() as fake:
        fake.script(
            [
                Turn(reasoning="Refund 7.", tool_calls=[FakeToolCall("refund", {"order_id": 7})]),
                Turn(reasoning="Done, tell them.", text="Refunded."),
            ]
        )
        first = nbagent.Chat(
            provider=provider(kind, fake),
            store=db,
            stream=stream,
            reasoning=2048 if kind == "anthropic" else "low",
        ).with_tools(Refund)
        first.ask("Refund order 7")
        assert first.status == "awaiting_approval"  # parked: the call waits for a decision
        (kept,) = next(
            m for m in first.transcript if isinstance(m, AssistantToolCallMessage)
        ).reasoning
        first.close()

        resumed = nbagent.Chat.load(
            first.id, store=db, tools=[Refund], provider=provider(kind, fake)
        )
        assert resumed.reasoning == first.reasoning  # the setting is stored too
        (loaded,) = next(
            m for m in resumed.transcript if isinstance(m, AssistantToolCallMessage)
        ).reasoning
        assert isinstance(loaded, Reasoning) and loaded == kept
        assert (loaded.text, loaded.redacted, loaded.resend) == (
            kept.text,
            kept.redacted,
            kept.resend,
        )
        resumed.approve(resumed.pending_approvals[0])
        reply = resumed.complete()
        assert reply is not None and reply.content == "Refunded."  # the strict fake took it
        body = fake.last_request.body
    if kind == "anthropic":
        assert body["messages"][1]["content"][0] == kept.raw  # signature and all
    else:
        assert [i for i in body["input"] if i.get("type") == "reasoning"] == [kept.raw]
    with sqlite3.connect(db) as conn:
        dump = "\n".join(conn.iterdump())
    assert KEY not in dump and "Refund 7." in dump
    with SQLiteStore(db) as store:
        assert store.load(first.id).info.id == first.id
