"""RubyLLM's "Controlling Tool Execution" guide, every code block, in nbagent's Python spelling.

Tests are numbered after the guide's sections so a reader can map them:

1. Tool Call Controls (1.1 Tool Choice, 1.2 Calls Per Response, 1.3 Clearing Tools
   and Options)
2. Requiring Approval (2.1 Remote Tool Approval, 2.2 Approval in Rails)
3. Concurrent Tool Execution
4. Accessing the Current Tool Call
5. Model Compatibility
6. Monitoring Tool Calls with Callbacks (6.1 Limiting Tool Calls)

Ruby blocks become callables, symbols strings, ``chat.awaiting_approval?`` the property
``chat.awaiting_approval``, ``:fibers`` is ``"async"``, ``response.tool_calls`` a tuple
(docs/controlling-tool-execution.md, "RubyLLM spellings in Python"). The model is a
``ScriptedProvider`` unless the wire matters; then the real SDKs talk to the strict loopback
``FakeLLMServer``. The guide's code lives in this file: nothing reads it from disk.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import nbagent
from nbagent import (
    Chat,
    ModelNotSupportedError,
    PendingToolCallsError,
    Tool,
    ToolCall,
    ToolCallFinished,
    ToolCallStarted,
    ToolResultMessage,
    tool,
)
from nbagent.providers import AnthropicProvider, OpenAIProvider
from nbagent.store import SQLiteStore
from nbagent.testing import (
    FakeLLMServer,
    FakeToolCall,
    ScriptedProvider,
    Turn,
    call_tools,
    mcp_approval_request,
    mcp_call,
    mcp_list_tools,
    reply,
)

KEY = "sk-test-SECRET-rubyllm-0123456789"
WAIT = 30.0  # a concurrent peer that never comes fails the test instead of hanging it


class Weather(Tool):
    """Gets current weather for a location."""

    def execute(self, latitude: str, longitude: str) -> dict[str, Any]:
        """Weather.

        Args:
            latitude: Latitude.
            longitude: Longitude.
        """
        return {"temperature": 15, "conditions": "Partly cloudy"}


class Calculator(Tool):
    """Evaluates an arithmetic expression."""

    def execute(self, expression: str) -> str:
        """Calculate.

        Args:
            expression: The expression.
        """
        return "4"


PARIS = {"latitude": "48.8566", "longitude": "2.3522"}


def weather_then(text: str = "It is 15°C in Paris.") -> list[Any]:
    return [call_tools(("weather", PARIS)), reply(text)]


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as fake:  # strict
        yield fake
    assert not fake.errors, fake.errors


def sdk_provider(kind: str, server: FakeLLMServer, model: str | None = None) -> Any:
    if kind == "anthropic":
        return AnthropicProvider(
            model or "claude-sonnet-4-5",
            base_url=server.anthropic_base_url,
            api_key=KEY,
            max_retries=0,
        )
    return OpenAIProvider(
        model or "gpt-4.1-mini",
        api="responses" if kind == "openai-responses" else "chat",
        base_url=server.openai_base_url,
        api_key=KEY,
        compatible=False,
        max_retries=0,
    )


# ======== 1. Tool Call Controls


def test_1_tool_call_controls_required_and_one_call() -> None:
    """``chat.with_tools(Weather, Calculator)``;
    ``chat.with_tool_options(choice: :required, calls: :one)``."""
    llm = ScriptedProvider(weather_then())
    chat = Chat(provider=llm)
    chat.with_tools(Weather, Calculator)
    chat.with_tool_options(choice="required", calls="one")
    chat.ask("Weather in Paris?")
    first = llm.requests[0]
    assert [t.name for t in first.tools] == ["weather", "calculator"]
    assert (first.tool_choice, first.calls) == ("required", "one")


@pytest.mark.parametrize("kind", ["openai-chat", "openai-responses", "anthropic"])
def test_1_tool_call_controls_on_each_wire(kind: str, server: FakeLLMServer) -> None:
    """OpenAI and Anthropic honour ``calls: :one`` with their own switch; without
    ``calls:`` the provider's default applies (no switch sent)."""
    server.script(["fine", "fine"])
    with sdk_provider(kind, server) as llm:
        chat = Chat(provider=llm).with_tools(Weather, Calculator)
        chat.with_tool_options(choice="required", calls="one")
        chat.ask("Weather?")
        forced = server.requests[0].body
        chat.with_tool_options(choice=None, calls=None)
        chat.ask("Weather?")
        default = server.requests[1].body
    if kind == "anthropic":
        assert forced["tool_choice"] == {"type": "any", "disable_parallel_tool_use": True}
        assert default["tool_choice"] == {"type": "auto"}
    else:
        assert forced["tool_choice"] == "required" and forced["parallel_tool_calls"] is False
        assert "parallel_tool_calls" not in default
        assert default.get("tool_choice", "auto") == "auto"


