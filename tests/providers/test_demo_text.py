"""The demo model's text is a newcomer's first impression: it reads like a product.

Notes stand apart from lists, the model-only edit note never shows, DataFrames are
tables, quoted text reaches the call whole, structured answers take what the request
says, and answers to different requests differ from their first words.
"""

from __future__ import annotations

import json
from typing import Literal

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from pydantic import BaseModel

from nbagent import Chat, tool


@pytest.fixture(autouse=True)
def _no_display() -> None:
    import nbagent

    nbagent.configure(display=False)


@tool
def get_weather(city: str, unit: Literal["c", "f"] = "c") -> dict[str, object]:
    """Get the current weather for a city.

    Args:
        city: City name.
        unit: Temperature unit.
    """
    return {"city": city, "temperature": 18, "unit": unit}


@tool(requires_approval=True)
def send_email(to: str, body: str) -> str:
    """Send an email.

    Args:
        to: Recipient address.
        body: Message text.
    """
    return f"sent to {to}: {len(body.splitlines())} lines"


@tool
def search_orders(query: str) -> pd.DataFrame:
    """Search the orders.

    Args:
        query: What to look for.
    """
    return pd.DataFrame(
        {"order": [1, 2], "item": ["blue mug", "tea | pot"], "unit price": [9.5, 20.0]}
    )


def _markdown_tokens(text: str) -> list[str]:
    return [t.type for t in MarkdownIt("commonmark").enable("table").parse(text)]


def _paragraphs_outside_lists(text: str) -> list[str]:
    """The text of every paragraph that is not inside a list item, as Markdown renders it."""
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    depth, out = 0, []
    for i, t in enumerate(tokens):
        depth += {"list_item_open": 1, "list_item_close": -1}.get(t.type, 0)
        if t.type == "paragraph_open" and depth == 0:
            out.append(tokens[i + 1].content)
    return out


def test_a_note_after_an_answer_is_its_own_paragraph() -> None:
    chat = Chat(model="demo").with_tools(get_weather).with_tool_options(calls="one")
    text = chat.ask("Weather in Oslo and in Lima?").content
    assert "\n\nI only called get_weather for Oslo" in text
    assert any(p.startswith("I only called") for p in _paragraphs_outside_lists(text))


def test_a_note_after_a_list_is_not_glued_into_its_last_item() -> None:
    chat = Chat(model="demo").with_tools(get_weather, send_email)
    chat.ask("Weather in Oslo, then send an email to al@example.com saying hi")
    chat.deny(chat.pending_approvals[0], reason="not now")
    text = chat.complete().content
    assert text.startswith("- get_weather(city=Oslo"), text
    assert "1 of 2 tool call(s) succeeded." in _paragraphs_outside_lists(text)


def test_the_edit_note_never_reaches_the_answer_or_the_view() -> None:
    chat = Chat(model="demo").with_tools(send_email)
    chat.ask("Send an email to bob@example.com saying hello")
    chat.approve(
        chat.pending_approvals[0], arguments={"to": "al@example.com", "body": "Edited text"}
    )
    answer = chat.complete().content
    assert "[The user edited" not in answer
    # The answer names the arguments the tool ran with, and says they were edited.
    assert (
        "send_email(to=al@example.com, body=Edited text) (arguments edited before it ran)" in answer
    )
    assert "bob@example.com" not in answer
    shown = chat._repr_mimebundle_()
    for kind in ("text/plain", "text/markdown", "text/html"):
        assert "The user edited" not in shown[kind], kind
    # The model itself was told (the note is for it): the transcript keeps it.
    assert any("[The user edited" in m.content for m in chat.transcript if m.role == "tool")


def test_a_dataframe_result_is_a_markdown_table() -> None:
    chat = Chat(model="demo").with_tools(search_orders)
    text = chat.ask("Search orders for mugs").content
    assert "|  | order | item | unit price |" in text
    assert "| 1 | 2 | tea \\| pot | 20.0 |" in text
    tokens = _markdown_tokens(text)
    assert "table_open" in tokens and tokens.count("tr_open") == 3  # header and two rows


def test_a_frame_it_cannot_read_as_a_table_stays_aligned_in_a_block() -> None:
    @tool
    def counts(kind: str) -> pd.Series:
        """Count things by kind."""
        return pd.Series({"mugs": 3, "pots": 1}, name="n")

    text = Chat(model="demo").with_tools(counts).ask("Counts by kind").content
    assert "```text\nmugs    3\npots    1\n```" in text


@given(
    st.lists(
        st.tuples(
            st.text(st.characters(categories=["L", "N"]), min_size=1, max_size=8),
            st.integers(-1000, 1000),
        ),
        min_size=1,
        max_size=6,
    )
)
@settings(max_examples=40, deadline=None)
def test_every_cell_of_a_frame_reaches_the_table(rows: list[tuple[str, int]]) -> None:
    from nbagent._result_text import to_content
    from nbagent.providers._demo import _table

    frame = pd.DataFrame(rows, columns=["name", "count"])
    table = _table(to_content(frame))
    assert table is not None
    body = table.split("\n")[2:]
    assert len(body) == len(rows)
    for line, (name, count) in zip(body, rows, strict=True):
        assert line.split(" | ")[1:] == [name, f"{count} |"]


def test_quoted_text_reaches_the_call_whole() -> None:
    chat = Chat(model="demo").with_tools(send_email)
    letter = "Hi Bob,\nthe numbers are in.\nBest, Al"
    chat.ask(f'Send an email to bob@example.com saying "{letter}"')
    (call,) = chat.pending_approvals
    assert call.arguments == {"to": "bob@example.com", "body": letter}
    # The card shows the arguments as the tool will get them.
    assert json.loads(json.dumps(call.arguments))["body"] == letter


class Sales(BaseModel):
    region: str
    month: str
    total: float
    units: int


def test_a_structured_answer_takes_what_the_request_says() -> None:
    chat = Chat(model="demo")
    reply = chat.ask(
        'Sales report: region "North East", month March, total 1200, units 30', output=Sales
    )
    assert reply.parsed == Sales(region="North East", month="March", total=1200.0, units=30)


def test_a_structured_answer_makes_up_only_what_the_request_does_not_give() -> None:
    reply = Chat(model="demo").ask("Sales figures: month March, units 1200", output=Sales)
    assert reply.parsed.month == "March" and reply.parsed.units == 1200
    assert reply.parsed.region == "example region"  # not given: still plausible, and valid


@pytest.mark.parametrize("tools", [True, False])
def test_replies_to_different_requests_differ_in_their_first_words(tools: bool) -> None:
    prompts = [f"Check the status of order {n}" for n in (1001, 1002, 1003)]
    prompts += ["Summarise ticket 7: my mug arrived broken", "Hello there"]

    @tool
    def order_status(order_id: int) -> str:
        """Look up an order's status."""
        return "delivered"

    starts = set()
    for prompt in prompts:
        chat = Chat(model="demo")
        if tools:
            chat.with_tools(order_status)
        starts.add(chat.ask(prompt).content[:40])
    assert len(starts) == len(prompts), starts
