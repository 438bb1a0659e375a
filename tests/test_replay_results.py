"""Recorded tool results (``replay_tools``) are kept by call id and arguments.

A replayed response asks for its calls with the same ids; a call may run with
other arguments then (a person's edit in a rerun, a fork's edit, a sweep's edit
branch). Kept by call id alone, that run replaced the first one's result, and the
next replay of the original ran its side effect again. Each test runs real chats
with the scripted provider and a tool that counts its runs, in the three places
recordings live (a folder, a store, the process).
"""

from __future__ import annotations

import json
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nbagent import Chat, tool
from nbagent._replay import PROCESS
from nbagent.evaluation import sweep, tool_called
from nbagent.testing import ScriptedProvider, call_tools, reply

RUNS: Counter[int] = Counter()


@tool(requires_approval=True)
def refund(order_id: int) -> str:
    """Issue a refund (a side effect).

    Args:
        order_id: The order.
    """
    RUNS[order_id] += 1
    return f"refunded {order_id}"


def _answer(request: Any) -> Any:
    if len(request.messages) == 1:
        return call_tools(("refund", {"order_id": 1}, "c1"))
    return reply("done: " + str(request.messages[-1].content)[-20:])


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    PROCESS.clear()
    RUNS.clear()
    yield
    PROCESS.clear()


def _places(where: str, tmp: Path) -> Callable[[], dict[str, Any]]:
    """A chat's recordings keywords for ``where``; each call is a new kernel's (the process's
    recordings forgotten) but for the memory, which is the process."""

    def kw() -> dict[str, Any]:
        if where == "memory":
            return {}
        PROCESS.clear()  # a fresh kernel: only the folder / the store remembers
        if where == "folder":
            return {"recordings": tmp / "rec"}
        return {"store": str(tmp / "chats.db")}

    return kw


def _run(kw: dict[str, Any], edit: dict[str, Any] | None = None) -> Chat:
    chat = Chat(
        provider=ScriptedProvider([_answer], repeat_last=True),
        display=False,
        replay="auto",
        replay_tools=True,
        **kw,
    ).with_tools(refund)
    chat.ask("refund order 1")
    chat.approve(chat.pending_approvals[0], edit)
    chat.complete()
    return chat


