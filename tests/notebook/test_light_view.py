"""A turn's view is HTML until a person can act in it (issue 28, item 5).

One more round on a long chat must cost little more with the view than without: a turn's
view makes no widget model while nothing in it waits for a person and it fits a page; it
is its static HTML, sent when the chat may wait (a step asks the model, a tool starts),
at most every ``TEXT_THROTTLE`` seconds, and displayed with its first update. A card that
waits for a person brings the widgets (and the twin) back; a turn longer than a page
pages its widgets as before. The outputs are recorded as a front end keeps them (the
``cells`` fixture); the last test runs a real kernel.
"""

from __future__ import annotations

import threading
from typing import Any

import hypothesis.strategies as st
import ipywidgets
import nbclient
import nbformat
import pytest
from _views import Cells, widgets_in
from hypothesis import HealthCheck, given, settings
from test_view_lifecycle import IssueRefund, output, view_of

from nbagent import Chat, LLMToolResponse, ModelRequest, ToolCall, ToolResultMessage, tool
from nbagent._display import WIDGET_MIME, flush_dirty
from nbagent.notebook._auto import NotebookExtension
from nbagent.notebook._view import ChatView
from nbagent.notebook._widgets import ActionCard


class Calls:
    """Each turn: ``n`` tool calls (one per response), then an answer."""

    name = "scripted"
    model = "scripted-model"

    def __init__(self, per_turn: list[int]):
        self.per_turn, self.made = list(per_turn), 0

    def complete(self, request: ModelRequest) -> LLMToolResponse:
        last = request.messages[-1]
        if not isinstance(last, ToolResultMessage):
            self.made = 0  # a new turn
        if self.made < self.per_turn[0]:
            self.made += 1
            n = len(request.messages)
            call = ToolCall(f"c{n}", "lookup", {"key": f"k{n}"})
            return LLMToolResponse("", (call,), 10, 2, self.model, self.name, "tool_use")
        self.per_turn.pop(0)
        return LLMToolResponse("Done.", (), 10, 2, self.model, self.name)

    async def complete_async(self, request: ModelRequest) -> LLMToolResponse:
        return self.complete(request)


@tool
def lookup(key: str) -> str:
    """Look up a key.

    Args:
        key: The key.
    """
    return f"value of {key}"


def chat_of(per_turn: list[int], *tools: Any) -> Chat:
    chat = Chat(provider=Calls(per_turn), display=True, stream=False, max_steps=200)
    chat.with_tools(lookup, *tools)
    chat.extend(NotebookExtension())
    return chat


def test_a_quick_round_is_one_output_and_no_widget_model(
    cells: Cells, constructed: list[Any]
) -> None:
    chat = chat_of([3, 1])
    cells.run(2)
    chat.ask("Look up three")
    cells.run(3)
    constructed.clear()
    before = len(cells.outputs)
    chat.ask("One more")
    view = view_of(chat)
    assert constructed == []  # no widget model opened (nor closed) for the round
    assert len(cells.outputs) == before + 1 and cells.updates == 0  # one display, no update
    data = output(cells, view)
    assert WIDGET_MIME not in data and data == view.fallback_bundle()
    assert "value of" in data["text/html"] and "-- complete" in data["text/plain"]
    flush_dirty()  # after the cell: nothing more to send
    assert len(cells.outputs) == before + 1 and cells.updates == 0


def test_the_html_follows_a_running_tool_live(cells: Cells) -> None:
    """While a tool runs, the output already shows it running (sent by the background loop
    once the chat waits): the view is live without widgets."""
    seen = threading.Event()

    @tool
    def slow(key: str) -> str:
        """Take a while.

        Args:
            key: The key.
        """
        view = view_of(chat)
        for _ in range(400):  # up to 20 s: the update comes ~0.05 s after the tool starts
            html = cells.outputs.get(view.display_id, {}).get("text/html", "")
            if "nba-call nba-st-running" in html:  # the call's card, drawn running
                seen.set()
                break
            threading.Event().wait(0.05)
        return "done"

    class SlowOnce(Calls):
        def complete(self, request: ModelRequest) -> LLMToolResponse:
            if not isinstance(request.messages[-1], ToolResultMessage):
                call = ToolCall("s1", "slow", {"key": "a"})
                return LLMToolResponse("", (call,), 10, 2, self.model, self.name, "tool_use")
            return LLMToolResponse("Done.", (), 10, 2, self.model, self.name)

    chat = Chat(provider=SlowOnce([]), display=True, stream=False).with_tools(slow)
    chat.extend(NotebookExtension())
    cells.run(2)
    chat.ask("Go slow")
    assert seen.is_set()
    assert "-- complete" in output(cells, view_of(chat))["text/plain"]


