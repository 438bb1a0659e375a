"""Rules as data (``chat.add_rule``, an accepted ``suggest_policies`` rule) are kept with a
stored chat and applied again after ``Chat.load`` (issue 27, item 5), on SQLite and
PostgreSQL: an allow rule approves, a deny rule denies before anything runs, with no
predicate to give back (the rule is data); an edited rule that cannot be read stops the
load with a clear error rather than being dropped.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

import nbagent
from nbagent import Chat, Rule, StoreError

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from _agent import Refund, count  # noqa: E402


@pytest.fixture(autouse=True)
def _counter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "runs.txt"
    monkeypatch.setenv("NBAGENT_TEST_COUNTER", str(path))
    return path


DENY_BIG = Rule.deny("refund", ("order_id", ">", 100))
ALLOW_SMALL = Rule.allow("refund", ("order_id", "<=", 10))


def _load(backend: Any, chat_id: str) -> Chat:
    return Chat.load(chat_id, store=backend.url, tools=[Refund])


def test_rules_come_back_on_load_and_decide_again(backend: Any, _counter: Path) -> None:
    chat = Chat(model="demo", store=backend.url).with_tools(Refund)
    chat.add_rule(DENY_BIG).add_rule(ALLOW_SMALL)
    loaded = _load(backend, chat.id)  # the first chat still open: a kernel that died
    assert loaded.rules == (DENY_BIG, ALLOW_SMALL)
    loaded.ask("Refund order 420")
    (denied,) = loaded.tool_calls
    assert denied.status == "denied" and count(_counter) == 0
    assert denied.decision is not None and denied.decision.by == "rule"
    assert denied.decision.reason == "Denied by rule: tool refund, order_id > 100"
    loaded.ask("Refund order 7")
    assert loaded.tool_calls[-1].status == "ok" and count(_counter) == 1
    loaded.ask("Refund order 50")  # neither rule: asks a person, as before
    assert loaded.status == "awaiting_approval"
    loaded.close()
    chat.close()
    with backend.open() as store:
        changes = [
            (e.rule["verdict"], e.added) for e in store.iter_events(chat.id)
            if e.type == "rule_changed"
        ]  # fmt: skip
        log = nbagent.read_log(store)
    assert changes == [("denied", True), ("approved", True)]
    by = dict(zip(log["call_id"], zip(log["decided_by"], log["reason"], strict=True), strict=True))
    assert by[denied.id] == ("rule", "Denied by rule: tool refund, order_id > 100")


def test_a_removed_rule_stays_removed(backend: Any) -> None:
    chat = Chat(model="demo", store=backend.url).with_tools(Refund)
    chat.add_rule(DENY_BIG).add_rule(ALLOW_SMALL).remove_rule(DENY_BIG)
    chat.close()
    loaded = _load(backend, chat.id)
    assert loaded.rules == (ALLOW_SMALL,)
    loaded.close()


def test_a_rule_that_cannot_be_read_stops_the_load(backend: Any) -> None:
    chat = Chat(model="demo", store=backend.url).with_tools(Refund)
    chat.add_rule(DENY_BIG)
    chat.close()
    (state,) = backend.sql("SELECT state FROM chats WHERE id = ?", (chat.id,))[0]
    edited = json.loads(state)
    edited["rules"][0]["conditions"][0]["op"] = "~~"
    backend.sql("UPDATE chats SET state = ? WHERE id = ?", (json.dumps(edited), chat.id))
    with pytest.raises(StoreError, match=r"rule this version cannot read.*'~~'"):
        _load(backend, chat.id)


def test_an_accepted_deny_rule_holds_in_a_resumed_batch(backend: Any, _counter: Path) -> None:
    """A batch whose factory accepts a deny rule parks a row on a person; resumed (its
    chats loaded from the store), the stored rule still denies."""
    prompts = ["Refund order 7", "Refund order 500"]

    def make_chat() -> Chat:
        return Chat(model="demo").with_tools(Refund).add_rule(DENY_BIG)

    first = nbagent.batch(prompts, make_chat, store=backend.url, progress=False)
    assert first["status"].tolist() == ["awaiting_approval", "done"]
    assert count(_counter) == 0
    again = nbagent.batch(prompts, lambda: Chat(model="demo").with_tools(Refund),
                          store=backend.url, progress=False)  # fmt: skip
    assert again["status"].tolist() == ["awaiting_approval", "done"]
    chat = _load(backend, again["chat_id"].tolist()[0])
    assert chat.rules == (DENY_BIG,)
    chat.approve(chat.pending_approvals[0])  # order 7: a person approves it
    chat.complete()
    chat.ask("Refund order 900")
    assert chat.tool_calls[-1].status == "denied" and count(_counter) == 1
    chat.close()
