"""The promise as a property: whatever the model does, a denied call never runs, an approved
call runs at most once (exactly once when the chat completes), every call ends final, every
request is valid for its API, the stored chat equals the live one, and no key leaks.

Hypothesis generates the model's behaviour (repeated or missing ids, malformed and odd JSON,
lone surrogates, deep nesting, a stream that breaks, ``max_tokens`` in the middle of a call,
tools that raise, time out or return values that cannot become text) x the wire dialect and
streaming x the concurrency mode x a store or not x decisions in any order, some of them made
through a second store connection as another process would x a new question asked after the
decisions instead of ``complete()``. Every request goes through the real SDK client to the
loopback fake server in strict mode, and every transcript answers each response's calls
right after it, in call order.

``make test`` runs 200 examples; ``NBAGENT_PROPERTY_EXAMPLES=2000`` runs more. The same
property runs with the PostgreSQL store (an eighth as many examples, every one stored, the
second connection a second ``PostgresStore``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from _provider_harness import KEY, KINDS, make_provider
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from nbagent import (
    AssistantToolCallMessage,
    BadRequestError,
    Chat,
    DecisionError,
    Event,
    PendingToolCallsError,
    ProviderError,
    Tool,
    current_tool_call,
    tool,
)
from nbagent.store import open_store
from nbagent.testing import FakeLLMServer, FakeToolCall, Turn

EXAMPLES = int(os.environ.get("NBAGENT_PROPERTY_EXAMPLES", "200"))
LONG_ENOUGH = pytest.mark.timeout(max(300, 300 * EXAMPLES // 200))
"""The suite's 300 s per test is for 200 examples; more examples get as much more time (2,000
examples stopped at the suite's 300 s, half-way, as a failure)."""

runs: Counter[str] = Counter()  # call id -> times its tool body started
_runs_lock = threading.Lock()


def _ran() -> None:
    with _runs_lock:
        runs[current_tool_call().id] += 1


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    _ran()
    return f"value of {key}"


class Transfer(Tool):
    """Move money (needs approval)."""

    requires_approval = True

    def execute(self, amount: int) -> str:
        _ran()
        return f"moved {amount}"


@tool
def boom(key: str) -> str:
    """Always raises."""
    _ran()
    raise RuntimeError(f"boom {key}")


@tool(timeout=0.05)
def slow(key: str) -> str:
    """Takes longer than its timeout."""
    _ran()
    time.sleep(0.15)
    return "late"


class _Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("no text")

    __repr__ = __str__


@tool
def weird(key: str) -> Any:
    """Returns a value that cannot be turned into text."""
    _ran()
    return {"v": _Unprintable()}


TOOLS = [lookup, Transfer, boom, slow, weird]
SURROGATE = "odd \ud800 text"

# ------------------------------------------------------------------ strategies
_key = st.sampled_from(["a", "b", SURROGATE, "x" * 50])
_args_text = st.one_of(
    st.just("{"),  # malformed
    st.just(""),  # empty
    st.just('{"key": NaN}'),  # not JSON the APIs accept
    st.just('{"key": "\\ud800"}'),  # a lone surrogate, as a valid JSON escape
    st.just('{"key": ' + "[" * 300 + "]" * 300 + "}"),  # deep nesting
    st.just('{"key": 12}'),  # wrong type
    st.just('{"key": "cut sho'),  # cut off mid-call (with stop="max_tokens" or not)
)


@st.composite
def _call(draw: st.DrawFn) -> FakeToolCall:
    name = draw(st.sampled_from(["lookup", "transfer", "boom", "slow", "weird", "nope"]))
    ident = draw(st.one_of(st.none(), st.just("dup"), st.just("call_same")))
    if draw(st.integers(0, 5)) == 0:
        return FakeToolCall(name, id=ident, raw_arguments=draw(_args_text))
    args: dict[str, Any] = {"amount": draw(st.integers(1, 500))} if name == "transfer" else {}
    if name != "transfer":
        args["key"] = draw(_key)
    return FakeToolCall(name, args, id=ident)


