"""Evaluate agents over many cases: checks, scorecards, claims against actions.

::

    import nbagent
    from nbagent.evaluation import answer_contains, tool_called, tool_not_called

    card = nbagent.evaluate(
        cases,                                    # a DataFrame or a list, as nbagent.batch takes
        make_chat,
        [tool_called("order_status"), tool_not_called("issue_refund"),
         answer_contains("delivered"), my_check],  # a check is any function of a Case
        prompt="Where is order {order_id}?",
    )
    card.summary(); card.plot()

:func:`evaluate` runs every case on :func:`nbagent.batch` (locally or on Ray,
resumable with a store) and returns a scorecard: one row per case and check,
with the chat id to open. :func:`score` applies checks to a batch you already ran.
"""

from __future__ import annotations

from .._claims import Claim, false_claims
from .._exports import publish as _publish
from ._case import Case
from ._checks import (
    Check,
    Column,
    Verdict,
    answer_contains,
    answer_matches,
    answer_satisfies,
    column,
    cost_under,
    judged,
    output_validates,
    steps_under,
    tokens_under,
    tool_called,
    tool_not_called,
    verdict_of,
)
from ._claims import claims_hold
from ._evaluate import evaluate, evaluate_async, score
from ._policies import Condition, PolicySuggestion, Suggestions, suggest_policies
from ._sweep import compare_scorecards, sweep

__all__ = [
    "Case",
    "Check",
    "Claim",
    "Column",
    "Condition",
    "PolicySuggestion",
    "Suggestions",
    "Verdict",
    "answer_contains",
    "answer_matches",
    "answer_satisfies",
    "claims_hold",
    "column",
    "compare_scorecards",
    "cost_under",
    "evaluate",
    "evaluate_async",
    "false_claims",
    "judged",
    "output_validates",
    "score",
    "steps_under",
    "suggest_policies",
    "sweep",
    "tokens_under",
    "tool_called",
    "tool_not_called",
    "verdict_of",
]

_publish(__name__, globals(), __all__)
