"""ChatView: the live widget view of a chat (or of one turn).

The view listens to the chat's :class:`~nbagent.notebook._state.ChatState` and
keeps one widget per entry: an ``ipywidgets.HTML`` for messages, steps and
ungated tool calls, an :class:`~nbagent.notebook._widgets.ActionCard` for each
gated call (the call's card with its buttons inside: one card per call) and for
each exhausted step budget, an ``ActionCard`` of kind ``batch`` (Approve
all / Deny all) above the first gated call of a response that has several
waiting, and an ``ActionCard`` of kind ``input`` under a call's card for each
input a person is asked for it (a form, a link, a sampling request, a question,
an external result), answered through ``chat.answer`` / ``chat.decline`` and
folded to one line once answered. An event re-renders only
the entries it touched, and the entries are kept in pages of which only the
last few are live widgets ("Show earlier" brings older pages back), so the
cost of an event stays flat however long the chat grows. A page holds at
least ``page_size`` entries and ends where a turn ends; a turn too long for a
page (in a view of one turn, any) folds where a model step begins, and only a
step of hundreds of calls folds inside itself (:data:`PAGE_CAP`).

Clicks go to :meth:`ChatView._on_card_action` (an input card's to
:meth:`ChatView._on_input_action`), which records the decision or the answer
through the chat's public API and asks the chat's
:class:`~nbagent.notebook._continuation.Continuation` to run the loop again.

A displayed view is live only while it has something to do. When its chat
settles with nothing left to decide in it (and after every cell, when the chat
is not running), its output is updated to the static bundle and its widgets
are closed: a saved notebook holds HTML, not widget references. Anything that
touches it later brings it back live. A view still waiting for a decision keeps
its widgets and fills its *twin* output with the static transcript and how to
decide after a kernel restart (see ``_fallback.twin_bundle``). When a later cell
continues its turn (``chat.complete()``), the view hands over: it goes static
with "continued in cell [n]" and the new cell shows the continuation live.
"""

from __future__ import annotations

import bisect
import functools
import json
import time
from typing import TYPE_CHECKING, Any

import ipywidgets
from ipywidgets.widgets.widget_string import HTMLStyle

from .._aio import spawn
from .._display import LiveOutput, close_models, mark_dirty
from .._errors import DecisionError, InputError
from .._html import unredacted
from .._secrets import redact_keys
from .._types import PendingInput, short_id
from ._cards import by_always_allow, input_html, reason_words, settled_input_words, tool_name
from ._continuation import continuation_for
from ._fallback import running_twin_bundle, twin_bundle
from ._forms import FormError, for_browser, form_answer, form_fields
from ._render import decision_words, entry_html, esc, status_html, style_tag
from ._state import (
    BudgetEntry,
    CallEntry,
    Entry,
    ErrorEntry,
    StepEntry,
    TextEntry,
    UserEntry,
    state_for,
    waits_for_someone,
)
from ._widgets import ActionCard, CardError

if TYPE_CHECKING:
    from .._base_chat import BaseChat as Chat

TEXT_THROTTLE = 0.05  # seconds between pushes of streaming text to the browser
PAGE_CAP = 4
"""A page of this many times ``page_size`` entries ends even inside a step (see
:meth:`ChatView._paginate`): a response asking for hundreds of calls still folds."""


