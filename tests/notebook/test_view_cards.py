"""Issue 14, items 2, 3, 8 and 9, in-process: the cards and what they show.

A chat driven by ``nbagent.testing.ScriptedProvider``, its ``ChatView`` built
with no kernel; the tests read what a front end would draw (the HTML of the
view's widgets and of its static bundle) and click cards as the browser does
(``card.click``). tests/browser/test_cards.py clicks the same cards in Chromium.
"""

from __future__ import annotations

import re
import threading
from html.parser import HTMLParser
from typing import Any

import ipywidgets
import pandas as pd
import pytest
from _views import widgets_in

from nbagent import Chat, Tool, ToolCall, tool
from nbagent._display import flush_dirty
from nbagent.notebook import ChatView
from nbagent.notebook import _continuation as cont
from nbagent.notebook._fallback import bundle_for, chat_mimebundle
from nbagent.notebook._rich import sanitize_table_html
from nbagent.notebook._state import state_for
from nbagent.notebook._widgets import ActionCard
from nbagent.testing import ScriptedProvider, call_tools, reply


class Ledger:
    """What the tools did, in order (thread-safe)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.lock = threading.Lock()

    def hit(self, name: str, **kwargs: Any) -> None:
        with self.lock:
            self.calls.append((name, kwargs))


def tools(ledger: Ledger) -> list[Any]:
    class IssueRefund(Tool):
        """Issues a refund for an order."""

        requires_approval = True

        def execute(self, order_id: int, amount: float = 20.0, currency: str = "EUR") -> str:
            ledger.hit("issue_refund", order_id=order_id, amount=amount)
            return f"refunded {amount} {currency} on order {order_id}"

    class SendEmail(Tool):
        """Sends an email."""

        requires_approval = True

        def execute(self, to: str, subject: str, body: str) -> str:
            ledger.hit("send_email", to=to, body=body)
            return "sent"

    @tool
    def get_weather(city: str) -> str:
        """Get the weather."""
        return f"sunny in {city}"

    return [IssueRefund, SendEmail, get_weather]


def scripted(ledger: Ledger, *script: Any, **chat_kwargs: Any) -> Chat:
    chat = Chat(provider=ScriptedProvider(list(script)), display=False, **chat_kwargs)
    return chat.with_tools(*tools(ledger))


def cards(view: ChatView, kind: str = "approval") -> list[ActionCard]:
    return [w for w in widgets_in(view) if isinstance(w, ActionCard) and w.kind == kind]


def card_for(view: ChatView, call_id: str) -> ActionCard:
    (card,) = [c for c in cards(view) if c.call_id == call_id]
    return card


def view_html(view: ChatView) -> str:
    """Everything the live view shows as HTML (entries, cards, status line)."""
    return "".join(
        w.value for w in widgets_in(view) if isinstance(w, (ipywidgets.HTML, ActionCard))
    )


def static_html(chat: Chat) -> str:
    return chat_mimebundle(chat)["text/html"]


class Tree(HTMLParser):
    """Start tags with their attributes, and the text inside each ``class`` of interest."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def names(self) -> list[str]:
        return [t for t, _ in self.tags]


def done(chat: Chat) -> None:
    assert cont.continuation_for(chat).wait(10)


# ------------------------------------------------------------------------ 2: Markdown
ANSWER = (
    "**Done.** Refunded _both_:\n\n| order | amount |\n|---|---:|\n| 1 | 20 |\n\n"
    "```python\nprint('<b>hi</b>')\n```\n\n- one\n- two\n\n"
    "[docs](https://example.org/docs) [bad](javascript:alert(1)) [worse](JAVASCRIPT:alert(2)) "
    "[data](data:text/html,<script>alert(3)</script>) [vb](vbscript:msgbox) "
    "<script>alert(4)</script> <img src=x onerror=alert(5)> ![pixel](https://evil.example/p.png)"
)


