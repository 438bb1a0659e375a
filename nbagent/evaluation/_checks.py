"""Checks: what a case is judged by, and the built-in ones.

A check is any callable taking a :class:`~nbagent.evaluation.Case`. What it returns
becomes a :class:`Verdict` (:func:`verdict_of`): ``True``/``False``; a number in
``[0, 1]`` (a score: passed at 0.5 or more); ``(passed, detail)``; a ``Verdict``;
``None`` (the check does not apply to this case). A check that raises is recorded
as an error of that case and check; the evaluation goes on.

The built-in checks are :class:`Check` objects (a name and a function). An argument
given as :func:`column` (``answer_contains(column("expected"))``) is read from each
case's row.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .._errors import OutputValidationError
from .._html import preview, short_json
from .._secrets import (
    Masks,
    named_values,
    redact_keys,
    redacted,
    shown_as,
    token_masks,
)
from .._types import short_id
from ._case import Case

CheckFn = Callable[[Case], Any]


@dataclass(frozen=True)
class Verdict:
    """A check's judgement of one case.

    Attributes:
        passed: Whether the case passed (``None``: the check did not apply).
        score: A score in ``[0, 1]`` (``1.0``/``0.0`` for a plain pass/fail).
        detail: Why, in a line (what was found, what was expected).
    """

    passed: bool | None
    score: float | None = None
    detail: str = ""

    def __post_init__(self) -> None:
        """Checked and made plain (a numpy bool or number becomes Python's): a verdict a
        scorecard cannot hold is refused where it is made, and the check's row is an error.

        Raises:
            TypeError: ``passed`` not a bool or ``None``, ``score`` not a number,
                ``detail`` not text.
            ValueError: A score outside ``[0, 1]`` (or NaN).
        """
        passed = _plain_bool(self.passed)
        if passed is not None and not isinstance(passed, bool):
            raise TypeError(
                f"a Verdict's passed is True, False or None, got {type(self.passed).__name__} "
                f"{self.passed!r}"
            )
        score = self.score
        if score is not None:
            if not isinstance(score, numbers.Real) or isinstance(score, bool):
                raise TypeError(
                    f"a Verdict's score is a number in [0, 1] or None, got "
                    f"{type(score).__name__} {score!r}"
                )
            score = float(score)
            if math.isnan(score) or not 0.0 <= score <= 1.0:
                raise ValueError(f"a Verdict's score must be in [0, 1], got {self.score!r}")
        detail = "" if self.detail is None else self.detail
        if not isinstance(detail, str):
            raise TypeError(f"a Verdict's detail is text, got {type(detail).__name__}")
        object.__setattr__(self, "passed", passed)
        object.__setattr__(self, "score", score)
        object.__setattr__(self, "detail", detail)


def _plain_bool(value: Any) -> Any:
    """``numpy.bool_`` as ``bool``; anything else as it is."""
    if type(value).__module__ == "numpy" and type(value).__name__ in ("bool", "bool_"):
        return bool(value)
    return value


class EmptyCell(LookupError):
    """A check's :func:`column` is empty in this case (None, NaN, NA): the check does not
    apply to it (``passed`` is ``<NA>``), rather than comparing with the text "None"."""


@dataclass(frozen=True)
class Column:
    """A case's input field, read when the check runs (see :func:`column`)."""

    name: str

    def of(self, case: Case) -> Any:
        """The field's value in ``case``.

        Raises:
            KeyError: The case has no such column.
            EmptyCell: The cell is empty (None, NaN, NA, or text of only whitespace: an
                empty text is in every answer, so it would pass any).
        """
        try:
            value = case.row[self.name]
        except KeyError:
            have = ", ".join(map(repr, list(case.row)[:12]))
            raise KeyError(f"the case has no column {self.name!r} (it has {have})") from None
        if _empty(value) or (isinstance(value, str) and not value.strip()):
            raise EmptyCell(f"column {self.name!r} is empty in this case")
        return value


def _empty(value: Any) -> bool:
    """None, NaN, pandas' NA or NaT."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return True
    if type(value).__module__.startswith("pandas"):
        try:
            import pandas as pd

            return bool(pd.isna(value))
        except (ImportError, TypeError, ValueError):
            return False
    return False


def column(name: str) -> Column:
    """An argument of a built-in check read from each case's row.

    Example::

        cases = pd.DataFrame({"prompt": [...], "expected": ["42", "Paris"]})
        nbagent.evaluate(cases, make_chat, [answer_contains(column("expected"))])
    """
    return Column(name)


def _value(value: Any, case: Case) -> Any:
    return value.of(case) if isinstance(value, Column) else value


class Check:
    """A named check: ``name`` is its column value in the scorecard.

    Args:
        name: What the scorecard calls it.
        fn: The function judging a case (returns what :func:`verdict_of` reads).
    """

    def __init__(self, name: str, fn: CheckFn):
        self.name = name
        self.fn = fn

    def __call__(self, case: Case) -> Any:
        return self.fn(case)

    def __repr__(self) -> str:
        return f"<check {self.name}>"


def check_name(check: Any) -> str:
    """The scorecard's name for ``check``: its ``name``, else its function's name."""
    name = getattr(check, "name", None)
    if isinstance(name, str) and name:
        return name
    name = getattr(check, "__name__", None)
    if isinstance(name, str) and name and name != "<lambda>":
        return name
    return type(check).__name__ if not callable(check) or name is None else "check"


def verdict_of(value: Any) -> Verdict:
    """A check's return value as a :class:`Verdict` (see the module).

    Raises:
        TypeError: A value no check should return (a string, a list...).
        ValueError: A score outside ``[0, 1]``.
    """
    if isinstance(value, Verdict):
        return value
    if value is None:
        return Verdict(None, None, "does not apply")
    value = _plain_bool(value)  # numpy.bool_
    if isinstance(value, bool):
        return Verdict(value, 1.0 if value else 0.0)
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], str):
        head = verdict_of(value[0])
        return Verdict(head.passed, head.score, value[1])
    if isinstance(value, numbers.Real):  # numpy's numbers too: np.int64(1) is 1
        score = float(value)
        if math.isnan(score) or not 0.0 <= score <= 1.0:
            raise ValueError(f"a check's score must be in [0, 1], got {value!r}")
        return Verdict(score >= 0.5, score)
    raise TypeError(
        "a check returns True/False, a score in [0, 1], (passed, detail), a Verdict or None; "
        f"got {type(value).__name__}"
    )


def exception_text(exc: BaseException) -> str:
    """``str(exc)`` on one line, or, when the exception's own ``__str__`` raises (an SDK
    error reading a field it lacks), ``(its message could not be read: TypeError)``: the
    text of a user's exception becomes a row's error, and every case already ran."""
    try:
        text = str(exc)
    except Exception as broken:
        return f"(its message could not be read: {type(broken).__name__})"
    return " ".join(text.split())


# ------------------------------------------------------------------ tool calls
def _matches(expected: Any, actual: Any, name: str = "") -> bool:
    """Whether an argument's value ``actual`` is what a check expects.

    Raises:
        ValueError: A predicate raised: the check's row is an error, neither passed nor
            failed (a typo in a predicate must not make ``tool_not_called`` pass).
    """
    if isinstance(expected, re.Pattern):
        return actual is not None and expected.fullmatch(str(actual)) is not None
    if callable(expected) and not isinstance(expected, type):
        try:  # what it returns counts as an `if` reads it: a numpy bool, a re.Match
            return bool(expected(actual))
        except Exception as exc:
            text = exception_text(exc)
            raise ValueError(
                f"the predicate for {name}= raised {type(exc).__name__}: {text} "
                f"(on {preview(repr(shown_as(actual, name)), 60)})"
            ) from exc
    if _numeric_text(expected, actual) or _numeric_text(actual, expected):
        # a text column read from a CSV ("41") and a number argument (41): numbers compare
        try:
            return math.isclose(float(expected), float(actual), rel_tol=1e-9, abs_tol=1e-9)
        except (TypeError, ValueError):
            return False
    if isinstance(expected, float) or isinstance(actual, float):
        try:
            return math.isclose(float(expected), float(actual), rel_tol=1e-9, abs_tol=1e-9)
        except (TypeError, ValueError):
            return False
    return bool(expected == actual)


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _numeric_text(text: Any, number: Any) -> bool:
    """``text`` is a number's text ("41", " 2.5") and ``number`` a number."""
    return isinstance(text, str) and _is_number(number) and _NUMERIC.fullmatch(text) is not None


