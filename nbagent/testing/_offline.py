"""What a test exported by :func:`~nbagent.testing.to_pytest` runs with: no model, no network.

- :class:`OfflineProvider`: a provider with a name and a model and no way to
  reach a model (the chat replays with ``replay="only"``: it is never asked);
- :func:`stand_in`: a tool with the recorded name, description and schema,
  for a tool the test cannot import; its results are replayed
  (``replay_tools``), and running it fails loudly;
- :func:`replay_turns`: asks each recorded user message, makes the recorded
  decisions and gives the recorded answers (by call and input id: a replayed
  response asks for the same calls), stops where the recorded run stopped, and
  returns the final answer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .._approvals import HUMAN
from .._tools import Tool
from .._types import LLMToolResponse, PendingInput, ToolCall
from ..providers import CompleteWithToolsMixin, ModelRequest


class OfflineProvider(CompleteWithToolsMixin):
    """A provider that never answers: every request must come from a recording.

    Args:
        name: The provider's name as recorded (``"openai"``, ``"anthropic"``...).
        model: The model as recorded.
        settings: What the recorded provider added to every request, as its requests'
            keys hold it (``max_tokens`` when not its default, a digest of its
            ``extra_body``): ``to_pytest`` writes them, so a run recorded with them replays.
    """

    asks_no_model = True
    """Read by a replay miss (the core knows no testing module): its hint is to export the
    test again, since ``replay='auto'`` cannot ask a model through this provider."""

    def __init__(self, name: str, model: str, settings: dict[str, Any] | None = None):
        self.name = name
        self.model = model
        self.replay_settings = dict(settings or {})

    def __repr__(self) -> str:
        more = f", settings={self.replay_settings!r}" if self.replay_settings else ""
        return f"OfflineProvider({self.name!r}, {self.model!r}{more})"

    def complete(self, request: ModelRequest) -> LLMToolResponse:
        raise AssertionError(
            f"{self!r} was asked a question: the chat must replay (replay='only') and never "
            "reach a model"
        )

    async def complete_async(self, request: ModelRequest) -> LLMToolResponse:
        return self.complete(request)


class _StandIn(Tool, abstract=True):
    def __init__(
        self, name: str, description: str, input_schema: dict[str, Any], requires_approval: bool
    ):
        self.name = name  # type: ignore[misc]
        self.description = description  # type: ignore[misc]
        self.parameters = input_schema  # type: ignore[misc]
        self.requires_approval = requires_approval  # type: ignore[misc]

    def execute(self, **kwargs: Any) -> Any:
        raise AssertionError(
            f"the stand-in for {self.name!r} ran: the recorded run has no result for "
            f"this call ({kwargs!r}); import the real tool into the test instead"
        )

    def __repr__(self) -> str:
        return f"<stand-in for tool {self.name}>"


def stand_in(
    name: str,
    description: str,
    input_schema: dict[str, Any],
    *,
    requires_approval: bool = False,
) -> Tool:
    """A tool the model sees exactly as it saw the recorded one, which never runs.

    Give its name to ``Chat(replay_tools=[...])`` so its calls get their
    recorded results; a call without one fails the test.
    """
    return _StandIn(name, description, input_schema, requires_approval)


Decision = tuple[Any, ...]
"""``(verdict, reason, edited arguments[, by])`` as recorded: ``("approved", None, None)``;
``by`` (who decided, default ``"user"``) is in the text a denied call's model reads."""

Answer = tuple[str, Any, str | None, str]
"""``(action, data, reason, by)`` as recorded for a pending input (``ask_user``'s question,
an external tool's call): ``("accept", "green", None, "user")``, ``("decline", None,
"not now", "user")`` or ``("cancel", None, None, "user")``."""


