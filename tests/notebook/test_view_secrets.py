"""Secrets never reach the screen: what the view shows (live, and in the three static forms a
notebook saves) of a tool's traceback, of a continuation that failed, of the arguments a model
sent and of its answer holds no API key or URL password, as the log, the inbox and the error
lines never did."""

from __future__ import annotations

import ipywidgets
from _views import widgets_in

from nbagent import Chat, Tool, tool
from nbagent.notebook import ChatView
from nbagent.notebook import _continuation as cont
from nbagent.notebook._fallback import bundle_for, chat_mimebundle
from nbagent.notebook._state import state_for
from nbagent.notebook._widgets import ActionCard
from nbagent.testing import ScriptedProvider, call_tools, reply

KEY = "sk-proj-ABCdef1234567890XYZabcdEFG"
PASSWORD = "hunter2-very-secret"
DSN = f"postgresql://admin:{PASSWORD}@db.example/prod"


def card_for(view: ChatView, call_id: str) -> ActionCard:
    (card,) = [w for w in widgets_in(view) if isinstance(w, ActionCard) and w.call_id == call_id]
    return card


def view_html(view: ChatView) -> str:
    return "".join(
        w.value for w in widgets_in(view) if isinstance(w, (ipywidgets.HTML, ActionCard))
    )


def everything(view: ChatView, chat: Chat) -> list[str]:
    """What a person can see of the chat: the live view, its editors, every static form."""
    shown = [view_html(view)]
    shown += [w.arguments for w in widgets_in(view) if isinstance(w, ActionCard)]
    shown += list(bundle_for(state_for(chat)).values())
    shown += list(chat_mimebundle(chat).values())
    return shown


def assert_no_secret(texts: list[str]) -> None:
    for text in texts:
        assert KEY not in text and PASSWORD not in text, text[:2000]
        assert "hunter2" not in text and "ABCdef1234567890" not in text


# ------------------------------------------------------------------ a tool's traceback
def test_a_failed_tools_traceback_shows_no_key_and_no_dsn_password() -> None:
    @tool
    def fetch_orders(region: str) -> str:
        """Fetch orders."""
        try:
            raise ConnectionError(f"{DSN} refused")
        except ConnectionError as exc:
            raise RuntimeError(f"upstream rejected key {KEY}") from exc

    chat = Chat(
        provider=ScriptedProvider(
            [call_tools(("fetch_orders", {"region": "eu"}, "f1")), reply("sorry")]
        ),
        display=False,
    ).with_tools(fetch_orders)
    view = ChatView(chat)
    chat.ask("orders?")
    html = view_html(view)
    assert "traceback</summary>" in html and "fetch_orders" in html  # the fold is there
    assert "upstream rejected key sk-***" in html and "postgresql://***@db.example" in html
    assert_no_secret(everything(view, chat))
    # a view made after the failure reads the traceback kept for it: redacted too
    later = ChatView(chat)
    assert "traceback</summary>" in view_html(later)
    assert_no_secret(everything(later, chat))


# ------------------------------------------------------- a continuation that failed
class Refund(Tool):
    """Refund an order."""

    requires_approval = True

    def execute(self, order_id: int) -> str:
        return "ok"


def test_a_failed_continuation_is_shown_without_key_or_password() -> None:
    failure = ConnectionError(f"could not reach https://user:{PASSWORD}@api.example/v1 with {KEY}")
    chat = Chat(
        provider=ScriptedProvider(
            [call_tools(("refund", {"order_id": 1}, "r1")), failure, reply("fin")]
        ),
        display=False,
    ).with_tools(Refund)
    view = ChatView(chat)
    chat.ask("go")
    card_for(view, "r1").click("approve")
    assert cont.continuation_for(chat).wait(10)
    assert cont.continuation_for(chat).last_error is failure  # kept whole, for code
    data = bundle_for(state_for(chat))
    for kind in ("text/html", "text/markdown", "text/plain"):
        assert "Continuing after your decision failed" in data[kind], kind
    assert "https://***@api.example" in data["text/plain"] and "sk-***" in data["text/plain"]
    assert "Traceback" in data["text/html"]  # the details are there, redacted
    assert_no_secret(everything(view, chat))
