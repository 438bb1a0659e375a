"""Concurrency: a round of 16 I/O-bound calls per mode, and async-vs-sync loop overhead.

Targets (issue 5): threads and async finish 16 x 200 ms calls within 1.2x of 200 ms;
sequential takes about 16x. The async path of a 10-round loop costs within 1.1x of
the sync path (same provider, interleaved).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from benchmarks._common import Result, interleaved
from nbagent import Chat, configure, tool
from nbagent.testing._scripted import ScriptedProvider, call_tools, reply

DELAY = 0.2


@tool
def wait_io(n: int) -> int:
    """Waits like a network call."""
    time.sleep(DELAY)
    return n


@tool
async def await_io(n: int) -> int:
    """Awaits like a network call."""
    await asyncio.sleep(DELAY)
    return n


@tool
def quick(n: int) -> int:
    """Returns at once."""
    return n


def _round_time(mode: str, fn: Any) -> float:
    script = [call_tools(*[(fn.name, {"n": i}) for i in range(16)]), reply("done")]
    chat = Chat(provider=ScriptedProvider(script), stream=False).with_tools(fn)
    chat.with_tool_options(concurrency=mode, max_concurrency=16)
    t0 = time.perf_counter()
    chat.ask("go")
    return time.perf_counter() - t0


def _loop_script() -> list[Any]:
    return [call_tools(("quick", {"n": i})) for i in range(10)] + [reply("done")]


def _providers() -> dict[str, Any]:
    """Scripted in-process provider, and the fake server through the OpenAI SDK if available."""
    out: dict[str, Any] = {"scripted": None}
    try:
        from nbagent.providers import OpenAIProvider  # noqa: F401
        from nbagent.testing import FakeLLMServer  # noqa: F401
    except ImportError:
        return out
    out["openai-chat (fake server)"] = "openai"
    return out


def run(quick: bool = False) -> list[Result]:
    configure(quiet=True, display=False)
    results: list[Result] = []
    for mode in ("sequential", "threads", "async"):
        for fn in (wait_io, await_io):
            t = _round_time(mode, fn)
            ratio = t / DELAY
            if mode == "sequential":
                target, met = "~16x (one at a time)", 14 <= ratio <= 18
            else:
                target, met = "<= 1.2x of 200 ms", ratio <= 1.2
            results.append(
                Result(
                    f"16 x 200 ms calls, {mode}, {fn.name}",
                    ratio,
                    "x",
                    target,
                    met,
                    f"{t * 1000:.0f} ms",
                )
            )

    repeat = 5 if quick else 20
    batch = 20  # chats per sample: the async ones share one event loop, as in a notebook

    def sync_loops() -> None:
        for _ in range(batch):
            chat = Chat(provider=ScriptedProvider(_loop_script()), stream=False)
            chat.with_tools(quick_tool).ask("go")

    def async_loops() -> None:
        async def main() -> None:
            for _ in range(batch):
                chat = Chat(provider=ScriptedProvider(_loop_script()), stream=False)
                await chat.with_tools(quick_tool).ask_async("go")

        asyncio.run(main())

    times = interleaved({"sync": sync_loops, "async": async_loops}, repeat)
    sync_t, sync_cpu = (v / batch for v in times["sync"])
    async_t, async_cpu = (v / batch for v in times["async"])
    results.append(
        Result(
            "10-round loop (scripted provider), sync",
            sync_t * 1000,
            "ms",
            detail=f"cpu {sync_cpu * 1000:.2f} ms",
        )
    )
    results.append(
        Result(
            "10-round loop, async / sync",
            async_t / sync_t,
            "x",
            "<= 1.1x",
            async_t / sync_t <= 1.1,
            f"async {async_t * 1000:.2f} ms (cpu {async_cpu * 1000:.2f}), "
            f"sync {sync_t * 1000:.2f} ms",
        )
    )
    results.extend(_fake_server_ratio(repeat))
    return results


quick_tool = quick


def _fake_server_ratio(repeat: int) -> list[Result]:
    """Sync vs async API through the OpenAI adapter, the fake server in a child process."""
    try:
        from benchmarks.bench_providers import KEY, MODELS, Server, _system, get_weather
        from nbagent import tool as make_tool
        from nbagent.providers import OpenAIProvider
    except ImportError:
        return []
    server = Server()
    try:
        provider = OpenAIProvider(MODELS["openai-chat"], base_url=server.openai, api_key=KEY)
        weather = make_tool(get_weather)
        chats = 5

        def one_chat() -> Chat:
            return Chat(provider=provider, system=_system(10), stream=False).with_tools(weather)

        def sync_loops() -> None:
            for _ in range(chats):
                one_chat().ask("What is the weather in Paris?", max_steps=40)

        # One long-lived event loop, as in a notebook kernel: the async client is
        # created once per loop, like the sync client once per provider.
        loop = asyncio.Runner()

        def async_loops() -> None:
            async def main() -> None:
                for _ in range(chats):
                    await one_chat().ask_async("What is the weather in Paris?", max_steps=40)

            loop.run(main())

        import openai

        raw_sync = openai.OpenAI(base_url=server.openai, api_key=KEY, max_retries=0)
        raw_async = openai.AsyncOpenAI(base_url=server.openai, api_key=KEY, max_retries=0)
        body = {
            "model": MODELS["openai-chat"],
            "messages": [
                {"role": "system", "content": _system(1)},
                {"role": "user", "content": "hi"},
            ],
        }

        def raw_sync_requests() -> None:
            for _ in range(chats * 11):
                raw_sync.chat.completions.create(**body)

        def raw_async_requests() -> None:
            async def main() -> None:
                for _ in range(chats * 11):
                    await raw_async.chat.completions.create(**body)

            loop.run(main())

        times = interleaved(
            {
                "sync": sync_loops,
                "async": async_loops,
                "raw_sync": raw_sync_requests,
                "raw_async": raw_async_requests,
            },
            repeat,
        )
        loop.run(raw_async.close())
        raw_sync.close()
        loop.close()
    finally:
        server.close()
    (a_wall, a_cpu), (s_wall, s_cpu) = times["async"], times["sync"]
    ratio = a_wall / s_wall
    raw_ratio = times["raw_async"][0] / times["raw_sync"][0]
    own = ratio / raw_ratio
    detail = (
        f"per chat: async {a_wall / chats * 1000:.1f} ms (cpu {a_cpu / chats * 1000:.1f}), "
        f"sync {s_wall / chats * 1000:.1f} ms (cpu {s_cpu / chats * 1000:.1f}); "
        "server in a child process, one event loop"
    )
    return [
        Result(
            "10-round loop via fake server (openai chat), async / sync", ratio, "x", detail=detail
        ),
        Result(
            "  the same requests through the raw openai SDK, async / sync",
            raw_ratio,
            "x",
            detail="AsyncOpenAI's own transport: the floor for any async path through it",
        ),
        Result(
            "  nbagent's own async overhead (the two ratios above)", own, "x", "<= 1.1x", own <= 1.1
        ),
    ]
