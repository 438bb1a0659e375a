"""Provider adapters: nbagent's tool loop against the same loop written by hand with the raw SDK.

For every provider (OpenAI Chat Completions, OpenAI Responses, Anthropic, an
OpenAI-compatible server), streaming and not, a 10-round tool loop (10 model
requests, 9 tool rounds) runs through ``nbagent.Chat`` and through the raw
SDK, all 16 variants interleaved in one run. Then one 100-round conversation
(nbagent vs raw openai Chat Completions), with the per-round client CPU of the
first and last ten rounds, and the time to ``import nbagent``.

The fake LLM server runs in a **subprocess**, so the process CPU time measured
here is the client's alone. Both sides use the SDK's transport, retries and
auth; the raw loops follow the SDKs' documented idioms (appending the returned
message objects to the history).
"""

from __future__ import annotations

import itertools
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import ExitStack
from typing import Any

from benchmarks._common import Result, interleaved

SERVER = r"""
import sys
from nbagent.testing import FakeLLMServer, FakeToolCall, Turn

USAGE = {"input_tokens": 50, "output_tokens": 10}

def rounds(body):
    text = body.get("system") or body.get("instructions")
    if not text:
        first = (body.get("messages") or [{}])[0]
        text = first.get("content") if isinstance(first.get("content"), str) else ""
    return int(text.rsplit("rounds=", 1)[1].split(")")[0])

def results(body):
    if "input" in body:
        return sum(1 for i in body["input"] if i.get("type") == "function_call_output")
    n = 0
    for m in body["messages"]:
        if m.get("role") == "tool":
            n += 1
        elif m.get("role") == "user" and isinstance(m.get("content"), list):
            n += sum(1 for b in m["content"] if b.get("type") == "tool_result")
    return n

DELAY = float(sys.argv[1]) if len(sys.argv) > 1 else 0.0  # the model's latency, seconds

def handler(request):
    body = request.body
    if results(body) < rounds(body) - 1:
        return Turn(tool_calls=[FakeToolCall("get_weather", {"city": "Paris"})], usage=USAGE,
                    repeat_ids_in_stream=body.get("model") == "llama3.1", delay=DELAY)
    return Turn(text="It is sunny in Paris today, 21 degrees.", usage=USAGE, delay=DELAY)

with FakeLLMServer(handler=handler, strict=False) as server:
    print(server.port, flush=True)
    sys.stdin.read()
"""

SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string", "description": "City name."}},
    "required": ["city"],
}
DESCRIPTION = "Get the current weather for a city."
MODELS = {
    "openai-chat": "gpt-4.1-mini",
    "openai-responses": "gpt-4.1-mini",
    "anthropic": "claude-haiku-4-5",
    "openai-compatible": "llama3.1",
}
KEY = "sk-bench-not-a-real-key"


def get_weather(city: str) -> dict[str, Any]:
    """Get the current weather for a city.

    Args:
        city: City name.
    """
    return {"city": city, "temp_c": 21, "sky": "sunny"}


def _system(rounds: int) -> str:
    return f"You answer weather questions with the get_weather tool. (rounds={rounds})"


class Server:
    """The fake LLM server in a child process; ``delay``: seconds before each answer."""

    def __init__(self, delay: float = 0.0) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", SERVER, str(delay)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        port = int(self.proc.stdout.readline())
        self.openai = f"http://127.0.0.1:{port}/v1"
        self.anthropic = f"http://127.0.0.1:{port}"

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


# -- nbagent ---------------------------------------------------------------------


def nbagent_loop(kind: str, stream: bool, server: Server, rounds: int) -> Callable[[], object]:
    import nbagent
    from nbagent.providers import AnthropicProvider, OpenAIProvider

    provider: Any
    if kind == "anthropic":
        provider = AnthropicProvider(MODELS[kind], base_url=server.anthropic, api_key=KEY)
    else:
        provider = OpenAIProvider(
            MODELS[kind],
            api="responses" if kind == "openai-responses" else "chat",
            base_url=server.openai,
            api_key=KEY,
            compatible=kind == "openai-compatible",
        )
    weather = nbagent.tool(get_weather)

    def run() -> object:
        chat = nbagent.Chat(provider=provider, system=_system(rounds), stream=stream)
        chat.with_tools(weather)
        reply = chat.ask("What is the weather in Paris?", max_steps=4 * rounds)
        assert chat.status == "complete", chat.status
        return reply

    return run