# ---------------------------------------------------------------- 1.1 Tool Choice


@pytest.mark.parametrize(
    ("choice", "sent"),
    [
        ("auto", "auto"),  # Model decides if a tool is needed
        ("required", "required"),  # Model must call a tool
        ("none", "none"),  # Disable tool calls
        ("weather", "weather"),  # Force one specific tool (symbol...
        (Weather, "weather"),  # ...or class)
    ],
    ids=["auto", "required", "none", "name", "class"],
)
def test_1_1_tool_choice(choice: Any, sent: str) -> None:
    llm = ScriptedProvider([reply("ok")])
    chat = Chat(provider=llm).with_tools(Weather, Calculator).with_tool_options(choice=choice)
    chat.ask("Weather in Paris?")
    assert llm.requests[0].tool_choice == sent


@pytest.mark.parametrize("choice", ["required", "weather", Weather])
def test_1_1_a_forced_choice_is_cleared_after_the_tool_runs(choice: Any) -> None:
    """After a required or specific tool executes, the choice is cleared so the model can
    answer without calling it again (nbagent keeps the option for the next turn)."""
    llm = ScriptedProvider([*weather_then(), *weather_then()])
    chat = Chat(provider=llm).with_tools(Weather, Calculator).with_tool_options(choice=choice)
    assert chat.ask("Weather in Paris?").content == "It is 15°C in Paris."  # type: ignore[union-attr]
    forced = "required" if choice == "required" else "weather"
    assert [r.tool_choice for r in llm.requests] == [forced, "auto"]
    chat.ask("And now?")
    assert [r.tool_choice for r in llm.requests][2:] == [forced, "auto"]


# ---------------------------------------------------------------- 1.2 Calls Per Response


@pytest.mark.parametrize(("calls", "sent"), [("many", "many"), ("one", "one"), (1, "one")])
def test_1_2_calls_per_response(calls: Any, sent: str) -> None:
    """``calls: :many``; ``calls: :one``, equivalent to ``calls: 1``."""
    llm = ScriptedProvider([reply("ok")])
    chat = Chat(provider=llm).with_tools(Weather, Calculator).with_tool_options(calls=calls)
    chat.ask("Weather?")
    assert llm.requests[0].calls == sent


def test_1_2_one_call_is_enforced_when_the_model_returns_several() -> None:
    """Gemini can still return several calls: with ``calls: :one`` nbagent runs the first
    and answers the others as skipped, whatever the model did."""
    ran: list[str] = []

    class Counted(Weather):
        name = "weather"

        def execute(self, latitude: str, longitude: str) -> dict[str, Any]:
            ran.append(latitude)
            return {"temperature": 15}

    llm = ScriptedProvider(
        [
            call_tools(("weather", PARIS), ("weather", {"latitude": "1", "longitude": "2"})),
            reply("ok"),
        ]
    )
    chat = Chat(provider=llm).with_tools(Counted).with_tool_options(calls="one")
    chat.ask("Two cities?")
    assert ran == ["48.8566"]
    assert [c.status for c in chat.tool_calls] == ["ok", "skipped"]


def test_1_2_several_calls_run_sequentially_by_default() -> None:
    order: list[tuple[str, str]] = []

    class Slow(Weather):
        name = "weather"

        def execute(self, latitude: str, longitude: str) -> dict[str, Any]:
            order.append(("start", latitude))
            order.append(("end", latitude))
            return {}

    llm = ScriptedProvider(
        [
            call_tools(("weather", PARIS), ("weather", {"latitude": "1", "longitude": "2"})),
            reply("ok"),
        ]
    )
    chat = Chat(provider=llm).with_tools(Slow)
    modes: list[str] = []
    chat.on(ToolCallStarted, lambda e: modes.append(e.mode))
    chat.ask("Two cities?")
    assert order == [("start", "48.8566"), ("end", "48.8566"), ("start", "1"), ("end", "1")]
    assert modes == ["sequential", "sequential"]


# ---------------------------------------------------------------- 1.3 Clearing Tools and Options


