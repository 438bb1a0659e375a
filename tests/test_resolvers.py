"""``requires_approval`` as a resolver (issue 23, A.2): every Python spelling of RubyLLM's
``requires_approval { |tool_call| Approvals.status(tool_call.id) }``.

Each spelling is a real resolver: called with the :class:`ToolCall`, ``True`` runs the call
once, ``False`` denies it (the structured denial, never run), ``None`` leaves it waiting and
it is asked again at every ``complete()``/``step()``. Side-effect counters prove what ran.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

import nbagent
from nbagent import Chat, Tool, ToolCall, ToolDefinitionError, ToolResultMessage, tool
from nbagent.testing._scripted import ScriptedProvider, call_tools, reply

runs: Counter[str] = Counter()
asked: list[ToolCall] = []
status: dict[str, bool | None] = {}  # the application's approvals table, by call id
_lock = threading.Lock()


def approvals_status(call: ToolCall) -> bool | None:
    """What an application's ``Approvals.status(tool_call.id)`` reads."""
    with _lock:
        asked.append(call)
    return status.get(call.id)


def _ran(name: str) -> None:
    with _lock:
        runs[name] += 1


@tool(requires_approval=approvals_status)
def delete_record(record_id: int) -> str:
    """Delete a record."""
    _ran("delete_record")
    return f"deleted {record_id}"


class StaticRule(Tool):
    """Delete a record (resolver given as a staticmethod)."""

    name = "delete_record"
    requires_approval = staticmethod(approvals_status)

    def execute(self, record_id: int) -> str:
        _ran("delete_record")
        return f"deleted {record_id}"


class MethodRule(Tool):
    """Delete a record (resolver written as a method)."""

    name = "delete_record"

    def requires_approval(self, tool_call: ToolCall) -> bool | None:
        assert isinstance(self, MethodRule)  # a method: it gets its tool
        return approvals_status(tool_call)

    def execute(self, record_id: int) -> str:
        _ran("delete_record")
        return f"deleted {record_id}"


class LambdaRule(Tool):
    """Delete a record (resolver given as a lambda of the call)."""

    name = "delete_record"
    requires_approval = lambda tool_call: approvals_status(tool_call)  # noqa: E731

    def execute(self, record_id: int) -> str:
        _ran("delete_record")
        return f"deleted {record_id}"


class FunctionRule(Tool):
    """Delete a record (a plain function of the call as the class attribute)."""

    name = "delete_record"
    requires_approval = approvals_status

    def execute(self, record_id: int) -> str:
        _ran("delete_record")
        return f"deleted {record_id}"


class InheritsRule(MethodRule):
    """Inherits its parent's resolver."""

    name = "delete_record"


SPELLINGS: dict[str, Any] = {
    "tool(requires_approval=fn)": delete_record,
    "staticmethod": StaticRule,
    "method": MethodRule,
    "lambda": LambdaRule,
    "plain function": FunctionRule,
    "inherited": InheritsRule,
    "instance": MethodRule(),
}


@pytest.fixture(params=["sequential", "threads", "async"], autouse=True)
def mode(request: pytest.FixtureRequest) -> str:
    runs.clear()
    asked.clear()
    status.clear()
    nbagent.configure(tool_concurrency=request.param)
    return str(request.param)


@pytest.fixture(params=list(SPELLINGS))
def spelling(request: pytest.FixtureRequest) -> Any:
    return SPELLINGS[request.param]


def one_call() -> ScriptedProvider:
    return ScriptedProvider([call_tools(("delete_record", {"record_id": 7}, "d1")), reply("ok")])


def results(chat: Chat) -> dict[str, ToolResultMessage]:
    return {m.tool_call_id: m for m in chat.transcript if isinstance(m, ToolResultMessage)}


def test_the_resolver_is_called_with_the_tool_call_and_true_runs_it_once(spelling: Any) -> None:
    status["d1"] = True
    provider = ScriptedProvider(
        [call_tools(("delete_record", {"record_id": 7}, "d1")), reply("ok")]
    )
    chat = Chat(provider=provider).with_tools(spelling)
    chat.ask("delete 7")
    assert chat.is_complete and runs["delete_record"] == 1
    call = asked[0]
    assert isinstance(call, ToolCall)
    assert (call.id, call.name, call.arguments) == ("d1", "delete_record", {"record_id": 7})
    c = chat.get_call("d1")
    assert c.approval == nbagent.Approval(
        True, "resolver", "delete_record decides per call with an approval rule"
    )
    assert c.decision is not None and c.decision.by == "resolver"
    assert results(chat)["d1"].content == "deleted 7"


