"""Level 1: the approvals inbox in-process (live chats, a store, the widget driven by its traits).

Chats run on a scripted model with gated tools whose side effects are counted,
so "an approved call runs exactly once, a denied one never" is checked on the
effects, not on statuses alone. Continuations run in worker threads (no kernel
loop), as in a terminal; ``inbox.wait()`` waits for them.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import nbagent
from nbagent import Chat, DecisionError, Tool
from nbagent.inbox import Filter, Inbox
from nbagent.notebook import ChatView
from nbagent.notebook._widgets import ActionCard
from nbagent.store import SQLiteStore
from nbagent.testing import ScriptedProvider, call_tools, reply


class Effects:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.done: list[tuple[str, dict[str, Any]]] = []

    def hit(self, tool: str, **kwargs: Any) -> None:
        with self.lock:
            self.done.append((tool, kwargs))


@pytest.fixture
def effects() -> Effects:
    return Effects()


def tools(effects: Effects) -> list[type[Tool]]:
    class WriteFile(Tool):
        """Write a file."""

        requires_approval = True
        server = "fs"

        def execute(self, path: str, text: str = "") -> str:
            effects.hit("write_file", path=path)
            return f"wrote {path}"

    class SendEmail(Tool):
        """Send an email."""

        requires_approval = True

        def execute(self, to: str, body: str = "", order_id: int = 0) -> str:
            effects.hit("send_email", to=to)
            return f"sent to {to}"

    return [WriteFile, SendEmail]


def parked_chat(effects: Effects, *calls: Any, **kw: Any) -> Chat:
    """A chat parked on ``calls`` (one response asking for all of them), then answering."""
    script = [call_tools(*calls), reply("all done")]
    chat = Chat(provider=ScriptedProvider(script), display=False, **kw).with_tools(*tools(effects))
    chat.ask("please")
    assert chat.status == "awaiting_approval"
    return chat


@pytest.fixture
def three(effects: Effects) -> list[Chat]:
    return [
        parked_chat(effects, ("write_file", {"path": "/tmp/a.txt", "text": "x"}, "call_1")),
        parked_chat(effects, ("write_file", {"path": "/etc/passwd", "text": "y"}, "call_1")),
        parked_chat(effects, ("send_email", {"to": "boss@example.com", "body": "hi"}, "call_1")),
    ]


# ------------------------------------------------------------------ reading
def test_pending_lists_every_gated_call_across_chats(three: list[Chat]) -> None:
    box = nbagent.inbox(three)
    df = box.pending
    assert len(df) == 3
    assert set(df["chat_id"]) == {c.id for c in three}
    assert sorted(df["tool"]) == ["send_email", "write_file", "write_file"]
    assert df.loc[df["tool"] == "write_file", "server"].tolist() == ["fs", "fs"]
    assert df["reason"].str.contains("requires approval").all()
    assert (df["source"] == "chat").all()
    assert df["requested_at"].notna().all() and (df["age_s"] >= 0).all()
    # pending before the inbox existed: its age is the call's, from the chat's log
    mine = df.set_index("chat_id").loc[three[0].id, "requested_at"]
    assert mine == three[0].log["requested_at"].iloc[0]
    assert df["arguments"].iloc[0] == {"path": "/tmp/a.txt", "text": "x"}


def test_filter_by_tool_server_and_argument_values(three: list[Chat]) -> None:
    box = nbagent.inbox(three)
    assert len(box.filter(tool="write_*").pending) == 2
    assert len(box.filter(server="fs").pending) == 2
    assert box.filter(where={"path": "/tmp/*"}).pending["arguments"].tolist() == [
        {"path": "/tmp/a.txt", "text": "x"}
    ]
    assert len(box.filter(where={"to": lambda to: to.endswith("@example.com")}).pending) == 1
    assert len(box.filter(where=lambda args: "path" in args).pending) == 2
    assert len(box.filter(tool=["send_*", "nothing"]).pending) == 1
    assert len(box.filter(text="path=/etc/*").pending) == 1
    assert len(box.filter(text="boss").pending) == 1  # a free word, anywhere
    assert len(box.filter().pending) == 3


# ---------------------------------------------------------------- deciding
def test_approve_rows_runs_each_once_and_the_chat_continues(
    three: list[Chat], effects: Effects
) -> None:
    box = nbagent.inbox(three)
    out = box.approve(box.filter(where={"path": "/tmp/*"}).pending)
    assert out["outcome"].tolist() == ["approved"]
    assert box.wait(10)
    assert effects.done == [("write_file", {"path": "/tmp/a.txt"})]
    assert three[0].status == "complete" and three[0].transcript[-1].content == "all done"
    assert three[0].tool_calls[0].decision.by == "inbox"
    assert [c.status for c in three[1:]] == ["awaiting_approval", "awaiting_approval"]
    # again: nothing is recorded twice, the call does not run again
    again = box.approve(out)
    assert again["outcome"].tolist() == ["decided elsewhere"]
    assert again[["verdict", "by", "detail"]].values.tolist() == [
        ["approved", "inbox", "already decided in this inbox"]
    ]
    box.wait(10)
    assert len(effects.done) == 1


def test_deny_sends_the_reason_to_the_model_and_never_runs(
    three: list[Chat], effects: Effects
) -> None:
    box = nbagent.inbox(three)
    out = box.deny({"tool": "send_email"}, reason="not on a Sunday")
    assert out["outcome"].tolist() == ["denied"]
    box.wait(10)
    assert effects.done == []
    result = three[2].tool_calls[0].result
    assert result is not None and result.status == "denied"
    assert json.loads(result.content)["reason"] == "not on a Sunday"
    assert three[2].status == "complete"


def test_a_decision_made_elsewhere_first_records_nothing(
    three: list[Chat], effects: Effects
) -> None:
    box = nbagent.inbox(three, continue_chats=False)
    rows = box.pending  # what the user looked at
    three[1].deny(three[1].pending_approvals[0], reason="card click")  # decided elsewhere
    out = box.approve(rows)
    by_chat = dict(zip(out["chat_id"], out["outcome"], strict=True))
    assert by_chat[three[1].id] == "decided elsewhere"
    assert by_chat[three[0].id] == by_chat[three[2].id] == "approved"
    decision = three[1].tool_calls[0].decision
    assert decision.verdict == "denied" and decision.by == "user"  # the first decision stands
    words = box.decided.set_index("chat_id").loc[three[1].id]
    assert words["outcome"] == "decided elsewhere" and words["verdict"] == "denied"
    assert effects.done == []  # continue_chats=False: nothing drove the chats


def test_bad_input_is_refused_before_anything_is_decided(three: list[Chat]) -> None:
    box = nbagent.inbox(three)
    good = box.pending["call_id"].iloc[0]
    with pytest.raises(ValueError, match="several chats"):  # every chat's call is call_1
        box.approve(good)
    with pytest.raises(ValueError, match="no call 'nope'"):
        box.approve([(three[0].id, "nope")])
    assert len(box.pending) == 3  # nothing was decided
    with pytest.raises(TypeError, match="takes a store"):
        nbagent.inbox(42)
    with pytest.raises(TypeError, match="where="):
        box.filter(where=5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="filter takes"):
        box.approve({"path": "/tmp/*"})
    with pytest.raises(ValueError, match="by="):
        nbagent.inbox(three, by="user")


# --------------------------------------------------------------- the store
def test_a_store_is_decided_through_the_store(tmp_path: Path, effects: Effects) -> None:
    path = tmp_path / "chats.db"
    chats = [
        parked_chat(effects, ("write_file", {"path": f"/tmp/{i}.txt"}), store=path)
        for i in range(3)
    ]
    ids = [c.id for c in chats]
    for c in chats:
        c.close()
    del chats
    box = nbagent.inbox(path)
    assert (box.pending["source"] == "store").all() and len(box.pending) == 3
    assert box.pending["title"].tolist() == ["please"] * 3
    out = box.approve(box.filter(where={"path": "/tmp/1.txt"}).pending)
    assert out["outcome"].tolist() == ["approved"]
    store = SQLiteStore(path)
    decided = store.call(out["call_id"][0], chat_id=ids[1])
    assert decided.decision is not None and decided.decision.by == "inbox"
    assert [c.chat_id for c in store.pending_approvals()] == [ids[0], ids[2]]
    # the chat applies the decision when it is driven next, and runs the call once
    chat = Chat.load(
        ids[1], store=store, tools=tools(effects), provider=ScriptedProvider([reply("done")])
    )
    chat.complete()
    assert effects.done == [("write_file", {"path": "/tmp/1.txt"})]
    chat.close()
    store.close()
    box.close()


def test_a_live_chat_in_the_store_is_decided_through_the_chat(
    tmp_path: Path, effects: Effects
) -> None:
    path = tmp_path / "chats.db"
    live = parked_chat(effects, ("write_file", {"path": "/tmp/live"}), store=path)
    box = nbagent.inbox([live, path])  # the same chat twice: listed once, as live
    df = box.pending
    assert df["source"].tolist() == ["chat"]
    box.approve(df)
    box.wait(10)
    assert effects.done == [("write_file", {"path": "/tmp/live"})]
    assert live.status == "complete"
    box.close()
    live.close()


def test_a_batch_result_is_read_but_its_chats_are_left_to_the_batch(
    three: list[Chat], effects: Effects
) -> None:
    class Batch:  # what nbagent.batch puts in its result's attrs (BatchRun: .chats, .store)
        def __init__(self) -> None:
            self.chats = {c.id: c for c in three[:1]}  # the batch has started one chat
            self.store = None
            self.running = True  # it watches its parked rows

        def __deepcopy__(self, memo: Any) -> Batch:  # pandas deep-copies attrs
            return self

    run = Batch()
    result = pd.DataFrame({"chat_id": [c.id for c in three[:2]], "reply": [None, None]})
    result.attrs["nbagent_batch"] = run
    box = nbagent.inbox([result, three[0]])  # chat 0 given directly too: still the batch's
    assert box.pending["chat_id"].tolist() == [three[0].id]
    run.chats[three[1].id] = three[1]  # the batch starts its second chat
    run.chats[three[2].id] = three[2]  # not one of this result's rows
    assert set(box.pending["chat_id"]) == {three[0].id, three[1].id}
    box.approve(box.pending)
    assert box.wait(1)
    assert effects.done == []  # the batch continues its chats, not the inbox
    assert [c.status for c in three[:2]] == ["ready", "ready"]
    three[0].complete()
    assert effects.done == [("write_file", {"path": "/tmp/a.txt"})]
    # a batch that stopped watching (a script, no store): the inbox continues its chats
    late = parked_chat(effects, ("send_email", {"to": "late@x"}, "call_1"))
    stopped = Batch()
    stopped.chats, stopped.running = {late.id: late}, False
    result = pd.DataFrame({"chat_id": [late.id]})
    result.attrs["nbagent_batch"] = stopped
    box = nbagent.inbox(result)
    box.approve(box.pending)
    assert box.wait(10)
    assert late.status == "complete" and effects.done[-1] == ("send_email", {"to": "late@x"})
    with pytest.raises(TypeError, match="no batch run in its attrs"):
        nbagent.inbox(pd.DataFrame({"chat_id": ["x"]}))


# --------------------------------------------------------------- the widget
def test_widget_select_approve_deny_and_filter_controls(
    three: list[Chat], effects: Effects
) -> None:
    box = nbagent.inbox(three)
    w = box.widget
    try:
        assert len(w.rows) == 3 and all(r["match"] for r in w.rows)
        assert w.tools == ["send_email", "write_file"] and w.servers == ["fs"]
        w.query = {"tool": "write_file", "server": "", "text": "path=/etc/*"}  # the controls
        assert [r["match"] for r in w.rows].count(True) == 1
        etc = next(r for r in w.rows if r["match"])
        assert etc["args"][0] == {"key": "path", "short": "/etc/passwd", "full": ""}
        w.click("deny", keys=[etc["key"]], reason="never /etc")
        assert w.state == "idle" and w.error == ""
        assert w.summary == "Denied 1 call (never /etc)."
        box.wait(10)
        assert three[1].status == "complete" and effects.done == []
        assert len(w.rows) == 2  # decided rows leave the list...
        assert w.decided[0]["words"].startswith("denied in this inbox")  # ...into "decided"
        w.click("approve", keys=[])  # nothing selected
        assert w.error == "Select calls first."
    finally:
        box.close()


def test_approve_all_matching_previews_exactly_what_it_covers(
    three: list[Chat], effects: Effects
) -> None:
    box = nbagent.inbox(three)
    w = box.widget
    try:
        box.filter(tool="write_file")  # from Python: the controls show it too
        assert w.query["tool"] == "write_file"
        w.click("preview", verb="approve")
        p = w.preview
        assert p["count"] == 2 and p["filter"] == "tool write_file"
        assert sorted(c["line"] for c in p["calls"]) == [
            'fs: write_file(path="/etc/passwd", text="y")',
            'fs: write_file(path="/tmp/a.txt", text="x")',
        ]
        assert effects.done == []  # a preview decides nothing
        # a call decided elsewhere after the preview was drawn: the confirm records nothing for it
        three[1].approve(three[1].pending_approvals[0], reason="card")
        # a new call matching the filter after the preview: not covered by it
        w.click("confirm", token="forged")
        assert "preview is gone" in w.error and w.preview  # a wrong token decides nothing
        w.click("confirm")
        assert w.preview == {}
        assert w.summary == (
            "Approved 1 call; 1 had been decided elsewhere (nothing recorded for them)."
        )
        box.wait(10)
        assert three[0].tool_calls[0].decision.by == "inbox"
        assert three[1].tool_calls[0].decision.by == "user"
        assert three[2].status == "awaiting_approval"  # send_email: not matched, not decided
    finally:
        box.close()


def test_a_stale_click_records_nothing(three: list[Chat]) -> None:
    box = nbagent.inbox(three, continue_chats=False)
    w = box.widget
    try:
        key = next(r["key"] for r in w.rows if r["chat_id"] == three[2].id)
        three[2].deny(three[2].pending_approvals[0], reason="elsewhere")
        w.click("approve", keys=[key])  # the row the browser still showed
        assert w.summary.startswith("Approved 0 calls; 1 had been decided elsewhere")
        assert three[2].tool_calls[0].decision.verdict == "denied"
        assert any(
            d["key"] == key and d["words"].startswith("denied elsewhere by user") for d in w.decided
        )
    finally:
        box.close()


def test_the_widget_follows_live_chats_by_their_events(effects: Effects) -> None:
    chat = Chat(
        provider=ScriptedProvider(
            [
                call_tools(("send_email", {"to": "a@x"})),
                call_tools(("send_email", {"to": "b@x"})),
                reply("ok"),
            ]
        ),
        display=False,
    ).with_tools(*tools(effects))
    box = nbagent.inbox([chat])
    w = box.widget  # following starts with the widget
    try:
        assert w.rows == []
        chat.ask("go")  # a new pending call appears without a refresh
        _until(lambda: len(w.rows) == 1)
        chat.approve(chat.pending_approvals[0])  # decided elsewhere (a card, code)
        chat.complete()
        _until(lambda: [r["args"][0]["short"] for r in w.rows] == ["b@x"])
        assert w.decided[0]["words"].startswith("approved elsewhere by user")
    finally:
        box.close()


def _until(cond: Any, timeout: float = 5.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


# ----------------------------------------------- the chat's own view and cards
def test_the_chats_card_shows_the_inbox_decision_and_a_later_click_records_nothing(
    effects: Effects,
) -> None:
    chat = parked_chat(effects, ("send_email", {"to": "c@x"}))
    view = ChatView(chat)
    card = next(w for w in _widgets(view.widget) if isinstance(w, ActionCard) and w.tool)
    assert card.state == "pending"
    box = nbagent.inbox([chat])
    box.approve(box.pending)
    box.wait(10)
    _until(lambda: card.state == "approved")
    assert "approved by inbox" in card.value
    card.click("deny", reason="too late")  # the card the user still had on screen
    assert chat.tool_calls[0].decision.verdict == "approved"
    assert effects.done == [("send_email", {"to": "c@x"})]
    with pytest.raises(DecisionError):
        chat.deny(chat.tool_calls[0])


def _widgets(w: Any) -> list[Any]:
    out = [w]
    for child in getattr(w, "children", ()):
        out.extend(_widgets(child))
    return out


# ------------------------------------------------------- escaping, secrets
def test_everything_shown_is_escaped_and_keys_are_redacted(effects: Effects) -> None:
    secret = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"
    chat = parked_chat(
        effects,
        (
            "send_email",
            {"to": "<script>alert(1)</script>", "body": f"key {secret}\n" + "long " * 200},
        ),
    )
    box = nbagent.inbox([chat])
    bundle = box._repr_mimebundle_()
    html = bundle["text/html"]
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert secret not in html and secret not in bundle["text/plain"]
    w = box.widget
    try:
        args = {a["key"]: a for a in w.rows[0]["args"]}
        assert args["to"]["short"] == "<script>alert(1)</script>"  # text; the front end escapes
        assert args["body"]["full"] and secret not in json.dumps(w.rows)  # folded, redacted
        assert len(args["body"]["short"]) <= 100
    finally:
        box.close()


def test_the_text_fallback_and_repr(three: list[Chat]) -> None:
    box = nbagent.inbox(three)
    text = box._repr_mimebundle_()["text/plain"]
    assert text.startswith("Approvals inbox: 3 pending (3 live chats)")
    assert 'fs: write_file(path="/tmp/a.txt", text="x")' in text
    assert "application/vnd.jupyter.widget-view+json" not in box._repr_mimebundle_()
    assert repr(box) == "Inbox(3 pending; 3 live chats)"
    assert isinstance(box, Inbox) and Filter(tool="x").describe() == "tool x"


def test_the_docs_example_runs_and_does_what_it_says() -> None:
    from _docs import DOCS, python_after

    page = DOCS / "decide-from-another-process.md"
    code = python_after(page, "## Many chats: the approvals inbox")
    namespace: dict[str, Any] = {}
    exec(compile(code, str(page), "exec"), namespace)
    chats, box = namespace["chats"], namespace["inbox"]
    assert [c.status for c in chats] == ["complete", "complete", "complete"]
    decided = box.decided.set_index("chat_id")
    assert decided.loc[chats[0].id, "outcome"] == decided.loc[chats[1].id, "outcome"] == "approved"
    assert decided.loc[chats[2].id, "outcome"] == "denied"
    assert "wrote 5 characters to /tmp/a.txt" in chats[0].log["result_preview"].iloc[0]


def test_a_refresh_with_no_news_sends_no_rows_and_a_new_filter_drops_the_preview(
    three: list[Chat],
) -> None:
    box = nbagent.inbox(three)
    w = box.widget
    sent: list[str] = []
    w.observe(lambda change: sent.append(change["name"]), names=["rows", "clock"])
    try:
        box.refresh()
        assert sent == ["clock"]  # ages count on in the browser, from the kernel's clock
        w._on_custom_msg(w, {"event": "rendered"}, [])  # a page (re)drew it: a fresh clock
        assert sent == ["clock", "clock"]
        w.click("preview", verb="approve")
        assert w.preview["count"] == 3
        w.query = {"tool": "send_email", "server": "", "text": ""}
        assert w.preview == {} and w.summary == "The filter changed: the preview was dropped."
        w.click("confirm", token="")
        assert [c.status for c in three] == ["awaiting_approval"] * 3  # nothing decided
    finally:
        box.close()


# ------------------------------------------------------- numeric comparisons
@pytest.fixture
def orders(effects: Effects) -> list[Chat]:
    return [
        parked_chat(effects, ("send_email", {"to": f"c{n}@example.com", "order_id": n}, "call_1"))
        for n in (1028, 1029, 1030, 1031)
    ]


def test_the_text_box_compares_numeric_arguments(orders: list[Chat]) -> None:
    box = nbagent.inbox(orders)

    def ids(text: str) -> list[int]:
        return sorted(a["order_id"] for a in box.filter(text=text).pending["arguments"])

    assert ids("order_id<1030") == [1028, 1029]
    assert ids("order_id<=1030") == [1028, 1029, 1030]
    assert ids("order_id>1029") == [1030, 1031]
    assert ids("order_id>=1029.5") == [1030, 1031]
    assert ids("order_id=1030") == [1030]
    assert ids("order_id=1030.0") == [1030]  # equal numbers, whatever the spelling
    assert ids("order_id=103*") == [1030, 1031]  # = on text stays a glob
    assert ids("order_id>1028 order_id<1031") == [1029, 1030]  # every term holds
    assert ids("missing<5") == []  # a call without the argument is not matched
    # the widget's box says the same
    w = box.widget
    try:
        w.query = {"tool": "", "server": "", "text": "order_id<1030"}
        assert [r["match"] for r in w.rows].count(True) == 2
        assert w.filter_problem == ""
    finally:
        box.close()


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("order_id<abc", "'abc' is not one"),
        ("<1030", "name the argument"),
        ("order_id!=1030", "!= is not an operator"),
        ("order_id==1030", "write order_id=1030"),
        ("order_id=<1030", "write order_id<=1030"),
    ],
)
def test_a_filter_it_cannot_read_says_so_and_matches_nothing(
    orders: list[Chat], text: str, words: str
) -> None:
    box = nbagent.inbox(orders)
    with pytest.raises(ValueError, match="does not understand") as err:
        box.filter(text=text)
    assert words in str(err.value)
    with pytest.raises(ValueError, match="does not understand"):  # nothing approved by it
        box.approve({"text": text})
    assert all(c.status == "awaiting_approval" for c in orders)
    assert Filter(text=text).problems and not Filter(text=text).matches("t", None, {"order_id": 1})
    w = box.widget  # the box in the widget: told, nothing matches, nothing to approve
    try:
        w.query = {"tool": "", "server": "", "text": text}
        assert "does not understand" in w.filter_problem and words in w.filter_problem
        assert not any(r["match"] for r in w.rows)
        w.click("preview", verb="approve")
        assert w.preview["count"] == 0
        w.query = {"tool": "", "server": "", "text": "order_id<1030"}
        assert w.filter_problem == ""
    finally:
        box.close()


def test_a_call_that_left_with_no_decision_says_no_longer_pending(
    tmp_path: Path, effects: Effects
) -> None:
    import sqlite3

    path = tmp_path / "chats.db"
    chat = parked_chat(effects, ("write_file", {"path": "/tmp/gone"}), store=path)
    chat_id = chat.id
    chat.close()
    box = nbagent.inbox(path)
    w = box.widget
    try:
        assert len(w.rows) == 1
        # a tool outside nbagent marks the call cancelled: no decision is ever recorded
        with sqlite3.connect(path) as con:
            con.execute("UPDATE tool_calls SET status = 'cancelled' WHERE chat_id = ?", (chat_id,))
        box.refresh()
        assert w.rows == []
        row = box.decided.iloc[0]
        assert row["outcome"] == "no longer pending"
        assert pd.isna(row["verdict"]) or row["verdict"] in ("", None)  # not a verdict
        assert pd.isna(row["by"]) or row["by"] in ("", None)
        words = w.decided[0]["words"]
        assert words == "no longer pending: it left its chat with no decision recorded"
        assert w.decided[0]["verdict"] == "" and "elsewhere" not in words
        assert effects.done == []
    finally:
        box.close()


def test_a_batch_rows_chat_is_shown_by_the_rows_key(effects: Effects) -> None:
    tickets = pd.DataFrame({"ticket": ["T-41", "T-42"], "path": ["/tmp/41", "/tmp/42"]})

    def make_chat() -> Chat:
        script = [call_tools(("write_file", {"path": "/tmp/x"}, "call_1")), reply("done")]
        return Chat(provider=ScriptedProvider(script), display=False).with_tools(*tools(effects))

    result = nbagent.batch(tickets, make_chat, prompt="write {path}", key="ticket", progress=False)
    assert result["status"].tolist() == ["awaiting_approval"] * 2
    box = nbagent.inbox(result)
    w = box.widget
    try:
        by_chat = dict(zip(result["chat_id"], result["key"], strict=True))
        assert sorted(r["chat"] for r in w.rows) == [
            "row T-41 · write /tmp/41",
            "row T-42 · write /tmp/42",
        ]
        assert all(r["chat"].startswith(f"row {by_chat[r['chat_id']]} ") for r in w.rows)
        assert "[row T-41]" in repr(box._static()["text/plain"])
        w.click("preview", verb="deny")
        assert sorted(c["chat"] for c in w.preview["calls"]) == ["row T-41", "row T-42"]
        w.click("cancel")
    finally:
        box.close()
    plain = nbagent.inbox(parked_chat(effects, ("write_file", {"path": "/tmp/p"}, "call_1")))
    assert plain.widget.rows[0]["chat"].startswith("…")  # not a batch's: the end of its id
    plain.close()


def test_an_inbox_closed_and_dropped_is_let_go_with_its_widget(
    tmp_path: Path, effects: Effects
) -> None:
    """Its widget was kept for the life of the process (anywidget keeps every widget made
    from a file path to tell it when the file changes), and with it the inbox, its chats
    and its stores."""
    import gc
    import weakref

    live = parked_chat(effects, ("write_file", {"path": "/tmp/gone"}))
    box = nbagent.inbox([live])
    widget = weakref.ref(box.widget)
    chat = weakref.ref(live)
    box.close()
    live.close()
    del box, live
    gc.collect()
    assert widget() is None and chat() is None


def test_an_inbox_whose_cell_ran_again_closes_its_widget_and_stops_following(
    tmp_path: Path, effects: Effects, monkeypatch: pytest.MonkeyPatch
) -> None:
    """JupyterLab removed the inbox's output (its cell ran again): the widget closes and the
    store is no longer read in the background for it; nothing is decided, and showing the
    inbox again brings both back. ``follow()`` called by hand keeps following."""
    from types import SimpleNamespace

    import IPython.display

    from nbagent import _display
    from nbagent.inbox import _inbox

    monkeypatch.setattr(IPython.display, "display", lambda *a, **k: None)
    monkeypatch.setattr(IPython.display, "update_display", lambda *a, **k: None)
    monkeypatch.setattr(_inbox, "widgets_available", lambda: True)
    monkeypatch.setattr(_display, "hook_post_run_cell", lambda: None)
    monkeypatch.setattr(_display, "running_cell_id", lambda: "cell-a")

    path = tmp_path / "chats.db"
    parked = parked_chat(effects, ("write_file", {"path": "/tmp/x"}), store=path)
    box = nbagent.inbox(path)
    box._ipython_display_()
    first = box.widget
    assert first.comm is not None and box._follower is not None  # following while shown
    _display.clear_cells(SimpleNamespace(cell_id="cell-a", cell_meta={}))  # run again
    assert first.comm is None and first.layout.comm is None and box._follower is None
    assert len(box.pending) == 1 and effects.done == []  # nothing decided
    box._ipython_display_()  # shown again: a new widget, following again
    assert box.widget is not first and box.widget.comm is not None
    assert box._follower is not None
    box.follow()  # by hand: it follows even when shown nowhere
    _display.clear_cells(SimpleNamespace(cell_id="cell-a", cell_meta={}))
    assert box._follower is not None
    box.close()
    parked.close()
    _display._by_cell.clear()
