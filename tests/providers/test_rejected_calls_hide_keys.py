"""The answer nbagent gives a call it rejects is scrubbed of the chat's key, as a tool's
result or error is.

A call whose arguments were not valid JSON is answered with the text the model sent
(``received: '...'``), a call of an unknown tool with its name: both are the model's own
text, and both carried the chat's key in clear (a model that read it somewhere and wrote it
into a call) to the transcript, the next request to the model, ``chat.log``
(``result_preview``, ``error``), ``chat.messages`` and the store; a tool's own raised error
was already scrubbed. Every answer nbagent writes for a call it did not run (a rejection,
a skip, a denial) is scrubbed of the key now: the model's pieces in full where the answer is
composed, the whole for keys (tests/test_rejections_name_the_parameter.py: nbagent's own
words keep the parameter's name). Through the real SDK clients against the loopback fake
server, on the three wires, streamed and not.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from _provider_harness import make_provider

from nbagent import Chat, ToolResultMessage, tool
from nbagent.testing import FakeLLMServer, FakeToolCall, Turn

SK = "sk-PROBE-SECRET-1234567890abcdef"
OWN = "PROBEKEY-abcdefghijklmnop-9876"  # a key of no known shape: only the provider knows it

WIRES = [
    (kind, stream, key)
    for kind in ("openai-chat", "openai-responses", "anthropic")
    for stream in (False, True)
    for key in (SK, OWN)
]
IDS = [f"{k}-{'sse' if s else 'json'}-{'sk' if key == SK else 'own'}" for k, s, key in WIRES]

ran: list[str] = []


@tool
def get_weather(city: str) -> str:
    """Get the weather for a city.

    Args:
        city: The city.
    """
    ran.append(city)
    return f"{city}: 18 C"


def _chat(server: FakeLLMServer, kind: str, stream: bool, key: str, db: Path) -> Chat:
    provider = make_provider(kind, server, api_key=key)
    return Chat(provider=provider, display=False, stream=stream, store=str(db)).with_tools(
        get_weather
    )


def _results_sent(body: dict[str, Any]) -> list[str]:
    """The tool results a request gives the model, as text."""
    out: list[str] = []
    for m in body.get("messages", body.get("input", [])):
        if m.get("role") == "tool":
            out.append(m["content"])
        elif m.get("type") == "function_call_output":
            out.append(m["output"])
        elif isinstance(m.get("content"), list):
            out += [json.dumps(b) for b in m["content"] if b.get("type") == "tool_result"]
    return out


def _answer_surfaces(chat: Chat, server: FakeLLMServer) -> dict[str, str]:
    """Where the answer to the call went: each as text."""
    [result] = [m for m in chat.transcript if isinstance(m, ToolResultMessage)]
    log = chat.log
    tool_rows = chat.messages[chat.messages["role"] == "tool"]
    return {
        "transcript": result.content,
        "model": "\n".join(_results_sent(server.requests[-1].body)),
        "log": log["result_preview"].astype(str).str.cat() + log["error"].astype(str).str.cat(),
        "messages": tool_rows["content"].astype(str).str.cat(),
    }


def _stored(db: Path) -> str:
    """The store's rows, less the model's own call (its name and arguments, kept as they
    came)."""
    with sqlite3.connect(db) as con:
        out = [str(r) for r in con.execute("select result from tool_calls")]
        tables = [
            t
            for (t,) in con.execute("select name from sqlite_master where type='table'")
            if t != "tool_calls"
        ]
        out += [str(r) for t in tables for r in con.execute(f"select * from {t}")]
        return "".join(out)


# A non-streamed Anthropic call's input is a JSON object on the wire: no text to break; that
# wire gets the same answers through the unknown-tool case below.
BROKEN_JSON = [w for w in WIRES if not (w[0] == "anthropic" and not w[1])]


@pytest.mark.parametrize(
    ("kind", "stream", "key"), BROKEN_JSON, ids=[IDS[WIRES.index(w)] for w in BROKEN_JSON]
)
def test_a_call_with_invalid_json_is_answered_without_the_key(
    kind: str, stream: bool, key: str, tmp_path: Path
) -> None:
    ran.clear()
    db = tmp_path / "chats.db"
    raw = '{"city": "Paris", "note": "key=' + key + '"'  # unterminated: not valid JSON
    with FakeLLMServer() as server:
        server.script([Turn(tool_calls=[FakeToolCall("get_weather", raw_arguments=raw)]), "ok"])
        chat = _chat(server, kind, stream, key, db)
        chat.ask("Weather in Paris?")
        surfaces = _answer_surfaces(chat, server)
        frames = chat.log.to_csv() + chat.messages.to_csv()
        chat.close()
    assert ran == []  # never run
    assert "not valid JSON" in surfaces["transcript"] and "Paris" in surfaces["transcript"]
    for where, text in surfaces.items():
        assert "not valid JSON" in text, where
        assert key not in text, where
    # the call itself goes back to the model as the model sent it (its own text, as valid
    # arguments holding a key do); nbagent's frames and store show the answer only
    assert key not in frames
    assert key not in _stored(db)


@pytest.mark.parametrize(("kind", "stream", "key"), WIRES, ids=IDS)
def test_a_call_of_an_unknown_tool_is_answered_without_the_key(
    kind: str, stream: bool, key: str, tmp_path: Path
) -> None:
    """The name is the model's own call (kept as it came, like its arguments); the
    answer nbagent writes about it names it without the key."""
    ran.clear()
    db = tmp_path / "chats.db"
    name = f"lookup_{key}"
    with FakeLLMServer() as server:
        server.script([Turn(tool_calls=[FakeToolCall(name, {"city": "Paris"})]), "ok"])
        chat = _chat(server, kind, stream, key, db)
        chat.ask("Weather in Paris?")
        surfaces = _answer_surfaces(chat, server)
        chat.close()
    assert ran == []
    for where, text in surfaces.items():
        assert "unknown tool" in text and "lookup_***" in text, where
        assert key not in text, where
    with sqlite3.connect(db) as con:
        rows = [*con.execute("select result from tool_calls")]
        rows += [*con.execute("select json from messages where role = 'tool'")]
    stored = [json.loads(r)["content"] for (r,) in rows]  # the answers (their name: the call's)
    assert len(stored) == 2 and all("unknown tool" in a and key not in a for a in stored)
