"""The status line after a run is stopped while a tool runs (the stop button, chat.cancel()).

No step event says a run was stopped; the view's phase was "running tools" from the
tool's start and stayed so for ever, in the cell and in the saved notebook. The state
now hears the run end (the ``run_stopped`` hook) and says ``stopped · complete()
resumes``; a later ``complete()`` moves it on again.
"""

from __future__ import annotations

import threading

import pytest
from _views import Cells

from nbagent import Chat, ChatCancelled, tool
from nbagent.notebook import ChatView
from nbagent.notebook._state import RUNNING, STOPPED

STOP = "stopped · complete() resumes"


def _status(view: ChatView) -> str:
    return view.fallback_bundle()["text/plain"].splitlines()[-1]


def test_the_stop_button_in_a_tool_leaves_stopped_not_running(cells: Cells) -> None:
    calls: list[int] = []

    @tool
    def slow_lookup(order_id: int) -> str:
        """Look up an order slowly."""
        calls.append(order_id)
        if len(calls) == 1:
            raise KeyboardInterrupt  # what the stop button raises in the kernel's thread
        return f"order {order_id} found"

    chat = Chat(model="demo").with_tools(slow_lookup)
    view = ChatView(chat)
    cells.run(1)
    view._ipython_display_()
    with pytest.raises((ChatCancelled, KeyboardInterrupt)):
        chat.ask("Look up order 5")
    assert STOPPED == STOP
    assert view.state.totals_for(None).phase == STOP
    assert _status(view).startswith(f"-- {STOP}"), _status(view)
    assert RUNNING not in _status(view)
    if view.widget is not None:
        assert STOP in view._status.value
    chat.complete()  # resumes: the status moves on
    assert view.state.totals_for(None).phase == "complete"


def test_chat_cancel_while_a_tool_runs_leaves_stopped(cells: Cells) -> None:
    started, release = threading.Event(), threading.Event()

    @tool
    def slow_lookup(order_id: int) -> str:
        """Look up an order slowly."""
        started.set()
        release.wait(10)
        return f"order {order_id} found"

    chat = Chat(model="demo").with_tools(slow_lookup)
    view = ChatView(chat)
    cells.run(1)
    view._ipython_display_()
    errors: list[BaseException] = []

    def drive() -> None:
        try:
            chat.ask("Look up order 5")
        except BaseException as exc:
            errors.append(exc)

    t = threading.Thread(target=drive)
    t.start()
    assert started.wait(10)
    assert view.state.totals_for(None).phase == RUNNING
    chat.cancel()
    release.set()
    t.join(10)
    assert errors and isinstance(errors[0], ChatCancelled), errors
    assert view.state.totals_for(None).phase == STOP
    assert RUNNING not in _status(view)


def test_chat_cancel_of_a_turn_a_click_continued_says_stopped_not_failed(
    cells: Cells,
) -> None:
    """A click continues the turn in the background; chat.cancel() stops it. The view said
    "Continuing after your decision failed: ChatCancelled ... · error"; it says stopped."""
    from nbagent import Tool
    from nbagent.notebook._state import ErrorEntry
    from nbagent.notebook._widgets import ActionCard

    started, release = threading.Event(), threading.Event()

    class SlowRefund(Tool):
        """Issues a refund slowly."""

        requires_approval = True

        def execute(self, order_id: int) -> str:
            started.set()
            release.wait(10)
            return f"refunded order {order_id}"

    chat = Chat(model="demo").with_tools(SlowRefund)
    view = ChatView(chat)
    cells.run(1)
    view._ipython_display_()
    chat.ask("Refund order 5")
    (card,) = [w for w in view._cards.values() if isinstance(w, ActionCard)]
    try:
        card.click("approve")
        assert started.wait(10)
        chat.cancel()
    finally:
        release.set()
    assert view.continuation.wait(10)
    assert not [e for e in view.state.entries if isinstance(e, ErrorEntry)]
    assert view.state.totals_for(None).phase == STOP
    assert (
        "failed" not in _status(view)
        and "ChatCancelled" not in view.fallback_bundle()["text/plain"]
    )