_NUMERIC = re.compile(r"\s*[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?\s*")


def _call_matches(call: Any, tool: str, arguments: Mapping[str, Any], case: Case) -> bool:
    if call.tool != tool:
        return False
    given = call.edited_arguments if call.edited_arguments is not None else call.arguments
    given = given if isinstance(given, dict) else {}
    for name, expected in arguments.items():
        if name not in given:
            return False
        if not _matches(_value(expected, case), given[name], name):
            return False
    return True


def _describe(tool: str, arguments: Mapping[str, Any]) -> str:
    if not arguments:
        return tool
    parts = []
    for k, v in arguments.items():
        if isinstance(v, Column):
            parts.append(f"{k}=column({v.name!r})")
        elif isinstance(v, re.Pattern):
            parts.append(f"{k}~/{v.pattern}/")
        elif callable(v):
            fn = getattr(v, "__name__", "<lambda>")
            parts.append(f"{k}=<predicate>" if fn == "<lambda>" else f"{k}={fn}(...)")
        else:
            parts.append(f"{k}={shown_as(v, k)!r}")
    return f"{tool}({', '.join(parts)})"


def _statuses(status: str | Iterable[str] | None) -> frozenset[str] | None:
    if status is None:
        return None
    return frozenset([status] if isinstance(status, str) else status)


