"""Packed values (``nbagent._packing``): what goes in comes out, whatever was packed first,
from any thread; and alike values pack small against the first one."""

from __future__ import annotations

import pickle
import threading
import zlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nbagent._packing import Packer

_leaf = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
_leaf = _leaf | st.binary()
values = st.recursive(
    _leaf,
    lambda inner: (
        st.lists(inner, max_size=5)
        | st.dictionaries(st.text(max_size=8), inner, max_size=5)
        | st.tuples(inner, inner)
    ),
    max_leaves=30,
)


@settings(max_examples=200, deadline=None)
@given(first=values, others=st.lists(values, max_size=6))
def test_every_value_unpacks_to_itself_whatever_was_packed_first(
    first: Any, others: list[Any]
) -> None:
    packer = Packer()
    packed = [packer.pack(v) for v in [first, *others]]
    assert [packer.unpack(p) for p in packed] == [first, *others]


def test_values_packed_from_many_threads_at_once_all_unpack() -> None:
    """The dictionary is set once, by whichever value came first: a value packed against
    another one would not unpack."""

    def pack(packer: Packer, start: threading.Barrier, got: dict[int, bytes], n: int) -> None:
        start.wait()
        got[n] = packer.pack({"n": n, "text": f"value {n} " * (n + 1)})

    for _ in range(20):
        packer, start, got = Packer(), threading.Barrier(8), {}
        threads = [threading.Thread(target=pack, args=(packer, start, got, n)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert [packer.unpack(got[n])["n"] for n in range(8)] == list(range(8))


def test_alike_values_pack_to_a_fraction_of_deflating_each_alone() -> None:
    """What a batch keeps: events of chats that differ in a few words."""

    def events(n: int) -> list[dict[str, Any]]:
        return [
            {
                "type": "tool_call_finished",
                "chat_id": f"chat-{n:06d}",
                "call": {"id": f"call_{n}_{i}", "name": "lookup", "arguments": {"item": f"x{i}"}},
                "result": f"x{i}: found",
                "schema": {"description": "Look an item up.", "parameters": {"item": "string"}},
            }
            for i in range(3)
        ]

    packer = Packer()
    packer.pack(events(0))
    packed = sum(len(packer.pack(events(n))) for n in range(1, 50))
    alone = sum(len(zlib.compress(pickle.dumps(events(n), 5), 1)) for n in range(1, 50))
    assert packed * 3 < alone


def test_a_value_that_cannot_be_pickled_raises_and_a_fresh_packer_unpacks_nothing() -> None:
    packer = Packer()
    with pytest.raises(TypeError):
        packer.pack(threading.Lock())
    with pytest.raises(ValueError, match="packed nothing"):
        packer.unpack(b"anything")
    assert packer.unpack(packer.pack([1, 2])) == [1, 2]  # the failed one set nothing
