"""nbagent.batch end to end: real chats against the fake server through the real SDK
clients, the demo model, and the scripted provider; the result frame and the log."""

from __future__ import annotations

import asyncio
from typing import Any, Literal

import pandas as pd
import pytest
from _batch_setup import ROUNDS, Rounds, lookup

import nbagent
from nbagent import Chat
from nbagent._aio import run_sync
from nbagent.batch import COLUMNS, BatchInputError, InputError
from nbagent.providers import AnthropicProvider, OpenAIProvider
from nbagent.testing import FakeLLMServer, ScriptedProvider, call_tools, reply

KEY = "sk-test-batch-0000000000000000"


@pytest.mark.parametrize("kind", ["chat", "anthropic"])
def test_a_frame_of_chats_runs_three_tool_rounds_each_through_the_real_sdk(kind: str) -> None:
    handler = Rounds()
    with FakeLLMServer(handler=handler) as server:
        if kind == "anthropic":
            provider = AnthropicProvider(
                "claude-sonnet-4-5", base_url=server.anthropic_base_url, api_key=KEY
            )
        else:
            provider = OpenAIProvider("gpt-4.1-mini", base_url=server.openai_base_url, api_key=KEY)
        df = pd.DataFrame({"title": [f"book {i}" for i in range(12)]}, index=range(100, 112))
        try:
            result = nbagent.batch(
                df,
                lambda: Chat(provider=provider).with_tools(lookup),
                prompt="Summarise {title}",
                concurrency=4,
                progress=False,
            )
        finally:  # the async client of this thread's loop (batch() ran there)
            run_sync(provider.aclose())
    assert list(result.columns) == COLUMNS
    assert list(result.index) == list(range(100, 112))  # indexed like the input: df.join works
    assert (result["status"] == "done").all(), result[["status", "error"]]
    assert list(result["reply"]) == [f"answer to Summarise book {i}" for i in range(12)]
    assert (result["calls"] == ROUNDS).all()
    assert (result["tokens"] == result["input_tokens"] + result["output_tokens"]).all()
    assert (result["tokens"] > 0).all()
    assert result["cost_usd"].notna().all() and (result["cost_usd"] > 0).all()
    assert result["latency_s"].notna().all()
    assert result["chat_id"].is_unique
    assert result["error"].isna().all()
    assert handler.requests == 12 * (ROUNDS + 1)
    log = nbagent.read_log(result)
    assert len(log) == 12 * ROUNDS
    assert set(log["chat_id"]) == set(result["chat_id"])
    assert set(log["status"]) == {"ok"}
    # a selection of rows reads only those rows' chats
    assert len(nbagent.read_log(result[result.index < 103])) == 3 * ROUNDS
    joined = df.join(result[["reply"]])
    assert joined.loc[105, "reply"] == "answer to Summarise book 5"


def test_the_demo_model_over_a_list_of_prompts() -> None:
    prompts = ["What is 2 + 2?", "Name a colour", "Say hello"]
    result = nbagent.batch(prompts, lambda: Chat("demo"), progress=False)
    assert list(result["key"]) == ["0", "1", "2"]
    assert (result["status"] == "done").all()
    assert all(isinstance(r, str) and r for r in result["reply"])


def test_a_chat_the_factory_primed_with_a_turn_is_still_asked_its_prompt(tmp_path: Any) -> None:
    """A conversation already under way (the factory asked something first) is not a
    resumed chat: the row's prompt is asked, with a store or without."""

    async def make(prompt: str) -> Chat:
        script = [reply("ready"), reply(f"answer to {prompt}")]
        chat = Chat(provider=ScriptedProvider(script))
        await chat.ask_async("Answer in one line.")
        return chat

    for store in (None, tmp_path / "primed.db"):
        result = nbagent.batch(["a", "b"], make, store=store, progress=False)
        assert list(result["status"]) == ["done", "done"]
        assert list(result["reply"]) == ["answer to a", "answer to b"]