@st.composite
def _turn(draw: st.DrawFn) -> Turn:
    calls = draw(st.lists(_call(), max_size=3))
    if not calls:
        return Turn(text=draw(st.sampled_from(["done", SURROGATE, "**ok**"])))
    stop = "max_tokens" if draw(st.integers(0, 7)) == 0 else None
    broken = draw(st.integers(0, 9)) == 0
    return Turn(
        text=draw(st.sampled_from(["", "let me check"])),
        tool_calls=calls,
        stop=stop,
        fail_mid_stream=broken,
    )


@dataclasses.dataclass
class Scenario:
    kind: str
    stream: bool
    concurrency: Any
    stored: bool
    turns: list[Turn]
    decisions: list[tuple[str, str]]  # (approve | deny, chat | store), used in order
    asks: list[bool]  # after deciding: ask a new question (True) or complete() (False), in order


scenarios = st.builds(
    Scenario,
    kind=st.sampled_from(KINDS),
    stream=st.booleans(),
    concurrency=st.sampled_from([False, "threads", "async"]),
    stored=st.booleans(),
    turns=st.lists(_turn(), min_size=1, max_size=4),
    decisions=st.lists(
        st.tuples(st.sampled_from(["approve", "deny"]), st.sampled_from(["chat", "store"])),
        min_size=8,
        max_size=8,
    ),
    asks=st.lists(st.booleans(), max_size=3),
)


# ------------------------------------------------------------------- the property
@pytest.fixture(scope="module")
def server() -> Any:
    with FakeLLMServer(strict=True) as fake:
        yield fake


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("property")


@LONG_ENOUGH
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(scenario=scenarios)
def test_the_promise_holds_whatever_the_model_does(
    scenario: Scenario, server: FakeLLMServer, workdir: Path
) -> None:
    db = workdir / f"chat-{time.monotonic_ns()}.db"
    _the_promise(scenario, server, db if scenario.stored else None)


