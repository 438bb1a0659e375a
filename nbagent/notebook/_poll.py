"""Pending cards follow decisions made elsewhere: a kernel-side poll of a stored chat.

A decision can land outside this kernel's view: ``store.approve(call_id)`` from
a script or a panel, another process, another chat object of the same stored
chat (``Chat.load(id).approve(...)`` in another cell). The chat only applies
such decisions when it looks (``chat.refresh()``, or its next step), so without
a poll an approval card would stay "pending" and the status line "awaiting
approval" after the call was decided, or even ran, elsewhere.

So while a **displayed** view shows a **pending approval card** of a chat that
can follow decisions (an extension implementing ``follow_decisions``: the
store), the chat is subscribed to the store's follower (one per store in the
process: PostgreSQL pushes a decision the moment it commits, SQLite is polled
with one indexed query), which calls ``chat.refresh()`` here when a decision on
it was recorded, and once at the start. A decision it applies goes through the
chat's own rules and events, so the card closes and says who decided and when
("approved elsewhere by ops at ..."), and the status line moves on. The
subscription ends as soon as no displayed view has a pending card (or the chat
is gone), and starts again when one appears; a refresh is skipped while the
chat is being driven (the driver's own step applies decisions) and never raises
(a store that cannot be read now is read again at the next decision).

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


def can_refresh(chat: Chat) -> bool:
    """Whether decisions made elsewhere can reach ``chat`` (an extension follows them)."""
    return any(overrides(ext, "follow_decisions") for ext in chat.extensions)


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
    """Follows decisions for one chat while one of its views shows a pending card (thread-safe)."""

    def __init__(self, chat: Chat):
        self._chat = weakref.ref(chat)
        self._views: weakref.WeakSet[Any] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._sub: Any = None
        self.last_error: BaseException | None = None
        self.ticks = 0

    @property
    def running(self) -> bool:
        return self._sub is not None

    def watch(self, view: Any) -> None:
        """Follow ``view``; subscribe if it (or another view) shows a pending card."""
        with self._lock:
            self._views.add(view)
        if self._needed():
            self._ensure()
        else:
            self.stop()

    def stop(self) -> None:
        """Stop following (a later :meth:`watch` starts it again)."""
        with self._lock:
            sub, self._sub = self._sub, None
        if sub is not None:
            sub.close()

    def _ensure(self) -> None:
        chat = self._chat()
        hooks = [e for e in (chat.extensions if chat else ()) if overrides(e, "follow_decisions")]
        if self._sub is not None or not hooks:
            return
        try:  # outside the lock: the first subscription to a store may connect to it
            sub = hooks[0].follow_decisions(self._news)
        except Exception as exc:  # the store cannot be read now: the next settle tries again
            self.last_error = exc
            return
        with self._lock:
            sub, self._sub = (sub, self._sub) if self._sub is not None else (None, sub)
        if sub is not None:  # another thread subscribed meanwhile
            sub.close()

    def _needed(self) -> bool:
        """Whether to follow: called without ``_lock`` held (it takes the views' state locks,
        and a view's listener, holding its state lock, calls :meth:`watch`)."""
        chat = self._chat()
        if chat is None or not can_refresh(chat):
            return False
        with self._lock:
            views = list(self._views)
        return any(shows_pending_card(v) for v in views)

    def _news(self) -> None:
        """From the store's follower: a decision on this chat may have been recorded."""
        chat = self._chat()
        if chat is None or not self._needed():
            self.stop()
            return
        self.tick(chat)

    def tick(self, chat: Chat) -> bool:
        """One refresh; continue the loop if it applied a decision. True if it did."""
        if chat.is_running:  # the driver's own step applies decisions
            return False
        self.ticks += 1
        try:
            decided = chat.refresh()
        except Exception as exc:  # the store cannot be read now: next news
            self.last_error = exc
            return False
        if not decided:
            return False
        from ._continuation import continuation_for

        continuation_for(chat).request()
        return True


_pollers: PerChat[Poller] = PerChat(Poller)


def poller_for(chat: Chat) -> Poller:
    return _pollers.get(chat)


def watch(view: Any) -> None:
    """A displayed view, or one whose chat just settled: follow while it shows a pending card."""
    chat = view.chat
    if can_refresh(chat):
        poller_for(chat).watch(view)
