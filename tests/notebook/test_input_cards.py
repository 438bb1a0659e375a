"""Pending inputs as cards with buttons in the live view, clicked in the kernel.

Each input a person is asked for (an elicitation's form, a URL, a sampling request,
``ask_user``'s question, an external call's result) gets a card of kind ``input``
under its call's card; a click answers through ``chat.answer`` / ``chat.decline``
(``by`` the card's "you"), the view's one continuation carries the chat on, and the
card folds to one line ("Answered by you after 2 s"). A bad value shows its error on
the card and the input still waits. Cards are driven as the browser drives them:
``card.click(kind, data=...)`` with the values as entered (text, a checkbox's bool).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from _views import widgets_in
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nbagent import (
    Chat,
    InputAnswered,
    InputError,
    MCPServer,
    ModelRequest,
    ask_user,
    current_input_asker,
    tool,
)
from nbagent._schema import validate_json_schema
from nbagent.notebook import ChatView
from nbagent.notebook._forms import FormError, for_browser, form_answer, form_fields
from nbagent.notebook._widgets import ActionCard
from nbagent.testing import ScriptedProvider, call_tools, reply

INPUTS_SERVER = str(Path(__file__).parents[1] / "mcp_client" / "inputs_server.py")


def answers_with_results(*calls: tuple[str, dict[str, Any], str]) -> ScriptedProvider:
    """Asks for ``calls``, then says what the tools answered ("A | B"); a sampling request
    (a 'Summarize:' message, no tools) gets a fixed summary."""

    def answer(request: ModelRequest) -> Any:
        texts = [getattr(m, "content", "") or "" for m in request.messages]
        if texts and str(texts[-1]).startswith("Summarize:"):
            return reply("a short summary")
        results = [m for m in request.messages if getattr(m, "role", "") == "tool"]
        if not results:
            return call_tools(*calls)
        return reply(" | ".join(m.content for m in results))

    return ScriptedProvider([answer], repeat_last=True)


def input_cards(view: ChatView) -> list[ActionCard]:
    return [w for w in widgets_in(view) if isinstance(w, ActionCard) and w.kind == "input"]


def the_card(view: ChatView, seconds: float = 30.0) -> ActionCard:
    """The pending input card, once the view shows it (a call asks from another thread)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        cards = [c for c in input_cards(view) if c.state == "pending"]
        if cards:
            return cards[0]
        time.sleep(0.02)
    raise AssertionError("no input card was shown")


