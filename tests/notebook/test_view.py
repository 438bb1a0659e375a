"""Level 1: the notebook view in-process, clicks simulated, no kernel.

The tests look at what a front end draws: the view's widget tree (``view.widget``),
the HTML of its entries and the traits of its cards. A card is driven exactly as
the browser drives it: ``card.click(kind)`` sets the ``action`` trait with a fresh
nonce (what ``approval.js`` does on the first click). Continuations run either in
a worker thread (no kernel loop captured, as in a terminal) or on a stand-in for
the kernel's main loop running in another thread, with the click coming from a
third thread (a subshell).
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import ipywidgets
import pytest
from _tools import get_weather
from _views import widgets_in
from hypothesis import given
from hypothesis import strategies as st

import nbagent
from nbagent import ApprovalDecided, Chat, Tool, ToolCall, ToolCallStarted, tool
from nbagent.notebook import ChatView, review
from nbagent.notebook import _continuation as cont
from nbagent.notebook import _view as view_module
from nbagent.notebook._auto import NotebookExtension
from nbagent.notebook._fallback import bundle_for, chat_mimebundle
from nbagent.notebook._render import fold_point
from nbagent.notebook._state import CallEntry, StepEntry, TextEntry, UserEntry, state_for
from nbagent.notebook._widgets import ActionCard
from nbagent.testing import ScriptedProvider, call_tools, reply

SCRIPT = "<script>alert(1)</script>"


class Counter:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.threads: list[str] = []
        self.lock = threading.Lock()

    def hit(self, **kwargs: Any) -> None:
        with self.lock:
            self.calls.append(kwargs)
            self.threads.append(threading.current_thread().name)


@pytest.fixture
def counter() -> Counter:
    return Counter()


def make_chat(counter: Counter, **chat_kwargs: Any) -> Chat:
    class IssueRefund(Tool):
        """Issues a refund for an order."""

        requires_approval = True

        def execute(self, order_id: int) -> str:
            counter.hit(order_id=order_id)
            return f"refunded order {order_id}"

    return Chat(model="demo", **chat_kwargs).with_tools(IssueRefund, get_weather)


def html_values(view: ChatView) -> list[str]:
    """The HTML the view shows: every ``ipywidgets.HTML`` (style, entries, status line)
    and every gated call's card (an ``ActionCard`` whose ``value`` is the call's HTML)."""
    return [
        w.value
        for w in widgets_in(view)
        if isinstance(w, ipywidgets.HTML) or (isinstance(w, ActionCard) and w.value)
    ]


def is_entry(w: Any) -> bool:
    """Whether ``w`` is the widget of one of the view's entries."""
    return isinstance(w, (ipywidgets.HTML, ActionCard)) and w.value.startswith(
        ('<div class="nba-entry', '<details class="nba-entry')
    )


def entry_widgets(view: ChatView) -> list[Any]:
    """The live widgets of the view's entries (older pages fold behind "Show earlier")."""
    return [w for w in widgets_in(view) if is_entry(w)]


def call_html(view: ChatView, call: ToolCall) -> str:
    """The HTML of ``call``'s card."""
    (html,) = [h for h in html_values(view) if f'data-call-id="{call.id}"' in h]
    return html


def status_line(view: ChatView) -> str:
    (html,) = [h for h in html_values(view) if 'class="nba-status"' in h]
    return html


def card_for(view: ChatView, call: ToolCall) -> ActionCard:
    """The approval card the view shows under ``call``."""
    (card,) = [
        w
        for w in widgets_in(view)
        if isinstance(w, ActionCard) and w.kind == "approval" and w.call_id == call.id
    ]
    return card


def budget_cards(view: ChatView) -> list[ActionCard]:
    return [w for w in widgets_in(view) if isinstance(w, ActionCard) and w.kind == "budget"]


def all_html(view: ChatView) -> str:
    return "\n".join([*html_values(view), view._repr_mimebundle_()["text/html"]])


