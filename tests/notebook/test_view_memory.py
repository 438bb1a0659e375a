"""A chat a notebook showed is let go with the chat: its view, its display state and its
continuation go with it once the user drops it and nothing on screen can still act on it.

The notebook keeps one display state and one continuation per chat. They were kept in a
registry keyed weakly by the chat, but the views they tell hold their chat: the registry
kept every chat a kernel ever displayed (``chat = Chat(...); chat.ask(...)`` run 30 times
left 30 chats, each with its history and log). A card still waiting kept its chat too
after its cell ran again and the page no longer showed it: an output now notes the cells
it is shown in and lets go when they run again. The views, the chat and the cards here
are real; ``Cells`` stands for the front end (see ``_views.py``); the kernel tests run a
real kernel, one as JupyterLab does (each request naming its cell).
"""

from __future__ import annotations

import gc
import inspect
import time
import weakref
from typing import Any

import _tools
import nbclient
import nbformat
import pytest
from _tools import REFUNDS as RAN
from _tools import IssueRefund, get_weather
from _views import Cells

from nbagent import Chat
from nbagent._display import flush_dirty
from nbagent.notebook import ChatView, _auto
from nbagent.notebook._auto import NotebookExtension
from nbagent.notebook._continuation import continuation_for
from nbagent.notebook._state import state_for


def _gone(*refs: weakref.ref[Chat], within: float = 5) -> bool:
    """Whether every chat is collected once what was due shortly ran (a view's last text
    update goes out a moment after its turn: :data:`~nbagent.notebook._view.TEXT_THROTTLE`)."""
    deadline = time.monotonic() + within
    while True:
        gc.collect()
        if all(r() is None for r in refs) or time.monotonic() > deadline:
            return all(r() is None for r in refs)
        time.sleep(0.05)


def _shown(cells: Cells, count: int, prompt: str) -> weakref.ref[Chat]:
    """Cell ``count``: ``chat = Chat(...); chat.ask(prompt)``, as in a kernel; the chat's
    weak reference once the cell ended and its name is bound to something else."""
    chat = Chat(model="demo", display=True).with_tools(IssueRefund, get_weather)
    chat.extend(NotebookExtension())
    cells.run(count)
    chat.ask(prompt)
    flush_dirty()  # IPython's post_run_cell
    state_for(chat), continuation_for(chat)  # what every view of it reads
    return weakref.ref(chat)


def test_a_settled_chat_the_user_dropped_is_let_go(cells: Cells) -> None:
    refs = [_shown(cells, 2 + i, f"What's the weather in City{i}?") for i in range(5)]
    assert _gone(*refs)


def test_a_chat_shown_whole_is_let_go_with_its_view(cells: Cells) -> None:
    chat = Chat(model="demo").with_tools(get_weather)
    chat.ask("What's the weather in Oslo?")
    cells.run(3)
    view = ChatView(chat)
    cells.display(view)
    flush_dirty()
    ref = weakref.ref(chat)
    del chat, view
    assert _gone(ref)


def test_a_chat_whose_card_still_waits_on_screen_is_kept_until_it_is_decided(
    cells: Cells,
) -> None:
    """A live card can still be clicked: its chat stays while it waits, even when no name
    in the notebook holds it; once decided (here through the card's chat) it goes."""
    RAN.clear()
    ref = _shown(cells, 2, "Refund order 7")
    assert not _gone(ref, within=0.5)  # ten times the view's last update's delay
    chat = ref()
    assert chat is not None and chat.status == "awaiting_approval"  # the card on screen
    view = _auto.turn_view(chat)
    assert view is not None and view.live
    chat.approve(chat.pending_approvals[0])
    chat.complete()
    flush_dirty()
    assert RAN.count(7) == 1 and not view.live
    del chat, view
    assert _gone(ref)


