"""``nbagent.batch`` / ``batch_async``: one chat per input, run concurrently; a DataFrame back.

``batch()`` is ``run_sync(batch_async(...))`` (one implementation). What it
does, in order:

1. the inputs become jobs (:mod:`~nbagent.batch._inputs`; bad inputs raise
   :class:`~nbagent.batch._inputs.InputError` before anything runs, a bad
   *row* fails on its own);
2. with a store, what the batch already did is read back
   (``store.batch_chats(batch_id)``): finished rows come from the store (not
   rerun), other recorded rows continue their stored chat;
3. the backend runs the rest (:mod:`~nbagent.batch._backend`), the progress
   display follows (:mod:`~nbagent.batch._display`);
4. it returns once every row is ``done``, ``failed`` or ``awaiting_approval``.

**Rows awaiting approval** (see ``wait_for_decisions``). A cell that blocks
never receives a click, so in a notebook ``batch()`` returns while rows wait
for decisions, and keeps their continuation alive on its event loop (the
kernel's for ``await batch_async``, nbagent's background loop for
``batch()``): when a decision arrives (the inbox, ``chat.approve``,
``store.approve`` from anywhere) the row's chat continues by itself, the
progress widget stays live, and :func:`batch_results` gives the fresh frame.
Outside a notebook nothing keeps running after the call returns, so the
parked rows stay parked (in the store: rerunning the batch continues them);
``wait_for_decisions=`` blocks until they are decided elsewhere.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import inspect
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any, Literal

from .._aio import run_sync
from .._config import positive_int, seconds
from .._notice import in_kernel, notice
from .._optional import require
from .._unicode import clean
from ..otel import attached, carrier, run_span
from ._backend import Backend, Job, RowResult, RunSpec
from ._backends import get_backend
from ._display import ProgressDisplay, make_display
from ._inputs import InputError, batch_id_of, input_index, jobs_from
from ._local import one_line
from ._run import BatchRun, active_run, get_run, run_of


def takes_row(make_chat: Callable[..., Any]) -> bool:
    """Whether ``make_chat`` takes the row: a required positional parameter, one named
    ``row`` (``def make_chat(row=None)``) or ``*args``; a defaulted parameter with any
    other name is a setting the factory keeps. The one rule for every factory of rows
    (``nbagent.batch``, ``nbagent.evaluate``, ``sweep``).

    Raises:
        TypeError: Not callable, or more than one required parameter."""
    if not callable(make_chat):
        raise TypeError(
            f"make_chat must be callable (a function returning a Chat), got {make_chat!r}"
        )
    try:
        params = list(inspect.signature(make_chat).parameters.values())
    except (TypeError, ValueError):
        return False
    positional = [
        p
        for p in params
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)
    ]
    required = [p for p in positional if p.default is p.empty and p.kind != p.VAR_POSITIONAL]
    if len(required) > 1:
        raise TypeError(
            f"make_chat takes {len(required)} required arguments; it is called as make_chat() "
            "or make_chat(row)"
        )
    # A parameter with a default is a setting (``lambda store="x.db": ...``), not
    # the row, unless it says it is the row by its name.
    return bool(required) or any(p.kind == p.VAR_POSITIONAL or p.name == "row" for p in positional)


def _title(name: str | None) -> str:
    """The progress display's title: ``nbagent.batch`` and the batch's name, if given."""
    return f"nbagent.batch {name}" if name else "nbagent.batch"


def _stored_row(job: Job, record: Any) -> RowResult | None:
    """A row finished in an earlier run, read from its stored chat (``None``: not finished).

    Finished means the chat's last step completed and its last message is the
    model's: a chat stored without its prompt (its process died in between, or
    an earlier nbagent completed it empty) is not finished, it is asked again.
    """
    state = record.state
    last = record.messages[-1] if record.messages else None
    if (
        state.get("last_step") != "complete"
        or record.info.pending
        or not isinstance(last, dict)
        or last.get("role") != "assistant"
    ):
        return None
    content = last.get("content")
    reply = content if isinstance(content, str) and content else None
    usage = state.get("usage") or {}
    return RowResult(
        key=job.key,
        index=job.index,
        status="done",
        reply=reply,
        chat_id=record.info.id,
        calls=record.info.n_calls,
        input_tokens=int(usage.get("input_tokens", 0)),
        output_tokens=int(usage.get("output_tokens", 0)),
        cost_usd=None if state.get("unpriced") else float(state.get("cost_usd") or 0.0),
        latency_s=None,
    )


def _resume(store: Any, batch_id: str, jobs: list[Job]) -> tuple[list[Job], dict[str, RowResult]]:
    """(jobs to run, rows already finished): on a worker thread, it reads the store."""
    from ..store import BatchStore

    if not isinstance(store, BatchStore):
        raise TypeError(
            f"{type(store).__name__} cannot record batches (it has no add_batch_chat / "
            "batch_chats: nbagent.store.BatchStore), so the batch could not be resumed; "
            "use an nbagent SQLiteStore, or run without store="
        )
    recorded = store.batch_chats(batch_id)
    todo: list[Job] = []
    done: dict[str, RowResult] = {}
    for job in jobs:
        chat_id = recorded.get(job.key)
        if chat_id is None:
            todo.append(job)
            continue
        try:
            record = store.load(chat_id)  # type: ignore[attr-defined]
        except Exception as exc:
            done[job.key] = RowResult(
                job.key,
                job.index,
                "failed",
                chat_id=chat_id,
                error=f"the store records chat {chat_id} for this input but cannot load it: "
                f"{one_line(exc)}",
                error_type=type(exc).__name__,
            )
            continue
        changed = _asked_else(job, record)
        if changed is not None:
            done[job.key] = RowResult(
                job.key, job.index, "failed", error=changed, error_type="PromptChanged"
            )
            continue
        row = _stored_row(job, record)
        if row is not None:
            done[job.key] = row
        else:
            todo.append(dataclasses.replace(job, chat_id=chat_id))
    return todo, done


def _asked_else(job: Job, record: Any) -> str | None:
    """Why the stored chat of ``job``'s key is not this input's (``None``: it is).

    The batch asked it its prompt before its first step, so a chat that ran a step and
    has no user message with this prompt was asked something else: the input changed
    under the same key and batch name. Its answer is not this prompt's; continuing it
    would ask the new prompt in the old conversation. The row fails saying so (no chat
    id: nothing is read off a chat asked something else).
    """
    prompt = clean(job.prompt or "")
    if not record.state.get("last_step"):  # never ran: asked (again) as it continues
        return None
    asked = [
        m.get("content") for m in record.messages if isinstance(m, dict) and m.get("role") == "user"
    ]
    if not asked or prompt in asked:  # asked nothing yet (completed empty): asked again
        return None
    was = next((a for a in asked if isinstance(a, str)), None)
    return (
        f"the stored chat {record.info.id} of input {job.key!r} was asked {_clip(was)}, "
        f"not {_clip(prompt)} (the input changed under the same key and name=): to run "
        "this input again and keep the other rows, give it a new key (its index, or its "
        "key= column) under the same name=; another name=, or none (the default id follows "
        "every key and prompt), is a new batch, whose every row runs again, tools included"
    )


def _clip(text: str | None, limit: int = 80) -> str:
    if text is None:
        return "something else"
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")


async def batch_async(
    inputs: Any,
    make_chat: Callable[..., Any],
    *,
    prompt: str | None = None,
    key: str | None = None,
    concurrency: int = 16,
    store: Any = None,
    backend: str | Backend = "local",
    name: str | None = None,
    on_error: Literal["record", "raise"] = "record",
    wait_for_decisions: bool | float | None = None,
    progress: bool | str | None = None,
    max_rate_limit_retries: int = 8,
    poll_interval: float = 2.0,
    backend_options: dict[str, Any] | None = None,
    _display: ProgressDisplay | None = None,
    _trace: Mapping[str, str] | None = None,
    _prepare: Callable[[Any], None] | None = None,
    _approval_hint: str | None = None,
) -> Any:
    """Async twin of :func:`batch` (same arguments).

    In a notebook: ``result = await nbagent.batch_async(...)``.

    For the rest of nbagent (``evaluate``): ``_prepare`` is called with each row's chat,
    made or continued from the store, before it is driven (:attr:`RunSpec.prepare`);
    ``_approval_hint`` is one more way to decide parked rows, added to the line that
    says some await approval (``"or pass decide= to nbagent.evaluate"``).
    """
    require("pandas", "nbagent.batch (its result is a DataFrame)")
    if on_error not in ("record", "raise"):
        raise ValueError(f"on_error must be 'record' or 'raise', got {on_error!r}")
    concurrency = positive_int(concurrency, "concurrency")
    poll_interval = seconds(poll_interval, "poll_interval")
    max_rate_limit_retries = positive_int(max_rate_limit_retries, "max_rate_limit_retries", 0)
    if progress not in (None, True, False, "widget", "text"):
        raise ValueError(f"progress must be True, False, 'widget' or 'text', got {progress!r}")
    row_taken = takes_row(make_chat)
    jobs = jobs_from(inputs, prompt, key)
    unformatted = [j for j in jobs if j.error is not None]  # no prompt: no chat, no backend
    if unformatted and on_error == "raise":
        raise InputError(f"input {unformatted[0].key!r}: {unformatted[0].error}")
    batch_id = name or batch_id_of(jobs)
    runner = get_backend(backend)
    st = None
    if store is not None:
        from ..store import open_store

        st = open_store(store)
        if getattr(st, "read_only", False):  # every row would fail writing its question
            from .._errors import StoreError

            raise StoreError(
                f"batch(store=...) needs a store it can write: {st.location} was opened "
                "read_only, and a batch writes each row's chat, calls and results to it; "
                "nothing was run. Open it without read_only=True (as a user who can write "
                "it), or read an earlier run of the batch with nbagent.read_log(store)."
            )
    previous = active_run(batch_id)
    if previous is not None:  # still continuing parked rows: one driver per chat
        await _stop_once_settled(previous)
    todo = [j for j in jobs if j.error is None]
    finished = {
        j.key: RowResult(j.key, j.index, "failed", error=j.error, error_type="BatchInputError")
        for j in unformatted
    }
    if st is not None:
        todo, done = await asyncio.to_thread(_resume, st, batch_id, todo)
        finished.update(done)
    index = input_index(inputs)  # a DataFrame's or a Series's: the rows line up with them
    earlier = get_run(batch_id)
    if st is not None and earlier is not None and hasattr(runner, "live"):
        runner.live = dict(earlier.chats)  # continue these objects rather than load copies
    run = BatchRun(batch_id, jobs, st, index=index, rows=finished)
    spec = RunSpec(
        batch_id=batch_id,
        make_chat=make_chat,
        takes_row=row_taken,
        store=st,
        concurrency=concurrency,
        on_error=on_error,
        max_rate_limit_retries=max_rate_limit_retries,
        poll_interval=poll_interval,
        options=dict(backend_options or {}),
        prepare=_prepare,
    )
    if hasattr(runner, "on_chat"):
        runner.on_chat = run.add_chat

    # how many rows may run at once now: the backend's adaptive limit, if it has one
    run.progress.concurrency = lambda: getattr(getattr(runner, "limit", None), "limit", None)
    display = _display or make_display(run.progress, progress, title=_title(name))
    display.progress = run.progress
    if _display is None:
        display.show()
    run.display = display
    display.start()
    # tracing (nbagent.instrument()): one span around the run; the rows' chats are its
    # children, here (the rows' tasks inherit it) or on a Ray worker (carried in the spec)
    with (
        attached(_trace),
        run_span(
            "nbagent.batch", {"nbagent.batch.id": batch_id, "nbagent.batch.rows": len(jobs)}
        ) as carried,
    ):
        if carried:
            spec = dataclasses.replace(spec, trace=carried)
        run.start(runner.run(todo, spec, run.update))
        try:
            await run.wait_settled()
            if wait_for_decisions is not None and wait_for_decisions is not False and not run.final:
                timeout = None if wait_for_decisions is True else float(wait_for_decisions)
                await run.wait_final(timeout)
        except BaseException:
            await run.stop()
            raise
        keep = not run.final and wait_for_decisions is not False and in_kernel()
        if not keep and not run.final:
            # stop watching the parked rows, but not a row in flight: a continuation
            # already running (an approved call) settles first, and the frame says so
            await _in_flight_settled(run)
            if not run.final:
                await run.stop()  # (no await before it cancels: none starts meanwhile)
        also = f"; {_approval_hint}" if _approval_hint else ""
        waits = await _waits(run, st) if not run.final else _Waits()
        if keep:
            run.progress.parked_hint = True  # the bar says it, with the live count
            if type(display) is ProgressDisplay and waits.rows:  # progress=False: no bar
                notice(
                    f"{waits.words()}; they continue by themselves once {waits.verb()} "
                    "(nbagent.inbox(result), chat.approve, store.approve); "
                    "nbagent.batch_results(result, wait=60) gives the frame once they have "
                    f"finished{also}"
                )
            display.tick()
        elif not run.final:
            if st is not None:
                how = "rerun the batch with the same store to continue them" + (
                    f" once {waits.verb()}" if waits.undecided else ""
                )
            else:
                how = (
                    f"{waits.verb('decide', 'answer')} them (chat.approve / chat.deny, "
                    "chat.answer) and continue each chat, or run the batch with a store"
                    if waits.undecided
                    else "continue each chat (chat.complete()), or run the batch with a store"
                )
            if wait_for_decisions is None:
                how += " (or pass wait_for_decisions=seconds)"
            elif wait_for_decisions is not False:
                how += f" (wait_for_decisions={wait_for_decisions!r} ran out first)"
            # False: the caller chose not to hear of them; none parked: nothing to say
            if wait_for_decisions is not False and waits.rows:
                notice(f"{waits.words()}; {how}{also}")
        elif run.final:
            display.stop(final=True)
        if not keep:
            await display.stopped()
        return run.frame()


async def _in_flight_settled(run: BatchRun) -> None:
    """Until no row of ``run`` is running (a continuation after a decision, its approved
    call running), or the run ended. Returns with no await after the last look, so the
    caller can stop the run before another continuation starts."""
    while run.running and not run.final and run.progress.snapshot().counts["running"]:
        await asyncio.sleep(0.05)


async def _stop_once_settled(run: BatchRun) -> None:
    """Stop ``run``, an earlier run of this batch still watching its parked rows (the batch
    cell run again in a notebook), once no row of it is running: a row continuing after a
    decision, its approved call running, settles first (its call runs to its end, once),
    as :func:`_in_flight_settled` lets it in a script. Stopped at once, the call was
    cancelled while it ran and never finished. The last look and the stop are made on the
    run's own loop with no await between them, so no continuation starts there in between:
    a row decided but not yet continuing stays parked, and the new run continues it (its
    call runs once, in one of the two runs)."""

    async def there() -> None:
        await _in_flight_settled(run)
        await run.stop()

    loop = run._loop
    if loop is None or loop.is_closed() or not loop.is_running():
        await run.stop_anywhere()
        return
    running = run.progress.snapshot().counts["running"]
    if running:
        notice(
            f"waiting for {running} row(s) of this batch's earlier run, continuing after a "
            "decision, to settle before this run takes its rows over (their calls are not "
            "cancelled)"
        )
    if loop is asyncio.get_running_loop():
        await there()
    else:
        await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(there(), loop))


@dataclasses.dataclass
class _Waits:
    """What a batch's parked rows wait for, as counted when it returns."""

    approvals: int = 0  # a call awaiting a decision
    inputs: int = 0  # only inputs awaiting an answer (an external tool's result, ask_user)
    decided: int = 0  # nothing: decided or answered, not continued yet

    @property
    def rows(self) -> int:
        return self.approvals + self.inputs + self.decided

    @property
    def undecided(self) -> bool:
        return bool(self.approvals or self.inputs)

    def verb(self, decide: str = "decided", answer: str = "answered") -> str:
        if self.approvals and self.inputs:
            return f"{decide} or {answer}"
        return answer if self.inputs else decide

    def words(self) -> str:
        said = []
        if self.approvals:
            said.append(f"{self.approvals} row(s) await approval")
        if self.inputs:
            said.append(
                f"{self.inputs} row(s) await an input (an external tool's result, "
                "ask_user's answer)"
            )
        if self.decided:
            said.append(f"{self.decided} row(s) were decided but not continued")
        return ", ".join(said)