# --------------------------------------------------------------------------- approve
def test_approve_click_runs_the_tool_once(counter: Counter) -> None:
    chat = make_chat(counter)
    view = ChatView(chat)
    chat.ask("Refund order 42")
    assert chat.status == "awaiting_approval"
    call = chat.pending_approvals[0]
    card = card_for(view, call)
    assert (card.kind, card.state, card.tool) == ("approval", "pending", "issue_refund")
    assert '"order_id": 42' in card.arguments
    # One card per call: the tool's name once, and no reason that repeats the badge.
    assert card.value.count("issue_refund") == 1 and "needs approval" in card.value
    assert card.reason == "" and "requires approval" not in card.value
    assert 'class="nba-controls"' in card.value  # where the buttons go

    card.click("approve")
    assert view.continuation.wait(10)
    assert counter.calls == [{"order_id": 42}]
    assert card.state == "approved"
    assert "nba-st-ok" in card.value and "nba-controls" not in card.value  # the call's card
    assert chat.status == "complete"
    assert "refunded order 42" in chat.last_assistant_message.content
    html = call_html(view, call)
    assert "nba-st-ok" in html and "approved by you" in html
    # Ran on a worker, not the clicker's thread, the kernel's loop (a later cell driving the
    # chat waits for it there: tests/notebook/test_continuation.py) nor nbagent's shared loop,
    # where the continuation itself runs (a sync tool never blocks it).
    (ran_on,) = counter.threads
    assert ran_on not in (threading.main_thread().name, "kernel-main", "nbagent-loop")
    status = status_line(view)
    assert "complete" in status and "1 tool call" in status


def test_double_click_runs_once(counter: Counter) -> None:
    chat = make_chat(counter)
    view = ChatView(chat)
    chat.ask("Refund order 7")
    card = card_for(view, chat.pending_approvals[0])
    card.click("approve")
    card.click("approve")  # the browser disables the buttons; the kernel ignores it anyway
    card.click("deny")
    assert view.continuation.wait(10)
    assert counter.calls == [{"order_id": 7}]
    assert card.state == "approved"


def test_concurrent_clicks_from_subshell_threads(counter: Counter) -> None:
    chat = make_chat(counter)
    view = ChatView(chat)
    chat.ask("Refund order 9")
    card = card_for(view, chat.pending_approvals[0])
    barrier = threading.Barrier(4)

    def click() -> None:
        barrier.wait()
        card.click("approve")

    threads = [threading.Thread(target=click, name=f"subshell-{i}") for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert view.continuation.wait(10)
    assert counter.calls == [{"order_id": 9}]
    assert chat.status == "complete"


# ------------------------------------------------------------------------------ deny
def test_deny_click_sends_the_denial(counter: Counter) -> None:
    chat = make_chat(counter)
    view = ChatView(chat)
    chat.ask("Refund order 42")
    call = chat.pending_approvals[0]
    card_for(view, call).click("deny", reason="not this one")
    assert view.continuation.wait(10)
    assert counter.calls == []
    assert call.status == "denied"
    assert card_for(view, call).state == "denied"
    text = chat.last_assistant_message.content
    assert "was not run" in text and "not this one" in text
    html = call_html(view, call)
    assert "denied by you: not this one" in html


# ------------------------------------------------------------------------------ edit
def test_edit_arguments_valid(counter: Counter) -> None:
    chat = make_chat(counter)
    view = ChatView(chat)
    chat.ask("Refund order 42")
    call = chat.pending_approvals[0]
    card_for(view, call).click("edit", arguments='{"order_id": 43}')
    assert view.continuation.wait(10)
    assert counter.calls == [{"order_id": 43}]
    assert call.decision is not None and call.decision.arguments == {"order_id": 43}
    html = call_html(view, call)
    assert "run with edited arguments" in html and "43" in html  # the edited tag's title


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
        ('{"order_id": "forty-two"}', "invalid"),
        ('{"order_id": 1, "extra": true}', "invalid"),
    ],
)
def test_edit_arguments_invalid_shows_an_error_and_does_not_approve(
    counter: Counter, text: str, message: str
) -> None:
    chat = make_chat(counter)
    view = ChatView(chat)
    chat.ask("Refund order 42")
    call = chat.pending_approvals[0]
    card = card_for(view, call)
    card.click("edit", arguments=text)
    assert view.continuation.wait(10)
    assert message in card.error
    assert card.state == "pending"  # buttons come back
    assert call.status == "awaiting_approval" and call.decision is None
    assert counter.calls == []
    card.click("edit", arguments='{"order_id": 5}')  # a corrected edit is accepted
    assert view.continuation.wait(10)
    assert card.error == ""
    assert counter.calls == [{"order_id": 5}]


