"""evaluate: run every case on ``nbagent.batch``, apply the checks, return the scorecard.

The cases run as one batch (locally or on Ray, resumable with a store: the batch is the
only runner); each finished row becomes a :class:`~nbagent.evaluation.Case` read off its
chat's record, and every check judges every case (:func:`score`, usable on any batch
result).
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import Any

from .._errors import DecisionError, provider_secrets, scrub
from .._html import clip
from .._types import ToolCall
from ..batch import Backend, batch, batch_async, takes_row
from ._case import Case, record_of
from ._checks import EmptyCell, Verdict, check_name, exception_text, verdict_of
from ._scorecard import ANSWER_CHARS, empty_rows, make_scorecard

ELSEWHERE = "driven_elsewhere"
"""A case's status when another process drives (or started) its chat now: the same stored
evaluation run twice at once. Its checks are not judged here (that process scores it)."""
_ELSEWHERE_ERRORS = ("DrivenElsewhere", "BatchConflict")
"""The batch's ``error_type`` of a row another process drives or started first."""

DECIDER = "evaluate"
"""Who decided a gated call when ``decide=`` did (the decision's ``by``)."""

Decide = str | Callable[[ToolCall], Any] | None


def decision_of(decide: Decide, call: ToolCall) -> tuple[str, str | None] | None:
    """What ``decide`` says about ``call``: ``(verdict, reason)``, or ``None`` (leave it)."""
    said = decide(call) if callable(decide) else decide
    reason = None
    if isinstance(said, tuple) and len(said) == 2:
        said, reason = said
    if said is None:
        return None
    if said is True or said in ("approve", "approved"):
        return "approved", reason
    if said is False or said in ("deny", "denied"):
        return "denied", reason
    raise ValueError(
        f"decide= must say 'approve', 'deny' (True/False), (verdict, reason) or None; got {said!r}"
    )


_WIRED: weakref.WeakKeyDictionary[Any, Callable[[Any], None]] = weakref.WeakKeyDictionary()
"""The ``decide=`` handler each chat has: a chat an earlier evaluation in this process
prepared (and this one continues) decides by this evaluation's ``decide=`` only."""


def raised(what: str, exc: BaseException, secrets: Iterable[str | None] = ()) -> str:
    """One line saying ``what`` (``decide=``, ``rest=``) raised ``exc``, scrubbed of key-like
    tokens, URL credentials and ``secrets`` (the chat's provider's)."""
    text = exception_text(exc)
    return scrub(f"{what} raised {type(exc).__name__}: {text}", secrets)[:500]


def approval_hint(decide: Decide) -> str:
    """What the batch's "rows await approval" (or "await an input") line adds: pass
    ``decide=``, or (it was passed) that it left those calls undecided; either way that
    ``decide=`` answers no input (``ask_user``'s answer, an external tool's result: a
    person's), so a row waiting for one never heard of ``decide=``."""
    inputs = (
        "an input (ask_user's answer, an external tool's result) waits for a person "
        "(chat.answer, nbagent.inbox(result)): decide= does not answer it"
    )
    if decide is None:
        return f"or pass decide= to nbagent.evaluate to decide gated calls as they come; {inputs}"
    return (
        f"decide= decides gated calls only, and {inputs}; gated calls still waiting: decide= "
        "left them undecided (it returned None, or raised: the scorecard's error column says "
        "what)"
    )