@pytest.mark.parametrize("where", ["folder", "store", "memory"])
def test_a_fork_with_other_arguments_keeps_the_originals_result(where: str, tmp_path: Path) -> None:
    kw = _places(where, tmp_path)
    chat = _run(kw())
    assert RUNS == {1: 1}
    fork = chat.fork(chat.tool_calls[0], arguments={"order_id": 99})
    fork.complete()
    assert RUNS == {1: 1, 99: 1}
    again = _run(kw())  # the original notebook rerun: answered, nothing runs
    assert RUNS == {1: 1, 99: 1}
    assert list(again.log["replayed"]) == [True]
    assert again.tool_calls[0].result.content.endswith("refunded 1")  # type: ignore[union-attr]
    # the fork's run is kept too (a store finds it through the fork's parent: the shared
    # step has no request of the fork's): a rerun with its edit runs nothing either
    edited = _run(kw(), {"order_id": 99})
    assert RUNS == {1: 1, 99: 1}
    assert edited.tool_calls[0].result.content.endswith("refunded 99")  # type: ignore[union-attr]


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_a_stored_notebook_of_forks_rerun_runs_nothing(
    engine: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A notebook (a chat, its fork with other arguments, that fork's fork) rerun in a fresh
    kernel with only the store: every call is answered from the store."""
    store = (
        str(tmp_path / "c.db") if engine == "sqlite" else request.getfixturevalue("postgres_dsn")
    )

    def notebook() -> list[str]:
        PROCESS.clear()
        chat = _run({"store": store})
        fork = chat.fork(chat.tool_calls[0], arguments={"order_id": 99})
        fork.complete()
        again = fork.fork(fork.tool_calls[0], arguments={"order_id": 7})
        again.complete()
        out = [c.tool_calls[0].result.content for c in (chat, fork, again)]  # type: ignore[union-attr]
        for c in (chat, fork, again):
            c.close()
        return out

    first = notebook()
    assert RUNS == {1: 1, 99: 1, 7: 1}
    assert notebook() == first
    assert RUNS == {1: 1, 99: 1, 7: 1}


@pytest.mark.parametrize("where", ["folder", "store", "memory"])
def test_an_edited_rerun_never_makes_the_original_run_again(where: str, tmp_path: Path) -> None:
    kw = _places(where, tmp_path)
    _run(kw())
    _run(kw())
    assert RUNS == {1: 1}
    _run(kw(), {"order_id": 2})  # other arguments: it runs, once
    assert RUNS == {1: 1, 2: 1}
    _run(kw())
    _run(kw(), {"order_id": 2})
    assert RUNS == {1: 1, 2: 1}


@pytest.mark.parametrize("where", ["folder", "store", "memory"])
@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(edits=st.lists(st.sampled_from([None, 1, 2, 3]), min_size=1, max_size=6))
def test_each_set_of_arguments_runs_once_whatever_the_order(where: str, edits: list[Any]) -> None:
    """Invariant: with ``replay_tools``, reruns of one request run the tool once per set of
    arguments it is approved with (``None``: the model's, order 1), in any order."""
    RUNS.clear()
    PROCESS.clear()
    with tempfile.TemporaryDirectory() as tmp:
        kw = _places(where, Path(tmp))
        for order in edits:
            _run(kw(), None if order is None else {"order_id": order})
    once_each = dict.fromkeys({1 if order is None else order for order in edits}, 1)
    assert once_each == RUNS


def test_a_recording_with_one_result_per_call_id_still_replays(tmp_path: Path) -> None:
    """A folder written before results were kept by arguments: ``results[call id]``."""
    from nbagent._recording import split_slot

    folder = tmp_path / "rec"
    _run({"recordings": folder})
    assert RUNS == {1: 1}
    (path,) = [p for p in folder.glob("*.json") if json.loads(p.read_text()).get("results")]
    data = json.loads(path.read_text())
    data["results"] = {split_slot(k)[0]: v for k, v in data["results"].items()}
    assert list(data["results"]) == ["c1"]
    path.write_text(json.dumps(data))
    PROCESS.clear()
    again = _run({"recordings": folder})  # the same arguments: replayed
    assert RUNS == {1: 1}
    assert list(again.log["replayed"]) == [True]
    PROCESS.clear()
    _run({"recordings": folder}, {"order_id": 5})  # other arguments: it runs
    assert RUNS == {1: 1, 5: 1}


def test_a_result_slot_names_the_call_and_its_arguments() -> None:
    from nbagent._recording import result_slot, split_slot

    slot = result_slot("call 1 args=x", {"b": [1, 2], "a": "é"})
    assert slot == result_slot("call 1 args=x", {"a": "é", "b": (1, 2)})  # key order, JSON forms
    assert slot != result_slot("call 1 args=x", {"a": "é", "b": [2, 1]})
    assert split_slot(slot)[0] == "call 1 args=x" and split_slot(slot)[1] is not None
    assert split_slot("call_1") == ("call_1", None)
    assert split_slot("call args=not-a-digest") == ("call args=not-a-digest", None)


def test_a_sweep_with_an_edit_run_twice_runs_nothing_the_second_time(tmp_path: Path) -> None:
    def make_chat() -> Chat:
        return Chat(
            provider=ScriptedProvider([_answer], repeat_last=True),
            display=False,
            replay="auto",
            recordings=tmp_path / "rec",
            replay_tools=True,
        ).with_tools(refund)

    def once() -> Any:
        return sweep(
            ["Refund order 1"],
            make_chat,
            [tool_called("refund", status="ok")],
            edits={"refund": [{"order_id": 7}]},
            progress=False,
        )

    first = once()
    assert RUNS == {1: 1, 7: 1}
    PROCESS.clear()
    second = once()
    assert RUNS == {1: 1, 7: 1}  # approve and edit branches both answered from the folder
    assert sorted(set(second["branch"])) == sorted(set(first["branch"]))
