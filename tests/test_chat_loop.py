"""The Chat loop: step kinds, options, callbacks, budgets, bad input, events."""

from __future__ import annotations

from typing import Any, Literal

import pytest

import nbagent
from nbagent import (
    AssistantToolCallMessage,
    Chat,
    ChatMessage,
    LLMToolResponse,
    PendingToolCallsError,
    ProviderError,
    SkipToolCall,
    Tool,
    ToolCall,
    ToolExecutionError,
    ToolResultMessage,
    current_tool_call,
    tool,
)
from nbagent.testing._scripted import ScriptedProvider, call_tools, reply

calls_made: list[tuple[str, dict[str, Any]]] = []


@tool
def get_weather(city: str, unit: Literal["c", "f"] = "c") -> dict[str, Any]:
    """Get current weather for a city.

    Args:
        city: City name.
        unit: Temperature unit.
    """
    calls_made.append(("get_weather", {"city": city, "unit": unit}))
    return {"city": city, "temp": 18, "unit": unit}


@tool
def explode(reason: str) -> str:
    """Always raises."""
    calls_made.append(("explode", {"reason": reason}))
    raise RuntimeError(f"boom: {reason}")


@pytest.fixture(autouse=True)
def _reset_calls() -> None:
    calls_made.clear()


def make_chat(*script: Any, **kwargs: Any) -> tuple[Chat, ScriptedProvider]:
    provider = ScriptedProvider(script)
    return Chat(provider=provider, **kwargs).with_tools(get_weather, explode), provider


def test_chat_without_key_uses_demo_model_and_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    nbagent.configure(quiet=False)
    from nbagent.providers import _registry

    _registry._announced.clear()
    chat = Chat()
    assert chat.provider.name == "demo"
    Chat()
    err = capsys.readouterr().err
    assert err.count("offline demo model") == 1


def test_one_tool_round_then_answer() -> None:
    chat, provider = make_chat(call_tools(("get_weather", {"city": "Paris"})), reply("Sunny."))
    answer = chat.ask("Weather in Paris?")
    assert isinstance(answer, ChatMessage) and answer.content == "Sunny."
    assert chat.is_complete and chat.status == "complete"
    kinds = [type(m).__name__ for m in chat.transcript]
    assert kinds == ["ChatMessage", "AssistantToolCallMessage", "ToolResultMessage", "ChatMessage"]
    result = chat.transcript[2]
    assert isinstance(result, ToolResultMessage)
    assert result.content == '{"city":"Paris","temp":18,"unit":"c"}'
    assert calls_made == [("get_weather", {"city": "Paris", "unit": "c"})]
    # the second request carried the whole round
    assert [type(m).__name__ for m in provider.requests[1].messages] == kinds[:3]
    assert provider.requests[0].tools[0].name == "get_weather"
    assert chat.turn_messages() == chat.transcript


def test_step_kinds_one_by_one() -> None:
    chat, _ = make_chat(call_tools(("get_weather", {"city": "Oslo"})), reply("Cold."))
    chat.ask_later("Weather in Oslo?")
    assert chat.step().kind == "generated"
    assert not chat.is_complete
    ran = chat.step()
    assert ran.kind == "ran_tools" and [c.name for c in ran.calls] == ["get_weather"]
    assert ran.calls[0].status == "ok"
    gen = chat.step()
    assert gen.kind == "generated" and gen.message == ChatMessage("assistant", "Cold.", turn=1)
    assert chat.step().kind == "complete"
    assert chat.is_complete


def test_budget_stops_and_resumes() -> None:
    script = [call_tools(("get_weather", {"city": f"C{i}"})) for i in range(3)] + [reply("done")]
    chat, _ = make_chat(*script)
    chat.ask("go", max_steps=3)
    assert chat.last_step is not None and chat.last_step.kind == "budget_exhausted"
    assert chat.status == "budget_exhausted"
    assert len(calls_made) == 1  # generated, ran, generated: three steps
    # the transcript is valid: every call of a closed round is answered
    assert isinstance(chat.transcript[-1], AssistantToolCallMessage)
    answer = chat.complete()
    assert answer is not None and answer.content == "done"  # type: ignore[union-attr]
    assert len(calls_made) == 3