def test_the_answer_is_rendered_markdown_in_the_view_and_the_static_html() -> None:
    chat = scripted(Ledger(), reply(ANSWER))
    view = ChatView(chat)
    chat.ask("Refund them")
    for where, html in {"live": view_html(view), "static": static_html(chat)}.items():
        tree = Tree(html)
        names = tree.names()
        for tag in ("strong", "em", "table", "th", "td", "pre", "code", "ul", "li"):
            assert tag in names, (where, tag)
        links = [a for t, a in tree.tags if t == "a"]
        # Only the https links are links (in a new tab, without an opener); none of
        # javascript:, data:, vbscript: is, and the image is a link, never fetched.
        hrefs = [a["href"] for a in links]
        assert hrefs == ["https://example.org/docs", "https://evil.example/p.png"], where
        for a in links:
            assert a["target"] == "_blank" and "noopener" in (a["rel"] or "")
        assert "script" not in names and "img" not in names, where
        text = "".join(tree.text)
        assert "<script>alert(4)</script>" in text and "<img src=x onerror=alert(5)>" in text
        assert "[bad](javascript:alert(1))" in text
        assert "print('<b>hi</b>')" in text  # code stays code, escaped
        assert "**" not in text, where  # no raw Markdown left


def test_streamed_text_is_plain_until_its_step_settles() -> None:
    chat = scripted(Ledger(), reply("**Bold** answer with several words in it"), stream=True)
    view = ChatView(chat)
    seen: list[str] = []

    def look(_event: Any) -> None:
        for w in widgets_in(view):
            if isinstance(w, ipywidgets.HTML) and "nba-streaming" in w.value:
                seen.append(w.value)

    chat.on("text_delta", look)
    chat.ask("Go")
    view._flush_text()
    assert seen, "the text did not stream"
    assert all("<strong>" not in s for s in seen) and "**Bold**" in seen[-1]
    final = view_html(view).split("</style>", 1)[1]
    assert "<strong>Bold</strong>" in final and "nba-streaming" not in final


def test_user_text_stays_text() -> None:
    chat = scripted(Ledger(), reply("ok"))
    view = ChatView(chat)
    chat.ask("**not bold** <b>x</b>")
    html = view_html(view)
    assert "**not bold** &lt;b&gt;x&lt;/b&gt;" in html


# ----------------------------------------------------------------- 3: one decision card
EMAIL = {"to": "ana@example.org", "subject": "Your refund", "body": "Hello Ana,\n\nDone.\n\nBob"}


def test_one_card_per_gated_call_readable_arguments_and_defaults() -> None:
    ledger = Ledger()
    chat = scripted(
        ledger,
        call_tools(("send_email", EMAIL, "e1"), ("issue_refund", {"order_id": 42}, "r1")),
        reply("Sent."),
    )
    view = ChatView(chat)
    chat.ask("Email Ana and refund order 42")
    email, refund = card_for(view, "e1"), card_for(view, "r1")
    # Nothing else draws these calls: one widget per call, its name once.
    assert not [
        w
        for w in widgets_in(view)
        if isinstance(w, ipywidgets.HTML) and 'data-call-id="e1"' in w.value
    ]
    assert email.value.count("send_email") == 1
    # A body with newlines is a text block (no \n escapes, no JSON quotes).
    assert '<pre class="nba-block">Hello Ana,\n\nDone.\n\nBob</pre>' in email.value
    assert "\\n" not in email.value
    # Short arguments on one line; the defaults the tool will use, marked as defaults.
    assert '<code class="nba-args1">{&quot;order_id&quot;: 42}</code>' in refund.value
    defaults = re.search(r'<div class="nba-defaults".*?</div>', refund.value)
    assert defaults is not None
    assert "defaults" in defaults[0] and "amount</span> = 20.0" in defaults[0]
    assert "currency</span> = &quot;EUR&quot;" in defaults[0]
    # The call id only on hover.
    assert 'title="call r1"' in refund.value
    assert "r1" not in "".join(Tree(refund.value).text)
    # The static HTML shows the same card (no buttons).
    static = static_html(chat)
    assert "Hello Ana,\n\nDone.\n\nBob" in static and "amount</span> = 20.0" in static
    assert 'class="nba-controls"' not in static


def test_long_values_fold_and_the_reason_is_the_real_one() -> None:
    class Publish(Tool):
        """Publishes a post."""

        def approval(self, call: ToolCall) -> bool | None:
            return None  # always leaves it to a human

        def execute(self, text: str, tags: list[str]) -> str:
            return "published"

    long_line = "word " * 200
    chat = Chat(
        provider=ScriptedProvider(
            [call_tools(("publish", {"text": long_line, "tags": [f"t{i}" for i in range(50)]}))]
        ),
        display=False,
    ).with_tools(Publish)
    view = ChatView(chat)
    chat.ask("Publish it")
    (card,) = cards(view)
    tree = Tree(card.value)
    assert tree.names().count("details") == 2  # the long text and the long list, folded
    assert "(1,000 characters)" in card.value and "50 items" in card.value
    # The reason says what the resolver did, not the title again.
    assert "its approval rule left this call to you" in card.value
    assert "decides per call" not in card.value