def clicking(view: ChatView, person: Callable[[ActionCard], None]) -> threading.Thread:
    """A person at the card (the click arrives on another thread, as from a subshell)."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            person(the_card(view))
        except BaseException as exc:  # reported by the test's own assertions
            errors.append(exc)

    t = threading.Thread(target=run, daemon=True)
    t.errors = errors  # type: ignore[attr-defined]
    t.start()
    return t


def asking(question: str, choices: list[str] | None = None, **chat_kwargs: Any) -> Chat:
    """A chat whose model asks the person ``question`` (``ask_user``, call ``q1``), then
    says the answer."""
    arguments: dict[str, Any] = {"question": question}
    if choices is not None:
        arguments["choices"] = choices
    provider = answers_with_results(("ask_user", arguments, "q1"))
    return Chat(provider=provider, display=False, **chat_kwargs).with_tools(ask_user)


# ------------------------------------------------------------------------------ ask_user
def test_a_choice_button_answers_ask_user_and_the_chat_carries_on() -> None:
    chat = asking("Ship <b>today</b>?", ["yes", "no"])
    view = ChatView(chat)
    chat.ask("go")
    (card,) = input_cards(view)
    assert (card.state, card.input_kind, card.input_id, card.choices) == (
        "pending",
        "ask_user",
        "q1",
        ["yes", "no"],
    )
    assert "Ship &lt;b&gt;today&lt;/b&gt;?" in card.value and "<b>today" not in card.value
    assert 'class="nba-controls"' in card.value  # where the buttons go
    # one place shows the question live: the call's own card leaves it to the input card
    shown = [w.value for w in widgets_in(view) if 'data-input-id="q1"' in getattr(w, "value", "")]
    assert shown == [card.value]

    card.click("accept", data="yes")
    assert view.continuation.wait(10)
    assert chat.status == "complete"
    assert chat.last_assistant_message.content == "yes"
    assert card.state == "answered"
    assert card.summary.startswith("Answered by you after ")
    (record,) = chat.record.inputs
    assert (record.status, record.answered_by, record.data) == ("accept", "user", "yes")
    # the saved (static) form keeps the line on the call's card
    assert "question</span> Answered by you after " in view.fallback_bundle()["text/html"]


def test_a_choice_with_spaces_is_answered_as_the_model_wrote_it() -> None:
    """``choices: ["Yes ", " No"]``: the button sends the choice as given, and the card
    stripped it to "Yes", which no choice is: no button could ever answer."""
    chat = asking("Ship?", ["Yes ", " No"])
    view = ChatView(chat)
    chat.ask("go")
    (card,) = input_cards(view)
    card.click("accept", data=" No")
    assert view.continuation.wait(10)
    assert (card.state, card.error) == ("answered", "")
    assert chat.last_assistant_message.content == " No"  # type: ignore[union-attr]


def test_a_click_that_loses_to_an_answer_from_the_store_carries_the_turn_on(
    tmp_path: Path,
) -> None:
    """Answered in another process through the store, then clicked here before this kernel's
    follower saw it: the click records nothing, the card says who answered, and the turn
    goes on with that answer (it stopped there: the model was never asked again)."""
    from nbagent.store import SQLiteStore

    db = tmp_path / "chats.db"
    chat = asking("Colour?", ["red", "green"], store=db)
    view = ChatView(chat)
    chat.ask("go")
    (card,) = input_cards(view)
    with SQLiteStore(db) as other:
        other.answer("q1", "green", by="ops", chat_id=chat.id)
    card.click("accept", data="red")
    assert view.continuation.wait(10)
    assert chat.status == "complete"
    assert chat.last_assistant_message.content == "green"  # type: ignore[union-attr]
    assert card.state == "answered" and "already answered elsewhere" in card.error
    (record,) = chat.record.inputs
    assert (record.status, record.answered_by) == ("accept", "ops")
    chat.close()


def test_an_empty_or_wrong_answer_shows_an_error_and_the_question_still_waits() -> None:
    chat = Chat(
        provider=answers_with_results(
            ("ask_user", {"question": "Size?", "choices": ["S", "M"]}, "q1")
        ),
        display=False,
    ).with_tools(ask_user)
    view = ChatView(chat)
    chat.ask("go")
    (card,) = input_cards(view)
    card.click("accept", data="XL")  # not one of the choices
    assert card.state == "pending" and "does not match" in card.error
    card.click("accept", data="  ")
    assert card.state == "pending" and "Write an answer first" in card.error
    assert [p.id for p in chat.pending_inputs] == ["q1"]  # nothing lost, nothing sent
    assert chat.record.inputs[0].status == "pending"
    card.click("accept", data="M")
    assert view.continuation.wait(10)
    assert card.state == "answered" and card.error == ""
    assert chat.last_assistant_message.content == "M"


def test_decline_with_a_reason_tells_the_model_and_folds_the_card() -> None:
    chat = Chat(
        provider=answers_with_results(("ask_user", {"question": "Your address?"}, "q1")),
        display=False,
    ).with_tools(ask_user)
    view = ChatView(chat)
    chat.ask("go")
    (card,) = input_cards(view)
    assert card.choices == []  # free text: a text box
    card.click("decline", reason="private")
    assert view.continuation.wait(10)
    assert card.state == "declined"
    assert card.summary == "Declined by you: private"
    assert "declined to answer: private" in chat.last_assistant_message.content


def test_an_answer_given_in_code_folds_the_card_as_in_code() -> None:
    chat = Chat(
        provider=answers_with_results(("ask_user", {"question": "Size?"}, "q1")), display=False
    ).with_tools(ask_user)
    view = ChatView(chat)
    chat.ask("go")
    (card,) = input_cards(view)
    chat.answer("q1", "M")
    assert card.state == "answered" and card.summary.startswith("Answered in code after ")
    card.click("accept", data="S")  # too late: the card is decided, nothing changes
    assert chat.record.inputs[0].data == "M"
    chat.complete()
    assert chat.last_assistant_message.content == "M"


def test_a_view_of_a_waiting_chat_stays_live_and_shows_the_card() -> None:
    """A view made later (a loaded chat, a new cell) shows the waiting input's card too."""
    chat = Chat(
        provider=answers_with_results(("ask_user", {"question": "Size?"}, "q1")), display=False
    ).with_tools(ask_user)
    chat.ask("go")
    view = ChatView(chat)
    assert view.pending()  # an input waits: the view is not done
    (card,) = input_cards(view)
    card.click("accept", data="L")
    assert view.continuation.wait(10)
    assert chat.last_assistant_message.content == "L"
    assert not view.pending()