class ChatView:
    """A live view of ``chat`` (all turns) or of one ``turn``.

    Args:
        chat: The chat to show.
        turn: Show only this turn (what ``chat.ask()`` displays); ``None`` for all.
        page_size: Entries per page, at least (a page ends on a turn's boundary; one that
            holds a single turn, or twice ``page_size`` entries, on a model step's; one of
            :data:`PAGE_CAP` times ``page_size``, anywhere).
        live_pages: Pages kept as live widgets; older ones fold behind "Show earlier".
        skip: Keys of entries not to show (a continuation view starts where the
            earlier view handed over).
        origin: The cell a continuation view continues (said on its first line).
        light: Make no widgets until they are needed: while nothing in the view waits
            for a person and it holds at most ``page_size`` entries, a displayed view is
            its HTML, updated in its output (what each turn a chat shows is).

    Display it with ``display(view)`` (or just :func:`show` it).
    ``view.widget`` is the ipywidgets container (while ``view.live``; ``None`` before
    a light view needs one).
    """

    def __init__(
        self,
        chat: Chat,
        *,
        turn: int | None = None,
        page_size: int = 25,
        live_pages: int = 2,
        skip: frozenset[str] = frozenset(),
        origin: int | None = None,
        light: bool = False,
    ):
        if page_size < 1 or live_pages < 1:
            raise ValueError("page_size and live_pages must be at least 1")
        self.chat = chat
        self.turn = turn
        self.page_size = page_size
        self.live_pages = live_pages
        self.state = state_for(chat)
        self.continuation = continuation_for(chat)
        self.output = LiveOutput(
            f"nbagent-{short_id(chat.id)}",
            self.fallback_bundle,
            self._twin_data,
            self.state.lock,
            twin_needed=self._busy if light else None,
            cleared=self._cleared,
        )
        self.uid = self.output.uid
        self.display_id = self.output.display_id
        self.frozen = False
        self.skip = frozenset(skip)
        self.title = (
            f"continues turn {turn} from cell [{origin}]"
            if origin is not None and turn is not None
            else ""
        )
        self._countdown: str | None = None
        self._displayed = False
        self._behind = False  # its HTML changed since the output's last update
        self._pushed = 0.0  # when that update was sent
        self._push_due = False  # a later update is on its way (_push_later)
        # Drawn on another page than the first (reloaded, another tab): that page cannot
        # receive the output's updates, only widget state; so when the view goes static its
        # container stays open with the static HTML in it (_keep_in_widget), not closed.
        self._pages_seen: set[str] = set()
        self._redrawn = False
        self._kept: tuple[ipywidgets.VBox, ipywidgets.HTML] | None = None
        self._twin_was: str | None = None  # what the twin was last sent for (_sync_twin)
        self._reset()
        with self.state.lock:
            if not light or self._needs_widgets() or self._size() > self.page_size:
                self._make_widgets()
                self._build(self._entries())
                self._render_status()
            self.state.add_listener(self._on_change)
        self.continuation.add_countdown_listener(self._on_countdown)

    def _reset(self) -> None:
        """No widgets yet: what the view's widgets are kept in, empty."""
        self.widget: ipywidgets.VBox | None = None
        self._title: ipywidgets.HTML | None = None
        self._more: ipywidgets.Button | None = None  # made when a page first folds
        self._widgets: dict[str, ipywidgets.Widget] = {}
        self._html: dict[str, ipywidgets.HTML] = {}
        self._cards: dict[str, ActionCard] = {}
        self._step_calls: dict[int, list[str]] = {}  # step -> its gated calls' keys, in order
        self._batches: dict[int, ActionCard] = {}  # step -> its Approve all / Deny all card
        self._inputs: dict[str, ActionCard] = {}  # input id -> its card
        self._input_boxes: dict[str, ipywidgets.VBox] = {}  # call key -> its input cards
        self._always_from: dict[
            str, ActionCard
        ] = {}  # tool -> the card "Always allow" was clicked on
        self._pos: dict[str, int] = {}
        self._keys: list[str] = []
        self._starts: list[int] = []  # each page's first position (pages end on boundaries)
        self._pages: dict[int, ipywidgets.VBox] = {}
        self._first_live = 0
        self._expanded = False
        self._text_pushed: dict[str, float] = {}
        self._dirty_text: set[str] = set()

        self._spare: list[ipywidgets.HTML] = []  # entry widgets of folded pages, for reuse
        self._spare_boxes: list[ipywidgets.VBox] = []

    def _make_widgets(self) -> None:
        """The view's widget tree (empty pages; :meth:`_build` fills them) on its output."""
        self._reset()
        self._entry_layout, self._entry_style, self._box_layout = _shared_parts()
        self._style = _shared_style()
        self._body = ipywidgets.VBox([], layout=self._box_layout)
        self._status = ipywidgets.HTML(layout=self._entry_layout, style=self._entry_style)
        if self.title:
            self._title = ipywidgets.HTML(
                f'<div class="nba-step">{esc(self.title)}</div>',
                layout=self._entry_layout,
                style=self._entry_style,
            )
        kept, self._kept = self._kept, None
        if kept is not None and getattr(kept[0], "comm", None) is not None:
            # the container a page drawn anew still shows: its children change in place
            box, final = kept
            box.children = tuple(self._chrome())
            close_models([final], keep=_SHARED.values())
            self.widget = box
        else:
            self.widget = ipywidgets.VBox(self._chrome(), layout=self._box_layout)
        self.widget.add_class("nba-chat")
        self.output.attach(self.widget)

    def _card_rendered(self, card: ActionCard) -> None:
        """A card was drawn (a page opened, or reloaded, with the kernel alive)."""
        self.continuation.note_rendered()
        self._pages_seen |= card.pages
        if len(self._pages_seen) > 1:
            self._redrawn = True

    def _chrome(self) -> list[ipywidgets.Widget]:
        """The view's own widgets around its entries, in order."""
        parts = [self._style, self._title, self._more, self._body, self._status]
        return [w for w in parts if w is not None]

    @property
    def live(self) -> bool:
        """Whether the view's output shows its widgets (else its static form)."""
        return self.output.live

    def __repr__(self) -> str:
        what = "all turns" if self.turn is None else f"turn {self.turn}"
        how = "live" if self.live else "static"
        n = len(self._entries())
        return f"<ChatView of chat {short_id(self.chat.id)} ({what}, {n} entries, {how})>"

    def _size(self) -> int:
        """How many entries the view shows, at most (without walking them)."""
        return self.state.count_for(self.turn)

    def _entries(self) -> list[Entry]:
        return [e for e in self.state.entries_for(self.turn) if e.key not in self.skip]

    def pending(self) -> bool:
        """Whether something in this view waits for a person (an approval, an input, a
        budget card)."""
        with self.state.lock:
            return any(waits_for_someone(e) for e in self._entries())

    def _needs_widgets(self) -> bool:
        """Whether a person can act in this view: something waits for them, or a call an
        "Always allow" rule approved offers to take the rule back while it holds."""
        with self.state.lock:
            allowed = self.chat.always_allowed
            return any(_acts(e, allowed) for e in self._entries())

    # ------------------------------------------------------------- building
    def _build(self, entries: list[Entry]) -> None:
        for i, e in enumerate(entries):
            self._keys.append(e.key)
            self._pos[e.key] = i
            self._paginate(i, e)
            self._note_gated(e)
        n_pages = len(self._starts)
        first = max(0, n_pages - self.live_pages)
        # Pending cards must stay reachable: never fold a page that holds one.
        for e in self.state.pending_cards():
            pos = self._pos.get(e.key)
            if pos is not None:
                first = min(first, self._page_of(pos))
        self._first_live = first
        boxes = [self._make_page(p) for p in range(first, n_pages)]
        self._body.children = tuple(boxes)
        self._update_more()

    def _paginate(self, pos: int, e: Entry) -> None:
        """Start a new page at ``pos`` when the current one is full and ``e`` begins a turn.
        A page that is one turn's alone (in a view of one turn, always) ends where a model
        step begins, as does one twice full; one of :data:`PAGE_CAP` pages (a step with
        that many calls) ends anywhere. So a page stays bounded, and an event's cost flat,
        however long a turn or a step runs."""
        if not self._starts:
            self._starts.append(pos)
            return
        size = pos - self._starts[-1]
        if size < self.page_size:
            return
        by_key = self.state.by_key
        before = by_key.get(self._keys[pos - 1])
        if size >= PAGE_CAP * self.page_size or (before is not None and before.turn != e.turn):
            self._starts.append(pos)
        elif isinstance(e, StepEntry):
            first = by_key.get(self._keys[self._starts[-1]])
            one_turn = self.turn is not None or (first is not None and first.turn == e.turn)
            if one_turn or size >= 2 * self.page_size:
                self._starts.append(pos)

    def _page_of(self, pos: int) -> int:
        return bisect.bisect_right(self._starts, pos) - 1

    def _page_entries(self, page: int) -> list[Entry]:
        keys = self._page_keys(page)
        by_key = self.state.by_key
        return [by_key[k] for k in keys if k in by_key]

    def _make_page(self, page: int) -> ipywidgets.VBox:
        entries = self._page_entries(page)
        box = self._new_box([self._make_widget(e) for e in entries])
        self._pages[page] = box
        for step in {e.r.step or 0 for e in entries if isinstance(e, CallEntry) and e.gated}:
            self._sync_batch(step)
        return box

    def _make_widget(self, e: Entry) -> ipywidgets.Widget:
        widget: ipywidgets.Widget
        if (isinstance(e, CallEntry) and e.gated) or isinstance(e, BudgetEntry):
            widget = self._make_card(e)  # a gated call's card is its decision card
        else:
            # One Layout and one style model shared by every entry: an entry is one model,
            # and the models of folded pages are reused, so a long chat opens no more
            # models than its live pages show (a saved notebook's widget state stays small).
            value = entry_html(e, live=True)
            if self._spare:
                widget = self._spare.pop()
                widget.value = value
            else:
                widget = ipywidgets.HTML(value, layout=self._entry_layout, style=self._entry_style)
            self._html[e.key] = widget
        self._widgets[e.key] = widget
        if isinstance(e, CallEntry) and e.inputs:
            widget = self._with_inputs(e.key, widget)
            self._sync_inputs(e)
        return widget

    def _make_card(self, e: Entry) -> ActionCard:
        if isinstance(e, CallEntry):
            card = ActionCard(
                self._on_card_action,
                kind="approval",
                value=entry_html(e, live=True),
                tool=tool_name(e),  # as shown: synced, and kept in a saved notebook
                tool_name=e.r.tool,  # as sent: what always_allow / revoke act on
                call_id=e.r.call_id,
                arguments=e.arguments_text,
                editable=e.arguments_editable and not e.r.hosted,
                reason=reason_words(e),
                hosted=bool(e.r.hosted),
            )
        else:
            assert isinstance(e, BudgetEntry)
            steps = self._budget_steps()
            card = ActionCard(
                self._on_card_action,
                kind="budget",
                steps=steps,
                budget=e.budget,
                increment=self._increment_label(e.budget, steps),
            )
        card.on_rendered = functools.partial(self._card_rendered, card)
        self._cards[e.key] = card
        self._sync_card(card, e)
        return card

    # ------------------------------------------------------------- inputs
    def _with_inputs(self, key: str, widget: ipywidgets.Widget) -> ipywidgets.Widget:
        """``widget`` (the call's) with the box its input cards go into under it."""
        box = ipywidgets.VBox([], layout=self._box_layout)
        self._input_boxes[key] = box
        pair = ipywidgets.VBox([widget, box], layout=self._box_layout)
        self._widgets[key] = pair
        return pair

    def _sync_inputs(self, e: CallEntry) -> None:
        """A card under the call for each input it waits for; a card whose input was
        answered (here, in code, elsewhere) or withdrawn folds to its one line."""
        for p in e.inputs:
            if p.id in self._inputs:
                continue
            box = self._input_boxes.get(e.key)
            if box is None:
                widget = self._widgets.get(e.key)
                page = self._pages.get(self._page_of(self._pos[e.key])) if widget else None
                if widget is None or page is None or widget not in page.children:
                    continue  # not on a live page: drawn when its page is
                pair = self._with_inputs(e.key, widget)
                page.children = tuple(pair if w is widget else w for w in page.children)
                box = self._input_boxes[e.key]
            card = self._make_input_card(p)
            box.children = (*box.children, card)
        waiting = {p.id for p in e.inputs}
        box = self._input_boxes.get(e.key)
        for card in box.children if box is not None else ():
            if isinstance(card, ActionCard) and card.input_id not in waiting:
                self._settle_input_card(card)

    def _make_input_card(self, p: PendingInput) -> ActionCard:
        card = ActionCard(
            self._on_input_action,
            kind="input",
            value=input_html(p, live=True),
            tool=redact_keys(p.tool or ""),
            call_id=p.call_id or "",
            input_id=p.id,
            input_kind=p.kind,
            fields=_browser_fields(p) if p.kind == "elicitation" else [],
            choices=[redact_keys(str(c)) for c in p.choices] if p.kind == "ask_user" else [],
        )
        card.on_rendered = functools.partial(self._card_rendered, card)
        self._inputs[p.id] = card
        return card

    def _settle_input_card(self, card: ActionCard) -> None:
        """An input no longer waits: its card becomes one line saying who answered how."""
        if card.state not in ("pending", "working", "closed"):
            return
        r = self.state.record.input(card.input_id)
        if r is None or r.status == "pending":
            return
        card.summary = settled_input_words(r, r.input_id in self.state.deciders.inputs_by_hand)
        card.error = ""
        card.state = {"accept": "answered", "decline": "declined"}.get(r.status, "cancelled")

    def _on_input_action(self, card: ActionCard, action: dict[str, Any]) -> None:
        """A click on an input card: the answer (checked, typed) through ``chat.answer``, or
        ``chat.decline``; a bad answer raises :class:`CardError` and the input still waits."""
        kind = action.get("kind")
        pending = next((p for p in self.chat.pending_inputs if p.id == card.input_id), None)
        if pending is None:
            self._settle_input_card(card)
            if card.state in ("pending", "working"):
                raise CardError("This input does not wait for an answer any more.")
            return
        try:
            if kind == "accept":
                value = _input_answer(pending, action.get("data"))
                self.state.mark_input_by_hand(pending.id)
                self.chat.answer(pending, value)
            elif kind in ("decline", "cancel"):
                reason = str(action.get("reason") or "").strip() or None
                self.state.mark_input_by_hand(pending.id)
                self.chat.decline(pending, reason, cancel=kind == "cancel")
            else:
                raise CardError(f"unknown action {kind!r}")
        except InputError as exc:
            if any(p.id == pending.id for p in self.chat.pending_inputs):
                raise CardError(str(exc)) from None  # a bad answer: the input still waits
            # answered elsewhere first (the chat has that answer now): the turn goes on with
            # it, as it would have had the follower seen it before the click
            self._settle_input_card(card)
            card.error = str(exc)
            self.continuation.request()
            return
        self._settle_input_card(card)
        self.continuation.request()

    # ------------------------------------------------- Approve all / Deny all
    def _note_gated(self, e: Entry) -> None:
        if isinstance(e, CallEntry) and e.gated:
            self._step_calls.setdefault(e.r.step or 0, []).append(e.key)

    def _waiting(self, step: int) -> list[CallEntry]:
        """The calls of ``step``'s response still waiting for a decision."""
        by_key = self.state.by_key
        out = []
        for key in self._step_calls.get(step, ()):
            e = by_key.get(key)
            if isinstance(e, CallEntry) and e.pending and e.verdict is None:
                out.append(e)
        return out

    def _sync_batch(self, step: int) -> None:
        """Show Approve all / Deny all above the response's calls while two or more wait."""
        waiting = self._waiting(step)
        batch = self._batches.get(step)
        if batch is None:
            if len(waiting) < 2 or not self._place_batch(step):
                return
            batch = self._batches[step]
        if batch.state == "working":
            return
        if len(waiting) >= 2:
            batch.call_ids = [e.r.call_id for e in waiting]
            batch.count = len(waiting)
            batch.summary = ""
            batch.state = "pending"
        elif batch.state == "pending":
            batch.state = "closed"  # one or none left: each card decides its own

    def _place_batch(self, step: int) -> bool:
        """Put a new batch card above the first gated call of ``step`` (on a live page)."""
        keys = self._step_calls.get(step) or []
        anchor = keys[0] if keys else None
        widget = self._widgets.get(anchor) if anchor else None
        box = self._pages.get(self._page_of(self._pos[anchor])) if anchor else None
        if anchor is None or widget is None or box is None or widget not in box.children:
            return False
        batch = ActionCard(self._on_card_action, kind="batch", state="closed")
        batch.on_rendered = functools.partial(self._card_rendered, batch)
        self._batches[step] = batch
        pair = ipywidgets.VBox([batch, widget])
        box.children = tuple(pair if w is widget else w for w in box.children)
        self._widgets[anchor] = pair
        return True

    def _decide_all(self, card: ActionCard, kind: str, reason: str | None) -> None:
        """Approve all / Deny all: each waiting call decided through the chat's API."""
        if card.late and not any(self._still_waits(c) for c in card.call_ids):
            card.state = "closed"  # a late click with nothing left to decide: nothing done
            return
        decided, elsewhere = 0, 0
        for call_id in list(card.call_ids):
            entry = self.state.by_key.get(f"c:{call_id}")
            if not (isinstance(entry, CallEntry) and entry.pending and entry.verdict is None):
                elsewhere += 1  # decided since the card was drawn: that decision stands
                continue
            try:
                with self.state.deciding_by_hand(call_id):
                    if kind == "approve_all":
                        self.chat.approve(call_id)
                    else:
                        self.chat.deny(call_id, reason=reason)
                decided += 1
            except DecisionError:  # decided meanwhile (another card, code, a store)
                elsewhere += 1
        verb = "Approved" if kind == "approve_all" else "Denied"
        summary = f"{verb} {decided} call{'s' if decided != 1 else ''}"
        if reason and kind == "deny_all":
            summary += f": {reason}"
        if elsewhere:
            summary += f" ({elsewhere} decided elsewhere first)"
        card.summary = summary + "."
        card.state = "approved" if kind == "approve_all" else "denied"
        for call_id in card.call_ids:
            key = f"c:{call_id}"
            entry, own = self.state.by_key.get(key), self._cards.get(key)
            if isinstance(entry, CallEntry) and own is not None:
                self._sync_card(own, entry)
        self.continuation.request()

    def _still_waits(self, call_id: str) -> bool:
        entry = self.state.by_key.get(f"c:{call_id}")
        return isinstance(entry, CallEntry) and entry.pending and entry.verdict is None

    def _budget_steps(self) -> int:
        """The steps the budget card's Continue grants: the chat's step budget again, plus
        the round of tool calls already due (the calls of the last response), so that one
        click always reaches the model's next answer or a decision."""
        from .._config import get_config

        steps = int(self.chat.max_steps or get_config().max_steps)
        transcript = self.chat.transcript
        calls = getattr(transcript[-1], "tool_calls", ()) if transcript else ()
        if any(not c.is_final for c in calls):
            steps += 1
        return steps

    def _increment_label(self, budget: str, steps: int) -> str:
        """What the budget card's Continue adds, as its button says it."""
        if budget == "cost":
            dollars = self.chat.budget_increment("cost")
            if dollars:
                return f"+${dollars:,.2f}" if dollars >= 0.01 else f"+${dollars:.2g}"
        elif budget == "tokens":
            tokens = self.chat.budget_increment("tokens")
            if tokens:
                return f"+{tokens:,} tokens"
        return f"+{steps} step{'s' if steps != 1 else ''}"

    # -------------------------------------------------------------- paging
    def _update_more(self) -> None:
        hidden = self._starts[self._first_live] if self._first_live < len(self._starts) else 0
        if hidden and self._more is None:
            self._more = ipywidgets.Button(
                description="Show earlier",
                layout=ipywidgets.Layout(width="auto", height="auto"),
                tooltip="Show the previous page of this conversation",
            )
            self._more.add_class("nba-more")
            self._more.on_click(lambda _b: self.show_earlier())
            if self.widget is not None:
                self.widget.children = tuple(self._chrome())
        if self._more is None:
            return
        if hidden:
            self._more.description = f"Show earlier ({hidden:,} more entries)"
            self._more.layout.display = None
        else:
            self._more.layout.display = "none"

    def show_earlier(self) -> None:
        """Bring back the previous page (the "Show earlier" button)."""
        with self.state.lock:
            if self._first_live == 0:
                return
            self._expanded = True
            self._first_live -= 1
            box = self._make_page(self._first_live)
            self._body.children = (box, *self._body.children)
            self._update_more()

    def _append(self, e: Entry) -> None:
        pos = len(self._keys)
        self._keys.append(e.key)
        self._pos[e.key] = pos
        self._paginate(pos, e)
        self._note_gated(e)
        page = len(self._starts) - 1
        widget = self._make_widget(e)
        box = self._pages.get(page)
        if box is not None:
            box.children = (*box.children, widget)
            return
        box = self._new_box([widget])
        self._pages[page] = box
        children = (*self._body.children, box)
        live = len(children)
        if not self._expanded and live > self.live_pages:
            oldest = self._first_live
            if not any(self._has_pending(k) for k in self._page_keys(oldest)):
                children = children[1:]
                self._drop_page(oldest)
                self._first_live += 1
        self._body.children = children
        self._update_more()

    def _page_keys(self, page: int) -> list[str]:
        if page >= len(self._starts):
            return []
        end = self._starts[page + 1] if page + 1 < len(self._starts) else len(self._keys)
        return self._keys[self._starts[page] : end]

    def _has_pending(self, key: str) -> bool:
        e = self.state.by_key.get(key)
        return e is not None and waits_for_someone(e)

    def _new_box(self, children: list[ipywidgets.Widget]) -> ipywidgets.VBox:
        if self._spare_boxes:
            box = self._spare_boxes.pop()
            box.children = tuple(children)
            return box
        return ipywidgets.VBox(children, layout=self._box_layout)

    def _drop_page(self, page: int) -> None:
        """A page folded: its decision cards close, its entry widgets wait to be reused."""
        box = self._pages.pop(page, None)
        for key in self._page_keys(page):
            widget = self._widgets.pop(key, None)
            html = self._html.pop(key, None)
            card = self._cards.pop(key, None)
            if html is not None:
                self._spare.append(html)
            inputs = self._input_boxes.pop(key, None)
            if inputs is not None:
                for c in inputs.children:
                    self._inputs.pop(getattr(c, "input_id", ""), None)
                    c.close()
            for w in (card, widget, inputs):
                if w is not None and w is not html:
                    w.close()
        for step, batch in list(self._batches.items()):
            if self._step_calls[step][0] in self._page_keys(page):
                del self._batches[step]
                batch.close()
        if box is not None:
            self._spare_boxes.append(box)

    # -------------------------------------------------------------- events
    def _on_change(self, changed: list[Entry], settled: bool) -> None:
        if self.frozen:
            return
        touched = False
        mine: list[Entry] = []
        for e in changed:
            if self.turn is not None and e.turn != self.turn:
                if isinstance(e, UserEntry) and e.turn > self.turn:
                    self.freeze()
                    if self._displayed and self.live:
                        self._go_static()
                    return
                continue
            if e.key in self.skip:
                continue
            touched = True
            mine.append(e)
        if not self.live:
            self._follow_as_html(mine, touched, settled)
            return
        for e in mine:
            if e.key not in self._pos:
                self._append(e)
                continue
            if isinstance(e, TextEntry) and e.streaming:
                now = time.monotonic()
                if now - self._text_pushed.get(e.key, 0.0) < TEXT_THROTTLE:
                    self._dirty_text.add(e.key)
                    continue
                self._text_pushed[e.key] = now
            self._dirty_text.discard(e.key)
            self._refresh(e)
        if self._displayed and mine:
            self._sync_twin(mine)
        if touched and self._dirty_text:
            keys = {e.key for e in changed}
            for key in list(self._dirty_text):
                if key not in keys:
                    entry = self.state.by_key.get(key)
                    if entry is not None:
                        self._refresh(entry)
                    self._dirty_text.discard(key)
        if settled:
            self._flush_text()
        if touched or settled:
            self._render_status()
        if settled:
            self._settle()
            self.continuation.follow(self)  # a pending card follows decisions made elsewhere
        elif touched and self._displayed:
            mark_dirty(self)

    def _follow_as_html(self, mine: list[Entry], touched: bool, settled: bool) -> None:
        """A change while the view is its HTML (a light view, or one static after a cell).

        It gets widgets when a person can act in it or when it grows past a page (a long
        view's widgets cost an event its entries, not the view's). Otherwise its output's
        HTML is sent again when the chat may wait: a step asks the model, a tool starts, text
        streams (at most every ``TEXT_THROTTLE`` s), the chat settles or nobody drives it;
        what changes in between goes with the next of those. Updates come at most every
        ``TEXT_THROTTLE`` s while the chat runs (one that would come sooner is sent then, by
        nbagent's background loop), so a quick round costs its first and last update, not
        one per change.
        """
        allowed = self.chat.always_allowed
        if touched and (self._size() > self.page_size or any(_acts(e, allowed) for e in mine)):
            self._go_live()
            if settled:
                self.continuation.follow(self)
            return
        if not (touched or self._behind) or not self._displayed:
            return
        now = time.monotonic()
        due = settled or not self._busy()
        if not due and any(_begins_wait(e) or isinstance(e, TextEntry) for e in mine):
            due = now - self._pushed >= TEXT_THROTTLE
        if not due:
            self._behind = True
            self._push_later(self._pushed + TEXT_THROTTLE - now)
            return
        self._behind, self._pushed = False, now
        self._refresh_output()
        if settled:
            self.continuation.follow(self)

    def _push_later(self, delay: float) -> None:
        """Send the output's HTML in ``delay`` s if it is still behind then (once at a time)."""
        if self._push_due:
            return
        self._push_due = True
        mark_dirty(self)  # and after the cell at the latest
        spawn(self._push_when_due(max(delay, 0.0)))

    async def _push_when_due(self, delay: float) -> None:
        import asyncio

        await asyncio.sleep(delay)
        # Never wait for the lock here: its holder (the chat's thread, telling this view
        # of a change) may itself wait for this loop. Busy: it sends, or we try again.
        while not self.state.lock.acquire(blocking=False):
            await asyncio.sleep(TEXT_THROTTLE)
        try:
            self._push_due = False
            if self._behind and self._displayed and not self.live and not self.frozen:
                self._behind, self._pushed = False, time.monotonic()
                self._refresh_output()
        finally:
            self.state.lock.release()

    def _flush_text(self) -> None:
        for key in list(self._dirty_text):
            entry = self.state.by_key.get(key)
            if entry is not None:
                self._refresh(entry)
        self._dirty_text.clear()

    def _refresh(self, e: Entry) -> None:
        html = self._html.get(e.key)
        if html is not None:
            html.value = entry_html(e, live=True)
        card = self._cards.get(e.key)
        if card is not None:
            if isinstance(e, CallEntry):
                card.value = entry_html(e, live=True)
            self._sync_card(card, e)
        if isinstance(e, CallEntry) and e.gated:
            self._sync_batch(e.r.step or 0)
        if isinstance(e, CallEntry) and (e.inputs or e.key in self._input_boxes):
            self._sync_inputs(e)

    def _sync_card(self, card: ActionCard, e: Entry) -> None:
        if isinstance(e, CallEntry):
            # A deliberate subset of CallStatus: the ones before any decision.
            if e.r.status in ("requested", "awaiting_approval") and e.verdict is None:
                if card.state not in ("pending", "working"):
                    card.state = "pending"
                return
            summary = decision_words(e) or f"no decision ({e.r.status})"
            if card.state in ("pending", "working"):
                card.error = ""  # it settles: an earlier try's error (a refused edit) is over
            card.summary = summary[:1].upper() + summary[1:]
            card.state = e.verdict or "closed"
            # The card "Always allow" was clicked on, and every call the rule approved, offer
            # to take it back while it holds.
            card.revocable = e.r.tool in self.chat.always_allowed and (
                self._always_from.get(e.r.tool) is card or by_always_allow(e)
            )
        elif isinstance(e, BudgetEntry):
            if e.pending:
                if card.state not in ("pending", "working"):
                    card.state = "pending"
                return
            if e.status != "continued" or not card.summary.startswith("Continued"):
                card.summary = {"continued": "Continued.", "stopped": "Stopped."}.get(e.status, "")
            card.state = e.status

    def freeze(self) -> None:
        """Stop following the chat (a later turn started): close undecided budget cards."""
        if self.frozen:
            return
        self.frozen = True
        self.state.remove_listener(self._on_change)
        self.continuation.remove_countdown_listener(self._on_countdown)
        for card in [*self._cards.values(), *self._batches.values(), *self._inputs.values()]:
            card.close_card("A later turn started.")

    def close(self) -> None:
        """Stop following the chat and close every widget of this view."""
        self.freeze()
        self._close_widgets()

    def _cleared(self) -> None:
        """The cells that showed this view ran again or were deleted: the front end removed
        its output. It stops following the chat and closes its widgets, so that neither keeps
        a chat nobody can see or name any more; the chat, its pending calls and its store are
        left as they are (``chat.approve(...)``, the inbox, ``display(chat)``)."""
        with self.state.lock:
            self._displayed = False
            self.freeze()
            self._close_widgets()
        self.continuation.follow(self)  # stops following decisions unless another view waits

    def _close_widgets(self, keep: tuple[Any, ...] = ()) -> None:
        """Close every model of this view but ``keep``: widgets, and their own layouts and
        styles (the style sheet, layouts and styles every view shares stay open)."""
        kept, self._kept = self._kept, None
        widgets: list[Any] = [
            *(kept or ()),
            *self._cards.values(),
            *self._batches.values(),
            *self._inputs.values(),
            *self._input_boxes.values(),
            *self._html.values(),
            *self._widgets.values(),
            *self._pages.values(),
            *self._spare,
            *self._spare_boxes,
            self._title,
            self._more,
            getattr(self, "_body", None),
            getattr(self, "_status", None),
            self.widget,
        ]
        close_models(widgets, keep=[*_SHARED.values(), *keep])
        self._cards.clear()
        self._batches.clear()
        self._inputs.clear()
        self._input_boxes.clear()
        self._html.clear()
        self._widgets.clear()
        self._pages.clear()
        self._spare.clear()
        self._spare_boxes.clear()

    # ------------------------------------------------------------ lifecycle
    def _settle(self) -> None:
        """The chat stopped driving: static if nothing here waits for a decision."""
        if not self._displayed:
            return  # not in any notebook (tests, a view kept in a variable): stays live
        if self.pending() or self._offers_revoke():
            self._update_fallback()  # live: a person can still act here
        elif self.live:
            self._go_static()

    def _offers_revoke(self) -> bool:
        """A card offers "Stop always allowing" while the rule holds: its button must work
        (a rule revoked in code keeps no view live)."""
        allowed = self.chat.always_allowed
        return any(card.revocable and card.tool_name in allowed for card in self._cards.values())

    def _go_static(self, phase: str | None = None) -> None:
        """Show the static bundle in this view's output, then free its widgets."""
        # First: the widget renderer is replaced, not left dangling. Only a phase of its own
        # ("continued in cell [n]") is pinned: else the output follows the chat as HTML.
        data = None if phase is None else self.fallback_bundle(phase=phase)
        self.output.go_static(data)
        box = self.widget
        if self._redrawn and box is not None and getattr(box, "comm", None) is not None:
            self._keep_in_widget(box)
        else:
            self._close_widgets()

    def _keep_in_widget(self, box: ipywidgets.VBox) -> None:
        """Go static on a page drawn anew (reloaded with the kernel alive, another tab).

        Such a page never receives the output's updates (they go to the cell's first run,
        which that page does not listen to) but does receive widget state. Closing the
        widgets there would leave the stand-in for a kernel that ended ("run the cells again
        to ask anew") over a turn that was decided; so the view's container stays open with
        the static HTML as its one child (:meth:`_sync_kept` keeps it current), without the
        class the twin's CSS looks for (reopened from saved widget state, it shows this HTML,
        not the twin). Every other widget of the view closes.
        """
        entry_layout, entry_style, _ = _shared_parts()
        final = ipywidgets.HTML(layout=entry_layout, style=entry_style)
        box.children = (final,)
        box.remove_class(f"nba-live-{self.uid}")
        self._close_widgets(keep=(box, final))
        self._kept = (box, final)
        self._sync_kept()

    def _sync_kept(self) -> None:
        """The kept container (:meth:`_keep_in_widget`) shows what the output shows."""
        if self._kept is not None and not self.live:
            html = str(self.output.bundle().get("text/html", ""))
            if self._kept[1].value != html:
                self._kept[1].value = html

    def _refresh_output(self) -> None:
        """Send the output's current bundle (and to a page drawn anew, its HTML)."""
        self.output.refresh()
        self._sync_kept()

    def _go_live(self) -> None:
        """Something happens in this static view again: rebuild its widgets and show them."""
        if self.live or self.frozen:
            return
        self._make_widgets()
        with self.state.lock:
            self._build(self._entries())
            self._render_status()
        self.output.refresh()

    def hand_over(self, cell: int | None) -> frozenset[str]:
        """A later cell continues this view's turn: say so, go static, stop following.

        Returns the keys of the entries that are final here (the continuation
        view in the later cell shows the rest).
        """
        with self.state.lock:
            self.freeze()
            for e in self._entries():
                if isinstance(e, BudgetEntry) and e.pending:  # complete() is the "Continue"
                    self.state.set_budget_status(e.key, "continued")
            final = frozenset(e.key for e in self._entries() if _final(e)) | self.skip
            where = f"cell [{cell}]" if cell is not None else "a later cell"
            if self._displayed:  # the hand-over note, even if already static
                self._go_static(phase=f"continued in {where}")
            return final

    def _on_countdown(self, text: str | None) -> None:
        if self._countdown == text:
            return
        self._countdown = text if text is None or self.pending() else None
        if self.live:
            self._render_status()

    def _render_status(self) -> None:
        if self.widget is None:
            return  # no widgets: the status line is in the output's HTML
        value = status_html(self.state.totals_for(self.turn))
        if self._countdown:
            # Only the view's own words and numbers.
            value = value.replace(
                "</div>", f' · <span class="nba-countdown">{esc(self._countdown)}</span></div>', 1
            )
        self._status.value = value

    # -------------------------------------------------------------- clicks
    def _on_card_action(self, card: ActionCard, action: dict[str, Any]) -> None:
        kind = action.get("kind")
        chat = self.chat
        if card.kind == "budget":
            key = next((k for k, c in self._cards.items() if c is card), None)
            if kind == "continue":
                if card.budget in ("cost", "tokens"):  # the whole-chat budget grows by one step
                    chat.raise_budget(card.budget)
                if key:
                    self.state.set_budget_status(key, "continued")
                card.summary = f"Continued ({card.increment})." if card.increment else "Continued."
                card.state = "continued"
                self.continuation.request(max_steps=card.steps or None)
            elif kind == "stop":
                if key:
                    self.state.set_budget_status(key, "stopped")
                card.summary, card.state = "Stopped.", "stopped"
            else:
                raise CardError(f"unknown action {kind!r}")
            return
        if card.kind == "batch":
            if kind not in ("approve_all", "deny_all"):
                raise CardError(f"unknown action {kind!r}")
            self._decide_all(card, kind, str(action.get("reason") or "").strip() or None)
            return
        if kind == "revoke":
            self._revoke(card)
            return
        call_id = card.call_id
        try:
            # each decision marked as a person's (the card says "by you", not "decided in
            # code") only while it is recorded: a refused edit leaves no mark behind
            if kind == "approve":
                with self.state.deciding_by_hand(call_id):
                    chat.approve(call_id)
            elif kind == "deny":
                reason = str(action.get("reason") or "").strip() or None
                with self.state.deciding_by_hand(call_id):
                    chat.deny(call_id, reason=reason)
            elif kind == "edit":
                edited = self._edited(call_id, _parse_arguments(action.get("arguments")))
                with self.state.deciding_by_hand(call_id):
                    chat.approve(call_id, arguments=edited)
            elif kind == "always":
                self._always_from[card.tool_name] = card
                chat.always_allow(card.tool_name)
            else:
                raise CardError(f"unknown action {kind!r}")
        except DecisionError as exc:
            entry = self.state.by_key.get(f"c:{call_id}")
            if isinstance(entry, CallEntry) and not entry.pending:
                self._sync_card(card, entry)
                card.error = str(exc)  # after the sync: it says why this click changed nothing
                # decided elsewhere first (the chat has that decision now): the turn goes
                # on with it, as it would have had the follower seen it before the click
                self.continuation.request()
                return
            raise CardError(str(exc)) from None
        entry = self.state.by_key.get(f"c:{call_id}")
        if isinstance(entry, CallEntry):
            self._sync_card(card, entry)
        self.continuation.request()

    def _edited(self, call_id: str, edited: dict[str, Any]) -> dict[str, Any]:
        """The arguments an edit runs with: the editor started from the arguments as shown
        (secrets as ``***``), so each value left as shown gets its real text back (never
        ``***``); an edit around a secret is refused (:data:`~nbagent._html.SECRET_EDITED`)."""
        entry = self.state.by_key.get(f"c:{call_id}")
        if not isinstance(entry, CallEntry):
            return edited
        try:
            restored: dict[str, Any] = unredacted(edited, entry.r.arguments)
        except ValueError as exc:
            raise CardError(str(exc)) from None
        return restored

    def _revoke(self, card: ActionCard) -> None:
        """Take back "Always allow" for the card's tool (decisions it made stand)."""
        tool = card.tool_name
        try:
            self.chat.revoke(tool)
        except ValueError:
            card.note = f"{card.tool} is not always allowed any more."
        else:
            card.note = f"{card.tool} asks for approval again from now on."
        for other in self._cards.values():
            if other.tool_name == tool:
                other.revocable = False
        with self.state.lock:
            if not self.chat.is_running:  # settled: what kept this view live may be gone
                self._settle()

    # ----------------------------------------------------------- fallbacks
    def fallback_bundle(self, phase: str | None = None) -> dict[str, str]:
        """``text/html``, ``text/markdown`` and ``text/plain`` of what the view shows."""
        from ._fallback import bundle_for

        return bundle_for(self.state, self.turn, skip=self.skip, phase=phase, title=self.title)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return self.output.bundle()

    def _twin_data(self) -> dict[str, str] | None:
        kind = self._twin_kind()
        if kind == "pending":
            return twin_bundle(self.chat, self.state, self.turn, skip=self.skip, title=self.title)
        if kind == "running":
            return running_twin_bundle(
                self.chat, self.state, self.turn, self._running(), skip=self.skip, title=self.title
            )
        if kind == "revoke":  # live for its "Stop always allowing" alone:
            return self.fallback_bundle()  # a reopened notebook shows the transcript instead
        return None

    def _running(self) -> list[CallEntry]:
        """The calls of this view running now."""
        return [e for e in self._entries() if isinstance(e, CallEntry) and e.r.status == "running"]

    def _twin_kind(self) -> str | None:
        """What the twin stands in for: a decision still to make (``pending``), a call that
        runs (``running``: a kernel that ends now leaves its outcome unknown), a card's
        "Stop always allowing" (``revoke``), or nothing (``None``: the twin is idle)."""
        if self.pending():
            return "pending"
        if self.live and self._running():
            return "running"
        if self.live and self._offers_revoke():
            return "revoke"
        return None

    def _sync_twin(self, mine: list[Entry]) -> None:
        """A call changed in this live view: when what the twin stands in for changed with
        it (a click approved the call, it started, it ended), send the twin again. Without
        this the twin kept "awaiting approval ... chat.approve(...)" for a kernel restarted
        while the approved call ran."""
        if not any(isinstance(e, (CallEntry, BudgetEntry)) for e in mine):
            return
        kind = self._twin_kind()
        if kind != self._twin_was:
            self._twin_was = kind
            self.output.refresh_twin()

    def _ipython_display_(self) -> None:
        if self._displayed:  # displayed again: a second output of the same view
            self.output.show()
            return
        self._displayed = True
        self._pushed = time.monotonic()
        if self.live or not self._busy():
            self.output.show()
        else:  # its chat runs: shown with its first update (in this cell, at its end at the latest)
            self.output.show_later()
            self._behind = True
            self._push_later(TEXT_THROTTLE)
        self.continuation.follow(self)
        mark_dirty(self)  # after the cell: static if there is nothing to do here

    @property
    def displayed(self) -> bool:
        return self._displayed

    def _update_fallback(self) -> None:
        """Refresh the display's static forms (a saved notebook shows the current state).

        After a cell (``post_run_cell``) a view with nothing to decide and no "Stop always
        allowing" to offer, whose chat is not running, goes static.
        """
        with self.state.lock:  # the chat's events (another thread) change the view under it too
            if not self._displayed or self.frozen:
                return
            if self.live and not (self.pending() or self._busy()):
                if not self._offers_revoke():
                    self._go_static()
                    return
                mark_dirty(self)  # live for its offer alone: the next cell looks again (a
                # rule taken back in code then lets it go)
            self._refresh_output()

    def _busy(self) -> bool:
        return self.chat.is_running or self.continuation.busy