def deciding(decide: Decide, errors: dict[str, str] | None = None) -> Callable[[Any], None] | None:
    """What prepares each chat of an evaluation (the batch's ``RunSpec.prepare``): its
    gated calls decided by ``decide`` as they are asked, and those already waiting in a
    chat continued from the store (an earlier run with no ``decide=``) decided at once.

    A decision is the chat's own (``chat.approve`` / ``chat.deny``, ``by="evaluate"``),
    so the record, the store and the view show it like any other, and the approved call
    runs exactly once when the batch drives the chat (a store's claim sees to it). A call
    decided meanwhile (a rule, another process) keeps that decision.

    A ``decide`` that raises (or says what is no decision) leaves the call waiting (nothing
    runs) and is kept in ``errors`` by chat id: the case's error (:attr:`Case.driver_error`),
    in this process (a chat driven on Ray keeps its call waiting, with a warning there).
    """
    if decide is None:
        return None
    if not callable(decide):
        decision_of(decide, None)  # type: ignore[arg-type]  # a bad word fails before anything runs

    def settle_one(chat: Any, call: ToolCall) -> None:
        try:
            said = decision_of(decide, call)
        except Exception as exc:
            if errors is None:
                raise
            errors.setdefault(chat.id, raised("decide=", exc, _secrets_of(chat)))
            return
        if said is None:
            return
        verdict, reason = said
        with contextlib.suppress(DecisionError):  # decided meanwhile: that decision stands
            if verdict == "approved":
                chat.approve(call, reason=reason, by=DECIDER)
            else:
                chat.deny(call, reason=reason, by=DECIDER)

    def prepare(chat: Any) -> None:
        from .._events import ApprovalRequested

        def on_request(event: Any) -> None:
            settle_one(chat, event.call)

        earlier = _WIRED.get(chat)
        if earlier is not None:
            chat.off(earlier)
        chat.on(ApprovalRequested, on_request)
        _WIRED[chat] = on_request
        for call in list(chat.pending_approvals):  # waiting since an earlier run
            settle_one(chat, call)

    return prepare


class Held:
    """The chats an evaluation made, held with its scorecard (``attrs["nbagent_chats"]``):
    a batch lets a done row's chat go unless someone holds it, and an evaluation's chats
    are what its user opens, forks (:func:`~nbagent.evaluation.sweep`) and compares
    (:func:`~nbagent.evaluation.compare_scorecards`). It also knows the factory: a chat
    read back from a store says which tools it called, not which it had
    (:attr:`Case.tools <nbagent.evaluation.Case.tools>`)."""

    def __init__(self, make_chat: Callable[..., Any] | None = None) -> None:
        self.chats: list[Any] = []
        self.make_chat = make_chat
        self._takes_row = make_chat is not None and takes_row(make_chat)
        self._tools: dict[Any, tuple[str, ...]] = {}
        self.errors: dict[str, str] = {}  # chat id -> what decide= raised for it

    def make(self, row: Any) -> Any:
        """A chat of the factory for ``row`` (given the row when it takes one), not held."""
        assert self.make_chat is not None
        return self.make_chat(row) if self._takes_row else self.make_chat()

    def keep(self, chat: Any) -> Any:
        self.chats.append(chat)
        return chat

    def live(self) -> dict[str, Any]:
        """The chats it holds, by id."""
        return {c.id: c for c in self.chats}

    def load(self, chat_id: str, store: Any, row: Any) -> Any:
        """A chat of this evaluation its batch let go, loaded from ``store`` as the batch
        continues one (the class ``load`` of a chat the factory makes, with its provider
        and tools), for reading (:func:`~nbagent.evaluation.compare_scorecards`); close
        it after. ``None`` when it cannot be (no factory, no store, a load that fails)."""
        if self.make_chat is None or store is None:
            return None
        try:
            template = self.make(row)
            return type(template).load(
                chat_id,
                store=store,
                tools=[*template.known_tools, *template.hosted_tools],
                provider=template.provider,
                display=False,
            )
        except Exception:
            return None

    def tools_for(self, row: Any) -> Callable[[], tuple[str, ...]] | None:
        """The names of the tools a chat of the factory has (for this row), asked when
        first needed: one chat made per row for a factory taking the row, else one."""
        if self.make_chat is None:
            return None

        def names() -> tuple[str, ...]:
            key = repr(row) if self._takes_row else None
            if key not in self._tools:
                found: tuple[str, ...] = ()
                with contextlib.suppress(Exception):  # a factory that fails now: the called
                    chat = self.make(row)
                    found = tuple(t.name for t in chat.known_tools)  # asks no MCP server
                self._tools[key] = found
            return self._tools[key]

        return names

    def __deepcopy__(self, memo: dict[int, Any]) -> Held:  # pandas copies attrs deeply
        return self


def holding(make_chat: Callable[..., Any]) -> tuple[Callable[..., Any], Held]:
    """``make_chat``, each chat it makes held."""
    held = Held(make_chat)
    if held._takes_row:
        return (lambda row: held.keep(held.make(row))), held
    return (lambda: held.keep(held.make(None))), held