# ------------------------------------------------------------------------------ external
@tool(external=True)
def sign_contract(customer: str) -> str:
    """Have the customer sign the contract (done by a person)."""
    raise AssertionError("an external tool never runs here")


def test_an_external_result_is_submitted_from_its_card() -> None:
    chat = Chat(
        provider=answers_with_results(("sign_contract", {"customer": "ACME <Ltd>"}, "x1")),
        display=False,
    ).with_tools(sign_contract)
    view = ChatView(chat)
    chat.ask("get it signed")
    (card,) = input_cards(view)
    assert card.input_kind == "external"
    assert "ACME &lt;Ltd&gt;" in card.value  # what the result is for, escaped
    card.click("accept", data="")
    assert card.state == "pending" and "Write the result first" in card.error
    card.click("accept", data="signed on 2 Dec\nby J. Doe")
    assert view.continuation.wait(10)
    assert card.state == "answered"
    assert chat.get_call("x1").status == "ok"
    assert chat.last_assistant_message.content == "signed on 2 Dec\nby J. Doe"


# ------------------------------------------------------- mid-call: form, URL, sampling
BOOKING = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Name", "minLength": 2},
        "email": {"type": "string", "format": "email"},
        "guests": {"type": "integer", "minimum": 1, "maximum": 12},
        "vegetarian": {"type": "boolean", "default": False},
        "seat": {
            "type": "string",
            "oneOf": [{"const": "in", "title": "Inside"}, {"const": "out", "title": "Terrace"}],
        },
        "extras": {"type": "array", "items": {"type": "string", "enum": ["cake", "flowers"]}},
    },
    "required": ["name", "guests"],
}


def asking_tool(kind: str, content: dict[str, Any], schema: dict[str, Any] | None) -> Any:
    """A tool that asks a person mid-call (as an MCP server's request does) and returns
    what it got back."""

    @tool
    def book(day: str) -> str:
        """Book something; asks the user mid-call."""
        asker = current_input_asker()
        assert asker is not None
        _, future = asker.ask(kind, f"Details for {day}?", content, schema, "shop")
        action, data = future.result(timeout=60)
        return f"{action}: {data}"

    return book


def test_an_elicitation_form_accepts_typed_values_after_a_bad_one() -> None:
    chat = Chat(
        provider=answers_with_results(("book", {"day": "Friday"}, "c1")), display=False
    ).with_tools(asking_tool("elicitation", {"requestedSchema": BOOKING}, BOOKING))
    view = ChatView(chat)
    seen: dict[str, Any] = {}

    def person(card: ActionCard) -> None:
        seen["fields"] = card.fields
        seen["value"] = card.value
        card.click("accept", data={"name": "Ada", "guests": "40"})
        seen["error"], seen["state"] = card.error, card.state
        seen["still"] = [p.kind for p in chat.pending_inputs]
        card.click(
            "accept",
            data={
                "name": "Ada",
                "email": "ada@example.org",
                "guests": "4",
                "vegetarian": True,
                "seat": '"out"',
                "extras": ['"cake"'],
            },
        )

    t = clicking(view, person)
    final = chat.ask("book Friday")
    t.join(30)
    assert not t.errors, t.errors  # type: ignore[attr-defined]
    by_name = {f["name"]: f for f in seen["fields"]}
    assert by_name["name"]["required"] and not by_name["email"]["required"]
    assert by_name["email"]["input_type"] == "email"
    assert by_name["vegetarian"] == {
        **by_name["vegetarian"],
        "widget": "checkbox",
        "default": False,
    }
    assert by_name["seat"]["options"] == [
        {"value": '"in"', "label": "Inside"},
        {"value": '"out"', "label": "Terrace"},
    ]
    assert by_name["extras"]["widget"] == "multi"
    assert "shop asks you to fill in" in seen["value"] and "Details for Friday?" in seen["value"]
    assert seen["state"] == "pending" and "guests: must be at most 12" in seen["error"]
    assert seen["still"] == ["elicitation"]  # the bad value lost nothing
    assert final is not None
    expected = {
        "name": "Ada",
        "email": "ada@example.org",
        "guests": 4,
        "vegetarian": True,
        "seat": "out",
        "extras": ["cake"],
    }
    assert final.content == f"accept: {expected}"
    (card,) = input_cards(view)
    assert card.state == "answered" and card.summary.startswith("Answered by you after ")


