"""Decision sweeps: what each approval decision leads to, scored.

Each case runs once (on :func:`nbagent.batch`, gated calls left waiting by default); then
for every gated call of its first run the chat is forked (:meth:`~nbagent.Chat.fork`) with
the call approved, denied, and approved with each edit given, each fork is driven to its
answer (later gated calls decided by ``rest=``), and every branch is scored by the same
checks. A fork shares its parent's history and replay keys, and with
``Chat(replay="auto")`` the requests after the fork point are recorded: a second sweep
answers them from the recordings, so repeating it costs nothing.

:func:`compare_scorecards` lines two scorecards up (two configurations on the same cases):
the checks' verdicts side by side, and where each case's two chats first differ, read
with :func:`nbagent.compare`'s alignment by model step.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from .._chat_state import checked_edit
from .._errors import DecisionError, redacted
from .._fork import UNSET
from .._fork import plan as fork_plan
from ..batch import Backend, batch
from ..comparison import compare
from ._case import Case, record_of
from ._evaluate import (
    DECIDER,
    Decide,
    _checks,
    _secrets_of,
    cases_of,
    deciding,
    decision_of,
    holding,
    raised,
    score_cases,
)
from ._scorecard import case_labels

Edits = Mapping[str, Iterable[Mapping[str, Any]]] | Callable[[Any], Iterable[Mapping[str, Any]]]
MAX_ROUNDS = 50
"""Most rounds of decisions a branch is driven through before it is scored as it stands."""


class _Chats:
    """The chats behind a sweep's scorecard (originals and forks), by id: what
    ``read_log(card)`` reads; kept as itself when pandas copies the frame's attrs."""

    def __init__(
        self, chats: Mapping[str, Any], case_labels: tuple[dict[str, Any], Any] | None = None
    ):
        self.chats = dict(chats)
        self.case_labels = case_labels  # the cases' labels, by key (``per_case``'s index)

    def __deepcopy__(self, memo: dict[int, Any]) -> _Chats:
        return self

    def log_sources(self, chat_ids: Sequence[str] | None = None) -> list[Any]:
        ids = list(self.chats) if chat_ids is None else chat_ids
        return [self.chats[c] for c in dict.fromkeys(ids) if isinstance(c, str) and c in self.chats]


RULE = "rule"
"""Who decided a call a chat's rule decided (the record's ``decided_by``)."""


NO_DECISION = ("auto", "none")
"""A call's ``decision`` when no one was asked: it needed none (``auto``), or it was gated
and answered before anyone could decide it (``none``: arguments its schema refused, a call
over the limit): no decision to try otherwise, so no branch."""


def _asked(case: Case) -> list[Any]:
    """The calls of the case's chat that asked for an approval (or a rule decided), in
    request order."""
    return [
        c
        for c in case.tool_calls
        if c.call_id
        and (c.decided_by == RULE or (c.requires_approval and c.decision not in NO_DECISION))
    ]


def gated_calls(case: Case) -> list[Any]:
    """The calls of the case's chat a sweep branches on: those that asked for an approval,
    in request order, less those a chat's rule decided (a rule's decision is final: a
    deny rule's call never runs, in a fork either; :func:`branches_of` scores it as run)."""
    return [c for c in _asked(case) if c.decided_by != RULE]


def _edits_for(edits: Edits | None, call: Any) -> list[dict[str, Any]]:
    if edits is None:
        return []
    given = edits(call) if callable(edits) else edits.get(call.tool, ())
    return [dict(e) for e in (given or ())]


def settle(chat: Any, rest: Decide) -> Any:
    """Drive ``chat`` to an answer, deciding each gated call it asks for by ``rest``
    (``None``: leave the first waiting one and stop).

    Raises:
        Exception: What ``rest`` raised (the calls decided before it stand)."""
    for _ in range(MAX_ROUNDS):
        pending = list(chat.pending_approvals)
        if pending:
            if rest is None:
                return chat
            for call in pending:
                said = decision_of(rest, call)
                if said is None:
                    return chat
                verdict, reason = said
                try:
                    if verdict == "approved":
                        chat.approve(call, reason=reason, by=DECIDER)
                    else:
                        chat.deny(call, reason=reason, by=DECIDER)
                except DecisionError:  # decided meanwhile (a rule): that decision stands
                    pass
        chat.complete()
        if not chat.pending_approvals:
            return chat
    return chat


