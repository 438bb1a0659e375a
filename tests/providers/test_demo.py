"""The offline demo model reads requests honestly: whole values, one call per request unless
the text lists values, ``calls="one"`` says what it skipped, guesses are marked."""

from __future__ import annotations

import datetime
import json
import random
from typing import Any, Literal

import pytest
from pydantic import BaseModel

from nbagent import (
    AssistantToolCallMessage,
    Chat,
    ChatMessage,
    DemoProvider,
    ModelRequest,
    ToolSpec,
    tool,
)
from nbagent.providers._demo_plan import plan


@tool
def send_email(to: str, subject: str, body: str) -> str:
    """Send an email.

    Args:
        to: Recipient address.
        subject: Subject line.
        body: Message text.
    """
    return f"sent to {to}"


@tool
def run_sql(query: str) -> list[list[Any]]:
    """Run a read-only SQL query against the shop database.

    Args:
        query: The SQL statement.
    """
    return [["alice", 120]]


@tool
def get_weather(city: str, unit: Literal["c", "f"] = "c") -> dict[str, Any]:
    """Get the current weather for a city.

    Args:
        city: City name, e.g. "Paris".
        unit: Temperature unit, "c" or "f".
    """
    return {"city": city, "temperature": 18, "unit": unit}


@tool
def issue_refund(order_id: int, amount: float) -> str:
    """Issue a refund for an order.

    Args:
        order_id: The order to refund.
        amount: Amount in euros.
    """
    return f"refunded {amount} on order {order_id}"


@tool
def read_file(path: str) -> str:
    """Read a text file.

    Args:
        path: The file to read.
    """
    return "text"


@tool
def book_meeting(title: str, date: datetime.date, attendees: list[str]) -> str:
    """Book a meeting in the calendar.

    Args:
        title: What the meeting is about.
        date: The day of the meeting.
        attendees: Who to invite.
    """
    return "booked"


@tool
def set_priority(ticket_id: int, level: Literal["low", "medium", "high", "urgent"]) -> str:
    """Set the priority of a support ticket.

    Args:
        ticket_id: The ticket number.
        level: The new priority.
    """
    return "set"


@tool
def convert_currency(amount: float, currency: str) -> dict[str, Any]:
    """Convert euros to another currency.

    Args:
        amount: Amount in euros.
        currency: Target currency code such as USD or JPY.
    """
    return {"amount": amount, "currency": currency}


@tool
def search_docs(query: str) -> list[str]:
    """Search the documentation.

    Args:
        query: What to look for.
    """
    return []


@tool
def fetch_page(url: str) -> str:
    """Fetch a web page."""
    return "<html></html>"


@tool
def list_tickets() -> list[int]:
    """List the open support tickets."""
    return [7, 9]


TOOLS = [
    send_email,
    run_sql,
    get_weather,
    issue_refund,
    read_file,
    book_meeting,
    set_priority,
    convert_currency,
    search_docs,
    fetch_page,
    list_tickets,
]
SPECS = [t.spec for t in TOOLS]

Calls = list[tuple[str, dict[str, Any]]]

