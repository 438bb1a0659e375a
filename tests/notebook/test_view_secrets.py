"""Secrets never reach the screen: what the view shows (live, and in the three static forms a
notebook saves) of a tool's traceback, of a continuation that failed, of the arguments a model
sent and of its answer holds no API key or URL password, as the log, the inbox and the error
lines never did."""

from __future__ import annotations

import json
from typing import Any

import ipywidgets
from _views import widgets_in
from hypothesis import given
from hypothesis import strategies as st

from nbagent import Chat, Tool, tool
from nbagent._errors import redact_keys
from nbagent._html import redacted, unredacted
from nbagent._types import ProviderItem
from nbagent.notebook import ChatView
from nbagent.notebook import _continuation as cont
from nbagent.notebook._fallback import bundle_for, chat_mimebundle
from nbagent.notebook._items import item_html, item_words
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


# ------------------------------------------------- the model's arguments and answer
STORED: list[dict[str, Any]] = []


class SetCredential(Tool):
    """Store a credential for a service."""

    requires_approval = True

    def execute(self, service: str, token: str, note: str = "") -> str:
        STORED.append({"service": service, "token": token, "note": note})
        return f"stored {token} for {service}"


ARGUMENTS = {"service": "billing", "token": KEY, "note": f"db at {DSN}"}


def credential_chat() -> tuple[Chat, ChatView]:
    STORED.clear()
    chat = Chat(
        provider=ScriptedProvider(
            [
                call_tools(("set_credential", ARGUMENTS, "s1")),
                reply(f"Saved your key {KEY}; the database is {DSN}."),
            ]
        ),
        display=False,
    ).with_tools(SetCredential)
    view = ChatView(chat)
    chat.ask("save my key")
    return chat, view


def test_arguments_and_the_answer_show_no_secret_and_approve_runs_the_real_ones() -> None:
    chat, view = credential_chat()
    card = card_for(view, "s1")
    assert "&quot;***&quot;" in card.value and "postgresql://***@db.example" in card.value
    # the editor starts from this: a value named as a secret is hidden whole, whatever its shape
    assert json.loads(card.arguments)["token"] == "***"
    assert card.editable
    assert_no_secret(everything(view, chat))
    card.click("approve")
    assert cont.continuation_for(chat).wait(10)
    assert STORED == [ARGUMENTS]  # what ran: the model's arguments, whole
    # the key is the call's token argument: hidden whole, as on the card
    assert "Saved your key ***;" in view_html(view)
    assert "<strong>" not in view_html(view)  # two *** in a line are not read as emphasis
    assert_no_secret(everything(view, chat))


def test_an_edit_left_around_a_secret_runs_its_real_text() -> None:
    chat, view = credential_chat()
    card = card_for(view, "s1")
    card.click("edit", arguments=card.arguments)  # approved as the editor showed it
    assert cont.continuation_for(chat).wait(10)
    assert STORED == [ARGUMENTS]
    chat, view = credential_chat()
    card = card_for(view, "s1")
    edited = {**json.loads(card.arguments), "service": "payments"}  # another value changed
    card.click("edit", arguments=edited)
    assert cont.continuation_for(chat).wait(10)
    assert STORED == [{**ARGUMENTS, "service": "payments"}]
    assert chat.record.get("s1").edited_arguments == {**ARGUMENTS, "service": "payments"}
    assert_no_secret(everything(view, chat))  # the edit's diff and its arguments too


def test_an_edit_of_the_text_around_a_secret_is_refused_and_nothing_runs() -> None:
    chat, view = credential_chat()
    card = card_for(view, "s1")
    edited = {**json.loads(card.arguments), "token": "sk-*** (rotated)"}
    card.click("edit", arguments=edited)
    assert card.state == "pending" and "holds a secret the card shows as ***" in card.error
    assert STORED == [] and [c.id for c in chat.pending_approvals] == ["s1"]
    card.click("edit", arguments={**edited, "token": "sk-new-0123456789abcdefXYZ"})  # replaced
    assert cont.continuation_for(chat).wait(10)
    assert STORED == [{**ARGUMENTS, "token": "sk-new-0123456789abcdefXYZ"}]


def test_review_prints_no_secret() -> None:
    chat, _view = credential_chat()
    printed: list[str] = []
    feed = iter(["a"])
    chat.review(input=lambda _p: next(feed), print=lambda *a: printed.append(" ".join(a)))
    assert STORED == [ARGUMENTS]
    assert "sk-***" in "\n".join(printed)
    assert_no_secret(printed)


secretish = st.sampled_from([KEY, DSN, "Bearer abcdefgh12345678", "sk-ant-api03-xyz1234567890"])
words = (
    st.text(max_size=12)
    | secretish
    | st.builds(lambda a, b: f"{a} {b} tail", st.text(max_size=5), secretish)
)
values = st.recursive(
    st.none() | st.booleans() | st.integers() | words,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(words, inner, max_size=4),
    max_leaves=20,
)


@given(st.dictionaries(words, values, max_size=5))
def test_what_the_editor_shows_edits_back_to_exactly_the_real_arguments(
    arguments: dict[str, Any],
) -> None:
    shown = redacted(arguments)
    assert_no_secret([json.dumps(shown)])
    try:
        back = unredacted(json.loads(json.dumps(shown)), arguments)
    except ValueError:  # two secrets shown alike: refused, never guessed
        assert len({redact_keys(s) for s in _texts(arguments)}) < len(set(_texts(arguments)))
        return
    assert back == arguments


def _texts(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [t for k, v in value.items() for t in (k, *_texts(v))]
    if isinstance(value, list):
        return [t for v in value for t in _texts(v)]
    return []


def test_what_the_provider_ran_itself_shows_no_secret() -> None:
    item = ProviderItem(
        "responses",
        "mcp_call",
        {"arguments": json.dumps({"token": KEY}), "output": f"connected to {DSN}"},
        server="vault",
        name="store_token",
        status="ok",
    )
    shown = [item_html(item), item_words(item)]
    assert "sk-***" in shown[0] and "postgresql://***@db.example" in shown[0]
    assert_no_secret(shown)


def test_every_kind_of_hidden_secret_in_an_answer_shows_as_stars_not_emphasis() -> None:
    from nbagent.notebook._render import _answer_html

    answer = (
        "Groq gsk_abcDEF0123456789ghijKLMN, then hf_abcDEF0123456789ghijKLMN; "
        "password='s3cret1' and backup password='other12'; "
        'JSON {"password": "s3cret1"} and https://me:pw9@db.example'
    )
    shown = _answer_html(answer)
    assert "<strong>" not in shown and "<em>" not in shown
    assert shown.count("***") == 6
    for secret in ("0123456789ghijKLMN", "s3cret1", "other12", "pw9@"):
        assert secret not in shown
    assert "<strong>bold</strong>" in _answer_html("a **bold** word, no secret")