def test_edit_shows_a_diff_not_the_json_again() -> None:
    ledger = Ledger()
    chat = scripted(ledger, call_tools(("send_email", EMAIL, "e1")), reply("Sent."), reply("extra"))
    view = ChatView(chat)
    chat.ask("Email Ana")
    edited = {**EMAIL, "body": "Hello Ana,\n\nDone, sorry for the wait.\n\nBob"}
    card_for(view, "e1").click("edit", arguments=edited)
    done(chat)
    assert ledger.calls == [("send_email", {"to": EMAIL["to"], "body": edited["body"]})]
    html = card_for(view, "e1").value
    diff = re.search(r'<div class="nba-diff">.*?unchanged</div>', html, re.S)
    assert diff is not None
    assert '<span class="nba-del">-Done.</span>' in diff[0]
    assert '<span class="nba-add">+Done, sorry for the wait.</span>' in diff[0]
    assert "2 unchanged" in diff[0] and "ana@example.org" not in diff[0]  # not repeated


def test_edit_of_a_scalar_shows_old_and_new() -> None:
    ledger = Ledger()
    chat = scripted(ledger, call_tools(("issue_refund", {"order_id": 42}, "r1")), reply("ok"))
    view = ChatView(chat)
    chat.ask("Refund 42")
    card_for(view, "r1").click("edit", arguments={"order_id": 43})
    done(chat)
    assert ledger.calls == [("issue_refund", {"order_id": 43, "amount": 20.0})]
    assert "<del>42</del> &#8594; <ins>43</ins>" in card_for(view, "r1").value


def test_an_edited_card_shows_the_edit_as_current_and_folds_the_original() -> None:
    ledger = Ledger()
    chat = scripted(ledger, call_tools(("issue_refund", {"order_id": 42}, "r1")), reply("ok"))
    view = ChatView(chat)
    chat.ask("Refund 42")
    card_for(view, "r1").click("edit", arguments={"order_id": 43, "amount": 5.0})
    done(chat)
    assert ledger.calls == [("issue_refund", {"order_id": 43, "amount": 5.0})]
    for html in (card_for(view, "r1").value, bundle_for(state_for(chat), None)["text/html"]):
        head = re.search(r'<summary class="nba-head">.*?</summary>', html, re.S)
        assert head is not None
        # The line says what ran, marked edited; the model's 42 is not shown as current.
        assert "43" in head[0] and "5.0" in head[0] and "42" not in head[0]
        assert "nba-edited" in head[0]
        # amount is the edit's 5.0, not a default of 20.0 beside it; currency still defaults.
        defaults = re.search(r'<div class="nba-defaults".*?</div>', html, re.S)
        assert defaults is not None
        assert "amount" not in defaults[0] and "currency" in defaults[0]
        # The original is one click away, as a diff against the edit.
        original = re.search(r'<details class="nba-fold nba-original">.*?</details>', html, re.S)
        assert original is not None and "the model's original arguments" in original[0]
        assert "<del>42</del> &#8594; <ins>43</ins>" in original[0]
    bundle = bundle_for(state_for(chat), None)
    for text in (bundle["text/plain"], bundle["text/markdown"]):  # the edit there too
        (line,) = [x for x in text.splitlines() if "issue_refund" in x and "order_id" in x]
        assert "43" in line and "42" not in line, line
    card = card_for(view, "r1").value
    original = re.search(r'<details class="nba-fold nba-original">.*?</details>', card, re.S)
    assert original is not None
    assert card.count("42") == original[0].count("42")  # the model's 42 only inside the fold


def two_refunds(ledger: Ledger, *then: Any) -> Chat:
    """A chat whose model asks for refunds 1 and 2 (``r1``, ``r2``), says "ok", then ``then``."""
    refunds = call_tools(
        ("issue_refund", {"order_id": 1}, "r1"), ("issue_refund", {"order_id": 2}, "r2")
    )
    return scripted(ledger, refunds, reply("ok"), *then)


