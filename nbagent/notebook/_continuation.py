"""After a click, carry the rest of the turn on, as a task on nbagent's background loop.

Why: a click reaches the kernel as a comm message on its shell channel, which
handles one message at a time: the click waits until the running cell has
finished, unless JupyterLab sends comm messages to a subshell (JupyterLab >= 4.4
with ipykernel 7) or, for a cell that *awaits*, ipykernel >= 7.4. So a cell
that blocks waiting for a click never gets it on most kernels. Instead, a cell
returns while an approval is pending; the click handler records the decision
(``chat.approve`` and friends are thread-safe) and asks the chat's
:class:`Continuation` to run the loop again: ``await chat.complete_async()`` as
a task on nbagent's background loop (``nbagent/_aio.py``), never on the
kernel's loop, so a later cell that drives the chat (``chat.complete()``) waits
for it and returns the settled reply (one driver at a time,
``nbagent/_drive.py``) instead of blocking the loop the continuation would
need. Its sync tools run on a worker thread, not on that shared loop
(``nbagent/_runner.py``).

Continuations of one chat are serialised: requests coalesce into one task,
so two quick decisions never start two drivers. Errors are recorded in the
chat's display state (every view shows them) and kept on
``Continuation.last_error``; they are never lost.

A decision can also land outside this kernel's view: ``store.approve(call_id)``
from a script or another process, another chat object of the same stored chat.
While a displayed view shows a pending approval of a chat that can follow
decisions (an extension implementing ``follow_decisions``: the store), the
continuation subscribes to the store's follower (PostgreSQL pushes, SQLite is
polled), which calls ``chat.refresh()`` here when a decision on the chat was
recorded (and once at the start): the decision goes through the chat's own
rules and events, so the card says who decided and when, and this kernel then
continues the loop, as after a click (the chat parked here is the one waiting;
if another process drives it too, the store's claim keeps every call at most
once). The subscription ends once no displayed view has a pending card; a
refresh is skipped while the chat is driven and never raises.

``await chat.ask_async(...)`` can instead *wait* for the click where the
kernel can deliver it while a cell awaits (ipykernel >= 7.4 dispatches comm
messages concurrently with an awaiting cell): see :func:`wait_for_decisions`.
That wait happens on the kernel's loop (the one on the main thread).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
import weakref
from typing import TYPE_CHECKING, Any

from .._aio import spawn
from .._config import get_config
from .._errors import ChatCancelled, redact_keys
from .._extension import overrides
from .._html import RESULT_CHARS
from ._per_chat import PerChat

if TYPE_CHECKING:
    from collections.abc import Callable

    from .._base_chat import BaseChat as Chat

RENDER_GRACE = 5.0
"""Seconds ``ask_async`` waits for a front end to draw an approval card before it
concludes nobody can click (nbclient, papermill) and applies the fallback."""


_continuing: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "nbagent_continuing", default=False
)


def continuing() -> bool:
    """True while a :class:`Continuation` drives the chat (after a click, not from a cell)."""
    return _continuing.get()


class Continuation:
    """Runs a chat's loop again after decisions, one driver at a time (thread-safe)."""

    def __init__(self, chat: Chat):
        self._chat = weakref.ref(chat)
        self._lock = threading.Lock()
        self._pending = False
        self._max_steps: int | None = None
        self._running = False
        self._waiters = 0
        self._idle = threading.Event()
        self._idle.set()
        self.last_error: BaseException | None = None
        self.rendered = False
        self.countdown: str | None = None
        self._countdown_listeners: list[Callable[[str | None], Any]] = []
        self._views: weakref.WeakSet[Any] = weakref.WeakSet()  # views to follow decisions for
        self._sub: Any = None  # the store follower's subscription, while following
        self.follow_error: BaseException | None = None  # the last refresh that failed

    # ------------------------------------------------------------- requests
    def request(self, max_steps: int | None = None) -> None:
        """Run the loop again soon (callable from any thread; requests coalesce)."""
        with self._lock:
            self._pending = True
            if max_steps is not None:
                self._max_steps = max_steps
            if self._waiters or self._running:
                return  # an awaiting ask_async, or the running driver, picks it up
            self._start_locked()

    def _start_locked(self) -> None:
        self._running = True
        self._idle.clear()
        spawn(self._drain())

    def _next(self) -> tuple[bool, int | None]:
        with self._lock:
            if not self._pending:
                self._running = False
                self._idle.set()
                return False, None
            self._pending = False
            steps, self._max_steps = self._max_steps, None
            return True, steps

    async def _drain(self) -> None:
        _continuing.set(True)
        done = False
        try:
            while True:
                go, steps = self._next()
                if not go:
                    done = True
                    return
                chat = self._chat()
                if chat is None:
                    continue
                try:
                    # waits (awaits) while another driver is at work
                    await chat.complete_async(max_steps=steps)
                except ChatCancelled as exc:  # chat.cancel(): stopped, not failed
                    self.last_error = exc
                    from ._state import state_for

                    state_for(chat).run_stopped(exc)  # "stopped · complete() resumes"
                except Exception as exc:
                    self._report(chat, exc)
                else:
                    self._keep_budget_stop(chat)
        finally:
            if not done:  # left by an exception the loop did not catch, or cancelled
                with self._lock:
                    self._running = False
                    self._idle.set()

    def _keep_budget_stop(self, chat: Chat) -> None:
        """The run stopped on its step budget: a request made meanwhile (a decision) does not
        start a fresh budget; the budget card's Continue (which passes ``max_steps``) does."""
        if chat.status == "budget_exhausted":
            with self._lock:
                if self._max_steps is None:
                    self._pending = False

    def _report(self, chat: Chat, exc: BaseException) -> None:
        """Keep ``exc`` and show it in every view of ``chat``: its message and traceback with
        anything shaped like an API key or URL credentials as ``***``, as the failed step's
        line and the log show it (the views' three saved forms hold both)."""
        from ._state import state_for, traceback_text

        self.last_error = exc
        said = redact_keys(f"{type(exc).__name__}: {exc}"[:RESULT_CHARS])
        state_for(chat).add_error(
            f"Continuing after your decision failed: {said}", traceback_text(exc)
        )

    def wait(self, timeout: float | None = 10.0) -> bool:
        """Block until no continuation is running or queued (tests, scripts)."""
        return self._idle.wait(timeout)

    @property
    def busy(self) -> bool:
        return self._running

    # -------------------------------------------------------- ask_async waits
    def begin_wait(self) -> None:
        with self._lock:
            self._waiters += 1
            self._pending = False

    def end_wait(self, consumed: bool) -> None:
        """Stop waiting; a decision that arrived but was not consumed still runs."""
        with self._lock:
            self._waiters -= 1
            if consumed:
                self._pending = False
            elif self._pending and not self._running and not self._waiters:
                self._start_locked()

    def note_rendered(self) -> None:
        self.rendered = True

    # ----------------------------------------------- decisions made elsewhere
    @property
    def following(self) -> bool:
        """Whether the chat follows decisions made elsewhere now (see the module)."""
        return self._sub is not None

    def follow(self, view: Any) -> None:
        """A displayed view, or one whose chat just settled: follow decisions made
        elsewhere while a displayed view shows a pending card (else stop following)."""
        with self._lock:
            self._views.add(view)
        if self._needed():
            self._subscribe()
        else:
            self.unfollow()

    def unfollow(self) -> None:
        """Stop following (a later :meth:`follow` starts it again)."""
        with self._lock:
            sub, self._sub = self._sub, None
        if sub is not None:
            sub.close()

    def _needed(self) -> bool:
        """Called without ``_lock`` held (a view's listener, holding its state's lock, calls
        :meth:`follow`; ``pending()`` takes that lock)."""
        chat = self._chat()
        if chat is None or not can_refresh(chat):
            return False
        with self._lock:
            views = list(self._views)
        return any(v.displayed and not v.frozen and v.pending() for v in views)

    def _subscribe(self) -> None:
        chat = self._chat()
        hooks = [e for e in (chat.extensions if chat else ()) if overrides(e, "follow_decisions")]
        if self._sub is not None or not hooks:
            return
        try:  # outside the lock: the first subscription to a store may connect to it
            sub = hooks[0].follow_decisions(self._news)
        except Exception as exc:  # the store cannot be read now: the next settle tries again
            self.follow_error = exc
            return
        with self._lock:
            sub, self._sub = (sub, self._sub) if self._sub is not None else (None, sub)
        if sub is not None:  # another thread subscribed meanwhile
            sub.close()

    def _news(self) -> None:
        """From the store's follower: a decision on the chat may have been recorded."""
        chat = self._chat()
        if chat is None or not self._needed():
            self.unfollow()
            return
        if chat.is_running:  # the driver's own step applies decisions
            return
        try:
            decided = chat.refresh()
        except Exception as exc:  # the store cannot be read now: the store's
            self.follow_error = exc  # follow_decisions has the follower call again (backoff)
            return
        if decided:
            self.request()

    # ------------------------------------------------------------- countdown
    def add_countdown_listener(self, fn: Callable[[str | None], Any]) -> None:
        with self._lock:
            self._countdown_listeners = [*self._countdown_listeners, fn]

    def remove_countdown_listener(self, fn: Callable[[str | None], Any]) -> None:
        with self._lock:
            self._countdown_listeners = [f for f in self._countdown_listeners if f != fn]

    def set_countdown(self, text: str | None) -> None:
        """Tell the views what the awaiting cell waits for (``None``: it stopped waiting)."""
        if text == self.countdown:
            return
        self.countdown = text
        for fn in self._countdown_listeners:
            with contextlib.suppress(Exception):  # a view must never break the wait
                fn(text)


