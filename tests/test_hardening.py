"""The promise at the edges (issue 13): every call reaches a final status, a call reported
final never runs afterwards, callbacks never change other calls' outcomes, ids stay unique.

Each test here failed before its fix.
"""

from __future__ import annotations

import sys
import threading
import time
import warnings
from typing import Any

import pytest

from nbagent import CallbackWarning, Chat, Tool, ToolResultMessage, tool
from nbagent.testing import ScriptedProvider, call_tools, reply

MODES = [False, "threads", "async"]
ran: list[str] = []


@pytest.fixture(autouse=True)
def _clear() -> None:
    ran.clear()


def _chat(*turns: Any, concurrency: Any = False) -> Chat:
    chat = Chat(provider=ScriptedProvider(list(turns)), display=False)
    return chat.with_tool_options(concurrency=concurrency)


def _results(chat: Chat) -> list[ToolResultMessage]:
    return [m for m in chat.transcript if isinstance(m, ToolResultMessage)]


# ------------------------------------------------- results that used to wedge the chat
class Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("no text for you")

    __repr__ = __str__


@tool
def unprintable() -> Any:
    """Returns a value that cannot be turned into text."""
    ran.append("unprintable")
    return Unprintable()


@tool
def nested_unprintable() -> dict[str, Any]:
    """Returns a dict holding such a value."""
    ran.append("nested")
    return {"ok": [1, 2, Unprintable()]}


@tool
def deep() -> list[Any]:
    """Returns a 100,000-deep nested list."""
    ran.append("deep")
    value: list[Any] = []
    for _ in range(100_000):
        value = [value]
    return value


@tool
def exits() -> str:
    """Calls sys.exit()."""
    ran.append("exits")
    sys.exit(3)


@tool
async def exits_async() -> str:
    """An async tool that raises SystemExit."""
    ran.append("exits_async")
    raise SystemExit("bye")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "name", ["unprintable", "nested_unprintable", "deep", "exits", "exits_async"]
)
def test_every_call_reaches_a_final_status(name: str, mode: Any) -> None:
    tools = {t.name: t for t in (unprintable, nested_unprintable, deep, exits, exits_async)}
    chat = _chat(call_tools((name, {}), ("unprintable", {})), reply("done"), concurrency=mode)
    chat.with_tools(*tools.values())
    chat.ask("go")
    assert chat.status == "complete"
    assert all(c.status == "error" for c in chat.tool_calls), chat.tool_calls
    first = _results(chat)[0].content
    assert first.startswith("Error:")
    if name.startswith("exits"):
        assert "SystemExit" in first
    else:
        assert "could not be turned into text" in first
    chat.ask_later("again")  # no PendingToolCallsError: the round closed


# ------------------------------------------- a call reported timed_out never runs after
def test_a_queued_call_that_timed_out_never_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    import nbagent._runner as runner

    release = threading.Event()
    monkeypatch.setattr(runner, "_pool", None)
    monkeypatch.setattr(runner, "POOL_SIZE", 1)  # one worker thread, soon stuck

    @tool(timeout=0.2)
    def stuck() -> str:
        """Blocks its thread until released."""
        release.wait(10)
        ran.append("stuck")
        return "late"

    @tool(timeout=0.2)
    def queued() -> str:
        """Would run once a worker thread is free."""
        ran.append("queued")
        return "ran"

    chat = _chat(call_tools(("stuck", {}), ("queued", {})), reply("done"), concurrency="threads")
    chat.with_tools(stuck, queued)  # one round, two calls, one worker thread
    try:
        chat.ask("go")
        statuses = [c.status for c in chat.tool_calls]
        assert statuses == ["timed_out", "timed_out"]
        assert runner.abandoned_threads() >= 1
        assert "background" in (chat.tool_calls[0].result.content or "")  # type: ignore[union-attr]
        assert "before it started" in (chat.tool_calls[1].result.content or "")  # type: ignore[union-attr]
    finally:
        release.set()
    time.sleep(0.5)  # the worker is free again: the queued call must still not run
    assert ran == ["stuck"]
    runner._shared_pool().shutdown(wait=True)