def test_chat_level_max_steps() -> None:
    chat, _ = make_chat(
        *[call_tools(("get_weather", {"city": "X"})) for _ in range(5)], max_steps=2
    )
    chat.ask("go")
    assert chat.status == "budget_exhausted"


def test_ask_while_calls_unanswered_raises_and_names_them() -> None:
    chat, _ = make_chat(call_tools(("get_weather", {"city": "Rome"}, "call_rome")))
    chat.ask_later("Weather in Rome?")
    chat.step()
    with pytest.raises(PendingToolCallsError) as err:
        chat.ask("something else")
    assert "get_weather(call_rome)" in str(err.value)
    assert "chat.complete()" in str(err.value)


def test_invalid_json_arguments_become_an_error_result() -> None:
    bad = ToolCall("c1", "get_weather", {}, raw_arguments='{"city": "Par', parse_error="EOF")
    chat, provider = make_chat(call_tools(bad), reply("sorry"))
    chat.ask("weather")
    result = chat.transcript[2]
    assert isinstance(result, ToolResultMessage)
    assert result.is_error and result.status == "error"
    assert "not valid JSON" in result.content and '{"city": "Par' in result.content
    assert calls_made == []
    assert provider.requests[1].messages[-1] == result


def test_a_huge_invalid_argument_text_is_quoted_back_bounded() -> None:
    """A model's 160,000-character mistake is not read back to it whole (its start and its
    length are: enough to see what went wrong)."""
    raw = '{"city": "' + "x" * 160_000
    bad = ToolCall("c1", "get_weather", {}, raw_arguments=raw, parse_error="EOF")
    chat, _ = make_chat(call_tools(bad), reply("sorry"))
    chat.ask("weather")
    result = chat.transcript[2]
    assert isinstance(result, ToolResultMessage) and result.status == "error"
    assert '{"city": "xxx' in result.content and "160,010 characters in all" in result.content
    assert len(result.content) < 1_000 and calls_made == []


def test_schema_invalid_arguments_never_run_the_tool() -> None:
    chat, _ = make_chat(call_tools(("get_weather", {"unit": "kelvin"})), reply("sorry"))
    chat.ask("weather")
    result = chat.transcript[2]
    assert isinstance(result, ToolResultMessage) and result.is_error
    assert "city: Field required" in result.content
    assert "unit:" in result.content
    assert calls_made == []


def test_unknown_tool_is_answered_with_the_available_names() -> None:
    chat, _ = make_chat(call_tools(("launch_rockets", {})), reply("ok"))
    chat.ask("launch")
    result = chat.transcript[2]
    assert isinstance(result, ToolResultMessage) and result.is_error
    assert "unknown tool 'launch_rockets'" in result.content
    assert "explode, get_weather" in result.content


def test_raising_tool_becomes_error_result_by_default() -> None:
    chat, _ = make_chat(call_tools(("explode", {"reason": "x"})), reply("it failed"))
    chat.ask("explode")
    result = chat.transcript[2]
    assert isinstance(result, ToolResultMessage)
    assert result.status == "error" and "RuntimeError: boom: x" in result.content
    assert chat.is_complete


def test_raising_tool_with_on_tool_error_raise_keeps_transcript_resumable() -> None:
    chat, _ = make_chat(
        call_tools(("explode", {"reason": "x"}), ("get_weather", {"city": "Oslo"})),
        reply("recovered"),
        on_tool_error="raise",
    )
    with pytest.raises(ToolExecutionError) as err:
        chat.ask("explode")
    assert isinstance(err.value.error, RuntimeError)
    # both calls answered, in call order, nothing lost
    results = [m for m in chat.transcript if isinstance(m, ToolResultMessage)]
    assert [r.status for r in results] == ["error", "ok"]
    assert chat.complete().content == "recovered"  # type: ignore[union-attr]