def test_1_3_with_tools_none_forgets_the_tools_and_keeps_the_options() -> None:
    chat = Chat(provider=ScriptedProvider())
    chat.with_tools(Weather, Calculator).with_tool_options(
        choice="required", calls="one", concurrency="threads"
    )
    chat.with_tools(None)  # forget the tools, keep the options
    assert chat.tools == ()
    options = chat.tool_options
    assert (options.choice, options.calls, options.concurrency) == ("required", 1, "threads")
    chat.with_tool_options(choice=None, calls=None, concurrency=None)  # reset all three
    options = chat.tool_options
    assert (options.choice, options.calls, options.concurrency) == ("auto", None, None)


# ======== 2. Requiring Approval


class IssueRefund(Tool):
    """Issues a refund for an order"""

    requires_approval = True
    refunds: list[int] = []  # noqa: RUF012 (the test's record of side effects)

    def execute(self, order_id: int) -> str:
        """Refund.

        Args:
            order_id: The order.
        """
        IssueRefund.refunds.append(order_id)
        return f"refunded order {order_id}"


@pytest.fixture(autouse=True)
def _no_refunds_yet() -> None:
    IssueRefund.refunds.clear()


def refund_chat(*script: Any) -> tuple[Chat, ScriptedProvider]:
    llm = ScriptedProvider([call_tools(("issue_refund", {"order_id": 42})), *script])
    return Chat(provider=llm).with_tools(IssueRefund), llm


def test_2_requires_approval_pauses_before_anything_executes() -> None:
    chat, _ = refund_chat(reply("Refunded."))
    response = chat.ask("Refund order 42")

    assert chat.awaiting_approval is True  # and nothing has executed
    assert IssueRefund.refunds == []
    chat.complete()  # returns cleanly instead of running the tool
    assert IssueRefund.refunds == [] and chat.awaiting_approval

    tool_call = response.tool_calls[0]  # type: ignore[union-attr]
    chat.approve(tool_call)
    reply_ = chat.complete()  # executes the tool, then lets the model continue
    assert IssueRefund.refunds == [42]
    assert reply_ is not None and reply_.content == "Refunded."
    chat.complete()
    chat.approve(tool_call)  # a second approval is a no-op: it never runs again
    chat.complete()
    assert IssueRefund.refunds == [42]


def test_2_deny_never_executes_and_the_model_gets_a_structured_denial() -> None:
    chat, llm = refund_chat(reply("I could not refund it."))
    response = chat.ask("Refund order 42")
    tool_call = response.tool_calls[0]  # type: ignore[union-attr]
    chat.deny(tool_call)
    chat.complete()  # appends the denial result and asks the model to respond
    assert IssueRefund.refunds == []
    result = llm.requests[-1].messages[-1]
    assert isinstance(result, ToolResultMessage) and result.tool_call_id == tool_call.id
    assert result.status == "denied" and result.is_error
    assert json.loads(result.content)["status"] == "denied"
    assert chat.transcript[-1].content == "I could not refund it."


def test_2_approve_and_deny_take_a_call_or_its_id_and_pending_approvals_lists_them() -> None:
    llm = ScriptedProvider(
        [
            call_tools(("issue_refund", {"order_id": 1}), ("issue_refund", {"order_id": 2})),
            reply("One done."),
        ]
    )
    chat = Chat(provider=llm).with_tools(IssueRefund)
    chat.ask("Refund orders 1 and 2")
    first, second = chat.pending_approvals
    chat.approve(first.id)
    assert chat.pending_approvals == [second]
    chat.deny(second)
    assert chat.pending_approvals == []
    chat.complete()
    assert IssueRefund.refunds == [1]


def test_2_calls_that_need_no_approval_still_run_while_protected_calls_wait() -> None:
    llm = ScriptedProvider(
        [call_tools(("weather", PARIS), ("issue_refund", {"order_id": 42})), reply("ok")]
    )
    chat = Chat(provider=llm).with_tools(Weather, IssueRefund)
    chat.ask("Weather, and refund order 42")
    assert [(c.name, c.status) for c in chat.tool_calls] == [
        ("weather", "ok"),
        ("issue_refund", "awaiting_approval"),
    ]
    assert len(llm.requests) == 1  # the round's results go together, once all are answered


def test_2_drive_the_loop_yourself_stopping_at_pending_approvals() -> None:
    """``chat.step until chat.complete? || chat.awaiting_approval?``."""
    chat, _ = refund_chat(reply("Refunded."))
    chat.ask_later("Refund order 42")
    while not (chat.is_complete or chat.awaiting_approval):
        chat.step()
    assert chat.awaiting_approval and IssueRefund.refunds == []


