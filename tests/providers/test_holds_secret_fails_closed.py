"""``holds_secret`` never misses a secret within its reach, and fails closed.

It decides whether the SDK's exception may be chained to the ProviderError: a
miss leaves the API key reachable from the error (its request's
``authorization`` header). Two ways it missed one: an object first reached by a
long path had its contents cut off and its short path was then skipped; and an
attribute object whose ``__getattr__`` raises made the check raise inside the
handler, so that exception left it with the SDK's exception as ``__context__``.
"""

from __future__ import annotations

from typing import Any

import httpx
import httpx2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_error_chain_holds_no_key import reachable

from nbagent import ProviderError
from nbagent.providers._errors import _WALK_DEPTH, NotChained, holds_secret, sdk_errors

KEY = "PLAINKEY-abcdefghijklmnop-9876"


class Box:
    def __init__(self, inner: Any = None) -> None:
        self.inner = inner


def chain(end: Any, steps: int) -> Any:
    """``end`` behind ``steps`` boxes (``steps`` attribute reads from the returned box)."""
    for _ in range(steps):
        end = Box(end)
    return end


def authorized() -> httpx.Request:
    return httpx.Request("POST", "http://x/v1", headers={"authorization": f"Bearer {KEY}"})


def test_a_short_path_counts_though_a_long_one_is_walked_first() -> None:
    request = authorized()
    exc = RuntimeError("boom")
    exc.holder = Box(request)  # type: ignore[attr-defined]  # request 2 steps away
    exc.deep = chain(request, 7)  # type: ignore[attr-defined]  # and 8 steps away
    assert holds_secret(exc, ())
    assert holds_secret(exc, (KEY,))
    del exc.deep  # type: ignore[attr-defined]
    assert holds_secret(exc, ())


def test_a_short_path_counts_whichever_attribute_comes_first() -> None:
    request = authorized()
    for first_deep in (True, False):
        exc = RuntimeError("boom")
        if first_deep:
            exc.a = chain(request, 7)  # type: ignore[attr-defined]
            exc.b = Box(request)  # type: ignore[attr-defined]
        else:
            exc.a = Box(request)  # type: ignore[attr-defined]
            exc.b = chain(request, 7)  # type: ignore[attr-defined]
        assert holds_secret(exc, ())


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_a_secret_is_found_exactly_when_a_path_to_it_is_short_enough(data: st.DataObject) -> None:
    """A random graph of boxes (attribute ``inner`` and a list ``more``), the secret
    string stored in some of them: found when its shortest path from the exception is at
    most ``_WALK_DEPTH`` steps, whatever order the walk meets the paths in."""
    n = data.draw(st.integers(2, 24))
    nodes = [Box() for _ in range(n)]
    edges: dict[int, list[int]] = {i: [] for i in range(n)}
    for i, node in enumerate(nodes):
        targets = data.draw(st.lists(st.integers(0, n - 1), max_size=3))
        node.inner = nodes[targets[0]] if targets else None
        node.more = [nodes[t] for t in targets[1:]]  # type: ignore[attr-defined]
        edges[i] = targets
    holders = data.draw(st.sets(st.integers(0, n - 1), max_size=2))
    for h in holders:
        nodes[h].secret = f"token {KEY}"  # type: ignore[attr-defined]
    roots = data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=3))
    exc = RuntimeError("boom")
    exc.roots = [nodes[r] for r in roots]  # type: ignore[attr-defined]

    # steps from exc: exc.roots (1), its item (2); node.inner (+1), node.more[i] (+2);
    # node.secret (+1)
    dist = {}
    frontier = [(2, r) for r in roots]
    import heapq

    heapq.heapify(frontier)
    while frontier:
        d, i = heapq.heappop(frontier)
        if i in dist:
            continue
        dist[i] = d
        targets = edges[i]
        if targets:
            heapq.heappush(frontier, (d + 1, targets[0]))
        for t in targets[1:]:
            heapq.heappush(frontier, (d + 2, t))
    nearest = min((dist[h] + 1 for h in holders if h in dist), default=None)
    expected = nearest is not None and nearest <= _WALK_DEPTH
    assert holds_secret(exc, (KEY,)) is expected


class Weird:
    """A dict-backed attribute object: its ``__getattr__`` raises KeyError."""

    __slots__ = ("x",)

    def __getattr__(self, name: str) -> Any:
        raise KeyError(name)


ASKED: list[str] = []


class Recording:
    """An object that computes attributes on demand (and must not be asked to)."""

    def __init__(self) -> None:
        self.plain = "nothing here"

    def __getattr__(self, name: str) -> Any:
        ASKED.append(name)
        raise AttributeError(name)

    @property
    def computed(self) -> str:
        ASKED.append("computed")
        return "nothing"


def test_no_attribute_is_computed_while_walking() -> None:
    ASKED.clear()
    exc = RuntimeError("boom")
    exc.extra = Recording()  # type: ignore[attr-defined]
    exc.weird = Weird()  # type: ignore[attr-defined]
    assert holds_secret(exc, (KEY,)) is False
    assert ASKED == []


def test_an_attribute_raising_leaves_no_way_to_the_key() -> None:
    request = httpx2.Request("POST", "http://x/v1", headers={"authorization": f"Bearer {KEY}"})
    error = httpx2.ConnectError("refused", request=request)
    error.extra = Weird()  # type: ignore[attr-defined]
    with pytest.raises(ProviderError) as info, sdk_errors("openai", (KEY,)):
        raise error
    err = info.value
    assert err.__cause__ is None
    assert isinstance(err.__context__, NotChained)
    assert err.__context__.__context__ is None
    assert reachable(err, KEY) == []


class BrokenHeaders:
    """Headers (httpx's shape) that cannot be read."""

    def get(self, name: str, default: Any = None) -> Any:
        return default

    def multi_items(self) -> list[tuple[str, str]]:
        raise RuntimeError("closed")


class BrokenRepr:
    def __str__(self) -> str:
        raise ValueError("no text")


def test_what_cannot_be_read_counts_as_a_secret() -> None:
    exc = RuntimeError("boom")
    exc.headers = BrokenHeaders()  # type: ignore[attr-defined]
    assert holds_secret(exc, (KEY,)) is True

    odd = RuntimeError(BrokenRepr())  # its str() raises: reveals() cannot read it
    assert holds_secret(odd, (KEY,)) is True


def test_nothing_raised_in_the_handler_is_chained() -> None:
    """An SDK exception nbagent cannot read at all (its text raises) still leaves as a
    ProviderError whose chain leads to nothing of it."""

    class Unreadable(httpx2.ConnectError):
        def __str__(self) -> str:
            raise KeyError("authorization")

    Unreadable.__module__ = "httpx2._exceptions"  # an SDK's, as nbagent maps them

    request = httpx2.Request("POST", "http://x/v1", headers={"authorization": f"Bearer {KEY}"})
    with pytest.raises(ProviderError) as info, sdk_errors("openai", (KEY,)):
        raise Unreadable("refused", request=request)
    err = info.value
    assert err.__cause__ is None
    assert isinstance(err.__context__, NotChained)
    assert err.__context__.__context__ is None
    assert reachable(err, KEY) == []
    assert err.sdk_error is not None and "Unreadable" in err.sdk_error


def test_a_clean_exception_is_still_chained() -> None:
    refused = httpx2.ConnectError("connection refused")
    refused.extra = Recording()  # type: ignore[attr-defined]
    with pytest.raises(ProviderError) as info, sdk_errors("openai", (KEY,)):
        raise refused
    assert info.value.__cause__ is refused
