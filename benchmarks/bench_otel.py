"""Tracing (``nbagent.instrument()``): what it costs on, and that it costs nothing off.

A 10-round tool loop (10 model requests, 9 tool calls) through the real OpenAI SDK
against the fake LLM server in a subprocess (as ``bench_providers``), three ways,
interleaved in one run: never instrumented (the baseline), instrumented with the
OpenTelemetry SDK (a ``BatchSpanProcessor`` whose exporter drops the spans, so the
number is nbagent's span building plus the SDK's, not a network's), instrumented with
OpenTelemetry's no-op provider (nbagent's own work alone: reading the record's changes,
building attributes), and off again after ``uninstrument()``. CPU time of this process
(the processor's thread included).

"off" runs exactly the code "never" runs (after ``uninstrument()`` no chat has a listener:
tests/otel/test_traces.py checks it structurally), so its ratio is this measurement's noise
on the machine it ran on; read the "on" ratio against it.

The SDK's own cost per span (about 80 us of CPU on the 2-core reference machine, measured
here as a floor: the same number of spans made directly) is most of the "on" figure; the
issue's target (< 1.05x on a model that answers in a millisecond) is under that floor, and
the report says so rather than hiding it.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable, Sequence

from benchmarks._common import Result
from benchmarks.bench_providers import Server, nbagent_loop

ROUNDS = 10
_ATTRS = {f"gen_ai.attribute_{n}": n for n in range(8)}


def _provider() -> object:
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        SpanExporter,
        SpanExportResult,
    )

    class Drop(SpanExporter):
        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Drop()))
    return provider


def run(quick: bool) -> list[Result]:
    import nbagent

    repeat = 5 if quick else 15
    server = Server()
    try:
        loop = nbagent_loop("openai-chat", False, server, ROUNDS)
        provider = _provider()

        from opentelemetry.trace import NoOpTracerProvider

        def floor() -> object:  # the SDK alone: as many spans as a traced loop makes
            tracer = provider.get_tracer("floor")  # type: ignore[attr-defined]
            for _ in range(2 * ROUNDS + 1):
                span = tracer.start_span("chat x", attributes=_ATTRS)
                span.set_attributes(_ATTRS)
                span.end()
            return loop()

        # instrument() and uninstrument() happen outside the timed loop: they are once per
        # process in real use (and attach to every live chat, which the benchmark piles up)
        variants: dict[str, tuple[object, Callable[[], object]]] = {
            "never": (None, loop),
            "on": (provider, loop),
            "noop": (NoOpTracerProvider(), loop),
            "floor": (None, floor),
            "off": (None, loop),
        }
        cpu: dict[str, list[float]] = {k: [] for k in variants}
        names = list(variants)
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
        times = {k: (0.0, statistics.median(v)) for k, v in cpu.items()}
    finally:
        server.close()
    never, traced, own, floor_, off = (times[k][1] for k in ("never", "on", "noop", "floor", "off"))
    return [
        Result(
            f"{ROUNDS}-round loop, tracing off after uninstrument()",
            off / never,
            "x",
            "<= 1.02x never instrumented (cpu)",
            off / never <= 1.02,
            f"never cpu {never * 1000:.1f} ms",
        ),
        Result(
            f"{ROUNDS}-round loop, nbagent's own tracing work (no-op provider)",
            own / never,
            "x",
            "<= 1.03x never instrumented (cpu)",
            own / never <= 1.03,
        ),
        Result(
            f"{ROUNDS}-round loop plus {2 * ROUNDS + 1} SDK spans made directly (the floor)",
            floor_ / never,
            "x",
            "",
            None,
            "what the OpenTelemetry SDK alone costs for the spans a traced loop makes",
        ),
        Result(
            f"{ROUNDS}-round loop, instrument() on (OTel SDK, batch processor)",
            traced / never,
            "x",
            "< 1.05x never instrumented (cpu)",
            traced / never < 1.05,
            f"cpu {traced * 1000:.1f} ms; {(traced - never) / (2 * ROUNDS) * 1e6:.0f} us per span",
        ),
    ]