# ----------------------------------------------------------------------- always allow
def test_always_allow_approves_pending_and_future_calls(counter: Counter) -> None:
    chat = make_chat(counter)
    view = ChatView(chat)
    chat.ask("Refund order 1 and refund order 2")
    first, second = chat.pending_approvals
    card_for(view, second).click("always")
    assert view.continuation.wait(10)
    assert sorted(c["order_id"] for c in counter.calls) == [1, 2]
    for call in (first, second):
        assert call.decision is not None and call.decision.by == "policy:always_allow:issue_refund"
        assert card_for(view, call).state == "approved"
    chat.ask("Refund order 3")  # a later call of the tool needs no click
    assert chat.status == "complete"
    assert [c["order_id"] for c in counter.calls][-1] == 3
    assert "approved: always allowed" in call_html(view, chat.tool_calls[-1])


def test_several_gated_calls_decided_in_any_order(counter: Counter) -> None:
    chat = make_chat(counter)
    view = ChatView(chat)
    chat.ask("Refund order 1 and refund order 2")
    first, second = chat.pending_approvals
    card_for(view, second).click("approve")
    assert view.continuation.wait(10)
    assert counter.calls == [{"order_id": 2}]  # runs at once; the other card still waits
    assert card_for(view, first).state == "pending"
    assert chat.status == "awaiting_approval"
    card_for(view, first).click("deny")
    assert view.continuation.wait(10)
    assert counter.calls == [{"order_id": 2}]
    assert chat.status == "complete"
    assert "was not run" in chat.last_assistant_message.content


# ---------------------------------------------------------------------- decisions in code
def test_a_card_says_who_decided_a_click_by_you_a_cell_in_code(counter: Counter) -> None:
    """U9 (issue 25): a decision made by ``chat.approve``/``deny`` in a cell reads "decided in
    code"; only a click on the card (or an answer at ``review()``) reads "by you"; a fork made
    with a decision says its decision was code's too."""
    chat = make_chat(counter)
    view = ChatView(chat)
    chat.ask("Refund order 1 and refund order 2")
    first, second = chat.pending_approvals
    card_for(view, first).click("approve")
    chat.deny(second, reason="no")
    assert view.continuation.wait(10)
    clicked, coded = call_html(view, first), call_html(view, second)
    assert "approved by you" in clicked and "decided in code" not in clicked
    assert "denied, decided in code: no" in coded and "by you" not in coded
    plain = bundle_for(state_for(chat))["text/plain"]
    assert "approved by you" in plain and "denied, decided in code: no" in plain

    fork = chat.fork(second, decision="approved")
    fork_plain = chat_mimebundle(fork)["text/plain"]
    assert "approved, decided in code" in fork_plain  # chat.fork(call, decision=...) is code
    assert "approved by you" in fork_plain  # the click it shares with its parent


def test_a_fork_takes_only_the_clicks_it_shares(counter: Counter) -> None:
    """A fork made while a call waited in both, then a click on the parent's card, then the
    fork's own decision in code: the fork's card said "approved by you" (it took every
    click its parent had when it was first shown); it takes only the decisions it shares."""
    chat = make_chat(counter)
    view = ChatView(chat)
    chat.ask("Refund order 1")
    card_for(view, chat.pending_approvals[0]).click("approve")  # before the fork: shared
    assert view.continuation.wait(10)
    chat.ask("Refund order 2")
    (waiting,) = chat.pending_approvals
    fork = chat.fork()  # the call waits in both
    card_for(view, waiting).click("approve")  # after it: the parent's only
    assert view.continuation.wait(10)
    fork.approve(waiting.id)
    plain = chat_mimebundle(fork)["text/plain"]
    assert plain.count("approved by you") == 1, plain  # the shared click, on order 1


def test_a_decision_no_view_saw_does_not_claim_a_click(counter: Counter) -> None:
    """A decision made in code before anything here watched the chat (a script, a chat shown
    later, a loaded one) read "approved by you", the words for a click: nothing saw who
    made it, so the card says the verdict only."""
    chat = make_chat(counter)
    chat.ask("Refund order 1 and refund order 2")
    first, second = chat.pending_approvals
    chat.approve(first)
    chat.deny(second, reason="no")
    chat.complete()
    plain = chat_mimebundle(chat)["text/plain"]
    assert "by you" not in plain and "decided in code" not in plain
    assert "    approved\n" in plain and "    denied: no\n" in plain
    fork = chat.fork(step=2)
    assert "by you" not in chat_mimebundle(fork)["text/plain"]