def test_always_allow_can_be_taken_back_from_the_card() -> None:
    ledger = Ledger()
    chat = two_refunds(ledger, call_tools(("issue_refund", {"order_id": 3}, "r3")), reply("ok"))
    view = ChatView(chat)
    chat.ask("Refund 1 and 2")
    card_for(view, "r1").click("always")
    done(chat)
    assert sorted(c[1]["order_id"] for c in ledger.calls) == [1, 2]
    first, second = card_for(view, "r1"), card_for(view, "r2")
    # The card it was clicked on and the call the rule approved both offer to take it back.
    assert first.revocable and second.revocable
    assert chat.tool_calls[1].decision.by == "policy:always_allow:issue_refund"  # type: ignore[union-attr]
    assert chat.always_allowed == ("issue_refund",)
    first.click("revoke")
    first.click("revoke")  # a double click takes it back once, without an error
    assert chat.always_allowed == ()
    assert not first.revocable and not second.revocable and first.error == ""
    assert "asks for approval again" in first.note
    assert first.state == second.state == "approved"  # decisions made stand
    chat.ask("Refund 3")
    assert chat.status == "awaiting_approval"  # it asks again
    assert card_for(view, "r3").state == "pending"


def test_a_shown_view_keeps_stop_always_allowing_until_it_is_used(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A view shown in a notebook goes static when its turn settles with nothing to decide
    (its widgets closed): "Stop always allowing" went with them the moment it appeared. The
    view stays live while a card offers it; taking the rule back lets it go static."""
    ledger = Ledger()
    chat = two_refunds(ledger)
    view = ChatView(chat)
    view._ipython_display_()  # outside a kernel: prints the bundle, marks it shown
    chat.ask("Refund 1 and 2")
    card_for(view, "r1").click("always")
    done(chat)
    assert chat.status == "complete" and len(ledger.calls) == 2
    assert view.live and not view.pending()  # nothing to decide, but a rule to take back
    flush_dirty()  # after the cell (post_run_cell), and after the next one: still offered
    flush_dirty()
    assert view.live and not view.pending()
    first, second = card_for(view, "r1"), card_for(view, "r2")
    assert first.revocable and second.revocable
    second.click("revoke")
    assert chat.always_allowed == ()
    assert not view.live and first.comm is None  # static now: its widgets closed
    # taken back in code instead: the next time the chat settles, the view lets go too
    again = two_refunds(Ledger())
    view = ChatView(again)
    view._ipython_display_()
    again.ask("Refund 1 and 2")
    card_for(view, "r1").click("always")
    done(again)
    flush_dirty()
    assert view.live
    again.revoke("issue_refund")
    assert view.live  # nothing settled since
    again.complete()  # the chat settles again (nothing to do): no offer stands
    assert not view.live


def test_a_call_always_allowed_carries_a_chip_and_stop_always_allowing() -> None:
    ledger = Ledger()
    chat = scripted(
        ledger,
        call_tools(("issue_refund", {"order_id": 1}, "r1")),
        reply("ok"),
        call_tools(("issue_refund", {"order_id": 2}, "r2")),
        reply("ok"),
    )
    chat.always_allow("issue_refund")  # in code: no card was clicked
    view = ChatView(chat)
    chat.ask("Refund 1")
    assert ledger.calls == [("issue_refund", {"order_id": 1, "amount": 20.0})]  # nobody asked
    card = card_for(view, "r1")
    for html in (card.value, static_html(chat)):
        line = re.search(r'data-call-id="r1"><summary.*?</summary>', html, re.S)
        assert line is not None and "always allowed</span>" in line[0]  # on the folded line
    assert card.revocable  # the live card offers Stop always allowing
    card.click("revoke")
    assert chat.always_allowed == () and not card.revocable
    assert "asks for approval again" in card.note
    chat.ask("Refund 2")
    assert chat.status == "awaiting_approval"  # the rule is gone: it asks again
    assert "always allowed" not in card_for(view, "r2").value


# --------------------------------------------------------------- 3: Approve all / Deny all
def three_refunds(ledger: Ledger) -> tuple[Chat, ChatView]:
    chat = scripted(
        ledger,
        call_tools(
            ("issue_refund", {"order_id": 1}, "r1"),
            ("issue_refund", {"order_id": 2}, "r2"),
            ("issue_refund", {"order_id": 3}, "r3"),
            ("get_weather", {"city": "Paris"}, "w1"),
        ),
        reply("All done."),
    )
    view = ChatView(chat)
    chat.ask("Refund 1, 2, 3")
    return chat, view


def test_approve_all_decides_every_waiting_call_and_each_runs_once() -> None:
    ledger = Ledger()
    chat, view = three_refunds(ledger)
    (batch,) = cards(view, "batch")
    assert (batch.state, batch.count, batch.call_ids) == ("pending", 3, ["r1", "r2", "r3"])
    # It sits right above the first gated call of the response.
    boxes = [w for w in widgets_in(view) if isinstance(w, ipywidgets.VBox)]
    assert any(list(b.children) == [batch, card_for(view, "r1")] for b in boxes)
    batch.click("approve_all")
    batch.click("approve_all")  # a double click
    batch.click("deny_all")
    done(chat)
    assert sorted(c[1]["order_id"] for c in ledger.calls) == [1, 2, 3]
    assert chat.status == "complete"
    for call in chat.tool_calls[:3]:
        assert call.decision is not None and (call.decision.verdict, call.decision.by) == (
            "approved",
            "user",
        )
        assert card_for(view, call.id).state == "approved"
    assert batch.state == "approved" and batch.summary == "Approved 3 calls."


def test_deny_all_gives_each_call_the_reason() -> None:
    ledger = Ledger()
    chat, view = three_refunds(ledger)
    (batch,) = cards(view, "batch")
    batch.click("deny_all", reason="wrong customer")
    done(chat)
    assert ledger.calls == []
    for call in chat.tool_calls[:3]:
        assert call.status == "denied"
        assert call.decision is not None and call.decision.reason == "wrong customer"
    assert batch.summary == "Denied 3 calls: wrong customer."
    assert view_html(view).count('nba-sum">denied by you: wrong customer') == 3


def test_approve_all_skips_what_was_decided_elsewhere_and_hides_below_two() -> None:
    ledger = Ledger()
    chat, view = three_refunds(ledger)
    (batch,) = cards(view, "batch")
    chat.deny("r2", reason="no")  # decided in code: the batch now covers two calls
    assert (batch.count, batch.call_ids) == (2, ["r1", "r3"])
    card_for(view, "r3").click("approve")
    done(chat)
    assert batch.state == "closed"  # one call left: its own card decides it
    card_for(view, "r1").click("approve")
    done(chat)
    assert sorted(c[1]["order_id"] for c in ledger.calls) == [1, 3]


def test_a_batch_click_after_a_decision_elsewhere_records_no_false_decision() -> None:
    ledger = Ledger()
    chat, view = three_refunds(ledger)
    (batch,) = cards(view, "batch")
    chat.deny("r1", reason="from the other notebook", by="store")
    batch.call_ids = ["r1", "r2", "r3"]  # as if the click raced the update: all three
    batch.click("approve_all")
    done(chat)
    r1 = chat.tool_calls[0]
    assert r1.decision is not None and r1.decision.by == "store"
    assert sorted(c[1]["order_id"] for c in ledger.calls) == [2, 3]
    assert batch.summary == "Approved 2 calls (1 decided elsewhere first)."


# ------------------------------------------------------------------- 8: compact and quiet
def test_finished_calls_are_one_line_cards_that_expand() -> None:
    chat = scripted(Ledger(), call_tools(("get_weather", {"city": "Paris"}, "w1")), reply("ok"))
    view = ChatView(chat)
    chat.ask("Weather in Paris?")
    (html,) = [
        w.value for w in widgets_in(view) if isinstance(w, ipywidgets.HTML) and "w1" in w.value
    ]
    assert html.startswith('<details class="nba-entry nba-card nba-call nba-done nba-st-ok"')
    summary = re.search(r"<summary[^>]*>(.*?)</summary>", html, re.S)
    assert summary is not None
    text = "".join(Tree(summary[1]).text)
    assert text == '⚙get_weather{"city": "Paris"}ok' + text.split("ok", 1)[1]
    assert "→ sunny in Paris" in text and "\n" not in text
    assert "w1" not in "".join(Tree(html).text)  # the id only in the title
    assert '<pre class="nba-result">sunny in Paris</pre>' in html  # inside, on a click


def test_show_earlier_button_is_not_cut_off() -> None:
    chat = scripted(Ledger(), *[reply(f"answer {i}") for i in range(12)])
    view = ChatView(chat, page_size=5, live_pages=1)
    for i in range(12):
        chat.ask(f"question {i}")
    (more,) = [w for w in widgets_in(view) if isinstance(w, ipywidgets.Button)]
    assert more.description.startswith("Show earlier (") and more.layout.display is None
    assert more.layout.width == "auto" and more.layout.height == "auto"  # sized to its words


# ------------------------------------------------------------------- 9: results and errors
def test_a_dataframe_result_is_its_html_table_bounded_and_escaped() -> None:
    big = pd.DataFrame({"n": range(500), "label": ["<b>x</b>"] * 500})

    @tool
    def table(rows: int) -> pd.DataFrame:
        """Rows."""
        return big.head(rows)

    chat = Chat(
        provider=ScriptedProvider(
            [call_tools(("table", {"rows": 3}, "t1"), ("table", {"rows": 500}, "t2")), reply("ok")]
        ),
        display=False,
    ).with_tools(table)
    view = ChatView(chat)
    chat.ask("Tables")
    for html in (view_html(view), static_html(chat)):
        small = re.search(r'data-call-id="t1".*?</details>', html, re.S)
        large = re.search(r'data-call-id="t2".*?</details>', html, re.S)
        assert small is not None and large is not None
        assert "DataFrame, 3 rows × 2 columns" in small[0]
        body = small[0].split("</summary>", 1)[1]  # (its line shows the first rows too)
        assert "<table>" in body and body.count("<td>&lt;b&gt;x&lt;/b&gt;</td>") == 3
        assert "<b>" not in small[0]
        # Truncated the way pandas truncates (display.max_rows), not 500 rows.
        assert large[0].count("<tr>") < 70 and "500 rows × 2 columns" in large[0]
    # The model still read text.
    assert "label" in chat.tool_calls[0].result.content


def test_a_table_result_shows_its_first_rows_on_the_folded_line() -> None:
    frame = pd.DataFrame({"n": range(50), "label": [f"row{i}" for i in range(50)]})

    @tool
    def table() -> pd.DataFrame:
        """Rows."""
        return frame

    chat = Chat(
        provider=ScriptedProvider([call_tools(("table", {}, "t1")), reply("ok")]), display=False
    ).with_tools(table)
    view = ChatView(chat)
    chat.ask("A table")
    for html in (view_html(view), static_html(chat)):
        line = re.search(
            r'data-call-id="t1"><summary class="nba-head nba-peeking">(.*?)</summary>', html, re.S
        )
        assert line is not None, html
        peek = re.search(r'<div class="nba-peek">.*</div>', line[1], re.S)
        assert peek is not None
        # Its first rows, seen without a click; the rest waits behind it.
        assert "<td>row0</td>" in peek[0] and "<td>row2</td>" in peek[0]
        assert "<td>row3</td>" not in peek[0]
        assert "DataFrame, 50 rows × 2 columns" in line[1]


def test_rich_html_from_user_code_is_rebuilt_from_an_allowlist() -> None:
    class Sneaky:
        def _repr_html_(self) -> str:
            return (
                '<style>body{display:none}</style><table onclick="alert(1)" class="x">'
                '<tr><td colspan="2" style="color:red">a<script>alert(2)</script></td>'
                '<td><a href="javascript:alert(3)">l</a><img src=x onerror=alert(4)>'
                "<iframe src=//evil></iframe></td></tr></table>"
            )

        def __str__(self) -> str:
            return "sneaky"

    @tool
    def sneaky() -> Any:
        """Sneaky."""
        return Sneaky()

    chat = Chat(
        provider=ScriptedProvider([call_tools(("sneaky", {}, "s1")), reply("ok")]), display=False
    ).with_tools(sneaky)
    view = ChatView(chat)
    chat.ask("Go")
    html = view_html(view)
    assert '<div class="nba-rich"><table><tr><td colspan="2">a</td><td>l</td></tr></table>' in html
    for bad in ("<style>body", "onclick", "<script>", "<a ", "<img", "<iframe", "color:red"):
        assert bad not in html
    assert (
        sanitize_table_html("<td>1 &lt; 2 &amp; <b>3</b></td>")
        == "<td>1 &lt; 2 &amp; <b>3</b></td>"
    )


def test_errors_keep_their_newlines_and_offer_the_traceback() -> None:
    @tool
    def parse(text: str) -> str:
        """Parses."""
        return _fail(text)

    chat = Chat(
        provider=ScriptedProvider([call_tools(("parse", {"text": "x"}, "p1")), reply("ok")]),
        display=False,
    ).with_tools(parse)
    view = ChatView(chat)
    chat.ask("Parse x")
    for html in (view_html(view), bundle_for(state_for(chat))["text/html"]):
        card = re.search(r'data-call-id="p1".*?</details></div></details>', html, re.S)
        assert card is not None
        assert '<div class="nba-err">ValueError: line one\nline two</div>' in card[0]
        tb = re.search(
            r'<details class="nba-tb"><summary>traceback</summary>(.*?)</details>', card[0], re.S
        )
        assert tb is not None
        assert "Traceback (most recent call last)" in tb[1] and "in _fail" in tb[1]
        assert "_runner.py" not in tb[1]  # from the tool's own code on


def _fail(text: str) -> str:
    raise ValueError("line one\nline two")


def test_the_edit_note_is_for_the_model_only() -> None:
    ledger = Ledger()
    chat = scripted(ledger, call_tools(("issue_refund", {"order_id": 42}, "r1")), reply("ok"))
    view = ChatView(chat)
    chat.ask("Refund 42")
    card_for(view, "r1").click("edit", arguments={"order_id": 43})
    done(chat)
    result = chat.tool_calls[0].result
    assert result is not None and result.content.startswith("[The user edited the arguments")
    sent = chat.provider.requests[-1].messages  # type: ignore[attr-defined]
    assert any("[The user edited the arguments" in str(getattr(m, "content", "")) for m in sent)
    bundle = chat_mimebundle(chat)
    for text in (view_html(view), *bundle.values()):
        assert "The user edited the arguments" not in text
        assert "refunded 20.0 EUR on order 43" in text
    log = chat.log
    preview = log.loc[log["call_id"] == "r1", "result_preview"].iloc[0]
    assert preview == "refunded 20.0 EUR on order 43"


def two_waiting_refunds(ledger: Ledger) -> tuple[Chat, ChatView]:
    chat = scripted(
        ledger,
        call_tools(
            ("issue_refund", {"order_id": 1}, "r1"), ("issue_refund", {"order_id": 2}, "r2")
        ),
        reply("All done."),
    )
    view = ChatView(chat)
    chat.ask("Refund 1 and 2")
    return chat, view


@pytest.mark.parametrize("first, then", [("approve", "deny_all"), ("deny", "approve_all")])
def test_a_decide_all_click_arriving_after_the_batch_card_closed_still_decides(
    first: str, then: str
) -> None:
    """Two calls wait; a card's click and then "Deny all" (with its reason) are sent while
    the kernel is busy. The card's click, handled first, leaves one call waiting, which
    closes the batch card; "Deny all" then arrived at a closed card and was dropped without
    a word, its reason lost and the chat left waiting."""
    ledger = Ledger()
    chat, view = two_waiting_refunds(ledger)
    (batch,) = cards(view, "batch")
    card_for(view, "r1").click(first, reason="no" if first == "deny" else None)
    assert batch.state == "closed"  # what the browser's later click arrives at
    batch.click(then, reason="wrong customer" if then == "deny_all" else None)
    done(chat)
    second = chat.record.get("r2")
    assert second is not None and second.decided is not None
    verdict = "denied" if then == "deny_all" else "approved"
    assert (second.decided.verdict, second.decided.by) == (verdict, "user")
    if then == "deny_all":
        assert second.decided.reason == "wrong customer"
        assert batch.summary == "Denied 1 call: wrong customer (1 decided elsewhere first)."
        assert [c[1]["order_id"] for c in ledger.calls] == [1]
    else:
        assert batch.summary == "Approved 1 call (1 decided elsewhere first)."
        assert [c[1]["order_id"] for c in ledger.calls] == [2]
    assert chat.status == "complete"
    batch.click(then)  # the card is decided now: a second click does nothing more
    assert batch.state == verdict


def test_a_late_decide_all_with_nothing_left_waiting_does_nothing() -> None:
    """Each call decided on its own card, then a late "Approve all": the closed batch card
    said "Approved 0 calls" in an approved state (over a denied call) and asked the chat to
    continue; it stays closed and decides nothing."""
    ledger = Ledger()
    chat, view = two_waiting_refunds(ledger)
    (batch,) = cards(view, "batch")
    card_for(view, "r1").click("approve")
    card_for(view, "r2").click("deny", reason="no")
    done(chat)
    assert batch.state == "closed"
    batch.click("approve_all")
    assert batch.state == "closed" and batch.summary == ""
    assert chat.record.get("r2").status == "denied"
    assert [c[1]["order_id"] for c in ledger.calls] == [1]