def test_a_call_that_waits_for_a_person_brings_its_card_and_twin(cells: Cells) -> None:
    class RefundOnce(Calls):
        def complete(self, request: ModelRequest) -> LLMToolResponse:
            if not isinstance(request.messages[-1], ToolResultMessage):
                call = ToolCall("r1", "issue_refund", {"order_id": 9})
                return LLMToolResponse("", (call,), 10, 2, self.model, self.name, "tool_use")
            return LLMToolResponse("Refunded.", (), 10, 2, self.model, self.name)

    chat = Chat(provider=RefundOnce([]), display=True, stream=False).with_tools(IssueRefund)
    chat.extend(NotebookExtension())
    cells.run(2)
    chat.ask("Refund order 9")
    flush_dirty()  # after the cell: still waiting, still live
    view = view_of(chat)
    assert view.live and output(cells, view)[WIDGET_MIME]["model_id"] == view.widget.model_id
    twin = cells.outputs[f"{view.display_id}-twin"]  # shown when the card came
    assert "kernel session that has ended" in twin["text/plain"]
    (card,) = [w for w in widgets_in(view) if isinstance(w, ActionCard)]
    card.click("approve")
    assert view.continuation.wait(10)
    data = output(cells, view)
    assert WIDGET_MIME not in data and "refunded order 9" in data["text/plain"]
    assert "nba-twin-idle" in cells.outputs[f"{view.display_id}-twin"]["text/html"]


@pytest.mark.parametrize("calls", [30, 80])
def test_a_turn_longer_than_a_page_pages_its_widgets(
    cells: Cells, constructed: list[Any], calls: int
) -> None:
    chat = chat_of([calls])
    cells.run(2)
    chat.ask("Many")
    view = view_of(chat)
    assert constructed  # it outgrew a page: widgets, paged (older pages fold, are reused)
    assert len(constructed) <= 4 * view.page_size
    flush_dirty()
    data = output(cells, view)
    assert not view.live and WIDGET_MIME not in data and "-- complete" in data["text/plain"]
    assert data["text/html"].count("value of k") >= 1


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(turns=st.lists(st.integers(0, 32), min_size=1, max_size=5))
def test_each_turn_leaves_its_whole_html_and_widgets_only_past_a_page(
    cells: Cells, turns: list[int]
) -> None:
    """Whatever the turns' lengths: each turn's output ends as its static bundle, a turn
    that fits a page never made a widget, and none is left open."""
    chat = chat_of(turns)
    views: list[ChatView] = []
    for i in range(len(turns)):
        cells.run(10 + i)
        made: list[Any] = []
        before = ipywidgets.Widget._widget_construction_callback
        ipywidgets.Widget.on_widget_constructed(made.append)
        try:
            chat.ask(f"Turn {i}")
        finally:
            ipywidgets.Widget._widget_construction_callback = before
        flush_dirty()
        view = view_of(chat)
        views.append(view)
        if len(view.state.entries_for(view.turn)) <= view.page_size:
            assert made == []
        assert len(chat.tool_calls) == sum(turns[: i + 1])
    for view in views:
        data = output(cells, view)
        assert WIDGET_MIME not in data and not view.live
        assert data == view.fallback_bundle()


def test_in_a_kernel_a_round_is_one_output_after_what_the_cell_printed() -> None:
    setup = (
        "from nbagent import Chat, tool\n\n"
        "@tool\ndef get_weather(city: str) -> str:\n"
        '    """Get the weather for a city."""\n'
        '    return f"sunny in {city}"\n\n'
        'chat = Chat(model="demo").with_tools(get_weather)\n'
    )
    cell = 'print("before")\nchat.ask("What is the weather in Oslo?");'
    later = 'chat.ask_later("And in Tokyo?")\nprint("after")'
    nb = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell(c) for c in (setup, cell, later, "pass")]
    )
    nbclient.NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    outputs = nb.cells[1].outputs
    assert [o["output_type"] for o in outputs] == ["stream", "display_data"]
    assert outputs[0]["text"] == "before\n"
    data = outputs[1]["data"]
    assert WIDGET_MIME not in data
    assert "sunny in Oslo" in data["text/plain"] and "complete" in data["text/plain"]
    # a view shown with its first update keeps its place: before what the cell printed next
    outputs = nb.cells[2].outputs
    assert [o["output_type"] for o in outputs] == ["display_data", "stream"]
    assert "And in Tokyo?" in outputs[0]["data"]["text/plain"] and outputs[1]["text"] == "after\n"
    state = nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {})
    assert not state.get("state")  # no widget model was ever opened