def test_2_ask_while_calls_are_pending_raises_pending_tool_calls_error() -> None:
    chat, _ = refund_chat()
    chat.ask("Refund order 42")
    with pytest.raises(PendingToolCallsError, match="issue_refund"):
        chat.ask("Anything else?")


class Approvals:
    """The application's decisions, read by the resolver (an idempotent read)."""

    def __init__(self) -> None:
        self.statuses: dict[str, bool | None] = {}
        self.reads = 0

    def status(self, call_id: str) -> bool | None:
        self.reads += 1
        return self.statuses.get(call_id)


def _resolver_flow(delete_record: Any, approvals: Approvals, tmp_path: Path) -> None:
    """A resolver gates the call: ``nil`` waits, ``true`` runs it (also after the job
    resumes in a loaded chat), ``false`` denies it; it is read repeatedly."""
    store = str(tmp_path / "jobs.db")
    llm = ScriptedProvider(
        [
            call_tools(("delete_record", {"record_id": 7}, "call_7")),
            reply("Deleted."),
            call_tools(("delete_record", {"record_id": 8}, "call_8")),
            reply("Not deleted."),
        ]
    )
    chat = Chat(provider=llm, store=store).with_tools(delete_record)
    chat.ask("Delete record 7")
    assert chat.awaiting_approval and deleted == []
    chat.complete()
    assert chat.awaiting_approval and deleted == []  # still nil: still waiting
    chat.close()

    approvals.statuses["call_7"] = True
    resumed = Chat.load(chat.id, store=store, tools=[delete_record], provider=llm)
    resumed.complete()
    assert deleted == [7] and resumed.get_call("call_7").decision.by == "resolver"  # type: ignore[union-attr]

    approvals.statuses["call_8"] = False
    resumed.ask("Delete record 8")
    assert deleted == [7] and resumed.get_call("call_8").status == "denied"
    assert approvals.reads >= 3
    resumed.close()


deleted: list[int] = []


@pytest.fixture
def approvals() -> Approvals:
    deleted.clear()
    return Approvals()


def test_2_resolver_as_an_approval_method_works_today(approvals: Approvals, tmp_path: Path) -> None:
    """nbagent's own spelling: ``def approval(self, call)``."""

    class DeleteRecord(Tool):
        """Deletes a record."""

        def approval(self, tool_call: ToolCall) -> bool | None:
            return approvals.status(tool_call.id)

        def execute(self, record_id: int) -> str:
            """Delete.

            Args:
                record_id: The record.
            """
            deleted.append(record_id)
            return "deleted"

    _resolver_flow(DeleteRecord, approvals, tmp_path)


def test_2_resolver_as_approval_keyword_of_tool_works_today(
    approvals: Approvals, tmp_path: Path
) -> None:
    """nbagent's own spelling: ``@tool(approval=fn)``."""

    @tool(approval=lambda tool_call: approvals.status(tool_call.id))
    def delete_record(record_id: int) -> str:
        """Deletes a record.

        Args:
            record_id: The record.
        """
        deleted.append(record_id)
        return "deleted"

    _resolver_flow(delete_record, approvals, tmp_path)


def test_2_resolver_block_as_requires_approval_staticmethod(
    approvals: Approvals, tmp_path: Path
) -> None:
    """``requires_approval { |tool_call| Approvals.status(tool_call.id) }``."""

    class DeleteRecord(Tool):
        """Deletes a record."""

        requires_approval = staticmethod(lambda tool_call: approvals.status(tool_call.id))  # type: ignore[assignment]

        def execute(self, record_id: int) -> str:
            """Delete.

            Args:
                record_id: The record.
            """
            deleted.append(record_id)
            return "deleted"

    _resolver_flow(DeleteRecord, approvals, tmp_path)


def test_2_resolver_block_as_requires_approval_method(approvals: Approvals, tmp_path: Path) -> None:
    class DeleteRecord(Tool):
        """Deletes a record."""

        def requires_approval(self, tool_call: ToolCall) -> bool | None:  # type: ignore[override]
            return approvals.status(tool_call.id)

        def execute(self, record_id: int) -> str:
            """Delete.

            Args:
                record_id: The record.
            """
            deleted.append(record_id)
            return "deleted"

    _resolver_flow(DeleteRecord, approvals, tmp_path)