# Models every view shares (an entry's layout and style, a box's layout, the style sheet):
# opened once per kernel, so a view of a turn opens only its own few.
_SHARED: dict[str, Any] = {}


def _shared(name: str, make: Any) -> Any:
    widget = _SHARED.get(name)
    if widget is None or getattr(widget, "comm", None) is None:  # closed: open a new one
        widget = _SHARED[name] = make()
    return widget


def _shared_parts() -> tuple[ipywidgets.Layout, HTMLStyle, ipywidgets.Layout]:
    return (
        _shared("entry_layout", ipywidgets.Layout),
        _shared("entry_style", HTMLStyle),
        _shared("box_layout", ipywidgets.Layout),
    )


def _shared_style() -> ipywidgets.HTML:
    entry_layout, entry_style, _ = _shared_parts()
    return _shared(
        "style", lambda: ipywidgets.HTML(style_tag(), layout=entry_layout, style=entry_style)
    )


def _acts(e: Entry, always_allowed: tuple[str, ...]) -> bool:
    """Whether a person can act on ``e``: it waits for them, or it is a call an "Always
    allow" rule approved while the rule still holds (its card offers to take it back)."""
    if waits_for_someone(e):
        return True
    return isinstance(e, CallEntry) and by_always_allow(e) and e.r.tool in always_allowed