def test_the_factory_gets_the_row_and_rows_are_formatted_from_a_list_of_dicts() -> None:
    seen: list[dict[str, object]] = []

    def make(row: dict[str, object]) -> Chat:
        seen.append(row)
        return Chat(provider=ScriptedProvider([reply(f"hi {row['name']}")]))

    rows = [{"id": "a1", "name": "Ada"}, {"id": "b2", "name": "Bob"}]
    result = nbagent.batch(rows, make, prompt="Greet {name}", key="id", progress=False)
    assert list(result["key"]) == ["a1", "b2"]
    assert list(result["reply"]) == ["hi Ada", "hi Bob"]
    assert sorted(r["name"] for r in seen) == ["Ada", "Bob"]


def test_a_defaulted_parameter_is_a_setting_not_the_row_unless_it_is_named_row() -> None:
    """``lambda name="x": ...`` keeps its setting (it once got the row's prompt as its
    value); ``def make(row=None)`` and ``*args`` get the row."""
    got: dict[str, object] = {}

    def with_setting(greeting: str = "hi") -> Chat:
        got.setdefault("setting", []).append(greeting)  # type: ignore[union-attr]
        return Chat(provider=ScriptedProvider([reply(greeting)]))

    def with_row(row: dict[str, object] | None = None) -> Chat:
        got.setdefault("row", []).append(row)  # type: ignore[union-attr]
        return Chat(provider=ScriptedProvider([reply("ok")]))

    def with_args(*args: object) -> Chat:
        got.setdefault("args", []).append(args)  # type: ignore[union-attr]
        return Chat(provider=ScriptedProvider([reply("ok")]))

    rows = [{"id": "a1", "name": "Ada"}]
    for make in (with_setting, with_row, with_args):
        result = nbagent.batch(rows, make, prompt="Greet {name}", key="id", progress=False)
        assert list(result["status"]) == ["done"], result["error"].tolist()
    assert got["setting"] == ["hi"]
    assert got["row"] == [{"id": "a1", "name": "Ada"}]
    assert got["args"] == [({"id": "a1", "name": "Ada"},)]


def test_a_bad_row_and_a_raising_factory_are_recorded_on_their_rows_only() -> None:
    df = pd.DataFrame({"title": ["ok", "boom", None, "fine"], "x": [1, 2, 3, 4]})
    df.loc[2, "title"] = None

    def make(row: dict[str, object]) -> Chat:
        if row["title"] == "boom":
            raise RuntimeError("no model for boom")
        return Chat(provider=ScriptedProvider([reply("fine")]))

    result = nbagent.batch(df, make, prompt="About {title} ({author})", progress=False)
    # every row needs {author}, which no row has: each fails with the same clear error
    assert (result["status"] == "failed").all()
    assert "needs 'author'" in result.loc[0, "error"]
    assert result.loc[0, "error_type"] == "BatchInputError"
    assert result["chat_id"].isna().all()

    result = nbagent.batch(df, make, prompt="About {title}", progress=False)
    assert list(result["status"]) == ["done", "failed", "failed", "done"]
    assert result.loc[1, "error"] == "make_chat raised RuntimeError: no model for boom"
    assert result.loc[1, "error_type"] == "RuntimeError"
    assert pd.isna(result.loc[1, "chat_id"])
    # an empty cell the template uses fails its row, as an empty prompt column does: "About
    # None" is no prompt ("Refund order None" had the demo model make up an order to refund)
    assert result.loc[2, "error"] == "the prompt template needs 'title', empty in this row"
    assert result.loc[2, "error_type"] == "BatchInputError" and pd.isna(result.loc[2, "chat_id"])
    nan = pd.DataFrame({"order": [41, float("nan")]})
    filled = nbagent.batch(
        nan,
        lambda: Chat(provider=ScriptedProvider([reply("ok")])),
        prompt="Refund order {order}",
        progress=False,
    )
    assert list(filled["status"]) == ["done", "failed"]
    assert "needs 'order', empty" in filled.loc[1, "error"]