def _seen(case: Case) -> str:
    """The case's calls, each with its status and the arguments it ran with."""
    names = []
    for c in case.tool_calls:
        args = c.edited_arguments if c.edited_arguments is not None else c.arguments
        names.append(f"{c.tool}[{c.status}]({_args_text(args, 80)})")
    return ", ".join(names) if names else "no tool calls"


def _args_text(args: Any, limit: int) -> str:
    """A call's arguments on one line as a check's detail or a judge shows them: a
    secret's value (``password``, ``api_key``) and anything shaped like a key as ``***``."""
    return redact_keys(short_json(redacted(args), limit)) if args else ""


def _expected(arguments: Mapping[str, Any], case: Case) -> str:
    """What the check's :func:`column` arguments are in this case (``order_id='41'``)."""
    shown = []
    for k, v in arguments.items():
        if isinstance(v, Column):
            try:
                shown.append(f"{k}={v.of(case)!r}")
            except LookupError:
                continue
    return f" (here {', '.join(shown)})" if shown else ""


def tool_called(
    tool: str,
    /,
    *,
    status: str | Iterable[str] | None = None,
    times: int | None = None,
    **arguments: Any,
) -> Check:
    """Passes when the model called ``tool`` (with these arguments).

    Args:
        tool: The tool's name.
        status: Count only calls that ended so (``"ok"``, ``"denied"``...; a list
            for several). Default: any call the model made.
        times: Exactly this many matching calls (default: at least one).
        **arguments: The arguments the call must have: a value (numbers compare
            as numbers), a compiled regular expression (matched in full against the
            value's text), a predicate (it matches when what it returns is true: a
            numpy bool, a ``re.Match``...; one that raises makes the case's row an
            error), or :func:`column`. An edited approval's arguments are the ones
            that count. Others may be there too.
    """
    wanted = _statuses(status)
    what = _describe(tool, arguments)

    def judge(case: Case) -> Verdict:
        found = [
            c
            for c in case.tool_calls
            if _call_matches(c, tool, arguments, case) and (wanted is None or c.status in wanted)
        ]
        ok = len(found) == times if times is not None else bool(found)
        if ok:
            return Verdict(True, 1.0, f"{len(found)} matching call(s) of {what}")
        need = f"{times}" if times is not None else "at least one"
        return Verdict(False, 0.0, f"wanted {need} call(s) of {what}{_expected(arguments, case)}"
                       f", found {len(found)}; calls: {_seen(case)}")  # fmt: skip

    suffix = f" [{'|'.join(sorted(wanted))}]" if wanted else ""
    count = f" x{times}" if times is not None else ""
    return Check(f"called {what}{suffix}{count}", judge)