def test_decisions_in_code_update_the_cards(counter: Counter) -> None:
    chat = make_chat(counter)
    view = ChatView(chat)
    chat.ask("Refund order 1 and refund order 2")
    first, second = chat.pending_approvals
    chat.approve(first)
    assert card_for(view, first).state == "approved"
    assert "approved, decided in code" in call_html(view, first)  # no click: not "by you"
    chat.deny(second, reason="no")
    assert card_for(view, second).state == "denied"
    chat.complete()
    assert counter.calls == [{"order_id": 1}]
    assert "nba-st-ok" in call_html(view, first)
    # A click on a card decided in code does nothing.
    card_for(view, second).click("approve")
    assert view.continuation.wait(10)
    assert counter.calls == [{"order_id": 1}]


# ------------------------------------------------------------------------------ budget
def test_continue_after_budget_exhausted(counter: Counter) -> None:
    chat = make_chat(counter, max_steps=1)
    view = ChatView(chat)
    chat.ask("What's the weather in Paris?")
    assert chat.status == "budget_exhausted"  # the model asked for a tool: step 1 of 1
    assert chat.record.steps_taken() == 1 and "1 step ·" in view._status.value
    (card,) = budget_cards(view)
    # The chat's budget again, plus the round of tool calls already due: one click
    # reaches the model's next answer (or a decision), whatever the budget.
    assert (card.kind, card.state, card.steps) == ("budget", "pending", 2)
    assert card.increment == "+2 steps"
    card.click("continue")
    assert view.continuation.wait(10)
    assert chat.status == "complete"
    assert "sunny in Paris" in chat.last_assistant_message.content
    assert card.state == "continued" and card.summary == "Continued (+2 steps)."
    assert len(budget_cards(view)) == 1  # no second card: one click was enough
    # "step" means one thing: the status line counts what max_steps counts.
    assert chat.record.steps_taken() == 3 and "3 steps ·" in view._status.value


def test_continue_grants_the_budget_when_a_request_is_next(counter: Counter) -> None:
    chat = make_chat(counter, max_steps=2)
    view = ChatView(chat)
    chat.ask("What's the weather in Paris?")  # the request, the tool round: 2 of 2
    assert chat.status == "budget_exhausted" and "2 steps ·" in view._status.value
    (card,) = budget_cards(view)
    assert (card.steps, card.increment) == (2, "+2 steps")  # nothing due: the budget
    card.click("continue")
    assert view.continuation.wait(10)
    assert chat.status == "complete" and "3 steps ·" in view._status.value


def test_stop_after_budget_exhausted(counter: Counter) -> None:
    chat = make_chat(counter, max_steps=1)
    view = ChatView(chat)
    chat.ask("What's the weather in Paris?")
    (card,) = budget_cards(view)
    card.click("stop")
    assert view.continuation.wait(10)
    assert card.state == "stopped"
    assert chat.status == "budget_exhausted"
    assert "stopped" in all_html(view)


# ----------------------------------------------------------------------------- errors
def test_continuation_errors_are_shown_in_the_view() -> None:
    class Explode(Tool):
        """Explodes a thing."""

        requires_approval = True

        def execute(self, thing: str) -> str:
            raise RuntimeError("kaboom")

    chat = Chat(model="demo", on_tool_error="raise").with_tools(Explode)
    view = ChatView(chat)
    chat.ask("Explode the thing")
    card_for(view, chat.pending_approvals[0]).click("approve")
    assert view.continuation.wait(10)
    assert isinstance(view.continuation.last_error, nbagent.ToolExecutionError)
    html = all_html(view)
    assert "Continuing after your decision failed" in html and "kaboom" in html
    assert "error" in status_line(view)


# --------------------------------------------------------------------------- escaping
def test_everything_is_escaped(counter: Counter) -> None:
    class Evil(Tool):
        """Returns evil markup for a name."""

        requires_approval = True

        def execute(self, name: str) -> str:
            return f"{SCRIPT} <img src=x onerror=alert(2)> {name}"

    chat = Chat(model="demo").with_tools(Evil)
    view = ChatView(chat)
    turn_view = None
    chat.ask('Return evil markup for "<b onmouseover=alert(3)>x</b>"')
    turn_view = ChatView(chat, turn=1)
    chat.approve(chat.pending_approvals[0])
    chat.complete()
    assert SCRIPT in chat.last_assistant_message.content  # the model did echo it
    html_strings = [
        *html_values(view),
        *html_values(turn_view),
        view._repr_mimebundle_()["text/html"],
        chat_mimebundle(chat)["text/html"],
    ]
    for text in html_strings:
        assert "<script>" not in text
        assert "<img" not in text
        assert "<b onmouseover" not in text
    joined = "\n".join(html_strings)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in joined
    markdown = chat_mimebundle(chat)["text/markdown"]
    # In markdown, model text is HTML-escaped; tool output sits in code fences.
    outside_fences = re.sub(r"(`{3,})[^\n]*\n.*?\n\1", "", markdown, flags=re.S)
    assert "<script>" not in outside_fences and "<img" not in outside_fences


