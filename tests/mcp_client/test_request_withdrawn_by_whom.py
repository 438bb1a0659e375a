"""Who withdrew an MCP server's request that was waiting for a person: the server, or the call
ending here. A call that timed out is cancelled; an older server then cancels the request it
had sent, and that cancellation could reach the client before the chat had ended the call:
the input was recorded "the server withdrew its request" instead of "the call ended
(timed_out) before an answer" (a clean-clone run, 1 in a few hundred). A request cancelled
while its call is being ended here is left to the chat, which says so as it ends the call.

The request is served in a task of its own, as an older server's is (the SDK's receive loop),
and asked of a recording :class:`nbagent.InputAsker` (the public protocol the core gives a
call's code)."""

from __future__ import annotations

import asyncio
import concurrent.futures
from typing import Any

import pytest

from nbagent.mcp._requests import Requests


class RecordingAsker:
    """An ``InputAsker`` that parks every request and records each withdrawal."""

    def __init__(self) -> None:
        self.withdrawn: list[tuple[str, str]] = []

    def ask(
        self,
        kind: Any,
        message: str,
        content: dict[str, Any],
        schema: dict[str, Any] | None,
        server: str | None,
    ) -> tuple[str, concurrent.futures.Future[Any]]:
        return "i1", concurrent.futures.Future()

    def withdraw(self, input_id: str, why: str) -> None:
        self.withdrawn.append((input_id, why))

    async def sample(self, *args: Any, **kwargs: Any) -> Any:  # not asked here
        raise NotImplementedError


async def _cancelled(call_ends_first: bool) -> list[tuple[str, str]]:
    requests = Requests("srv")
    asker = RecordingAsker()

    async def call() -> None:
        async with requests.calling(asker):
            await asyncio.sleep(3600)

    call_task = asyncio.create_task(call())
    await asyncio.sleep(0)  # the call is in flight
    request = asyncio.create_task(requests._ask("elicitation", "Your name?", {}, None))
    for _ in range(3):
        await asyncio.sleep(0)  # the request waits for a person
    if call_ends_first:
        call_task.cancel()  # its timeout: the call is being ended here
    request.cancel()  # the server cancels its request (the notification arrives first)
    await asyncio.gather(request, return_exceptions=True)
    call_task.cancel()
    await asyncio.gather(call_task, return_exceptions=True)
    return asker.withdrawn


@pytest.mark.parametrize("repeat", range(3))
def test_a_request_cancelled_as_its_call_ends_here_is_left_to_the_chat(repeat: int) -> None:
    assert asyncio.run(_cancelled(call_ends_first=True)) == []


def test_a_request_the_server_cancels_on_its_own_is_withdrawn_saying_so() -> None:
    assert asyncio.run(_cancelled(call_ends_first=False)) == [
        ("i1", "the server withdrew its request")
    ]
