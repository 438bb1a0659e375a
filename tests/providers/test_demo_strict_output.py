"""The demo model refuses a structured answer's type no real provider can take.

``ask(output=...)`` with a ``dict[str, int]`` field, ``Any``, a tuple, a top-level list or
``not`` was answered by the demo model (or failed validation after a paid-looking retry),
while OpenAI's and Anthropic's adapters refuse each with ``OutputSchemaError`` before
anything is sent: a type prototyped offline failed on every real provider. The demo model
runs the same strict-schema check now.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from nbagent import (
    AnthropicProvider,
    Chat,
    ChatMessage,
    DemoProvider,
    ModelRequest,
    OpenAIProvider,
    OutputSchemaError,
)


class Counts(BaseModel):
    by_word: dict[str, int]


class Loose(BaseModel):
    value: Any


class Pair(BaseModel):
    pair: tuple[int, str]


class Forecast(BaseModel):
    city: str
    high_c: float
    tags: list[str]


LIST = {"type": "array", "items": {"type": "integer"}}
NOT = {"type": "object", "properties": {"a": {"not": {"type": "string"}}}}
REFUSED = [Counts, Loose, Pair, LIST, NOT]


@pytest.mark.parametrize("output", REFUSED, ids=["dict", "any", "tuple", "list", "not"])
def test_what_every_real_provider_refuses_the_demo_refuses(output: Any) -> None:
    real = [
        OpenAIProvider("gpt-4.1-mini", api_key="sk-x"),
        OpenAIProvider("gpt-4.1-mini", api="responses", api_key="sk-x"),
        AnthropicProvider("claude-sonnet-4-5", api_key="sk-ant-x"),
    ]
    for provider in real:  # the standard the demo keeps to
        with pytest.raises(OutputSchemaError):
            Chat(provider=provider, display=False).ask("x", output=output)
        provider.close()
    chat = Chat(model="demo", display=False)
    with pytest.raises(OutputSchemaError, match="Nothing was sent"):
        chat.ask("What is the forecast?", output=output)
    assert len(chat.transcript) == 0  # nothing added, nothing answered
    with pytest.raises(OutputSchemaError):  # by hand too
        DemoProvider().complete(ModelRequest((ChatMessage("user", "forecast?"),), output=output))


def test_a_type_they_take_is_still_answered() -> None:
    reply = Chat(model="demo", display=False).ask("Forecast for Oslo", output=Forecast)
    assert isinstance(reply.parsed, Forecast)
