"""A badly behaved MCP server for nbagent's tests: plain JSON-RPC over stdio, no SDK.

It speaks just enough of the legacy protocol (``initialize``, ``tools/list``,
``tools/call``) to be used, and misbehaves on purpose:

- ``--hang initialize`` / ``--hang list``: never answers that request;
  ``--hang relist``: answers the first ``tools/list``, announces a change, and
  never answers another;
- tool ``lists``: how many ``tools/list`` requests it received;
- tool ``fail``: answers a JSON-RPC error -32000 (an application error);
- tool ``count``: its state (a counter), to see whether the process was restarted;
- tool ``garble``: writes a line that is not UTF-8, then answers with a
  non-UTF-8 byte inside its text;
- tool ``big``: answers ``size`` bytes of text (one long line); ``unreadable``
  the same with its id in the middle of the line (which request it answers
  cannot be told from either end); ``bignote`` first sends a notification of
  ``size`` bytes, then answers;
- tool ``flood``: sends ``n`` ``notifications/tools/list_changed`` before it answers;
- ``--linger``: ignores the end of its input (stays until killed).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

OUT = sys.stdout.buffer
COUNT = 0
LISTS = 0
TOOLS = [
    {
        "name": name,
        "description": f"The {name} tool.",
        "inputSchema": {"type": "object", "properties": props},
        "annotations": {"readOnlyHint": True},
    }
    for name, props in [
        ("echo", {"text": {"type": "string"}}),
        ("count", {}),
        ("fail", {}),
        ("garble", {}),
        ("big", {"size": {"type": "integer"}}),
        ("flood", {"n": {"type": "integer"}}),
        ("pid", {}),
        ("lists", {}),
        ("unreadable", {"size": {"type": "integer"}}),
        ("bignote", {"size": {"type": "integer"}}),
    ]
]
CHANGED = b'{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}\n'


def send(raw: bytes) -> None:
    OUT.write(raw)
    OUT.flush()


def answer(rid: object, result: object) -> None:
    send(json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}).encode() + b"\n")


def text(rid: object, value: str) -> None:
    answer(rid, {"content": [{"type": "text", "text": value}], "isError": False})


def call(rid: object, name: str, args: dict[str, object]) -> None:
    global COUNT
    if name == "echo":
        text(rid, str(args.get("text", "")))
    elif name == "count":
        COUNT += 1
        text(rid, str(COUNT))
    elif name == "lists":
        text(rid, str(LISTS))
    elif name == "unreadable":
        size = int(args.get("size", 0))  # type: ignore[call-overload]
        half = b"y" * (size // 2)
        send(b'{"a":"' + half + b'","id":' + json.dumps(rid).encode() + b',"b":"' + half + b'"}\n')
    elif name == "bignote":
        size = int(args.get("size", 0))  # type: ignore[call-overload]
        note = b'{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info",'
        send(note + b'"data":"' + b"z" * size + b'"}}\n')
        text(rid, "noted")
    elif name == "pid":
        text(rid, str(os.getpid()))
    elif name == "fail":
        error = {"code": -32000, "message": "quota exceeded for this month"}
        send(json.dumps({"jsonrpc": "2.0", "id": rid, "error": error}).encode() + b"\n")
    elif name == "garble":
        send(b"\xff\xfe this line is not UTF-8 \xc3\n")
        head = json.dumps({"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text"}]}})
        # {"jsonrpc": ..., "result": {"content": [{"type": "text", "text": "caf\xe9"}]}}
        send(head[:-4].encode() + b', "text": "caf\xe9"}]}}\n')
    elif name == "big":
        size = int(args.get("size", 0))  # type: ignore[call-overload]
        body = b'{"jsonrpc":"2.0","id":' + json.dumps(rid).encode()
        body += b',"result":{"isError":false,"content":[{"type":"text","text":"'
        send(body + b"x" * size + b'"}]}}\n')
    elif name == "flood":
        send(CHANGED * int(args.get("n", 0)))  # type: ignore[call-overload]
        text(rid, "flooded")
    else:
        send(
            json.dumps(
                {"jsonrpc": "2.0", "id": rid, "error": {"code": -32602, "message": "no tool"}}
            ).encode()
            + b"\n"
        )


def main() -> None:
    global LISTS
    parser = argparse.ArgumentParser()
    parser.add_argument("--hang", choices=["initialize", "list", "relist"], default=None)
    parser.add_argument("--linger", action="store_true")
    opts = parser.parse_args()
    for line in sys.stdin.buffer:
        msg = json.loads(line)
        method, rid = msg.get("method"), msg.get("id")
        if rid is None:  # a notification
            continue
        if method == "initialize":
            if opts.hang == "initialize":
                continue
            answer(
                rid,
                {
                    "protocolVersion": msg["params"]["protocolVersion"],
                    "capabilities": {"tools": {"listChanged": True}},
                    "serverInfo": {"name": "rogue", "version": "1"},
                },
            )
        elif method == "tools/list":
            LISTS += 1
            if opts.hang == "list" or (opts.hang == "relist" and LISTS > 1):
                continue
            answer(rid, {"tools": TOOLS})
            if opts.hang == "relist":
                send(CHANGED)
        elif method == "tools/call":
            params = msg.get("params") or {}
            call(rid, params.get("name", ""), params.get("arguments") or {})
        elif method == "ping":
            answer(rid, {})
        else:
            error = {"code": -32601, "message": f"method {method!r} not found"}
            send(json.dumps({"jsonrpc": "2.0", "id": rid, "error": error}).encode() + b"\n")
    if opts.linger:
        while True:
            time.sleep(60)


if __name__ == "__main__":
    main()