# -- raw SDK loops ------------------------------------------------------------------


def raw_openai_chat(stream: bool, server: Server, rounds: int, model: str) -> Callable[[], object]:
    import openai

    client = openai.OpenAI(api_key=KEY, base_url=server.openai)
    tools = [
        {
            "type": "function",
            "function": {"name": "get_weather", "description": DESCRIPTION, "parameters": SCHEMA},
        }
    ]

    def run() -> object:
        messages: list[Any] = [
            {"role": "system", "content": _system(rounds)},
            {"role": "user", "content": "What is the weather in Paris?"},
        ]
        while True:
            if not stream:
                message = (
                    client.chat.completions.create(
                        model=model,
                        messages=messages,
                        tools=tools,  # type: ignore[arg-type]
                    )
                    .choices[0]
                    .message
                )
                messages.append(message)
                calls = [
                    (c.id, c.function.name, c.function.arguments) for c in message.tool_calls or ()
                ]  # type: ignore[union-attr]
            else:
                text: list[str] = []
                acc: dict[int, dict[str, Any]] = {}
                for chunk in client.chat.completions.create(
                    model=model,
                    messages=messages,
                    tools=tools,
                    stream=True,  # type: ignore[arg-type]
                    stream_options={"include_usage": True},
                ):
                    for choice in chunk.choices:
                        delta = choice.delta
                        if delta.content:
                            text.append(delta.content)
                        for tc in delta.tool_calls or ():
                            slot = acc.setdefault(tc.index, {"id": None, "name": None, "args": []})
                            if tc.id and not slot["id"]:
                                slot["id"] = tc.id
                            if tc.function and tc.function.name and not slot["name"]:
                                slot["name"] = tc.function.name
                            if tc.function and tc.function.arguments:
                                slot["args"].append(tc.function.arguments)
                calls = [(s["id"], s["name"], "".join(s["args"])) for _, s in sorted(acc.items())]
                message_dict: dict[str, Any] = {
                    "role": "assistant",
                    "content": "".join(text) or None,
                }
                if calls:
                    message_dict["tool_calls"] = [
                        {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                        for i, n, a in calls
                    ]
                messages.append(message_dict)
            if not calls:
                return messages
            for call_id, _, arguments in calls:
                result = get_weather(**json.loads(arguments))
                messages.append(
                    {"role": "tool", "tool_call_id": call_id, "content": json.dumps(result)}
                )

    return run


def raw_openai_responses(stream: bool, server: Server, rounds: int) -> Callable[[], object]:
    import openai

    client = openai.OpenAI(api_key=KEY, base_url=server.openai)
    tools = [
        {
            "type": "function",
            "name": "get_weather",
            "description": DESCRIPTION,
            "parameters": SCHEMA,
            "strict": False,
        }
    ]

    def run() -> object:
        items: list[Any] = [{"role": "user", "content": "What is the weather in Paris?"}]
        while True:
            kwargs: dict[str, Any] = dict(
                model=MODELS["openai-responses"],
                input=items,
                tools=tools,
                instructions=_system(rounds),
                store=False,
            )
            if not stream:
                response = client.responses.create(**kwargs)
            else:
                response = None
                for event in client.responses.create(**kwargs, stream=True):
                    if event.type in ("response.completed", "response.incomplete"):
                        response = event.response
                assert response is not None
            items += response.output
            calls = [o for o in response.output if o.type == "function_call"]
            if not calls:
                return items
            for call in calls:
                result = get_weather(**json.loads(call.arguments))
                items.append(
                    {
                        "type": "function_call_output",
                        "call_id": call.call_id,
                        "output": json.dumps(result),
                    }
                )

    return run


def raw_anthropic(stream: bool, server: Server, rounds: int) -> Callable[[], object]:
    import anthropic

    client = anthropic.Anthropic(api_key=KEY, base_url=server.anthropic)
    tools = [{"name": "get_weather", "description": DESCRIPTION, "input_schema": SCHEMA}]

    def run() -> object:
        messages: list[Any] = [{"role": "user", "content": "What is the weather in Paris?"}]
        while True:
            kwargs: dict[str, Any] = dict(
                model=MODELS["anthropic"],
                max_tokens=4096,
                system=_system(rounds),
                messages=messages,
                tools=tools,
            )
            if not stream:
                message = client.messages.create(**kwargs)
                content: list[Any] = list(message.content)
                uses = [(b.id, b.input) for b in content if b.type == "tool_use"]
            else:
                blocks: dict[int, dict[str, Any]] = {}
                for event in client.messages.create(**kwargs, stream=True):
                    if event.type == "content_block_start":
                        b = event.content_block
                        blocks[event.index] = (
                            {"type": "tool_use", "id": b.id, "name": b.name, "json": []}
                            if b.type == "tool_use"
                            else {"type": "text", "text": []}
                        )
                    elif event.type == "content_block_delta":
                        d = event.delta
                        if d.type == "text_delta":
                            blocks[event.index]["text"].append(d.text)
                        elif d.type == "input_json_delta":
                            blocks[event.index]["json"].append(d.partial_json)
                content = []
                uses = []
                for _, b in sorted(blocks.items()):
                    if b["type"] == "text":
                        content.append({"type": "text", "text": "".join(b["text"])})
                    else:
                        args = json.loads("".join(b["json"]) or "{}")
                        content.append(
                            {"type": "tool_use", "id": b["id"], "name": b["name"], "input": args}
                        )
                        uses.append((b["id"], args))
            messages.append({"role": "assistant", "content": content})
            if not uses:
                return messages
            messages.append(
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": use_id,
                            "content": json.dumps(get_weather(**args)),
                        }
                        for use_id, args in uses
                    ],
                }
            )

    return run


