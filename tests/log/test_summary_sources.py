"""log.summary and read_log over what users pass them: a batch's result, ``chat.log`` (its
steps come with it), frames that are not calls frames (a clear TypeError), a store read
for a Chat or a list of ids; and the summary's numbers: denial rate within the decided
calls, latency over calls that ran (not replayed ones), tokens that add up exactly."""

from __future__ import annotations

import copy
import dataclasses
import pickle
import time
import uuid
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nbagent
from nbagent import Chat, log, tool
from nbagent.log._projection import LOG_STATUSES, dtypes
from nbagent.store import SQLiteStore
from nbagent.testing import ScriptedProvider, call_tools, reply


@tool
def get_weather(city: str) -> str:
    """Weather."""
    return f"{city}: 21 C"


def _weather_chat(*cities: str) -> Chat:
    calls = [("get_weather", {"city": c}) for c in cities]
    provider = ScriptedProvider(
        [
            dataclasses.replace(call_tools(*calls), input_tokens=100, output_tokens=1),
            dataclasses.replace(reply("ok"), input_tokens=5, output_tokens=5),
        ]
    )
    chat = Chat(provider=provider).with_tools(get_weather)
    chat.ask("weather?")
    return chat


# ---------------------------------------------------------------- sources
def test_the_summary_of_a_batch_result_has_its_tokens() -> None:
    """A batch's result is a DataFrame: its steps were never read (tokens and cost NA),
    while the same result in a list had them."""
    result = nbagent.batch(
        ["weather in Paris?", "weather in Oslo?"],
        lambda: Chat("demo").with_tools(get_weather),
        progress=False,
    )
    s = log.summary(result)
    assert s["tokens"].notna().all() and s["tokens"].sum() > 0
    pd.testing.assert_frame_equal(s, log.summary([result]))


def test_summary_of_chat_log_has_the_tokens_of_its_steps() -> None:
    chat = _weather_chat("Paris", "Oslo", "Lima")
    whole = log.summary(chat)
    assert whole.loc["get_weather", "tokens"] == 101
    pd.testing.assert_frame_equal(log.summary(chat.log), whole)
    # a frame derived from it keeps the way to the steps (pandas copies attrs deeply)
    one = chat.log[chat.log["call_id"] == chat.log["call_id"].iloc[0]]
    assert log.summary(one)["tokens"].notna().all()
    pd.testing.assert_frame_equal(log.summary(copy.deepcopy(chat.log)), whole)
    # pd.concat keeps attrs its parts share: one chat's frames keep their steps
    assert log.summary(pd.concat([chat.log.iloc[:1], chat.log.iloc[1:]])).equals(whole)
    other = _weather_chat("Rome")
    assert log.summary(pd.concat([chat.log, other.log]))["tokens"].isna().all()


def test_chat_log_carries_a_handle_to_its_steps_not_a_frame() -> None:
    chat = _weather_chat("Paris")
    df = chat.log
    (ref,) = df.attrs.values()
    assert not isinstance(ref, pd.DataFrame)
    assert copy.deepcopy(ref) is ref and copy.copy(ref) is ref
    assert copy.deepcopy(df).attrs["nbagent_steps"] is ref
    pd.testing.assert_frame_equal(ref(), chat.steps)
    # pickled, the frame leaves its chat behind: its summary has no tokens, and says so
    back = pickle.loads(pickle.dumps(df))
    pd.testing.assert_frame_equal(back, df)
    assert log.summary(back)["tokens"].isna().all()
    # the cached frame the chat keeps is not touched
    assert "nbagent_steps" not in chat._log.frame("calls").attrs


def test_chat_log_handle_still_gives_the_steps_when_the_chat_is_gone() -> None:
    df = _weather_chat("Paris", "Oslo").log
    import gc

    gc.collect()
    assert log.summary(df).loc["get_weather", "tokens"] == 101


def test_frames_that_are_not_calls_frames_are_a_clear_type_error() -> None:
    r1 = nbagent.batch(["weather?"], lambda: Chat("demo").with_tools(get_weather), progress=False)
    r2 = nbagent.batch(["weather?"], lambda: Chat("demo").with_tools(get_weather), progress=False)
    both = pd.concat([r1, r2])  # the run of neither: a frame of chat ids
    chat = _weather_chat("Paris")
    with pytest.raises(TypeError, match=r"read_log\(\[result1, result2\]\)"):
        nbagent.read_log(both)
    with pytest.raises(TypeError, match=r"log\.summary\(\).*read_log\(\[result1, result2\]\)"):
        log.summary(both)
    with pytest.raises(TypeError, match=r"plot_durations\(\).*a batch's result"):
        log.plot_durations(both)
    with pytest.raises(TypeError, match=r"calls frame .* already: pass it to log\.summary"):
        nbagent.read_log(chat.log)
    with pytest.raises(TypeError, match=r"steps frame \(chat\.steps\)"):
        log.summary(chat.steps)
    with pytest.raises(TypeError, match=r"messages frame \(chat\.messages\)"):
        log.summary(chat.messages)
    with pytest.raises(TypeError, match=r"lacks the calls columns"):
        log.summary(pd.DataFrame({"x": [1]}))
    assert log.summary(nbagent.read_log([r1, r2]))["calls"].sum() == 2


