"""One measured batch, in its own process: ``python -m benchmarks._batch_client MODE PORT N C``.

MODE ``nbagent`` runs ``nbagent.batch`` over N prompts (C at once) with no store;
``nbagent-sqlite`` with a fresh SQLite store, ``nbagent-postgres`` with the
PostgreSQL database named by ``NBAGENT_BENCH_DSN`` (each batch a new batch id);
the chats are made with nbagent's defaults (``stream`` left as the batch picks it). MODE ``raw``
(or ``raw-dicts``, the history kept as dicts)
does the same work with a raw ``AsyncOpenAI`` client and ``asyncio.gather``
under a semaphore of C: per chat, requests until the model stops calling the
tool, each tool call answered by the same function. MODE ``raw-postgres`` is
``raw-dicts`` that also commits what a store must before each step goes on (the
prompt; each response with its calls claimed, before they run; each result, before
the model is asked again; the answer), as JSON rows of one table, through psycopg's
``AsyncConnection`` on the same loop, the chats' rows waiting together sent as one
multi-row insert (group commit): the floor of a store's cost on that loop, with
none of a store's tables, reads or checks. Prints one JSON line:
wall seconds, CPU seconds, requests made, the peak RSS before and after, and the
resident size (after a collection) before the batch and after it returned, its
result still held. With ``NBAGENT_BENCH_WARM`` set, a batch of one chat of the same
kind runs first, so "before" already holds what a process pays once (the async HTTP
stack's first use, the batch's modules, pyarrow's memory pool for the frame's text
columns), as a notebook's second batch finds it.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import resource
import sys
import tempfile
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


def rss_mib() -> float:
    """The resident size now, after a full collection (Linux: /proc/self/statm)."""
    gc.collect()
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


async def _group_writer(dsn: str) -> tuple[Any, Any]:
    """``write(rows)``, awaited until its rows are committed, and ``close()``: one
    connection, one task sending every row waiting as one insert (autocommit)."""
    import psycopg

    conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    await conn.execute(
        "CREATE TABLE IF NOT EXISTS floor_events (chat text, seq int, kind text, body jsonb)"
    )
    waiting: list[tuple[list[tuple[Any, ...]], asyncio.Future[None]]] = []
    wake = asyncio.Event()

    async def send() -> None:
        while True:
            await wake.wait()
            wake.clear()
            group = waiting[:]
            del waiting[:]
            rows = [row for rows, _ in group for row in rows]
            values = ", ".join(["(%s, %s, %s, %s)"] * len(rows))
            try:
                await conn.execute(
                    f"INSERT INTO floor_events VALUES {values}", [x for r in rows for x in r]
                )
            except Exception as exc:  # each waiting chat raises it (the run fails, never hangs)
                for _, done in group:
                    done.set_exception(exc)
                continue
            for _, done in group:
                done.set_result(None)

    sender = asyncio.create_task(send())

    async def write(rows: list[tuple[Any, ...]]) -> None:
        done = asyncio.get_running_loop().create_future()
        waiting.append((rows, done))
        wake.set()
        await done

    async def close() -> None:
        sender.cancel()
        await conn.close()

    return write, close


async def raw(base_url: str, n: int, concurrency: int, dicts: bool = False, dsn: str = "") -> int:
    """The raw loop; ``dicts``: append the assistant message as a dict, not the SDK's
    object (the documented idiom appends the object, which the SDK re-serialises on
    every later request); ``dsn``: commit each step's rows there first (``raw-postgres``)."""
    import openai

    client = openai.AsyncOpenAI(api_key=KEY, base_url=base_url)
    sem = asyncio.Semaphore(concurrency)
    requests = 0
    write: Any = None
    close: Any = None
    if dsn:
        write, close = await _group_writer(dsn)

    async def noted(chat: str, seq: int, *rows: tuple[str, str]) -> None:
        if write is not None:
            await write([(chat, seq, kind, body) for kind, body in rows])

    async def one(i: int) -> str:
        nonlocal requests
        async with sem:
            messages: list[Any] = [{"role": "user", "content": f"task {i}"}]
            chat, seq = f"chat-{i}", 0
            await noted(chat, seq, ("prompt", json.dumps(messages[0])))
            while True:
                resp = await client.chat.completions.create(
                    model=MODEL, messages=messages, tools=TOOLS
                )
                requests += 1
                msg = resp.choices[0].message
                seq += 1
                if not msg.tool_calls:
                    await noted(chat, seq, ("answer", resp.model_dump_json()))
                    return msg.content or ""
                claims = [("claim", json.dumps({"id": c.id})) for c in msg.tool_calls]
                await noted(chat, seq, ("response", resp.model_dump_json()), *claims)
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
                    result = {"role": "tool", "tool_call_id": call.id, "content": lookup(**args)}
                    await noted(chat, seq, ("result", json.dumps(result)))
                    messages.append(result)

    replies = await asyncio.gather(*(one(i) for i in range(n)))
    assert all(replies)
    await client.close()
    if close is not None:
        await close()
    return requests