def test_2_resolver_block_as_requires_approval_keyword_of_tool(
    approvals: Approvals, tmp_path: Path
) -> None:
    @tool(requires_approval=lambda tool_call: approvals.status(tool_call.id))  # type: ignore[arg-type]
    def delete_record(record_id: int) -> str:
        """Deletes a record.

        Args:
            record_id: The record.
        """
        deleted.append(record_id)
        return "deleted"

    _resolver_flow(delete_record, approvals, tmp_path)


# ---------------------------------------------------------------- 2.1 Remote Tool Approval


@pytest.mark.parametrize("approve", [True, False], ids=["approve", "deny"])
def test_2_1_remote_tool_approval_appears_with_a_server_label(
    server: FakeLLMServer, approve: bool
) -> None:
    """A provider-run MCP tool asking for approval is a pending approval with a ``server``
    label; approve/deny/complete send the decision to the provider, nothing runs here."""
    asks = Turn(
        hosted=[
            mcp_list_tools("deepwiki", "ask_question"),
            mcp_approval_request("deepwiki", "ask_question", {"q": "x"}, id="mcpr_1"),
        ]
    )
    done = Turn(
        text="It indexes wikis.",
        hosted=[
            mcp_call(
                "deepwiki", "ask_question", {"q": "x"}, output="42", approval_request_id="mcpr_1"
            )
        ],
    )
    server.script([asks, done if approve else "Not asked."])
    llm = sdk_provider("openai-responses", server)
    chat = Chat(provider=llm).with_tools(
        nbagent.HostedMCP("deepwiki", server_url="https://mcp.deepwiki.example/mcp")
    )
    chat.ask("What does the repo do?")
    [call] = chat.pending_approvals
    assert (call.server, call.name, call.hosted) == ("deepwiki", "ask_question", True)
    chat.approve(call) if approve else chat.deny(call)
    chat.complete()
    sent = [i for i in server.requests[1].body["input"] if i.get("type") == "mcp_approval_response"]
    assert [(i["approval_request_id"], i["approve"]) for i in sent] == [("mcpr_1", approve)]
    assert chat.status == "complete"
    llm.close()


# ---------------------------------------------------------------- 2.2 Approval in Rails

AGENT = '''
"""The guide's controllers and job as processes: each command is one request or one job."""
import json, os, sys
import nbagent
from nbagent import Chat, Tool

nbagent.configure(quiet=True, display=False)


class IssueRefund(Tool):
    """Issues a refund for an order"""

    requires_approval = True
    idempotent = os.environ.get("IDEMPOTENT") == "1"

    def execute(self, order_id: int) -> str:
        """Refund.

        Args:
            order_id: The order.
        """
        with open(os.environ["REFUNDS"], "a") as f:
            f.write(f"{order_id}\\n")
        if os.environ.get("CRASH") == "1":
            os._exit(3)  # dies after the side effect, before the result is persisted
        return f"refunded order {order_id}"


def support_agent(chat_id):
    """Load the chat through its agent: restores the tools and approval rules."""
    return Chat.load(chat_id, store=os.environ["DB"], tools=[IssueRefund])


command, *args = sys.argv[1:]
if command == "create":  # MessagesController#create (a new chat, its first message)
    chat = Chat(model="demo", store=os.environ["DB"]).with_tools(IssueRefund)
    chat.ask_later(args[0])
    out = {"chat_id": chat.id}
elif command == "approvals":  # ApprovalsController#create
    chat = support_agent(args[0])
    approved = args[2] == "true"
    chat.approve(args[1]) if approved else chat.deny(args[1])
    out = {"status": chat.get_call(args[1]).status}
elif command == "complete":  # CompleteJob#perform
    chat = support_agent(args[0])
    chat.complete()
    out = {
        "status": chat.status,
        "pending": [c.id for c in chat.pending_approvals],
        "calls": [c.status for c in chat.tool_calls],
        "reply": getattr(chat.transcript[-1], "content", None),
    }
chat.close()
print(json.dumps(out))
'''


class Rails:
    """Runs each controller action and job in a process of its own, on one SQLite store."""

    def __init__(self, tmp_path: Path) -> None:
        self.script = tmp_path / "agent.py"
        self.script.write_text(AGENT)
        self.refunds = tmp_path / "refunds.txt"
        root = str(Path(nbagent.__file__).resolve().parents[1])
        self.env = {
            **os.environ,
            "DB": str(tmp_path / "chats.db"),
            "REFUNDS": str(self.refunds),
            "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]),
        }

    def __call__(self, *args: str, **env: str) -> dict[str, Any]:
        done = subprocess.run(
            [sys.executable, str(self.script), *args],
            env={**self.env, **env},
            capture_output=True,
            text=True,
            timeout=120,
        )
        if env.get("CRASH") == "1":
            assert done.returncode == 3, done.stderr
            return {}
        assert done.returncode == 0, done.stderr
        return dict(json.loads(done.stdout.splitlines()[-1]))

    @property
    def refunded(self) -> list[str]:
        return self.refunds.read_text().split() if self.refunds.exists() else []