def test_read_log_of_a_store_for_a_chat_or_a_list_of_ids(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    try:
        c1 = Chat("demo", store=store)
        c1.ask("hi")
        c2 = Chat("demo", store=store)
        c2.ask("yo")
        c3 = Chat("demo", store=store)
        c3.ask("hey")
        one = nbagent.read_log(store, "messages", chat_id=c1.id)
        pd.testing.assert_frame_equal(nbagent.read_log(store, "messages", chat_id=c1), one)
        two = nbagent.read_log(store, "messages", chat_id=[c2.id, c1])
        assert list(dict.fromkeys(two["chat_id"])) == [c2.id, c1.id]
        pd.testing.assert_frame_equal(two, nbagent.read_log([c2, c1], "messages"))
        with pytest.raises(TypeError, match=r"chat_id takes a chat's id \(str\), a Chat"):
            nbagent.read_log(store, chat_id=42)
        with pytest.raises(TypeError, match=r"chat_id takes .* got dict"):
            nbagent.read_log(store, chat_id=[c1.id, {"id": c2.id}])
    finally:
        store.close()


# ---------------------------------------------------------------- numbers
@tool(external=True)
def sign_contract(party: str) -> str:
    """Have the contract signed.

    Args:
        party: Who signs.
    """


@tool(requires_approval=True)
def refund(order_id: int) -> str:
    """Refund."""
    return "refunded"


def test_declined_inputs_are_denials_but_not_in_the_denial_rate() -> None:
    """Two external inputs declined (status denied, decision auto) and one gated call
    approved: the rate was 2 / 1 = 2.0; one decided call, none denied, is 0.0."""
    p = ScriptedProvider(
        [
            call_tools(
                ("sign_contract", {"party": "A"}, "s1"),
                ("sign_contract", {"party": "B"}, "s2"),
                ("refund", {"order_id": 1}, "r1"),
            ),
            reply("done"),
        ]
    )
    chat = Chat(provider=p).with_tools(sign_contract, refund)
    chat.ask("go")
    for i in list(chat.pending_inputs):
        chat.decline(i, reason="not today")
    chat.approve(chat.pending_approvals[0])
    chat.complete()
    s = log.summary(chat, by="chat_id")
    assert (s["calls"].iloc[0], s["denied"].iloc[0], s["denial_rate"].iloc[0]) == (3, 2, 0.0)
    per_tool = log.summary(chat)
    assert per_tool.loc["sign_contract", "denied"] == 2
    assert pd.isna(per_tool.loc["sign_contract", "denial_rate"])  # nothing to decide


def _calls_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """A calls frame with the log's dtypes, the given columns set per row."""
    out = pd.DataFrame(
        {c: pd.Series([None] * len(rows), dtype=d) for c, d in dtypes("calls").items()}
    )
    for name in {k for r in rows for k in r}:
        out[name] = pd.Series([r.get(name) for r in rows], dtype=out[name].dtype)
    return out


decisions = st.sampled_from(["auto", "pending", "approved", "denied", "policy", "none"])


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(LOG_STATUSES), decisions), min_size=1, max_size=12))
def test_rates_are_fractions_whatever_the_statuses_and_decisions(
    rows: list[tuple[str, str]],
) -> None:
    calls = _calls_frame(
        [
            {"tool": "t", "status": s, "decision": d, "chat_id": "c", "step": 1, "call_id": f"c{i}"}
            for i, (s, d) in enumerate(rows)
        ]
    )
    s = log.summary(calls)
    for rate in ("error_rate", "denial_rate"):
        value = s.loc["t", rate]
        assert pd.isna(value) or 0.0 <= value <= 1.0
    decided = [status for status, d in rows if d in ("approved", "denied", "policy")]
    if decided:  # the denials among the decided calls, over them
        assert s.loc["t", "denial_rate"] == round(decided.count("denied") / len(decided), 3)
    else:
        assert pd.isna(s.loc["t", "denial_rate"])


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 10**6),
            st.integers(0, 10**4),
            st.lists(st.sampled_from("abc"), min_size=1, max_size=7),
        ),
        min_size=1,
        max_size=6,
    )
)
def test_tokens_add_up_to_the_requests_that_asked_for_calls(
    requests: list[tuple[int, int, list[str]]],
) -> None:
    """Each request's tokens are split among its calls in whole tokens (three calls of a
    100-token request summed to 201 when each share was rounded)."""
    rows, steps = [], []
    for step, (inp, out, tools) in enumerate(requests, start=1):
        steps.append({"chat_id": "c", "step": step, "input_tokens": inp, "output_tokens": out})
        rows += [
            {
                "tool": t,
                "status": "ok",
                "decision": "auto",
                "chat_id": "c",
                "step": step,
                "call_id": f"{step}.{i}",
            }
            for i, t in enumerate(tools)
        ]
    steps_frame = pd.DataFrame(
        {c: pd.Series([None] * len(steps), dtype=d) for c, d in dtypes("steps").items()}
    )
    for name in ("chat_id", "step", "input_tokens", "output_tokens"):
        steps_frame[name] = pd.Series([s[name] for s in steps], dtype=steps_frame[name].dtype)
    s = log.summary(_calls_frame(rows), steps=steps_frame)
    assert int(s["tokens"].sum()) == sum(i + o for i, o, _ in requests)
    for t in s.index:  # each tool's share is within one token a call of the even split
        even = sum((i + o) * ts.count(t) / len(ts) for i, o, ts in requests)
        assert abs(int(s.loc[t, "tokens"]) - even) <= sum(ts.count(t) for _, _, ts in requests)


def test_replayed_calls_are_not_in_the_latency() -> None:
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
    s = log.summary(chats)
    assert s.loc["slow_lookup", "calls"] == 2
    assert s.loc["slow_lookup", "p50_ms"] == s.loc["slow_lookup", "p95_ms"] == round(ran, 1)
