"""One measured batch, in its own process: ``python -m benchmarks._batch_client MODE PORT N C``.

MODE ``nbagent`` runs ``nbagent.batch`` over N prompts (C at once); MODE ``raw``
(or ``raw-dicts``, the history kept as dicts)
does the same work with a raw ``AsyncOpenAI`` client and ``asyncio.gather``
under a semaphore of C: per chat, requests until the model stops calling the
tool, each tool call answered by the same function. Prints one JSON line:
wall seconds, CPU seconds, requests made, and the peak RSS before and after.
"""

from __future__ import annotations

import asyncio
import json
import resource
import sys
import time
from typing import Any

KEY = "sk-bench-not-a-real-key"
MODEL = "gpt-4.1-mini"


def lookup(item: str) -> str:
    """Look an item up.

    Args:
        item: What to look up.
    """
    return f"{item}: found"


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "Look an item up.",
            "parameters": {
                "type": "object",
                "properties": {"item": {"type": "string", "description": "What to look up."}},
                "required": ["item"],
                "additionalProperties": False,
            },
        },
    }
]


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


async def raw(base_url: str, n: int, concurrency: int, dicts: bool = False) -> int:
    """The raw loop; ``dicts``: append the assistant message as a dict, not the SDK's
    object (the documented idiom appends the object, which the SDK re-serialises on
    every later request)."""
    import openai

    client = openai.AsyncOpenAI(api_key=KEY, base_url=base_url)
    sem = asyncio.Semaphore(concurrency)
    requests = 0

    async def one(i: int) -> str:
        nonlocal requests
        async with sem:
            messages: list[Any] = [{"role": "user", "content": f"task {i}"}]
            while True:
                resp = await client.chat.completions.create(
                    model=MODEL, messages=messages, tools=TOOLS
                )
                requests += 1
                msg = resp.choices[0].message
                if not msg.tool_calls:
                    return msg.content or ""
                if dicts:
                    messages.append(
                        {
                            "role": "assistant",
                            "content": msg.content,
                            "tool_calls": [c.model_dump() for c in msg.tool_calls],
                        }
                    )
                else:
                    messages.append(msg)
                for call in msg.tool_calls:
                    args = json.loads(call.function.arguments)
                    messages.append(
                        {"role": "tool", "tool_call_id": call.id, "content": lookup(**args)}
                    )

    replies = await asyncio.gather(*(one(i) for i in range(n)))
    assert all(replies)
    await client.close()
    return requests


def with_nbagent(base_url: str, n: int, concurrency: int) -> int:
    import nbagent
    from nbagent import Chat, tool
    from nbagent.providers import OpenAIProvider

    nbagent.configure(quiet=True, display=False)
    provider = OpenAIProvider(MODEL, base_url=base_url, api_key=KEY)
    looked = tool(lookup)
    result = nbagent.batch(
        [f"task {i}" for i in range(n)],
        lambda: Chat(provider=provider, stream=False).with_tools(looked),
        concurrency=concurrency,
        progress=False,
    )
    assert (result["status"] == "done").all(), result["error"].dropna().head()
    return int(result["calls"].sum() + n)


def main() -> None:
    mode, port, n, concurrency = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    base_url = f"http://127.0.0.1:{port}/v1"
    import openai  # noqa: F401  (imports are not what is measured)

    if mode == "nbagent":
        import pandas  # noqa: F401  (the result frame's; imported lazily by nbagent)

        import nbagent  # noqa: F401
    before = peak_rss_mib()
    w0, c0 = time.perf_counter(), time.process_time()
    if mode in ("raw", "raw-dicts"):
        requests = asyncio.run(raw(base_url, n, concurrency, dicts=mode == "raw-dicts"))
    else:
        requests = with_nbagent(base_url, n, concurrency)
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    print(
        json.dumps(
            {
                "wall": wall,
                "cpu": cpu,
                "requests": requests,
                "rss_before": before,
                "rss_peak": peak_rss_mib(),
            }
        )
    )


if __name__ == "__main__":
    main()
