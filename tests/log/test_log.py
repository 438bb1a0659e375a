"""The tool-call log: schema contract, every status and decision, concurrency, export, plots."""

from __future__ import annotations

import io
import itertools
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from matplotlib.figure import Figure

import nbagent
from nbagent import (
    Chat,
    ChatCancelled,
    Event,
    LLMToolResponse,
    ModelRequest,
    SkipToolCall,
    Tool,
    ToolCall,
    log,
    tool,
)
from nbagent._record import fold
from nbagent.log._projection import CALL_COLUMNS, MESSAGE_COLUMNS, STEP_COLUMNS, dtypes
from nbagent.testing import ScriptedProvider, call_tools, reply

SCHEMAS = {"calls": CALL_COLUMNS, "steps": STEP_COLUMNS, "messages": MESSAGE_COLUMNS}


# ----------------------------------------------------------------- helpers
class Script:
    """A provider answering from a list: responses, or exceptions to raise."""

    name = "script"

    def __init__(self, *entries: LLMToolResponse | BaseException, model: str = "scripted-1"):
        self.model = model
        self.entries = list(entries)

    def complete(self, request: ModelRequest) -> LLMToolResponse:
        entry = self.entries.pop(0) if self.entries else answer("done")
        if isinstance(entry, BaseException):
            raise entry
        return entry

    async def complete_async(self, request: ModelRequest) -> LLMToolResponse:
        return self.complete(request)


_ids = itertools.count()


def calls(*specs: tuple[Any, ...], stop: Any = "tool_use") -> LLMToolResponse:
    """A response asking for calls ``(name, args)`` or ``(name, args, call_id)``."""
    return LLMToolResponse(
        text="",
        tool_calls=tuple(
            ToolCall(spec[2] if len(spec) > 2 else f"{spec[0]}_{next(_ids)}", spec[0], spec[1])
            for spec in specs
        ),
        input_tokens=100,
        output_tokens=10 * len(specs),
        model="scripted-1",
        provider="script",
        stop_reason=stop,
        raw_stop_reason=stop,
    )


def answer(text: str) -> LLMToolResponse:
    return LLMToolResponse(
        text=text,
        input_tokens=50,
        output_tokens=5,
        model="scripted-1",
        provider="script",
        stop_reason="end",
        raw_stop_reason="end_turn",
    )


@tool
def get_weather(city: str) -> dict[str, Any]:
    """Get the weather for a city.

    Args:
        city: City name.
    """
    return {"city": city, "temp_c": 21}


@tool
def boom(x: int) -> int:
    """Always fails."""
    raise ValueError(f"bad x {x}")


@tool(timeout=0.05)
def slow(x: int) -> int:
    """Takes too long."""
    time.sleep(0.15)
    return x


@tool
def skip_me(x: int) -> int:
    """Skipped by a callback."""
    return x


@tool
def nap(ms: int) -> int:
    """Sleeps ``ms`` milliseconds."""
    time.sleep(ms / 1000)
    return ms


class Refund(Tool):
    """Refund an order.

    Args:
        order_id: The order.
    """

    requires_approval = True

    def execute(self, order_id: int) -> str:
        return f"refunded {order_id}"


def small_only(call: ToolCall) -> bool | None:
    amount = call.arguments["amount"]
    return True if amount < 10 else (False if amount > 1000 else None)


@tool(approval=small_only)
def pay(amount: int) -> str:
    """Pay an amount."""
    return f"paid {amount}"


@tool(requires_approval=True)
def delete(path: str) -> str:
    """Delete a path."""
    return f"deleted {path}"


def rows(df: pd.DataFrame, **where: Any) -> pd.DataFrame:
    mask = pd.Series(True, index=df.index)
    for k, v in where.items():
        mask &= df[k].astype("object") == v
    return df[mask]


def one(df: pd.DataFrame, **where: Any) -> pd.Series:
    sub = rows(df, **where)
    assert len(sub) == 1, (where, sub)
    return sub.iloc[0]


def assert_schema(df: pd.DataFrame, kind: str) -> None:
    assert list(df.columns) == list(SCHEMAS[kind])
    assert df.dtypes.to_dict() == dtypes(kind)
    assert isinstance(df.index, pd.RangeIndex)


@pytest.fixture
def mixed_chat() -> Chat:
    """A chat with a row for every final status and most decisions."""
    chat = Chat(
        provider=Script(
            calls(
                ("get_weather", {"city": "Paris"}),
                ("boom", {"x": 1}),
                ("slow", {"x": 2}),
                ("skip_me", {"x": 3}),
                ("nope", {}),
                ("get_weather", {"town": "X"}, "invalid"),
            ),
            answer("ok"),
            calls(("refund", {"order_id": 1}, "r1"), ("delete", {"path": "/tmp/x"}, "d1")),
            answer("ok"),
        )
    ).with_tools(get_weather, boom, slow, skip_me, Refund, delete)

    def skipper(call: ToolCall) -> None:
        if call.name == "skip_me":
            raise SkipToolCall("not today")

    chat.before_tool_call(skipper)
    chat.ask("first")
    chat.ask("second")
    chat.approve("r1")
    chat.deny("d1", reason="too risky")
    chat.complete()
    return chat