def open_store(mode: str, folder: str) -> Any:
    """The batch's store for ``mode`` (``None``: no store)."""
    if mode == "nbagent-sqlite":
        from nbagent.store import SQLiteStore

        return SQLiteStore(os.path.join(folder, "batch.db"))
    if mode == "nbagent-postgres":
        from nbagent.store import PostgresStore

        return PostgresStore(os.environ["NBAGENT_BENCH_DSN"])
    return None


def with_nbagent(base_url: str, n: int, concurrency: int, store: Any) -> tuple[int, Any]:
    import nbagent
    from nbagent import Chat, tool
    from nbagent.providers import OpenAIProvider

    nbagent.configure(quiet=True, display=False)
    provider = OpenAIProvider(MODEL, base_url=base_url, api_key=KEY)
    looked = tool(lookup)
    result = nbagent.batch(
        [f"task {i}" for i in range(n)],
        lambda: Chat(provider=provider).with_tools(looked),
        concurrency=concurrency,
        progress=False,
        store=store,
    )
    assert (result["status"] == "done").all(), result["error"].dropna().head()
    return int(result["calls"].sum() + n), result


def main() -> None:
    mode, port, n, concurrency = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    base_url = f"http://127.0.0.1:{port}/v1"
    import openai  # noqa: F401  (imports are not what is measured)

    if mode == "raw-postgres":
        import psycopg  # noqa: F401

    folder = tempfile.mkdtemp(prefix="nbagent-bench-")
    store = None
    if mode.startswith("nbagent"):
        import pandas  # noqa: F401  (the result frame's; imported lazily by nbagent)

        import nbagent  # noqa: F401

        store = open_store(mode, folder)
    if os.environ.get("NBAGENT_BENCH_WARM"):  # what a process pays once, paid before "before"
        if mode.startswith("raw"):
            asyncio.run(raw(base_url, 1, concurrency, dicts=mode != "raw"))
        else:
            with_nbagent(base_url, 1, concurrency, store)
    now_before = rss_mib()
    before = peak_rss_mib()
    w0, c0 = time.perf_counter(), time.process_time()
    result: Any = None
    if mode.startswith("raw"):
        dsn = os.environ["NBAGENT_BENCH_DSN"] if mode == "raw-postgres" else ""
        requests = asyncio.run(raw(base_url, n, concurrency, dicts=mode != "raw", dsn=dsn))
    else:
        requests, result = with_nbagent(base_url, n, concurrency, store)
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    peak = peak_rss_mib()
    now_after = rss_mib()  # the result is still held
    print(
        json.dumps(
            {
                "wall": wall,
                "cpu": cpu,
                "requests": requests,
                "rss_before": before,
                "rss_peak": peak,
                "rss_now_before": now_before,
                "rss_now_after": now_after,
                "kept": result is not None,
            }
        )
    )


if __name__ == "__main__":
    main()
