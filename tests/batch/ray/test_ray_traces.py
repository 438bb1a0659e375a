"""Tracing a batch on Ray: the driver's ``invoke_workflow`` span is the parent of the chats'
spans made on the workers (the trace travels in the run's spec), whatever worker runs them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from _ray_agents import TracedDemoChat
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import nbagent


def test_the_workers_chats_are_children_of_the_drivers_batch_span(
    ray_cluster: Any, tmp_path: Path
) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    spans_file = tmp_path / "worker-spans.jsonl"
    nbagent.instrument(provider)
    try:
        result = nbagent.batch(
            ["Check the status of order 41", "Check the status of order 42"],
            TracedDemoChat(str(spans_file)),
            progress=False,
            backend="ray",
        )
    finally:
        nbagent.uninstrument()
    assert list(result["status"]) == ["done", "done"]
    (run,) = [s for s in exporter.get_finished_spans() if s.name.startswith("invoke_workflow")]
    trace_id = f"0x{run.context.trace_id:032x}"
    span_id = f"0x{run.context.span_id:016x}"
    worker = [json.loads(line) for line in spans_file.read_text().splitlines()]
    agents = [s for s in worker if s["name"] == "invoke_agent nbagent"]
    assert {s["attributes"]["gen_ai.conversation.id"] for s in agents} == set(result["chat_id"])
    assert {s["parent_id"] for s in agents} == {span_id}
    assert {s["context"]["trace_id"] for s in worker} == {trace_id}
    assert {s["name"] for s in worker} >= {"chat demo", "execute_tool order_status"}


def test_kept_workers_follow_each_runs_content_setting_and_stop_when_it_is_off(
    ray_cluster: Any, tmp_path: Path
) -> None:
    """Workers are kept between batches. They traced every later batch as the first traced
    one asked: prompts and arguments left a worker after the driver asked for no content,
    and after it turned tracing off. Each batch's settings now apply to its rows."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))

    def run(label: str) -> list[dict[str, Any]]:
        path = tmp_path / f"{label}.jsonl"
        prompts = [f"Check the status of order 41 ({label})", f"Check order 43 ({label})"]
        result = nbagent.batch(prompts, TracedDemoChat(str(path)), progress=False, backend="ray")
        assert list(result["status"]) == ["done", "done"]
        lines = path.read_text().splitlines() if path.exists() else []
        return [json.loads(line) for line in lines]

    try:
        nbagent.instrument(provider, content=True)
        with_content = run("with-content")
        nbagent.instrument(provider, content=False)
        without = run("without-content")
    finally:
        nbagent.uninstrument()
    off = run("tracing-off")
    assert any("gen_ai.input.messages" in s["attributes"] for s in with_content)
    assert without and not any("gen_ai.input.messages" in s["attributes"] for s in without)
    assert "without-content" not in json.dumps(without)
    assert off == []