Branch = tuple[str, str, dict[str, Any] | None]
"""A fork to make: (branch name, call id, the fork's change); ``None``: the case as run
already took that decision (its chat is the branch)."""


def branches_of(case: Case, edits: Edits | None, chat: Any = None) -> list[Branch]:
    """The forks to make of a case (see :data:`Branch`).

    With ``chat`` (the case's chat), every fork is checked first, as ``chat.fork`` checks
    it, creating nothing: an edit against its tool's schema and the chat's deny rules (as
    an approval's edit is), a decision against what the call went through. A sweep refuses
    a fork that cannot be made before any branch runs. An edit that gives the call the
    arguments it has is the approve branch again. A call a chat's rule decided is not
    branched (no fork overrules a rule): it is one branch, ``"deny <tool> by rule"`` (or
    ``"approve ... by rule"``), the case as it ran.

    Raises:
        DecisionError: A fork that cannot be made: an edit the tool or a deny rule refuses
            (naming the case, the branch and the edit), a decision the call cannot take.
    """
    out: list[Branch] = []
    seen: dict[str, int] = {}
    for call in _asked(case):
        n = seen[call.tool] = seen.get(call.tool, 0) + 1
        label = call.tool if n == 1 else f"{call.tool}#{n}"
        if call.decided_by == RULE:  # final: one branch, the case as it ran
            word = "approve" if call.decision == "approved" else "deny"
            out.append((f"{word} {label} by rule", call.call_id, None))
            continue
        approve = f"approve {label}"
        for verdict, word in (("approved", "approve"), ("denied", "deny")):
            same = call.decision == verdict and call.edited_arguments is None
            change = None if same else {"decision": verdict}
            if chat is not None and change is not None:
                _plannable(chat, case, f"{word} {label}", call.call_id, change)
            out.append((f"{word} {label}", call.call_id, change))
        base = call.arguments if isinstance(call.arguments, dict) else {}
        for i, args in enumerate(_edits_for(edits, call), start=1):
            name, merged = f"edit {label} {i}", {**base, **args}
            if chat is not None:
                merged = _checked(chat, case, call, name, merged)
            if merged == base:  # nothing edited: what approving it does
                out.append((name, call.call_id, {"same_as": approve}))
            else:
                if chat is not None:  # the chat's deny rules, and all else a fork checks
                    _plannable(chat, case, name, call.call_id, {"arguments": merged})
                out.append((name, call.call_id, {"arguments": merged}))
    return out


def _where(case: Case, branch: str) -> str:
    return f"sweep: case {case.key!r}, branch {branch!r}"


def _checked(chat: Any, case: Case, call: Any, branch: str, arguments: dict[str, Any]) -> Any:
    """An edit's arguments as the tool accepts them (the check an approval's edit gets)."""
    where = _where(case, branch)
    tool = next((t for t in chat.tools if t.name == call.tool), None)
    if tool is None:
        raise DecisionError(f"{where}: the chat has no tool {call.tool!r} to edit; no branch ran")
    try:
        return checked_edit(tool, call.tool, arguments)
    except DecisionError as exc:
        raise DecisionError(f"{where}: {exc} ({redacted(arguments)!r}); no branch ran") from None


def _plannable(chat: Any, case: Case, branch: str, call_id: str, change: dict[str, Any]) -> None:
    """Refuse, before any branch runs, a fork ``chat.fork(call_id, **change)`` would refuse
    once branches had run: the core's own planning of it (what ``fork`` checks, creating
    nothing): an edit a deny rule of the chat matches, a decision the call cannot take.

    Raises:
        DecisionError: Naming the case and the branch (an edit's arguments as shown: a
            secret's as ``***``), and that no branch ran.
    """
    point = {k: change.get(k, UNSET) for k in ("arguments", "decision")}
    try:
        fork_plan(
            chat,
            call_id,
            step=None,
            result=UNSET,
            **point,
            reason=None,
            system=UNSET,
            model=UNSET,
            tool_options=UNSET,
            by=DECIDER,
        )
    except ValueError as exc:  # DecisionError is one
        edit = change.get("arguments")
        shown = f" ({redacted(edit)!r})" if edit is not None else ""
        raise DecisionError(f"{_where(case, branch)}: {exc}{shown}; no branch ran") from None


