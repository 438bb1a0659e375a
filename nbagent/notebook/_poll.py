"""Pending cards follow decisions made elsewhere: a kernel-side poll of a stored chat.

A decision can land outside this kernel's view: ``store.approve(call_id)`` from
a script or a panel, another process, another chat object of the same stored
chat (``Chat.load(id).approve(...)`` in another cell). The chat only applies
such decisions when it looks (``chat.refresh()``, or its next step), so without
a poll an approval card would stay "pending" and the status line "awaiting
approval" after the call was decided, or even ran, elsewhere.

So while a **displayed** view shows a **pending approval card** of a chat that
has something to refresh from (an extension implementing ``refresh``: the
store), one daemon thread per chat calls ``chat.refresh()`` when there is news:
it waits on the extension's ``wait_for_refresh`` (the store's decision watch:
PostgreSQL pushes a decision the moment it commits, SQLite is polled with one
indexed query), in slices of :data:`POLL_SECONDS`, and refreshes when a
decision was recorded (and every :data:`SAFETY_TICKS` quiet slices anyway).
Without such an extension it refreshes every :data:`POLL_SECONDS`. A decision
it applies goes through the chat's own rules and events, so the card closes
and says who decided and when ("approved elsewhere by ops at ..."), and the
status line moves on. The thread stops as
soon as no displayed view has a pending card (or the chat is gone), and starts
again when one appears; it skips a tick while the chat is being driven (the
driver's own step applies decisions) and never raises (a store that cannot be
read now is tried again at the next tick).

**This kernel then continues the loop**, as after a click on the card: the
decision was made so that the call runs, and the chat parked here is the one
waiting for it (a panel that calls ``store.approve`` drives nothing). If another
process drives the chat too, the store's claim keeps every call at most once:
whichever process claims the call runs it, and the other copy stops (its steps
return ``busy``, a ``StoreConflictWarning`` says so, its status line says
"driven elsewhere").
"""

from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING, Any

from .._extension import overrides
from ._per_chat import PerChat
from ._state import CallEntry

if TYPE_CHECKING:
    from .._base_chat import BaseChat as Chat

POLL_SECONDS = 1.5
SAFETY_TICKS = 20  # quiet waits in a row after which a refresh happens anyway
GIVE_UP_AFTER = 20  # failed refreshes in a row (the store closed, say); a settle restarts it


def _waiter(chat: Chat) -> Any:
    """The first extension's ``wait_for_refresh`` (None: refresh on a timer)."""
    for ext in chat.extensions:
        if overrides(ext, "wait_for_refresh"):
            return ext.wait_for_refresh
    return None


def can_refresh(chat: Chat) -> bool:
    """Whether ``chat.refresh()`` can bring news (an extension implements ``refresh``)."""
    return any(overrides(ext, "refresh") for ext in chat.extensions)


def shows_pending_card(view: Any) -> bool:
    """Whether ``view`` is displayed, following its chat, with an approval card pending."""
    if not getattr(view, "_displayed", False) or getattr(view, "frozen", True):
        return False
    turn = view.turn
    with view.state.lock:
        return any(
            isinstance(e, CallEntry) and e.gated and e.pending and (turn is None or e.turn == turn)
            for e in view.state.entries
        )


class Poller:
    """Refreshes one chat while one of its views shows a pending card (thread-safe)."""

    def __init__(self, chat: Chat):
        self._chat = weakref.ref(chat)
        self._views: weakref.WeakSet[Any] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self.last_error: BaseException | None = None
        self.ticks = 0
        self.waits = 0  # waits on the extension's wait_for_refresh
        self._failures = 0
        self._quiet = 0

    @property
    def running(self) -> bool:
        return self._thread is not None

    def watch(self, view: Any) -> None:
        """Follow ``view``; start polling if it (or another view) shows a pending card."""
        with self._lock:
            self._views.add(view)
        if self._needed():
            self._ensure()

    def stop(self) -> None:
        """Stop polling now (a later :meth:`watch` starts it again)."""
        self._stop.set()

    def _ensure(self) -> None:
        with self._lock:
            if self._thread is not None:
                return
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="nbagent-refresh", daemon=True)
            self._thread.start()

    def _needed(self) -> bool:
        """Whether to poll: called without ``_lock`` held (it takes the views' state locks,
        and a view's listener, holding its state lock, calls :meth:`watch`)."""
        chat = self._chat()
        if chat is None or not can_refresh(chat):
            return False
        with self._lock:
            views = list(self._views)
        return any(shows_pending_card(v) for v in views)

    def _run(self) -> None:
        try:
            self._failures = 0
            while not self._stop.is_set() and self._needed():
                chat = self._chat()
                if chat is None or self._failures >= GIVE_UP_AFTER:
                    return
                waiter = _waiter(chat)
                del chat  # not held while waiting: the chat may go
                if not self._news(waiter):
                    continue
                chat = self._chat()
                if chat is None or self._stop.is_set():
                    return
                self.tick(chat)
                del chat
        finally:
            with self._lock:
                self._thread = None
        if self._failures >= GIVE_UP_AFTER:
            return
        if not self._stop.is_set() and self._needed():  # a card appeared as this one stopped
            self._ensure()

    def _news(self, waiter: Any) -> bool:
        """Wait one slice; whether to refresh now."""
        if waiter is None:
            return not self._stop.wait(POLL_SECONDS)
        self.waits += 1
        try:
            news = bool(waiter(POLL_SECONDS))
        except Exception as exc:  # the store cannot be read now: wait, then refresh
            self.last_error = exc
            return not self._stop.wait(POLL_SECONDS)
        self._quiet = 0 if news else self._quiet + 1
        if self._quiet >= SAFETY_TICKS:
            self._quiet = 0
            return True
        return news

    def tick(self, chat: Chat) -> bool:
        """One refresh; continue the loop if it applied a decision. True if it did."""
        if chat.is_running:  # the driver's own step applies decisions
            return False
        self.ticks += 1
        try:
            decided = chat.refresh()
        except Exception as exc:  # the store cannot be read now: next tick
            self.last_error = exc
            self._failures += 1
            return False
        self._failures = 0
        if not decided:
            return False
        from ._continuation import continuation_for

        continuation_for(chat).request()
        return True


_pollers: PerChat[Poller] = PerChat(Poller)


def poller_for(chat: Chat) -> Poller:
    return _pollers.get(chat)


def watch(view: Any) -> None:
    """A displayed view, or one whose chat just settled: poll while it shows a pending card."""
    chat = view.chat
    if can_refresh(chat):
        poller_for(chat).watch(view)
