"""What a check reads: one evaluated case (its inputs, its chat's record, its answer).

A :class:`Case` is built from a batch row and the chat's record (the live chat's
``chat.record``, or the record folded from the store's events), so a check reads
the same thing whether the chat ran here, on Ray or in an earlier, resumed run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .._record import CallRecord, ChatRecord, fold


@dataclass(frozen=True)
class Case:
    """One case as a check sees it.

    Attributes:
        key: The case's key (the batch's key: the DataFrame's index, or ``key=``).
        row: The case's input fields (a DataFrame row as a dict; ``{"prompt": ...}``
            for a list of prompts).
        prompt: The prompt the chat was asked (``None`` when the row could not be
            formatted).
        status: The batch row's status: ``done``, ``failed`` or ``awaiting_approval``.
        chat_id: The chat's id (``Chat.load(store, chat_id)``, or the batch's chats).
        record: The chat's record (``chat.record``; ``None`` when no chat was made).
        error: The row's error, if it failed.
        chat: The live chat when it is still in this process, else ``None``.
        branch: For a decision sweep, the branch's name (``"approve issue_refund"``...);
            ``None`` for an ordinary case.
        made_tools: For a chat read back from a store (no live chat here): the names of
            the tools a chat of its factory has, asked when :attr:`tools` is first read.
        driver_error: What the evaluation's own functions raised driving this case
            (``decide=``, a sweep's ``rest=``): the case is not judged, every check's row
            has it as its ``error``.
    """

    key: str
    row: Mapping[str, Any]
    prompt: str | None = None
    status: str = "done"
    chat_id: str | None = None
    record: ChatRecord | None = None
    error: str | None = None
    chat: Any = field(default=None, repr=False, compare=False)
    branch: str | None = None
    made_tools: Callable[[], tuple[str, ...]] | None = field(
        default=None, repr=False, compare=False
    )
    driver_error: str | None = None

    @property
    def tools(self) -> tuple[str, ...]:
        """The names of the tools the case's chat had: the live chat's; for a chat read
        back from a store, those of a chat its factory makes (``evaluate`` knows it); else
        the ones it called (all a stored chat's events say)."""
        names: list[str] = []
        if self.chat is not None:
            try:  # a source that cannot list now: the other ways
                names = [t.name for t in self.chat.tools]
            except Exception:
                names = [t.name for t in getattr(self.chat, "known_tools", ())]
        elif self.made_tools is not None:
            names = list(self.made_tools())
        return tuple(dict.fromkeys([*names, *(c.tool for c in self.tool_calls)]))

    @property
    def tools_known(self) -> bool:
        """Whether :attr:`tools` knows the tools the chat had (a live chat, or a factory
        to ask), not only the ones it called: a plain batch's chat read back without its
        factory (``score(batch_result, checks)`` with no ``make_chat=``) does not."""
        return self.chat is not None or self.made_tools is not None

    @property
    def ran(self) -> bool:
        """Whether the case's chat ran: a failed row with no chat's record did not (its
        factory raised, its prompt could not be filled, its input changed under a stored
        name). Every check fails such a case (:func:`~nbagent.evaluation.score`)."""
        return not (self.status == "failed" and self.record is None)

    @property
    def calls(self) -> tuple[CallRecord, ...]:
        """Every tool call (and provider item) of the chat, in request order."""
        return self.record.calls if self.record is not None else ()

    @property
    def tool_calls(self) -> tuple[CallRecord, ...]:
        """The tool calls only (provider items such as a hosted web search left out)."""
        return tuple(c for c in self.calls if c.item_type is None)

    @property
    def answer(self) -> str | None:
        """The chat's final answer: the text of its last message when that is the model's
        answer (not a request for tools), else ``None`` (parked, failed, no answer yet)."""
        message = self._final_message()
        if message is None:
            return None
        content = message.content
        return content if isinstance(content, str) else None

    @property
    def parsed(self) -> Any:
        """The final answer's structured value (``chat.ask(..., output=)``), else ``None``."""
        message = self._final_message()
        return getattr(message.message, "parsed", None) if message is not None else None

    def _final_message(self) -> Any:
        if self.record is None:
            return None
        messages = self.record.messages
        if not messages:
            return None
        last = messages[-1]
        if last.role != "assistant" or last.kind != "text":
            return None
        return last

    @property
    def cost_usd(self) -> float:
        """What the chat's model requests cost (a replayed request costs nothing)."""
        return float(self.record.cost_usd) if self.record is not None else 0.0

    @property
    def tokens(self) -> int:
        """Input plus output tokens of every model request (replayed ones included)."""
        if self.record is None:
            return 0
        usage = self.record.usage
        return int(usage.input_tokens or 0) + int(usage.output_tokens or 0)

    @property
    def steps(self) -> int:
        """Steps in the chat's history, counted as ``max_steps`` counts them: each model
        request and each round of tool calls (replayed and a fork's shared ones included)."""
        return self.record.steps_taken() if self.record is not None else 0


def record_of(source: Any) -> tuple[ChatRecord | None, Any]:
    """A chat's record and live chat from what a batch gives for it (a chat; the record of
    a chat the batch let go when its row was done; or its stored events)."""
    if source is None:
        return None, None
    if isinstance(source, ChatRecord):
        return source, None
    record = getattr(source, "record", None)
    if isinstance(record, ChatRecord):
        return record, source
    events = list(source)
    if not events:
        return None, None
    return fold(events), None