# ------------------------------------------------ callbacks never change other outcomes
def test_a_raising_after_tool_result_callback_cancels_nothing() -> None:
    @tool
    def one() -> str:
        """First."""
        ran.append("one")
        return "1"

    @tool
    def two() -> str:
        """Second."""
        ran.append("two")
        return "2"

    def boom(result: Any) -> None:
        raise ValueError("callback bug")

    chat = _chat(call_tools(("one", {}), ("two", {})), reply("done"))
    chat.with_tools(one, two).after_tool_result(boom)
    with pytest.warns(CallbackWarning, match="callback bug"):
        chat.ask("go")
    assert ran == ["one", "two"]
    assert [c.status for c in chat.tool_calls] == ["ok", "ok"]
    assert chat.status == "complete"


# --------------------------------------------------------------- approvals at the edges
class Refund(Tool):
    """Refund an order."""

    requires_approval = True

    def execute(self, order_id: int) -> str:
        ran.append(f"refund {order_id}")
        return "refunded"


@pytest.mark.parametrize("verdict", ["false", 1, [], None])
def test_always_allow_approves_only_on_true(verdict: Any) -> None:
    chat = _chat(call_tools(("refund", {"order_id": 1})), reply("ok"))
    chat.with_tools(Refund)
    with pytest.warns(CallbackWarning, match="not True or False"):
        chat.always_allow(Refund, when=lambda call: verdict)
        chat.ask("refund 1")
    assert chat.status == "awaiting_approval"
    assert ran == []


def test_a_raising_always_allow_predicate_warns_and_does_not_approve() -> None:
    def broken(call: Any) -> bool:
        raise KeyError("amount")

    chat = _chat(call_tools(("refund", {"order_id": 1})), reply("ok"))
    chat.with_tools(Refund).always_allow(Refund, when=broken)
    with pytest.warns(CallbackWarning, match="raised KeyError"):
        chat.ask("refund 1")
    assert chat.status == "awaiting_approval"


def test_a_failing_resolvers_note_is_said_once() -> None:
    @tool(approval=lambda call: 1 / 0)
    def risky(x: int) -> str:
        """A tool whose approval rule raises."""
        return "ran"

    chat = _chat(call_tools(("risky", {"x": 1})), reply("ok"))
    chat.with_tools(risky)
    chat.ask("go")
    for _ in range(3):
        chat.complete()  # every step asks the rule again
    reason = chat.pending_approvals[0].approval.reason  # type: ignore[union-attr]
    assert reason.count("ZeroDivisionError") == 1


# ------------------------------------------------------------------ repeated wire ids
@pytest.mark.parametrize("stored", [False, True])
def test_repeated_ids_get_their_own_identity(stored: bool, tmp_path: Any) -> None:
    provider = ScriptedProvider(
        [
            call_tools(("refund", {"order_id": 1}, "dup"), ("refund", {"order_id": 2}, "dup")),
            call_tools(("refund", {"order_id": 3}, "dup")),
            reply("done"),
        ]
    )
    db = tmp_path / "s.db"
    chat = Chat(provider=provider, store=db if stored else None, display=False)
    chat.with_tools(Refund)
    chat.ask("refund 1 and 2")
    first, second = chat.pending_approvals
    assert (first.id, second.id) == ("dup", "dup_2")
    chat.approve(first)
    chat.deny(second, reason="no")
    chat.complete()
    assert ran == ["refund 1"]
    third = chat.pending_approvals[0]
    assert third.id == "dup_3" and third.arguments == {"order_id": 3}
    chat.approve(third)
    chat.complete()
    assert ran == ["refund 1", "refund 3"]
    assert len(chat.log) == 3
    assert [r.tool_call_id for r in _results(chat)] == ["dup", "dup_2", "dup_3"]
    assert chat.status == "complete"
    if stored:
        chat.close()
        again = Chat.load(chat.id, store=db, tools=[Refund], provider=provider)
        assert [(c.id, c.arguments, c.status) for c in again.tool_calls] == [
            ("dup", {"order_id": 1}, "ok"),
            ("dup_2", {"order_id": 2}, "denied"),
            ("dup_3", {"order_id": 3}, "ok"),
        ]
        assert [r.content for r in _results(again)] == [r.content for r in _results(chat)]
        again.close()


# ---------------------------------------------------------------- per-thread event loops
def test_threads_that_drove_a_chat_leave_no_unclosed_loop() -> None:
    @tool(timeout=5)
    def quick() -> str:
        """Runs on a worker thread (it has a timeout)."""
        return "ok"

    def drive() -> None:
        chat = _chat(call_tools(("quick", {})), reply("done"))
        chat.with_tools(quick).ask("go")

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            t = threading.Thread(target=drive)
            t.start()
            t.join()
        import gc

        gc.collect()
    unclosed = [w for w in caught if issubclass(w.category, ResourceWarning)]
    assert unclosed == []