def test_mimebundles_have_the_three_types(counter: Counter) -> None:
    chat = make_chat(counter)
    chat.ask("What's the weather in Oslo?")
    bundle = chat._repr_mimebundle_()
    assert {"text/html", "text/markdown", "text/plain"} <= set(bundle)
    assert "sunny in Oslo" in bundle["text/plain"] and "sunny in Oslo" in bundle["text/html"]
    assert bundle["text/plain"].startswith("Chat(")
    view = ChatView(chat)
    vb = view._repr_mimebundle_()
    assert {
        "text/html",
        "text/markdown",
        "text/plain",
        "application/vnd.jupyter.widget-view+json",
    } <= set(vb)
    assert vb["application/vnd.jupyter.widget-view+json"]["model_id"] == view.widget.model_id


# ----------------------------------------------------------------- incremental updates
def test_an_event_updates_only_the_entries_it_touches(counter: Counter) -> None:
    chat = make_chat(counter)
    view = ChatView(chat)
    chat.ask("What's the weather in Paris and in Tokyo?")
    rerendered: list[str] = []
    old = entry_widgets(view)
    for html in old:
        html.observe(lambda change: rerendered.append(change["new"]), names="value")
    chat.ask("Refund order 5")
    assert len(old) >= 6
    assert rerendered == []  # nothing of turn 1 was re-rendered
    new = [w for w in entry_widgets(view) if w not in old]
    assert len(new) == 4  # the user message, the step, the demo's note, the gated call


def test_long_chats_keep_few_live_widgets_and_fold_whole_turns(counter: Counter) -> None:
    chat = make_chat(counter)
    view = ChatView(chat, page_size=5, live_pages=2)
    for i in range(12):
        chat.ask(f"What's the weather in City{i}?")
    # user, step, the demo's note on its guesses, call, step, text per turn
    assert len(view.state.entries) == 12 * 6
    live = entry_widgets(view)
    # A page ends only where a turn ends: two live pages are two whole turns, the
    # first live entry is a user message (never the middle of a turn).
    assert len(live) == 12 and 'class="nba-entry nba-user' in live[0].value
    (more,) = [w for w in widgets_in(view) if isinstance(w, ipywidgets.Button)]
    assert more.description == "Show earlier (60 more entries)" and more.layout.display is None
    more.click()
    live = entry_widgets(view)
    assert len(live) == 18 and 'class="nba-entry nba-user' in live[0].value
    # a fresh view of the long chat also starts folded, on a turn's start
    fresh = entry_widgets(ChatView(chat, page_size=5, live_pages=2))
    assert len(fresh) == 12 and 'class="nba-entry nba-user' in fresh[0].value
    # The static form folds on a turn's start too (it keeps the last 40 entries at least:
    # 42, the last seven turns, and folds the five before).
    assert "5 earlier turns</summary>" in chat_mimebundle(chat)["text/html"]


def live_pages(view: ChatView) -> list[list[str]]:
    """The HTML of each live page's entries, as the front end draws them: the boxes of
    the widget tree whose children are all entries."""
    return [
        [c.value for c in w.children]
        for w in widgets_in(view)
        if isinstance(w, ipywidgets.VBox) and w.children and all(map(is_entry, w.children))
    ]