def test_an_int_column_with_an_empty_cell_fills_whole_numbers() -> None:
    """pandas makes an int column float to hold a NaN (and keeps it float after
    ``dropna()``): its rows asked "Refund order 41.0" (and keyed the row "41.0"). A float
    column of whole numbers fills and keys as ints; one with a fraction stays as it is. Its
    empty cell, as a key, is no key (it was keyed 'None')."""
    df = pd.DataFrame({"order": [41, None, 7], "price": [2.5, 3.0, 4.0], "rate": [0.5, None, 2.0]})
    assert df["order"].dtype == float
    chats: list[Chat] = []

    def make(row: dict[str, object]) -> Chat:
        chats.append(Chat(provider=ScriptedProvider([reply("ok")])))
        return chats[-1]

    def asked() -> set[str]:
        return {c.transcript[0].content for c in chats}  # type: ignore[union-attr]

    orders = df.drop(columns="rate")
    result = nbagent.batch(orders, make, prompt="Refund order {order} at {price}", progress=False)
    assert list(result["status"]) == ["done", "failed", "done"]
    assert asked() == {"Refund order 41 at 2.5", "Refund order 7 at 4.0"}
    keyed = nbagent.batch(orders.dropna(), make, prompt="{order}", key="order", progress=False)
    assert list(keyed["key"]) == ["41", "7"]
    with pytest.raises(BatchInputError, match=r"^input 1 has no key \(NaN in column 'order'\)"):
        nbagent.batch(orders, make, prompt="{order}", key="order", progress=False)
    chats.clear()
    fractions = nbagent.batch(df.dropna(), make, prompt="{order} at rate {rate}", progress=False)
    assert list(fractions["status"]) == ["done", "done"]
    assert asked() == {"41 at rate 0.5", "7 at rate 2.0"}


def test_a_row_whose_chat_another_process_drives_says_so() -> None:
    """The same batch run twice at once (two kernels, one store): a row whose chat the other
    run drives fails here saying so, not "stopped (cancelled?)"."""

    class DrivenElsewhere(nbagent.Extension):
        def before_step(self) -> Literal["busy"]:
            return "busy"  # what the store's extension says when another process drives

    make = lambda: Chat(provider=ScriptedProvider([reply("x")])).extend(DrivenElsewhere())  # noqa: E731
    result = nbagent.batch(["go"], make, progress=False)
    assert result.loc[0, "status"] == "failed"
    assert result.loc[0, "error_type"] == "DrivenElsewhere"
    assert result.loc[0, "error"].startswith("another process is driving this row's chat")


def test_a_failing_request_is_recorded_and_the_rest_go_on() -> None:
    def make(row: str) -> Chat:
        if row == "fails":
            return Chat(provider=ScriptedProvider([ValueError("the provider broke")]))
        return Chat(
            provider=ScriptedProvider([call_tools(("lookup", {"item": row})), reply("ok")])
        ).with_tools(lookup)

    result = nbagent.batch(["a", "fails", "b"], make, progress=False)
    assert list(result["status"]) == ["done", "failed", "done"]
    assert "the provider broke" in result.loc[1, "error"]
    assert list(result["calls"]) == [1, 0, 1]
    assert len(nbagent.read_log(result)) == 2


def test_on_error_raise_stops_the_batch_with_the_first_error() -> None:
    def make(row: str) -> Chat:
        if row == "bad":
            raise KeyError("no such model")
        return Chat(provider=ScriptedProvider([reply("ok")]))

    with pytest.raises(KeyError, match="no such model"):
        nbagent.batch(["a", "bad", "c"], make, on_error="raise", concurrency=1, progress=False)