# ------------------------------------------------------------------ lone surrogates
LONE = "bad \ud800 text"


def _encodable(value: Any) -> bool:
    import json

    try:
        json.dumps(value, ensure_ascii=False, default=str).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def test_lone_surrogates_are_cleaned_where_text_enters(tmp_path: Any) -> None:
    @tool
    def echo(text: str) -> str:
        """Echo text back, with a surrogate of its own."""
        ran.append("echo")
        return text + "\udfff"

    provider = ScriptedProvider(
        [call_tools(("echo", {"text": LONE, "\udc80key": 1}), text=LONE), reply(LONE)]
    )
    chat = Chat(provider=provider, store=tmp_path / "s.db", display=False).with_tools(echo)
    chat.ask(LONE)
    assert chat.status == "complete" and ran == []  # the odd key made the call invalid...
    chat.ask_later("again " + LONE)
    for m in chat.transcript:
        assert _encodable(getattr(m, "content", "")), m
    assert all(_encodable(c.arguments) for c in chat.tool_calls)
    assert all(_encodable([repr(m) for m in r.messages]) for r in provider.requests)
    assert len(chat.log) == 1 and _encodable(chat.log.to_dict())
    chat.close()
    again = Chat.load(chat.id, store=tmp_path / "s.db", tools=[echo], provider=provider)
    assert [getattr(m, "content", None) for m in again.transcript] == [
        getattr(m, "content", None) for m in chat.transcript
    ]
    again.close()


def test_a_tool_result_with_a_surrogate_reaches_the_model_as_valid_text() -> None:
    @tool
    def odd() -> str:
        """Returns a lone surrogate."""
        return "x\ud800y"

    chat = _chat(call_tools(("odd", {})), reply("done")).with_tools(odd)
    chat.ask("go")
    result = _results(chat)[0].content
    assert result == "x\ufffdy"


# --------------------------------------------------------------- absurdly deep arguments
def test_very_deep_arguments_are_an_error_result_not_a_crash() -> None:
    deep_args: Any = {"x": 1}
    for _ in range(300):  # parseable JSON, past what validators and encoders should recurse
        deep_args = {"x": deep_args}

    @tool
    def take(x: Any) -> str:
        """Takes anything."""
        ran.append("take")
        return "ok"

    chat = _chat(call_tools(("take", deep_args)), reply("done")).with_tools(take)
    chat.ask("go")
    assert chat.status == "complete" and ran == []
    call = chat.tool_calls[0]
    assert call.status == "error" and "nested more than" in (call.result.content or "")  # type: ignore[union-attr]


# ----------------------------------------------------- one strict validation for both
@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"order_id": "12"}, "order_id: expected integer, got string"),
        ({"order_id": 12, "notify": "yes"}, "notify: expected boolean, got string"),
        ({"order_id": 12, "notify": 1}, "notify: expected boolean, got integer"),
        ({"order_id": True}, "order_id: expected integer, got boolean"),
    ],
)
def test_arguments_are_validated_strictly_and_the_store_agrees(
    arguments: dict[str, Any], problem: str, tmp_path: Any
) -> None:
    @tool(requires_approval=True)
    def refund(order_id: int, notify: bool = False) -> str:
        """Refund an order."""
        ran.append("refund")
        return "ok"

    chat = _chat(call_tools(("refund", arguments)), reply("done")).with_tools(refund)
    chat.ask("go")
    call = chat.tool_calls[0]
    assert call.status == "error" and problem in (call.result.content or "")  # type: ignore[union-attr]
    assert ran == []

    # the same arguments, edited in from another process, are refused the same way
    from nbagent.store import SQLiteStore

    db = tmp_path / "s.db"
    parked = Chat(
        provider=ScriptedProvider([call_tools(("refund", {"order_id": 1})), reply("ok")]),
        store=db,
        display=False,
    ).with_tools(refund)
    parked.ask("go")
    pending = parked.pending_approvals[0]
    from nbagent import DecisionError

    with SQLiteStore(db) as store, pytest.raises(DecisionError, match=problem.split(":")[1]):
        store.approve(pending.id, arguments=arguments)
    with pytest.raises(DecisionError, match=problem.split(":")[1]):
        parked.approve(pending, arguments)
    parked.close()


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_edited_arguments_must_be_json(bad: float) -> None:
    from nbagent import DecisionError

    @tool(requires_approval=True)
    def scale(x: float) -> str:
        """Scale by x."""
        ran.append("scale")
        return "ok"

    chat = _chat(call_tools(("scale", {"x": 2.0})), reply("done")).with_tools(scale)
    chat.ask("go")
    with pytest.raises(DecisionError, match="not JSON"):
        chat.approve(chat.pending_approvals[0], {"x": bad})
    assert chat.pending_approvals and ran == []