# (request, the calls the demo model makes). Realistic requests; the comment says what the
# case is about.
CASES: list[tuple[str, Calls]] = [
    # the issue's email: quoted values and to/subject/body phrases stay together
    (
        'Send an email to bob@example.com with subject "Refund" and body '
        '"Your refund is on its way"',
        [
            (
                "send_email",
                {
                    "to": "bob@example.com",
                    "subject": "Refund",
                    "body": "Your refund is on its way",
                },
            )
        ],
    ),
    # unquoted: each phrase runs to the next parameter named, the body to the end
    (
        "Send email to bob@example.com with subject Refund update and body Your refund is "
        "on its way, and thanks for waiting",
        [
            (
                "send_email",
                {
                    "to": "bob@example.com",
                    "subject": "Refund update",
                    "body": "Your refund is on its way, and thanks for waiting",
                },
            )
        ],
    ),
    # key: value phrases; a comma and "and" inside quotes are not separators
    (
        'email to: carol@example.com, subject: "Q3, and Q4", body: Please find the numbers '
        "attached.",
        [
            (
                "send_email",
                {
                    "to": "carol@example.com",
                    "subject": "Q3, and Q4",
                    "body": "Please find the numbers attached",
                },
            )
        ],
    ),
    # a list of recipients: one email each, the rest shared
    (
        'Email alice@example.com and bob@example.com with subject "Lunch" and body "Noon?"',
        [
            ("send_email", {"to": "alice@example.com", "subject": "Lunch", "body": "Noon?"}),
            ("send_email", {"to": "bob@example.com", "subject": "Lunch", "body": "Noon?"}),
        ],
    ),
    # the issue's SQL: commas and AND inside the statement do not split it
    (
        "Run the query SELECT name, total FROM orders WHERE total > 100 AND status = 'paid' "
        "ORDER BY total",
        [
            (
                "run_sql",
                {
                    "query": "SELECT name, total FROM orders WHERE total > 100 AND "
                    "status = 'paid' ORDER BY total"
                },
            )
        ],
    ),
    # lowercase SQL up to its ";", then another request
    (
        "run select city, count(*) from users group by city; then weather in Oslo",
        [
            ("run_sql", {"query": "select city, count(*) from users group by city"}),
            ("get_weather", {"city": "Oslo"}),
        ],
    ),
    # a weather list, with "in" repeated
    (
        "What's the weather in Paris and in Tokyo?",
        [("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Tokyo"})],
    ),
    # a comma list with multi-word and accented names; optional unit left out
    (
        "Weather in New York, São Paulo and Kraków",
        [
            ("get_weather", {"city": "New York"}),
            ("get_weather", {"city": "São Paulo"}),
            ("get_weather", {"city": "Kraków"}),
        ],
    ),
    # an enum value said once applies to the whole list; said per item, per item
    (
        "weather in paris and tokyo in f",
        [
            ("get_weather", {"city": "paris", "unit": "f"}),
            ("get_weather", {"city": "tokyo", "unit": "f"}),
        ],
    ),
    (
        "Weather in Paris in c and Tokyo in f",
        [
            ("get_weather", {"city": "Paris", "unit": "c"}),
            ("get_weather", {"city": "Tokyo", "unit": "f"}),
        ],
    ),
    # "and" joining something that is not a city: one call
    ("Weather in Paris and thanks!", [("get_weather", {"city": "Paris"})]),
    # a refund with an amount: the number after "order" and the one before "euros"
    (
        "Refund order 42 for 19.99 euros",
        [("issue_refund", {"order_id": 42, "amount": 19.99})],
    ),
    (
        "Refund order #42, amount $12.50",
        [("issue_refund", {"order_id": 42, "amount": 12.5})],
    ),
    # a list of orders sharing an amount
    (
        "Refund orders 42 and 43 for 10 euros each",
        [
            ("issue_refund", {"order_id": 42, "amount": 10.0}),
            ("issue_refund", {"order_id": 43, "amount": 10.0}),
        ],
    ),
    # the same parameters twice: a list of records
    (
        "Refund order 42 for $20 and order 43 for $5",
        [
            ("issue_refund", {"order_id": 42, "amount": 20.0}),
            ("issue_refund", {"order_id": 43, "amount": 5.0}),
        ],
    ),
    # file paths: one call per path in a list, a Windows path kept whole
    (
        "Read notes.txt, todo.md and ~/plans/2025.txt",
        [
            ("read_file", {"path": "notes.txt"}),
            ("read_file", {"path": "todo.md"}),
            ("read_file", {"path": "~/plans/2025.txt"}),
        ],
    ),
    ('Read "C:\\Users\\me\\notes.txt"', [("read_file", {"path": "C:\\Users\\me\\notes.txt"})]),
    # two tools in one request, "then" between them; "and summarise it" names no tool
    (
        "Read the file at /var/log/syslog and summarise it, then fetch page https://example.com.",
        [
            ("read_file", {"path": "/var/log/syslog"}),
            ("fetch_page", {"url": "https://example.com"}),
        ],
    ),
    # dates, a quoted title and a list that fills an array parameter (one call)
    (
        'Book a meeting "Budget review" on 2025-03-14 with Alice and Bob',
        [
            (
                "book_meeting",
                {"title": "Budget review", "date": "2025-03-14", "attendees": ["Alice", "Bob"]},
            )
        ],
    ),
    (
        "Book a meeting titled Planning on March 3 with attendees Ana, Ben and Carl",
        [
            (
                "book_meeting",
                {"title": "Planning", "date": "March 3", "attendees": ["Ana", "Ben", "Carl"]},
            )
        ],
    ),
    # enums
    ("Set ticket 812 to urgent", [("set_priority", {"ticket_id": 812, "level": "urgent"})]),
    (
        "Set ticket 7 priority to low and ticket 9 priority to high",
        [
            ("set_priority", {"ticket_id": 7, "level": "low"}),
            ("set_priority", {"ticket_id": 9, "level": "high"}),
        ],
    ),
    # currencies: a code after "to"; a list of codes
    ("Convert 100 euros to USD", [("convert_currency", {"amount": 100.0, "currency": "USD"})]),
    (
        "Convert 30 euros to GBP and JPY",
        [
            ("convert_currency", {"amount": 30.0, "currency": "GBP"}),
            ("convert_currency", {"amount": 30.0, "currency": "JPY"}),
        ],
    ),
    # free text is not a list unless the items are quoted
    (
        "Search the docs for approval gates and concurrency",
        [("search_docs", {"query": "approval gates and concurrency"})],
    ),
    (
        'Search the docs for "pandas" and for "plots"',
        [("search_docs", {"query": "pandas"}), ("search_docs", {"query": "plots"})],
    ),
    # URLs and bare domains form one list
    (
        "Fetch page a.com, b.com and https://c.org/x?y=1.",
        [
            ("fetch_page", {"url": "a.com"}),
            ("fetch_page", {"url": "b.com"}),
            ("fetch_page", {"url": "https://c.org/x?y=1"}),
        ],
    ),
    # a greeting first; a tool with no parameters
    ("Hi there! What's the weather in Lima?", [("get_weather", {"city": "Lima"})]),
    ("List the open tickets", [("list_tickets", {})]),
    # nothing matches: no call
    ("What is the meaning of life?", []),
]