def raw_loop(kind: str, stream: bool, server: Server, rounds: int) -> Callable[[], object]:
    if kind == "anthropic":
        return raw_anthropic(stream, server, rounds)
    if kind == "openai-responses":
        return raw_openai_responses(stream, server, rounds)
    return raw_openai_chat(stream, server, rounds, MODELS[kind])


# -- measurements ---------------------------------------------------------------------


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


LOOP_TARGET = 0.8
"""A 10-round tool loop against the raw sync SDK, every provider (issue 28, item 7)."""


def ten_round_loops(server: Server, quick: bool) -> list[Result]:
    fns: dict[str, Callable[[], object]] = {}
    pairs = []
    for kind in MODELS:
        for stream in (False, True):
            label = f"{kind} {'stream' if stream else 'json'}"
            fns[f"nbagent {label}"] = nbagent_loop(kind, stream, server, 10)
            fns[f"raw {label}"] = raw_loop(kind, stream, server, 10)
            pairs.append(label)
    timings = interleaved(fns, repeat=5 if quick else 25, warmup=2)
    out = []
    for label in pairs:
        (nw, nc), (rw, rc) = timings[f"nbagent {label}"], timings[f"raw {label}"]
        ratio = nw / rw
        out.append(
            Result(
                f"10-round loop {label}: nbagent / raw SDK",
                ratio,
                "x",
                f"<= {LOOP_TARGET}x (issue 28: the median of three runs)",
                ratio <= LOOP_TARGET,
                f"nbagent {_ms(nw)} (cpu {_ms(nc)}), raw {_ms(rw)} (cpu {_ms(rc)}), "
                f"cpu ratio {nc / rc:.2f}x",
            )
        )
    return out


def _per_round_cpu(run_one: Callable[[Callable[[], None]], object]) -> list[float]:
    marks: list[float] = []
    run_one(lambda: marks.append(time.process_time()))
    return [b - a for a, b in itertools.pairwise(marks)]


