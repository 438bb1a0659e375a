"""A Chat Completions stream's calls, told apart when the server sends neither ``id`` nor
``index`` (each call whole in its own chunk), and still one call when a server repeats a
call's name in each of its fragments. Properties over the folding itself (``ChatStream``);
the same streams through the real SDK against the fake server are in
``test_gateway_streams.py``."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from nbagent.providers._openai_wire import ChatStream

NAMES = st.sampled_from(["get_weather", "get_time", "delete_records"])
ARGS = st.dictionaries(
    st.sampled_from(["city", "where", "n"]),
    st.one_of(st.text(max_size=8), st.integers(-5, 5)),
    max_size=3,
)


def _chunk(tool_call: dict[str, Any]) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": {"tool_calls": [tool_call]}}]}


def _finish(stream: ChatStream) -> Any:
    stream.feed({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    return stream.finish()


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(NAMES, ARGS), min_size=1, max_size=5))
def test_calls_sent_whole_with_no_id_or_index_stay_apart(calls: list[Any]) -> None:
    stream = ChatStream(None, model="m", provider="p")
    for name, args in calls:
        stream.feed(
            _chunk({"type": "function", "function": {"name": name, "arguments": json.dumps(args)}})
        )
    got = _finish(stream).tool_calls
    assert [(c.name, c.arguments, c.parse_error) for c in got] == [
        (name, args, None) for name, args in calls
    ]
    assert len({c.id for c in got}) == len(calls)


@settings(max_examples=150, deadline=None)
@given(NAMES, ARGS, st.data())
def test_one_call_whose_name_comes_again_in_each_fragment_stays_one(
    name: str, args: dict[str, Any], data: st.DataObject
) -> None:
    text = json.dumps(args)
    cuts = sorted(data.draw(st.sets(st.integers(1, max(1, len(text) - 1)), max_size=6)))
    pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    pieces += data.draw(st.sampled_from([[], [""]]))  # an empty last fragment, name and all
    with_index = data.draw(st.booleans())
    stream = ChatStream(None, model="m", provider="p")
    for piece in pieces:
        fragment: dict[str, Any] = {"function": {"name": name, "arguments": piece}}
        if with_index:
            fragment["index"] = 0
        stream.feed(_chunk(fragment))
    (call,) = _finish(stream).tool_calls
    assert (call.name, call.arguments, call.parse_error) == (name, args, None)


def _counted_parses(monkeypatch: Any) -> list[int]:
    """The lengths of the texts the wire module parses as JSON from now on."""
    import nbagent.providers._openai_wire as wire

    parses: list[int] = []
    real = wire.json.loads

    def counted(text: Any, *args: Any, **kwargs: Any) -> Any:
        parses.append(len(text))
        return real(text, *args, **kwargs)

    monkeypatch.setattr(wire.json, "loads", counted)
    return parses


def test_a_long_argument_with_the_name_in_every_fragment_is_read_once(
    monkeypatch: Any,
) -> None:
    """Telling a repeated name from a new call parsed the whole argument text so far at every
    fragment: 20,000 fragments of a 200 KB argument took seconds (quadratic). It parses only
    when the text so far could be a whole object (it ends in "}")."""
    parses = _counted_parses(monkeypatch)
    text = json.dumps({"body": "x" * 20_000})
    stream = ChatStream(None, model="m", provider="p")
    for i in range(0, len(text), 10):
        piece = {"name": "write", "arguments": text[i : i + 10]}
        stream.feed(_chunk({"type": "function", "function": piece}))
    response = _finish(stream)
    assert [c.arguments for c in response.tool_calls] == [json.loads(text)]
    assert sum(parses) < 5 * len(text)  # each fragment's text so far: 2,000 times 20 KB


def test_a_list_of_objects_with_the_name_in_every_fragment_is_read_once(
    monkeypatch: Any,
) -> None:
    """A list of objects puts a "}" at the end of many fragments: each one parsed the whole
    text so far (quadratic again). The text is parsed only once its brackets close."""
    parses = _counted_parses(monkeypatch)
    args = {"rows": [{"id": i, "note": 'a "}" and a \\ here'} for i in range(2_000)]}
    text = json.dumps(args)
    stream = ChatStream(None, model="m", provider="p")
    for row in range(0, len(text), 40):  # many fragments end in "}"
        piece = {"name": "write", "arguments": text[row : row + 40]}
        stream.feed(_chunk({"type": "function", "function": piece}))
    response = _finish(stream)
    assert [c.arguments for c in response.tool_calls] == [args]
    assert sum(parses) < 5 * len(text)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='{}[]"\\ ab\n\u00e9', max_size=6),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(st.text(max_size=4), JSON_VALUES, max_size=4),
    st.booleans(),
    st.lists(st.integers(1, 7), min_size=1, max_size=60),
)
def test_whether_the_text_so_far_is_whole_is_read_right_at_every_fragment(
    args: dict[str, Any], ascii_only: bool, cuts: list[int]
) -> None:
    """The bracket reader says "whole" exactly when the fragments so far make the object's
    whole text: never inside a string holding brackets, quotes or escapes, cut anywhere."""
    from nbagent.providers._openai_wire import _PartialCall

    text = json.dumps(args, ensure_ascii=ascii_only)
    call, at, i = _PartialCall(name="write"), 0, 0
    while at < len(text):
        size = cuts[i % len(cuts)]
        call.parts.append(text[at : at + size])
        at, i = at + size, i + 1
        assert call.whole() == (at >= len(text)), text[:at]