def ask_demo(text: str, **request: Any) -> Any:
    return DemoProvider().complete(
        ModelRequest((ChatMessage("user", text),), tools=SPECS, **request)
    )


@pytest.mark.parametrize(("text", "expected"), CASES, ids=[c[0][:40] for c in CASES])
def test_the_demo_model_reads_requests(text: str, expected: Calls) -> None:
    response = ask_demo(text)
    assert [(c.name, c.arguments) for c in response.tool_calls] == expected


def test_the_table_is_big_enough() -> None:
    assert len(CASES) >= 15


def test_the_issue_examples_through_a_chat() -> None:
    chat = Chat(model="demo").with_tools(*TOOLS)
    chat.ask(
        'Send an email to bob@example.com with subject "Refund" and body '
        '"Your refund is on its way"'
    )
    assert [(c.name, c.arguments) for c in chat.tool_calls] == [
        (
            "send_email",
            {"to": "bob@example.com", "subject": "Refund", "body": "Your refund is on its way"},
        )
    ]
    chat.ask("Run SELECT name, total FROM orders WHERE total > 100 AND status = 'paid'")
    assert [c.name for c in chat.tool_calls] == ["send_email", "run_sql"]
    assert chat.tool_calls[-1].arguments == {
        "query": "SELECT name, total FROM orders WHERE total > 100 AND status = 'paid'"
    }


def test_calls_one_says_which_items_it_skipped() -> None:
    chat = Chat(model="demo").with_tools(get_weather).with_tool_options(calls="one")
    answer = chat.ask("What's the weather in Paris, Tokyo and Oslo?")
    assert [c.arguments for c in chat.tool_calls] == [{"city": "Paris"}]
    assert answer is not None
    assert answer.content.endswith(  # type: ignore[union-attr]
        "I only called get_weather for Paris: one tool call per response is allowed "
        '(calls="one"); ask again for Tokyo and Oslo.'
    )