def _checks(checks: Any) -> list[Any]:
    if isinstance(checks, str | bytes):
        raise TypeError(
            f"checks: a list of checks (functions taking a case), got the text {checks!r}; "
            "e.g. [nbagent.evaluation.answer_contains('delivered')]"
        )
    if callable(checks):
        checks = [checks]
    checks = list(checks)
    for c in checks:
        if not callable(c):
            raise TypeError(f"a check is a function taking a case, got {c!r}")
    names = [check_name(c) for c in checks]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(
            f"two checks are named {', '.join(map(repr, twice))}: give one a name "
            "(nbagent.evaluation.Check(name, fn))"
        )
    return checks


_HELD: weakref.WeakKeyDictionary[Any, Held] = weakref.WeakKeyDictionary()
"""The chats and factory of each batch run an evaluation made (while the run lives), so
``score(nbagent.batch_results(card), checks)`` reads what ``evaluate`` read."""


def cases_of(
    result: Any,
    *,
    branch: str | None = None,
    errors: dict[str, str] | None = None,
    make_chat: Callable[..., Any] | None = None,
) -> list[Case]:
    """Each row of a batch result as a :class:`Case` (its inputs, its chat's record);
    ``errors``: what ``decide=`` raised, by chat id (default: the evaluation's);
    ``make_chat``: the batch's factory, asked which tools a chat had (default: the
    evaluation's)."""
    run = result.attrs.get("nbagent_batch") if hasattr(result, "attrs") else None
    if run is None or isinstance(run, str) or not hasattr(run, "jobs"):
        raise TypeError("not a batch result: pass the DataFrame nbagent.batch(...) returned")
    jobs = {j.key: j for j in run.jobs}
    held = _HELD.get(run)
    live = held.live() if held is not None else {}
    if errors is None:
        errors = held.errors if held is not None else {}
    tools_of = Held(make_chat) if make_chat is not None else held
    out = []
    for rec in result.to_dict("records"):
        key = str(rec["key"])
        job = jobs.get(key)
        chat_id = rec.get("chat_id")
        chat_id = chat_id if isinstance(chat_id, str) else None
        record, chat = None, None
        if chat_id is not None:
            held_chat = live.get(chat_id)  # a batch with a store lets a done row's chat go
            sources = [held_chat] if held_chat is not None else run.log_sources([chat_id])
            record, chat = record_of(sources[0] if sources else None)
        made = tools_of.tools_for(job.row) if tools_of is not None and job is not None else None
        error = rec.get("error")
        broke = errors.get(chat_id) if chat_id is not None else None
        status = str(rec["status"])
        if status == "failed" and rec.get("error_type") in _ELSEWHERE_ERRORS:
            status = ELSEWHERE
        out.append(
            Case(
                key=key,
                row=_row_of(job),
                prompt=job.prompt if job is not None else None,
                status="failed" if broke else status,
                chat_id=chat_id,
                record=record,
                error=broke or (error if isinstance(error, str) else None),
                chat=chat,
                branch=branch,
                made_tools=made if chat is None else None,
                driver_error=broke,
            )
        )
    return out


def _row_of(job: Any) -> dict[str, Any]:
    """A job's input fields: a row's columns, or ``{"prompt": ...}`` for a list of prompts."""
    row = getattr(job, "row", None)
    if isinstance(row, dict):
        return dict(row)
    return {"prompt": row} if row is not None else {}


def judge_case(check: Any, case: Case) -> tuple[Verdict, str | None]:
    """One check of one case: its verdict, or the error it raised (as one line).

    A case that did not run (:attr:`Case.ran`) fails every check, which is not asked: a
    chat that never ran called no tool and spent nothing, and passing ``tool_not_called``
    or ``cost_under`` for it would count a broken case as a good one.
    """
    if case.driver_error is not None:  # the evaluation broke, not the agent: not judged
        return Verdict(None, None, "not judged"), scrub(case.driver_error, _secrets_of(case.chat))
    if case.status == ELSEWHERE:  # another process runs it and scores it there
        return Verdict(None, None, f"not judged here: {case.error or ELSEWHERE}"), None
    if not case.ran:
        return Verdict(False, 0.0, f"the case did not run ({case.error or case.status})"), None
    try:
        verdict = verdict_of(check(case))
        if verdict.detail:  # a check's own text may quote what it read (a key, a DSN)
            verdict = replace(verdict, detail=scrub(verdict.detail, _secrets_of(case.chat)))
        return verdict, None
    except EmptyCell as exc:  # no expectation in this row: nothing to judge
        return Verdict(None, None, str(exc)), None
    except Exception as exc:  # its text may not read either: the scorecard still comes back
        text = _first_line(exc)
        error = f"{type(exc).__name__}: {text}"
        return Verdict(None, None, ""), scrub(error, _secrets_of(case.chat))[:500]


