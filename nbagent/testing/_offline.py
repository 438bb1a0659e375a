"""What a test exported by :func:`~nbagent.testing.to_pytest` runs with: no model, no network.

- :class:`OfflineProvider`: a provider with a name and a model and no way to
  reach a model (the chat replays with ``replay="only"``: it is never asked);
- :func:`stand_in`: a tool with the recorded name, description and schema,
  for a tool the test cannot import; its results are replayed
  (``replay_tools``), and running it fails loudly;
- :func:`replay_turns`: asks each recorded user message and makes the recorded
  decisions (by call id: a replayed response asks for the same calls), then
  returns the final answer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .._tools import Tool
from .._types import LLMToolResponse
from ..providers import CompleteWithToolsMixin, ModelRequest


class OfflineProvider(CompleteWithToolsMixin):
    """A provider that never answers: every request must come from a recording.

    Args:
        name: The provider's name as recorded (``"openai"``, ``"anthropic"``...).
        model: The model as recorded.
    """

    def __init__(self, name: str, model: str):
        self.name = name
        self.model = model

    def __repr__(self) -> str:
        return f"OfflineProvider({self.name!r}, {self.model!r})"

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


Decision = tuple[str, str | None, dict[str, Any] | None]
"""``(verdict, reason, edited arguments)`` as recorded: ``("approved", None, None)``."""


def replay_turns(chat: Any, turns: Sequence[str], decisions: Mapping[str, Decision]) -> str | None:
    """Ask each user message of ``turns``, deciding pending calls as ``decisions`` says.

    Returns:
        The text of the last assistant message.

    Raises:
        AssertionError: A call waits for a decision the recorded run did not make.
    """
    for text in turns:
        chat.ask(text)
        while chat.pending_approvals:
            for call in chat.pending_approvals:
                if call.id not in decisions:
                    raise AssertionError(
                        f"{call.name}({call.arguments!r}) waits for a decision the recorded "
                        "run did not make"
                    )
                verdict, reason, arguments = decisions[call.id]
                if verdict == "approved":
                    chat.approve(call, arguments, reason=reason)
                else:
                    chat.deny(call, reason)
            chat.complete()
    last = chat.last_assistant_message
    return None if last is None else last.content


__all__ = ["OfflineProvider", "replay_turns", "stand_in"]
