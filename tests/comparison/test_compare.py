"""nbagent.compare: runs side by side, aligned by step, and a DataFrame of what differs.

For forks (their shared history folds away) and for the same prompt on two
providers: the offline demo model and the real OpenAI SDK against the loopback
fake server. Everything a model or a tool wrote is escaped in every format.
"""

from __future__ import annotations

import re
from typing import Any

import pandas as pd
import pytest

import nbagent
from nbagent import Chat, tool
from nbagent.comparison import Comparison
from nbagent.comparison._runs import run_of
from nbagent.providers import OpenAIProvider
from nbagent.testing import FakeLLMServer, FakeToolCall, ScriptedProvider, Turn, call_tools, reply


@tool
def get_weather(city: str) -> str:
    """Current weather in a city."""
    return f"Sunny in {city}, 24 C"


@tool(requires_approval=True)
def delete_file(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


def _denied_and_approved() -> tuple[Chat, Chat]:
    provider = ScriptedProvider(
        [
            call_tools(("get_weather", {"city": "Oslo"}, "w"), ("delete_file", {"path": "x"}, "d")),
            reply("I did not delete it."),
            reply("Deleted, and it is sunny."),
        ]
    )
    chat = Chat(provider=provider).with_tools(get_weather, delete_file)
    chat.ask("Weather, then delete x")
    chat.deny("d", reason="keep it")
    chat.complete()
    fork = chat.fork("d", decision="approved")
    fork.complete()
    return chat, fork


def _cells(df: pd.DataFrame) -> dict[tuple[int, str], tuple[Any, ...]]:
    return {(int(r.step), str(r.field)): tuple(r[2:]) for _, r in df.iterrows()}


def test_a_fork_at_a_call_differs_in_that_call_and_what_followed() -> None:
    chat, fork = _denied_and_approved()
    df = nbagent.compare(chat, fork)
    assert list(df.columns) == ["step", "field", "a", "b"]
    assert str(df["step"].dtype) == "Int64"
    cells = _cells(df)
    assert set(cells) - {(2, "latency_ms")} == {
        (1, "call 2 decision"),
        (1, "call 2 result"),
        (2, "text"),
    }
    assert cells[(1, "call 2 decision")] == ("denied by user: keep it", "approved by user")
    a, b = cells[(1, "call 2 result")]
    assert a.startswith("[denied] ") and "keep it" in a and b == "deleted x"
    assert cells[(2, "text")] == ("I did not delete it.", "Deleted, and it is sunny.")


def test_the_totals_row_is_a_sum_not_a_warning_and_rows_say_their_steps() -> None:
    """Issue 25: compare's totals row was tinted like an error where runs differed, and each
    row carried a cryptic "#1 · #3" under its label."""
    provider = ScriptedProvider(
        [call_tools(("get_weather", {"city": "Oslo"}, "w")), reply("Sunny."), reply("Rain.")]
    )
    one = Chat(provider=provider).with_tools(get_weather)
    one.ask("Weather in Oslo?")  # model steps 1 (the call) and 3 (the answer): the round took 2
    two = Chat(provider=ScriptedProvider([reply("No idea.")]))
    two.ask("Weather in Oslo?")  # step 1 only
    html = Comparison([run_of(one, "tools"), run_of(two, "plain")])._repr_mimebundle_()["text/html"]
    (total,) = re.findall(r'<tr class="nba-cmp-total">.*?</tr>', html)
    assert "<th>run total</th>" in total and "2 steps" in total and "1 step<" in total
    assert "nba-cmp-diff" not in total  # the warning tint is for steps that differ, not sums
    assert 'nba-cmp-more" data-field="steps"' in total  # a sum that differs is bold
    assert "nba-cmp-diff" in html  # the steps that differ are still highlighted
    assert "<thead><tr><th>step</th>" in html  # the label column says what it labels
    assert "tools: #3" in html and "plain: #" not in html  # only a number not the row's
    assert "tools: #1" not in html and "#1 · #1" not in html


def test_a_forks_shared_history_folds_into_one_row() -> None:
    provider = ScriptedProvider(
        [call_tools(("get_weather", {"city": "Oslo"}, "w")), reply("Sunny."), reply("SUNNY.")]
    )
    chat = Chat(provider=provider, system="Be kind.").with_tools(get_weather)
    chat.ask("Weather in Oslo?")
    fork = chat.fork(step=2, system="Shout.")  # after the tool round: step 1 and the round shared
    fork.complete()
    df = nbagent.compare(chat, fork, names=["kind", "shout"])
    assert list(df.columns) == ["step", "field", "kind", "shout"]
    assert set(df["step"]) == {2} and "text" in set(df["field"])
    html = Comparison([run_of(chat, "kind"), run_of(fork, "shout")])._repr_mimebundle_()
    assert "step 1 is the same in both runs (shared history)" in html["text/html"]
    assert "nba-cmp-shared" in html["text/html"]
    assert "fork of" in html["text/html"] and "system → Shout." in html["text/html"]
    assert "step 1 is the same in both runs (shared history)" in html["text/plain"]
    assert "**Step 2**" in html["text/markdown"] and "**Step 1**" not in html["text/markdown"]


def test_the_same_prompt_on_the_demo_model_and_an_openai_server() -> None:
    demo = Chat(model="demo").with_tools(get_weather)
    demo.ask("What is the weather in Paris?")
    turns = [
        Turn(tool_calls=[FakeToolCall("get_weather", {"city": "Paris"})]),
        Turn(text="It is sunny in Paris."),
    ]
    with FakeLLMServer(turns) as server:
        provider = OpenAIProvider("gpt-4.1-mini", api_key="test", base_url=server.openai_base_url)
        remote = Chat(provider=provider).with_tools(get_weather)
        remote.ask("What is the weather in Paris?")
    assert demo.status == remote.status == "complete"
    df = nbagent.compare(demo, remote, names=["demo", "server"])
    cells = _cells(df)
    assert cells[(1, "model")] == ("demo:demo", "openai-compatible:gpt-4.1-mini")
    assert cells[(2, "text")][1] == "It is sunny in Paris."
    assert "Sunny in Paris" in cells[(2, "text")][0]
    fields = set(df["field"])
    assert not {"call 1", "call 1 result", "prompt"} & fields  # same call, same result, same prompt
    assert {"input_tokens", "output_tokens"} <= fields
    assert set(df["step"]) == {1, 2}


def test_runs_of_different_lengths_and_more_than_two() -> None:
    one = Chat(provider=ScriptedProvider([reply("Short.")]))
    one.ask("Hi")
    two = Chat(
        provider=ScriptedProvider(
            [call_tools(("get_weather", {"city": "Rome"})), reply("Rome: sunny.")]
        )
    )
    two.with_tools(get_weather).ask("Hi")
    three = one.fork(step=0, system="Other.")
    three.provider = ScriptedProvider([reply("Short.")])
    three.complete()
    df = nbagent.compare(one, two, three)
    assert list(df.columns) == ["step", "field", "a", "b", "c"]
    cells = _cells(df)
    assert cells[(1, "call 1")] == (None, 'get_weather({"city": "Rome"})', None)
    assert cells[(2, "text")] == (None, "Rome: sunny.", None)
    text = repr(Comparison([run_of(c, n) for c, n in ((one, "a"), (two, "b"), (three, "c"))]))
    assert "≠ call 1:" in text


def test_everything_a_model_or_tool_wrote_is_escaped() -> None:
    evil = '<img src=x onerror="alert(1)"> **bold** [link](http://x) \x1b[31mred'

    @tool
    def echo(text: str) -> str:
        """Echo."""
        return evil

    provider = ScriptedProvider([call_tools(("echo", {"text": "<script>x</script>"})), reply(evil)])
    chat = Chat(provider=provider).with_tools(echo)
    chat.ask(evil)
    other = chat.fork(step=0)
    other.provider = ScriptedProvider([reply("plain")])
    other.complete()
    bundle = Comparison([run_of(chat, "<b>a</b>"), run_of(other, "b")])._repr_mimebundle_()
    html, md, text = bundle["text/html"], bundle["text/markdown"], bundle["text/plain"]
    assert "<img" not in html and "<script" not in html and "<b>a</b>" not in html
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in html
    assert "&lt;b&gt;a&lt;/b&gt;" in html
    assert "\x1b" not in html + md + text and "\\x1b" in text
    assert "<img" not in md and "<b>" not in md
    assert "[link]" not in md and "**bold**" not in md  # escaped: no link, no emphasis
    assert "\\[link\\]" in md


def test_bad_input_says_what_is_wrong() -> None:
    chat = Chat(provider=ScriptedProvider([reply("x")]))
    chat.ask("hi")
    with pytest.raises(TypeError, match="two or more chats"):
        nbagent.compare(chat)
    with pytest.raises(TypeError, match="takes chats"):
        nbagent.compare(chat, "not a chat")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="1 name"):
        nbagent.compare(chat, chat, names=["a"])
    with pytest.raises(ValueError, match="unique"):
        nbagent.compare(chat, chat, names=["a", "a"])