def sweep(
    cases: Any,
    make_chat: Callable[..., Any],
    checks: Any = (),
    *,
    prompt: str | None = None,
    key: str | None = None,
    decide: Decide = None,
    edits: Edits | None = None,
    rest: Decide = "deny",
    backend: str | Backend = "local",
    concurrency: int = 16,
    progress: bool | str | None = None,
) -> Any:
    """Score what each approval decision leads to: every gated call approved, denied, edited.

    Example::

        card = nbagent.evaluation.sweep(
            cases, make_chat, [claims_hold(), answer_contains("refund")],
            prompt="Refund order {order_id}",
            edits={"issue_refund": [{"amount": 10}]},   # also try approving with these
        )
        card.summary()      # per branch and check

    Args:
        cases: As :func:`nbagent.evaluate` takes them.
        make_chat: Makes each case's chat. With ``Chat(replay="auto")`` (and a
            ``recordings=`` folder or a store) a second sweep is answered from the
            recordings.
        checks: As :func:`nbagent.evaluate` takes them.
        prompt: The prompt template or column.
        key: The column naming each case.
        decide: How the first run decides its gated calls (default ``None``: they
            wait, so the branches are the only answers). Its settled cases are scored
            too, as branch ``"as run"``.
        edits: Arguments to try approving a call with: ``{tool: [{...}, ...]}`` or a
            function of the call (its record) returning a list; each edit is merged
            into the call's arguments (``{"amount": 10}`` changes the amount only) and
            checked against the tool's schema and the chat's deny rules, every branch
            checked as ``chat.fork`` checks it before any branch runs
            (``DecisionError`` naming the case and the branch: nothing was forked); an
            edit that changes nothing is the approve branch again.
        rest: How each branch decides the gated calls it asks for later
            (default ``"deny"``: nothing else runs unapproved; ``"approve"``, a
            function, or ``None`` to leave them waiting). Every decision the sweep
            makes is recorded with ``by="evaluate"`` (it teaches
            :func:`~nbagent.suggest_policies` nothing), and once it is over the first
            run's calls left waiting are denied there (its scaffolding: no inbox
            shows them).
        backend: Where the first run's chats run (``"local"``, ``"ray"``); forks are
            made and driven in this process.
        concurrency: Most first-run chats at once.
        progress: The first run's progress display.

    Returns:
        A scorecard (see :func:`nbagent.evaluate`) with ``branch`` set: one row per
        case, branch and check. ``nbagent.read_log(card)`` reads every branch's calls.
    """
    checks = _checks(checks)
    factory, held = holding(make_chat)  # its chats held while the sweep forks them
    result = batch(
        cases,
        factory,
        prompt=prompt,
        key=key,
        concurrency=concurrency,
        backend=backend,
        progress=progress,
        wait_for_decisions=False,  # the waiting calls are forked, never decided in place
        _prepare=deciding(decide, held.errors),
    )
    run = result.attrs["nbagent_batch"]
    firsts = [
        (case, case.chat if case.chat is not None else run.chats.get(case.chat_id))
        for case in cases_of(result, errors=held.errors)
    ]
    try:
        planned = [  # every edit checked before any branch runs
            (case, chat, branches_of(case, edits, chat) if chat is not None else [])
            for case, chat in firsts
        ]
        scored, chats = _run_branches(planned, decide, rest)
        card = score_cases(scored, checks)  # before retiring: a live record would show it
    finally:
        for _, chat in firsts:
            if chat is not None:
                retire(chat)
    card.attrs["nbagent_batch"] = _Chats(chats, case_labels(run))
    return card