def test_provider_failure_appends_nothing_and_resumes() -> None:
    chat, provider = make_chat(ProviderError("server on fire"), reply("back"))
    failures: list[Any] = []
    chat.on("model_request_failed", failures.append)
    with pytest.raises(ProviderError, match="server on fire"):
        chat.ask("hi")
    assert [type(m).__name__ for m in chat.transcript] == ["ChatMessage"]
    assert failures[0].error == "server on fire"
    assert chat.complete().content == "back"  # type: ignore[union-attr]
    assert len(provider.requests) == 2


def test_calls_one_is_enforced_client_side() -> None:
    chat, provider = make_chat(
        call_tools(("get_weather", {"city": "A"}), ("get_weather", {"city": "B"})),
        reply("one done"),
    )
    chat.with_tool_options(calls="one")
    chat.ask("two cities")
    assert provider.requests[0].calls == "one"
    assert calls_made == [("get_weather", {"city": "A", "unit": "c"})]
    results = [m for m in chat.transcript if isinstance(m, ToolResultMessage)]
    assert [r.status for r in results] == ["ok", "skipped"]
    assert "only one tool call per response" in results[1].content


def test_the_tool_choice_is_enforced_client_side() -> None:
    """Not every server honours ``tool_choice`` (compatible servers, some models): calls it
    did not allow were run. With ``none`` no call runs; with a tool named, only its calls do
    (and the calls limit counts only them)."""
    chat, provider = make_chat(
        call_tools(("get_weather", {"city": "A"}), ("explode", {"reason": "x"})),
        reply("none done"),
        call_tools(("explode", {"reason": "y"}), ("get_weather", {"city": "B"})),
        reply("forced done"),
    )
    chat.with_tool_options(choice="none")
    chat.ask("anything")
    assert provider.requests[0].tool_choice == "none" and calls_made == []
    results = [m for m in chat.transcript if isinstance(m, ToolResultMessage)]
    assert [r.status for r in results] == ["skipped", "skipped"]
    assert all("tool choice 'none'" in r.content for r in results)
    chat.with_tool_options(choice=get_weather, calls="one")
    chat.ask("weather")
    assert calls_made == [("get_weather", {"city": "B", "unit": "c"})]
    results = [m for m in chat.transcript if isinstance(m, ToolResultMessage)][2:]
    assert [r.status for r in results] == ["skipped", "ok"]
    assert "to call get_weather only" in results[0].content


def test_numeric_calls_limit() -> None:
    chat, provider = make_chat(
        call_tools(*[("get_weather", {"city": c}) for c in "ABC"]), reply("ok")
    )
    chat.with_tool_options(calls=2)
    chat.ask("three")
    assert provider.requests[0].calls == "many"
    assert [c["city"] for _, c in calls_made] == ["A", "B"]
    skipped = [m for m in chat.transcript if isinstance(m, ToolResultMessage)][2]
    assert "only 2 tool calls per response are allowed" in skipped.content


def test_truncated_tool_calls_are_never_executed() -> None:
    cut = call_tools(("get_weather", {"city": "Par"}), stop_reason="max_tokens")
    chat, _ = make_chat(cut, reply("retrying later"))
    chat.ask("weather")
    assert calls_made == []
    result = chat.transcript[2]
    assert isinstance(result, ToolResultMessage) and result.status == "skipped"
    assert "cut off by the token limit" in result.content


def test_required_and_specific_choice_reset_to_auto_after_a_round() -> None:
    chat, provider = make_chat(
        call_tools(("get_weather", {"city": "A"})),
        reply("a"),
        call_tools(("get_weather", {"city": "B"})),
        reply("b"),
    )
    chat.with_tool_options(choice="required")
    chat.ask("first")
    assert [r.tool_choice for r in provider.requests] == ["required", "auto"]
    chat.with_tool_options(choice=get_weather)  # a tool function designates its name
    chat.ask("second")
    assert [r.tool_choice for r in provider.requests[2:]] == ["get_weather", "auto"]
    assert chat.tool_options.choice == "get_weather"  # the option itself is kept for next turn


