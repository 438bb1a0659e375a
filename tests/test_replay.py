"""Record and replay (issue 18, item 1): a request answered from the recording of an identical one.

In-process, with the scripted provider (which counts every request it gets)
and, for the stream and the wire, the real OpenAI SDK client against the
loopback fake server. The notebook reruns are in
``tests/notebook/test_replay_notebook.py``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nbagent
from nbagent import Chat, ReplayMissError, tool
from nbagent._events import Event
from nbagent._recording import fingerprint, request_key
from nbagent._replay import PROCESS
from nbagent._types import (
    AssistantToolCallMessage,
    ChatMessage,
    ProviderItem,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
)
from nbagent.providers import ModelRequest, OpenAIProvider
from nbagent.store import SQLiteStore
from nbagent.testing import FakeLLMServer, FakeToolCall, ScriptedProvider, Turn, call_tools, reply


@pytest.fixture(autouse=True)
def _fresh_process() -> Iterator[None]:
    PROCESS.clear()
    yield
    PROCESS.clear()


SIDE_EFFECTS: list[dict[str, Any]] = []


@tool(requires_approval=True)
def send_email(to: str, body: str) -> str:
    """Send an email (a side effect).

    Args:
        to: Recipient.
        body: Text.
    """
    SIDE_EFFECTS.append({"to": to, "body": body})
    return f"sent to {to}"


@tool
def lookup(city: str) -> str:
    """Look a city up.

    Args:
        city: The city.
    """
    return f"{city}: 21 C"


def _script() -> list[Any]:
    return [
        call_tools(("lookup", {"city": "Paris"}), ("send_email", {"to": "a@b.c", "body": "hi"})),
        reply("Done: Paris is 21 C and the email is sent."),
    ]


def _chat(provider: Any, **kw: Any) -> Chat:
    return Chat(provider=provider, **kw).with_tools(lookup, send_email)


def _run(chat: Chat, verdict: str = "approve") -> Any:
    chat.ask("Weather in Paris, then email a@b.c")
    (pending,) = chat.pending_approvals
    getattr(chat, verdict)(pending)
    return chat.complete()


# ------------------------------------------------------------------ the key
def _request(
    *,
    ids: tuple[str, str] = ("call_1", "call_2"),
    item_id: str = "mcp_1",
    city: str = "Paris",
    result: str = "Paris: 21 C",
    tools: tuple[ToolSpec, ...] = (ToolSpec("lookup", "Look a city up.", {"type": "object"}),),
    system: str | None = "Be brief.",
    choice: str = "auto",
) -> ModelRequest:
    a, b = ids
    item = ProviderItem("responses", "mcp_list_tools", {"id": item_id, "tools": []})
    return ModelRequest(
        messages=(
            ChatMessage("user", f"Weather in {city}?", turn=1),
            AssistantToolCallMessage(
                None,
                (ToolCall(a, "lookup", {"city": city}), ToolCall(b, "lookup", {"city": "Rome"})),
                turn=1,
                items=(item,),
            ),
            ToolResultMessage(a, result, name="lookup", turn=1),
            ToolResultMessage(b, "Rome: 25 C", name="lookup", turn=1),
        ),
        system=system,
        tools=tools,
        tool_choice=choice,
    )


def _key(request: ModelRequest, model: str = "gpt-4.1") -> str:
    return request_key(fingerprint("openai", model, request))


ident = st.text("abcdefghijklmnopqrstuvwxyz0123456789_", min_size=1, max_size=12)


@settings(max_examples=60, deadline=None)
@given(a=ident, b=ident, item=ident, turn=st.integers(0, 50), stream=st.booleans())
def test_the_key_ignores_ids_turns_and_streaming(
    a: str, b: str, item: str, turn: int, stream: bool
) -> None:
    """Call ids and item ids are renumbered by order of appearance; turn numbers and
    ``stream`` are not part of the request the model answers."""
    if a == b:
        b = a + "x"
    base = _key(_request())
    other = _request(ids=(f"call_{a}", f"toolu_{b}"), item_id=f"mcp_{item}")
    other = dataclasses.replace(
        other,
        messages=tuple(dataclasses.replace(m, turn=turn) for m in other.messages),
        stream=stream,
        on_delta=(lambda d: None) if stream else None,
    )
    assert _key(other) == base
    # timestamps live on the calls' lifecycle and the events, never in the request
    calls = other.messages[1].tool_calls  # type: ignore[union-attr]
    calls[0].started_at = datetime.now(UTC) - timedelta(days=turn)
    assert _key(other) == base


CHANGES = {
    "model": lambda: _key(_request(), model="gpt-4.1-mini"),
    "user message": lambda: _key(_request(city="Rome")),
    "tool result": lambda: _key(_request(result="Paris: 22 C")),
    "results order": lambda: _key(
        dataclasses.replace(
            _request(), messages=(*_request().messages[:2], *_request().messages[:1:-1])
        )
    ),
    "tool schema": lambda: _key(
        _request(tools=(ToolSpec("lookup", "Look a city up.", {"type": "object", "x": 1}),))
    ),
    "tool description": lambda: _key(
        _request(tools=(ToolSpec("lookup", "Look up.", {"type": "object"}),))
    ),
    "tool added": lambda: _key(
        _request(
            tools=(
                ToolSpec("lookup", "Look a city up.", {"type": "object"}),
                ToolSpec("extra", "", {"type": "object"}),
            )
        )
    ),
    "system": lambda: _key(_request(system="Be long.")),
    "tool choice": lambda: _key(_request(choice="required")),
    "max tokens": lambda: _key(dataclasses.replace(_request(), max_tokens=10)),
    "reasoning": lambda: _key(dataclasses.replace(_request(), reasoning="high")),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_any_change_the_model_would_see_changes_the_key(change: str) -> None:
    assert CHANGES[change]() != _key(_request())


@settings(max_examples=60, deadline=None)
@given(text=st.text(min_size=0, max_size=40), other=st.text(min_size=0, max_size=40))
def test_the_key_changes_with_any_message_text(text: str, other: str) -> None:
    def req(t: str) -> ModelRequest:
        return ModelRequest(messages=(ChatMessage("user", t),))

    assert (_key(req(text)) == _key(req(other))) == (text == other)


settings_of_a_request = st.fixed_dictionaries(
    {
        "model": st.sampled_from(["gpt-4.1", "gpt-4.1-mini"]),
        "system": st.none() | st.text(max_size=6),
        "choice": st.sampled_from(["auto", "required", "none", "lookup"]),
        "max_tokens": st.none() | st.integers(1, 4),
        "description": st.text(max_size=6),
        "parameter": st.sampled_from(["city", "town"]),
        "reasoning": st.sampled_from([None, "low", "high", 2048]),
        "cache": st.booleans(),
        "calls": st.sampled_from(["one", "many"]),
    }
)


def _keyed(o: dict[str, Any]) -> str:
    schema = {"type": "object", "properties": {o["parameter"]: {"type": "string"}}}
    request = dataclasses.replace(
        _request(tools=(ToolSpec("lookup", o["description"], schema),), system=o["system"]),
        tool_choice=o["choice"],
        max_tokens=o["max_tokens"],
        reasoning=o["reasoning"],
        cache=o["cache"],
        calls=o["calls"],
    )
    return _key(request, o["model"])


@settings(max_examples=200, deadline=None)
@given(a=settings_of_a_request, data=st.data())
def test_two_requests_share_a_key_exactly_when_model_tools_and_options_match(
    a: dict[str, Any], data: st.DataObject
) -> None:
    """``b`` is ``a`` with one setting drawn again (often to another value, sometimes the same)."""
    field = data.draw(st.sampled_from(sorted(a)))
    b = {**a, field: data.draw(settings_of_a_request)[field]}
    assert (_keyed(a) == _keyed(b)) == (a == b)


# --------------------------------------------------------------- replaying
def test_a_rerun_in_a_new_chat_asks_the_model_nothing_and_gives_the_same_answer() -> None:
    first = ScriptedProvider(_script())
    live = _chat(first, replay="auto")
    answer = _run(live)
    again = ScriptedProvider([])  # any request would fail: the script is empty
    rerun = _chat(again, replay="auto")
    assert _run(rerun).content == answer.content
    assert len(first.requests) == 2 and again.requests == []
    assert rerun.transcript == live.transcript
    assert rerun.replayed_steps == {1, 4} and live.replayed_steps == set()
    steps = rerun.steps
    assert list(steps["replayed"]) == [True, True]
    assert list(steps["cost_usd"]) == [0.0, 0.0]  # nothing spent now
    assert list(steps["input_tokens"]) == list(live.steps["input_tokens"])  # recorded tokens
    assert rerun.usage == live.usage


def test_off_always_asks_and_records_and_the_configured_mode_applies() -> None:
    _run(_chat(ScriptedProvider(_script())))  # default off: recorded all the same
    again = ScriptedProvider(_script())
    _run(_chat(again))
    assert len(again.requests) == 2  # off: asked again
    nbagent.configure(replay="auto")
    none = ScriptedProvider([])
    chat = _chat(none)
    assert chat.replay == "auto"
    _run(chat)
    assert none.requests == []


def test_async_replays_the_same_way() -> None:
    _run(_chat(ScriptedProvider(_script())))
    empty = ScriptedProvider([])
    chat = _chat(empty, replay="only")

    async def go() -> Any:
        await chat.ask_async("Weather in Paris, then email a@b.c")
        chat.approve(chat.pending_approvals[0])
        return await chat.complete_async()

    assert asyncio.run(go()).content == "Done: Paris is 21 C and the email is sent."
    assert empty.requests == []


# -------------------------------------------------------------- the promise
def test_a_denied_call_never_runs_and_an_approved_one_runs_once_under_replay() -> None:
    SIDE_EFFECTS.clear()
    _run(_chat(ScriptedProvider(_script()), replay="auto"))
    assert len(SIDE_EFFECTS) == 1
    denied = _chat(ScriptedProvider([reply("Not sent.")]), replay="auto")
    _run(denied, "deny")  # the first response is replayed; the denial is new
    assert len(SIDE_EFFECTS) == 1
    assert [c.status for c in denied.tool_calls] == ["ok", "denied"]
    approved = _chat(ScriptedProvider([]), replay="only")
    _run(approved)  # replayed, the call runs for real: exactly once more
    assert len(SIDE_EFFECTS) == 2
    assert [c.status for c in approved.tool_calls] == ["ok", "ok"]


def test_replay_tools_gives_the_recorded_result_and_never_runs_the_side_effect() -> None:
    SIDE_EFFECTS.clear()
    live = _chat(ScriptedProvider(_script()))
    _run(live)
    assert len(SIDE_EFFECTS) == 1
    chat = _chat(ScriptedProvider([]), replay="only", replay_tools=True)
    started: list[str] = []
    chat.before_tool_call(lambda c: started.append(c.name))
    _run(chat)
    assert len(SIDE_EFFECTS) == 1  # not run again
    assert started == ["lookup", "send_email"]  # the calls started and finished as usual
    assert [c.result.content for c in chat.tool_calls] == [  # type: ignore[union-attr]
        c.result.content  # type: ignore[union-attr]
        for c in live.tool_calls
    ]
    assert list(chat.log["replayed"]) == [True, True]
    # only some tools: the others run
    only_lookup = _chat(ScriptedProvider([]), replay="only", replay_tools=["lookup"])
    _run(only_lookup)
    assert len(SIDE_EFFECTS) == 2
    assert list(only_lookup.log["replayed"]) == [True, False]


def test_replay_tools_still_asks_for_approval_and_a_denial_runs_nothing() -> None:
    SIDE_EFFECTS.clear()
    _run(_chat(ScriptedProvider(_script())))
    chat = _chat(ScriptedProvider([reply("Not sent.")]), replay="auto", replay_tools=True)
    chat.ask("Weather in Paris, then email a@b.c")
    assert [c.name for c in chat.pending_approvals] == ["send_email"]
    chat.deny(chat.pending_approvals[0], reason="no")
    chat.complete()
    assert len(SIDE_EFFECTS) == 1
    assert chat.tool_calls[1].status == "denied"


# --------------------------------------------------------------- the misses
def test_only_never_asks_and_says_what_differs_from_the_nearest_recording() -> None:
    _run(_chat(ScriptedProvider(_script())))
    # another user message
    provider = ScriptedProvider([])
    chat = _chat(provider, replay="only")
    with pytest.raises(ReplayMissError) as caught:
        chat.ask("Weather in Rome, then email a@b.c")
    text = str(caught.value)
    assert provider.requests == []
    assert "replay='only': no recording answers this request" in text
    assert "message 1 (user): now 'Weather in Rome, then email a@b.c'" in text
    assert chat.last_error is caught.value and chat.transcript[-1].role == "user"
    # the tools changed
    with pytest.raises(ReplayMissError, match=r"the tools: removed send_email"):
        Chat(provider=ScriptedProvider([]), replay="only").with_tools(lookup).ask(
            "Weather in Paris, then email a@b.c"
        )
    # an option changed
    with pytest.raises(ReplayMissError, match=r"the options: system"):
        _chat(ScriptedProvider([]), replay="only", system="Be terse.").ask(
            "Weather in Paris, then email a@b.c"
        )
    # another model
    other = ScriptedProvider([], model="bigger")
    with pytest.raises(ReplayMissError, match=r"the model: recorded 'scripted/scripted', now"):
        _chat(other, replay="only").ask("Weather in Paris, then email a@b.c")


def test_only_with_nothing_recorded_says_where_it_looked(tmp_path: Path) -> None:
    chat = Chat(provider=ScriptedProvider([]), replay="only", recordings=tmp_path / "rec")
    with pytest.raises(ReplayMissError, match=r"No recordings at all in DirectoryRecordings"):
        chat.ask("hi")  # "only" with a folder: the folder, not the process's recordings
    assert "MemoryRecordings" not in str(chat.last_error)
    bare = Chat(provider=ScriptedProvider([]), replay="only")
    with pytest.raises(ReplayMissError, match=r"No recordings at all in MemoryRecordings"):
        bare.ask("hi")


def test_a_changed_tool_result_is_the_message_named_in_the_miss() -> None:
    _run(_chat(ScriptedProvider(_script())))

    @tool(name="lookup")
    def warmer(city: str) -> str:
        """Look a city up.

        Args:
            city: The city.
        """
        return f"{city}: 30 C"

    chat = Chat(provider=ScriptedProvider([]), replay="only").with_tools(warmer, send_email)
    chat.ask("Weather in Paris, then email a@b.c")
    chat.approve(chat.pending_approvals[0])
    with pytest.raises(ReplayMissError) as caught:
        chat.complete()
    assert "message 3 (tool): now 'result of lookup: Paris: 30 C'" in str(caught.value)


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="replay must be 'auto', 'only' or 'off'"):
        Chat(model="demo", replay="sometimes")
    with pytest.raises(ValueError, match="replay_tools must be"):
        nbagent.configure(replay_tools=[1])
    with pytest.raises(ValueError, match="is a file"):
        Chat(model="demo", recordings=__file__)


# ------------------------------------------------------------- where they live
def test_a_recordings_directory_replays_in_a_fresh_process(tmp_path: Path) -> None:
    rec = tmp_path / "recordings"
    SIDE_EFFECTS.clear()
    _run(_chat(ScriptedProvider(_script()), recordings=rec))
    files = sorted(p.name for p in rec.glob("*.json"))
    assert len(files) == 2
    PROCESS.clear()  # a fresh kernel
    nbagent.configure(recordings=rec, replay="only", replay_tools=True)
    chat = _chat(ScriptedProvider([]))
    assert _run(chat).content == "Done: Paris is 21 C and the email is sent."
    assert len(SIDE_EFFECTS) == 1  # the results were in the files too
    assert "api_key" not in "".join(p.read_text() for p in rec.glob("*.json")).lower()


def test_the_store_keeps_recordings_for_any_chat_and_replays_results_from_its_calls(
    tmp_path: Path,
) -> None:
    db = tmp_path / "agent.db"
    SIDE_EFFECTS.clear()
    with SQLiteStore(db) as store:
        first = _chat(ScriptedProvider(_script()), store=store, stream=True)
        _run(first)
        first.close()
        PROCESS.clear()  # another process: only the store knows
        chat = _chat(ScriptedProvider([]), store=store, replay="only", replay_tools=True)
        assert _run(chat).content == "Done: Paris is 21 C and the email is sent."
        assert len(SIDE_EFFECTS) == 1
        chat.close()
        assert {r.chat_id for r in store.recordings()} == {first.id}
        assert store.recording(store.recordings()[0].key) is not None
        # the steps of both chats name their keys, the replayed ones marked
        rows = (
            store._c()
            .execute("SELECT chat_id, step, replayed FROM model_requests ORDER BY chat_id, step")
            .fetchall()
        )
        assert rows == [(first.id, 1, 0), (first.id, 4, 0), (chat.id, 1, 1), (chat.id, 4, 1)]


# ------------------------------------------------------------ the same events
def _comparable(events: list[Event]) -> list[tuple[str, dict[str, Any]]]:
    """Events without what differs between two runs by design: ids, times, the replay marker."""
    skip = {"chat_id", "ts", "latency_ms", "duration_ms", "started_at", "replayed", "cost_usd"}
    skip |= {"recorded_cost_usd"}  # a replayed request says what it cost when recorded
    out = []
    for e in events:
        fields = {}
        for f in dataclasses.fields(e):
            if f.name in skip:
                continue
            v = getattr(e, f.name)
            fields[f.name] = v.id if f.name == "call" else v
        out.append((type(e).__name__, fields))
    return out


def test_a_replayed_run_emits_the_events_of_the_live_one_through_the_real_sdk() -> None:
    turns = [
        Turn(tool_calls=[FakeToolCall("lookup", {"city": "Paris"})], text="Looking."),
        Turn(text="Paris is **21 C**, a fine day for a walk along the river."),
    ]
    with FakeLLMServer(turns) as server:

        def chat() -> tuple[Chat, list[Event]]:
            provider = OpenAIProvider(
                "gpt-4.1-mini", base_url=server.openai_base_url, api_key="sk-test-123"
            )
            c = Chat(provider=provider, stream=True, replay="auto").with_tools(lookup)
            seen: list[Event] = []
            c.on(None, seen.append)
            c.ask("Weather in Paris?")
            return c, seen

        live, live_events = chat()
        assert len(server.requests) == 2
        replayed, replayed_events = chat()
        assert len(server.requests) == 2  # nothing asked the second time
    deltas = [e for e in live_events if e.type in ("text_delta", "tool_call_delta")]
    assert len(deltas) > 3  # it streamed, in several fragments
    assert _comparable(replayed_events) == _comparable(live_events)
    assert [e.replayed for e in replayed_events if e.type == "model_request_finished"] == [
        True,
        True,
    ]
    assert replayed.transcript == live.transcript
    # the key never reaches a recording
    assert "sk-test-123" not in repr(list(PROCESS.candidates({})))


def test_a_replayed_run_stops_at_the_budget_the_recorded_one_stopped_at() -> None:
    script = [call_tools(("lookup", {"city": "Paris"})), reply("Paris: 21 C.")]
    first = Chat(provider=ScriptedProvider(script, model="gpt-4.1"), max_total_tokens=10)
    first.with_tools(lookup).ask("Weather?")
    assert first.status == "budget_exhausted"
    rerun = Chat(
        provider=ScriptedProvider([], model="gpt-4.1"), max_total_tokens=10, replay="only"
    ).with_tools(lookup)
    rerun.ask("Weather?")
    assert rerun.status == "budget_exhausted"
    assert rerun.transcript == first.transcript


def test_the_docs_example_runs_and_replays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from _docs import DOCS, python_after

    page = DOCS / "replay-and-fork.md"
    code = python_after(page, "## Record and replay")
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {"__name__": "docs_example"}
    exec(compile(code, str(page), "exec"), namespace)
    assert capsys.readouterr().out.strip() == "[True, True]"
    assert namespace["rerun"].transcript == namespace["chat"].transcript
    assert len(list((tmp_path / "recordings").glob("*.json"))) == 2
    assert (tmp_path / "tests" / "test_weather.py").exists()
    assert len(list((tmp_path / "tests" / "test_weather_recordings").glob("*.json"))) == 2


def test_no_secret_of_a_hosted_tool_reaches_a_recording() -> None:
    from nbagent import HostedMCP
    from nbagent._recording import fingerprint_json

    def hosted(token: str, user: str) -> ModelRequest:
        mcp = HostedMCP(
            "docs",
            server_url=f"https://{user}:{token}@mcp.example.com/sse",
            headers={"Authorization": f"Bearer {token}"},
            authorization=token,
        )
        return dataclasses.replace(_request(), hosted=(mcp,))

    fp = fingerprint("openai-responses", "gpt-4.1", hosted("sk-secret-1", "alice"))
    text = repr(fingerprint_json(fp))
    assert "sk-secret-1" not in text and "alice" not in text
    # the secret does not change the request's key either: the same server, another token
    other = fingerprint("openai-responses", "gpt-4.1", hosted("sk-secret-2", "bob"))
    assert request_key(other) == request_key(fp)
    assert request_key(fp) != _key(_request(), "gpt-4.1")  # but the server itself counts


def test_the_saved_view_says_which_steps_and_results_were_replayed() -> None:
    _run(_chat(ScriptedProvider(_script())))
    from nbagent.notebook._state import state_for

    chat = _chat(ScriptedProvider([]), replay="only", replay_tools=["lookup"])
    state_for(chat)  # the display state a kernel makes: it follows the events
    _run(chat)
    bundle = chat._repr_mimebundle_()
    for kind in ("text/html", "text/markdown", "text/plain"):
        assert bundle[kind].count("· replayed ·") == 2, kind  # the two steps
    assert bundle["text/html"].count("recorded result") == 1  # lookup's, not send_email's
    assert "nba-replayed" in bundle["text/html"]


def test_the_process_keeps_the_most_recent_recordings_within_its_limits() -> None:
    from nbagent._recording import RecordedResult, Recording
    from nbagent._replay import MemoryRecordings

    def rec(n: int, text: str) -> Recording:
        return Recording(f"k{n}", {"messages": [], "tools": []}, reply(text))

    memory = MemoryRecordings(limit=3, max_bytes=10_000)
    for n in range(5):
        memory.add(rec(n, "x"), "c", n, False)
    assert [memory.find(f"k{n}") is not None for n in range(5)] == [False, False, True, True, True]
    memory.find("k2")  # used: now the most recent
    memory.add(rec(9, "y" * 9_300), "c", 9, False)  # big: the least recently used make room
    assert [memory.find(k) is not None for k in ("k3", "k4", "k2", "k9")] == [
        False,
        False,
        True,
        True,
    ]
    memory.add_result("k9", "call_1", RecordedResult("ok", "z" * 20_000))  # alone past the limit
    assert memory.result("k9", "call_1") is not None  # the newest is always kept


@pytest.mark.parametrize("verdict", ["approve", "deny"])
def test_a_replayed_call_is_asked_again_however_the_recorded_one_was_decided(verdict: str) -> None:
    """The process keeps a response as it came (its calls undecided), packed or not, whatever
    the chat that recorded it went on to decide: a replay asks again, with calls of its own,
    and runs nothing before its own approval."""
    SIDE_EFFECTS.clear()
    first = _chat(ScriptedProvider(_script()))
    _run(first, verdict)
    ran = len(SIDE_EFFECTS)
    assert ran == (1 if verdict == "approve" else 0)
    recorded = first.tool_calls

    again = _chat(ScriptedProvider([reply("Not sent again.")]), replay="auto")
    again.ask("Weather in Paris, then email a@b.c")
    assert again.steps["replayed"].tolist() == [True]
    (pending,) = again.pending_approvals
    assert pending.name == "send_email" and pending.decision is None
    assert pending.status == "awaiting_approval" and len(SIDE_EFFECTS) == ran
    assert all(c is not r for c in again.tool_calls for r in recorded)
    assert [c.status for c in recorded if c.name == "send_email"] == [
        "ok" if verdict == "approve" else "denied"
    ]  # the first chat's own calls are untouched by the replay
    again.deny(pending, reason="not twice")
    again.complete()
    assert len(SIDE_EFFECTS) == ran


def test_the_process_keeps_its_recordings_packed_and_gives_them_back_whole() -> None:
    """A rerun cell replays from what the process kept: packed (a third of a KiB instead of
    2.4 KiB of objects) once ``fresh`` newer values have come, a snapshot until then (off
    the request: packing one value between two requests costs 4x packing it among others).
    Each recording is read back equal (calls as they came, stream fragments, time zone) and
    made of objects of its own, packed or not, but its messages' digests: the very chain
    its chat's later requests share (never a copy per recording)."""
    import threading

    from nbagent._recording import Digests, RecordedResult, Recording
    from nbagent._replay import MemoryRecordings
    from nbagent._types import Decision
    from nbagent.providers import StreamDelta

    memory = MemoryRecordings(fresh=4)
    first = Digests([("user", "d1")])
    later = Digests([("assistant", "d2"), ("tool", "d3")], parent=first)
    streamed = (StreamDelta("text", "r"), StreamDelta("tool_call", "{}", 1, "c1", "f"))
    asked = call_tools(("send_email", {"to": "a@b.c", "body": "hi"}))
    recs = [
        Recording("k0", {"model": "m", "messages": first, "tools": []}, asked),
        Recording("k1", {"model": "m", "messages": later}, reply("r1"), deltas=streamed),
    ]
    for n, rec in enumerate(recs):
        memory.add(rec, "chat", n, False)
    (call,) = asked.tool_calls
    call.status = "denied"  # the chat goes on deciding the call it was asked for
    call.decision = Decision("denied", "user", datetime.now(UTC))

    def check(got: Recording, rec: Recording) -> None:
        assert got == rec and got is not rec and got.response is not rec.response
        assert got.created_at == rec.created_at and got.created_at.tzinfo is UTC
        assert got.fingerprint["messages"] is rec.fingerprint["messages"]
        for mine, theirs in zip(got.response.tool_calls, rec.response.tool_calls, strict=True):
            assert mine is not theirs and mine.arguments is not theirs.arguments
            assert (mine.status, mine.decision) == ("requested", None)  # as it came

    result = RecordedResult("ok", "done", arguments={"a": 1})
    memory.add_result("k1", "call_1", result)
    assert all(type(kept[0]) is tuple for kept in memory._recordings.values())  # unpacked
    for rec in recs:
        check(memory.find(rec.key), rec)
    east = timezone(timedelta(hours=2))
    bare = Recording(  # no messages' digests at all, and another time zone
        "k3", {"model": "m"}, reply("r3"), created_at=datetime(2026, 1, 2, 3, 4, 5, 6, east)
    )
    memory.add(bare, "chat", 3, False)  # the fourth value: all four packed
    assert all(type(kept[0]) is bytes for kept in memory._recordings.values())  # packed
    assert all(type(kept) is bytes for kept in memory._results.values())
    for rec in recs:
        check(memory.find(rec.key), rec)
    assert memory.find("k1").fingerprint["messages"].parent is first
    assert memory.find("k1").deltas == streamed
    assert memory.result("k1", "call_1") == result
    assert memory.find("k3") == bare and "messages" not in memory.find("k3").fingerprint
    assert memory.find("k3").created_at.utcoffset() == timedelta(hours=2)
    assert sorted(r.key for r in memory.candidates({})) == ["k0", "k1", "k3"]
    odd = Recording("k2", {"messages": [], "opaque": threading.Lock()}, reply("r2"))
    memory.add(odd, "chat", 2, False)
    for n in range(3):  # a full batch again, odd in it
        memory.add_result("k3", f"call_{n}", result)
    got = memory.find("k2")  # not picklable: kept unpacked, read back all the same
    assert got == odd and got is not odd and got.fingerprint is not odd.fingerprint
    assert type(memory._results["k3", "call_0"]) is bytes