def test_calls_one_names_skipped_calls_of_other_tools() -> None:
    chat = Chat(model="demo").with_tools(*TOOLS).with_tool_options(calls="one")
    answer = chat.ask("Weather in Paris and refund order 42 for 5 euros")
    assert [c.name for c in chat.tool_calls] == ["get_weather"]
    assert "ask again for issue_refund(order_id=42, amount=5.0)." in answer.content  # type: ignore[union-attr]


def test_calls_one_says_nothing_when_nothing_was_skipped() -> None:
    chat = Chat(model="demo").with_tools(get_weather).with_tool_options(calls="one")
    answer = chat.ask("Weather in Paris?")
    assert "calls=" not in answer.content  # type: ignore[union-attr]
    assert len(chat.tool_calls) == 1


def test_guessed_arguments_are_marked_in_the_text_with_the_calls() -> None:
    chat = Chat(model="demo").with_tools(*TOOLS)
    chat.ask("Send an email to bob@example.com saying the report is ready")
    message = chat.transcript[1]
    assert isinstance(message, AssistantToolCallMessage)
    assert message.content == (
        "(demo model: arguments guessed from your words: to, body; "
        "not in your words, made up: subject)"
    )
    # the note is in the notebook view (here its plain text), with no change to the view
    shown = chat._repr_mimebundle_()
    note = "(demo model: arguments guessed from your words: to, body;"
    assert f"Assistant: {note}" in shown["text/plain"] and note in shown["text/html"]


def test_no_note_when_nothing_was_guessed() -> None:
    response = ask_demo("List the open tickets")
    assert [c.name for c in response.tool_calls] == ["list_tickets"]
    assert response.text == ""


def test_a_made_up_argument_is_named_as_made_up() -> None:
    response = ask_demo("refund")
    assert response.tool_calls[0].arguments == {"order_id": 1, "amount": 1}
    assert response.text == "(demo model: not in your words, made up: order_id, amount)"


def test_the_note_streams_before_the_calls() -> None:
    seen: list[Any] = []
    response = DemoProvider().complete(
        ModelRequest(
            (ChatMessage("user", "Weather in Oslo"),),
            tools=SPECS,
            stream=True,
            on_delta=seen.append,
        )
    )
    text = "".join(d.text for d in seen if d.kind == "text")
    assert text == response.text == "(demo model: arguments guessed from your words: city)"
    assert [d.kind for d in seen][-1] == "tool_call"


def test_choice_of_a_tool_and_required() -> None:
    forced = ask_demo("Tell me about Paris", tool_choice="get_weather")
    assert [(c.name, c.arguments) for c in forced.tool_calls] == [
        ("get_weather", {"city": "Paris"})
    ]
    required = ask_demo("What is the meaning of life?", tool_choice="required")
    assert len(required.tool_calls) == 1 and required.tool_calls[0].name == SPECS[0].name
    assert "made up" in required.text
    assert ask_demo("Weather in Oslo", tool_choice="none").tool_calls == ()