def test_the_stop_button_in_a_subscriber_lets_every_other_subscriber_hear_every_event() -> None:
    """A ``KeyboardInterrupt`` in one subscriber (the store's write is the likeliest place)
    stops that subscriber only: the others still hear the event, the events recorded with it
    are still handed out, and the interrupt is raised after the last."""
    heard: list[tuple[str, str]] = []
    pressed: list[str] = []

    def first(event: Any) -> None:
        heard.append(("first", event.type))

    def stop_button(event: Any) -> None:
        if event.type == "message_added" and not pressed:
            pressed.append(event.type)
            raise KeyboardInterrupt

    def last(event: Any) -> None:
        heard.append(("last", event.type))

    chat = Chat(provider=ScriptedProvider([reply("hi")]))
    chat.on(None, first).on(None, stop_button).on(None, last)
    with pytest.raises(KeyboardInterrupt):
        chat.ask("hello")
    assert pressed == ["message_added"]
    by_first = [t for who, t in heard if who == "first"]
    by_last = [t for who, t in heard if who == "last"]
    assert by_first == by_last  # the one after the interrupted subscriber missed nothing
    assert by_first[0] == "message_added"
    assert [e.type for e in chat.events][: len(by_first)] == by_first


def test_chats_made_together_have_reprs_that_tell_them_apart() -> None:
    """A chat id's first 8 digits are its creation time to the minute: every chat made
    together showed the same ``id='01a2419f'`` (and comparisons "fork of 01a2419f"). Reprs
    and labels show the random end; an id you chose shows whole."""
    from nbagent._base_chat import new_chat_id
    from nbagent._types import short_id

    first, second = new_chat_id(), new_chat_id()
    a = Chat("demo", display=False, id=first)
    b = Chat("demo", display=False, id=first[:12] + second[12:])  # the same millisecond
    assert repr(a) != repr(b) and f"id={a.id[-8:]!r}" in repr(a)
    assert short_id(a.id) == a.id[-8:] and len(short_id(a.id)) == 8
    assert short_id("refund-case-42") == "refund-case-42"
    assert "id='refund-case-42'" in repr(Chat("demo", id="refund-case-42", display=False))


# ------------------------------------------------- key-shaped text from the user's own code
LEAKED = "sk-proj-abcdefghijklmnop0123456789"


@tool
def calls_another_api(order_id: int) -> str:
    """A tool whose own client fails, quoting the key it was given."""
    ran.append("calls_another_api")
    raise PermissionError(f"401 from billing: key {LEAKED} rejected for order {order_id}")


def test_a_tools_error_reaches_the_model_and_the_record_without_a_key(tmp_path: Any) -> None:
    from nbagent import open_store

    store = open_store(tmp_path / "s.db")
    chat = Chat(
        provider=ScriptedProvider(
            [call_tools(("calls_another_api", {"order_id": 7})), reply("ok")]
        ),
        display=False,
        store=store,
    ).with_tool(calls_another_api)
    chat.ask("go")
    assert ran == ["calls_another_api"]
    (result,) = _results(chat)
    assert LEAKED not in result.content and "key sk-*** rejected" in result.content
    assert "order 7" in result.content  # the rest of the error is the model's to read
    assert LEAKED not in chat.log.to_csv()
    assert LEAKED not in repr([e for e in chat.events])
    dump = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert LEAKED.encode() not in dump


def test_a_custom_providers_failure_is_recorded_without_a_key(tmp_path: Any) -> None:
    from nbagent import open_store
    from nbagent.log import read_log

    store = open_store(tmp_path / "s.db")
    boom = ConnectionError(f"proxy refused Authorization: Bearer {LEAKED}")
    chat = Chat(provider=ScriptedProvider([boom]), display=False, store=store)
    with pytest.raises(ConnectionError):
        chat.ask("go")
    steps = chat.steps
    assert LEAKED not in steps.to_csv() and "Bearer ***" in steps.to_csv()
    assert LEAKED not in repr(list(chat.events))
    assert LEAKED not in read_log(store, "steps").to_csv()
    dump = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert LEAKED.encode() not in dump