@LONG_ENOUGH
@settings(
    max_examples=max(10, EXAMPLES // 8),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(scenario=scenarios)
def test_the_promise_holds_on_postgres(
    scenario: Scenario, server: FakeLLMServer, postgres_server: Any
) -> None:
    _the_promise(dataclasses.replace(scenario, stored=True), server, postgres_server.new_database())


def _the_promise(scenario: Scenario, server: FakeLLMServer, db: Path | str | None) -> None:
    runs.clear()
    turns = list(scenario.turns) + [Turn(text="all done")] * 6  # the model always ends
    if scenario.kind == "openai-compatible":
        turns = [dataclasses.replace(t, repeat_ids_in_stream=True) for t in turns]
    if not scenario.stream:
        turns = [dataclasses.replace(t, fail_mid_stream=False) for t in turns]
    server.script(turns)
    provider = make_provider(scenario.kind, server)
    chat = Chat(
        provider=provider,
        store=db,
        stream=scenario.stream,
        display=False,
    ).with_tools(*TOOLS)
    chat.with_tool_options(concurrency=scenario.concurrency)
    events: list[Event] = []
    chat.on(None, events.append)
    errors_before = len(server.errors)
    try:
        _drive(chat, list(scenario.decisions), list(scenario.asks), db)
        _check(chat, events, scenario, db)
        assert server.errors[errors_before:] == []  # every request was one the server could serve
    finally:
        chat.close()
        provider.close()


def _drive(
    chat: Chat, decisions: list[tuple[str, str]], asks: list[bool], db: Path | str | None
) -> None:
    """Ask, then decide whatever parks and complete (or ask again), until the chat is complete.

    A new question is refused only while a call of the last response is not final (an
    approved call still to run): the driver completes first, as the error tells a user to.
    A stream the server breaks is a provider error: the driver completes again,
    as a user would. A strict-mode rejection (``BadRequestError``) fails the test.
    """
    failures = 0
    for attempt in range(16):
        try:
            if attempt == 0:
                chat.ask("go")
            elif asks and asks.pop(0):
                try:
                    chat.ask("and then?")
                except PendingToolCallsError:
                    assert not all(c.is_final for c in chat.tool_calls)
                    chat.complete()
            else:
                chat.complete()
        except BadRequestError:
            raise
        except ProviderError:
            failures += 1
            assert failures < 6, "the stream kept failing"
        if chat.status == "complete":
            return
        for call in list(chat.pending_approvals):
            verdict, via = decisions.pop(0) if decisions else ("deny", "chat")
            with contextlib.suppress(DecisionError):  # decided meanwhile: that decision stands
                if via == "store" and db is not None:
                    with open_store(db) as other:  # another process's connection
                        if verdict == "approve":
                            other.approve(call.id, chat_id=chat.id)
                        else:
                            other.deny(call.id, reason="no", chat_id=chat.id)
                    chat.refresh()
                elif verdict == "approve":
                    chat.approve(call)
                else:
                    chat.deny(call, reason="no")
    raise AssertionError(f"the chat did not complete: {chat.status}, {chat.tool_calls}")


def _check(chat: Chat, events: list[Event], scenario: Scenario, db: Path | str | None) -> None:
    calls = chat.tool_calls
    for c in calls:  # what the examples covered (pytest --hypothesis-show-statistics)
        event(f"call {c.status}" + (f" by {c.decision.by}" if c.decision else ""))
    assert len({c.id for c in calls}) == len(calls)  # every call its own identity
    _answered_in_order(chat.transcript)
    assert set(runs) <= {c.id for c in calls}
    assert chat.status == "complete"
    for c in calls:
        assert c.is_final, c  # nothing left running or undecided
        ran = runs[c.id]
        if c.decision is not None and c.decision.verdict == "denied":
            assert ran == 0, f"denied {c} ran"
        elif c.status == "timed_out" and "before it started" in (
            c.result.content if c.result else ""
        ):
            assert ran == 0, f"{c} ran although it timed out before it started"
        elif c.status == "timed_out":  # its abandoned thread may still be on its way to _ran()
            deadline = time.monotonic() + 2.0
            while runs[c.id] == 0 and time.monotonic() < deadline:
                time.sleep(0.01)
            assert runs[c.id] == 1, f"{c} ran {runs[c.id]} times"
        elif c.decision is not None and c.decision.verdict == "approved":
            assert ran == 1, f"approved {c} ran {ran} times"
        elif c.status == "ok":
            assert ran == 1, f"{c} ran {ran} times"
        elif c.status in ("skipped", "cancelled", "denied"):
            assert ran == 0, f"{c} ran although {c.status}"
        else:
            assert ran <= 1, f"{c} ran {ran} times"
    # the stored chat is the live one, and holds no key
    if scenario.stored:
        chat.close()
        again = Chat.load(chat.id, store=db, tools=TOOLS, provider=chat.provider)
        try:
            assert _shape(again.transcript) == _shape(chat.transcript)
            assert [(c.id, c.status) for c in again.tool_calls] == [(c.id, c.status) for c in calls]
        finally:
            again.close()
        assert KEY not in _everything_stored(db)
    # no secret in any repr, event or frame
    seen = " ".join(repr(e) for e in events) + repr(chat)
    seen += chat.log.to_string() + chat.steps.to_string()
    assert KEY not in seen


def _answered_in_order(transcript: Any) -> None:
    """Each response's calls are answered right after it, one result per call, in call order
    (what every provider's API requires), whatever was asked or decided in between."""
    messages = list(transcript)
    for i, m in enumerate(messages):
        if isinstance(m, AssistantToolCallMessage):
            ids = [c.id for c in m.tool_calls]
            after = messages[i + 1 : i + 1 + len(ids)]
            got = [getattr(r, "tool_call_id", type(r).__name__) for r in after]
            assert got == ids, f"message {i}'s calls {ids} answered by {got}"


def _everything_stored(db: Path | str | None) -> str:
    """Every byte of the store, as text: the file, or every row of every table."""
    if isinstance(db, Path):
        return db.read_bytes().decode("latin-1")
    import psycopg

    with psycopg.connect(str(db), autocommit=True) as conn:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT table_name FROM information_schema.tables "
                "WHERE table_schema = current_schema()"
            )
        ]
        return " ".join(
            str(conn.execute(f"SELECT string_agg(t::text, ' ') FROM {t} t").fetchone()[0])
            for t in tables
        )


def _shape(messages: Any) -> list[tuple[Any, ...]]:
    out = []
    for m in messages:
        calls = tuple((c.id, c.name, c.status) for c in getattr(m, "tool_calls", ()))
        out.append((type(m).__name__, getattr(m, "content", None), calls))
    return out
