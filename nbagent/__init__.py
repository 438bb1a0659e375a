"""nbagent: LLM agents with tools inside Jupyter notebooks.

Control over tool execution (choice, call limits, approval gates, concurrency,
callbacks, step-by-step driving with budgets), a live notebook view with
working Approve/Deny buttons, and every tool call logged as a pandas DataFrame.

Everything public is imported from here; the modules behind it are private.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._chat import Chat
from ._chat_state import SkipToolCall, StepResult, ToolResult
from ._config import Config, configure, get_config
from ._errors import (
    AuthenticationError,
    BadRequestError,
    ChatCancelled,
    DecisionError,
    DriverError,
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
    RateLimitError,
    ServerError,
    StoreError,
    ToolDefinitionError,
    ToolExecutionError,
    ToolLoopError,
    ToolOptionError,
)
from ._events import (
    AlwaysAllowChanged,
    ApprovalDecided,
    ApprovalRequested,
    CallbackWarning,
    CallInDoubt,
    Event,
    MessageAdded,
    ModelRequestFailed,
    ModelRequestFinished,
    ModelRequestStarted,
    OptionsChanged,
    ReasoningDelta,
    StepFinished,
    TextDelta,
    ToolCallDelta,
    ToolCallFinished,
    ToolCallRequested,
    ToolCallStarted,
)
from ._exports import publish as _publish
from ._exports import publish_one as _publish_one
from ._extension import ChatHost, Extension, Snapshot
from ._hosted import HostedCallWarning, HostedMCP
from ._media import image
from ._options import ToolOptions
from ._replay import ReplayMissError
from ._schema import SchemaValidationError
from ._tools import FunctionTool, Tool, ToolSource, current_tool_call, tool
from ._types import (
    Approval,
    AssistantToolCallMessage,
    ChatMessage,
    Decision,
    FilePart,
    ForkParent,
    ImagePart,
    LLMToolResponse,
    Message,
    ProviderItem,
    Reasoning,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    Usage,
)
from .batch import batch, batch_async, batch_results
from .comparison import compare
from .inbox import Inbox, inbox
from .log import read_log
from .mcp import MCPServer, MCPTool
from .otel import instrument, uninstrument
from .providers import DemoProvider, ModelRequest, Provider, StreamDelta
from .store import PostgresStore, SQLiteStore, Store, open_store

if TYPE_CHECKING:
    from .providers import AnthropicProvider, OpenAIProvider

__version__ = "0.1.0"

_LAZY = {
    # imported on first use so that `import nbagent` does not import the SDKs
    "AnthropicProvider": "nbagent.providers",
    "OpenAIProvider": "nbagent.providers",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'nbagent' has no attribute {name!r}")
    import importlib

    value = _publish_one(__name__, getattr(importlib.import_module(module), name))
    globals()[name] = value
    return value


__all__ = [
    "AlwaysAllowChanged",
    "AnthropicProvider",
    "Approval",
    "ApprovalDecided",
    "ApprovalRequested",
    "AssistantToolCallMessage",
    "AuthenticationError",
    "BadRequestError",
    "CallInDoubt",
    "CallbackWarning",
    "Chat",
    "ChatCancelled",
    "ChatHost",
    "ChatMessage",
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
    "PendingToolCallsError",
    "PostgresStore",
    "Provider",
    "ProviderConnectionError",
    "ProviderError",
    "ProviderItem",
    "RateLimitError",
    "Reasoning",
    "ReasoningDelta",
    "ReplayMissError",
    "SQLiteStore",
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
    "ToolCall",
    "ToolCallDelta",
    "ToolCallFinished",
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
    "Usage",
    "__version__",
    "batch",
    "batch_async",
    "batch_results",
    "compare",
    "configure",
    "current_tool_call",
    "get_config",
    "image",
    "inbox",
    "instrument",
    "open_store",
    "read_log",
    "tool",
    "uninstrument",
]

_publish(__name__, globals(), __all__)
