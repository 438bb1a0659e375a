"""What persisting a chat costs: a 10-round tool loop with and without a SQLite store.

Measured interleaved in the same run (same machine state):

- against the offline demo model (10 turns of one tool round each; the model
  costs microseconds, so this is the store's raw cost, reported without a target);
- against the loopback fake server (in a child process, as in
  ``bench_providers``) through the real ``openai`` SDK, streaming: a 10-round
  tool loop, the issue's target (under 10% overhead);
- loading a stored chat of 1,000 tool calls with ``Chat.load`` (target < 0.5 s).

Three more stores run in the fake-server loop, to show where the time goes (no
targets; none is a usable store): one that handles every event but writes
nothing per round (the Python side: queueing and encoding events); one that
also commits an *empty* transaction wherever a write would be (the floor of
any design keeping both guarantees: a claim committed before each tool runs,
a result committed before the next model request); and one that writes only
what those guarantees need (the call rows, claims and results; no messages,
no events), in the same two transactions a round.
"""

from __future__ import annotations

import contextlib
import statistics
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import nbagent
from benchmarks._common import Result, interleaved
from nbagent import Chat, LLMToolResponse, ModelRequest, ToolCall, ToolResultMessage, tool
from nbagent.store import SQLiteStore
from nbagent.store._protocol import CallFinal, ClaimResult, Entry, NewCall

ROUNDS = 10


@tool
def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: First number.
        b: Second number.
    """
    return a + b


class _LoopProvider:
    """In-process model: ``rounds`` tool rounds per turn, then an answer."""

    name = "loop"
    model = "loop"

    def __init__(self, rounds: int, calls: int = 1):
        self.rounds = rounds
        self.calls = calls

    def complete(self, request: ModelRequest) -> LLMToolResponse:
        messages = request.messages
        done = 0
        for m in reversed(messages):
            if getattr(m, "role", "") == "user":
                break
            done += isinstance(m, ToolResultMessage)
        if done >= self.rounds * self.calls:
            return LLMToolResponse(text=f"done after {done} calls", model="loop", provider="loop")
        n = sum(len(getattr(m, "tool_calls", ())) for m in messages)
        calls = tuple(
            ToolCall(f"call_{n + i}", "add", {"a": n + i, "b": 1}) for i in range(self.calls)
        )
        return LLMToolResponse(
            text="",
            tool_calls=calls,
            stop_reason="tool_use",
            model="loop",
            provider="loop",
            input_tokens=10,
            output_tokens=5,
        )

    async def complete_async(self, request: ModelRequest) -> LLMToolResponse:
        return self.complete(request)


class _NoWrites(SQLiteStore):
    """Handles every event (queues, encodes) but writes nothing per round."""

    commits = False  # whether an empty transaction stands where each write would be

    def _nothing(self) -> contextlib.AbstractContextManager[Any]:
        return self._tx() if self.commits else contextlib.nullcontext()

    def write(
        self,
        chat_id: str,
        entries: Sequence[Entry],
        state: Mapping[str, Any] | None = None,
        tools: Mapping[str, Any] | None = None,
    ) -> str | None:
        with self._nothing():
            return None

    def claim(
        self,
        chat_id: str,
        call_id: str,
        owner: str,
        entries: Sequence[Entry] = (),
        state: Mapping[str, Any] | None = None,
        decision: Any = None,
    ) -> ClaimResult:
        with self._nothing():
            return ClaimResult(True, "running", owner)


class _EmptyCommits(_NoWrites):
    """Handles every event, and commits an empty transaction where each write would be.

    The floor of any store that keeps the two guarantees (a claim committed
    before the tool runs, a result committed before the next request).
    """

    commits = True


class _CallsOnly(SQLiteStore):
    """Writes only the call rows, the claims and the results: the guarantees' floor."""

    @staticmethod
    def _calls(entries: Sequence[Entry]) -> list[Entry]:
        return [
            Entry(e.seq, e.type, e.ts, None, e.change)
            for e in entries
            if isinstance(e.change, (NewCall, CallFinal))
        ]

    def write(
        self,
        chat_id: str,
        entries: Sequence[Entry],
        state: Mapping[str, Any] | None = None,
        tools: Mapping[str, Any] | None = None,
    ) -> str | None:
        return super().write(chat_id, self._calls(entries))

    def claim(
        self,
        chat_id: str,
        call_id: str,
        owner: str,
        entries: Sequence[Entry] = (),
        state: Mapping[str, Any] | None = None,
        decision: Any = None,
    ) -> ClaimResult:
        return super().claim(chat_id, call_id, owner, self._calls(entries), decision=decision)