@pytest.mark.parametrize("approved", ["true", "false"])
def test_2_2_one_process_requests_approval_another_decides_another_resumes(
    tmp_path: Path, approved: str
) -> None:
    rails = Rails(tmp_path)
    chat_id = rails("create", "Refund order 42")["chat_id"]
    parked = rails("complete", chat_id)  # CompleteJob.perform_later(chat.id)
    assert parked["status"] == "awaiting_approval" and rails.refunded == []
    [call_id] = parked["pending"]
    # the approval UI lists pending approvals from the store: name and arguments
    with SQLiteStore(rails.env["DB"]) as store:
        [pending] = store.pending_approvals()
        assert (pending.id, pending.name, pending.arguments) == (
            call_id,
            "issue_refund",
            {"order_id": 42},
        )

    rails("approvals", chat_id, call_id, approved)  # ApprovalsController#create
    assert rails.refunded == []
    finished = rails("complete", chat_id)  # CompleteJob again
    assert finished["status"] == "complete"
    assert rails.refunded == (["42"] if approved == "true" else [])
    assert rails("complete", chat_id)["status"] == "complete"  # the job runs again: nothing reruns
    assert rails.refunded == (["42"] if approved == "true" else [])
    assert finished["calls"] == (["ok"] if approved == "true" else ["denied"])


@pytest.mark.parametrize("idempotent", ["0", "1"])
def test_2_2_a_job_dying_after_the_side_effect(tmp_path: Path, idempotent: str) -> None:
    """The guide warns a retry will run the tool again. nbagent never reruns it silently:
    the call is in doubt and the model is told; a tool declared idempotent is rerun."""
    rails = Rails(tmp_path)
    chat_id = rails("create", "Refund order 42")["chat_id"]
    [call_id] = rails("complete", chat_id)["pending"]
    rails("approvals", chat_id, call_id, "true")
    rails("complete", chat_id, CRASH="1", IDEMPOTENT=idempotent)
    assert rails.refunded == ["42"]
    retried = rails("complete", chat_id, IDEMPOTENT=idempotent)
    assert retried["status"] == "complete"
    if idempotent == "1":
        assert rails.refunded == ["42", "42"] and retried["calls"] == ["ok"]
    else:
        assert rails.refunded == ["42"] and retried["calls"] == ["in_doubt"]


def test_2_2_loading_the_chat_restores_its_approval_rules(tmp_path: Path) -> None:
    """Approval rules set on the chat (``always_allow``) come back with ``Chat.load``."""
    store = str(tmp_path / "chats.db")
    llm = ScriptedProvider(
        [
            call_tools(("issue_refund", {"order_id": 1})),
            reply("Refunded 1."),
            call_tools(("issue_refund", {"order_id": 2})),
            reply("Refunded 2."),
        ]
    )
    chat = Chat(provider=llm, store=store).with_tools(IssueRefund).always_allow(IssueRefund)
    chat.ask("Refund order 1")
    assert IssueRefund.refunds == [1]
    chat.close()
    loaded = Chat.load(chat.id, store=store, tools=[IssueRefund], provider=llm)
    assert loaded.always_allowed == ("issue_refund",)
    loaded.ask("Refund order 2")
    assert IssueRefund.refunds == [1, 2] and not loaded.awaiting_approval
    loaded.close()


# ======== 3. Concurrent Tool Execution


def three_calls() -> list[Any]:
    return [
        call_tools(
            ("weather", PARIS), ("stock_price", {"symbol": "ACME"}), ("currency", {"code": "EUR"})
        ),
        reply("All three."),
    ]


