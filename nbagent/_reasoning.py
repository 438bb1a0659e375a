"""The ``reasoning=`` setting of a chat: an effort word or a token budget.

``Chat(reasoning=...)`` takes ``"low"``, ``"medium"``, ``"high"`` (an effort),
a token budget (an ``int``, at least :data:`MIN_BUDGET`), or ``None`` (the
provider's default: nothing is sent). It is checked here, once, when the chat
is made; each adapter maps it to its wire (see the README's *Reasoning*):

- Anthropic: ``thinking: {"type": "enabled", "budget_tokens": N}``; an effort
  is a budget from :data:`EFFORT_BUDGETS`.
- OpenAI Responses: ``reasoning: {"effort": E}`` and
  ``include: ["reasoning.encrypted_content"]`` (the request is stateless).
- OpenAI Chat Completions: ``reasoning_effort: E``.

OpenAI takes an effort, not a budget: a budget there is refused before any
request, and so is an effort word nobody knows.
"""

from __future__ import annotations

from typing import Any, Literal, cast, get_args

Effort = Literal["low", "medium", "high"]
EFFORTS: tuple[Effort, ...] = get_args(Effort)
ReasoningSetting = Effort | int
MIN_BUDGET = 1024
"""Anthropic's smallest thinking budget."""
EFFORT_BUDGETS: dict[str, int] = {"low": 1024, "medium": 4096, "high": 16384}
"""The thinking budget (tokens) an effort word means where the API takes a budget."""


def normalize_reasoning(value: Any) -> ReasoningSetting | None:
    """``None``, an effort word or a budget of at least :data:`MIN_BUDGET` tokens.

    Raises:
        ValueError: Anything else, with what is accepted.
    """
    if value is None:
        return None
    if isinstance(value, str) and value in EFFORTS:
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        if value < MIN_BUDGET:
            raise ValueError(
                f"reasoning={value}: a thinking budget is at least {MIN_BUDGET} tokens "
                "(Anthropic's minimum); or pass an effort: 'low', 'medium' or 'high'"
            )
        return value
    raise ValueError(
        f"reasoning must be 'low', 'medium', 'high', a token budget (an int >= {MIN_BUDGET}) "
        f"or None (the provider's default); got {value!r}"
    )


def budget_of(value: str | int) -> int:
    """The token budget a setting means (an effort word through :data:`EFFORT_BUDGETS`)."""
    value = _checked(value)
    return value if isinstance(value, int) else EFFORT_BUDGETS[value]


def _checked(value: str | int) -> ReasoningSetting:
    checked = normalize_reasoning(value)
    if checked is None:
        raise ValueError("reasoning is None: there is nothing to send")
    return checked


def effort_of(value: str | int, provider: str) -> Effort:
    """The effort word for an API that takes only efforts.

    Raises:
        ValueError: ``value`` is a token budget.
    """
    if isinstance(value, int):
        raise ValueError(
            f"{provider}: reasoning={value} is a token budget, but OpenAI models take an "
            "effort: pass reasoning='low', 'medium' or 'high'"
        )
    return cast(Effort, _checked(value))  # an int was refused above


__all__ = [
    "EFFORTS",
    "EFFORT_BUDGETS",
    "MIN_BUDGET",
    "Effort",
    "ReasoningSetting",
    "budget_of",
    "effort_of",
    "normalize_reasoning",
]
