"""The user's own message is shown as the model's answer is: a key, a URL's password or a value
given as ``password=...`` in it reads ``***`` live, in every static form a notebook saves and
in the widget state saved with it (the inbox always showed it so)."""

from __future__ import annotations

import json

import ipywidgets
from _views import widgets_in

from nbagent import Chat, Tool
from nbagent.notebook import ChatView
from nbagent.notebook._fallback import bundle_for, chat_mimebundle
from nbagent.notebook._state import state_for
from nbagent.testing import ScriptedProvider, call_tools, reply

KEY = "sk-proj-ABCdef1234567890XYZabcdEFG"
PASSWORD = "hunter2-very-secret"
DSN = f"postgresql://admin:{PASSWORD}@db.example/prod"
PROMPT = f"Use my key {KEY} and password={PASSWORD} to connect to {DSN}"


class Connect(Tool):
    """Connect to a database."""

    requires_approval = True

    def execute(self, host: str) -> str:
        return "connected"


def saved_widget_state(view: ChatView) -> str:
    """Every widget's state as a notebook saves it (``application/vnd.jupyter.widget-state``)."""
    return json.dumps([w.get_state() for w in widgets_in(view)], default=str)


def shown(view: ChatView, chat: Chat) -> list[str]:
    texts = [saved_widget_state(view)]
    texts += [w.value for w in widgets_in(view) if isinstance(w, ipywidgets.HTML)]
    texts += list(bundle_for(state_for(chat)).values())
    texts += list(chat_mimebundle(chat).values())
    return texts


def assert_hidden(texts: list[str]) -> None:
    for text in texts:
        assert "hunter2" not in text and "ABCdef1234567890" not in text, text[:3000]


def test_the_users_message_shows_no_key_and_no_password_pending_and_settled() -> None:
    chat = Chat(
        provider=ScriptedProvider([call_tools(("connect", {"host": "db"}, "c1")), reply("done")]),
        display=False,
    ).with_tools(Connect)
    view = ChatView(chat)
    chat.ask(PROMPT)
    assert chat.pending_approvals  # the card waits: what a person sees while deciding
    texts = shown(view, chat)
    assert_hidden(texts)
    plain = chat_mimebundle(chat)["text/plain"]
    assert "You: Use my key sk-*** and password=*** to connect to postgresql://***@db." in plain
    markdown = chat_mimebundle(chat)["text/markdown"]
    assert "**You:** Use my key sk-\\*\\*\\* and password=\\*\\*\\* to connect" in markdown
    live = view_html_of(view)
    assert "</span>Use my key sk-*** and password=*** to connect to postgresql://***@db." in live
    chat.approve("c1")
    chat.complete()
    assert_hidden(shown(view, chat))
    # the model read the message as the user wrote it: only what is shown is scrubbed
    assert chat.transcript[0].content == PROMPT


def view_html_of(view: ChatView) -> str:
    return "".join(w.value for w in widgets_in(view) if isinstance(w, ipywidgets.HTML))
