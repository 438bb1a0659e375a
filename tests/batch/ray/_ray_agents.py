"""Agents the Ray tests run on workers: importable by name there (see conftest).

The fake model (:func:`handler`) asks for ``double(n)`` with ``n`` the length
of the user's prompt, then answers ``"<prompt>: <result>"``; a prompt
starting with ``"gate"`` asks for the gated ``refund`` instead, and one
starting with ``"die"`` for ``crash``, which ends its worker process, and one starting with
``"interrupt"`` for ``interrupt``, which raises ``KeyboardInterrupt``; ``"note <file> <row>"``
asks for ``note``, which appends the row to the file (a side effect counted per call).
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from typing import Any

from nbagent import Chat, tool
from nbagent.providers import OpenAIProvider
from nbagent.testing import FakeToolCall, RecordedRequest, Turn

KEY = "sk-ray-test-not-a-secret"


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    return content if isinstance(content, str) else ""


def handler(request: RecordedRequest) -> Turn:
    messages = request.body["messages"]
    prompt = next(_text(m) for m in messages if m["role"] == "user")
    last = messages[-1]
    if last["role"] == "user":
        if prompt.startswith("gate"):
            return Turn(tool_calls=[FakeToolCall("refund", {"order": prompt})])
        if prompt.startswith("die"):
            return Turn(tool_calls=[FakeToolCall("crash", {})])
        if prompt.startswith("interrupt"):
            return Turn(tool_calls=[FakeToolCall("interrupt", {})])
        if prompt.startswith("note "):
            _, marks, row = prompt.split(" ", 2)
            return Turn(tool_calls=[FakeToolCall("note", {"marks": marks, "row": row})])
        if prompt.startswith("linger "):
            return Turn(tool_calls=[FakeToolCall("linger", {"marks": prompt.split(" ", 1)[1]})])
        return Turn(tool_calls=[FakeToolCall("double", {"n": len(prompt)})])
    return Turn(text=f"{prompt}: {_text(last)}", usage={"input_tokens": 20, "output_tokens": 5})


@tool
def double(n: int) -> int:
    """Doubles a number.

    Args:
        n: The number.
    """
    return 2 * n


@tool(requires_approval=True)
def refund(order: str) -> str:
    """Refunds an order (gated).

    Args:
        order: The order.
    """
    return f"refunded {order}"


@tool
def crash() -> str:
    """Ends the worker process at once (a segfault, the OOM killer)."""
    os._exit(13)


@tool
async def interrupt() -> str:
    """Raises KeyboardInterrupt (a library converting a child's SIGINT): not the stop button."""
    raise KeyboardInterrupt


@tool
def note(marks: str, row: str) -> str:
    """Appends ``row`` to ``marks`` (one line per call: what ran, and how many times).

    Args:
        marks: The file to append to.
        row: The row.
    """
    with open(marks, "a") as f:
        f.write(f"{row}\n")
    return f"noted {row}"


@tool
async def linger(marks: str) -> str:
    """Writes "start" to ``marks``, works a minute, then writes "end" (what a stopped row's
    tool must not get to).

    Args:
        marks: The file to append to.
    """
    with open(marks, "a") as f:
        f.write(f"start {os.getpid()}\n")
    await asyncio.sleep(60)
    with open(marks, "a") as f:
        f.write(f"end {os.getpid()}\n")
    return "lingered"


PROVIDERS: dict[str, OpenAIProvider] = {}
"""One provider (one connection pool) per server and process: the driver's, each worker's."""


def close_providers() -> None:
    """Close this process's providers (their async clients belong to this thread's loop)."""
    from nbagent._aio import run_sync

    while PROVIDERS:
        run_sync(PROVIDERS.popitem()[1].aclose())


@dataclass(frozen=True)
class FakeServerChat:
    """A chat factory the driver pickles: a chat on the fake server, built on the worker.

    The provider is made where the chat is (its key read there), never pickled.
    """

    base_url: str

    def __call__(self) -> Chat:
        provider = PROVIDERS.get(self.base_url)
        if provider is None:
            provider = PROVIDERS[self.base_url] = OpenAIProvider(
                "gpt-4.1-mini", base_url=self.base_url, api_key=KEY
            )
        return Chat(provider=provider, stream=False).with_tools(
            double, refund, crash, linger, interrupt, note
        )


@tool
def order_status(order_id: int) -> str:
    """Look up an order's status.

    Args:
        order_id: The order number.
    """
    return "delivered" if order_id % 2 else "lost in transit"


def demo_chat() -> Chat:
    """A chat on the offline demo model (what notebook 09 runs)."""
    return Chat("demo").with_tools(order_status)


def broken_chat() -> Chat:
    """A factory that raises (on the worker)."""
    raise ValueError("no chat for this row")


SPANS_TO: list[str] = []
"""Where this worker's spans go: the path of the latest :class:`TracedDemoChat` made here."""


class TracedDemoChat:
    """A factory of demo chats whose worker writes its spans to ``path`` (JSON lines): it
    makes the worker's global OpenTelemetry provider once (what a user's
    ``worker_process_setup_hook`` does), sending spans to the latest factory's path, then
    returns :func:`demo_chat`'s chat."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __call__(self) -> Chat:
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter

        SPANS_TO[:] = [self.path]
        if not isinstance(trace.get_tracer_provider(), TracerProvider):

            class ToFile(SpanExporter):
                def export(self, spans: Any) -> Any:
                    from opentelemetry.sdk.trace.export import SpanExportResult

                    with open(SPANS_TO[-1], "a") as out:
                        out.writelines(span.to_json(indent=None) + "\n" for span in spans)
                    return SpanExportResult.SUCCESS

            provider = TracerProvider()
            provider.add_span_processor(SimpleSpanProcessor(ToFile()))
            trace.set_tracer_provider(provider)
        return demo_chat()