# ------------------------------------------------------------------ in a real kernel
KERNEL_SETUP = (
    inspect.getsource(_tools)
    + """
import gc, time
import nbagent
from nbagent import Chat

RAN = REFUNDS

def live_chats():
    deadline = time.monotonic() + 5
    while True:  # what is due shortly (a view's last update) runs first
        gc.collect()
        n = sum(isinstance(o, Chat) for o in gc.get_objects())  # holding none of them
        if n <= 1 or time.monotonic() > deadline:
            return n
        time.sleep(0.05)
"""
)

RERUN = """\
chat = Chat(model="demo").with_tools(IssueRefund, get_weather)
chat.ask("What's the weather in Oslo?")
"""

DECIDED = """\
chat = Chat(model="demo").with_tools(IssueRefund, get_weather)
chat.ask("Refund order 7")
chat.approve(chat.pending_approvals[0])
chat.complete()
"""


@pytest.mark.notebook
def test_a_kernel_keeps_only_the_chat_its_cells_still_name() -> None:
    """The same cell run twelve times (``chat = Chat(...); chat.ask(...)``), half of them
    through a card that was decided: one chat left, the one ``chat`` names (each was kept
    for good before: twelve)."""
    nb = nbformat.v4.new_notebook()
    sources = [KERNEL_SETUP, *([RERUN, DECIDED] * 6), "print(live_chats())"]
    nb.cells = [nbformat.v4.new_code_cell(s) for s in sources]
    nbclient.NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    (out,) = nb.cells[-1].outputs
    assert out["text"].strip() == "1"


# ------------------------------------------------------------------ a cell run again
def _asked(cells: Cells, count: int, cell: str | None, prompt: str, **kw: Any) -> Chat:
    """Run ``count`` of the kernel, cell ``cell`` (``None``: a client sending no ids):
    ``chat = Chat(...); chat.ask(prompt)``."""
    cells.run(count, cell=cell)
    chat = Chat(model="demo", display=True, **kw).with_tools(IssueRefund, get_weather)
    chat.extend(NotebookExtension())
    chat.ask(prompt)
    flush_dirty()
    return chat


def _view(chat: Chat) -> ChatView:
    view = _auto.turn_view(chat)
    assert isinstance(view, ChatView)
    return view


def test_a_cell_run_again_lets_go_of_the_card_it_showed_and_decides_nothing(
    cells: Cells,
) -> None:
    """The card was removed from the page by the new run: its widgets close and its chat is
    let go. Nothing is decided: the call never ran."""
    RAN.clear()
    ref = weakref.ref(_asked(cells, 2, "cell-a", "Refund order 8"))
    assert not _gone(ref, within=0.5)  # the card on the page keeps it
    _asked(cells, 3, "cell-a", "What's the weather in Oslo?")  # the same cell, run again
    assert _gone(ref) and RAN == []


def test_a_chat_still_named_keeps_its_pending_call_when_its_cell_runs_again(
    cells: Cells,
) -> None:
    RAN.clear()
    old = _asked(cells, 2, "cell-a", "Refund order 9")
    card = _view(old)
    assert card.live
    _asked(cells, 3, "cell-a", "What's the weather in Oslo?")
    assert not card.live and card.widget.comm is None  # its widgets are closed
    assert old.status == "awaiting_approval" and RAN == []  # nothing decided
    old.approve(old.pending_approvals[0])  # in code, as ever
    old.complete()
    assert RAN == [9] and old.status == "complete"


def test_a_view_shown_in_two_cells_stays_until_both_ran_again(cells: Cells) -> None:
    chat = _asked(cells, 2, "cell-a", "Refund order 10")
    cells.run(3, cell="cell-b")
    whole = ChatView(chat)
    cells.display(whole)
    cells.run(4, cell="cell-c")
    cells.display(whole)  # the same view again, in a third cell
    assert whole.live
    cells.run(5, cell="cell-b")
    assert whole.live  # still on the page in cell-c
    cells.run(6, cell="cell-d", deleted=("cell-c",))  # cell-c deleted
    assert not whole.live and whole.widget.comm is None
    assert chat.status == "awaiting_approval"