def replay_turns(
    chat: Any,
    turns: Sequence[str],
    decisions: Mapping[str, Decision],
    inputs: Mapping[str, Answer] | None = None,
    *,
    outputs: Mapping[int, Any] | None = None,
    complete_last: bool = True,
    options: Mapping[int, Mapping[str, Any]] | None = None,
) -> str | None:
    """Ask each user message of ``turns``, settling what waits as the recorded run did.

    A pending call gets its recorded decision (by call id: a replayed response asks
    for the same calls), a pending input its recorded answer (by input id), then
    ``complete()`` carries on. The replay stops where the recorded run stopped: after
    the last message, at a call or input the recorded run left waiting.

    Args:
        chat: The chat replaying (``replay="only"``).
        turns: The user messages, in order.
        decisions: ``{call id: (verdict, reason, edited arguments[, by])}``.
        inputs: ``{input id: (action, data, reason, by)}`` (``ask_user``, external tools).
        outputs: The structured answer a message asked for (its ``output=``), by its
            index in ``turns``.
        complete_last: False: the recorded run made its last decisions and stopped
            before ``complete()`` ran them.
        options: The tool options as the recorded run set them, by the step after which
            it did (``0``: before the first message): ``{0: {"calls": "one"}}``, or
            ``{3: {"calls": "one"}}`` for a fork with ``tool_options=`` at step 3, whose
            shared steps were asked with its parent's options.

    Returns:
        The text of the last assistant message.

    Raises:
        AssertionError: A call or input waits, before the last message, for something
            the recorded run did not give it.
    """
    answers = dict(inputs or {})
    outputs = dict(outputs or {})
    later = {step: dict(o) for step, o in (options or {}).items() if step}
    if options and 0 in options:
        chat.with_tool_options(**options[0])
    if later:

        def switch(event: Any) -> None:  # once the step has finished, before the next request
            now = later.pop(event.step, None)
            if now is not None:
                chat.with_tool_options(**now)

        chat.on("step_finished", switch)
    unused = set(decisions) | set(answers)
    for index, text in enumerate(turns):
        last = index == len(turns) - 1
        chat.ask(text, output=outputs.get(index))
        while chat.pending_approvals or chat.pending_inputs:
            waiting = [*chat.pending_approvals, *chat.pending_inputs]
            settled = [
                w
                for w in waiting
                if w.id in (answers if isinstance(w, PendingInput) else decisions)
            ]
            if not settled:
                if last:
                    break  # the recorded run stopped here, waiting
                left = ", ".join(_waiting(w) for w in waiting)
                raise AssertionError(
                    f"{left} waits after message {index + 1} ({text!r}), but the recorded "
                    f"run gave it no decision or answer and went on to {turns[index + 1]!r}"
                )
            for w in settled:
                unused.discard(w.id)
                if isinstance(w, PendingInput):
                    _answer(chat, w, answers[w.id])
                else:
                    _decide(chat, w, decisions[w.id])
            if last and not complete_last and not unused:
                break  # its last decisions made: the recorded run stopped before complete()
            chat.complete()
    last_message = chat.last_assistant_message
    return None if last_message is None else last_message.content


def _waiting(w: ToolCall | PendingInput) -> str:
    if isinstance(w, PendingInput):
        return f"input {w.id!r} ({w.kind}: {w.message!r})"
    return f"{w.name}({w.arguments!r})"


def _decide(chat: Any, call: ToolCall, decision: Decision) -> None:
    verdict, reason, arguments = decision[:3]
    by = decision[3] if len(decision) > 3 else HUMAN
    if verdict == "approved":
        chat.approve(call, arguments, reason=reason, by=by)
    else:
        chat.deny(call, reason, by=by)


def _answer(chat: Any, request: PendingInput, answer: Answer) -> None:
    action, data, reason, by = answer
    if action == "accept":
        chat.answer(request, data, by=by)
    else:
        chat.decline(request, reason, by=by, cancel=action == "cancel")


__all__ = ["OfflineProvider", "replay_turns", "stand_in"]
