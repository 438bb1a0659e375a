"""The SSE parser reads any event stream, cut anywhere, as the SSE rules say (a property)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from nbagent.providers._sdk import SSEParser, loads

_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet=st.sampled_from('ab data:\n"\\é')),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)


@st.composite
def _event(draw: st.DrawFn) -> tuple[bytes, dict[str, Any] | None]:
    """One SSE block and the event it means (None: a block without data)."""
    payload = {
        "type": draw(st.sampled_from(["message_start", "text", "data: x"])),
        "v": draw(_json_values),
    }
    text = json.dumps(payload, indent=draw(st.sampled_from([None, 1])))
    lines: list[bytes] = []
    if draw(st.booleans()):
        lines.append(b"event: " + draw(st.sampled_from([b"message_start", b"ping", b"data"])))
    if draw(st.booleans()):
        lines.append(b": a comment")
    if draw(st.booleans()):
        lines.append(b"id: 7")
    if draw(st.integers(0, 5)) == 0:  # a block without data (a ping)
        return b"\n".join(lines or [b"event: ping"]), None
    space = draw(st.sampled_from([b" ", b""]))
    lines += [b"data:" + space + line.encode() for line in text.split("\n")]
    if draw(st.booleans()):
        lines.append(b"retry: 10")
    return b"\n".join(lines), payload


@settings(max_examples=150, deadline=None)
@given(
    st.lists(_event(), max_size=8),
    st.lists(st.integers(1, 40), min_size=1, max_size=30),
    st.booleans(),
)
def test_every_event_comes_out_whole_wherever_the_stream_is_cut(
    blocks: list[tuple[bytes, dict[str, Any] | None]], cuts: list[int], crlf: bool
) -> None:
    stream = b"".join(block + b"\n\n" for block, _ in blocks)
    if crlf:
        stream = stream.replace(b"\n", b"\r\n")
    parser = SSEParser("p")
    events: list[dict[str, Any]] = []
    at = 0
    for size in cuts * (len(stream) // max(sum(cuts), 1) + 1):
        if at >= len(stream):
            break
        events += parser.feed(stream[at : at + size])
        at += size
    events += parser.feed(stream[at:])
    events += parser.flush()
    assert events == [payload for _, payload in blocks if payload is not None]


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


def _outcome(parse: Any, data: bytes) -> Any:
    try:
        return ("ok", parse(data))
    except ValueError:
        return ("not JSON", None)


@given(
    value=_JSON,
    encoding=st.sampled_from(["utf-8", "utf-8-sig", "utf-16", "utf-16-le", "utf-32"]),
    junk=st.binary(max_size=3),
)
@settings(max_examples=300, deadline=None)
def test_loads_reads_bytes_as_json_loads_does(value: Any, encoding: str, junk: bytes) -> None:
    # a body or an event is decoded as UTF-8 up front when it plainly is (a faster parse);
    # every body reads as json.loads(bytes) reads it, whatever its encoding, or fails alike
    text = json.dumps(value, ensure_ascii=False)
    for data in (text.encode(encoding, "surrogatepass"), text.encode("utf-8") + junk, junk):
        assert _outcome(loads, data) == _outcome(json.loads, data)