def test_a_client_that_sends_no_cell_ids_closes_nothing(cells: Cells) -> None:
    """nbclient and papermill run each cell once and send no ids: views stay as they were."""
    chat = _asked(cells, 2, None, "Refund order 11")
    _asked(cells, 3, None, "What's the weather in Oslo?")
    assert _view(chat).live


def test_a_stored_chat_stops_following_decisions_when_its_cell_runs_again(
    cells: Cells, tmp_path: Any
) -> None:
    """A card waiting on a stored chat follows decisions made elsewhere (the inbox, another
    kernel); run again, the cell's old chat stops following: a decision made elsewhere
    waits in the store for whoever loads it, and nothing runs in this kernel unseen."""
    db = tmp_path / "chats.db"
    old = _asked(cells, 2, "cell-a", "Refund order 12", store=db)
    follows = continuation_for(old)
    assert follows.following
    _asked(cells, 3, "cell-a", "What's the weather in Oslo?", store=db)
    assert not follows.following and old.status == "awaiting_approval"


def _run_cell(kc: Any, code: str, cell: str) -> str:
    """Run ``code`` as JupyterLab runs cell ``cell`` (its id in the request's metadata);
    what it printed."""
    content = {
        "code": code,
        "silent": False,
        "store_history": True,
        "user_expressions": {},
        "allow_stdin": False,
        "stop_on_error": True,
    }
    msg = kc.session.msg("execute_request", content, metadata={"cellId": cell})
    kc.shell_channel.send(msg)
    printed: list[str] = []
    while True:
        out = kc.get_iopub_msg(timeout=60)
        if out["parent_header"].get("msg_id") != msg["header"]["msg_id"]:
            continue
        kind, body = out["msg_type"], out["content"]
        if kind == "stream":
            printed.append(body["text"])
        elif kind == "error":
            raise AssertionError("\n".join(body["traceback"]))
        elif kind == "status" and body["execution_state"] == "idle":
            return "".join(printed)


@pytest.mark.notebook
def test_a_kernel_lets_go_of_the_cards_of_a_cell_run_again() -> None:
    """In a real kernel, run as JupyterLab runs it (each request names its cell): the same
    cell run six times, each leaving a card waiting, keeps only the chat it names now; the
    calls never ran."""
    from jupyter_client.manager import start_new_kernel

    km, kc = start_new_kernel(kernel_name="python3")
    try:
        _run_cell(kc, KERNEL_SETUP, "setup")
        for i in range(6):
            _run_cell(
                kc,
                'chat = Chat(model="demo").with_tools(IssueRefund)\n'
                f'chat.ask("Refund order {i}")\n',
                "cell-a",
            )
        left = _run_cell(kc, "print(chat.status, live_chats(), RAN)", "probe")
        assert left.split() == ["awaiting_approval", "1", "[]"]
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def test_threads_asking_for_a_chats_objects_at_once_share_them() -> None:
    """The first use of a chat's display state and continuation from several threads at
    once (a click's continuation, the kernel, a store's follower) makes one of each."""
    import threading

    for _ in range(50):
        chat = Chat(model="demo")
        start = threading.Barrier(4)
        got: list[tuple[Any, Any]] = []

        def grab(chat: Chat, start: threading.Barrier, got: list[tuple[Any, Any]]) -> None:
            start.wait()
            got.append((state_for(chat), continuation_for(chat)))

        threads = [threading.Thread(target=grab, args=(chat, start, got)) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        assert len(got) == 4
        assert len({id(s) for s, _ in got}) == 1 and len({id(c) for _, c in got}) == 1


def test_a_chats_object_forgotten_is_made_anew() -> None:
    from nbagent.notebook._state import _states, existing_state

    chat = Chat(model="demo")
    chat.ask("hello")
    first = state_for(chat)
    assert _states.forget(chat) is first and existing_state(chat) is None
    assert _states.forget(chat) is None  # nothing left to drop
    again = state_for(chat)
    assert again is not first and existing_state(chat) is again
    assert [e.key for e in again.entries] == [e.key for e in first.entries]  # from the record