def test_reading_is_deterministic_and_never_raises_on_odd_input() -> None:
    rng = random.Random(14)
    pieces = [
        "send", "email", "to", "subject", "body", "and", ",", ";", "then", '"', "'", "“",
        "`", "Paris", "tokyo", "42", "#7", "$5", "1,000", "bob@x.com", "a.com", "/tmp/x",
        "https://e.org/a?b", "2024-01-02", "10:30", "SELECT a, b FROM t", "between", "in",
        "f", ":", "=", "\ue003", "\n", "?", "é", "(", "city", "amount", "query", "x" * 40,
    ]  # fmt: skip
    schemas: list[Any] = [
        {"type": "string"}, {"type": "integer"}, {"type": "number"}, {"type": "boolean"},
        {"type": "array", "items": {"type": "integer"}}, {"type": "array"},
        {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
        {"enum": ["c", "f", ""]}, {"enum": [1, 2]}, {"enum": []},
        {"anyOf": [{"type": "null"}]}, {"type": ["string", "null"]}, {"$ref": "#/x"}, {},
        {"type": "string", "description": 5}, {"type": "string", "format": "date"}, 7,
    ]  # fmt: skip
    names = ["to", "subject", "body", "city", "order_id", "amount", "query", "path", "tags", ""]
    for _ in range(300):
        props = {rng.choice(names): rng.choice(schemas) for _ in range(rng.randint(0, 4))}
        required = rng.sample(sorted(props), rng.randint(0, len(props)))
        schema: Any = {"type": "object", "properties": props, "required": required}
        if rng.random() < 0.1:
            schema = rng.choice([{}, {"properties": 5}, {"properties": {"a": {}}, "required": 1}])
        specs = [ToolSpec(rng.choice(["send_email", "run_sql", "x"]), "Send it.", schema)]
        text = " ".join(rng.choice(pieces) for _ in range(rng.randint(0, 20)))
        for choice in ("auto", "required", specs[0].name):
            first = plan(text, specs, choice)
            assert first == plan(text, specs, choice)
            json.dumps([c.arguments for c in first])


def test_no_thinking_unless_asked() -> None:
    response = ask_demo("Weather in Oslo")
    assert response.items == () and response.reasoning_tokens == 0


def test_thinking_says_which_calls_it_will_make() -> None:
    plain = ask_demo("Weather in Oslo")
    response = ask_demo("Weather in Oslo", reasoning="low")
    (thought,) = response.reasoning
    assert thought.text == (
        'Reading the request: "Weather in Oslo". It matches my tools; I will call '
        "get_weather(city='Oslo'). I say with the calls which arguments I guessed. "
        "(demo model, reasoning='low': it thinks the same at any effort.)"
    )
    assert not thought.redacted and not thought.resend
    # the answer itself is what it would be without thinking; the thinking is paid for
    assert response.tool_calls == plain.tool_calls and response.text == plain.text
    assert response.reasoning_tokens > 0
    assert response.output_tokens == plain.output_tokens + response.reasoning_tokens


def test_thinking_says_why_it_calls_nothing() -> None:
    response = ask_demo("What is the meaning of life?", reasoning=1024)
    assert response.tool_calls == ()
    assert "None of my tools (send_email, run_sql, get_weather" in response.reasoning[0].text
    assert "reasoning=1024" in response.reasoning[0].text


def test_thinking_through_a_chat_after_results_and_with_a_structured_answer() -> None:
    chat = Chat(model="demo", reasoning="high").with_tools(get_weather)
    chat.ask("Weather in Paris?")
    call, _, answer = chat.transcript[1:]
    assert isinstance(call, AssistantToolCallMessage) and isinstance(answer, ChatMessage)
    assert "I will call get_weather(city='Paris')" in call.reasoning[0].text
    assert answer.reasoning[0].text.startswith(
        "1 tool result(s) came back (get_weather ok). I will answer from these results."
    )
    # reasoning tokens are in the chat's steps, per step
    assert list(chat.steps["reasoning_tokens"] > 0) == [True, True]
    # the view shows a folded Thinking section with the demo's decision
    html = chat._repr_mimebundle_()["text/html"]
    assert "<summary>Thinking</summary>" in html and "I will call get_weather" in html

    class City(BaseModel):
        name: str
        population: int

    reply = Chat(model="demo", reasoning="low").ask("Describe Paris", output=City)
    assert isinstance(reply.parsed, City)
    assert "The answer must be City (name, population): I will fill it with plausible values." in (
        reply.reasoning[0].text
    )


def test_thinking_streams_as_reasoning_before_the_text() -> None:
    seen: list[Any] = []
    response = DemoProvider(chunk_words=2).complete(
        ModelRequest(
            (ChatMessage("user", "Hello there"),),
            reasoning="low",
            stream=True,
            on_delta=seen.append,
        )
    )
    kinds = [d.kind for d in seen]
    first_text = kinds.index("text")
    assert set(kinds[:first_text]) == {"reasoning"} and set(kinds[first_text:]) == {"text"}
    assert kinds.count("reasoning") > 1  # streamed in pieces, like a real model's thinking
    assert "".join(d.text for d in seen if d.kind == "reasoning") == response.reasoning[0].text
    assert "".join(d.text for d in seen if d.kind == "text") == response.text