async def _waits(run: BatchRun, store: Any) -> _Waits:
    """What ``run``'s parked rows wait for: read from the store (decisions made elsewhere
    are there), else off the row's live chat, else its count of undecided calls."""
    parked = [r for r in run.rows.values() if r.status == "awaiting_approval"]

    def count() -> _Waits:
        waits = _Waits()
        stored: tuple[Counter[str], Counter[str]] | None = None
        if store is not None:  # one read of each for every row (not two per parked row)
            with contextlib.suppress(Exception):
                stored = (
                    Counter(c.chat_id for c in store.pending_approvals()),
                    Counter(i.chat_id for i in store.pending_inputs()),
                )
        for row in parked:
            approvals = inputs = None
            chat = run.chats.get(row.chat_id) if row.chat_id else None
            if stored is not None and row.chat_id:
                approvals, inputs = stored[0][row.chat_id], stored[1][row.chat_id]
            if inputs is None and chat is not None:
                with contextlib.suppress(Exception):
                    approvals = len(chat.pending_approvals)
                    inputs = len(chat.pending_inputs)
            if inputs is None or approvals is None:
                approvals, inputs = row.pending, 0  # cannot tell them apart: say approval
            if approvals:
                waits.approvals += 1
            elif inputs:
                waits.inputs += 1
            else:
                waits.decided += 1
        return waits

    if not parked:
        return _Waits()
    return await asyncio.to_thread(count)


