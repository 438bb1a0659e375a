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
  kinds, attributes, events, links) made directly through the same SDK and exporter as
  ``batch``: what the OpenTelemetry SDK itself costs for them, with no nbagent code.

The issue's target (< 1.05x) is read against ``batch``: the configuration users run. Both
processors cost about the same CPU (the span's building dominates, not the hand-over);
the batch processor moves the export off the caller's thread, so a loop's latency sees
even less of it than its CPU does. Where the floor alone is over 1.05x (it is on the
2-core reference machine: the SDK spends about 80-90 us of CPU building one span and as
much again encoding it), the target cannot be met by nbagent; the last line reads it as
what nbagent adds on top of the SDK's floor.
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
    """The same spans made directly with the SDK: one call per thing nbagent sets."""
    from opentelemetry.trace import Link

    tracer = provider.get_tracer("floor")
    shapes = [
        (
            s.name,
            s.kind,
            dict(s.attributes or {}),
            [(e.name, dict(e.attributes or {})) for e in s.events],
            [Link(s.context, {"nbagent.link": "x"}) for _ in s.links],
        )
        for s in spans
    ]

    def make() -> None:
        for name, kind, attributes, events, links in shapes:
            span = tracer.start_span(name, kind=kind, attributes=attributes, links=links)
            for event, attrs in events:
                span.add_event(event, attrs)
            span.end()

    return make


def run(quick: bool) -> list[Result]:
    from opentelemetry.trace import NoOpTracerProvider

    import nbagent

    repeat = 7 if quick else 21
    server = Server()
    try:
        loop = nbagent_loop("openai-chat", False, server, ROUNDS)
        spans = _spans_of(loop)
        batch, floor_provider = _batch(), _batch()
        simple, memory = _simple()
        make_spans = _replayer(spans, floor_provider)

        def floor() -> object:
            out = loop()
            make_spans()
            floor_provider.force_flush()
            return out

        def flushed(provider: Any) -> Callable[[], object]:
            def traced() -> object:
                out = loop()
                provider.force_flush()  # the export's CPU is this run's
                return out

            return traced

        def cleared() -> object:
            out = loop()
            memory.clear()
            return out

        # instrument() and uninstrument() happen outside the timed loop: they are once per
        # process in real use (and attach to every live chat, which the benchmark piles up)
        variants: dict[str, tuple[object, Callable[[], object]]] = {
            "never": (None, loop),
            "batch": (batch, flushed(batch)),
            "noop": (NoOpTracerProvider(), loop),
            "simple": (simple, cleared),
            "floor": (None, floor),
            "off": (None, loop),
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
        ratio = {
            k: statistics.median(x / n for x, n in zip(v, cpu["never"], strict=True))
            for k, v in cpu.items()
        }
    finally:
        server.close()
    never = med["never"]
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
            "the issue's < 1.05x on is under the floor itself on this machine: see docs/traces.md",
        ),
    ]