def _run_branches(
    planned: Sequence[tuple[Case, Any, list[Branch]]], decide: Decide, rest: Decide
) -> tuple[list[Case], dict[str, Any]]:
    """Each case's branches as cases to score (forks made and settled), and every chat."""
    scored: list[Case] = []
    chats: dict[str, Any] = {}
    for case, chat, made in planned:
        if chat is None:
            scored.append(case)  # no chat to fork (it failed before one was made)
            continue
        chats[chat.id] = chat
        if case.status == "done" and decide is not None:
            scored.append(dataclasses.replace(case, branch="as run"))
        if not made:
            scored.append(dataclasses.replace(case, branch="no gated call"))
        done: dict[str, Case] = {}
        for name, call_id, change in made:
            if change is None:  # the run took this decision itself
                branch = dataclasses.replace(case, branch=name)
            elif "same_as" in change:  # an edit that changes nothing: that branch again
                branch = dataclasses.replace(done[change["same_as"]], branch=name)
            else:
                fork = chat.fork(call_id, **change, by=DECIDER)
                chats[fork.id] = fork
                broke = None
                try:
                    settle(fork, rest)
                except Exception as exc:  # rest= raised: this branch's error, the rest go on
                    broke = raised("rest=", exc, _secrets_of(fork))
                record, live = record_of(fork)
                status = "awaiting_approval" if fork.pending_approvals else "done"
                branch = dataclasses.replace(
                    case,
                    branch=name,
                    record=record,
                    chat=live,
                    chat_id=fork.id,
                    status="failed" if broke else status,
                    error=broke or case.error,
                    driver_error=broke or case.driver_error,
                )
            done[name] = branch
            scored.append(branch)
    return scored, chats


RETIRED = "decision sweep: this call's decisions are tried in forks of this chat, not here"
"""The reason a sweep's first-run calls left waiting are denied with."""


def retire(chat: Any) -> None:
    """Deny (by ``evaluate``) the calls a sweep's first run left waiting, once the sweep is
    over (or stopped): they are its scaffolding, not work waiting for someone (an inbox, a
    store's ``pending_approvals``); a denial runs nothing and teaches ``suggest_policies``
    nothing. The forks keep every branch's own decisions."""
    for call in list(chat.pending_approvals):
        with contextlib.suppress(DecisionError):  # decided meanwhile: that decision stands
            chat.deny(call, reason=RETIRED, by=DECIDER)


_ALIGNED_FIELDS = ("text", "stop_reason", "prompt", "model")


def compare_scorecards(a: Any, b: Any, names: Sequence[str] = ("a", "b")) -> Any:
    """Two scorecards of the same cases and checks side by side, with where the runs differ.

    Args:
        a: A scorecard (:func:`nbagent.evaluate` or :func:`sweep`) of one configuration.
        b: One of another configuration (another model, prompt, policy) on the same cases.
        names: What to call the two in the columns: a list of two different names.

    Returns:
        A DataFrame, one row per (case, branch, check) in either: ``passed_<a>``,
        ``passed_<b>``, ``changed`` (the verdicts differ), ``chat_id_<a>``,
        ``chat_id_<b>``, and ``first_difference``: the first model step where the two
        chats differ in text, calls, decisions or results (``"step 2: call 1
        decision"``), read with :func:`nbagent.compare`'s alignment; ``None`` when the
        runs agree. The chats of a resumed evaluation, read back from its store, are
        loaded from it for this (as its batch continues one) and closed after.

    Raises:
        TypeError: ``a`` or ``b`` is not a DataFrame (a chat, a list), or ``names`` is
            not a list of names.
        ValueError: ``a`` or ``b`` is a DataFrame without a scorecard's columns (a
            batch's results, an empty one), or ``names`` is not two different names.
    """
    import pandas as pd

    na, nb = _two_names(names)
    keys = ["case", "branch", "check"]
    _check_scorecard(a, "a", pd)
    _check_scorecard(b, "b", pd)
    left = a[[*keys, "passed", "chat_id"]].copy()
    right = b[[*keys, "passed", "chat_id"]].copy()
    for df in (left, right):
        df["branch"] = df["branch"].fillna("")
    merged = left.merge(right, on=keys, how="outer", suffixes=(f"_{na}", f"_{nb}"))
    order = {k: i for i, k in enumerate(dict.fromkeys(
        [*zip(*(left[k] for k in keys), strict=True), *zip(*(right[k] for k in keys), strict=True)]
    ))}  # fmt: skip
    rank = [order[k] for k in zip(*(merged[k] for k in keys), strict=True)]
    merged = merged.iloc[sorted(range(len(merged)), key=rank.__getitem__)].reset_index(drop=True)
    merged["branch"] = merged["branch"].replace("", pd.NA).astype("string")
    pa, pb = merged[f"passed_{na}"], merged[f"passed_{nb}"]
    merged["changed"] = (pa.fillna(False) != pb.fillna(False)) | (pa.isna() != pb.isna())
    loaded: list[Any] = []
    try:
        sources_a, sources_b = _sources(a, loaded), _sources(b, loaded)
        firsts: dict[tuple[Any, Any], str | None] = {}
        for ca, cb in zip(merged[f"chat_id_{na}"], merged[f"chat_id_{nb}"], strict=True):
            if (ca, cb) in firsts:
                continue
            chat_a, chat_b = sources_a.get(ca), sources_b.get(cb)
            both = chat_a is not None and chat_b is not None
            firsts[(ca, cb)] = _first_difference(chat_a, chat_b) if both else None
    finally:
        for chat in loaded:
            with contextlib.suppress(Exception):
                chat.close()
    merged["first_difference"] = pd.array(
        [firsts[(x, y)] for x, y in zip(merged[f"chat_id_{na}"], merged[f"chat_id_{nb}"],
                                         strict=True)],
        dtype="string",
    )  # fmt: skip
    return merged