def test_false_denies_with_the_structured_denial_and_never_runs(spelling: Any) -> None:
    status["d1"] = False
    provider = ScriptedProvider(
        [call_tools(("delete_record", {"record_id": 7}, "d1")), reply("ok")]
    )
    chat = Chat(provider=provider).with_tools(spelling)
    chat.ask("delete 7")
    assert chat.is_complete and runs["delete_record"] == 0
    denial = json.loads(results(chat)["d1"].content)
    assert denial["status"] == "denied" and denial["tool"] == "delete_record"
    assert "resolver" in denial["message"]
    assert chat.get_call("d1").status == "denied"


def test_none_waits_and_is_asked_again_at_every_complete_and_step(spelling: Any) -> None:
    provider = ScriptedProvider(
        [call_tools(("delete_record", {"record_id": 7}, "d1")), reply("ok")]
    )
    chat = Chat(provider=provider).with_tools(spelling)
    chat.ask("delete 7")
    assert chat.awaiting_approval and [c.id for c in chat.pending_approvals] == ["d1"]
    n = len(asked)  # asked when the call arrived, and again by the step that parked
    assert n >= 1
    chat.complete()
    assert chat.awaiting_approval and len(asked) == n + 1
    assert chat.step().kind == "awaiting_approval" and len(asked) == n + 2
    assert all(c.id == "d1" for c in asked) and runs["delete_record"] == 0
    status["d1"] = True  # the application records a decision
    chat.complete()
    assert chat.is_complete and runs["delete_record"] == 1
    chat.complete()
    assert runs["delete_record"] == 1


def test_none_then_false_denies_on_the_next_step(spelling: Any) -> None:
    provider = ScriptedProvider(
        [call_tools(("delete_record", {"record_id": 7}, "d1")), reply("ok")]
    )
    chat = Chat(provider=provider).with_tools(spelling)
    chat.ask("delete 7")
    assert chat.awaiting_approval
    status["d1"] = False
    assert chat.step().kind == "generated"  # denied at the step's start; the model is told
    assert chat.get_call("d1").status == "denied"
    chat.complete()
    assert chat.is_complete and runs["delete_record"] == 0
    assert chat.get_call("d1").status == "denied"


def test_a_human_still_decides_a_call_the_resolver_left_waiting() -> None:
    provider = ScriptedProvider(
        [call_tools(("delete_record", {"record_id": 7}, "d1")), reply("ok")]
    )
    chat = Chat(provider=provider).with_tools(delete_record)
    chat.ask("delete 7")
    chat.approve("d1")
    chat.complete()
    assert runs["delete_record"] == 1
    assert chat.get_call("d1").decision.by == "user"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("answer", "note"),
    [
        (lambda call: 1 / 0, "raised ZeroDivisionError"),
        (lambda call: "yes", "returned a str (expected True, False or None)"),
        (lambda call: 1, "returned an int (expected True, False or None)"),
    ],
)
def test_a_resolver_that_raises_or_answers_nonsense_leaves_the_call_waiting(
    answer: Callable[[ToolCall], Any], note: str
) -> None:
    """The same as ``approval=``: nothing runs, and the reason says why it waits."""

    @tool(requires_approval=answer)
    def drop(x: int) -> int:
        """Drop."""
        _ran("drop")
        return x

    provider = ScriptedProvider([call_tools(("drop", {"x": 1}, "f1")), reply("ok")])
    chat = Chat(provider=provider).with_tools(drop)
    chat.ask("go")
    chat.complete()
    assert chat.awaiting_approval and runs["drop"] == 0
    assert note in chat.get_call("f1").approval.reason  # type: ignore[union-attr]


