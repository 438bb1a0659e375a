"""Chats naming a model against chats sharing one provider object: the same CPU.

``Chat("gpt-4.1-mini")`` makes a provider per chat. Each made an SDK client of its own
(an SSL context and a connection pool, about 20 ms), and an async client per event loop
the same again: a batch whose ``make_chat`` named a model spent about 20 times the CPU
per chat of one whose chats shared a provider. Providers that would make the same client
now share it (``providers/_clients.py``). Measured here: ``nbagent.batch`` of 3-round
chats, ``make_chat`` naming the model against ``make_chat`` giving one provider, the
fake server in a child process (the client's CPU alone), interleaved.
"""

from __future__ import annotations

import statistics
import time

from benchmarks._common import Result


def run(quick: bool = False) -> list[Result]:
    import pandas as pd

    import nbagent
    from benchmarks.bench_providers import KEY, MODELS, Server, _system, get_weather
    from nbagent import Chat
    from nbagent import tool as make_tool
    from nbagent.providers import OpenAIProvider

    nbagent.configure(quiet=True, display=False)
    n = 60 if quick else 200
    repeat = 2 if quick else 5
    weather = make_tool(get_weather)
    server = Server()
    try:
        model = MODELS["openai-chat"]
        shared = OpenAIProvider(model, base_url=server.openai, api_key=KEY)

        def naming() -> Chat:
            return Chat(
                model,
                provider="openai",
                base_url=server.openai,
                api_key=KEY,
                system=_system(3),
                stream=False,
            ).with_tools(weather)

        def sharing() -> Chat:
            return Chat(provider=shared, system=_system(3), stream=False).with_tools(weather)

        rows = pd.DataFrame({"q": [f"Weather in Paris, {i}?" for i in range(n)]})
        cpu: dict[str, list[float]] = {"naming": [], "sharing": []}
        for _ in range(repeat):
            for name, make in (("naming", naming), ("sharing", sharing)):
                start = time.process_time()
                out = nbagent.batch(rows, make, prompt="{q}", concurrency=16)
                cpu[name].append((time.process_time() - start) / n)
                assert (out["status"] == "done").all(), out["status"].value_counts()
    finally:
        server.close()
    naming_ms = statistics.median(cpu["naming"]) * 1000
    sharing_ms = statistics.median(cpu["sharing"]) * 1000
    ratio = naming_ms / sharing_ms
    return [
        Result(
            "batch: make_chat naming a model / sharing a provider (CPU)",
            ratio,
            "x",
            target="<= 1.2x",
            target_met=ratio <= 1.2,
            detail=f"{naming_ms:.2f} vs {sharing_ms:.2f} ms CPU per 3-round chat, {n} chats",
        )
    ]
