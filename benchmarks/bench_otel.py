"""Tracing (``nbagent.instrument()``): what it costs on, and that it costs nothing off.

A 10-round tool loop (10 model requests, 9 tool calls) through the real OpenAI SDK
against the fake LLM server in a subprocess (as ``bench_providers``), interleaved in one
run (the order turns each round), CPU time of this process (every thread, the span
processor's included); each ratio is the median over rounds of the variant's time over
the same round's ``never`` (paired: a shared machine's drifting load cancels out):

- ``never``: never instrumented (the baseline); ``off``: after ``uninstrument()``, which
  runs exactly the code ``never`` runs (no chat has a listener: tests/otel/test_traces.py
  checks it structurally), so its ratio is this measurement's noise on this machine;
- ``noop``: instrumented with OpenTelemetry's no-op provider: nbagent's own work alone
  (reading the record's changes, building attributes);
- ``batch``: what an OTLP user runs: the SDK's ``BatchSpanProcessor`` with the OTLP
  exporter's own encoding (the spans serialized to protobuf, then dropped instead of
  posted, so no network is measured); the processor's thread is flushed inside the
  timed run, so the export's CPU is charged to the run that made the spans;
- ``simple``: what the tests use: ``SimpleSpanProcessor`` and the in-memory exporter
  (export on the caller's thread);
- ``floor``: the loop, plus the very spans a traced loop makes (captured once: names,
  kinds, attributes, events, links, status, each request and call a child of its turn)
  made directly through the same SDK and exporter as ``batch``: what the OpenTelemetry SDK
  itself costs for them, with no nbagent code.

A 50 ms loop is CPU-bound on loopback, and a shared machine's CPU time is noisy: one
round's ratio swings by +-15% (the quartiles printed), more than the few points looked
for. So the spans' own CPU is also timed **inside** the runs, round by round: in
``timed`` runs (``batch``'s, in rounds of their own so that ``batch`` carries no timer),
the CPU spent in every traced chat's record hook (``Tracer.on_change``:
nbagent's work and the SDK's span building it triggers, on the loop's thread, with
whatever the loop left in the caches) plus the export; in the ``floor`` runs, the SDK
making the same spans plus the export. Their difference over the loop's CPU is what
nbagent adds to the SDK's spans, without the loop's own noise (the timer's own calls
are counted against nbagent).

Last, the loop with a model that answers in 50 ms (the fake server sleeps): CPU
does not change with latency, but the time a user waits does; the wall-clock ratio of
``batch`` over ``never`` is what tracing costs that user.

The issue's target (< 1.05x) is first read against ``batch``: the configuration users
run. Where the floor alone is over 1.05x (it is on the 2-core reference machine: the SDK
spends about 60-90 us of CPU building one span and 150-200 us encoding it), no tracer
built on the SDK can meet it; the two "over the floor" lines read it as what nbagent
adds to the SDK's own spans, and the 50 ms line as what a user waits for.
"""

from __future__ import annotations

import gc
import os
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from benchmarks._common import Result
from benchmarks.bench_providers import Server, nbagent_loop

ROUNDS = 10
LATENCY = 0.05  # the slow model's seconds per answer


def _encoding_exporter() -> Any:
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    class Encode(SpanExporter):
        """The OTLP exporter's work up to the network: the spans as protobuf bytes."""

        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            encode_spans(spans).SerializePartialToString()
            return SpanExportResult.SUCCESS

    return Encode()


def _batch() -> Any:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(_encoding_exporter()))
    return provider


def _simple() -> tuple[Any, Any]:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    provider, exporter = TracerProvider(), InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def _spans_of(loop: Callable[[], object]) -> list[Any]:
    """The spans one traced loop makes (in the order they ended)."""
    import nbagent

    provider, exporter = _simple()
    nbagent.instrument(provider)
    try:
        loop()
    finally:
        nbagent.uninstrument()
    return list(exporter.get_finished_spans())


def _replayer(spans: Sequence[Any], provider: Any) -> Callable[[], None]:
    """The same spans made directly with the SDK: one call per thing nbagent sets, each
    a child of the same parent (a request's and a call's: its turn), with its status."""
    from opentelemetry import trace
    from opentelemetry.trace import Link, StatusCode

    tracer = provider.get_tracer("floor")
    index = {s.context.span_id: n for n, s in enumerate(spans)}
    shapes = [
        (
            s.name,
            s.kind,
            dict(s.attributes or {}),
            [(e.name, dict(e.attributes or {})) for e in s.events],
            [Link(s.context, {"nbagent.link": "x"}) for _ in s.links],
            s.status if s.status.status_code is not StatusCode.UNSET else None,
            index.get(s.parent.span_id) if s.parent is not None else None,
        )
        for s in spans
    ]
    # parents first (a turn starts before its requests and calls), ended in the order seen
    order = sorted(range(len(shapes)), key=lambda n: shapes[n][6] is not None)

    def make() -> None:
        made: dict[int, Any] = {}
        for n in order:
            name, kind, attributes, events, links, _status, parent = shapes[n]
            context = trace.set_span_in_context(made[parent]) if parent is not None else None
            made[n] = tracer.start_span(
                name, context=context, kind=kind, attributes=attributes, links=links
            )
        for n, (_name, _kind, _attributes, events, _links, status, _parent) in enumerate(shapes):
            span = made[n]
            for event, attrs in events:
                span.add_event(event, attrs)
            if status is not None:
                span.set_status(status)
            span.end()

    return make