def test_bools_and_approval_keep_working() -> None:
    @tool(requires_approval=True)
    def gated() -> str:
        """Gated."""
        _ran("gated")
        return "g"

    @tool(requires_approval=None)
    def free() -> str:
        """Not gated: None is False."""
        _ran("free")
        return "f"

    @tool(approval=lambda call: True)
    def ruled() -> str:
        """An approval resolver alone (with requires_approval= too: refused): it decides."""
        _ran("ruled")
        return "r"

    provider = ScriptedProvider(
        [call_tools(("gated", {}, "g"), ("free", {}, "f"), ("ruled", {}, "r")), reply("ok")]
    )
    chat = Chat(provider=provider).with_tools(gated, free, ruled)
    chat.ask("go")
    assert runs == Counter({"free": 1, "ruled": 1})
    assert [c.id for c in chat.pending_approvals] == ["g"]
    assert chat.get_call("g").approval.source == "tool"  # type: ignore[union-attr]
    assert free.requires_approval is False and not free.has_resolver


# ------------------------------------------------------------------ definition errors
@pytest.mark.parametrize("bad", ["always", "", 1, 0, 2.5, ["x"]])
def test_a_gate_that_is_not_a_bool_or_a_resolver_is_a_definition_error(bad: Any) -> None:
    def fn(x: int) -> int:
        return x

    with pytest.raises(ToolDefinitionError, match=r"tool 'fn': requires_approval must be True"):
        tool(requires_approval=bad)(fn)
    with pytest.raises(ToolDefinitionError, match=r"Bad: requires_approval must be True"):
        type("Bad", (Tool,), {"requires_approval": bad, "execute": lambda self: None})


def test_an_approval_that_is_not_a_resolver_is_a_definition_error() -> None:
    def fn(x: int) -> int:
        return x

    with pytest.raises(ToolDefinitionError, match=r"approval must be a resolver"):
        tool(approval="yes")(fn)  # type: ignore[arg-type]


def test_a_gate_computed_by_a_property_is_checked_when_the_tool_is_added() -> None:
    class Configured(Tool):
        """Gated when configured so."""

        def __init__(self, gate: Any) -> None:
            self.gate = gate

        @property
        def requires_approval(self) -> Any:  # type: ignore[override]
            return self.gate

        def execute(self) -> None: ...

    chat = Chat(provider=ScriptedProvider([reply("x")]))
    chat.with_tools(Configured(True))
    assert chat.tools[0].requires_approval is True
    with pytest.raises(ToolDefinitionError, match="requires_approval must be True"):
        chat.with_tools(Configured("on"))


def test_two_resolvers_are_a_definition_error() -> None:
    def fn(x: int) -> int:
        return x

    with pytest.raises(ToolDefinitionError, match="resolver is given twice"):
        tool(requires_approval=approvals_status, approval=approvals_status)(fn)
    with pytest.raises(ToolDefinitionError, match="resolver is given twice"):

        class Both(Tool):
            requires_approval = staticmethod(approvals_status)

            def approval(self, call: ToolCall) -> bool | None:
                return None

            def execute(self) -> None: ...

    with pytest.raises(ToolDefinitionError, match="resolver is given twice"):

        class Late(MethodRule):  # the parent's resolver, and a second one here
            def approval(self, call: ToolCall) -> bool | None:
                return None


def test_a_resolver_that_cannot_take_the_call_is_a_definition_error() -> None:
    def fn(x: int) -> int:
        return x

    with pytest.raises(ToolDefinitionError, match=r"called as \(tool_call\)"):
        tool(requires_approval=lambda: True)(fn)
    with pytest.raises(ToolDefinitionError, match=r"called as \(self, tool_call\)"):

        class ThreeArgs(Tool):
            def requires_approval(self, tool_call: ToolCall, extra: int) -> bool:
                return True

            def execute(self) -> None: ...


def test_with_tools_refuses_an_instance_whose_gate_was_set_to_nonsense() -> None:
    class Gated(Tool):
        """Gated."""

        def execute(self) -> None: ...

    t = Gated()
    t.requires_approval = "please"  # type: ignore[misc]
    chat = Chat(provider=ScriptedProvider([reply("x")]))
    with pytest.raises(ToolDefinitionError, match="requires_approval must be True"):
        chat.with_tools(delete_record, t)
    assert chat.tools == ()  # nothing was added: the whole call is refused