def test_tool_options_validation() -> None:
    chat, _ = make_chat()
    with pytest.raises(TypeError, match="unknown tool option"):
        chat.with_tool_options(parallel=True)
    with pytest.raises(nbagent.ToolOptionError):
        chat.with_tool_options(calls="several")
    with pytest.raises(nbagent.ToolOptionError):
        chat.with_tool_options(concurrency="processes")
    chat.with_tool_options(choice="required", calls="one", concurrency="threads")
    chat.with_tool_options(calls=None)
    opts = chat.tool_options
    assert (opts.choice, opts.calls, opts.concurrency) == ("required", None, "threads")
    chat.with_tools(None)
    assert chat.tools == () and chat.tool_options.choice == "required"


def test_specific_choice_must_name_a_tool_of_the_chat() -> None:
    """Checked when asked, before the message is kept: asking again after fixing the choice
    does not leave the first message behind unanswered."""
    chat, provider = make_chat(reply("x"))
    chat.with_tool_options(choice="nope")
    with pytest.raises(nbagent.ToolOptionError, match="nor one of the chat's tools"):
        chat.ask("hi")
    assert chat.transcript == () and provider.requests == []
    chat.with_tool_options(choice="requried")  # a typo of a choice word says which one
    with pytest.raises(nbagent.ToolOptionError, match="did you mean 'required'"):
        chat.ask("hi")
    chat.with_tool_options(choice=None)
    assert chat.ask("hi").content == "x"  # type: ignore[union-attr]
    assert [m.role for m in chat.transcript] == ["user", "assistant"]


def test_a_forced_choice_kept_after_the_tools_are_cleared_fails_when_asked() -> None:
    """``with_tools(None)`` keeps the options (RubyLLM's rule); a ``required`` choice then has
    no tool to call: ``ask`` says so before anything is kept or sent."""
    chat, provider = make_chat(reply("x"))
    chat.with_tool_options(choice="required").with_tools(None)
    with pytest.raises(nbagent.ToolOptionError, match="needs tools, but the chat has none"):
        chat.ask("hi")
    assert chat.transcript == () and provider.requests == []


def test_choice_without_tools_sends_none() -> None:
    provider = ScriptedProvider([reply("hello")])
    chat = Chat(provider=provider)
    chat.ask("hi")
    assert provider.requests[0].tool_choice == "none"


def test_callbacks_are_additive_chainable_and_removable() -> None:
    chat, _ = make_chat(
        call_tools(("get_weather", {"city": "A"})),
        reply("a"),
        call_tools(("get_weather", {"city": "B"})),
        reply("b"),
    )
    before: list[str] = []
    after: list[tuple[str, str, str]] = []

    def b1(call: ToolCall) -> None:
        before.append(f"1:{call.arguments['city']}")

    def b2(call: ToolCall) -> None:
        before.append(f"2:{call.arguments['city']}")

    assert (
        chat.before_tool_call(b1)
        .before_tool_call(b2)
        .after_tool_result(lambda r: after.append((r.call.name, r.status, r.content)))
        is chat
    )
    chat.ask("a")
    assert before == ["1:A", "2:A"]
    assert after == [("get_weather", "ok", '{"city":"A","temp":18,"unit":"c"}')]
    chat.off(b1)
    chat.ask("b")
    assert before == ["1:A", "2:A", "2:B"]


def test_before_tool_call_can_skip_a_call() -> None:
    chat, _ = make_chat(call_tools(("get_weather", {"city": "A"})), reply("skipped"))

    def veto(call: ToolCall) -> None:
        raise SkipToolCall("weather is off today")

    chat.before_tool_call(veto)
    chat.ask("a")
    result = chat.transcript[2]
    assert isinstance(result, ToolResultMessage)
    assert result.status == "skipped" and "weather is off today" in result.content
    assert calls_made == []


