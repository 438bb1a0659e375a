"""Pending inputs: what a chat waits for from a person, parked like an approval.

An external tool's call (``@tool(external=True)``) and the model's question
(:data:`nbagent.ask_user`) park the chat until someone gives the answer; the
rules (checking an answer, recording it once, the result the model reads) are
:meth:`ChatCore._settle_input`'s. This is the public face of it:
``chat.pending_inputs``, ``chat.answer``, ``chat.decline`` and their async twins.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import concurrent.futures

from ._aio import in_worker
from ._approvals import HUMAN
from ._chat_state import ChatCore
from ._errors import InputError, MCPServerError
from ._events import SamplingFinished
from ._types import InputAction, InputKind, LLMToolResponse, PendingInput, ToolCall
from ._unicode import clean
from .providers import ModelRequest, Provider, cost_of

InputRef = PendingInput | ToolCall | str
"""A pending input, the call it belongs to, or either's id."""


class InputsMixin(ChatCore):
    """``pending_inputs``, ``answer`` and ``decline`` of :class:`~nbagent.Chat`."""

    @property
    def pending_inputs(self) -> list[PendingInput]:
        """Inputs the chat waits for, in the order they were asked.

        An external tool's call and ``ask_user``'s question park the chat (its
        ``status`` is ``awaiting_approval``, as for a decision: nothing runs until
        someone answers); ``chat.answer(request, data)`` or ``chat.decline(request)``
        settles one, then ``complete()`` carries on.
        """
        with self._lock:
            return list(self._inputs.values())

    @property
    def awaiting_input(self) -> bool:
        """True when at least one input waits for an answer (see :attr:`pending_inputs`)."""
        with self._lock:
            return bool(self._inputs)

    def answer(self, request: InputRef, data: Any = None, *, by: str = HUMAN) -> PendingInput:
        """Answer a pending input; ``complete()`` (or the notebook view) then carries on.

        Args:
            request: The :class:`~nbagent.PendingInput`, the call it belongs to, or an id.
            data: The answer. An external tool's result (any value a tool may
                return: text, a dict, a DataFrame, an image); ``ask_user``'s answer
                (text, one of its ``choices`` when it has some); an elicitation's
                form values (a dict matching its schema). Ignored for a URL
                elicitation (answering says the step is done).
            by: Who answered (kept in the record, the log and a store).

        Returns:
            The input answered.

        A sampling request approved (``data`` not text) would send its messages to the
        model: once the chat's cost or token budget is spent that is refused
        (``InputError``): :meth:`~nbagent.Chat.raise_budget` first, or answer with your
        own reply text, or decline it.

        Raises:
            InputError: No such input waits (unknown, or answered already: an
                answer is given once), ``data`` does not match what was asked, or a
                sampling request is approved once a budget is spent; nothing
                changed, the input still waits.
        """
        if not isinstance(data, str):
            with self._lock:
                pending = self._find_input(request)
            spent = _budget_spent(self) if pending.kind == "sampling" else None
            if spent is not None:
                raise InputError(
                    f"the chat's {spent} budget is spent, so {pending.id!r} (a sampling "
                    "request) is not sent to the model: call chat.raise_budget() and answer "
                    "again, answer with your own reply text, or decline it (the input still waits)"
                )
        return self._settle_input(request, "accept", data, by=by, reason=None)

    def decline(
        self,
        request: InputRef,
        reason: str | None = None,
        *,
        by: str = HUMAN,
        cancel: bool = False,
    ) -> PendingInput:
        """Refuse a pending input: no answer is given; the model (or server) is told.

        A declined external call or ``ask_user`` question is answered ``denied``
        (``cancelled`` with ``cancel=True``) with the reason, like a denied call.

        Args:
            request: The :class:`~nbagent.PendingInput`, the call it belongs to, or an id.
            reason: Why, sent with the refusal.
            by: Who declined.
            cancel: Dismiss it instead (an elicitation's Cancel: no decision either way).

        Raises:
            InputError: No such input waits.
        """
        action: InputAction = "cancel" if cancel else "decline"
        return self._settle_input(request, action, None, by=by, reason=reason)

    async def answer_async(
        self, request: InputRef, data: Any = None, *, by: str = HUMAN
    ) -> PendingInput:
        """Async twin of :meth:`answer` (a store's write happens on a worker thread)."""
        return await in_worker(lambda: self.answer(request, data, by=by))

    async def decline_async(
        self,
        request: InputRef,
        reason: str | None = None,
        *,
        by: str = HUMAN,
        cancel: bool = False,
    ) -> PendingInput:
        """Async twin of :meth:`decline`."""
        return await in_worker(lambda: self.decline(request, reason, by=by, cancel=cancel))


