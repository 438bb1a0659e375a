"""Level 1: what a displayed view leaves in the notebook, turn after turn (no kernel).

``IPython.display.display`` / ``update_display`` are replaced by a recorder of
the cell outputs they would produce (by display id), which is what a saved
notebook keeps; the views, the chat and the cards are real. The cell being run
is set by hand (``Cells.run``), and ``flush_dirty`` is what IPython's
``post_run_cell`` calls after each cell.

Covered: a settled view becomes static HTML and frees its widgets (issue 14
item 1), a waiting view keeps its widget and fills its twin, a view touched
again comes back live; a later cell continuing a turn shows the continuation
and the earlier view says where it went (item 12); the countdown on the status
line while ``await ask_async`` waits for a click (item 13).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import ipywidgets
import pytest
from _tools import REFUNDS, IssueRefund, get_weather
from _views import Cells, widgets_in
from ipywidgets.widgets import widget as widget_module

import nbagent
from nbagent import Chat
from nbagent._display import WIDGET_MIME, flush_dirty
from nbagent.notebook import ChatView, _auto
from nbagent.notebook import _continuation as cont
from nbagent.notebook._auto import NotebookExtension
from nbagent.notebook._widgets import ActionCard


def notebook_chat() -> Chat:
    """A chat as in a kernel: each turn shows itself (the extension ``Chat`` adds there)."""
    chat = Chat(model="demo", display=True).with_tools(IssueRefund, get_weather)
    chat.extend(NotebookExtension())
    return chat


def view_of(chat: Chat) -> ChatView:
    view = _auto.turn_view(chat)
    assert isinstance(view, ChatView)
    return view


def output(cells: Cells, view: ChatView) -> dict[str, Any]:
    return cells.outputs[view.display_id]


def twin(cells: Cells, view: ChatView) -> dict[str, Any]:
    return cells.outputs[f"{view.display_id}-twin"]


def closed(w: ipywidgets.Widget) -> bool:
    return w.comm is None


# ------------------------------------------------------------------ item 1: static
def test_a_settled_turn_leaves_static_html_and_frees_its_widgets(cells: Cells) -> None:
    chat = notebook_chat()
    cells.run(2)
    chat.ask("What's the weather in Oslo?")
    view = view_of(chat)
    data = output(cells, view)
    assert WIDGET_MIME not in data  # nothing for a new kernel to look for
    assert data == view.fallback_bundle()  # the static HTML is what the live view showed
    assert "sunny in Oslo" in data["text/html"] and "-- complete" in data["text/plain"]
    # nothing in it ever waited for a person: it was HTML all along, no widget, no twin
    assert f"{view.display_id}-twin" not in cells.outputs
    assert not view.live and view.widget is None and not widgets_in(view)


def test_a_settled_view_frees_its_widgets(cells: Cells) -> None:
    chat = notebook_chat()
    cells.run(2)
    chat.ask("Refund order 4")
    view = view_of(chat)
    assert view.live
    chat.deny(chat.pending_approvals[0], reason="not today")
    chat.complete()
    flush_dirty()
    data = output(cells, view)
    assert WIDGET_MIME not in data and "not today" in data["text/plain"]
    assert "nba-twin-idle" in twin(cells, view)["text/html"]  # no stand-in needed any more
    assert not view.live and closed(view.widget)
    # every model of its own; the style sheet every view shows stays open (one per kernel)
    assert all(closed(w) for w in widgets_in(view) if w is not view._style)


def test_long_sessions_do_not_keep_widget_models(cells: Cells) -> None:
    before = len(widget_module._instances)
    chat = notebook_chat()
    for i in range(8):
        cells.run(3 + i)
        chat.ask(f"What's the weather in City{i}?")
        flush_dirty()
    assert len(cells.outputs) == 8  # eight views, static (nothing asked for a twin)
    assert len(widget_module._instances) == before  # not one model left behind


def test_a_waiting_view_keeps_its_widget_and_a_twin_that_says_how_to_decide(
    cells: Cells, tmp_path: Any
) -> None:
    chat = Chat(model="demo", display=True, store=tmp_path / "chats.db").with_tools(IssueRefund)
    chat.extend(NotebookExtension())
    cells.run(2)
    chat.ask("Refund order 5")
    flush_dirty()  # after the cell: still waiting, still live
    view = view_of(chat)
    data = output(cells, view)
    assert data[WIDGET_MIME]["model_id"] == view.widget.model_id and view.live
    assert "Refund order 5" in data["text/plain"]  # its own fallback (nbconvert, VS Code)
    stand_in = twin(cells, view)
    assert "Refund order 5" in stand_in["text/plain"]
    assert "kernel session that has ended" in stand_in["text/plain"]
    call = chat.pending_approvals[0].id
    assert f'Chat.load("{chat.id}", store="{tmp_path / "chats.db"}"' in stand_in["text/plain"]
    assert f'chat.approve("{call}")' in stand_in["text/plain"]
    assert f".nba-live-{view.uid}" in stand_in["text/html"]  # its CSS knows its view
    assert f"nba-live-{view.uid}" in view.widget._dom_classes
    # A click decides it; the turn settles: static, twin idle, widgets closed.
    (card,) = [w for w in widgets_in(view) if isinstance(w, ActionCard)]
    card.click("approve")
    assert view.continuation.wait(10)
    data = output(cells, view)
    assert WIDGET_MIME not in data and "refunded order 5" in data["text/plain"]
    assert "nba-twin-idle" in twin(cells, view)["text/html"]
    assert closed(card)


def test_a_whole_chat_view_comes_back_live_when_the_chat_goes_on(cells: Cells) -> None:
    chat = notebook_chat()
    chat.display = False  # only display(chat) in this test
    cells.run(2)
    chat.ask("What's the weather in Oslo?")
    cells.run(3)
    whole = ChatView(chat)
    cells.display(whole)
    flush_dirty()  # after the cell: nothing to do here, static
    assert not whole.live and WIDGET_MIME not in output(cells, whole)
    cells.run(4)
    chat.ask("Refund order 6")  # touches the view again: live, with its card
    assert whole.live and WIDGET_MIME in output(cells, whole)
    assert output(cells, whole)[WIDGET_MIME]["model_id"] == whole.widget.model_id
    assert any(isinstance(w, ActionCard) for w in widgets_in(whole))
    assert "Refund order 6" in twin(cells, whole)["text/plain"]


# ------------------------------------------------------------- item 12: hand-over
def test_a_later_cell_continuing_the_turn_shows_it_and_the_earlier_view_says_so(
    cells: Cells,
) -> None:
    REFUNDS.clear()
    chat = notebook_chat()
    cells.run(3)  # In [2]
    chat.ask("Refund order 7")
    flush_dirty()
    first = view_of(chat)
    assert first.live and "-- awaiting approval" in twin(cells, first)["text/plain"]

    cells.run(4)  # In [3]: decide in code
    chat.approve(chat.pending_approvals[0])
    flush_dirty()
    assert chat.status == "ready"
    plain = output(cells, first)["text/plain"]
    assert "approved, decided in code" in plain and "-- ready" in plain  # as chat.status
    assert WIDGET_MIME not in output(cells, first)  # nothing left to click there

    cells.run(5)  # In [4]: continue
    reply = chat.complete()
    assert REFUNDS == [7]
    before = len(cells.outputs)
    _auto.display_message(reply)  # `chat.complete()` on the cell's last line: Out[4]
    assert len(cells.outputs) == before  # not echoed: the continuation view shows it
    plain = output(cells, first)["text/plain"]
    assert "-- continued in cell [4]" in plain and "refunded" not in plain
    assert first.frozen
    here = view_of(chat)
    assert here is not first and cells.cell_of[here.display_id] == 5
    shown = output(cells, here)["text/plain"]
    assert shown.startswith("continues turn 1 from cell [2]")
    assert "Refund order 7" not in shown  # the earlier cell shows that
    assert "refunded order 7" in shown and "-- complete" in shown
    assert WIDGET_MIME not in output(cells, here)


def test_no_hand_over_for_the_same_cell_a_click_or_a_step_with_nothing_to_do(
    cells: Cells,
) -> None:
    chat = notebook_chat()
    cells.run(3)
    chat.ask("Refund order 8")
    first = view_of(chat)
    cells.run(4)
    chat.complete()  # still waiting: nothing happens, the card stays where it is
    assert view_of(chat) is first and first.live and not first.frozen
    (card,) = [w for w in widgets_in(first) if isinstance(w, ActionCard)]
    card.click("approve")  # the continuation after a click runs in no cell
    assert first.continuation.wait(10)
    assert view_of(chat) is first and len(cells.in_cell(4)) == 0
    assert "-- complete" in output(cells, first)["text/plain"]


# -------------------------------------------------------------- item 13: countdown
@pytest.fixture
def waiting_kernel(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(cont, "kernel_can_wait", lambda: True)
    yield


@pytest.mark.parametrize(
    ("fallback", "then"), [("park", "it stays pending"), ("deny", "it is denied")]
)
def test_ask_async_shows_a_countdown_until_it_gives_up(
    waiting_kernel: None, fallback: str, then: str
) -> None:
    nbagent.configure(approval_wait=2.5, approval_fallback=fallback)
    chat = Chat(model="demo", display=False).with_tools(IssueRefund)
    chat.extend(NotebookExtension())
    seen: list[str] = []

    async def main() -> None:
        view = ChatView(chat)
        view.continuation.note_rendered()  # a front end drew the card
        view._status.observe(lambda change: seen.append(change["new"]), names="value")
        await chat.ask_async("Refund order 9")
        seen.append("END:" + view._status.value)

    t0 = time.monotonic()
    asyncio.run(main())
    elapsed = time.monotonic() - t0
    counting = [s for s in seen if "waiting for your decision" in s]
    assert any(f"0:03 left (then {then})" in s for s in counting), counting
    assert any(f"0:01 left (then {then})" in s for s in counting), counting
    # cheap: about one change a second, not one per poll
    assert len(counting) <= elapsed + 2, counting
    assert "waiting for your decision" not in seen[-1]  # removed when the wait ends
    assert chat.status == ("awaiting_approval" if fallback == "park" else "complete")


def test_the_countdown_goes_when_the_click_arrives(waiting_kernel: None) -> None:
    nbagent.configure(approval_wait=30, approval_fallback="park")
    chat = Chat(model="demo", display=False).with_tools(IssueRefund)
    chat.extend(NotebookExtension())
    views: list[ChatView] = []

    async def main() -> None:
        view = ChatView(chat)
        views.append(view)
        view.continuation.note_rendered()

        def click_when_counting() -> None:
            while "left (then it stays pending)" not in view._status.value:
                threading.Event().wait(0.02)
            (card,) = [w for w in widgets_in(view) if isinstance(w, ActionCard)]
            card.click("approve")

        threading.Thread(target=click_when_counting, name="subshell").start()
        await chat.ask_async("Refund order 10")

    asyncio.run(main())
    assert chat.status == "complete"
    assert "waiting for your decision" not in views[0]._status.value
    assert "complete" in views[0]._status.value


def test_complete_in_a_later_cell_after_the_budget_ran_out(cells: Cells) -> None:
    chat = notebook_chat()
    chat.max_steps = 1
    cells.run(3)  # In [2]
    chat.ask("What's the weather in Rome?")
    assert chat.status == "budget_exhausted"
    first = view_of(chat)
    assert first.live and any(isinstance(w, ActionCard) for w in widgets_in(first))
    cells.run(4)  # In [3]: complete() is the "Continue"
    chat.complete(max_steps=5)
    plain = output(cells, first)["text/plain"]
    assert "step budget exhausted: continued" in plain and "-- continued in cell [3]" in plain
    here = view_of(chat)
    shown = output(cells, here)["text/plain"]
    assert "budget" not in shown and "sunny in Rome" in shown and "-- complete" in shown
    assert not here.live and not first.live  # both settled: static, no card waiting anywhere


def test_a_clicked_call_that_runs_leaves_a_twin_that_says_so_not_awaiting(
    cells: Cells, tmp_path: Any
) -> None:
    """A kernel restarted while the approved call runs: the twin said "awaiting approval ...
    chat.approve(...)" (it was last sent while the call waited), inviting a second run. It
    now follows the click: while the call runs it says the outcome is unknown; once it has
    run, it goes idle."""
    started, release = threading.Event(), threading.Event()

    class SlowRefund(nbagent.Tool):
        """Issues a refund slowly."""

        requires_approval = True

        def execute(self, order_id: int) -> str:
            started.set()
            release.wait(10)
            return f"refunded order {order_id}"

    chat = Chat(model="demo", display=True, store=tmp_path / "chats.db").with_tools(SlowRefund)
    chat.extend(NotebookExtension())
    cells.run(2)
    chat.ask("Refund order 5")
    flush_dirty()
    view = view_of(chat)
    assert "chat.approve(" in twin(cells, view)["text/plain"]
    (card,) = [w for w in widgets_in(view) if isinstance(w, ActionCard)]
    try:
        card.click("approve")
        assert started.wait(10)
        deadline = time.monotonic() + 5
        while "ran (the notebook" not in twin(cells, view)["text/plain"]:
            assert time.monotonic() < deadline, twin(cells, view)["text/plain"]
            time.sleep(0.02)
        stand_in = twin(cells, view)["text/plain"]
        assert "slow_refund" in stand_in and "whether it finished is unknown" in stand_in
        assert "chat.approve(" not in stand_in and "awaiting approval" not in stand_in
        assert "in doubt" in stand_in  # the store keeps it so
    finally:
        release.set()
    assert view.continuation.wait(10)
    assert "nba-twin-idle" in twin(cells, view)["text/html"]
    assert "refunded order 5" in output(cells, view)["text/plain"]