def test_a_raising_subscriber_warns_and_the_chat_goes_on() -> None:
    chat, _ = make_chat(reply("fine"))

    def broken(event: nbagent.Event) -> None:
        raise ValueError("bug in my callback")

    chat.on(nbagent.MessageAdded, broken)
    with pytest.warns(nbagent.CallbackWarning, match="bug in my callback"):
        assert chat.ask("hi").content == "fine"  # type: ignore[union-attr]


def test_event_stream_for_a_tool_round() -> None:
    chat, _ = make_chat(call_tools(("get_weather", {"city": "A"})), reply("a"), stream=False)
    events: list[nbagent.Event] = []
    chat.on(None, events.append)
    chat.ask("a")
    assert [e.type for e in events] == [
        "message_added",
        "model_request_started",
        "model_request_finished",
        "message_added",
        "tool_call_requested",
        "step_finished",
        "tool_call_started",
        "tool_call_finished",
        "message_added",
        "step_finished",
        "model_request_started",
        "model_request_finished",
        "message_added",
        "step_finished",
        "step_finished",
    ]
    assert [e.seq for e in events] == sorted(e.seq for e in events)
    assert all(e.chat_id == chat.id and e.ts.tzinfo is not None for e in events)
    finished = next(e for e in events if isinstance(e, nbagent.ToolCallFinished))
    assert finished.status == "ok" and finished.duration_ms is not None


def test_chat_ids_are_version_7_uuids_that_sort_by_creation_time() -> None:
    import time
    import uuid

    first = Chat(model="demo")
    time.sleep(0.002)
    second = Chat(model="demo")
    assert len(first.id) == 32 and first.id < second.id
    parsed = uuid.UUID(first.id)
    assert parsed.version == 7 and parsed.variant == uuid.RFC_4122
    assert abs((parsed.int >> 80) - time.time() * 1000) < 60_000  # Unix ms in the top 48 bits
    assert len({Chat(model="demo").id for _ in range(2000)}) == 2000
    assert Chat(model="demo", id="mine").id == "mine"


def test_streaming_emits_text_and_argument_deltas() -> None:
    chat, _ = make_chat(
        call_tools(("get_weather", {"city": "A"})), reply("it is warm"), stream=True
    )
    text: list[str] = []
    args: list[str] = []
    chat.on(nbagent.TextDelta, lambda e: text.append(e.text))
    chat.on(nbagent.ToolCallDelta, lambda e: args.append(e.arguments_delta))
    chat.ask("a")
    assert "".join(text).strip() == "it is warm"
    assert args == ['{"city": "A"}']


def test_current_tool_call_inside_a_tool() -> None:
    seen: list[Any] = []

    class Introspect(Tool):
        """Looks at its own call."""

        def execute(self) -> str:
            call = current_tool_call()
            seen.append((call, call.status if call else None))
            return call.id if call else "none"

    provider = ScriptedProvider([call_tools(("introspect", {}, "c42")), reply("ok")])
    chat = Chat(provider=provider).with_tools(Introspect)
    chat.ask("who")
    assert seen[0][0].id == "c42" and seen[0][1] == "running"
    assert current_tool_call() is None


def test_refusal_surfaces_as_the_answer() -> None:
    refusal = LLMToolResponse(text="", stop_reason="refusal", refusal="I can't help with that.")
    chat, _ = make_chat(refusal)
    answer = chat.ask("bad request")
    assert isinstance(answer, ChatMessage)
    assert answer.content == "I can't help with that." and answer.stop_reason == "refusal"
    assert chat.is_complete


def test_pause_turn_continues_generation() -> None:
    chat, provider = make_chat(reply("thinking...", stop_reason="pause_turn"), reply("done"))
    assert chat.ask("long task").content == "done"  # type: ignore[union-attr]
    assert len(provider.requests) == 2