@pytest.mark.parametrize("per_step", [1, 30])
def test_one_long_turn_folds_where_steps_begin_and_pages_stay_bounded(per_step: int) -> None:
    """One ``ask`` running 40 model steps of one call each, or 2 steps of 30 calls: the
    whole chat's view still folds older pages behind "Show earlier", at a step's start
    when there is one, and no page outgrows its cap (so a new card costs the same at the
    1,000th call as at the 10th: ``make bench``, ``bench_view``)."""

    @tool
    def lookup(key: str) -> str:
        """Look a key up.

        Args:
            key: The key.
        """
        return f"{key}: found"

    steps = 40 if per_step == 1 else 2
    script = [
        call_tools(*[("lookup", {"key": f"k{s}-{i}"}) for i in range(per_step)])
        for s in range(steps)
    ]
    chat = Chat(provider=ScriptedProvider([*script, reply("done")]), max_steps=1000)
    chat.with_tools(lookup)
    view = ChatView(chat, page_size=5, live_pages=2)
    chat.ask("Look them all up")
    assert len(chat.tool_calls) == steps * per_step
    cap = view_module.PAGE_CAP * 5
    for v in (view, ChatView(chat, page_size=5, live_pages=2)):  # followed live, then built
        pages = live_pages(v)
        assert len(pages) == 2 and all(5 <= len(p) <= cap for p in pages[:-1])
        assert len(pages[-1]) <= cap
        if per_step == 1:  # pages begin where a step does: no step is cut in two
            assert all(p[0].startswith('<div class="nba-entry nba-step') for p in pages)
        (more,) = [w for w in widgets_in(v) if isinstance(w, ipywidgets.Button)]
        assert more.layout.display is None and "Show earlier" in more.description
    assert live_pages(view) == live_pages(ChatView(chat, page_size=5, live_pages=2))


def test_turn_views_follow_their_turn_then_freeze(counter: Counter) -> None:
    chat = make_chat(counter, max_steps=2)
    chat.ask("What's the weather in Paris?")  # budget runs out before the answer
    assert chat.status == "budget_exhausted"
    first = ChatView(chat, turn=1)
    (card,) = budget_cards(first)
    chat.ask("What's the weather in Rome?")
    assert first.frozen and card.state == "closed"
    assert all("Rome" not in h for h in html_values(first))
    second = ChatView(chat, turn=2)
    assert any("Rome" in h for h in html_values(second))


def test_streamed_text_ends_complete(counter: Counter) -> None:
    chat = make_chat(counter)
    chat.provider.chunk_words = 1  # type: ignore[attr-defined]
    view = ChatView(chat)
    chat.ask("What's the weather in Paris and in Tokyo?")
    texts = [h for h in html_values(view) if h.startswith('<div class="nba-entry nba-text')]
    assert texts
    final = chat.last_assistant_message.content
    assert final.split("\n")[0].removeprefix("- ") in texts[-1]  # a list item, rendered
    assert "nba-streaming" not in texts[-1]


def test_display_state_is_rebuilt_for_a_chat_with_history(counter: Counter) -> None:
    chat = make_chat(counter)
    chat.ask("What's the weather in Paris?")
    chat.ask("Refund order 3")
    view = ChatView(chat)  # no subscriber before: rebuilt from the transcript and the calls
    kinds = [e.kind for e in view.state.entries]
    assert kinds.count("user") == 2 and kinds.count("call") == 2
    card = card_for(view, chat.pending_approvals[0])
    assert card.state == "pending"
    card.click("approve")
    assert view.continuation.wait(10)
    assert counter.calls == [{"order_id": 3}]


# ------------------------------------------------------------------------- terminal
def test_review_prompts_per_call(counter: Counter) -> None:
    chat = make_chat(counter)
    chat.ask("Refund order 1 and refund order 2 and refund order 3")
    answers = iter(["x", "a", "d", "because", "e", "{bad", "e", '{"order_id": 30}'])
    printed: list[str] = []
    reply = review(
        chat,
        input=lambda _prompt: next(answers),
        print=lambda *a, **_k: printed.append(" ".join(map(str, a))),
    )
    assert counter.calls == [{"order_id": 1}, {"order_id": 30}]
    assert chat.status == "complete"
    assert reply is chat.last_assistant_message
    out = "\n".join(printed)
    assert "please answer one of" in out and "not valid JSON" in out
    assert "because" in chat.last_assistant_message.content


def test_review_skip_leaves_calls_pending(counter: Counter) -> None:
    chat = make_chat(counter)
    chat.ask("Refund order 1")
    review(chat, input=lambda _p: "s", print=lambda *a, **k: None)
    assert chat.status == "awaiting_approval" and counter.calls == []


