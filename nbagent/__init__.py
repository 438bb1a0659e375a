"""nbagent: LLM agents with tools inside Jupyter notebooks.

Control over tool execution (choice, call limits, approval gates, concurrency,
callbacks, step-by-step driving with budgets), a live notebook view with
working Approve/Deny buttons, and every tool call logged as a pandas DataFrame.

Everything public is imported from here; the modules behind it are private.
"""

from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING, Any

from ._ask_user import ask_user
from ._chat import Chat
from ._chat_state import SkipToolCall, StepResult, ToolResult
from ._config import Config, configure, get_config
from ._errors import (
    AuthenticationError,
    BadRequestError,
    ChatCancelled,
    DecisionError,
    DriverError,
    InputError,
    MCPServerError,
    MCPToolError,
    MediaError,
    ModelNotSupportedError,
    NBAgentError,
    OutputSchemaError,
    OutputValidationError,
    PendingToolCallsError,
    ProviderConnectionError,
    ProviderError,
    QuotaError,
    RateLimitError,
    ServerError,
    StoreError,
    ToolArgumentsError,
    ToolDefinitionError,
    ToolExecutionError,
    ToolLoopError,
    ToolOptionError,
    ToolUnavailableError,
)
from ._events import (
    AlwaysAllowChanged,
    ApprovalDecided,
    ApprovalRequested,
    CallbackWarning,
    CallInDoubt,
    Event,
    InputAnswered,
    InputRequested,
    MessageAdded,
    ModelRequestFailed,
    ModelRequestFinished,
    ModelRequestStarted,
    OptionsChanged,
    ReasoningDelta,
    RuleChanged,
    SamplingFinished,
    StepFinished,
    TextDelta,
    ToolCallDelta,
    ToolCallFinished,
    ToolCallLog,
    ToolCallProgress,
    ToolCallRequested,
    ToolCallStarted,
)
from ._exports import ROOT_LAZY as _LAZY
from ._exports import publish as _publish
from ._exports import publish_one as _publish_one
from ._extension import ChatHost, Extension, Snapshot
from ._hosted import HostedCallWarning, HostedMCP
from ._media import image
from ._options import ToolOptions
from ._replay import ReplayMissError
from ._rules import Condition, Rule
from ._schema import SchemaValidationError
from ._tools import (
    FunctionTool,
    InputAsker,
    Tool,
    ToolSource,
    current_input_asker,
    current_tool_call,
    report_progress,
    tool,
)
from ._types import (
    Approval,
    AssistantToolCallMessage,
    AudioPart,
    ChatMessage,
    Decision,
    FilePart,
    ForkParent,
    ImagePart,
    LLMToolResponse,
    Message,
    PendingInput,
    ProviderItem,
    Reasoning,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    Usage,
)
from .providers import ModelRequest, Provider, StreamDelta

if TYPE_CHECKING:  # what editors and type checkers see; loaded on first use below
    from .batch import batch, batch_async, batch_results
    from .comparison import compare
    from .evaluation import evaluate, evaluate_async, suggest_policies
    from .inbox import Inbox, inbox
    from .log import read_log
    from .mcp import MCPServer, MCPTool
    from .otel import instrument, uninstrument
    from .providers import AnthropicProvider, DemoProvider, OpenAIProvider
    from .store import PostgresStore, SQLiteStore, Store, open_store

# The one place the version is written: pyproject.toml reads it (a literal, for setuptools).
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    """Load a name of ``_exports.ROOT_LAZY`` on first use (``from nbagent import batch``)."""
    import importlib

    if name in _PACKAGES:  # `import nbagent` then `nbagent.store.PostgresStore(...)`
        return importlib.import_module(f"nbagent.{name}")
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'nbagent' has no attribute {name!r}")
    value = _publish_one(__name__, getattr(importlib.import_module(module), name))
    globals()[name] = value
    return value


# The public subpackages whose names are not functions too (``batch``, ``inbox``): loaded
# as attributes on first use, as they were when ``import nbagent`` imported them.
_PACKAGES = (
    "comparison", "evaluation", "log", "mcp", "notebook", "otel", "providers", "store", "testing",
)  # fmt: skip


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__) | set(_PACKAGES))


class _Face(types.ModuleType):
    """``nbagent`` itself: ``nbagent.batch`` and ``nbagent.inbox`` are functions.

    Importing a subpackage sets the parent's attribute of its name to it; ``batch`` and
    ``inbox`` name both a subpackage and the function ``nbagent`` exports from it, and the
    function is what ``nbagent.batch`` has always been.
    """

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, types.ModuleType) and _LAZY.get(name) == value.__name__:
            value = _publish_one(self.__name__, getattr(value, name))
        super().__setattr__(name, value)


__all__ = [
    "AlwaysAllowChanged",
    "AnthropicProvider",
    "Approval",
    "ApprovalDecided",
    "ApprovalRequested",
    "AssistantToolCallMessage",
    "AudioPart",
    "AuthenticationError",
    "BadRequestError",
    "CallInDoubt",
    "CallbackWarning",
    "Chat",
    "ChatCancelled",
    "ChatHost",
    "ChatMessage",
    "Condition",
    "Config",
    "Decision",
    "DecisionError",
    "DemoProvider",
    "DriverError",
    "Event",
    "Extension",
    "FilePart",
    "ForkParent",
    "FunctionTool",
    "HostedCallWarning",
    "HostedMCP",
    "ImagePart",
    "Inbox",
    "InputAnswered",
    "InputAsker",
    "InputError",
    "InputRequested",
    "LLMToolResponse",
    "MCPServer",
    "MCPServerError",
    "MCPTool",
    "MCPToolError",
    "MediaError",
    "Message",
    "MessageAdded",
    "ModelNotSupportedError",
    "ModelRequest",
    "ModelRequestFailed",
    "ModelRequestFinished",
    "ModelRequestStarted",
    "NBAgentError",
    "OpenAIProvider",
    "OptionsChanged",
    "OutputSchemaError",
    "OutputValidationError",
    "PendingInput",
    "PendingToolCallsError",
    "PostgresStore",
    "Provider",
    "ProviderConnectionError",
    "ProviderError",
    "ProviderItem",
    "QuotaError",
    "RateLimitError",
    "Reasoning",
    "ReasoningDelta",
    "ReplayMissError",
    "Rule",
    "RuleChanged",
    "SQLiteStore",
    "SamplingFinished",
    "SchemaValidationError",
    "ServerError",
    "SkipToolCall",
    "Snapshot",
    "StepFinished",
    "StepResult",
    "Store",
    "StoreError",
    "StreamDelta",
    "TextDelta",
    "Tool",
    "ToolArgumentsError",
    "ToolCall",
    "ToolCallDelta",
    "ToolCallFinished",
    "ToolCallLog",
    "ToolCallProgress",
    "ToolCallRequested",
    "ToolCallStarted",
    "ToolDefinitionError",
    "ToolExecutionError",
    "ToolLoopError",
    "ToolOptionError",
    "ToolOptions",
    "ToolResult",
    "ToolResultMessage",
    "ToolSource",
    "ToolSpec",
    "ToolUnavailableError",
    "Usage",
    "__version__",
    "ask_user",
    "batch",
    "batch_async",
    "batch_results",
    "compare",
    "configure",
    "current_input_asker",
    "current_tool_call",
    "evaluate",
    "evaluate_async",
    "get_config",
    "image",
    "inbox",
    "instrument",
    "open_store",
    "read_log",
    "report_progress",
    "suggest_policies",
    "tool",
    "uninstrument",
]

_publish(__name__, globals(), __all__)
sys.modules[__name__].__class__ = _Face