def test_usage_accumulates() -> None:
    chat, _ = make_chat(call_tools(("get_weather", {"city": "A"})), reply("a"))
    chat.ask("a")
    assert chat.usage == nbagent.Usage(20, 10, 0)


def test_demo_model_end_to_end() -> None:
    chat = Chat(model="demo").with_tools(get_weather)
    answer = chat.ask("What's the weather in Paris and in Tokyo in f?")
    assert [c["city"] for _, c in calls_made] == ["Paris", "Tokyo"]
    assert all(c["unit"] == "f" for _, c in calls_made)
    assert "Paris" in answer.content and "Tokyo" in answer.content  # type: ignore[union-attr]
    chat.with_tool_options(calls="one")
    chat.ask("weather in Berlin and in Madrid")
    assert calls_made[-1][1]["city"] == "Berlin" and len(calls_made) == 3
    chat.with_tool_options(choice="none")
    none_answer = chat.ask("weather in Lima")
    assert len(calls_made) == 3 and "demo model" in none_answer.content  # type: ignore[union-attr]


def test_a_callback_driving_its_own_running_chat_is_told_at_once() -> None:
    """A drive from inside the run (a callback on the driving thread) would wait for itself:
    it raises DriverError at once, and the running driver goes on undisturbed."""
    chat, _ = make_chat(call_tools(("get_weather", {"city": "A"})), reply("done"))
    chat.ask_later("weather")
    assert chat.step().kind == "generated"
    errors: list[BaseException] = []

    def nested(call: ToolCall) -> None:
        for drive in (chat.complete, chat.step, lambda: chat.ask("more")):
            try:
                drive()
            except nbagent.DriverError as exc:
                errors.append(exc)

    chat.before_tool_call(nested)
    assert chat.step().kind == "ran_tools"
    assert [type(e) for e in errors] == [nbagent.DriverError] * 3
    assert "wait for itself" in str(errors[0])
    assert calls_made == [("get_weather", {"city": "A", "unit": "c"})]
    chat.off(nested)
    assert chat.complete().content == "done"  # type: ignore[union-attr]
    assert [m.content for m in chat.transcript if isinstance(m, ChatMessage)] == [
        "weather",
        "done",
    ]


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda chat: Chat(provider=chat.provider, system=5), "system instructions are a string"),
        (lambda chat: chat.with_instructions(["be brief"]), "system instructions are a string"),
        (lambda chat: chat.before_tool_call(5), r"before_tool_call\(\) takes a function, got 5"),
        (lambda chat: chat.after_tool_result("log"), r"after_tool_result\(\) takes a function"),
    ],
)
def test_a_malformed_setting_is_refused_where_it_is_given(build: Any, message: str) -> None:
    """Before: ``Chat(system=5)`` failed with ``AttributeError: 'int' object has no attribute
    'isascii'``, and a callback that is not callable was taken and failed only once a tool
    call ran, inside the loop."""
    chat = Chat(
        provider=ScriptedProvider(
            [call_tools(("get_weather", {"city": "A", "unit": "c"}, "c1")), reply("done")]
        ),
        system="be kind",
        display=False,
    ).with_tools(get_weather)
    with pytest.raises(TypeError, match=message):
        build(chat)
    assert chat.system == "be kind"
    assert chat.ask("weather").content == "done"  # type: ignore[union-attr]
    assert chat.get_call("c1").status == "ok"


def test_a_tool_named_like_a_choice_word_cannot_be_forced() -> None:
    """``choice=<tool named "none">`` sent ``tool_choice: "none"``: tools off, not forced."""

    @tool(name="none")
    def nothing() -> str:
        """Does nothing."""
        return ""

    chat, _ = make_chat()
    with pytest.raises(nbagent.ToolOptionError, match="'none' cannot be forced"):
        chat.with_tools(nothing).with_tool_options(choice=nothing)
    assert chat.tool_options.choice == "auto"