def _begins_wait(e: Entry) -> bool:
    """After this change the chat may wait long: a step asks the model, a tool runs."""
    if isinstance(e, StepEntry):
        return e.status == "running"
    return isinstance(e, CallEntry) and e.r.status == "running"


def _final(e: Entry) -> bool:
    """Nothing more will happen to this entry (a continuation need not show it again)."""
    if isinstance(e, CallEntry):
        return e.r.status in ("ok", "error", "timed_out", "cancelled", "skipped", "in_doubt")
    if isinstance(e, BudgetEntry):
        return not e.pending
    if isinstance(e, StepEntry):
        return e.status != "running"
    if isinstance(e, TextEntry):
        return not e.streaming
    return isinstance(e, (UserEntry, ErrorEntry))


def show(chat: Chat, *, turn: int | None = None) -> ChatView:
    """Display a live view of ``chat`` (or of one ``turn``) in the current cell and return it."""
    from IPython.display import display

    view = ChatView(chat, turn=turn, light=True)
    display(view)
    return view


def _parse_arguments(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    try:
        parsed = json.loads(value or "")
    except (TypeError, ValueError) as exc:
        raise CardError(f"The edited arguments are not valid JSON: {exc}") from None
    if not isinstance(parsed, dict):
        raise CardError("The edited arguments must be a JSON object.")
    return parsed


def _input_answer(pending: PendingInput, data: Any) -> Any:
    """What a card's Accept / Submit / Approve sends to ``chat.answer``: a form's values
    typed (:func:`~._forms.form_answer`), a text box's text, ``None`` to approve a sampling
    request as it is (its text box holds the person's own reply, when they write one)."""
    kind = pending.kind
    if kind == "elicitation":
        try:
            return form_answer(form_fields(pending.schema), _as_given(pending, data))
        except FormError as exc:
            raise CardError(f"{exc} (nothing was sent; the form still waits)") from None
    if kind == "elicitation_url":
        return None
    text = data if isinstance(data, str) else ""
    if kind == "sampling":
        return text if text.strip() else None
    if not text.strip():
        what = "an answer" if kind == "ask_user" else "the result"
        raise CardError(f"Write {what} first (or Decline).")
    if kind == "ask_user" and text in (pending.content.get("choices") or ()):
        return text  # a choice's button sends it as the model wrote it, spaces and all
    if kind == "ask_user":  # a choice whose button showed a key as ***: the choice itself
        meant = _unhidden(text, [str(c) for c in pending.choices])
        if meant is not None:
            return meant
    return text.strip() if kind == "ask_user" else text


def _browser_fields(p: PendingInput) -> list[dict[str, Any]]:
    """A form's fields as the browser gets them, with a key in a title, a description, an
    option or a default as ``***`` (the card's HTML hides them so too): what the browser
    sends back is read through :func:`_as_given`."""
    out = []
    for f in for_browser(form_fields(p.schema)):
        f = dict(f)
        for name in ("label", "description"):
            if isinstance(f.get(name), str):
                f[name] = redact_keys(f[name])
        if "options" in f:
            f["options"] = [
                {"value": redact_keys(o["value"]), "label": redact_keys(o["label"])}
                for o in f["options"]
            ]
        default = f.get("default")
        if isinstance(default, str):
            f["default"] = redact_keys(default)
        elif isinstance(default, list):
            f["default"] = [redact_keys(d) if isinstance(d, str) else d for d in default]
        out.append(f)
    return out


def _as_given(pending: PendingInput, data: Any) -> Any:
    """What the browser sent for a form of :func:`_browser_fields`, with an option (or a
    default left as it was) that showed a key as ``***`` read back as the option (the
    default) itself."""
    if not isinstance(data, dict):
        return data
    out = dict(data)
    for f in for_browser(form_fields(pending.schema)):
        name = f["name"]
        if name not in out:
            continue
        known = [o["value"] for o in f.get("options", ())]
        if isinstance(f.get("default"), str) and f["default"]:
            known.append(f["default"])
        sent_ = out[name]
        if isinstance(sent_, str):
            out[name] = _unhidden(sent_, known) or sent_
        elif isinstance(sent_, list):
            out[name] = [(_unhidden(v, known) or v) if isinstance(v, str) else v for v in sent_]
    return out


def _unhidden(sent_: str, known: list[str]) -> str | None:
    """The one of ``known`` that showed as ``sent_`` with its keys hidden (``None``: none
    did, ``sent_`` is one of them as it is, or several look alike so hidden)."""
    if sent_ in known:
        return None
    meant = {k for k in known if k != sent_ and redact_keys(k) == sent_}
    if len(meant) > 1:
        raise CardError(
            "Several choices look alike with their keys hidden; answer with chat.answer "
            "(nothing was sent; the input still waits)."
        )
    return meant.pop() if meant else None