class _Hook:
    """CPU spent inside every traced chat's record hook (``Tracer.on_change``, nbagent's
    work and the SDK's spans it makes), measured in the loop, on the loop's thread."""

    def __init__(self) -> None:
        from nbagent.otel._spans import Tracer

        self.spent = 0.0
        self._tracer = Tracer
        self._plain = Tracer.on_change

    def __enter__(self) -> _Hook:
        plain = self._plain

        def on_change(tracer: Any, change: Any) -> None:
            c0 = time.thread_time()
            try:
                plain(tracer, change)
            finally:
                self.spent += time.thread_time() - c0

        self.spent = 0.0
        self._tracer.on_change = on_change  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        self._tracer.on_change = self._plain  # type: ignore[method-assign]


def _slow_model(quick: bool) -> tuple[float, float]:
    """Wall and CPU ratio of ``batch`` over ``never`` with a model answering in 50 ms."""
    import nbagent

    server = Server(delay=LATENCY)
    try:
        loop = nbagent_loop("openai-chat", False, server, ROUNDS)
        provider = _batch()

        def traced() -> object:
            out = loop()
            provider.force_flush()
            return out

        wall: dict[str, list[float]] = {"never": [], "batch": []}
        cpu: dict[str, list[float]] = {"never": [], "batch": []}
        for n in range(1 + (5 if quick else 11)):
            for name in ("never", "batch") if n % 2 else ("batch", "never"):
                if name == "batch":
                    nbagent.instrument(provider)
                gc.collect()
                w0, c0 = time.perf_counter(), time.process_time()
                (traced if name == "batch" else loop)()
                spent, wall_spent = time.process_time() - c0, time.perf_counter() - w0
                if name == "batch":
                    nbagent.uninstrument()
                if n:
                    wall[name].append(wall_spent)
                    cpu[name].append(spent)
    finally:
        server.close()

    def paired(xs: dict[str, list[float]]) -> float:
        return statistics.median(b / n for b, n in zip(xs["batch"], xs["never"], strict=True))

    return paired(wall), paired(cpu)


