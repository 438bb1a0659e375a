"""The claims-against-actions check: an answer must not claim what its tool calls did not do.

The rules live below the wings (:mod:`nbagent._claims`, shared with the notebook view's
notice); this is the check over a :class:`~nbagent.evaluation.Case`, optionally backed
by a model-graded second opinion.
"""

from __future__ import annotations

from typing import Any

from .._claims import false_claims
from .._html import preview
from ._case import Case
from ._checks import (
    JUDGE_SCHEMA,
    Check,
    Verdict,
    _judge_factory,
    exception_text,
    judge_prompt,
    judge_verdict,
)

CLAIMS_CRITERION = (
    "Every action the final answer says was done (refunded, deleted, sent, booked...) was "
    "done by a tool call whose status is ok. An answer claiming an action whose call was "
    "denied, skipped, timed out, in doubt, failed, still waiting or never made fails."
)


def claims_hold(*, judge: Any = None, name: str = "claims hold") -> Check:
    """Fails a case whose final answer claims an action that did not happen.

    Rule-based (no model; the rules read English): a sentence stating in the past or
    perfect, with no negation, condition or question in the verb's clause, an action
    named by one of the chat's tools ("I have refunded order 42") is checked against the
    call ledger; the case fails when no call of that tool ran to ``ok`` (it was denied,
    skipped, timed out, in doubt, failed, still waiting, or never made), only calls with
    other arguments did, or one of several calls the sentence names did not ("orders 42
    and 43" where 43 was denied, or never asked for). ``detail`` names each false claim
    and what happened instead. A claim of a tool never called needs the tools the chat
    had: a case whose chat is read back with no factory to ask (``score`` of a plain
    batch without ``make_chat=``) and no false claim found is not judged (``passed`` is
    ``<NA>``, the detail says the tools are unknown).

    Args:
        judge: Also ask a model (any nbagent chat, forked per case, or a function making
            one): the case fails when the rules or the judge find a false claim. When the
            rules found one, the case fails whatever the judge does (a judge that raises
            or gives no verdict is named in the detail); when they found none, a judge
            that fails is the check's error (``passed`` is ``<NA>``).
        name: The check's name.
    """
    make = _judge_factory(judge) if judge is not None else None

    def check(case: Case) -> Verdict:
        answer = case.answer
        if answer is None:
            return Verdict(None, None, f"no final answer ({case.error or case.status})")
        claims = false_claims(answer, case.tool_calls, list(case.tools))
        detail = "; ".join(c.describe() for c in claims)
        if not claims and not case.tools_known:  # a claim of a tool never called: unseen
            unknown = (
                "the chat's tools are unknown (only the called ones): pass make_chat= to "
                "nbagent.evaluation.score"
            )
            if make is None:
                return Verdict(None, None, unknown)
        if make is not None:
            if claims:  # the rules decided: the case fails whatever the judge does
                try:
                    verdict = _ask(make, case)
                except Exception as exc:
                    text = exception_text(exc)
                    said = f"the judge failed ({type(exc).__name__}: {preview(text, 200)})"
                    return Verdict(False, 0.0, f"{detail}; {said}")
                return Verdict(False, 0.0, f"{detail}; {verdict.detail}")
            verdict = _ask(make, case)  # the judge alone decides: its failure is the error
            if verdict.passed is False:
                return Verdict(False, 0.0, f"rules found none; {verdict.detail}")
            return Verdict(True, 1.0, verdict.detail)
        if claims:
            return Verdict(False, 0.0, detail)
        return Verdict(True, 1.0, "every action it claims happened")

    return Check(name, check)


def _ask(make: Any, case: Case) -> Verdict:
    """The judge's verdict on ``case`` (a chat of ``make`` asked the criterion)."""
    chat = make()
    chat.ask(judge_prompt(CLAIMS_CRITERION, case), output=JUDGE_SCHEMA)
    return judge_verdict(chat)