@pytest.mark.parametrize("button", ["decline", "cancel"])
def test_decline_and_cancel_on_a_form(button: str) -> None:
    chat = Chat(
        provider=answers_with_results(("book", {"day": "Friday"}, "c1")), display=False
    ).with_tools(asking_tool("elicitation", {"requestedSchema": BOOKING}, BOOKING))
    view = ChatView(chat)
    t = clicking(view, lambda card: card.click(button))
    final = chat.ask("book Friday")
    t.join(30)
    assert final is not None and final.content == f"{button}: None"
    (card,) = input_cards(view)
    assert card.summary == ("Declined by you" if button == "decline" else "Cancelled by you")


def test_a_url_card_links_to_the_page_in_a_new_tab_and_done_answers() -> None:
    url = "https://example.com/connect?a=1&b=<2>"
    chat = Chat(
        provider=answers_with_results(("book", {"day": "Friday"}, "c1")), display=False
    ).with_tools(asking_tool("elicitation_url", {"url": url}, None))
    view = ChatView(chat)
    seen: dict[str, str] = {}

    def person(card: ActionCard) -> None:
        seen["value"] = card.value
        card.click("accept")

    t = clicking(view, person)
    final = chat.ask("connect")
    t.join(30)
    assert (
        'href="https://example.com/connect?a=1&amp;b=&lt;2&gt;" target="_blank" '
        'rel="noopener noreferrer"' in seen["value"]
    )
    assert final is not None and final.content == "accept: None"
    (card,) = input_cards(view)
    assert card.summary.startswith("Done by you after ")


SAMPLING = {
    "messages": [{"role": "user", "content": {"type": "text", "text": "Summarize: <the minutes>"}}],
    "systemPrompt": "Be brief.",
    "maxTokens": 50,
    "modelPreferences": {"hints": [{"name": "claude-haiku"}], "costPriority": 0.8},
}


@pytest.mark.parametrize("reply_myself", [False, True])
def test_a_sampling_card_shows_the_exact_request_and_approves_or_takes_my_reply(
    reply_myself: bool,
) -> None:
    chat = Chat(
        provider=answers_with_results(("book", {"day": "Friday"}, "c1")), display=False
    ).with_tools(asking_tool("sampling", SAMPLING, None))
    view = ChatView(chat)
    seen: dict[str, str] = {}

    def person(card: ActionCard) -> None:
        seen["value"] = card.value
        card.click("accept", data="my own summary" if reply_myself else None)

    t = clicking(view, person)
    final = chat.ask("summarize")
    t.join(30)
    assert (
        "system: Be brief.\nuser: Summarize: &lt;the minutes&gt;\n(at most 50 tokens)\n"
        "(model preferences: models like claude-haiku, cost 0.8)"
    ) in seen["value"]
    assert final is not None
    # the tool got back what the card gave: the person's text, or None (approved: the
    # caller, an MCP server's client, runs the model)
    assert final.content == ("accept: my own summary" if reply_myself else "accept: None")
    (card,) = input_cards(view)
    if reply_myself:
        assert card.summary.startswith("Answered by you (your own reply, the model was not asked)")
    else:
        assert card.summary.startswith("Approved by you after ")


# ------------------------------------------------------ a real MCP server's elicitation
@pytest.fixture(scope="module")
def inputs_server() -> Iterator[MCPServer]:
    s = MCPServer.stdio(sys.executable, [INPUTS_SERVER], prefix="inp", timeout=60)
    s.connect()
    yield s
    s.close()


