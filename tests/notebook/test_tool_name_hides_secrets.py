"""A tool name the model wrote is shown as the answer it reads is: ``password=...`` in the name
of a call to an unknown tool reads ``password=***`` live, in every static form a notebook saves,
in the saved widget state and in ``chat.log``'s display, while the record keeps the name the
model sent."""

from __future__ import annotations

import json

import ipywidgets
from _views import widgets_in

from nbagent import Chat, ToolResultMessage, tool
from nbagent.notebook import ChatView
from nbagent.notebook._fallback import bundle_for, chat_mimebundle
from nbagent.notebook._state import state_for
from nbagent.testing import ScriptedProvider, call_tools, reply

PASSWORD = "hunter2-very-secret"
NAME = f"password={PASSWORD}"


@tool
def get_weather(city: str) -> str:
    """The weather.

    Args:
        city: The city.
    """
    return "18 C"


def test_a_model_written_tool_name_shows_no_password() -> None:
    provider = ScriptedProvider([call_tools((NAME, {}, "c1")), reply("ok")])
    chat = Chat(provider=provider, display=False).with_tools(get_weather)
    view = ChatView(chat)
    chat.ask("go")
    answer = [m for m in provider.requests[-1].messages if isinstance(m, ToolResultMessage)]
    assert "password=***" in str(answer[-1].content)  # what the model reads
    texts = [json.dumps([w.get_state() for w in widgets_in(view)], default=str)]
    texts += [w.value for w in widgets_in(view) if isinstance(w, ipywidgets.HTML)]
    texts += list(bundle_for(state_for(chat)).values())
    bundle = chat_mimebundle(chat)
    texts += list(bundle.values())
    texts += list(chat.log._repr_mimebundle_().values())
    for text in texts:
        assert "hunter2" not in text, text[:3000]
    assert "tool password=***(" in bundle["text/plain"], bundle["text/plain"]
    assert "**tool `password=***`**" in bundle["text/markdown"], bundle["text/markdown"]
    assert "password=***" in bundle["text/html"]
    # the record keeps the model's own name
    assert chat.tool_calls[0].name == NAME
    assert chat.log["tool"].iloc[0] == NAME