@tool
def reads_settings() -> str:
    """A tool that returns more of its environment than it should."""
    ran.append("reads_settings")
    return f"region=eu-west-1\nOPENAI_API_KEY={LEAKED}\nAuthorization: Bearer {LEAKED}"


def test_a_key_a_tool_returns_reaches_neither_the_model_nor_the_record(tmp_path: Any) -> None:
    from nbagent import open_store

    store = open_store(tmp_path / "s.db")
    provider = ScriptedProvider([call_tools(("reads_settings", {})), reply("ok")])
    chat = Chat(provider=provider, display=False, store=store).with_tool(reads_settings)
    chat.ask("go")
    (result,) = _results(chat)
    assert result.status == "ok" and "region=eu-west-1" in result.content
    assert LEAKED not in result.content and "Bearer ***" in result.content
    assert LEAKED not in repr(provider.requests[-1].messages)  # what the model was sent
    assert LEAKED not in chat.log.to_csv()
    dump = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert LEAKED.encode() not in dump


@pytest.mark.parametrize(
    "key",
    [
        "gsk_abcDEF0123456789ghijKLMN",  # Groq
        "xai-abcDEF0123456789ghijKLMN",  # xAI
        "AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStU",  # Google
        "hf_abcDEF0123456789ghijKLMN",  # Hugging Face
    ],
)
def test_other_providers_key_shapes_are_redacted_from_a_tools_result(key: str) -> None:
    @tool
    def settings() -> str:
        """Returns its settings, key included."""
        return f"region=eu\nAPI_KEY={key}"

    provider = ScriptedProvider([call_tools(("settings", {})), reply("ok")])
    chat = Chat(provider=provider, display=False).with_tool(settings)
    chat.ask("go")
    (result,) = _results(chat)
    assert key not in result.content and "region=eu" in result.content
    assert key not in repr(provider.requests[-1].messages)
    assert key not in chat.log.to_csv()


def test_the_chats_own_provider_key_of_any_shape_is_scrubbed_from_tools(tmp_path: Any) -> None:
    from nbagent import open_store
    from nbagent.providers import OpenAIProvider
    from nbagent.testing import FakeLLMServer, FakeToolCall, Turn

    key = "corp-gateway-7f3a9b2c1d8e"  # no known shape: only the provider knows it

    @tool
    def echo_config() -> str:
        """Returns the client's configuration."""
        return f"base=https://gw.example\nkey={key}"

    @tool
    def failing() -> str:
        """Fails quoting the key."""
        raise PermissionError(f"gateway refused {key}")

    store = open_store(tmp_path / "s.db")
    with FakeLLMServer() as server:
        server.script(
            [
                Turn(tool_calls=[FakeToolCall("echo_config", {}), FakeToolCall("failing", {})]),
                Turn(text="done"),
            ]
        )
        provider = OpenAIProvider("llama3.1", base_url=server.openai_base_url, api_key=key)
        chat = Chat(provider=provider, display=False, store=store).with_tools(echo_config, failing)
        chat.ask("go")
        sent = repr(server.requests[-1].body)
        provider.close()
    assert "base=https://gw.example" in sent and "gateway refused ***" in sent
    assert key not in sent  # the model read neither the result's copy nor the error's
    assert key not in chat.log.to_csv() and key not in repr(list(chat.events))
    dump = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert key.encode() not in dump


def test_a_placeholder_key_is_no_secret_to_cut_out_of_results() -> None:
    from nbagent.providers import OpenAIProvider
    from nbagent.testing import FakeLLMServer, FakeToolCall, Turn

    @tool
    def run_tests() -> str:
        """Runs the tests."""
        return "latest test run: 12 tests passed; contest entries attested"

    with FakeLLMServer() as server:  # a local server's key, as docs/testing.md gives it
        server.script([Turn(tool_calls=[FakeToolCall("run_tests", {})]), Turn(text="ok")])
        provider = OpenAIProvider("llama3.1", base_url=server.openai_base_url, api_key="test")
        chat = Chat(provider=provider, display=False).with_tool(run_tests)
        chat.ask("go")
        sent = repr(server.requests[-1].body)
        provider.close()
    assert "latest test run: 12 tests passed; contest entries attested" in sent
    assert chat.log["result_preview"].tolist() == [
        "latest test run: 12 tests passed; contest entries attested"
    ]