def _first_line(exc: BaseException) -> str:
    """The first line of ``str(exc)`` (:func:`exception_text` when it cannot be read)."""
    try:
        lines = str(exc).strip().splitlines()
    except Exception:
        return exception_text(exc)
    return lines[0] if lines else ""


def _secrets_of(chat: Any) -> tuple[str, ...]:
    """The secrets of ``chat``'s provider to scrub from a check's text (none known: ())."""
    provider = getattr(chat, "provider", None) if chat is not None else None
    return provider_secrets(provider) if provider is not None else ()


def score(source: Any, checks: Any, *, make_chat: Callable[..., Any] | None = None) -> Any:
    """Apply ``checks`` to every case of a batch result (or to :class:`Case` objects).

    ``nbagent.evaluate`` runs the cases then calls this; call it yourself to score
    a batch you already ran with other checks, at no model cost.

    Args:
        source: A batch result (``nbagent.batch(...)`` or ``nbagent.batch_results(card)``)
            or a list of :class:`Case`.
        checks: The checks.
        make_chat: The batch's factory, for a plain ``nbagent.batch`` result: a chat the
            batch let go is read back from its record, which names the tools it called,
            not those it had; a chat of the factory says (``claims_hold`` needs them to
            find a claim of a tool never called, and says the tools are unknown without).
            An evaluation's own batch knows its factory already.

    Returns:
        The scorecard (see :func:`evaluate`).
    """
    checks = _checks(checks)
    if isinstance(source, list | tuple):
        cases = list(source)
    else:
        cases = cases_of(source, make_chat=make_chat)
    return score_cases(cases, checks)


def score_cases(cases: Iterable[Case], checks: Sequence[Any]) -> Any:
    """The scorecard of ``checks`` over ``cases`` (one row per case and check)."""
    rows = empty_rows()
    cases = list(cases)
    for case in cases:
        answer = case.answer
        for check in checks:
            verdict, error = judge_case(check, case)
            rows["case"].append(case.key)
            rows["branch"].append(case.branch)
            rows["check"].append(check_name(check))
            rows["passed"].append(verdict.passed)
            rows["score"].append(verdict.score)
            rows["detail"].append(verdict.detail or None)
            rows["error"].append(error)
            rows["status"].append(case.status)
            rows["answer"].append(clip(answer, ANSWER_CHARS) if answer is not None else None)
            rows["chat_id"].append(case.chat_id)
    card = make_scorecard(rows)
    card.attrs["nbagent_checks"] = len(checks)  # what a card with no rows was scored by
    if not checks:  # no rows, yet the cases ran: its headline says so
        card.attrs["nbagent_unscored"] = len(cases)
    return card


def _with_run(card: Any, result: Any, held: Held | None = None) -> Any:
    """The scorecard carrying its batch's run, as a batch result does (``read_log(card)``),
    and the chats the evaluation made."""
    card.attrs["nbagent_batch"] = result.attrs["nbagent_batch"]
    if held is not None:
        card.attrs["nbagent_chats"] = held
    return card


def _scored(result: Any, checks: Sequence[Any], held: Held) -> Any:
    """The evaluation's scorecard of its batch ``result`` (its run remembers ``held``)."""
    with contextlib.suppress(TypeError):  # a run that cannot be a weak key: no memory
        _HELD[result.attrs["nbagent_batch"]] = held
    return _with_run(score(result, checks), result, held)


