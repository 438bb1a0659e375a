"""Cost and token budgets: which one a chat has spent, checked before each model request.

A budget counts the whole chat (every turn), like ``chat.usage`` and
``chat.cost_usd``: ``Chat(max_cost_usd=1.0)`` stops the chat once its
requests have cost a dollar, whichever turn spends it. It is checked where a
step would send a model request, after the previous response's usage was
added: a turn whose answer arrives on the request that reaches the budget is
``complete``; a chat that would need another request parks with
``budget_exhausted``. Tool calls already requested still run (they cost no
tokens), and pending approvals stay pending.

An unpriced request (a model the catalog does not know) adds nothing to the
cost budget: its ``cost_usd`` is unknown, and ``chat.cost_usd`` is ``None``;
the budget cannot stop what it cannot count, so a chat with a cost budget warns
once (:class:`UnknownModelWarning`) when an unpriced response arrives
(:func:`uncounted`). A response that reports no usage (some OpenAI-compatible
servers send none: ``LLMToolResponse.usage_reported`` is ``False``) reads 0 tokens
and an unknown cost (``None``, as an unpriced one), and a chat with either budget
warns once that it cannot count it; ``max_steps`` bounds such a chat.
"""

from __future__ import annotations

from ._types import Usage


def spent_budget(
    usage: Usage, cost: float, max_cost: float | None, max_tokens: int | None
) -> str | None:
    """``"cost"`` or ``"tokens"`` when that budget is reached (cost first), else ``None``."""
    if max_cost is not None and cost >= max_cost:
        return "cost"
    if max_tokens is not None and usage.total_tokens >= max_tokens:
        return "tokens"
    return None


def uncounted(
    model: str,
    cost: float | None,
    reported: bool,
    max_cost: float | None,
    max_tokens: float | None,
    warned: set[str],
) -> str | None:
    """What to warn (once per chat: ``warned`` keeps which) when a budget cannot count a
    response: no usage reported while a budget is set, or no price while a cost budget
    is; else ``None``."""
    if not reported:
        caps = [f"max_cost_usd={max_cost:g}"] if max_cost is not None else []
        caps += [f"max_total_tokens={int(max_tokens)}"] if max_tokens is not None else []
        if not caps or "usage" in warned:
            return None
        warned.add("usage")
        return (
            f"the server reported no token usage for a response of {model!r}, so "
            f"{' and '.join(caps)} cannot count it (its tokens read 0 and its cost is "
            "unknown); max_steps bounds such a chat"
        )
    if cost is None and max_cost is not None and "cost" not in warned:
        warned.add("cost")
        return (
            f"there is no price for {model!r}, so max_cost_usd={max_cost:g} cannot count "
            "its requests (register its price with nbagent.providers.register_model, "
            "or use max_total_tokens)"
        )
    return None


__all__ = ["spent_budget", "uncounted"]
