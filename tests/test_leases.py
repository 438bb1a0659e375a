"""``nbagent._leases``: what the stores opened by path and the providers' SDK clients share.

A property over any order of takes and releases, on any keys, from threads: an object is
never closed while someone holds a lease on it, is closed exactly once when the last
lease goes, and a key never has two live objects.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from nbagent._leases import Leases


@dataclass
class Thing:
    key: str
    closed: int = 0
    holders: set[int] = field(default_factory=set)


def _leases(made: list[Thing]) -> Leases[Thing]:
    def close(thing: Thing) -> None:
        assert not thing.holders, f"closed while held by {thing.holders}"
        thing.closed += 1

    return Leases(close, lambda thing: thing.closed == 0)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["take", "release", "release later", "release twice"]),
            st.sampled_from("abc"),
        ),
        max_size=60,
    )
)
def test_an_object_is_closed_once_when_its_last_lease_goes(steps: list[tuple[str, str]]) -> None:
    made: list[Thing] = []
    leases = _leases(made)
    held: list[tuple[int, Thing, object]] = []  # (holder, thing, release)
    for n, (what, key) in enumerate(steps):
        if what == "take":
            thing, release = leases.take(key, lambda key=key: made.append(Thing(key)) or made[-1])
            assert thing.key == key and thing.closed == 0
            live = {h[1].key: h[1] for h in held}
            assert live.get(key, thing) is thing  # one live object per key
            thing.holders.add(n)
            held.append((n, thing, release))
        else:
            mine = [h for h in held if h[1].key == key]
            if not mine:
                continue
            holder, thing, release = mine[0]
            held.remove(mine[0])
            thing.holders.discard(holder)
            release(what == "release later")  # type: ignore[operator]
            if what == "release twice":
                release(False)  # type: ignore[operator]  # idempotent
    deadline = time.monotonic() + 10
    while any(t.closed == 0 and not t.holders for t in made):  # "later": on a worker thread
        assert time.monotonic() < deadline
        time.sleep(0.005)
    for thing in made:
        assert thing.closed == (0 if thing.holders else 1), thing
    assert len(leases) == len({t.key for t in made if t.holders})


def test_threads_taking_and_releasing_never_close_a_held_object() -> None:
    made: list[Thing] = []
    leases = _leases(made)
    lock = threading.Lock()
    errors: list[BaseException] = []

    def work(me: int) -> None:
        try:
            for i in range(300):
                thing, release = leases.take("k", lambda: Thing("k"))
                with lock:
                    assert thing.closed == 0
                    thing.holders.add(me * 1000 + i)
                with lock:
                    thing.holders.discard(me * 1000 + i)
                release(False)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(leases) == 0