def evaluate(
    cases: Any,
    make_chat: Callable[..., Any],
    checks: Any = (),
    *,
    prompt: str | None = None,
    key: str | None = None,
    decide: Decide = None,
    store: Any = None,
    backend: str | Backend = "local",
    concurrency: int = 16,
    name: str | None = None,
    progress: bool | str | None = None,
    wait_for_decisions: bool | float | None = None,
    backend_options: dict[str, Any] | None = None,
) -> Any:
    """Run each case as a chat (on :func:`nbagent.batch`), apply the checks, return a scorecard.

    Example::

        from nbagent.evaluation import answer_contains, tool_called, column

        cases = pd.DataFrame({"order_id": [41, 42], "expected": ["delivered", "lost"]})
        card = nbagent.evaluate(
            cases, make_chat,
            [tool_called("order_status", order_id=column("order_id")),
             answer_contains(column("expected"))],
            prompt="Where is order {order_id}?",
        )
        card.summary()

    Args:
        cases: What :func:`nbagent.batch` takes: a DataFrame (``prompt=`` a template
            or a column), a list of prompts, or a list of rows (dicts).
        make_chat: Makes each case's chat (``make_chat()`` or ``make_chat(row)``).
        checks: Functions taking a :class:`~nbagent.evaluation.Case` (the built-in ones
            of :mod:`nbagent.evaluation`, or your own; see
            :func:`~nbagent.evaluation.verdict_of` for what they may return).
        prompt: The prompt template or column (as in :func:`nbagent.batch`).
        key: The column naming each case (default: the index / position).
        decide: What happens to a gated call: ``None`` (default: it waits, the case
            parks as ``awaiting_approval`` and is scored as it stands), ``"approve"``,
            ``"deny"``, or a function of the :class:`~nbagent.ToolCall` returning one of
            those (or ``True``/``False``, ``(verdict, reason)``, ``None`` to leave it).
            Decisions are recorded with ``by="evaluate"``.
        store: A store (or SQLite path): the run is resumable (a rerun scores the
            stored chats and runs only what did not finish) and its chats stay
            there to open.
        backend: ``"local"`` or ``"ray"`` (as in :func:`nbagent.batch`).
        concurrency: Most cases running at once.
        name: The batch's name (its id in the store).
        progress: The batch's progress display (as in :func:`nbagent.batch`).
        wait_for_decisions: As in :func:`nbagent.batch`.
        backend_options: As in :func:`nbagent.batch`.

    Returns:
        A scorecard: a DataFrame with one row per case and check (``case``,
        ``branch``, ``check``, ``passed``, ``score``, ``detail``, ``error``,
        ``status``, ``answer``, ``chat_id``), with ``.summary()`` (per check),
        ``.plot()`` (pass rates) and ``.failures()``. ``nbagent.read_log(card)``
        reads every call of every case's chat, ``nbagent.batch_results(card)`` the
        batch's result frame.
    """
    checks = _checks(checks)
    factory, held = holding(make_chat)
    prepare = deciding(decide, held.errors)
    result = batch(
        cases,
        factory,
        prompt=prompt,
        key=key,
        concurrency=concurrency,
        store=store,
        backend=backend,
        name=name,
        wait_for_decisions=wait_for_decisions,
        progress=progress,
        backend_options=backend_options,
        _prepare=prepare,
        _approval_hint=approval_hint(decide),
    )
    return _scored(result, checks, held)


async def evaluate_async(
    cases: Any,
    make_chat: Callable[..., Any],
    checks: Any = (),
    *,
    prompt: str | None = None,
    key: str | None = None,
    decide: Decide = None,
    store: Any = None,
    backend: str | Backend = "local",
    concurrency: int = 16,
    name: str | None = None,
    progress: bool | str | None = None,
    wait_for_decisions: bool | float | None = None,
    backend_options: dict[str, Any] | None = None,
) -> Any:
    """:func:`evaluate` awaited (on :func:`nbagent.batch_async`); same arguments and result."""
    checks = _checks(checks)
    factory, held = holding(make_chat)
    prepare = deciding(decide, held.errors)
    result = await batch_async(
        cases,
        factory,
        prompt=prompt,
        key=key,
        concurrency=concurrency,
        store=store,
        backend=backend,
        name=name,
        wait_for_decisions=wait_for_decisions,
        progress=progress,
        backend_options=backend_options,
        _prepare=prepare,
        _approval_hint=approval_hint(decide),
    )
    return _scored(result, checks, held)
