"""A forced tool choice the model does not follow is dropped after a few rounds, and a fork
or a loaded chat follows the forced choice exactly as the chat it came from.

892cce2 kept a ``required`` or named choice in force until the model used the forced tool.
A model or server that ignores ``tool_choice`` (compatible servers; nbagent enforces the
choice itself by skipping off-choice calls) then made every round skipped with the choice
still forced: ``complete()`` stopped only at ``max_steps`` (25 requests, no answer) and the
seed's ``step until complete? || awaiting_approval?`` loop never ended. Now a choice the
model ignored for ``FORCED_IGNORED_ROUNDS`` rounds (only off-choice calls, or its call of the
forced tool rejected) is spent, with a notice, and the model may answer.

A fork's state came from ``ChatRecord.snapshot``, which still said "spent" once any tool
result was in the turn (the rule 892cce2 replaced in the loop): the parent kept sending
``get_weather`` where its fork sent ``auto``. One function decides now, for the loop and the
record alike.
"""

from __future__ import annotations

import pytest

from nbagent import Chat, tool
from nbagent._options import FORCED_IGNORED_ROUNDS
from nbagent.testing import ScriptedProvider, call_tools, reply

ran: list[str] = []


@tool
def get_weather(city: str) -> str:
    """Get the weather for a city.

    Args:
        city: The city.
    """
    ran.append(f"weather {city}")
    return f"{city}: 18 C"


@tool
def get_time(city: str) -> str:
    """Get the time in a city.

    Args:
        city: The city.
    """
    ran.append(f"time {city}")
    return f"{city}: 12:00"


def stubborn(req):  # type: ignore[no-untyped-def]
    """A model behind a server that ignores tool_choice: another tool whenever forced."""
    if req.tool_choice == "auto":
        return reply("done")
    return call_tools(("get_time", {"city": "Rome"}))


def late(req):  # type: ignore[no-untyped-def]
    """Ignores the choice once, then calls the forced tool."""
    if req.tool_choice == "auto":
        return reply("It is 18 C in Rome.")
    results = sum(1 for m in req.messages if type(m).__name__ == "ToolResultMessage")
    return call_tools(("get_time" if results == 0 else "get_weather", {"city": "Rome"}))


def _chat(model, **kw) -> tuple[Chat, ScriptedProvider]:  # type: ignore[no-untyped-def]
    ran.clear()
    p = ScriptedProvider([model], repeat_last=True)
    chat = Chat(provider=p, display=False, **kw).with_tools(get_weather, get_time)
    return chat.with_tool_options(choice="get_weather"), p


def _choices(p: ScriptedProvider, start: int = 0) -> list[str]:
    return [r.tool_choice for r in p.requests[start:]]


def test_complete_answers_once_the_ignored_choice_is_dropped(
    capsys: pytest.CaptureFixture[str],
) -> None:
    chat, p = _chat(stubborn)
    assert chat.ask("Weather in Rome?").content == "done"
    assert _choices(p) == ["get_weather"] * FORCED_IGNORED_ROUNDS + ["auto"]
    assert ran == []  # the off-choice calls were skipped, never run
    assert chat.last_step is None or chat.last_step.kind != "budget_exhausted"
    err = capsys.readouterr().err
    assert "get_weather" in err and "did not follow" in err


def test_the_seeds_step_loop_ends_within_the_bound() -> None:
    chat, p = _chat(stubborn)
    chat.ask_later("Weather in Rome?")
    for _ in range(50):
        chat.step()
        if chat.is_complete or chat.awaiting_approval:
            break
    assert chat.is_complete
    assert _choices(p) == ["get_weather"] * FORCED_IGNORED_ROUNDS + ["auto"]


def test_a_model_that_complies_late_still_gets_the_choice_forced() -> None:
    chat, p = _chat(late)
    assert chat.ask("Weather in Rome?").content == "It is 18 C in Rome."
    assert ran == ["weather Rome"]
    assert _choices(p) == ["get_weather", "get_weather", "auto"]


def test_the_next_turn_is_forced_again() -> None:
    chat, p = _chat(stubborn)
    chat.ask("Weather in Rome?")
    n = len(p.requests)
    chat.ask("And in Paris?")
    assert _choices(p, n) == ["get_weather"] * FORCED_IGNORED_ROUNDS + ["auto"]


# -- forks and loads continue exactly as the chat would ---------------------------


@pytest.mark.parametrize("model", [stubborn, late], ids=["stubborn", "late"])
def test_a_fork_now_continues_as_the_parent(model) -> None:  # type: ignore[no-untyped-def]
    chat, p = _chat(model)
    chat.ask("Weather in Rome?", max_steps=1)  # one round: the choice was ignored once
    fork = chat.fork()
    n = len(p.requests)
    fork.complete()
    by_fork = _choices(p, n)
    n = len(p.requests)
    chat.complete()
    assert by_fork == _choices(p, n) == ["get_weather", "auto"]
    assert fork.last_assistant_message.content == chat.last_assistant_message.content


@pytest.mark.parametrize("model", [stubborn, late], ids=["stubborn", "late"])
def test_a_fork_at_each_earlier_step_continues_as_the_parent(model) -> None:  # type: ignore[no-untyped-def]
    chat, p = _chat(model)
    chat.ask("Weather in Rome?")
    sent = _choices(p)
    assert sent == ["get_weather", "get_weather", "auto"]
    for i, s in enumerate(chat.record.steps):
        fork = chat.fork(step=s.step)
        n = len(p.requests)
        fork.complete()
        assert _choices(p, n) == sent[i + 1 :], f"fork at step {s.step}"
        assert fork.last_assistant_message.content == chat.last_assistant_message.content


def test_a_fork_that_sets_a_choice_mid_turn_forces_it_as_the_chat_would() -> None:
    """Rounds under ``auto`` do not spend a choice set later in the turn."""

    def model(req):  # type: ignore[no-untyped-def]
        if req.tool_choice == "get_weather":
            return call_tools(("get_weather", {"city": "Rome"}))
        results = sum(1 for m in req.messages if type(m).__name__ == "ToolResultMessage")
        return call_tools(("get_time", {"city": "Rome"})) if results < 2 else reply("ok")

    chat, p = _chat(model)
    chat.with_tool_options(choice="auto")
    chat.ask("Weather in Rome?", max_steps=2)  # one round under auto: get_time ran
    fork = chat.fork(tool_options={"choice": "get_weather"})
    n = len(p.requests)
    fork.complete()
    by_fork = _choices(p, n)
    chat.with_tool_options(choice="get_weather")
    n = len(p.requests)
    chat.complete()
    assert by_fork == _choices(p, n)
    assert by_fork[0] == "get_weather"


def test_a_loaded_chat_and_its_fork_continue_as_the_chat(tmp_path) -> None:  # type: ignore[no-untyped-def]
    db = tmp_path / "chats.db"
    chat, p = _chat(stubborn, store=str(db))
    chat.ask("Weather in Rome?", max_steps=1)
    loaded = Chat.load(chat.id, store=str(db), tools=[get_weather, get_time], provider=p)
    fork = loaded.fork()
    n = len(p.requests)
    fork.complete()
    by_fork = _choices(p, n)
    n = len(p.requests)
    loaded.complete()  # the chat itself is the loaded copy's now (a store has one driver)
    by_loaded = _choices(p, n)
    twin, q = _chat(stubborn)
    twin.ask("Weather in Rome?", max_steps=1)
    n = len(q.requests)
    twin.complete()
    assert by_fork == by_loaded == _choices(q, n) == ["get_weather", "auto"]
