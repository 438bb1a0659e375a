"""The tool-call log: per-event logging cost, DataFrame materialisation, memory per call.

Targets (issue 7): 100,000 tool-call events (requested/started/finished triples,
built in advance as real Event objects) cost under 20 us each to log, and the
calls DataFrame materialises in under 1 s. Baseline in the same run: appending
the same events to a plain list. Memory per logged call is measured with
tracemalloc (the log's own records; the events themselves are not counted).
A stress line materialises 100,000 calls (300,000 events); it is judged on CPU
time, since wall time on a shared machine mostly measures the neighbours.
"""

from __future__ import annotations

import statistics
import time
import tracemalloc
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from benchmarks._common import Result
from nbagent import (
    Approval,
    Event,
    ToolCall,
    ToolCallFinished,
    ToolCallRequested,
    ToolCallStarted,
    ToolResultMessage,
)
from nbagent._record import ChatRecord, fold
from nbagent.log._projection import CallLog

N_EVENTS = 100_000
STATUSES = ("ok",) * 17 + ("error", "timed_out", "cancelled")
TOOLS = ("get_weather", "search_docs", "run_sql", "send_email", "read_file")


def make_events(n_events: int = N_EVENTS, chat_id: str = "bench") -> list[Event]:
    """``n_events`` events: one requested/started/finished triple per call."""
    events: list[Event] = []
    t0 = datetime(2025, 1, 1, tzinfo=UTC)
    seq = 0
    n_calls = -(-n_events // 3)
    for i in range(n_calls):
        step = 1 + 2 * (i // 4)
        turn = 1 + i // 40
        call = ToolCall(f"call_{i:06d}", TOOLS[i % len(TOOLS)], {"city": f"City {i}", "n": i})
        status = STATUSES[i % len(STATUSES)]
        started = t0 + timedelta(milliseconds=10 * i)
        finished = started + timedelta(milliseconds=5 + i % 50)
        call.started_at, call.finished_at = started, finished
        content = f'{{"city": "City {i}", "temp_c": {i % 35}}}' if status == "ok" else "Error"
        result = ToolResultMessage(call.id, content, status != "ok", status, call.name, turn)
        triple: list[Event] = [
            ToolCallRequested(
                chat_id=chat_id,
                seq=seq,
                ts=started,
                call=call,
                step=step,
                turn=turn,
                approval=Approval(False),
            ),
            ToolCallStarted(
                chat_id=chat_id,
                seq=seq + 1,
                ts=started,
                call=call,
                step=step + 1,
                turn=turn,
                mode="threads",
                arguments=call.arguments,
            ),
            ToolCallFinished(
                chat_id=chat_id,
                seq=seq + 2,
                ts=finished,
                call=call,
                step=step,
                turn=turn,
                status=status,
                result=result,
                error=None if status == "ok" else f"{status}: boom",
                duration_ms=float(5 + i % 50),
                started_at=started,
                mode="threads",
            ),
        ]
        events.extend(triple)
        seq += 3
    return events[:n_events]


def _feed(fn: Callable[[Event], Any], events: list[Event]) -> float:
    t0 = time.perf_counter()
    for e in events:
        fn(e)
    return time.perf_counter() - t0


def run(quick: bool) -> list[Result]:
    events = make_events()
    n = len(events)
    repeat = 3 if quick else 7

    log_times, list_times, cold, cold_cpu, warm = [], [], [], [], []
    for _ in range(repeat):  # interleaved: log, list baseline, materialise
        record = ChatRecord("bench")
        log_times.append(_feed(record._apply, events))  # the core's fold, as the chat runs it
        log = CallLog(record)
        sink: list[Event] = []
        list_times.append(_feed(sink.append, events))
        w0, c0 = time.perf_counter(), time.process_time()
        df = log.calls()
        cold.append(time.perf_counter() - w0)
        cold_cpu.append(time.process_time() - c0)
        w0 = time.perf_counter()
        CallLog(record).calls()  # a new log: built again
        warm.append(time.perf_counter() - w0)
    per_event_us = statistics.median(log_times) / n * 1e6
    baseline_us = statistics.median(list_times) / n * 1e6
    n_calls = len(df)

    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    record = ChatRecord("bench")
    for e in events:
        record._apply(e)
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    per_call = (after - before) / n_calls
    frame_bytes = df.memory_usage(deep=True).sum() / n_calls

    big = make_events(3 * N_EVENTS)  # stress: 100,000 calls
    big_times, big_cpu = [], []
    for _ in range(1 if quick else 3):
        log = CallLog(fold(big, "bench"))
        w0, c0 = time.perf_counter(), time.process_time()
        log.calls()
        big_times.append(time.perf_counter() - w0)
        big_cpu.append(time.process_time() - c0)
    big_s = statistics.median(big_times)

    return [
        Result(
            f"log {n:,} tool-call events: per event",
            per_event_us,
            "us",
            "< 20 us",
            per_event_us < 20,
            f"list.append baseline {baseline_us:.3f} us, {per_event_us / baseline_us:.0f}x",
        ),
        Result(
            f"materialise chat.log ({n_calls:,} calls, first time)",
            statistics.median(cold),
            "s",
            "< 1 s",
            statistics.median(cold) < 1.0,
            f"CPU {statistics.median(cold_cpu):.3f} s; cached until the next event; "
            f"rebuilt {statistics.median(warm):.3f} s",
        ),
        Result(
            f"materialise chat.log ({len(big) // 3:,} calls, first time), CPU time",
            statistics.median(big_cpu),
            "s",
            "< 1 s",
            statistics.median(big_cpu) < 1.0,
            f"stress: {len(big):,} events; wall {big_s:.3f} s",
        ),
        Result(
            "memory per logged call (records, tracemalloc)",
            per_call,
            "B",
            "",
            None,
            f"DataFrame {frame_bytes:.0f} B/row incl. strings",
        ),
    ]


if __name__ == "__main__":
    for r in run(quick=False):
        print(r.line())