class CallAsker:
    """A running call's way to ask a person mid-call (``current_input_asker()``): the
    chat's :meth:`ChatCore._ask_input`, :meth:`ChatCore._withdraw_input`, and an approved
    sampling request run on the chat's provider with its cost counted."""

    def __init__(self, chat: ChatCore, call: ToolCall):
        self._chat = chat
        self._call = call

    def ask(
        self,
        kind: InputKind,
        message: str,
        content: dict[str, Any],
        schema: dict[str, Any] | None,
        server: str | None,
    ) -> tuple[str, concurrent.futures.Future[tuple[str, Any]]]:
        return self._chat._ask_input(self._call, kind, message, content, schema, server)

    def withdraw(self, input_id: str, why: str) -> None:
        self._chat._withdraw_input(input_id, why)

    @property
    def parks(self) -> bool:
        """A chat whose answers are kept durably (an extension with ``answer_input``: a
        store) parks the call on its inputs instead of waiting in memory."""
        return bool(self._chat._hook("answer_input"))

    def resume(self) -> dict[str, Any] | None:
        return self._chat._resume_of(self._call)

    async def sample(
        self,
        input_id: str,
        messages: list[Any],
        system: str | None,
        max_tokens: int | None,
        provider: Provider | None = None,
    ) -> LLMToolResponse:
        """Ask ``provider`` (default: the chat's) on a worker thread (any provider, any
        loop); its tokens and cost join the chat's totals and budgets (a
        :class:`SamplingFinished`)."""
        chat = self._chat
        spent = _budget_spent(chat)
        if spent is not None:  # "no request starts past the budget": sampling's neither
            raise SamplingRefused(
                f"the chat's {spent} budget is spent: the sampling request was not sent to "
                "the model (chat.raise_budget() allows more)"
            )
        provider = provider if provider is not None else chat.provider
        request = ModelRequest(messages=tuple(messages), system=system, max_tokens=max_tokens)
        t0 = time.perf_counter()
        response: LLMToolResponse = await in_worker(provider.complete, request)
        model = response.model or provider.model
        # no usage reported: its tokens read 0 but its cost is unknown, not $0 (as a request
        # of the chat's own); a budget that cannot count it says so, once
        cost = cost_of(model, response.usage) if response.usage_reported else None
        warn = getattr(chat, "_warn_uncounted", None)
        if callable(warn):
            warn(model, cost, response.usage_reported)
        chat._emit(
            SamplingFinished(
                chat_id=chat.id,
                call=self._call,
                input_id=input_id,
                model=model,
                provider=response.provider or provider.name,
                usage=response.usage,
                cost_usd=cost,
                latency_ms=(time.perf_counter() - t0) * 1000.0,
                text=clean(response.text),
            )
        )
        return response


class SamplingRefused(MCPServerError):
    """An approved sampling request that was not sent: the chat's budget is spent."""


def _budget_spent(chat: ChatCore) -> str | None:
    """``"cost"`` or ``"tokens"`` when the chat's whole-chat budget is spent (the check a
    model request of the chat's own loop gets), else ``None``."""
    spent = getattr(chat, "_spent_budget", None)
    return spent() if callable(spent) else None