def batch(
    inputs: Any,
    make_chat: Callable[..., Any],
    *,
    prompt: str | None = None,
    key: str | None = None,
    concurrency: int = 16,
    store: Any = None,
    backend: str | Backend = "local",
    name: str | None = None,
    on_error: Literal["record", "raise"] = "record",
    wait_for_decisions: bool | float | None = None,
    progress: bool | str | None = None,
    max_rate_limit_retries: int = 8,
    poll_interval: float = 2.0,
    backend_options: dict[str, Any] | None = None,
    _prepare: Callable[[Any], None] | None = None,
    _approval_hint: str | None = None,
) -> Any:
    """Run one chat per input, concurrently; return one result row per input.

    Example::

        df = pd.DataFrame({"title": ["Dune", "Emma"]})
        result = nbagent.batch(df, lambda: Chat("demo"), prompt="Summarise {title}")
        result[["status", "reply", "tokens", "cost_usd"]]
        nbagent.read_log(result)          # every tool call of every chat

    Args:
        inputs: A DataFrame (each row fills ``prompt``, a template like
            ``"Summarise {title}"``, or ``prompt`` names a column of prompts;
            default: the ``prompt`` column), a list of prompts, or a list of
            rows (dicts) with a ``prompt`` template.
        make_chat: Makes each input's chat: ``make_chat()`` or
            ``make_chat(row)`` (the row as a dict; for a list of prompts, the
            prompt). Give it no ``store=``: the batch attaches its own. Share one
            provider object between chats (``provider=``) so they share a
            connection pool. May raise: that row fails with the error.
        prompt: The template or column (see ``inputs``).
        key: A column (or row field) of unique values naming each input;
            default: the DataFrame's index, or the position in a list. A store
            finds each input again by its key.
        concurrency: Most chats running at once. The batch lowers it while
            the provider rate limits (halves it on a 429 that outlasted the
            SDK's own retries) and raises it back as requests go through.
        store: A store (or a SQLite path): makes the batch resumable. Each
            chat is stored as it runs; rerunning the same inputs skips rows
            already done (their rows come back from the store), continues the
            others where they stopped (a failed request, a parked approval),
            and never reruns a finished tool call.
        backend: ``"local"`` (tasks on this process's event loop) or ``"ray"``.
        name: The batch's id in the store (default: derived from the keys and
            prompts, so the same inputs find the same batch, and editing any
            prompt makes a new batch whose every row runs again, tools
            included). Name a batch whose inputs you may edit: an edited row
            given a new key then runs alone, the others come from the store.
        on_error: ``"record"`` (a failing row is recorded with its error and
            the rest go on) or ``"raise"`` (the first error stops the batch and
            is raised; finished rows are in the store).
        wait_for_decisions: What to do about rows awaiting approval. ``None``
            (default): return once every row is done, failed or awaiting
            approval; in a notebook parked rows continue by themselves when
            decided (see :func:`batch_results`). ``True``: block until every
            row is done or failed (decisions must come from elsewhere: another
            process through the store, another thread). A number: block at most
            that many seconds (a row already continuing then, its approved call
            running, finishes before the batch returns: none is cancelled).
            ``False``: return and stop watching (and say nothing of the rows left
            waiting: the frame's ``status`` says which).
        progress: ``None``/``True``: a live widget in a notebook, a text bar on
            stderr elsewhere; ``"text"``, ``"widget"``, or ``False`` (none).
        max_rate_limit_retries: Times one row is continued after a rate limit
            error before it fails with it.
        poll_interval: Accepted for compatibility; unused by the built-in
            backends: parked rows follow decisions made elsewhere through the
            store's follower (``nbagent.store.follow``: pushed by PostgreSQL,
            looked for four times a second otherwise).
        backend_options: Options of the backend (Ray: ``address``...).

    Returns:
        A DataFrame, one row per input in order (indexed like a DataFrame
        input, so ``df.join(result)`` works): ``key``, ``status`` (``done``,
        ``failed``, ``awaiting_approval``), ``reply``, ``error``, ``calls``,
        ``tokens`` (``input_tokens`` + ``output_tokens``), ``cost_usd``,
        ``latency_s`` (seconds the chat ran; approval waits excluded),
        ``pending`` (what a parked row waits for: calls awaiting a decision and inputs
        awaiting an answer, an external tool's result or ``ask_user``'s), ``chat_id``,
        ``error_type``.
        ``nbagent.read_log(result)`` reads every call of every chat;
        ``nbagent.batch_results(result)`` gives a fresh frame.

    Raises:
        InputError: Duplicate keys, an unknown column, inputs of another shape.
        TypeError: ``make_chat`` is not a factory; a store that cannot record batches.
    """
    arguments = dict(locals())  # every argument above, passed on to the one implementation
    display = None
    if in_kernel():  # displayed from the cell's own thread; redrawn from the batch's loop
        from ._progress import Progress

        display = make_display(Progress([]), progress, title=_title(name))
        display.show()
    frame = run_sync(batch_async(**arguments, _display=display, _trace=carrier()))
    if display is not None:
        display.republish()  # the counts now, in the output the saved notebook keeps
    return frame


def batch_results(result: Any, *, wait: bool | float = False) -> Any:
    """A fresh result frame of the batch ``result`` came from (rows continued since included).

    In a notebook it also brings the batch's progress output up to date in the
    running cell's messages (what a notebook saved by nbclient keeps).

    Args:
        result: A frame ``nbagent.batch`` returned (or a selection of its rows).
        wait: ``False`` (default): the rows as they are now. ``True`` or a
            number of seconds: first wait (at most that long) until every row
            is done or failed, while the batch still watches its parked rows
            (decisions already made, or made by another process or thread,
            continue them meanwhile). In a notebook, decide first (the inbox,
            ``chat.approve``), then wait: a cell that waits receives no clicks.
            In a script the batch stopped watching when it returned, so there is
            nothing to wait for: pass ``wait_for_decisions=`` to ``batch`` instead,
            or run it again with its store once the rows are decided.
    """
    run = run_of(result)
    if wait is not False and run.running and not run.final:
        timeout = None if wait is True else float(wait)
        run_sync(run.wait_final(timeout))
    if run.display is not None and in_kernel():
        run.display.republish()
    return run.frame()


__all__ = ["batch", "batch_async", "batch_results", "takes_row"]
