""" "Stop always allowing" stays while the rule holds: a view whose card offers it keeps its
widgets after its turn settles and after later cells (``post_run_cell``), also for a call the
rule approved after ``chat.always_allow(Tool)`` in code; once the rule is taken back, the next
cell leaves the view static like any other. Driven as in a kernel: the ``cells`` fixture's
outputs, ``flush_dirty()`` where IPython runs ``post_run_cell``."""

from __future__ import annotations

from typing import Any

from _views import Cells, widgets_in

from nbagent import Chat, Tool
from nbagent._display import WIDGET_MIME, flush_dirty
from nbagent.notebook import ChatView, _auto
from nbagent.notebook._auto import NotebookExtension
from nbagent.notebook._widgets import ActionCard
from nbagent.testing import ScriptedProvider, call_tools, reply


class Refund(Tool):
    """Refund an order."""

    requires_approval = True

    def execute(self, order_id: int) -> str:
        return f"refunded {order_id}"


def notebook_chat(*script: Any) -> Chat:
    chat = Chat(provider=ScriptedProvider(list(script)), display=True).with_tools(Refund)
    chat.extend(NotebookExtension())
    return chat


def view_of(chat: Chat) -> ChatView:
    view = _auto.turn_view(chat)
    assert isinstance(view, ChatView)
    return view


def card(view: ChatView, call_id: str) -> ActionCard:
    (found,) = [w for w in widgets_in(view) if isinstance(w, ActionCard) and w.call_id == call_id]
    return found


def test_always_allow_clicked_keeps_its_offer_across_later_cells(cells: Cells) -> None:
    chat = notebook_chat(call_tools(("refund", {"order_id": 1}, "r1")), reply("done"))
    cells.run(2, cell="A")
    chat.ask("go")
    view = view_of(chat)
    flush_dirty()  # the end of cell 2: a card waits
    card(view, "r1").click("always")
    assert view.continuation.wait(10) and chat.status == "complete"
    assert view.live and card(view, "r1").revocable
    for n, cell in ((3, "B"), (4, "C")):  # other cells run: post_run_cell each time
        cells.run(n, cell=cell)
        flush_dirty()
        assert view.live and card(view, "r1").revocable, n
        assert WIDGET_MIME in cells.outputs[view.display_id]
    # reopened with a new kernel, the widget is dead: its twin holds the transcript
    twin = cells.outputs[f"{view.display_id}-twin"]
    assert "refunded 1" in twin["text/plain"] and "kernel session" not in twin["text/plain"]
    card(view, "r1").click("revoke")
    assert chat.always_allowed == () and not view.live  # nothing left to act on: static


def test_always_allow_in_code_offers_it_on_the_call_the_rule_approved(cells: Cells) -> None:
    chat = notebook_chat(call_tools(("refund", {"order_id": 5}, "q1")), reply("ok"))
    chat.always_allow(Refund)
    cells.run(2, cell="A")
    chat.ask("go")
    view = view_of(chat)
    flush_dirty()  # the end of the cell
    assert view.live and card(view, "q1").revocable
    assert WIDGET_MIME in cells.outputs[view.display_id]
    cells.run(3, cell="B")
    flush_dirty()
    assert view.live and card(view, "q1").revocable
    chat.revoke("refund")  # taken back in code: the next cell lets the view go
    cells.run(4, cell="C")
    flush_dirty()
    assert not view.live and WIDGET_MIME not in cells.outputs[view.display_id]
    assert "refunded 5" in cells.outputs[view.display_id]["text/plain"]