def chained_tools(chat: Chat) -> Chat:
    """Three tools that can only finish concurrently: each waits until the chat has the
    result of the next one (its ``ToolCallFinished``), so results come in the reverse of call
    order while the others still run (and a sequential run would time out)."""
    done = {n: threading.Event() for n in ("weather", "stock_price", "currency")}
    chat.on(ToolCallFinished, lambda e: done[e.call.name].set())

    class W(Weather):
        name = "weather"

        def execute(self, latitude: str, longitude: str) -> dict[str, Any]:
            assert done["stock_price"].wait(WAIT), "ran sequentially"
            return {"temperature": 15}

    class StockPrice(Tool):
        """Gets a stock price."""

        def execute(self, symbol: str) -> float:
            """Price.

            Args:
                symbol: The ticker.
            """
            assert done["currency"].wait(WAIT), "ran sequentially"
            return 12.5

    class Currency(Tool):
        """Gets an exchange rate."""

        def execute(self, code: str) -> float:
            """Rate.

            Args:
                code: The currency.
            """
            return 1.08

    return chat.with_tools(W, StockPrice, Currency)


@pytest.mark.parametrize("concurrency", [True, "threads"])
def test_3_concurrent_tool_execution_with_threads(concurrency: Any) -> None:
    """``concurrency: true`` (threads) and ``concurrency: :threads``. Results arrive as each
    tool finishes; the model is asked again only once all are in."""
    llm = ScriptedProvider(three_calls())
    chat = chained_tools(Chat(provider=llm)).with_tool_options(concurrency=concurrency)
    finished: list[str] = []
    modes: list[str] = []
    chat.on(ToolCallFinished, lambda e: finished.append(e.call.name))
    chat.on(ToolCallStarted, lambda e: modes.append(e.mode))
    chat.ask("Weather, stock and rate?")
    assert [c.status for c in chat.tool_calls] == ["ok", "ok", "ok"]
    assert modes == ["threads"] * 3
    assert finished == ["currency", "stock_price", "weather"]  # as each tool finishes
    second = llm.requests[1].messages
    results = [m for m in second if isinstance(m, ToolResultMessage)]
    assert [r.name for r in results] == ["weather", "stock_price", "currency"]  # call order


def test_3_fibers_are_async_tasks() -> None:
    """``concurrency: :fibers`` is ``"async"``: async tools run as tasks on one loop."""
    llm = ScriptedProvider(three_calls())

    class W(Weather):
        name = "weather"

        async def execute(self, latitude: str, longitude: str) -> dict[str, Any]:  # type: ignore[override]
            await asyncio.wait_for(stock.wait(), WAIT)
            return {"temperature": 15}

    class StockPrice(Tool):
        """Gets a stock price."""

        async def execute(self, symbol: str) -> float:
            """Price.

            Args:
                symbol: The ticker.
            """
            await asyncio.wait_for(rate.wait(), WAIT)
            stock.set()
            return 12.5

    class Currency(Tool):
        """Gets an exchange rate."""

        async def execute(self, code: str) -> float:
            """Rate.

            Args:
                code: The currency.
            """
            rate.set()
            return 1.08

    stock, rate = asyncio.Event(), asyncio.Event()
    chat = (
        Chat(provider=llm)
        .with_tools(W, StockPrice, Currency)
        .with_tool_options(concurrency="async")
    )
    modes: list[str] = []
    chat.on(ToolCallStarted, lambda e: modes.append(e.mode))
    chat.ask("Weather, stock and rate?")
    assert [c.status for c in chat.tool_calls] == ["ok", "ok", "ok"]
    assert modes == ["async"] * 3


def test_3_global_concurrency_and_the_per_chat_override() -> None:
    """``config.tool_concurrency = true`` globally; ``with_tool_options(concurrency: false)``
    per chat wins."""
    nbagent.configure(tool_concurrency=True)
    chat = chained_tools(Chat(provider=ScriptedProvider(three_calls())))
    modes: list[str] = []
    chat.on(ToolCallStarted, lambda e: modes.append(e.mode))
    chat.ask("All three?")
    assert modes == ["threads"] * 3

    seq = Chat(provider=ScriptedProvider(weather_then())).with_tools(Weather)
    seq.with_tool_options(concurrency=False)
    modes.clear()
    seq.on(ToolCallStarted, lambda e: modes.append(e.mode))
    seq.ask("Weather?")
    assert modes == ["sequential"]


@pytest.mark.parametrize(
    ("value", "mode"),
    [
        (True, "threads"),
        (False, "sequential"),
        ("threads", "threads"),
        ("async", "async"),
        ("fibers", "async"),  # :fibers as written, the natural Python spelling being "async"
    ],
)
def test_3_every_global_value_is_accepted(value: Any, mode: str) -> None:
    """``Use :threads, :fibers, true, or false.`` (``:fibers`` is ``"async"``)."""
    nbagent.configure(tool_concurrency=value)
    llm = ScriptedProvider(
        [
            call_tools(("weather", PARIS), ("weather", {"latitude": "1", "longitude": "2"})),
            reply("ok"),
        ]
    )
    chat = Chat(provider=llm).with_tools(Weather)
    modes: list[str] = []
    chat.on(ToolCallStarted, lambda e: modes.append(e.mode))
    chat.ask("Two cities?")
    assert modes == [mode, mode]


