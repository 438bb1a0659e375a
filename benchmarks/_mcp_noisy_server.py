"""A plain JSON-RPC stdio MCP server for bench_mcp: ``big`` (a long answer) and ``flood``
(announces a tool list change ``n`` times, then answers), no SDK, so its own cost is small."""

import json
import sys

OUT = sys.stdout.buffer
CHANGED = b'{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}\n'
TOOLS = [
    {"name": n, "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}}
    for n in ("big", "flood")
]


def answer(rid: object, result: object) -> None:
    OUT.write(json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}).encode() + b"\n")
    OUT.flush()


for line in sys.stdin.buffer:
    msg = json.loads(line)
    rid, method = msg.get("id"), msg.get("method")
    if rid is None:
        continue
    params = msg.get("params") or {}
    if method == "initialize":
        answer(
            rid,
            {
                "protocolVersion": params["protocolVersion"],
                "capabilities": {"tools": {"listChanged": True}},
                "serverInfo": {"name": "noisy", "version": "1"},
            },
        )
    elif method == "tools/list":
        answer(rid, {"tools": TOOLS})
    elif method == "tools/call":
        args = params.get("arguments") or {}
        if params.get("name") == "flood":
            OUT.write(CHANGED * int(args.get("n", 0)))
            answer(rid, {"content": [{"type": "text", "text": "flooded"}]})
        else:
            answer(rid, {"content": [{"type": "text", "text": "x" * int(args.get("size", 0))}]})
    else:
        err = {"code": -32601, "message": "not found"}
        OUT.write(json.dumps({"jsonrpc": "2.0", "id": rid, "error": err}).encode() + b"\n")
        OUT.flush()
