"""An approval rule is asked on the thread deciding the call and never awaited: an
``async def`` one (a natural port of the seed's ``Approvals.status(tool_call.id)`` as an
async database read) would never run, and its call would wait for a decision for ever. It
is refused when the tool (or the ``always_allow`` rule) is defined, with a clear error,
as async callbacks are."""

from __future__ import annotations

import functools

import pytest

from nbagent import Chat, Tool, ToolDefinitionError, tool
from nbagent.testing import ScriptedProvider, call_tools, reply


async def _lookup(call: object) -> bool:
    return True


class _AsyncCallable:
    async def __call__(self, call: object) -> bool:
        return True


def test_an_async_method_resolver_is_refused_when_the_class_is_defined() -> None:
    with pytest.raises(ToolDefinitionError, match=r"plain function.*never awaited"):

        class DeleteRecord(Tool):
            """Delete a record."""

            async def requires_approval(self, tool_call):  # type: ignore[override]
                return True

            def execute(self, record_id: int) -> str:
                return "deleted"


@pytest.mark.parametrize(
    "rule",
    [_lookup, functools.partial(_lookup), _AsyncCallable(), staticmethod(_lookup)],
    ids=["async def", "partial", "async __call__", "staticmethod"],
)
def test_an_async_resolver_is_refused_in_a_class_body(rule: object) -> None:
    with pytest.raises(ToolDefinitionError, match="async callable"):

        class DeleteRecord(Tool):
            """Delete a record."""

            requires_approval = rule

            def execute(self, record_id: int) -> str:
                return "deleted"


@pytest.mark.parametrize("keyword", ["requires_approval", "approval"])
@pytest.mark.parametrize(
    "rule", [_lookup, functools.partial(_lookup), _AsyncCallable()], ids=["def", "partial", "obj"]
)
def test_an_async_resolver_is_refused_by_the_decorator(keyword: str, rule: object) -> None:
    with pytest.raises(ToolDefinitionError, match="async callable"):

        @tool(**{keyword: rule})
        def delete(record_id: int) -> str:
            """Delete."""
            return "deleted"


def test_an_async_always_allow_predicate_is_refused() -> None:
    @tool(requires_approval=True)
    def delete(record_id: int) -> str:
        """Delete."""
        return "deleted"

    chat = Chat(provider=ScriptedProvider([reply("ok")])).with_tools(delete)
    with pytest.raises(TypeError, match=r"plain function.*never awaited"):
        chat.always_allow(delete, when=_lookup)
    assert chat.always_allowed == ()


def test_a_plain_resolver_still_decides() -> None:
    ran: list[int] = []

    class DeleteRecord(Tool):
        """Delete a record."""

        def requires_approval(self, tool_call):  # type: ignore[override]
            return True if tool_call.arguments["record_id"] < 100 else None  # else: ask

        def execute(self, record_id: int) -> str:
            ran.append(record_id)
            return "deleted"

    llm = ScriptedProvider([call_tools(("delete_record", {"record_id": 7}, "c7")), reply("Done.")])
    chat = Chat(provider=llm).with_tools(DeleteRecord)
    assert chat.ask("Delete record 7").content == "Done."
    assert ran == [7]


class _SyncAdapter:
    """A sync callable around an async function (asgiref's async_to_sync shape): calling it
    runs the function to its end, so it decides; its ``__wrapped__`` is the async one."""

    def __init__(self, fn):  # type: ignore[no-untyped-def]
        self.fn = fn
        functools.update_wrapper(self, fn)  # __wrapped__, __qualname__...: as asgiref does

    def __call__(self, call: object) -> bool:
        import asyncio

        return asyncio.run(self.fn(call))


def test_a_sync_adapter_around_an_async_rule_is_accepted_and_decides() -> None:
    ran: list[int] = []

    @tool(requires_approval=_SyncAdapter(_lookup))
    def delete(record_id: int) -> str:
        """Delete."""
        ran.append(record_id)
        return "deleted"

    llm = ScriptedProvider([call_tools(("delete", {"record_id": 7}, "c7")), reply("Done.")])
    chat = Chat(provider=llm).with_tools(delete)
    assert chat.ask("Delete record 7").content == "Done."
    assert ran == [7]