def _demo_loop(store: Any) -> None:
    chat = Chat(model="demo", store=store).with_tools(add)
    for i in range(ROUNDS):
        chat.ask(f"add {i} and 1")
    assert chat.status == "complete"


def _fake_server_loop(provider: Any, store: Any) -> None:
    from benchmarks.bench_providers import _system, get_weather

    chat = Chat(provider=provider, system=_system(ROUNDS + 1), store=store)
    chat.with_tools(nbagent.tool(get_weather))
    chat.ask("What is the weather in Paris?", max_steps=2 * ROUNDS + 4)
    assert chat.status == "complete", chat.status
    assert len(chat.tool_calls) == ROUNDS


def _ratio(name: str, runs: dict[str, tuple[float, float]], base: str, stored: str) -> Result:
    (b, bc), (s, sc) = runs[base], runs[stored]
    ratio = s / b
    per_round = (s - b) / ROUNDS * 1e6
    return Result(
        name,
        ratio,
        "x",
        target="<= 1.10x" if "fake server" in name else "",
        target_met=(ratio <= 1.10) if "fake server" in name else None,
        detail=f"{b * 1000:.2f} -> {s * 1000:.2f} ms, +{per_round:.0f} us a round; "
        f"CPU {sc / bc:.2f}x",
    )


def _fake_server_results(quick: bool, store: SQLiteStore, folder: Path) -> list[Result]:
    from benchmarks.bench_providers import KEY, Server
    from nbagent.providers import OpenAIProvider

    server = Server()  # a child process: the CPU measured is the client's alone
    try:
        with (
            _NoWrites(folder / "no_writes.db") as no_writes,
            _EmptyCommits(folder / "empty_commits.db") as empty_commits,
            _CallsOnly(folder / "calls_only.db") as calls_only,
        ):
            provider = OpenAIProvider(
                "gpt-4.1-mini", base_url=server.openai, api_key=KEY, max_retries=0
            )
            runs = interleaved(
                {
                    "memory": lambda: _fake_server_loop(provider, None),
                    "no writes": lambda: _fake_server_loop(provider, no_writes),
                    "empty commits": lambda: _fake_server_loop(provider, empty_commits),
                    "calls only": lambda: _fake_server_loop(provider, calls_only),
                    "sqlite": lambda: _fake_server_loop(provider, store),
                },
                repeat=10 if quick else 40,
            )
    finally:
        server.close()
    loop = f"fake server: {ROUNDS}-round tool loop"
    return [
        _ratio(f"{loop}, store / no store", runs, "memory", "sqlite"),
        _ratio("  events handled, nothing written / no store", runs, "memory", "no writes"),
        _ratio("  events handled, empty commits / no store", runs, "memory", "empty commits"),
        _ratio("  only call rows, claims, results / no store", runs, "memory", "calls only"),
    ]


def _load_result(quick: bool, folder: Path) -> Result:
    path = folder / "big.db"
    n_calls = 1000
    with SQLiteStore(path) as store:
        chat = Chat(provider=_LoopProvider(n_calls), store=store, max_steps=3 * n_calls)
        chat.with_tools(add)
        chat.ask("add a lot")
        assert len(chat.tool_calls) == n_calls and chat.status == "complete"
        chat_id = chat.id
        del chat
    times = []
    for _ in range(3 if quick else 7):
        t0 = time.perf_counter()
        loaded = Chat.load(chat_id, store=path, tools=[add], provider=_LoopProvider(n_calls))
        times.append(time.perf_counter() - t0)
        assert len(loaded.tool_calls) == n_calls
        loaded.close()
    t = statistics.median(times)
    return Result(
        f"Chat.load of a chat with {n_calls} tool calls",
        t,
        "s",
        target="< 0.5 s",
        target_met=t < 0.5,
        detail=f"min {min(times):.3f} s",
    )


def run(quick: bool = False) -> list[Result]:
    nbagent.configure(quiet=True, display=False)
    results: list[Result] = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        with SQLiteStore(folder / "bench.db") as store:
            runs = interleaved(
                {"memory": lambda: _demo_loop(None), "sqlite": lambda: _demo_loop(store)},
                repeat=10 if quick else 40,
            )
            results.append(
                _ratio(
                    f"demo model: {ROUNDS} tool rounds, store / no store", runs, "memory", "sqlite"
                )
            )
            results.extend(_fake_server_results(quick, store, folder))
        results.append(_load_result(quick, folder))
    return results
