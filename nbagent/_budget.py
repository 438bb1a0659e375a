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
cost budget: its ``cost_usd`` is unknown, and ``chat.cost_usd`` is ``None``.
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


__all__ = ["spent_budget"]
