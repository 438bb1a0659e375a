"""Test helpers: test your agents offline.

- :class:`ScriptedProvider` (with :func:`reply` and :func:`call_tools`): an
  in-process provider answering from a script and recording every request.
- :class:`FakeLLMServer`: a loopback HTTP server speaking the OpenAI Chat
  Completions, OpenAI Responses and Anthropic Messages wire formats (JSON and
  SSE), so the real ``openai`` / ``anthropic`` SDK clients run fully offline::

    from nbagent.testing import FakeLLMServer, FakeToolCall, Turn

    with FakeLLMServer(turns=[Turn(tool_calls=[FakeToolCall("get_weather", {"city": "Paris"})]),
                              Turn(text="It is sunny.")]) as server:
        client = openai.OpenAI(api_key="test", base_url=server.openai_base_url)
        ...

- :func:`to_pytest`: a chat that ran becomes a pytest file replaying it
  offline (with :class:`OfflineProvider`, :func:`stand_in`, :func:`replay_turns`).

The fake server imports only the standard library; the scripted provider is
loaded on first use.
"""

from typing import Any

from .._exports import publish as _publish
from .._exports import publish_one as _publish_one
from ._export import to_pytest
from ._fake_server import FakeLLMServer, render
from ._offline import OfflineProvider, replay_turns, stand_in
from ._script import (
    FakeHostedItem,
    FakeToolCall,
    RecordedRequest,
    Turn,
    mcp_approval_request,
    mcp_call,
    mcp_list_tools,
    raw_item,
    reasoning_item,
)

_LAZY = {"ScriptedProvider", "ScriptedRequest", "call_tools", "reply"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from . import _scripted

        return _publish_one(__name__, getattr(_scripted, name))
    raise AttributeError(f"module 'nbagent.testing' has no attribute {name!r}")


__all__ = [
    "FakeHostedItem",
    "FakeLLMServer",
    "FakeToolCall",
    "OfflineProvider",
    "RecordedRequest",
    "ScriptedProvider",
    "ScriptedRequest",
    "Turn",
    "call_tools",
    "mcp_approval_request",
    "mcp_call",
    "mcp_list_tools",
    "raw_item",
    "reasoning_item",
    "render",
    "replay_turns",
    "reply",
    "stand_in",
    "to_pytest",
]

_publish(__name__, globals(), __all__)