def long_conversation(server: Server, quick: bool) -> list[Result]:
    rounds = 100
    nb = nbagent_loop("openai-chat", False, server, rounds)
    raw = raw_openai_chat(False, server, rounds, MODELS["openai-chat"])
    timings = interleaved({"nbagent": nb, "raw": raw}, repeat=2 if quick else 5, warmup=1)
    (nw, nc), (rw, rc) = timings["nbagent"], timings["raw"]
    ratio = nw / rw
    out = [
        Result(
            "100-round conversation (openai chat): nbagent / raw SDK",
            ratio,
            "x",
            "<= 0.5x",
            ratio <= 0.5,
            f"nbagent {_ms(nw)} (cpu {_ms(nc)}), raw {_ms(rw)} (cpu {_ms(rc)}), "
            f"cpu ratio {nc / rc:.2f}x",
        )
    ]

    # per-round client CPU: first ten rounds against the last ten
    import nbagent
    from nbagent.providers import OpenAIProvider

    provider = OpenAIProvider(
        MODELS["openai-chat"], base_url=server.openai, api_key=KEY, compatible=False
    )
    weather = nbagent.tool(get_weather)

    def nbagent_marked(mark: Callable[[], None]) -> object:
        chat = nbagent.Chat(provider=provider, system=_system(rounds), stream=False)
        chat.with_tools(weather).on(nbagent.ModelRequestStarted, lambda e: mark())
        chat.ask("What is the weather in Paris?", max_steps=4 * rounds)
        mark()
        return chat

    import openai

    client = openai.OpenAI(api_key=KEY, base_url=server.openai)
    tools = [
        {
            "type": "function",
            "function": {"name": "get_weather", "description": DESCRIPTION, "parameters": SCHEMA},
        }
    ]

    def raw_marked(mark: Callable[[], None]) -> object:
        messages: list[Any] = [
            {"role": "system", "content": _system(rounds)},
            {"role": "user", "content": "What is the weather in Paris?"},
        ]
        while True:
            mark()
            message = (
                client.chat.completions.create(
                    model=MODELS["openai-chat"],
                    messages=messages,
                    tools=tools,  # type: ignore[arg-type]
                )
                .choices[0]
                .message
            )
            messages.append(message)
            if not message.tool_calls:
                mark()
                return messages
            for c in message.tool_calls:
                args = json.loads(c.function.arguments)  # type: ignore[union-attr]
                messages.append(
                    {
                        "role": "tool",
                        "tool_call_id": c.id,
                        "content": json.dumps(get_weather(**args)),
                    }
                )

    for name, fn in (("nbagent", nbagent_marked), ("raw SDK", raw_marked)):
        samples = [_per_round_cpu(fn) for _ in range(1 if quick else 3)]
        first = statistics.median(statistics.mean(s[:10]) for s in samples)
        last = statistics.median(statistics.mean(s[-10:]) for s in samples)
        growth = last / first if first else float("inf")
        out.append(
            Result(
                f"100-round conversation: {name} per-round cpu, last 10 / first 10",
                growth,
                "x",
                "flat (<= 1.5x)" if name == "nbagent" else "",
                growth <= 1.5 if name == "nbagent" else None,
                f"first {first * 1e6:.0f} us, last {last * 1e6:.0f} us per round",
            )
        )
    provider.close()
    return out


def import_time() -> Result:
    code = "import time; t = time.perf_counter(); import nbagent; print(time.perf_counter() - t)"
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    best = min(
        float(
            subprocess.run(
                [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
            ).stdout
        )
        for _ in range(5)
    )
    return Result("import nbagent (best of 5)", best, "s", "< 0.5 s", best < 0.5)


def run(quick: bool) -> list[Result]:
    import nbagent

    nbagent.configure(quiet=True, display=False)
    results: list[Result] = []
    with ExitStack() as stack:
        server = Server()
        stack.callback(server.close)
        results += ten_round_loops(server, quick)
        results += long_conversation(server, quick)
    results.append(import_time())
    return results