# ------------------------------------------------------------------ contract
def test_import_nbagent_does_not_import_pandas_or_matplotlib() -> None:
    code = (
        "import sys, nbagent, nbagent.log; "
        "print('pandas' in sys.modules, 'matplotlib' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


@pytest.mark.parametrize("kind", ["calls", "steps", "messages"])
def test_empty_chat_gives_empty_frames_with_the_schema(kind: str) -> None:
    chat = Chat(model="demo")
    df = {"calls": chat.log, "steps": chat.steps, "messages": chat.messages}[kind]
    assert df.empty
    assert_schema(df, kind)
    assert_schema(nbagent.read_log([], kind), kind)


@pytest.mark.parametrize("kind", ["calls", "steps", "messages"])
def test_non_empty_frames_have_the_schema(kind: str, mixed_chat: Chat) -> None:
    df = nbagent.read_log(mixed_chat, kind)
    assert not df.empty
    assert_schema(df, kind)


def _documented_tables() -> dict[str, list[str]]:
    """The column names of each table in the docstring of ``nbagent.log._projection``."""
    import nbagent.log._projection as module

    row = re.compile(r"^([a-z_]+) +(string|Int64|Float64|boolean|category|object|datetime64)\b")
    tables: dict[str, list[str]] = {}
    for line in (module.__doc__ or "").splitlines():
        if m := re.match(r"^``chat\.(log|steps|messages)``: ", line):
            rows = tables.setdefault(m.group(1), [])
        elif m := row.match(line):
            rows.append(m.group(1))
    return tables


def test_chat_log_displays_a_glance_and_keeps_the_whole_frame(mixed_chat: Chat) -> None:
    """Issue 25: ``chat.log`` showed 33 columns; its display is the six a glance needs, with
    the whole frame one call away; as a DataFrame it is unchanged."""
    from IPython.core.formatters import DisplayFormatter

    from nbagent.log._projection import GLANCE

    log = mixed_chat.log
    assert type(log) is pd.DataFrame and list(log.columns) == list(CALL_COLUMNS)
    pd.testing.assert_frame_equal(nbagent.read_log(mixed_chat), log)
    shown, _ = DisplayFormatter().format(log)
    header = re.search(r"<thead>.*?</thead>", shown["text/html"], re.S)
    assert header is not None
    names = re.findall(r"<th>([^<]*)</th>", header.group(0))
    assert [n for n in names if n] == list(GLANCE)  # tool, status, decision, duration...
    assert "refund" in shown["text/html"] and "too risky" not in shown["text/html"]
    hidden = len(CALL_COLUMNS) - len(GLANCE)
    assert f"{len(log)} calls; {hidden} more columns" in shown["text/plain"]
    assert "chat.log.frame() shows them all" in shown["text/html"]
    whole, _ = DisplayFormatter().format(log.frame())
    assert "decided_by" in whole["text/html"] and "too risky" in whole["text/html"]
    assert "more columns" not in whole["text/html"]
    pd.testing.assert_frame_equal(log.frame(), log)
    # a frame derived from it is an ordinary one, shown whole
    derived, _ = DisplayFormatter().format(log[log["status"] == "denied"])
    assert "too risky" in derived["text/html"] and "more columns" not in derived["text/html"]


def test_documented_column_tables_match_the_schemas_in_order() -> None:
    tables = _documented_tables()
    assert tables["log"] == list(CALL_COLUMNS)
    assert tables["steps"] == list(STEP_COLUMNS)
    assert tables["messages"] == list(MESSAGE_COLUMNS)


def test_the_analysis_page_names_every_column_of_the_log() -> None:
    from _docs import DOCS, section

    text = section(DOCS / "analysis.md", "## The columns of `chat.log`")
    assert [name for name in CALL_COLUMNS if f"`{name}`" not in text] == []
    assert "nbagent/log/_projection.py" in text


def test_the_log_leads_with_what_happened_and_ends_with_the_ids() -> None:
    """A visible choice: ``chat.log.head()`` shows tool, status, decision and duration
    first; the 32-character chat id and the call id come last."""
    chat = Chat(model="demo").with_tools(get_weather)
    chat.ask("weather in Paris")
    columns = list(chat.log.columns)
    assert columns[:4] == ["tool", "status", "decision", "duration_ms"]
    assert columns[-2:] == ["chat_id", "call_id"]
    assert list(nbagent.read_log([chat, Chat(model="demo")]).columns) == columns
    # as a notebook shows it: HTML cut to 20 columns, text wrapped at 80 characters
    with pd.option_context("display.width", 80, "display.max_columns", 20):
        html = chat.log.head()._repr_html_()
        text = repr(chat.log.head()).splitlines()[0]
    headers = re.findall(r"<th>([^<]*)</th>", html)[1:]  # after the index's corner
    assert headers[:4] == ["tool", "status", "decision", "duration_ms"]
    shown = headers[: headers.index("...")]
    assert {"duration_ms", "result_preview", "error", "decided_by", "reason"} <= set(shown)
    assert text.split()[:4] == ["tool", "status", "decision", "duration_ms"]


def test_a_simple_run_gives_complete_rows() -> None:
    chat = Chat(model="demo").with_tools(get_weather)
    chat.ask("weather in Paris and in Tokyo")
    df = chat.log
    assert df["tool"].tolist() == ["get_weather", "get_weather"]
    assert df["arguments"].tolist() == [{"city": "Paris"}, {"city": "Tokyo"}]
    assert df["arguments_json"].tolist() == ['{"city": "Paris"}', '{"city": "Tokyo"}']
    assert (df["chat_id"] == chat.id).all()
    assert df["turn"].tolist() == [1, 1]
    assert df["step"].tolist() == [1, 1]
    assert df["run_step"].tolist() == [2, 2]
    assert df["status"].tolist() == ["ok", "ok"]
    assert df["decision"].tolist() == ["auto", "auto"]
    assert not df["requires_approval"].any()
    assert df["approval_source"].tolist() == ["none", "none"]
    assert df["concurrency"].tolist() == ["sequential", "sequential"]
    assert df["model"].tolist() == ["demo", "demo"] and df["provider"].tolist() == ["demo"] * 2
    assert df["result_preview"].str.contains("Paris").iloc[0]
    assert df["error"].isna().all() and df["decided_by"].isna().all()
    assert (df["requested_at"] <= df["started_at"]).all()
    assert (df["started_at"] <= df["finished_at"]).all()
    assert (df["duration_ms"] >= 0).all()
    assert str(df["finished_at"].dt.tz) == "UTC"


# ------------------------------------------------------- statuses, decisions
def test_a_row_for_every_final_status(mixed_chat: Chat) -> None:
    df = mixed_chat.log
    assert one(df, tool="get_weather", status="ok")["error"] is pd.NA
    err = one(df, tool="boom")
    assert err["status"] == "error" and "ValueError: bad x 1" in err["error"]
    assert pd.notna(err["duration_ms"])
    timed = one(df, tool="slow")
    assert timed["status"] == "timed_out" and "timed out" in timed["error"]
    skipped = one(df, tool="skip_me")
    assert skipped["status"] == "skipped" and "not today" in skipped["error"]
    assert pd.isna(skipped["concurrency"]) and pd.isna(skipped["run_step"])
    unknown = one(df, tool="nope")
    assert unknown["status"] == "error" and "unknown tool" in unknown["error"]
    invalid = one(df, call_id="invalid")
    assert invalid["status"] == "error" and pd.isna(invalid["started_at"])
    denied = one(df, tool="delete")
    assert denied["status"] == "denied" and denied["error"] is pd.NA
    assert set(df["status"].astype(str)) == {"ok", "error", "timed_out", "skipped", "denied"}


def test_cancelled_calls_and_the_skipped_over_the_call_limit() -> None:
    holder: list[Chat] = []

    @tool
    def stopper() -> str:
        """Cancels the chat."""
        holder[0].cancel()
        return "stopping"

    chat = Chat(
        provider=Script(
            calls(("stopper", {}), ("get_weather", {"city": "Oslo"}, "oslo")),
            calls(("get_weather", {"city": "A"}), ("get_weather", {"city": "B"})),
        )
    ).with_tools(stopper, get_weather)
    holder.append(chat)
    with pytest.raises(ChatCancelled):
        chat.ask("go")
    df = chat.log
    assert one(df, tool="stopper")["status"] == "ok"
    cancelled = one(df, call_id="oslo")
    assert cancelled["status"] == "cancelled" and "cancelled" in cancelled["error"]
    chat.with_tool_options(calls="one")
    chat.complete()
    df = chat.log
    assert df["status"].astype(str).tolist()[-2:] == ["ok", "skipped"]
    assert "only one tool call" in df["error"].iloc[-1]


def test_every_decision_kind() -> None:
    chat = Chat(
        provider=Script(
            calls(
                ("get_weather", {"city": "Rome"}),
                ("pay", {"amount": 5}, "c1_pay"),
                ("pay", {"amount": 5000}, "c2_pay"),
                ("pay", {"amount": 50}, "c3_pay"),
                ("refund", {"order_id": 7}, "c4_refund"),
                ("delete", {"path": "/a"}, "c5_delete"),
                ("refund", {"order_id": "not a number"}, "c6_refund"),
            ),
            answer("ok"),
        )
    ).with_tools(get_weather, pay, Refund, delete)
    chat.ask("go")
    assert chat.status == "awaiting_approval"
    df = chat.log
    assert one(df, tool="get_weather")["decision"] == "auto"
    small = one(df, call_id="c1_pay")
    assert (small["decision"], small["decided_by"], small["status"]) == (
        "approved",
        "resolver",
        "ok",
    )  # runnable calls run while others wait
    assert small["approval_source"] == "resolver" and small["requires_approval"]
    huge = one(df, call_id="c2_pay")
    assert (huge["decision"], huge["decided_by"], huge["status"]) == (
        "denied",
        "resolver",
        "denied",
    )
    invalid = one(df, call_id="c6_refund")
    assert (invalid["decision"], invalid["status"]) == ("none", "error")
    assert invalid["requires_approval"] and pd.isna(invalid["decided_by"])
    todo = df.query("decision == 'pending'")
    assert todo["call_id"].tolist() == ["c3_pay", "c4_refund", "c5_delete"]
    assert (todo["status"] == "awaiting_approval").all()
    assert todo["approval_reason"].str.contains("approval").all()

    chat.always_allow(Refund)
    chat.approve("c3_pay", arguments={"amount": 40}, reason="trimmed")
    chat.deny("c5_delete", reason="keep it")
    chat.complete()
    df = chat.log
    policy = one(df, call_id="c4_refund")
    assert (policy["decision"], policy["decided_by"], policy["status"]) == (
        "policy",
        "policy:always_allow:refund",
        "ok",
    )
    edited = one(df, call_id="c3_pay")
    assert (edited["decision"], edited["decided_by"], edited["status"]) == (
        "approved",
        "user",
        "ok",
    )
    assert edited["edited_arguments"] == {"amount": 40} and edited["arguments"] == {"amount": 50}
    assert edited["reason"] == "trimmed" and "paid 40" in edited["result_preview"]
    denied = one(df, call_id="c5_delete")
    assert (denied["decision"], denied["decided_by"], denied["reason"]) == (
        "denied",
        "user",
        "keep it",
    )
    assert denied["status"] == "denied" and "keep it" in denied["result_preview"]
    assert df["decided_at"].notna().sum() == 5
    assert set(df["decision"].astype(str)) == {"auto", "approved", "denied", "policy", "none"}


def test_a_pending_row_becomes_decided_then_runs() -> None:
    chat = Chat(provider=Script(calls(("refund", {"order_id": 42})), answer("done")))
    chat.with_tools(Refund)
    chat.ask("refund 42")
    pending = chat.log.query("decision == 'pending'")
    assert len(pending) == 1
    row = pending.iloc[0]
    assert row["status"] == "awaiting_approval" and pd.isna(row["decided_at"])
    chat.approve(row["call_id"])
    row = chat.log.iloc[0]
    assert (row["decision"], row["status"], row["decided_by"]) == ("approved", "approved", "user")
    assert pd.notna(row["decided_at"]) and pd.isna(row["started_at"])
    chat.complete()
    row = chat.log.iloc[0]
    assert row["status"] == "ok" and row["result_preview"] == "refunded 42"
    assert chat.log.query("decision == 'pending'").empty
    assert row["decided_at"] <= row["started_at"] <= row["finished_at"]


def test_a_human_overruling_a_resolver_denial_shows_the_human() -> None:
    chat = Chat(provider=Script(calls(("pay", {"amount": 5000}, "p"), ("delete", {"path": "/x"}))))
    chat.with_tools(pay, delete)
    chat.ask("go")
    assert one(chat.log, tool="pay")["status"] == "denied"
    chat.approve("p")
    row = one(chat.log, tool="pay")
    assert (row["decision"], row["decided_by"], row["status"]) == ("approved", "user", "approved")
    assert pd.isna(row["finished_at"]) and pd.isna(row["result_preview"])


# ------------------------------------------------------------------ concurrency
def test_a_concurrent_round_has_overlapping_intervals() -> None:
    chat = (
        Chat(
            provider=Script(
                calls(("nap", {"ms": 50}), ("nap", {"ms": 50}), ("nap", {"ms": 50})),
                answer("ok"),
            )
        )
        .with_tools(nap)
        .with_tool_options(concurrency="threads")
    )
    chat.ask("go")
    df = chat.log
    assert (df["concurrency"] == "threads").all() and df["run_step"].nunique() == 1
    assert df["started_at"].max() < df["finished_at"].min()  # every pair overlaps
    assert (df["duration_ms"] >= 45).all()
    assert (df["finished_at"] - df["started_at"]).min() >= pd.Timedelta(milliseconds=45)
    seq = Chat(provider=Script(calls(("nap", {"ms": 20}), ("nap", {"ms": 20})), answer("ok")))
    seq.with_tools(nap).ask("go")
    s = seq.log.sort_values("started_at")
    assert s["finished_at"].iloc[0] <= s["started_at"].iloc[1]  # one after the other


# ------------------------------------------------------------- steps, messages
def test_steps_have_usage_and_failed_requests() -> None:
    chat = Chat(
        provider=Script(
            calls(("get_weather", {"city": "Paris"})),
            RuntimeError("upstream 503"),
            answer("ok"),
        )
    ).with_tools(get_weather)
    with pytest.raises(RuntimeError):
        chat.ask("weather in Paris")
    chat.complete()
    steps = chat.steps
    assert steps["step"].tolist() == [1, 3, 3]
    first, failed, retry = (steps.iloc[i] for i in range(3))
    assert (first["input_tokens"], first["output_tokens"], first["n_tool_calls"]) == (100, 10, 1)
    assert first["stop_reason"] == "tool_use" and first["model"] == "scripted-1"
    assert first["provider"] == "script" and first["tool_choice"] == "auto"
    assert first["latency_ms"] >= 0 and first["started_at"] <= first["finished_at"]
    assert (failed["error_type"], failed["error"]) == ("RuntimeError", "upstream 503")
    assert pd.isna(failed["input_tokens"]) and pd.notna(failed["finished_at"])
    assert pd.isna(retry["error"]) and retry["stop_reason"] == "end"
    assert retry["raw_stop_reason"] == "end_turn"


def test_messages_have_one_row_per_transcript_message() -> None:
    chat = Chat(model="demo").with_tools(get_weather)
    chat.ask("weather in Paris and in Tokyo")
    m = chat.messages
    assert len(m) == len(chat.transcript)
    assert m["index"].tolist() == list(range(len(m)))
    assert m["role"].astype(str).tolist() == ["user", "assistant", "tool", "tool", "assistant"]
    assert m["kind"].astype(str).tolist() == [
        "text",
        "tool_calls",
        "tool_result",
        "tool_result",
        "text",
    ]
    assert m["n_tool_calls"].tolist() == [0, 2, 0, 0, 0]
    assert m["tool_call_id"].iloc[2] == chat.log["call_id"].iloc[0]
    assert m["tool"].iloc[2] == "get_weather" and m["status"].iloc[2] == "ok"
    assert m["content"].iloc[0] == "weather in Paris and in Tokyo"
    assert m["content"].iloc[1] == "(demo model: arguments guessed from your words: city)"
    assert m["stop_reason"].astype(str).tolist()[-1] == "end"


def test_frames_are_cached_until_the_next_event() -> None:
    chat = Chat(model="demo").with_tools(get_weather)
    chat.ask("weather in Paris")
    first = chat.log
    first["mine"] = 1  # the caller's copy; the cached frame is untouched
    assert "mine" not in chat.log.columns
    chat.ask("weather in Oslo")
    assert len(chat.log) == 2 and len(first) == 1


def test_materialising_while_events_arrive_from_another_thread() -> None:
    chat = Chat(provider=Script(*[calls(("nap", {"ms": 1})) for _ in range(30)]))
    chat.with_tools(nap)
    stop = threading.Event()
    sizes: list[int] = []

    def reader() -> None:
        while not stop.is_set():
            sizes.append(len(chat.log))

    t = threading.Thread(target=reader)
    t.start()
    try:
        chat.ask("go", max_steps=60)
    finally:
        stop.set()
        t.join()
    assert sizes == sorted(sizes) and len(chat.log) == 30


# ------------------------------------------------------------------ read_log
class FakeStore:
    """The store protocol read_log relies on: iter_events() in per-chat seq order."""

    def __init__(self, events: Sequence[Event]):
        self.events = list(events)
        self.queries: list[dict[str, Any]] = []

    def iter_events(self, **query: Any) -> Iterator[Event]:
        self.queries.append(query)
        wanted = query.get("chat_id")
        return iter([e for e in self.events if wanted in (None, e.chat_id)])


def _recorded_chat(text: str) -> tuple[Chat, list[Event]]:
    events: list[Event] = []
    chat = Chat(model="demo").with_tools(get_weather)
    chat.on(None, events.append)
    chat.ask(text)
    return chat, events


def test_read_log_over_several_chats_and_a_store() -> None:
    a, ev_a = _recorded_chat("weather in Paris and in Tokyo")
    b, ev_b = _recorded_chat("weather in Lima")
    both = nbagent.read_log([a, b])
    assert_schema(both, "calls")
    assert both["chat_id"].tolist() == [a.id, a.id, b.id]
    # call ids repeat across demo chats; rows stay apart
    assert both["call_id"].tolist() == ["demo_call_1", "demo_call_2", "demo_call_1"]
    # interleave the two streams: per-chat order is all a store promises
    mixed = [e for pair in zip(ev_a, ev_b, strict=False) for e in pair]
    mixed += ev_a[len(ev_b) :]
    store = FakeStore(mixed)
    for kind in ("calls", "steps", "messages"):
        from_store = nbagent.read_log(store, kind)
        direct = nbagent.read_log([a, b], kind)
        pd.testing.assert_frame_equal(from_store, direct)
    only_b = nbagent.read_log(store, chat_id=b.id)
    assert only_b["chat_id"].unique().tolist() == [b.id]
    assert store.queries[-1] == {"chat_id": b.id}
    pd.testing.assert_frame_equal(nbagent.read_log(ev_b), b.log)
    pd.testing.assert_frame_equal(log.read_log(b.record), b.log)


def test_read_log_rejects_what_it_cannot_read() -> None:
    with pytest.raises(TypeError, match="read_log"):
        nbagent.read_log(42)
    with pytest.raises(TypeError, match="only apply to a store"):
        nbagent.read_log([Chat(model="demo")], chat_id="x")
    with pytest.raises(ValueError, match="kind"):
        nbagent.read_log([], "tools")  # type: ignore[arg-type]
    # a store's path or URL: says how to open it, never shows it (a URL may hold a password)
    for where in ("postgresql://me:hunter2@db/agents", Path("agents.db")):
        with pytest.raises(TypeError, match=r"pass nbagent\.store\.open_store\(it\)") as info:
            nbagent.read_log(where)
        assert "hunter2" not in str(info.value) and "agents" not in str(info.value)


def test_the_log_reads_a_record_folded_from_stored_events() -> None:
    chat, events = _recorded_chat("weather in Paris")
    record = fold(events)
    assert len(record.calls) == 1 and record == chat.record
    assert record.title == "weather in Paris" and fold([], "new").title is None
    assert "calls=1" in repr(record)
    pd.testing.assert_frame_equal(nbagent.read_log(record), chat.log)


# ------------------------------------------------------------------- summary
def test_summary_per_tool(mixed_chat: Chat) -> None:
    s = log.summary(mixed_chat)
    assert list(s.columns) == list(log.SUMMARY_COLUMNS)
    assert s.index.name == "tool"
    w = s.loc["get_weather"]
    assert (w["calls"], w["ok"], w["errors"]) == (2, 1, 1)
    assert w["error_rate"] == 0.5  # one ran and succeeded; the invalid one "ran" to an error
    assert s.loc["boom", "error_rate"] == 1.0 and s.loc["slow", "errors"] == 1
    assert s.loc["delete", "denied"] == 1 and s.loc["delete", "denial_rate"] == 1.0
    assert s.loc["refund", "denial_rate"] == 0.0
    assert pd.isna(s.loc["get_weather", "denial_rate"])
    assert s.loc["get_weather", "p50_ms"] >= 0
    # tokens of the request are split among its calls: 6 calls share 100 + 60 tokens
    assert s.loc["boom", "tokens"] == round(160 / 6)
    assert s.loc["refund", "tokens"] == 60  # 100 input + 20 output tokens, two calls
    by_chat = log.summary(nbagent.read_log(mixed_chat), by=["chat_id", "status"])
    assert by_chat["calls"].sum() == len(mixed_chat.log)
    assert by_chat["tokens"].isna().all()  # a frame read_log built carries no steps


def test_summary_is_rounded(mixed_chat: Chat) -> None:
    calls = mixed_chat.log
    calls["duration_ms"] = pd.array([1.23456, 0.0049, 987.654321, None, None, None, 0.5, None])
    steps = mixed_chat.steps
    steps["cost_usd"] = 0.0123456789
    s = log.summary(calls, steps=steps)
    assert s.loc["get_weather", "error_rate"] == 0.5
    assert s.loc["slow", "p50_ms"] == 987.7 and s.loc["boom", "p50_ms"] == 0.0
    assert s.loc["refund", "cost_usd"] == 0.006173  # half of 0.01234..., 4 significant digits
    weather = mixed_chat.log.iloc[[0, 0, 5]]  # 1 error of 3 ran: 0.333
    assert log.summary(weather)["error_rate"].tolist() == [0.333]
    for col in ("error_rate", "denial_rate"):
        assert (s[col].dropna() == s[col].dropna().round(3)).all()
    for col in ("p50_ms", "p95_ms"):
        assert (s[col].dropna() == s[col].dropna().round(1)).all()


def test_summary_fits_a_notebook_cell(mixed_chat: Chat) -> None:
    """Rounded values and 11 columns fit a classic notebook's output area (about 115
    characters of monospace text) with 16-character tool names, 1,000 calls a tool and
    runs of tens of seconds; the old summary's 13 unrounded columns took about 150."""
    calls = pd.concat([mixed_chat.log] * 500, ignore_index=True)  # 4,000 calls
    names = ["convert_currency", "get_weather", "search_documents", "issue_refund"]
    calls["tool"] = pd.array([names[i % 4] for i in range(len(calls))], dtype="string")
    calls["duration_ms"] = pd.array([12.3456789 * i for i in range(len(calls))], dtype="Float64")
    steps = mixed_chat.steps
    steps["cost_usd"] = 0.0123456789
    s = log.summary(calls, steps=steps)
    assert len(s.columns) <= 12 and len(s) == 4
    assert s["tokens"].notna().all() and s["cost_usd"].notna().all()
    assert max(map(len, s.to_string().splitlines())) <= 115
    with pd.option_context("display.max_columns", 20):
        assert "..." not in s._repr_html_()  # every column shown


def test_summary_of_an_empty_log() -> None:
    s = log.summary(Chat(model="demo"))
    assert s.empty and list(s.columns) == list(log.SUMMARY_COLUMNS)


def test_summary_counts_pending() -> None:
    chat = Chat(provider=Script(calls(("refund", {"order_id": 1})))).with_tools(Refund)
    chat.ask("go")
    s = log.summary(chat)
    assert s.loc["refund", "pending"] == 1 and pd.isna(s.loc["refund", "denial_rate"])


def test_a_tools_cost_is_unknown_when_a_request_that_asked_for_it_is_unpriced() -> None:
    """One of lookup's calls was asked for by a request on a model without prices: its cost
    is unknown, and so is the tool's total (summed, the priced part alone understated the
    bill, as ``chat.cost_usd`` being None says); a tool asked for only by priced requests
    keeps its cost."""

    @tool
    def lookup(q: str) -> str:
        """Look up."""
        return "x"

    @tool
    def note(q: str) -> str:
        """Note."""
        return "y"

    def asking(model: str, *calls: ToolCall) -> LLMToolResponse:
        return LLMToolResponse(
            text="", tool_calls=calls, stop_reason="tool_use", input_tokens=1000,
            output_tokens=1000, model=model, provider="anthropic",
        )  # fmt: skip

    provider = ScriptedProvider(
        [
            asking(
                "claude-sonnet-4-5",
                ToolCall("a", "lookup", {"q": "1"}),
                ToolCall("b", "note", {"q": "1"}),
            ),
            asking("my-unpriced-finetune", ToolCall("c", "lookup", {"q": "2"})),
            reply("done"),
        ]
    )  # fmt: skip
    chat = Chat(provider=provider).with_tools(lookup, note)
    chat.ask("go")
    assert chat.cost_usd is None
    s = log.summary(chat)
    assert pd.isna(s.loc["lookup", "cost_usd"])
    assert s.loc["note", "cost_usd"] > 0
    assert s.loc["lookup", "tokens"] == 3000  # tokens are known either way


def test_a_stores_summary_counts_what_a_fork_copied_once(tmp_path: Path) -> None:
    """The weather call ran once (in the parent) and the parent's request was paid once: a
    store holding the parent and a fork that approves its refund counts them once. With
    ``shared=True`` the fork's copies are counted too."""
    db = tmp_path / "s.db"
    script = Script(
        calls(("get_weather", {"city": "Paris"}), ("refund", {"order_id": 1}, "r1")),
        answer("not refunded"),
        answer("refunded"),
    )
    chat = Chat(provider=script, store=db).with_tools(get_weather, Refund)
    chat.ask("go")
    chat.deny("r1")
    chat.complete()
    fork = chat.fork("r1", decision="approved")
    fork.complete()
    chat.close()
    fork.close()
    with nbagent.open_store(db) as store:
        s = log.summary(store)
        everything = log.summary(store, shared=True)
    assert s.loc["get_weather", "calls"] == 1 and everything.loc["get_weather", "calls"] == 2
    assert (s.loc["refund", "calls"], s.loc["refund", "denied"], s.loc["refund", "ok"]) == (2, 1, 1)
    # the asking request (100 + 20 tokens) split between its two calls, in the parent only
    assert s["tokens"].sum() == 120 and everything["tokens"].sum() == 240


# -------------------------------------------------------------------- export
@pytest.mark.parametrize("fmt", ["parquet", "csv"])
@pytest.mark.parametrize("kind", ["calls", "steps", "messages"])
def test_export_round_trips_types(fmt: str, kind: str, mixed_chat: Chat, tmp_path: Path) -> None:
    write, read = {
        "parquet": (log.to_parquet, log.read_parquet),
        "csv": (log.to_csv, log.read_csv),
    }[fmt]
    for chat in (mixed_chat, Chat(model="demo")):
        df = nbagent.read_log(chat, kind)
        path = write(df, tmp_path / f"{kind}.{fmt}")
        back = read(path)
        pd.testing.assert_frame_equal(back, df)
        assert_schema(back, kind)


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_export_keeps_empty_strings_apart_from_missing(fmt: str, tmp_path: Path) -> None:
    @tool
    def empty() -> str:
        """Returns nothing."""
        return ""

    chat = Chat(provider=Script(calls(("empty", {})), answer(""))).with_tools(empty)
    chat.ask("go")
    df = chat.log
    assert df["result_preview"].iloc[0] == "" and df["error"].isna().iloc[0]
    write, read = {
        "parquet": (log.to_parquet, log.read_parquet),
        "csv": (log.to_csv, log.read_csv),
    }[fmt]
    back = read(write(df, tmp_path / f"x.{fmt}"))
    pd.testing.assert_frame_equal(back, df)
    assert back["result_preview"].iloc[0] == ""


def test_summary_exports_with_its_index_as_a_column(mixed_chat: Chat, tmp_path: Path) -> None:
    s = log.summary(mixed_chat)
    back = log.read_csv(log.to_csv(s, tmp_path / "s.csv"))
    pd.testing.assert_frame_equal(back.set_index("tool"), s)


# --------------------------------------------------------------------- plots
def _png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


@pytest.mark.parametrize("plot", [log.plot_timeline, log.plot_durations])
def test_plots_on_empty_and_non_empty_logs(plot: Any, mixed_chat: Chat) -> None:
    empty = plot(Chat(model="demo"))
    assert isinstance(empty, Figure)
    assert "no tool calls yet" in [t.get_text() for t in empty.axes[0].texts]
    assert _png(empty).startswith(b"\x89PNG")
    full = plot(mixed_chat.log)
    assert isinstance(full, Figure) and _png(full).startswith(b"\x89PNG")
    both = plot([mixed_chat, Chat(model="demo")])
    assert _png(both).startswith(b"\x89PNG")


def test_timeline_draws_a_bar_per_run_and_a_marker_per_call_not_run(mixed_chat: Chat) -> None:
    fig = log.plot_timeline(mixed_chat)
    ax = fig.axes[0]
    ran = mixed_chat.log["started_at"].notna().sum()
    assert len(ax.patches) >= ran
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert len(labels) == len(mixed_chat.log) and "boom" in labels
    notes = " ".join(t.get_text() for t in ax.texts)
    assert "step 2 · sequential" in notes and "not run" in notes
    assert _png(log.plot_timeline(mixed_chat, relative=False)).startswith(b"\x89PNG")
    assert "latest 3 of" in log.plot_timeline(mixed_chat, max_rows=3).axes[0].get_title(loc="left")


def _ids_in_one_millisecond(n: int) -> list[str]:
    """``n`` version-7 chat ids made together: one time prefix, different random tails."""
    from nbagent._base_chat import new_chat_id

    ids = [new_chat_id() for _ in range(n)]
    ids = [ids[0][:12] + i[12:] for i in ids]  # the same millisecond, however slow the machine
    other = "1" if ids[0][-7] == "0" else "0"
    ids[1] = ids[1][:-7] + other + ids[0][-6:]  # and two that share their last 6 characters
    assert len(set(ids)) == n and len({i[:12] for i in ids}) == 1
    return ids


def test_chat_labels_are_unique_suffixes_of_version_7_ids() -> None:
    ids = _ids_in_one_millisecond(12)
    labels = log._chat_labels(ids, {})
    assert len(set(labels.values())) == 12
    sizes = {len(label.removeprefix("chat ")) for label in labels.values()}
    assert sizes == {7}  # the shortest that tells ids[0] and ids[1] apart
    assert all(label == f"chat {i[-7:]}" for i, label in labels.items())
    others = ids[2:]
    assert log._chat_labels(others, {}) == {i: f"chat {i[-6:]}" for i in others}
    assert log._chat_labels(["a", "ba"], {}) == {"a": "chat a", "ba": "chat ba"}


def test_chat_labels_prefer_titles_and_stay_unique() -> None:
    a, b, c, d, e = _ids_in_one_millisecond(5)
    titles = {
        a: "What is the weather in Paris and in Tokyo?",
        b: "What is the weather in Paris and in Lima?",  # shortens like a's
        c: "  Refund\norder 42  ",
        d: None,
    }
    labels = log._chat_labels([a, b, c, d, e], titles)
    assert labels[a] == f"“What is the weather in Pari…” ({a[-7:]})"
    assert labels[b] == f"“What is the weather in Pari…” ({b[-7:]})"
    assert labels[c] == "“Refund order 42”"
    assert labels[d] == f"chat {d[-7:]}" and labels[e] == f"chat {e[-7:]}"
    # titles made to look like other labels stay apart
    tricky = {a: f"chat {b[-7:]}", c: f"x” ({d[-7:]}", d: "x", e: "x"}
    assert len(set(log._chat_labels([a, b, c, d, e], tricky).values())) == 5


def test_timeline_labels_chats_by_their_first_message_or_a_unique_suffix() -> None:
    chats = [Chat(model="demo").with_tools(get_weather) for _ in range(4)]
    for chat, city in zip(chats, ["Paris", "Lima", "Paris", "Oslo"], strict=True):
        chat.ask(f"weather in {city}")

    def notes(fig: Figure) -> list[str]:
        return [t.get_text().split(" · step")[0] for t in fig.axes[0].texts]

    by_title = notes(log.plot_timeline(chats))
    assert by_title[1] == "“weather in Lima”" and by_title[3] == "“weather in Oslo”"
    assert by_title[0] != by_title[2] and by_title[0].startswith("“weather in Paris” (")
    events = [e for city in ("Rome", "Nice") for e in _recorded_chat(f"weather in {city}")[1]]
    from_store = notes(log.plot_timeline(FakeStore(events)))
    assert from_store == ["“weather in Rome”", "“weather in Nice”"]
    frame = nbagent.read_log(chats)  # a bare frame has no titles: the id suffixes
    ids = _ids_in_one_millisecond(4)
    frame["chat_id"] = frame["chat_id"].map(dict(zip([c.id for c in chats], ids, strict=True)))
    assert notes(log.plot_timeline(frame)) == [f"chat {i[-7:]}" for i in ids]


def test_plots_draw_into_given_axes_and_say_when_nothing_ran() -> None:
    fig = Figure()
    ax = fig.add_subplot()
    chat = Chat(provider=Script(calls(("refund", {"order_id": 1})))).with_tools(Refund)
    chat.ask("go")
    assert log.plot_durations(chat, ax=ax) is fig
    assert "no tool call has run yet" in [t.get_text() for t in ax.texts]
    assert log.plot_timeline(chat, ax=Figure().add_subplot()) is not fig


def test_read_log_from_the_sqlite_store_matches_the_live_chats(tmp_path: Path) -> None:
    store_module = pytest.importorskip("nbagent.store")
    path = tmp_path / "chats.db"
    a = Chat(model="demo", store=path).with_tools(get_weather)
    a.ask("weather in Paris and in Tokyo")
    b = Chat(model="demo", store=path).with_tools(Refund)
    b.ask("refund order 42")
    store = store_module.open_store(path)
    try:
        for kind in ("calls", "steps", "messages"):
            pd.testing.assert_frame_equal(
                nbagent.read_log(store, kind), nbagent.read_log([a, b], kind)
            )
        todo = nbagent.read_log(store, chat_id=b.id).query("decision == 'pending'")
        assert todo["tool"].tolist() == ["refund"]
    finally:
        store.close()


def test_summaries_and_plots_take_a_batch_result_as_read_log_does() -> None:
    """A batch's result is a frame of rows, not of calls: the summary and both plots read
    its chats' calls, as ``read_log(result)`` does (they took its columns for a calls frame
    and raised ``KeyError: 'decision'``)."""

    @nbagent.tool
    def lookup(key: str) -> str:
        """Look a key up."""
        return key

    result = nbagent.batch(
        ["a", "b"],
        lambda: Chat(
            provider=ScriptedProvider([call_tools(("lookup", {"key": "k"})), reply("ok")])
        ).with_tools(lookup),
        progress=False,
    )
    assert list(log.summary(result)["calls"]) == [2]
    chats = nbagent.read_log(result)
    steps = nbagent.read_log(result, "steps")
    assert log.summary(result).equals(log.summary(chats, steps=steps))
    assert _png(log.plot_timeline(result)).startswith(b"\x89PNG")
    assert _png(log.plot_durations(result)).startswith(b"\x89PNG")
