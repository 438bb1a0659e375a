"""``nbagent.compare`` never shows a secret a run holds: not in its HTML, its text, its
markdown or its differences frame (call arguments, an error's text, the model's words,
a denial's reason, a fork's edited arguments)."""

from __future__ import annotations

import json

import nbagent
from nbagent import Chat, Tool
from nbagent.comparison import Comparison
from nbagent.comparison._runs import run_of
from nbagent.testing import ScriptedProvider, call_tools, reply

PASSWORD = "hunter2pw"
KEY = "sk-proj-AbCdEf0123456789AbCdEf0123456789xyz"
DSN = f"postgresql://admin:{PASSWORD}@db/prod"


class Connect(Tool):
    """Connect to a database with a key."""

    requires_approval = True

    def execute(self, dsn: str, api_key: str, password: str = "") -> str:
        raise RuntimeError(f"could not connect to {dsn} using {api_key}")


def _model(req):  # type: ignore[no-untyped-def]
    tools = [m for m in req.messages if getattr(m, "role", "") == "tool"]
    if tools:
        return reply("result was: " + tools[-1].content)
    arguments = {"dsn": DSN, "api_key": KEY, "password": PASSWORD}
    return call_tools(("connect", arguments, "k1"))


def _runs() -> tuple[Chat, Chat, Chat]:
    chat = Chat(provider=ScriptedProvider([_model], repeat_last=True)).with_tools(Connect)
    chat.ask("connect")
    call = chat.pending_approvals[0]
    chat.deny(call, reason=f"not with {KEY}")
    chat.complete()
    fork = chat.fork(call, decision="approved")
    fork.complete()
    edited = chat.fork(
        call, arguments={"dsn": DSN, "api_key": KEY + "2", "password": PASSWORD + "2"}
    )
    edited.complete()
    return chat, fork, edited


def _leaks(text: str) -> list[str]:
    return [s for s in (PASSWORD, KEY[:20], "AbCdEf0123456789") if s in text]


def test_compare_shows_no_secret_anywhere() -> None:
    runs = _runs()
    frame = nbagent.compare(*runs, names=["denied", "approved", "edited"], display=False)
    result = Comparison(
        [run_of(c, n) for c, n in zip(runs, ["denied", "approved", "edited"], strict=True)]
    )
    bundle = result._repr_mimebundle_()
    for mime, text in bundle.items():
        assert not _leaks(str(text)), (mime, _leaks(str(text)))
    assert len(frame) > 0
    shown = json.dumps(frame.astype(object).to_numpy().tolist(), default=str)
    assert not _leaks(shown), _leaks(shown)
    assert not _leaks(repr(result))
    # what the comparison is for still shows: the calls and how they differ
    assert "connect(" in bundle["text/plain"]
    assert "***" in shown
    assert "approved by user" in shown and "denied by user" in shown


def test_the_runs_keep_the_real_arguments() -> None:
    """Only what is shown is redacted: the record (what ran) keeps the real values."""
    chat, _, _ = _runs()
    calls = list(chat.record.calls)
    assert calls[0].arguments["api_key"] == KEY
