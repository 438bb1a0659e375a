"""Shared pieces of the batch tests: a fake server that needs three tool rounds per chat."""

from __future__ import annotations

import threading
from typing import Any

from nbagent import tool
from nbagent.testing import FakeToolCall, RecordedRequest, Turn

ROUNDS = 3


@tool
def lookup(item: str) -> str:
    """Look an item up.

    Args:
        item: What to look up.
    """
    return f"{item}: found"


def tool_messages(request: RecordedRequest) -> int:
    """Tool results the request carries (Chat Completions, Responses or Anthropic)."""
    body = request.body
    if request.api == "chat":
        return sum(1 for m in body["messages"] if m.get("role") == "tool")
    if request.api == "responses":
        return sum(1 for i in body["input"] if i.get("type") == "function_call_output")
    return sum(
        1
        for m in body["messages"]
        if isinstance(m.get("content"), list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    )


def first_user_text(request: RecordedRequest) -> str:
    body = request.body
    items = body.get("messages") or body.get("input") or []
    for m in items:
        if m.get("role") == "user":
            content = m.get("content")
            if isinstance(content, str):
                return content
            for block in content or []:
                if block.get("type") in ("text", "input_text"):
                    return str(block["text"])
    return ""


class Rounds:
    """A handler: ``ROUNDS`` tool rounds per chat, then an answer naming the prompt."""

    def __init__(self, rounds: int = ROUNDS, tool_name: str = "lookup") -> None:
        self.rounds = rounds
        self.tool_name = tool_name
        self.lock = threading.Lock()
        self.requests = 0

    def __call__(self, request: RecordedRequest) -> Turn | str:
        with self.lock:
            self.requests += 1
        done = tool_messages(request)
        prompt = first_user_text(request)
        if done < self.rounds:
            return Turn(tool_calls=[FakeToolCall(self.tool_name, {"item": f"{prompt}#{done}"})])
        return Turn(text=f"answer to {prompt}")


def kwargs_of(**kw: Any) -> dict[str, Any]:
    return kw