_SCORECARD = ("case", "branch", "check", "passed", "chat_id")


def _two_names(names: Any) -> tuple[str, str]:
    """``names`` as two different strings, or a one-line error saying what to pass."""
    if isinstance(names, str | bytes) or not isinstance(names, Iterable):
        raise TypeError(
            f"names: two names as a list (names=['old', 'new']), got {type(names).__name__} "
            f"{names!r}"
        )
    given = [str(n) for n in names]
    if len(given) != 2:
        raise ValueError(f"names: two names, one per scorecard, got {len(given)}: {given}")
    if given[0] == given[1]:
        raise ValueError(f"names must differ, got {given}")
    return given[0], given[1]


def _check_scorecard(card: Any, which: str, pd: Any) -> None:
    """``card`` is a scorecard (what ``evaluate`` and ``sweep`` return), or a one-line
    error saying what it is and what to pass."""
    what = "pass what nbagent.evaluate or sweep returns"
    if not isinstance(card, pd.DataFrame):
        kind = type(card).__name__
        if hasattr(card, "events") and hasattr(card, "fork"):
            raise TypeError(
                f"{which}: compare_scorecards takes scorecards, got a chat ({kind}); score "
                "chats with nbagent.evaluate(cases, make_chat, checks), or compare two chats "
                "with nbagent.compare(chat_a, chat_b)"
            )
        raise TypeError(f"{which}: compare_scorecards takes scorecards, got a {kind}; {what}")
    missing = [c for c in _SCORECARD if c not in card.columns]
    if not missing:
        return
    if len(card.columns) == 0:
        raise ValueError(f"{which}: an empty DataFrame is not a scorecard; {what}")
    if {"key", "reply", "chat_id"} <= set(card.columns):
        raise ValueError(
            f"{which}: a batch's results, not a scorecard (no {', '.join(missing)}); score "
            "the chats with nbagent.evaluate(cases, make_chat, checks) instead"
        )
    raise ValueError(f"{which}: not a scorecard, it has no {', '.join(missing)} column(s); {what}")


def _sources(card: Any, loaded: list[Any]) -> dict[str, Any]:
    """The chats behind a scorecard, by id: the live ones, else (a resumed evaluation's,
    read back from its store) loaded from the store, each added to ``loaded`` to close."""
    run = card.attrs.get("nbagent_batch")
    held = card.attrs.get("nbagent_chats")
    ids = [c for c in card["chat_id"].dropna().unique()]
    found = [*run.log_sources(ids)] if run else []
    out = {}
    for source in [*found, *(held.chats if held is not None else ())]:
        if hasattr(source, "fork") and hasattr(source, "events"):
            out[source.id] = source
    store = getattr(run, "store", None)
    if held is None or store is None or not hasattr(run, "jobs"):
        return out
    rows = {j.key: j.row for j in run.jobs}
    cases = dict(zip(card["chat_id"], card["case"], strict=True))
    for chat_id in ids:
        if chat_id not in out:
            chat = held.load(chat_id, store, rows.get(cases.get(chat_id)))
            if chat is not None:
                loaded.append(chat)
                out[chat_id] = chat
    return out


def _first_difference(a: Any, b: Any) -> str | None:
    diff = compare(a, b, names=["a", "b"], display=False)
    for step, field in zip(diff["step"], diff["field"], strict=True):
        f = str(field)
        if f in _ALIGNED_FIELDS or f.startswith("call "):
            return f"step {step}: {f}"
    return None
