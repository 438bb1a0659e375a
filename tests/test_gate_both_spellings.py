"""A tool gets one gate: ``requires_approval`` (True/False or a resolver) or ``approval=fn``.

``requires_approval=True`` next to ``approval=fn`` used to be accepted and the resolver alone
decided (a call the author meant to always ask about ran or was denied by the function);
``requires_approval=False`` next to one still gated every call. Both are refused when the
tool is defined now, in ``@tool`` and in a ``Tool`` class body; every spelling of the seed
(``requires_approval`` alone, a resolver as ``requires_approval``, ``approval`` alone) still
works.
"""

from __future__ import annotations

from typing import Any

import pytest

from nbagent import Chat, Tool, ToolCall, ToolDefinitionError, tool
from nbagent.testing import ScriptedProvider, call_tools, reply


def _f(x: int) -> str:
    """F.

    Args:
        x: A number.
    """
    return "ran"


def _no(call: ToolCall) -> bool | None:
    return False


@pytest.mark.parametrize("fixed", [True, False])
def test_tool_refuses_a_fixed_gate_next_to_an_approval_resolver(fixed: bool) -> None:
    with pytest.raises(ToolDefinitionError, match=rf"tool 't': requires_approval={fixed} and an"):
        tool(requires_approval=fixed, approval=_no, name="t")(_f)


def test_a_class_refuses_a_fixed_gate_next_to_an_approval_resolver() -> None:
    with pytest.raises(ToolDefinitionError, match=r"Both: requires_approval=True and an"):

        class Both(Tool):
            """Both."""

            requires_approval = True

            def approval(self, tool_call: ToolCall) -> bool | None:
                return None

            def execute(self, x: int) -> str:
                return "ran"

    with pytest.raises(ToolDefinitionError, match=r"Off: requires_approval=False and an"):

        class Off(Tool):
            """Off."""

            requires_approval = False
            approval = staticmethod(_no)

            def execute(self, x: int) -> str:
                return "ran"


def test_a_subclass_adding_a_resolver_to_an_inherited_true_gate_is_refused() -> None:
    class Gated(Tool, abstract=True):
        requires_approval = True

    with pytest.raises(ToolDefinitionError, match=r"Ruled: requires_approval=True and an"):

        class Ruled(Gated):
            """Ruled."""

            def approval(self, tool_call: ToolCall) -> bool | None:
                return True

            def execute(self, x: int) -> str:
                return "ran"


def _outcome(t: Any) -> tuple[str, str]:
    chat = Chat(provider=ScriptedProvider([call_tools(("t", {"x": 1})), reply("done")]))
    chat.with_tools(t).ask("go")
    row = chat.log.iloc[0]
    return str(row["status"]), str(row["decision"])


def test_each_single_spelling_still_gates_as_it_says() -> None:
    assert _outcome(tool(requires_approval=True, name="t")(_f)) == (
        "awaiting_approval",
        "pending",
    )
    assert _outcome(tool(requires_approval=False, name="t")(_f)) == ("ok", "auto")
    assert _outcome(tool(requires_approval=None, name="t")(_f)) == ("ok", "auto")
    assert _outcome(tool(name="t")(_f)) == ("ok", "auto")
    assert _outcome(tool(approval=_no, name="t")(_f)) == ("denied", "denied")
    assert _outcome(tool(requires_approval=_no, name="t")(_f)) == ("denied", "denied")
    # None next to a resolver is "not given": the resolver decides
    assert _outcome(tool(requires_approval=None, approval=_no, name="t")(_f)) == (
        "denied",
        "denied",
    )

    class Method(Tool):
        """M."""

        name = "t"

        def approval(self, tool_call: ToolCall) -> bool | None:
            return False

        def execute(self, x: int) -> str:
            return "ran"

    class Static(Tool):
        """S."""

        name = "t"
        requires_approval = staticmethod(_no)

        def execute(self, x: int) -> str:
            return "ran"

    class Always(Tool):
        """A."""

        name = "t"
        requires_approval = True

        def execute(self, x: int) -> str:
            return "ran"

    assert _outcome(Method) == ("denied", "denied")
    assert _outcome(Static) == ("denied", "denied")
    assert _outcome(Always) == ("awaiting_approval", "pending")