def test_a_real_servers_form_filled_on_its_card_runs_the_tool_once(
    inputs_server: MCPServer,
) -> None:
    chat = Chat(
        provider=answers_with_results(("inp_book_table", {"day": "Friday"}, "c1")), display=False
    ).with_tools(inputs_server)
    view = ChatView(chat)
    seen: dict[str, Any] = {}

    def person(card: ActionCard) -> None:
        seen["labels"] = [(f["label"], f["required"], f["widget"]) for f in card.fields]
        card.click("accept", data={"name": "Ada", "guests": "three"})
        seen["error"] = card.error
        card.click("accept", data={"name": "Ada", "guests": "3", "vegetarian": True})

    t = clicking(view, person)
    final = chat.ask("book a table on Friday")
    t.join(30)
    assert not t.errors, t.errors  # type: ignore[attr-defined]
    assert seen["labels"] == [
        ("Name", True, "text"),
        ("Guests", True, "number"),
        ("Vegetarian", False, "checkbox"),
    ]
    assert "Guests: 'three' is not a number" in seen["error"]
    assert final is not None
    assert "booked Friday for Ada, 3 guests, vegetarian=True (run " in final.content
    assert chat.get_call("c1").status == "ok"
    (card,) = input_cards(view)
    assert card.state == "answered"


DURABLE_SERVER = str(Path(__file__).parents[1] / "mcp_client" / "durable_server.py")


def test_a_parked_2026_call_is_answered_on_its_card_and_retried_once(tmp_path: Path) -> None:
    """With a store, a 2026-07-28 server's form parks the call (the cell returns); a click
    on the card answers it and the view's one continuation retries the call once."""
    counter = tmp_path / "runs"
    server = MCPServer.stdio(
        sys.executable,
        [DURABLE_SERVER],
        prefix="dur",
        timeout=60,
        approval="never",
        env={"NBAGENT_TEST_COUNTER": str(counter)},
    )
    chat = Chat(
        provider=answers_with_results(("dur_book_table", {"day": "Friday"}, "c1")),
        display=False,
        store=str(tmp_path / "agent.db"),
    ).with_tools(server)
    try:
        view = ChatView(chat)
        chat.ask("book a table on Friday")  # returns parked: nothing waits in memory
        assert chat.get_call("c1").status == "awaiting_input"
        card = the_card(view)
        assert [f["label"] for f in card.fields][:2] == ["Name", "Guests"]
        assert not counter.exists()
        card.click("accept", data={"name": "Ada", "guests": "2"})
        assert card.error in (None, ""), card.error
        assert view.continuation.wait(60)
        assert chat.status == "complete", chat.status
        assert chat.get_call("c1").status == "ok"
        assert len(counter.read_text().splitlines()) == 1  # the server ran it once
        assert "booked Friday for Ada, 2 guests" in chat.last_assistant_message.content
        assert card.state == "answered"
    finally:
        chat.close()
        server.close()


# ------------------------------------------------------------------- the form's values
_LABEL = st.text("abcdefgh", min_size=1, max_size=6)