def tool_not_called(tool: str, /, **arguments: Any) -> Check:
    """Passes when the model made no call of ``tool`` (with these arguments, if given;
    matched as in :func:`tool_called`)."""
    what = _describe(tool, arguments)

    def judge(case: Case) -> Verdict:
        found = [c for c in case.tool_calls if _call_matches(c, tool, arguments, case)]
        if not found:
            return Verdict(True, 1.0, f"no call of {what}")
        return Verdict(False, 0.0, f"{len(found)} call(s) of {what}{_expected(arguments, case)}: "
                       f"{_seen(case)}")  # fmt: skip

    return Check(f"not called {what}", judge)


# ------------------------------------------------------------------ the answer
def _no_answer(case: Case) -> Verdict:
    why = case.error or case.status
    return Verdict(False, 0.0, f"no final answer ({why})")


def answer_contains(*texts: Any, case_sensitive: bool = False, any_of: bool = False) -> Check:
    """Passes when the final answer contains every one of ``texts`` (or one, ``any_of=True``).

    Args:
        *texts: The texts (or :func:`column`).
        case_sensitive: Compare case as well (default: ignore case).
        any_of: One text is enough.
    """
    if not texts:
        raise ValueError("answer_contains needs at least one text")
    for t in texts:
        if isinstance(t, str) and not t.strip():
            raise ValueError(
                f"answer_contains: the text {t!r} is in every answer; give a text to look for"
            )

    def judge(case: Case) -> Verdict:
        answer = case.answer
        if answer is None:
            return _no_answer(case)
        wanted = [str(_value(t, case)) for t in texts]
        hay = answer if case_sensitive else answer.casefold()
        found = [t for t in wanted if (t if case_sensitive else t.casefold()) in hay]
        ok = bool(found) if any_of else len(found) == len(wanted)
        missing = [t for t in wanted if t not in found]
        detail = (
            "found " + ", ".join(map(repr, found))
            if ok
            else "missing " + ", ".join(map(repr, missing))
        )
        return Verdict(ok, 1.0 if ok else 0.0, detail)

    shown = ", ".join(
        f"column({t.name!r})" if isinstance(t, Column) else repr(str(t)) for t in texts
    )
    return Check(f"answer contains {'any of ' if any_of else ''}{shown}", judge)


def answer_matches(pattern: str | re.Pattern[str], flags: int = 0) -> Check:
    """Passes when a regular expression is found in the final answer (``re.search``)."""
    regex = pattern if isinstance(pattern, re.Pattern) else re.compile(pattern, flags)

    def judge(case: Case) -> Verdict:
        answer = case.answer
        if answer is None:
            return _no_answer(case)
        m = regex.search(answer)
        if m is None:
            return Verdict(False, 0.0, f"/{regex.pattern}/ not found")
        return Verdict(True, 1.0, f"found {preview(m.group(0), 80)!r}")

    return Check(f"answer matches /{regex.pattern}/", judge)


def answer_satisfies(fn: Callable[[str], Any], name: str | None = None) -> Check:
    """Passes when ``fn(answer)`` holds (its return value is read as a check's is).

    Args:
        fn: Takes the final answer's text.
        name: The check's name (default: ``answer satisfies <fn's name>``).
    """
    label = name or f"answer satisfies {getattr(fn, '__name__', 'fn')}"

    def judge(case: Case) -> Verdict:
        answer = case.answer
        if answer is None:
            return _no_answer(case)
        return verdict_of(fn(answer))

    return Check(label, judge)