def test_calls_is_a_count_not_anything_equal_to_one() -> None:
    """``True`` and ``1.0`` equal 1, and were taken as "one call per response"."""
    import numpy as np

    chat, _ = make_chat()
    own_loop = ScriptedProvider([reply("ok")])
    for bad in (True, 1.0, 2.5, 0, -1, "1"):
        with pytest.raises(nbagent.ToolOptionError, match="calls must be"):
            chat.with_tool_options(calls=bad)
        with pytest.raises(TypeError, match="calls must be"):
            own_loop.complete_with_tools(messages=[ChatMessage("user", "hi")], calls=bad)
    assert own_loop.requests == []  # refused before anything was sent
    chat.with_tool_options(calls=np.int64(2))
    assert chat.tool_options.calls == 2 and type(chat.tool_options.calls) is int
    own_loop.complete_with_tools(messages=[ChatMessage("user", "hi")], calls=1)
    assert own_loop.requests[0].calls == "one"


def test_asking_the_unanswered_question_again_retries_it_instead_of_sending_it_twice() -> None:
    """A request failed (the network, a cancel) and the user asks the same again, as anyone
    would: the model read the question twice in a row, and the transcript kept both."""
    chat, provider = make_chat(ConnectionError("network down"), reply("hello"), reply("again"))
    with pytest.raises(ConnectionError):
        chat.ask("Hi there")
    assert chat.ask("Hi there").content == "hello"  # type: ignore[union-attr]
    assert [(m.role, m.content, m.turn) for m in chat.transcript] == [
        ("user", "Hi there", 1),
        ("assistant", "hello", 1),
    ]
    assert [m.content for m in provider.requests[-1].messages] == ["Hi there"]
    chat.ask_later("More?")
    chat.ask_later("More?")  # queued twice: one question
    assert [m.content for m in chat.transcript[2:]] == ["More?"]
    assert chat.complete().content == "again"  # type: ignore[union-attr]


def test_asking_again_after_a_failure_that_followed_a_tool_round_goes_on_with_the_turn() -> None:
    """The request after the turn's tool round failed and the user re-ran the cell: before,
    the question was added again after the tool's result, and the model read "refund order
    42" once more after refunding it (an invitation to do it twice). The turn goes on, as
    ``complete()`` would; the question is in the transcript once and the tool ran once."""
    ran: list[int] = []

    @tool
    def issue_refund(order_id: int) -> str:
        """Refund an order."""
        ran.append(order_id)
        return f"refunded {order_id}"

    provider = ScriptedProvider(
        [call_tools(("issue_refund", {"order_id": 42})), ConnectionError("down"), reply("done")]
    )
    chat = Chat(provider=provider).with_tools(issue_refund)
    with pytest.raises(ConnectionError):
        chat.ask("Refund order 42")
    assert chat.ask("Refund order 42").content == "done"  # type: ignore[union-attr]
    assert ran == [42]
    sent = provider.requests[-1].messages
    assert [type(m).__name__ for m in sent] == [
        "ChatMessage",
        "AssistantToolCallMessage",
        "ToolResultMessage",
    ]
    assert [m.content for m in chat.transcript if m.role == "user"] == ["Refund order 42"]
    assert {m.turn for m in chat.transcript} == {1}
    # answered, the same question is a new turn
    provider.add(reply("again"))
    chat.ask("Refund order 42")
    assert [m.content for m in chat.transcript if m.role == "user"] == ["Refund order 42"] * 2


def test_asking_something_else_after_a_failure_keeps_both_messages() -> None:
    chat, provider = make_chat(ConnectionError("down"), reply("ok"))
    with pytest.raises(ConnectionError):
        chat.ask("Hi")
    chat.ask("Hi, are you there?")
    assert [m.content for m in provider.requests[-1].messages] == ["Hi", "Hi, are you there?"]
