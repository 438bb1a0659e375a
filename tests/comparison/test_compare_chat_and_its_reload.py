"""A stored chat compared with its own copy loaded from the store is one run: its requests
were asked once, so its rows read as shared ("the same in both runs"), never "asked in each";
two chats of one prompt in one store stay "asked in each"."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nbagent import Chat, tool
from nbagent.comparison import Comparison
from nbagent.comparison._runs import run_of
from nbagent.testing import ScriptedProvider, call_tools, reply


@tool
def lookup(order_id: int) -> str:
    """Look an order up.

    Args:
        order_id: The order.
    """
    return f"order {order_id}: paid"


def _answer(request: Any) -> Any:
    done = sum(1 for m in request.messages if getattr(m, "role", "") == "assistant")
    if done < 2:
        return call_tools(("lookup", {"order_id": done}, f"c{done}"))
    return reply("done")


def _chat(store: Path) -> Chat:
    chat = Chat(provider=ScriptedProvider([_answer], repeat_last=True), display=False, store=store)
    chat.with_tools(lookup).ask("q")
    return chat


def _shown(a: Chat, b: Chat) -> dict[str, str]:
    runs = [run_of(a, "a"), run_of(b, "b")]
    for run in runs:  # a scripted answer's latency is noise: the same answers
        for step in run.steps:
            step.values["latency_ms"] = 0
    bundle: dict[str, str] = Comparison(runs)._repr_mimebundle_()
    return bundle


def test_a_chat_and_its_reload_are_one_run(tmp_path: Path) -> None:
    store = tmp_path / "a.db"
    chat = _chat(store)
    loaded = Chat.load(
        chat.id,
        store=store,
        provider=ScriptedProvider([_answer], repeat_last=True),
        tools=[lookup],
        display=False,
    )
    shown = _shown(chat, loaded)
    for mime in ("text/plain", "text/html", "text/markdown"):
        text = shown[mime]
        assert "asked in each" not in text, (mime, text)
        assert "steps 1–3 are the same in both runs" in text, (mime, text)


def test_two_chats_of_one_prompt_in_one_store_are_asked_in_each(tmp_path: Path) -> None:
    store = tmp_path / "a.db"
    shown = _shown(_chat(store), _chat(store))
    for mime in ("text/plain", "text/html", "text/markdown"):
        assert "steps 1–3 are identical in both runs (asked in each)" in shown[mime], mime