def test_display_shows_the_comparison(capsys: pytest.CaptureFixture[str]) -> None:
    chat, fork = _denied_and_approved()
    nbagent.compare(chat, fork)  # outside a kernel: nothing shown
    assert capsys.readouterr().out == ""
    nbagent.compare(chat, fork, display=True)
    assert "≠ call 2 decision:" in capsys.readouterr().out


def test_a_replayed_rerun_differs_only_in_how_it_was_answered() -> None:
    first = Chat("demo", replay="auto").with_tools(get_weather)
    first.ask("What is the weather in Lisbon?")
    rerun = Chat("demo", replay="auto").with_tools(get_weather)
    rerun.ask("What is the weather in Lisbon?")
    df = nbagent.compare(first, rerun)
    cells = _cells(df)
    assert cells[(1, "replayed")] == (False, True) and cells[(2, "replayed")] == (False, True)
    assert set(df["field"]) <= {"replayed", "latency_ms"}
    html = Comparison([run_of(first, "a"), run_of(rerun, "b")])._repr_mimebundle_()["text/html"]
    assert "asked the model" in html and ">replayed<" in html


def test_a_fork_on_another_provider_reruns_the_prompt_there() -> None:
    demo = Chat(model="demo").with_tools(get_weather)
    demo.ask("What is the weather in Paris?")
    turns = [
        Turn(tool_calls=[FakeToolCall("get_weather", {"city": "Paris"})]),
        Turn(text="Sunny, 24 C."),
    ]
    with FakeLLMServer(turns) as server:
        provider = OpenAIProvider("gpt-4.1-mini", api_key="test", base_url=server.openai_base_url)
        other = demo.fork(step=0, model=provider)
        other.complete()
        assert len(server.requests) == 2
    assert other.parent is not None and other.parent.value == "openai-compatible:gpt-4.1-mini"
    df = nbagent.compare(demo, other)
    cells = _cells(df)
    assert cells[(1, "model")] == ("demo:demo", "openai-compatible:gpt-4.1-mini")
    assert cells[(2, "text")][1] == "Sunny, 24 C."
    assert (1, "prompt") not in cells  # the same prompt, shared
    assert demo.provider.name == "demo" and demo.status == "complete"
