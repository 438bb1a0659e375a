"""The plots draw users' text as it is (a ``$`` in a chat's title was read as
mathematics: italics, or savefig raised), check ``max_rows``, leave replayed calls out of
the durations and say what to pass for a frame that is not a calls frame."""

from __future__ import annotations

import io
import time
import uuid
from typing import Any

import pytest
from matplotlib import cbook
from matplotlib.figure import Figure
from matplotlib.text import Text

import nbagent
from nbagent import Chat, log, tool
from nbagent.testing import ScriptedProvider, call_tools, reply


@tool
def get_weather(city: str) -> str:
    """Weather."""
    return f"{city}: 21 C"


def _chat(title: str, *cities: str) -> Chat:
    calls = [("get_weather", {"city": c}) for c in cities or ("x",)]
    chat = Chat(provider=ScriptedProvider([call_tools(*calls), reply("ok")]))
    chat.with_tools(get_weather).ask(title)
    return chat


def _texts(fig: Figure) -> list[Text]:
    return [t for t in fig.findobj(Text) if t.get_text()]


def _drawn_as_math(t: Text) -> bool:
    return t.get_parse_math() and cbook.is_math_text(t.get_text())


TITLES = ["Is it $5 or $6 in Paris?", "weather $\\foo{$ Oslo", "costs \\$3 and $4$", "plain"]


def test_dollars_in_chat_titles_are_drawn_as_they_are() -> None:
    chats = [_chat(t) for t in TITLES]
    fig = log.plot_timeline(chats)
    fig.savefig(io.BytesIO(), format="png")  # raised: "Unknown symbol: \foo"
    texts = _texts(fig)
    assert not [t.get_text() for t in texts if _drawn_as_math(t)]
    notes = [t.get_text() for t in fig.axes[0].texts]
    assert any("“Is it $5 or $6 in Paris?”" in n for n in notes)
    assert any("“weather $\\foo{$ Oslo”" in n for n in notes)


def test_dollars_in_tool_names_and_statuses_are_drawn_as_they_are() -> None:
    chat = _chat("go", "a", "b")
    df = chat.log
    df["tool"] = df["tool"].astype("string").str.cat(["$x$", "$\\foo{$"], sep="")
    df["status"] = df["status"].cat.rename_categories(lambda c: f"${c}$" if c == "ok" else c)
    for plot in (log.plot_timeline, log.plot_durations):
        fig = plot(df)
        fig.savefig(io.BytesIO(), format="png")
        assert not [t.get_text() for t in _texts(fig) if _drawn_as_math(t)]


@pytest.mark.parametrize("bad", [0, -1])
def test_max_rows_must_be_positive(bad: int) -> None:
    with pytest.raises(ValueError, match="max_rows must be a positive int"):
        log.plot_timeline(_chat("go"), max_rows=bad)


@pytest.mark.parametrize("bad", [2.5, "3", True])
def test_max_rows_must_be_an_int(bad: object) -> None:
    with pytest.raises(TypeError, match="max_rows must be a positive int"):
        log.plot_timeline(_chat("go"), max_rows=bad)  # type: ignore[arg-type]


def test_max_rows_none_shows_every_call() -> None:
    import numpy as np

    chat = _chat("go", "a", "b", "c", "d")
    everything = log.plot_timeline(chat, max_rows=None).axes[0]
    assert everything.get_title(loc="left") == "Tool calls per step (4 calls)"
    assert len(everything.get_yticklabels()) == 4
    two = log.plot_timeline(chat, max_rows=np.int64(2)).axes[0]
    assert two.get_title(loc="left") == "Tool calls per step (latest 2 of 4 calls)"


def test_replayed_calls_are_not_in_the_durations_plot() -> None:
    """A replayed call's duration (reading its recorded result, some microseconds) was
    drawn as a run."""
    runs: list[str] = []

    @tool
    def slow_lookup(city: str) -> str:
        """Weather."""
        runs.append(city)
        time.sleep(0.2)
        return f"{city}: 21 C"

    city = f"Paris {uuid.uuid4().hex}"  # replay="auto" keeps recordings across chats: a new one

    def script() -> list[Any]:
        return [call_tools(("slow_lookup", {"city": city}, "w1")), reply("sunny")]

    chats = []
    for _ in range(2):
        chat = Chat(provider=ScriptedProvider(script()), replay="auto", replay_tools=True)
        chat.with_tools(slow_lookup).ask(f"Weather in {city}?")
        chats.append(chat)
    both = nbagent.read_log(chats)
    assert runs == [city] and both["replayed"].tolist() == [False, True]
    ran = float(both["duration_ms"].iloc[0])
    fig = log.plot_durations(chats)
    ax = fig.axes[0]
    assert ax.get_title(loc="left") == "Tool call durations (1 runs; 1 replayed left out)"
    points = [x for c in ax.collections for x in c.get_offsets()[:, 0]]
    assert points == [pytest.approx(ran)]
    only = log.plot_durations(chats[1])  # a replay alone: nothing ran
    texts = [t.get_text() for t in only.axes[0].texts]
    assert texts == ["no tool call has run yet; 1 replayed left out"]


def test_the_plots_say_what_to_pass_for_a_frame_that_is_not_calls() -> None:
    chat = _chat("go")
    with pytest.raises(TypeError, match=r"plot_timeline\(\).*messages frame \(chat\.messages\)"):
        log.plot_timeline(chat.messages)
    with pytest.raises(TypeError, match=r"plot_durations\(\).*steps frame \(chat\.steps\)"):
        log.plot_durations(chat.steps)
