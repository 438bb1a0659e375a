"""The issue's turn sent over OTLP/HTTP to a real receiver, Arize Phoenix, started by the
test from its own virtualenv (.ci/ensure-phoenix), then read back from Phoenix's REST API.

Phoenix is not in the project's venv: it pins ``anthropic<2``. ``make test`` installs it
(``.ci/ensure-phoenix``) and sets ``NBAGENT_REQUIRE_PHOENIX=1``: a missing Phoenix then
fails this test instead of skipping it.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _scenario import SECRETS, issue_turn
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

import nbagent

PHOENIX = Path(__file__).parents[2] / ".ci" / "phoenix" / "venv" / "bin" / "phoenix"
PROJECT = "nbagent-tests"
STARTUP = 600.0
"""Seconds Phoenix may take to start (importing it takes most of that: over three
minutes on a loaded 2-core machine, about twenty seconds on a quiet one)."""


def _required() -> bool:
    return os.environ.get("NBAGENT_REQUIRE_PHOENIX", "").strip().lower() not in (
        "",
        "0",
        "false",
        "no",
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.load(response)


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Phoenix server on free loopback ports, with its own working directory; its URL."""
    if not PHOENIX.exists():
        why = f"Arize Phoenix is not installed at {PHOENIX} (run .ci/ensure-phoenix)"
        if _required():
            pytest.fail(why)
        pytest.skip(why)
    port, grpc = _free_port(), _free_port()
    workdir = tmp_path_factory.mktemp("phoenix")
    env = {
        **os.environ,
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(grpc),
        "PHOENIX_WORKING_DIR": str(workdir),
        "PHOENIX_TELEMETRY_ENABLED": "false",
        "PHOENIX_ALLOW_EXTERNAL_RESOURCES": "false",
    }
    log = (workdir / "phoenix.log").open("wb")
    proc = subprocess.Popen(
        [str(PHOENIX), "serve"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP
        while True:
            try:
                with urllib.request.urlopen(f"{url}/healthz", timeout=2) as response:
                    if response.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            if proc.poll() is not None:
                raise RuntimeError(
                    f"Phoenix exited ({proc.returncode}): {(workdir / 'phoenix.log').read_text()}"
                )
            if time.monotonic() > deadline:
                raise RuntimeError(f"Phoenix did not start within {STARTUP:.0f} s")
            time.sleep(0.5)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        log.close()


def _spans(url: str, expected: int) -> list[dict[str, Any]]:
    """The project's spans, once Phoenix has ingested ``expected`` of them (a bounded wait)."""
    deadline = time.monotonic() + 60
    found: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        try:
            found = _get(f"{url}/v1/projects/{PROJECT}/spans?limit=1000")["data"]
        except urllib.error.HTTPError as exc:
            if exc.code != 404:  # 404: the project exists once its first span is in
                raise
        if len(found) >= expected:
            return found
        time.sleep(0.5)
    raise AssertionError(f"Phoenix has {len(found)} spans of {expected} after 60 s")


def test_the_issue_turn_arrives_at_phoenix_with_its_genai_attributes(phoenix: str) -> None:
    provider = TracerProvider(
        resource=Resource.create(
            {"service.name": "nbagent-tests", "openinference.project.name": PROJECT}
        )
    )
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(f"{phoenix}/v1/traces")))
    nbagent.instrument(provider, content=True)
    try:
        chat = issue_turn()
    finally:
        nbagent.uninstrument()
    assert provider.force_flush(30_000)
    provider.shutdown()

    # two runs of the turn, two model requests, three calls (denied, MCP, hosted)
    spans = _spans(phoenix, 7)
    by_name: dict[str, list[dict[str, Any]]] = {}
    for s in spans:
        by_name.setdefault(s["name"], []).append(s)
    assert sorted(by_name) == [
        "chat gpt-4.1-mini",
        "execute_tool ask_question",
        "execute_tool notes_read_note",
        "execute_tool refund",
        "invoke_agent nbagent",
    ]
    agents = by_name["invoke_agent nbagent"]
    assert len(agents) == 2 and len(by_name["chat gpt-4.1-mini"]) == 2
    for agent in agents:
        assert agent["attributes"]["gen_ai.operation.name"] == "invoke_agent"
        assert agent["attributes"]["gen_ai.conversation.id"] == chat.id
    for request in by_name["chat gpt-4.1-mini"]:
        a = request["attributes"]
        assert a["gen_ai.operation.name"] == "chat"
        assert a["gen_ai.provider.name"] == "openai"
        assert a["gen_ai.request.model"] == "gpt-4.1-mini"
        assert a["gen_ai.usage.input_tokens"] > 0

    (denied,) = by_name["execute_tool refund"]
    a = denied["attributes"]
    assert a["gen_ai.operation.name"] == "execute_tool"
    assert a["gen_ai.tool.call.id"] == chat.tool_calls[0].id
    assert a["nbagent.call.status"] == "denied"
    first = min(agents, key=lambda s: s["start_time"])
    assert denied["parent_id"] == first["context"]["span_id"]
    events = {e["name"]: e["attributes"] for e in denied["events"]}
    assert events["nbagent.approval.decided"]["nbagent.decision.verdict"] == "denied"
    assert events["nbagent.approval.decided"]["nbagent.decision.reason"] == (
        "refunds need a manager"
    )
    assert "nbagent.approval.requested" in events

    (mcp,) = by_name["execute_tool notes_read_note"]
    assert mcp["attributes"]["nbagent.call.server"] == "notes"
    assert mcp["attributes"]["nbagent.call.status"] == "ok"
    assert "nbagent.call.hosted" not in mcp["attributes"]  # absent: the default, not hosted
    (hosted,) = by_name["execute_tool ask_question"]
    assert hosted["attributes"]["nbagent.call.hosted"] is True
    assert hosted["attributes"]["nbagent.call.server"] == "deepwiki"

    stored = json.dumps(spans)
    for secret in SECRETS:
        assert secret not in stored
