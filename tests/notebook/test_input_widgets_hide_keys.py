"""A live input card's widget state sends no key to the browser.

The card's HTML hides keys (``***``) since the cards were redacted, but the widget's own
state went to the browser as given: ``ask_user``'s choice buttons and a form's field
titles, descriptions, options and defaults showed an ``sk-...`` key, a ``Bearer`` token or
URL credentials in clear. They are hidden now, and a button or option that showed a key
as ``***`` still answers with the choice itself.
"""

from __future__ import annotations

import json
from typing import Any

from test_input_cards import answers_with_results, asking, clicking, input_cards

from nbagent import Chat, current_input_asker, tool
from nbagent.notebook import ChatView
from nbagent.notebook._widgets import ActionCard

SK = "sk-proj-Abc123Def456Ghi789Jkl012Mno345"
URL = "https://admin:hunter2-horse@db.example.org/x"


def sent_to_browser(card: ActionCard) -> str:
    return json.dumps({"choices": card.choices, "fields": card.fields, "value": card.value})


def test_choice_buttons_show_no_key_and_still_answer_with_the_choice() -> None:
    chat = asking(f"Which key, {SK}?", ["none", f"use {SK}"])
    view = ChatView(chat)
    chat.ask("go")
    (card,) = input_cards(view)
    shown = sent_to_browser(card)
    assert SK not in shown and "hunter2" not in shown
    assert card.choices == ["none", "use sk-***"]
    card.click("accept", data="use sk-***")  # the button as the browser has it
    assert view.continuation.wait(10)
    assert card.state == "answered"
    (record,) = chat.record.inputs
    assert record.status == "accept"  # the choice itself, as the model wrote it
    assert SK not in repr(chat.record.inputs)


FORM: dict[str, Any] = {
    "type": "object",
    "properties": {
        "dsn": {"type": "string", "title": f"DSN (now {URL})", "default": URL},
        "key": {
            "type": "string",
            "title": "Key",
            "description": f"the old one was {SK}",
            "oneOf": [
                {"const": SK, "title": f"keep {SK}"},
                {"const": "rotate", "title": "Rotate"},
            ],
        },
    },
    "required": ["dsn", "key"],
}


def test_a_forms_titles_options_and_defaults_show_no_key_and_answer_as_given() -> None:
    got: list[Any] = []

    @tool
    def book(day: str) -> str:
        """Book something; asks the user mid-call (as an MCP server's form does)."""
        asker = current_input_asker()
        assert asker is not None
        _, future = asker.ask("elicitation", "Details?", {"requestedSchema": FORM}, FORM, "db")
        got.append(future.result(timeout=60))
        return "booked"

    chat = Chat(
        provider=answers_with_results(("book", {"day": "Friday"}, "c1")), display=False
    ).with_tools(book)
    view = ChatView(chat)
    seen: dict[str, Any] = {}

    def person(card: ActionCard) -> None:
        seen["shown"] = sent_to_browser(card)
        by_name = {f["name"]: f for f in card.fields}
        seen["by_name"] = by_name
        keep = by_name["key"]["options"][0]["value"]
        card.click("accept", data={"dsn": by_name["dsn"]["default"], "key": keep})
        seen["error"] = card.error

    t = clicking(view, person)
    final = chat.ask("book Friday")
    t.join(30)
    assert not t.errors, t.errors  # type: ignore[attr-defined]
    assert SK not in seen["shown"] and "hunter2" not in seen["shown"], seen["shown"]
    by_name = seen["by_name"]
    assert by_name["dsn"]["label"] == "DSN (now https://***@db.example.org/x)"
    assert by_name["key"]["description"] == "the old one was sk-***"
    assert [o["label"] for o in by_name["key"]["options"]] == ["keep sk-***", "Rotate"]
    assert not seen["error"]
    assert final is not None and final.content == "booked"
    # the call got what the person chose: the default and the option themselves
    assert got == [("accept", {"dsn": URL, "key": SK})]