def test_a_budget_stop_is_a_failed_row_saying_so() -> None:
    def make() -> Chat:
        script = [call_tools(("lookup", {"item": "x"}))] * 5
        return Chat(provider=ScriptedProvider(script), max_steps=2).with_tools(lookup)

    result = nbagent.batch(["a"], make, progress=False)
    assert result.loc[0, "status"] == "failed"
    assert result.loc[0, "error_type"] == "budget_exhausted"
    assert "took its max_steps=2 steps without an answer" in result.loc[0, "error"]


def test_inputs_that_cannot_be_a_batch_raise_before_anything_runs() -> None:
    make_calls: list[int] = []

    def make() -> Chat:
        make_calls.append(1)
        return Chat("demo")

    with pytest.raises(InputError, match="same key"):
        nbagent.batch(pd.DataFrame({"p": ["a", "b"]}, index=[1, 1]), make, prompt="p")
    with pytest.raises(InputError, match="not a column"):
        nbagent.batch(pd.DataFrame({"p": ["a"]}), make, prompt="p", key="id")
    with pytest.raises(InputError, match="single prompt"):
        nbagent.batch("just one", make)
    with pytest.raises(TypeError, match="make_chat"):
        nbagent.batch(["a"], lambda a, b: Chat("demo"))
    with pytest.raises(ValueError, match="concurrency"):
        nbagent.batch(["a"], make, concurrency=0)
    for wrong in ({"concurrency": True}, {"concurrency": 2.5}, {"poll_interval": "1"},
                  {"poll_interval": float("nan")}, {"max_rate_limit_retries": -1}):  # fmt: skip
        with pytest.raises(ValueError, match=f"{next(iter(wrong))} must be"):
            nbagent.batch(["a"], make, **wrong)
    with pytest.raises(ValueError, match="on_error"):
        nbagent.batch(["a"], make, on_error="ignore")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="progress"):
        nbagent.batch(["a"], make, progress="fancy")
    assert make_calls == []


def test_batch_async_is_the_same_batch_awaited() -> None:
    async def main() -> pd.DataFrame:
        return await nbagent.batch_async(
            ["x", "y"], lambda: Chat(provider=ScriptedProvider([reply("ok")])), progress=False
        )

    result = asyncio.run(main())
    assert list(result["status"]) == ["done", "done"]


def test_a_factory_returning_something_else_fails_its_row() -> None:
    result = nbagent.batch(["a"], lambda: "not a chat", progress=False)
    assert result.loc[0, "status"] == "failed"
    assert "must return an nbagent Chat, got str" in result.loc[0, "error"]


def test_on_error_raise_also_raises_for_a_row_that_cannot_be_formatted() -> None:
    with pytest.raises(InputError, match="needs 'author'"):
        nbagent.batch(
            [{"title": "a"}],
            lambda: Chat(provider=ScriptedProvider([reply("ok")])),
            prompt="{title} by {author}",
            on_error="raise",
            progress=False,
        )


@pytest.mark.parametrize(
    ("settings", "streamed"),
    [({}, False), ({"stream": True}, True), ({"display": True}, True)],
)
def test_a_batch_asks_for_whole_responses_unless_someone_watches_the_fragments(
    settings: dict[str, Any], streamed: bool
) -> None:
    """Nobody sees a batch chat's text arrive, so its requests do not stream (streaming costs
    10-15% CPU); a chat made with stream=True, or shown (display=True), still streams."""
    with FakeLLMServer(handler=Rounds(), strict=True) as server:
        provider = OpenAIProvider("gpt-4.1-mini", base_url=server.openai_base_url, api_key=KEY)
        try:
            result = nbagent.batch(
                ["a", "b"],
                lambda: Chat(provider=provider, **settings).with_tools(lookup),
                progress=False,
            )
        finally:
            run_sync(provider.aclose())
        sent = [bool(r.body.get("stream")) for r in server.requests]
    assert (result["status"] == "done").all()
    assert len(sent) == 2 * (ROUNDS + 1)
    assert set(sent) == {streamed}