# ------------------------------------------------------------------- ask_async waits
@pytest.fixture
def waiting_kernel(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Pretend to be ipykernel >= 7.4 (a click can reach an awaiting cell)."""
    monkeypatch.setattr(cont, "kernel_can_wait", lambda: True)
    yield


def _install_waiter(chat: Chat) -> None:
    chat.extend(NotebookExtension())


def test_ask_async_waits_for_the_click(counter: Counter, waiting_kernel: None) -> None:
    nbagent.configure(approval_wait=10)
    chat = make_chat(counter)
    _install_waiter(chat)
    clicked: list[str] = []

    async def main() -> Any:
        view = ChatView(chat)
        view.continuation.note_rendered()  # a front end drew the card

        def click_later() -> None:
            # A person clicks a card that is drawn: the call is pending before its
            # event reaches the view.
            while not chat.pending_approvals or not [
                w for w in widgets_in(view) if isinstance(w, ActionCard)
            ]:
                threading.Event().wait(0.01)
            clicked.append(threading.current_thread().name)
            card_for(view, chat.pending_approvals[0]).click("approve")

        threading.Thread(target=click_later, name="subshell").start()
        return await chat.ask_async("Refund order 11")

    reply = asyncio.run(main())
    assert clicked == ["subshell"]
    assert counter.calls == [{"order_id": 11}]
    assert chat.status == "complete" and "refunded order 11" in reply.content


@pytest.mark.parametrize(
    ("fallback", "status"), [("park", "awaiting_approval"), ("deny", "complete")]
)
def test_ask_async_fallback_when_nobody_clicks(
    counter: Counter,
    waiting_kernel: None,
    monkeypatch: pytest.MonkeyPatch,
    fallback: str,
    status: str,
) -> None:
    nbagent.configure(approval_wait=300, approval_fallback=fallback)
    monkeypatch.setattr(cont, "RENDER_GRACE", 0.2)  # no front end drew the card: unattended
    chat = make_chat(counter)
    _install_waiter(chat)

    async def main() -> Any:
        ChatView(chat)
        return await chat.ask_async("Refund order 12")

    asyncio.run(main())
    assert chat.status == status and counter.calls == []
    if fallback == "deny":
        assert "not approved" in chat.last_assistant_message.content


def test_ask_async_does_not_wait_where_the_kernel_cannot(counter: Counter) -> None:
    chat = make_chat(counter)
    _install_waiter(chat)  # outside a kernel: kernel_can_wait() is False
    asyncio.run(chat.ask_async("Refund order 13"))
    assert chat.status == "awaiting_approval"


def test_a_click_during_a_finished_wait_still_continues(counter: Counter) -> None:
    chat = make_chat(counter)
    chat.ask("Refund order 14")
    c = cont.continuation_for(chat)
    c.begin_wait()
    chat.approve(chat.pending_approvals[0])
    c.request()  # the waiter is about to give up: the request is parked...
    c.end_wait(consumed=False)  # ...and started when it does
    assert c.wait(10)
    assert counter.calls == [{"order_id": 14}]


# ------------------------------------------------------------------------ auto display
def test_import_nbagent_imports_no_widgets() -> None:
    code = (
        "import sys, nbagent; c = nbagent.Chat(model='demo'); "
        "from nbagent.notebook import review; "
        "assert 'ipywidgets' not in sys.modules and 'anywidget' not in sys.modules, 'widgets'; "
        "assert [type(e).__name__ for e in c.extensions] == []; "
        "from nbagent.notebook import ChatView, show; import nbagent.notebook._view as v; "
        "assert (ChatView, show) == (v.ChatView, v.show) and 'ipywidgets' in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_state_is_shared_by_views(counter: Counter) -> None:
    chat = make_chat(counter)
    a, b = ChatView(chat), ChatView(chat)
    assert a.state is b.state is state_for(chat)
    chat.ask("Refund order 15")
    call = chat.pending_approvals[0]
    card_for(a, call).click("approve")
    assert a.continuation.wait(10)
    assert card_for(b, call).state == "approved"
    card_for(b, call).click("approve")  # the other view's card is decided too
    assert b.continuation.wait(10)
    assert counter.calls == [{"order_id": 15}]
    assert bundle_for(a.state)["text/html"] == bundle_for(b.state)["text/html"]


def test_approval_decided_event_reaches_the_view_once(counter: Counter) -> None:
    chat = make_chat(counter)
    view = ChatView(chat)
    seen: list[str] = []
    chat.on(ApprovalDecided, lambda e: seen.append(e.call.id))
    chat.on(ToolCallStarted, lambda e: seen.append("started"))
    chat.ask("Refund order 16")
    card_for(view, chat.pending_approvals[0]).click("approve")
    assert view.continuation.wait(10)
    assert seen == [chat.tool_calls[0].id, "started"]


def test_a_click_while_ask_async_returns_is_not_lost(
    counter: Counter, waiting_kernel: None
) -> None:
    """The click lands after the loop parked but before ask_async looked: the turn still ends."""
    chat = make_chat(counter)
    _install_waiter(chat)

    async def main() -> Any:
        view = ChatView(chat)

        def click_on_park(event: Any) -> None:
            if event.kind == "awaiting_approval" and chat.pending_approvals:
                card_for(view, chat.pending_approvals[0]).click("approve")

        chat.on("step_finished", click_on_park)
        return await chat.ask_async("Refund order 17")

    reply = asyncio.run(main())
    assert counter.calls == [{"order_id": 17}]
    assert chat.status == "complete" and "refunded order 17" in reply.content


def test_a_continuation_waits_for_another_driver_then_runs(counter: Counter) -> None:
    """Another driver is at work when the click's continuation starts: it waits, then runs."""
    chat = make_chat(counter)
    view = ChatView(chat)
    chat.ask("Refund order 18")
    inside, leave = threading.Event(), threading.Event()

    class Hold(nbagent.Extension):  # someone else drives: a step held open at its start
        def before_step(self) -> None:
            if threading.current_thread().name == "other":
                inside.set()
                assert leave.wait(10)

    chat.extend(Hold())
    other = threading.Thread(target=chat.step, name="other")
    other.start()
    assert inside.wait(10)
    try:
        card_for(view, chat.pending_approvals[0]).click("approve")
        while not chat._drive.waiting:  # the continuation waits for its turn
            inside.wait(0.001)
        assert counter.calls == []
    finally:
        leave.set()
        other.join(10)
    assert view.continuation.wait(10)
    assert counter.calls == [{"order_id": 18}] and chat.status == "complete"


# ------------------------------------------------------------------------------ folding
_KINDS = st.sampled_from(["user", "step", "text", "call"])


@given(
    turns=st.lists(st.lists(_KINDS, min_size=1, max_size=8), min_size=1, max_size=12),
    keep=st.integers(1, 30),
)
def test_static_views_fold_only_on_a_turn_or_step_start(turns: list[list[str]], keep: int) -> None:
    """The saved form's fold: at least ``keep`` entries shown; at the start of the turn the
    cut would fall in, unless more than twice ``keep`` would show from there (a long last
    turn, or one turn): then where a model step starts inside it, as the live pages end."""
    kinds = {"user": UserEntry, "step": StepEntry, "text": TextEntry, "call": CallEntry}
    entries = [
        kinds["user" if j == 0 else kind](f"{t}-{j}", t + 1)
        for t, turn in enumerate(turns)
        for j, kind in enumerate(turn)
    ]
    cut = fold_point(entries, keep)
    last = len(entries) - keep

    def turn_start(i: int) -> bool:
        return entries[i].turn != entries[i - 1].turn

    def step_start(i: int) -> bool:
        return isinstance(entries[i], StepEntry)

    assert cut == 0 or cut <= last  # at least `keep` entries stay shown
    assert not any(turn_start(i) for i in range(cut + 1, last + 1))  # the latest turn start
    if cut:
        assert turn_start(cut) or step_start(cut)
        if turn_start(cut) and len(entries) - cut > 2 * keep:  # a long last turn shown whole
            assert not any(step_start(i) for i in range(cut + 1, last + 1))  # only if no step
        if not turn_start(cut):  # a step inside the turn: the latest one
            assert not any(step_start(i) for i in range(cut + 1, last + 1))
            turn_cut = max((i for i in range(1, last + 1) if turn_start(i)), default=0)
            assert turn_cut == 0 or len(entries) - turn_cut > 2 * keep  # 0: one turn
    else:  # nothing folds only when it all fits, or no start leaves `keep` shown
        assert len(entries) <= keep or not any(
            turn_start(i) or step_start(i) for i in range(1, last + 1)
        )


def test_a_saved_chat_folds_inside_a_long_last_turn() -> None:
    """A chat of several turns whose last turn is long: the saved form folds inside that
    turn at a model step (it showed the whole turn), as the live view does."""
    entries = [UserEntry("1-0", 1), StepEntry("1-1", 1), TextEntry("1-2", 1)]
    entries.append(UserEntry("2-0", 2))
    for n in range(40):
        entries += [StepEntry(f"2-s{n}", 2), CallEntry(f"2-c{n}", 2)]
    cut = fold_point(entries, 10)
    assert isinstance(entries[cut], StepEntry) and entries[cut].turn == 2
    assert 10 <= len(entries) - cut <= 20  # bounded, not the whole turn
    assert fold_point(entries[:13], 10) == 3  # a short last turn: folds where it starts