def run(quick: bool) -> list[Result]:
    from opentelemetry.trace import NoOpTracerProvider

    import nbagent

    repeat = 7 if quick else 21
    server = Server()
    try:
        loop = nbagent_loop("openai-chat", False, server, ROUNDS)
        spans = _spans_of(loop)
        batch, floor_provider, timing = _batch(), _batch(), _batch()
        simple, memory = _simple()
        make_spans = _replayer(spans, floor_provider)
        # the spans' own cpu, timed inside the runs: the floor's (made, then encoded) and
        # the traced loop's (in the tracer's hook, then encoded), one pair per round
        parts: dict[str, list[float]] = {"floor": [], "batch": []}

        def floor() -> object:
            out = loop()
            c0 = time.process_time()
            make_spans()
            floor_provider.force_flush()
            parts["floor"].append(time.process_time() - c0)
            return out

        def traced() -> object:
            out = loop()
            batch.force_flush()  # the export's CPU is this run's
            return out

        def timed() -> object:  # as traced, timing the hook (its timer calls count too)
            with _Hook() as hook:
                out = loop()
            c0 = time.process_time()
            timing.force_flush()
            parts["batch"].append(hook.spent + time.process_time() - c0)
            return out

        def cleared() -> object:
            out = loop()
            memory.clear()
            return out

        # instrument() and uninstrument() happen outside the timed loop: they are once per
        # process in real use (and attach to every live chat, which the benchmark piles up)
        variants: dict[str, tuple[object, Callable[[], object]]] = {
            "never": (None, loop),
            "batch": (batch, traced),
            "noop": (NoOpTracerProvider(), loop),
            "simple": (simple, cleared),
            "floor": (None, floor),
            "off": (None, loop),
            "timed": (timing, timed),
        }
        cpu: dict[str, list[float]] = {k: [] for k in variants}
        names = list(variants)
        load = os.getloadavg()
        for n in range(2 + repeat):  # two warm-up rounds; the order turns each round
            for name in names[n % len(names) :] + names[: n % len(names)]:
                tracing, fn = variants[name]
                if tracing is not None:
                    nbagent.instrument(tracing)
                gc.collect()  # the garbage of the run before is not this one's cost
                c0 = time.process_time()
                fn()
                spent = time.process_time() - c0
                if tracing is not None:
                    nbagent.uninstrument()
                if n >= 2:
                    cpu[name].append(spent)
        load_after = os.getloadavg()
        med = {k: statistics.median(v) for k, v in cpu.items()}
        spans_cpu = {k: statistics.median(v[-repeat:]) for k, v in parts.items()}
        ratio = {
            k: statistics.median(x / n for x, n in zip(v, cpu["never"], strict=True))
            for k, v in cpu.items()
        }
    finally:
        server.close()
    slow_wall, slow_cpu = _slow_model(quick)
    never = med["never"]
    over = [(b - f) / n for b, f, n in zip(cpu["batch"], cpu["floor"], cpu["never"], strict=True)]
    over_q = statistics.quantiles(over, n=4)
    spread = statistics.quantiles(
        [x / n for x, n in zip(cpu["off"], cpu["never"], strict=True)], n=4
    )
    n_spans = len(spans)
    events = sum(len(s.events) for s in spans)
    loadavg = f"load average {load[0]:.2f} before, {load_after[0]:.2f} after"
    per_span = (ratio["batch"] - 1) * never / n_spans * 1e6
    sdk_per_span = (ratio["floor"] - 1) * never / n_spans * 1e6
    return [
        Result(
            f"{ROUNDS}-round loop, tracing off after uninstrument()",
            ratio["off"],
            "x",
            "<= 1.02x never instrumented (cpu)",
            ratio["off"] <= 1.02,
            f"never cpu {never * 1000:.1f} ms; {repeat} interleaved rounds, off/never quartiles "
            f"{spread[0]:.3f}..{spread[2]:.3f}; {loadavg}",
        ),
        Result(
            f"{ROUNDS}-round loop, nbagent's own tracing work (no-op provider)",
            ratio["noop"],
            "x",
            "<= 1.03x never instrumented (cpu)",
            ratio["noop"] <= 1.03,
        ),
        Result(
            f"{ROUNDS}-round loop plus its {n_spans} spans made by the SDK alone (floor)",
            ratio["floor"],
            "x",
            "",
            None,
            f"{events} span events; batch processor, OTLP encoding; {sdk_per_span:.0f} us per span",
        ),
        Result(
            f"{ROUNDS}-round loop, instrument() on (in-memory, simple processor)",
            ratio["simple"],
            "x",
            "",
            None,
            "what the tests run: export on the caller's thread",
        ),
        Result(
            f"{ROUNDS}-round loop, instrument() on (batch processor, OTLP encoding)",
            ratio["batch"],
            "x",
            "< 1.05x never instrumented (cpu)",
            ratio["batch"] < 1.05,
            f"cpu {med['batch'] * 1000:.1f} ms; {per_span:.0f} us per span, "
            f"{(ratio['batch'] - ratio['floor']) * 100:+.1f} points over the floor",
        ),
        Result(
            f"{ROUNDS}-round loop, instrument() on over the SDK's own floor",
            ratio["batch"] - ratio["floor"] + 1,
            "x",
            "< 1.05x (the reading proposed: what nbagent adds to the SDK's spans)",
            ratio["batch"] - ratio["floor"] < 0.05,
            f"one round's on-minus-floor quartiles {over_q[0] * 100:+.1f}..{over_q[2] * 100:+.1f} "
            "points: the loop's noise; the line below times the spans inside the runs",
        ),
        Result(
            f"the same {n_spans} spans, timed inside the runs: on over the floor",
            (spans_cpu["batch"] - spans_cpu["floor"]) / never + 1,
            "x",
            "< 1.05x (points of the loop's cpu)",
            (spans_cpu["batch"] - spans_cpu["floor"]) / never < 0.05,
            f"on: the tracer's hook in the loop + encoding {spans_cpu['batch'] * 1e3:.2f} ms; "
            f"floor: the SDK making them + encoding {spans_cpu['floor'] * 1e3:.2f} ms; "
            f"the floor is {spans_cpu['floor'] / never * 100:.1f}% of the loop",
        ),
        Result(
            f"{ROUNDS}-round loop, model answers in {LATENCY * 1000:.0f} ms, on (wall clock)",
            slow_wall,
            "x",
            "< 1.05x never instrumented (wall)",
            slow_wall < 1.05,
            f"cpu {slow_cpu:.3f}x: the cpu is the same as at 0 ms, the wait is not",
        ),
    ]