def output_validates(output: Any) -> Check:
    """Passes when the final answer is a valid value of ``output`` (a pydantic model, a
    dataclass, a TypedDict or a JSON Schema dict), as ``chat.ask(..., output=)`` reads it
    (JSON, optionally in a code fence)."""
    from .._output import as_output

    spec = as_output(output)

    def judge(case: Case) -> Verdict:
        answer = case.answer
        if answer is None:
            return _no_answer(case)
        try:
            spec.parse(answer)
        except OutputValidationError as exc:
            return Verdict(False, 0.0, "; ".join(exc.errors)[:300])
        return Verdict(True, 1.0, f"a valid {spec.name}")

    return Check(f"output validates as {spec.name}", judge)


# ------------------------------------------------------------------ spending
def _under(label: str, read: Callable[[Case], float], bound: float, fmt: str) -> Check:
    if not _is_number(bound) or not float(bound) >= 0:  # numpy's numbers count; NaN does not
        raise ValueError(f"{label} needs a bound >= 0, got {bound!r}")
    bound = int(bound) if isinstance(bound, numbers.Integral) else float(bound)

    def judge(case: Case) -> Verdict:
        value = read(case)
        ok = value <= bound
        return Verdict(ok, 1.0 if ok else 0.0, f"{fmt.format(value)} (bound {fmt.format(bound)})")

    return Check(f"{label} <= {fmt.format(bound)}", judge)


def cost_under(usd: float) -> Check:
    """Passes when the chat's model requests cost at most ``usd`` dollars.

    A request whose model has no known price (``chat.record.unpriced``) makes the cost
    unknown: the case is not judged (``passed`` is ``<NA>``, the detail names the
    unpriced requests and their models), unless the priced ones alone already cost more
    than ``usd`` (it fails). Register the model's price
    (``nbagent.providers.register_model``) to judge it, or bound tokens (:func:`tokens_under`).
    """
    check = _under("cost", lambda c: c.cost_usd, usd, "${:.4f}")
    bound = check.fn

    def judge(case: Case) -> Verdict:
        verdict = bound(case)
        unpriced = case.record.unpriced if case.record is not None else 0
        if not unpriced or verdict.passed is False:
            return verdict
        models = sorted(
            {
                str(s.model)
                for s in case.record.steps  # type: ignore[union-attr]
                if s.cost_usd is None and s.error_type is None and s.model
            }
        )
        which = f" (model {', '.join(models)})" if models else ""
        return Verdict(
            None,
            None,
            f"cost unknown: {unpriced} model request(s) have no price{which}; the priced "
            f"ones cost {verdict.detail}",
        )

    return Check(check.name, judge)


def tokens_under(tokens: int) -> Check:
    """Passes when the chat used at most ``tokens`` tokens (input plus output)."""
    return _under("tokens", lambda c: c.tokens, tokens, "{:,}")


def steps_under(steps: int) -> Check:
    """Passes when the chat took at most ``steps`` steps, counted as ``max_steps`` counts
    them (a model request or a round of tool calls: a question, one tool round and the
    answer are 3 steps)."""
    return _under("steps", lambda c: c.steps, steps, "{}")


# ------------------------------------------------------------------ model-graded
JUDGE_SCHEMA: dict[str, Any] = {
    "title": "verdict",
    "type": "object",
    "properties": {
        "passed": {"type": "boolean", "description": "Whether the answer meets the criterion."},
        "reason": {"type": "string", "description": "Why, in one sentence."},
    },
    "required": ["passed", "reason"],
    "additionalProperties": False,
}


def ledger_text(case: Case) -> str:
    """The case's tool calls as the judge reads them: one line per call, its outcome."""
    lines = []
    for c in case.tool_calls:
        args = c.edited_arguments if c.edited_arguments is not None else c.arguments
        line = f"- {c.tool}({_args_text(args, 160)}): {c.status}"
        if c.decision not in ("auto", None):
            line += f", {c.decision}"
        lines.append(line)
    return "\n".join(lines) if lines else "(no tool calls)"