def test_a_recording_replaced_while_its_batch_is_packed_stays_the_newer() -> None:
    """Packing runs outside the lock: a value replaced (a new answer to the same request)
    or dropped meanwhile is not overwritten by the older one's packed form."""
    from nbagent._recording import Recording
    from nbagent._replay import MemoryRecordings

    memory = MemoryRecordings(fresh=1000)
    old, new = (Recording("k", {"model": "m"}, reply(t)) for t in ("old", "new"))
    memory.add(old, "chat", 0, False)
    memory.add(Recording("gone", {"model": "m"}, reply("x")), "chat", 1, False)
    stale = list(memory._unpacked)
    memory.add(new, "chat", 0, False)
    del memory._recordings["gone"]
    memory._pack_all(stale)
    assert memory.find("k") == new and "gone" not in memory._recordings
    assert memory.find("k").response.text == "new"


@pytest.mark.parametrize("where", ["process", "store"])
def test_replay_tools_runs_a_call_approved_with_other_arguments(where: str, tmp_path: Path) -> None:
    SIDE_EFFECTS.clear()
    store = SQLiteStore(tmp_path / "a.db") if where == "store" else None
    _run(_chat(ScriptedProvider(_script()), store=store))
    if store is not None:
        PROCESS.clear()
    chat = _chat(
        ScriptedProvider([reply("Done: Paris is 21 C and the email is sent.")]),
        replay="auto",
        replay_tools=True,
        store=store,
    )
    chat.ask("Weather in Paris, then email a@b.c")
    chat.approve(chat.pending_approvals[0], {"to": "c@d.e", "body": "hi"})
    chat.complete()
    assert [e["to"] for e in SIDE_EFFECTS] == ["a@b.c", "c@d.e"]  # the edit ran, for real
    assert list(chat.log["replayed"]) == [True, False]
    chat.close()
    if store is not None:
        store.close()


def test_a_damaged_recording_file_warns_and_counts_as_a_miss(tmp_path: Path) -> None:
    rec = tmp_path / "recordings"
    _run(_chat(ScriptedProvider(_script()), recordings=rec))
    for f in rec.glob("*.json"):
        f.write_text("{not json")
    PROCESS.clear()
    provider = ScriptedProvider(_script())
    chat = _chat(provider, replay="auto", recordings=rec)
    with pytest.warns(RuntimeWarning, match="could not read recordings"):
        assert _run(chat).content == "Done: Paris is 21 C and the email is sent."
    assert len(provider.requests) == 2  # asked the model, and recorded again
    assert all(json.loads(f.read_text())["key"] == f.stem for f in rec.glob("*.json"))