# ======== 4. Accessing the Current Tool Call


def test_4_the_executing_tool_call_is_passed_and_hidden_from_the_model() -> None:
    audit: list[tuple[str | None, str | None]] = []

    class SearchTool(Tool):
        """Searches the knowledge base"""

        def execute(self, query: str, tool_call: ToolCall | None = None) -> str:
            """Search.

            Args:
                query: Search query
            """
            audit.append(
                (tool_call.id if tool_call else None, tool_call.name if tool_call else None)
            )
            assert nbagent.current_tool_call() is tool_call
            return f"results for {query}"

    llm = ScriptedProvider(
        [
            call_tools(
                ("search_tool", {"query": "a"}, "call_a"), ("search_tool", {"query": "b"}, "call_b")
            ),
            reply("Found."),
        ]
    )
    chat = Chat(provider=llm).with_tools(SearchTool).with_tool_options(concurrency=True)
    chat.ask("Search a and b")
    schema = llm.requests[0].tools[0].input_schema
    assert list(schema["properties"]) == ["query"]  # tool_call is not shown to the model
    assert schema["properties"]["query"]["description"] == "Search query"
    assert sorted(audit) == [("call_a", "search_tool"), ("call_b", "search_tool")]  # concurrent too


# ======== 5. Model Compatibility


def test_5_a_model_without_function_calling_errors_when_you_ask(server: FakeLLMServer) -> None:
    """The error comes when you call ``ask``; nbagent knows the model cannot call tools and
    raises before sending anything (a ModelNotSupportedError, also a NotImplementedError)."""
    with sdk_provider("openai-chat", server, model="o1-mini") as llm:
        chat = Chat(provider=llm).with_tools(Weather)
        with pytest.raises(ModelNotSupportedError, match="does not support tools"):
            chat.ask("What's the weather in Paris?")
    assert server.requests == []
    assert chat.status != "complete"


# ======== 6. Monitoring Tool Calls with Callbacks


@pytest.mark.filterwarnings("ignore::nbagent.providers.UnknownModelWarning")
def test_6_before_tool_call_and_after_tool_result_print(
    server: FakeLLMServer, capsys: pytest.CaptureFixture[str]
) -> None:
    server.script([Turn(tool_calls=[FakeToolCall("weather", PARIS)]), "15°C, partly cloudy."])
    llm = sdk_provider("openai-chat", server, model="gpt-5.6")
    chat = (
        Chat(provider=llm)
        .with_tools(Weather)
        .before_tool_call(
            lambda tool_call: print(
                f"Calling tool: {tool_call.name}\nArguments: {json.dumps(tool_call.arguments)}"
            )
        )
        .after_tool_result(lambda result: print(f"Tool returned: {result}"))
    )
    response = chat.ask("What's the weather in Paris?")
    assert capsys.readouterr().out.splitlines() == [
        "Calling tool: weather",
        'Arguments: {"latitude": "48.8566", "longitude": "2.3522"}',
        'Tool returned: {"temperature":15,"conditions":"Partly cloudy"}',
    ]
    assert response is not None and response.content == "15°C, partly cloudy."
    llm.close()


# ---------------------------------------------------------------- 6.1 Limiting Tool Calls


def test_6_1_a_step_budget_caps_a_runaway_loop_and_step_resumes() -> None:
    runaway = True

    def model(request: Any) -> Any:  # calls the tool again and again, until told otherwise
        return call_tools(("weather", PARIS)) if runaway else reply("Done: 15°C everywhere.")

    llm = ScriptedProvider([model], repeat_last=True)
    chat = Chat(provider=llm).with_tools(Weather).ask_later("Check weather for every major city...")

    for _ in range(10):
        chat.step()
        if chat.is_complete:
            break

    assert not chat.is_complete
    assert len(llm.requests) == 5 and [c.status for c in chat.tool_calls] == ["ok"] * 5
    runaway = False
    while not chat.is_complete:  # the transcript is valid: step resumes where it stopped
        chat.step()
    assert chat.transcript[-1].content == "Done: 15°C everywhere."
    assert len(llm.requests) == 6