@st.composite
def form_and_values(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """A flat elicitation schema, values that fit it, and those values as a browser sends
    them (numbers as text, options as their JSON text)."""
    names = draw(st.lists(_LABEL, min_size=1, max_size=5, unique=True))
    props: dict[str, Any] = {}
    values: dict[str, Any] = {}
    raw: dict[str, Any] = {}
    for name in names:
        kind = draw(st.sampled_from(["string", "integer", "number", "boolean", "enum", "multi"]))
        if kind == "string":
            text = draw(st.text(min_size=1, max_size=20).filter(str.strip))
            props[name] = {"type": "string", "minLength": 1, "maxLength": 20}
            values[name], raw[name] = text, text
        elif kind == "integer":
            n = draw(st.integers(-50, 50))
            props[name] = {"type": "integer", "minimum": -50, "maximum": 50}
            values[name], raw[name] = n, str(n)
        elif kind == "number":
            x = draw(st.floats(-1e6, 1e6, allow_nan=False).map(lambda v: round(v, 3)))
            props[name] = {"type": "number"}
            values[name], raw[name] = x, repr(x)
        elif kind == "boolean":
            b = draw(st.booleans())
            props[name] = {"type": "boolean"}
            values[name], raw[name] = b, b
        elif kind == "enum":
            options = draw(st.lists(_LABEL, min_size=1, max_size=4, unique=True))
            pick = draw(st.sampled_from(options))
            props[name] = {"type": "string", "enum": options}
            values[name], raw[name] = pick, f'"{pick}"'
        else:
            options = draw(st.lists(_LABEL, min_size=1, max_size=4, unique=True))
            picks = draw(st.lists(st.sampled_from(options), min_size=1, unique=True))
            picks = [o for o in options if o in picks]
            props[name] = {"type": "array", "items": {"type": "string", "enum": options}}
            values[name], raw[name] = picks, [f'"{p}"' for p in picks]
    schema = {"type": "object", "properties": props, "required": names}
    return schema, values, raw


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(form_and_values())
def test_what_a_browser_sends_becomes_the_values_and_they_fit_the_schema(
    case: tuple[dict[str, Any], dict[str, Any], dict[str, Any]],
) -> None:
    schema, values, raw = case
    fields = form_fields(schema)
    assert [f["name"] for f in for_browser(fields)] == list(schema["properties"])
    answer = form_answer(fields, raw)
    assert answer == values
    assert validate_json_schema(answer, schema) == []


@settings(max_examples=100)
@given(form_and_values(), st.data())
def test_a_required_field_left_empty_is_named_and_nothing_is_answered(
    case: tuple[dict[str, Any], dict[str, Any], dict[str, Any]], data: st.DataObject
) -> None:
    schema, _, raw = case
    fields = form_fields(schema)
    texty = [f for f in fields if f["widget"] in ("text", "number", "select")]
    if not texty:
        return
    emptied = data.draw(st.sampled_from(texty))
    with pytest.raises(FormError, match=f"{emptied['label']}: required"):
        form_answer(fields, {**raw, emptied["name"]: "  "})


def test_form_checks_formats_bounds_and_defaults() -> None:
    fields = form_fields(BOOKING)
    with pytest.raises(FormError) as info:
        form_answer(fields, {"name": "A", "email": "nope", "guests": "2.5"})
    text = str(info.value)
    assert "Name: at least 2 characters" in text
    assert "email: 'nope' is not an email address" in text
    assert "guests: '2.5' is not a whole number" in text
    # left alone: an optional field is left out, a checkbox keeps its default
    assert form_answer(fields, {"name": "Ada", "guests": "2"}) == {
        "name": "Ada",
        "guests": 2,
        "vegetarian": False,
    }
    optional = form_fields(
        {
            "properties": {
                "when": {
                    "anyOf": [{"type": "string", "format": "date"}, {"type": "null"}],
                    "default": None,
                }
            }
        }
    )
    assert optional[0]["input_type"] == "date" and not optional[0]["required"]
    with pytest.raises(FormError, match="is not a date"):
        form_answer(optional, {"when": "2 Dec"})
    assert form_answer(optional, {"when": "2026-12-02"}) == {"when": "2026-12-02"}
    titled = form_fields(
        {"properties": {"c": {"type": "string", "enum": ["r", "g"], "enumNames": ["Red", "Green"]}}}
    )
    assert [o["label"] for o in titled[0]["options"]] == ["Red", "Green"]


@pytest.mark.parametrize("round_", range(15))
def test_a_click_racing_an_answer_in_code_records_one_answer(round_: int) -> None:
    """A click (a subshell's thread) and ``chat.answer`` in code at the same moment: one
    answer is recorded, the other is refused, and the card ends answered, never pending."""
    chat = Chat(
        provider=answers_with_results(("ask_user", {"question": "Size?"}, "q1")), display=False
    ).with_tools(ask_user)
    view = ChatView(chat)
    chat.ask("go")
    (card,) = input_cards(view)
    seen: list[str] = []
    chat.on(InputAnswered, lambda e: seen.append(e.by))
    start = threading.Barrier(2)
    refused: list[str] = []

    def in_code() -> None:
        start.wait()
        try:
            chat.answer("q1", "from code", by="script")
        except InputError:
            refused.append("code")

    def click() -> None:
        start.wait()
        card.click("accept", data="from the card")

    threads = [threading.Thread(target=in_code), threading.Thread(target=click)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert view.continuation.wait(10)
    assert len(seen) == 1  # one answer, whoever came first
    (record,) = chat.record.inputs
    assert record.answered_by == seen[0]
    assert card.state == "answered"
    if seen[0] == "script":
        assert card.summary.startswith("Answered by script after ")
    else:
        assert refused == ["code"] and card.summary.startswith("Answered by you after ")
    chat.complete()
    assert chat.last_assistant_message.content == record.data