_continuations: PerChat[Continuation] = PerChat(Continuation, "continuation")


def continuation_for(chat: Chat) -> Continuation:
    return _continuations.get(chat)


def can_refresh(chat: Chat) -> bool:
    """Whether decisions made elsewhere can reach ``chat`` (an extension follows them)."""
    return any(overrides(ext, "follow_decisions") for ext in chat.extensions)


# ------------------------------------------------------------------ waiting
def kernel_can_wait() -> bool:
    """True inside an ipykernel >= 7.4, which delivers comm messages to an awaiting cell."""
    from ._kernel import in_kernel

    if not in_kernel():
        return False
    try:
        import ipykernel
    except ImportError:
        return False
    return tuple(getattr(ipykernel, "version_info", (0,))[:2]) >= (7, 4)


def countdown_words(left: float, then: str) -> str:
    """``waiting for your decision, 1:58 left (then it stays pending)``."""
    seconds = max(0, int(left + 0.999))
    return f"waiting for your decision, {seconds // 60}:{seconds % 60:02d} left (then {then})"


async def wait_for_decisions(chat: Chat, wait: bool | None = None) -> bool:
    """Wait (in an awaiting cell) until someone decides a pending approval.

    Returns True when the loop should continue (a decision arrived, or the
    fallback denied the pending calls), False to return with the approval
    still pending. Waits only where a click can arrive: ipykernel >= 7.4, on
    the kernel's main loop, with a view showing the card. Gives up after
    ``configure(approval_wait=)`` seconds, or after :data:`RENDER_GRACE` seconds
    if no front end drew the card (unattended runs), then applies
    ``configure(approval_fallback=)``: ``"park"`` (return; the buttons still
    work) or ``"deny"``. While it waits, the chat's views show the time left
    and what happens then on their status line (:meth:`Continuation.set_countdown`,
    one change a second).
    """
    cont = continuation_for(chat)
    if not chat.awaiting_approval:  # decided while the loop finished: complete_async() waits
        return chat.status == "ready"  # for a continuation already at work, then runs the rest
    cfg = get_config()
    timeout = float(cfg.approval_wait or 0)
    if wait is False or (timeout <= 0 and wait is None):
        return False
    loop = asyncio.get_running_loop()
    if not kernel_can_wait() or threading.current_thread() is not threading.main_thread():
        return False  # not the kernel's loop (it runs on the main thread): no click comes
    before = {c.id for c in chat.pending_approvals}
    if timeout <= 0:
        timeout = RENDER_GRACE
    cont.begin_wait()
    consumed = False
    then = "it is denied" if cfg.approval_fallback == "deny" else "it stays pending"
    try:
        t0 = loop.time()
        while True:
            now = {c.id for c in chat.pending_approvals}
            if now != before or not chat.awaiting_approval:
                consumed = True
                return True
            elapsed = loop.time() - t0
            unattended = elapsed >= RENDER_GRACE and not cont.rendered
            if elapsed >= timeout or unattended:
                break
            cont.set_countdown(countdown_words(timeout - elapsed, then))  # changes once a second
            await asyncio.sleep(0.05)
    finally:
        cont.set_countdown(None)
        cont.end_wait(consumed)
    if cfg.approval_fallback == "deny":
        why = (
            "no front end showed the approval"
            if not cont.rendered
            else (f"no decision within {timeout:g} s")
        )
        pending = list(chat.pending_approvals)
        for c in pending:
            with contextlib.suppress(Exception):  # decided meanwhile
                chat.deny(c, reason=f"not approved: {why}", by="fallback")
        return bool(pending)  # only inputs wait (nothing to deny): they stay, the cell returns
    return False