def judge_prompt(criterion: str, case: Case) -> str:
    """What the judge chat is asked about ``case``: the user's prompt and the final answer
    with what is shaped like a key or a password (:func:`~nbagent._secrets.redact_keys`)
    and each value the case's calls were given under a secret's name
    (:func:`_secret_texts`, as a whole token) as ``***``, and the calls as
    :func:`ledger_text` shows them. The judge is another model, often another provider's."""
    secrets = _secret_texts(case)
    return (
        "You grade an AI assistant's answer. Answer with JSON: passed (true or false) and "
        "reason.\n\n"
        f"Criterion: {criterion}\n\n"
        f"The user asked:\n{_masked_text(case.prompt, secrets) or '(no prompt)'}\n\n"
        f"What the assistant's tools did:\n{ledger_text(case)}\n\n"
        f"The assistant's final answer:\n{_masked_text(case.answer, secrets)}"
    )


def _secret_texts(case: Case) -> Masks:
    """The values the case's calls were given under a secret's name (``password``,
    ``api_key``, anything in ``credentials``; their original and edited arguments), to be
    hidden as whole tokens, as they are and as repr or JSON escape them (``C:\\vault``)."""
    given = [args for c in case.tool_calls for args in (c.arguments, c.edited_arguments)]
    return token_masks(tokens=named_values(*given))


def _masked_text(text: str | None, secrets: Masks) -> str | None:
    """``text`` with each of ``secrets`` standing as a whole token (no letter, digit or
    ``_`` right before or after it: "hunter2" is not masked in "hunter2x") and then all
    :func:`~nbagent._secrets.redact_keys` hides as ``***``."""
    if not text:
        return text
    return redact_keys(secrets.hide(text))


def judged(criterion: str, judge: Any, *, name: str | None = None) -> Check:
    """A model-graded check: a chat reads the case and says whether ``criterion`` holds.

    The judge is asked once per case with a structured answer (``passed``,
    ``reason``): the user's prompt, what each tool call did (its status and
    decision) and the final answer. Its chat is separate from the case's; its cost is
    not the case's.

    Example::

        judged("the answer tells the customer what happened to their refund",
               Chat("gpt-4.1-mini", system="You are a strict grader."))

    Args:
        criterion: What must hold, in words ("the answer is polite").
        judge: Any nbagent chat (each case is judged in a fork of it: its model,
            system prompt and history, a new chat each time; give it ``display=False``
            in a notebook, or each judgement shows in the cell), or a function making
            the judge's chat.
        name: The check's name (default: ``judged: <criterion>``).
    """
    if not isinstance(criterion, str) or not criterion.strip():
        raise ValueError("judged needs a criterion (what must hold, in words)")
    make = _judge_factory(judge)

    def grade(case: Case) -> Verdict:
        answer = case.answer
        if answer is None:
            return _no_answer(case)
        chat = make()
        chat.ask(judge_prompt(criterion, case), output=JUDGE_SCHEMA)
        return judge_verdict(chat)

    return Check(name or f"judged: {preview(criterion, 60)}", grade)


def _judge_factory(judge: Any) -> Callable[[], Any]:
    fork = getattr(judge, "fork", None)
    if callable(fork) and hasattr(judge, "record"):
        return fork
    if callable(judge) and not isinstance(judge, str):
        return judge
    raise TypeError(
        f"judge= takes a chat (forked for each case) or a function making one, got {judge!r}"
    )


def judge_verdict(chat: Any) -> Verdict:
    """The verdict a judge chat gave (its last message's structured answer)."""
    last = chat.transcript[-1] if chat.transcript else None
    parsed = getattr(last, "parsed", None)
    if not isinstance(parsed, dict) or not isinstance(parsed.get("passed"), bool):
        text = preview(str(getattr(last, "content", "")), 120)
        raise ValueError(f"the judge gave no verdict (answered {text!r})")
    reason = str(parsed.get("reason") or "")
    passed = parsed["passed"]
    return Verdict(
        passed, 1.0 if passed else 0.0, f"judge {short_id(chat.id)}: {preview(reason, 200)}"
    )
