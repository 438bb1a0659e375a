"""Edit arguments, then "Approve with these arguments" unchanged, on a call whose list under a
secret's name holds a literal ``***`` the model wrote beside a real secret (a critic's repro):
each item showed as ``***``, and matched without the list's name the literal was the only
``***``, so every item left as shown became it: the tool ran with ``["***", "***"]``, which
nobody approved, and the model was told the user had edited the arguments."""

from __future__ import annotations

import json
from typing import Any

from _views import widgets_in
from hypothesis import given, settings
from hypothesis import strategies as st

from nbagent import Chat, Tool
from nbagent._html import redacted, unredacted
from nbagent.notebook import ChatView
from nbagent.notebook import _continuation as cont
from nbagent.notebook._widgets import ActionCard
from nbagent.testing import ScriptedProvider, call_tools, reply

RAN: list[Any] = []


class SetKeys(Tool):
    """Store API keys."""

    requires_approval = True

    def execute(self, api_keys: list[str]) -> str:
        RAN.append(api_keys)
        return "stored"


def test_an_unchanged_edit_runs_the_real_secrets_as_a_plain_approval() -> None:
    RAN.clear()
    args = {"api_keys": ["***", "hunter2-real-secret"]}
    provider = ScriptedProvider([call_tools(("set_keys", args, "s1")), reply("ok")])
    chat = Chat(provider=provider, display=False).with_tools(SetKeys)
    view = ChatView(chat)
    chat.ask("go")
    (card,) = [w for w in widgets_in(view) if isinstance(w, ActionCard)]
    assert json.loads(card.arguments) == {"api_keys": ["***", "***"]}  # as the editor shows
    card.click("edit", arguments=card.arguments)  # approved exactly as shown
    cont.continuation_for(chat).wait(10)
    assert RAN == [["***", "hunter2-real-secret"]]  # the model's own, once
    call = chat.get_call("s1")
    assert call.status == "ok" and call.decision is not None
    assert call.decision.arguments is None  # a plain approval: nothing was edited
    told = [m.content for m in chat.transcript if getattr(m, "role", "") == "tool"]
    assert told and not any("edited" in str(t) for t in told)


_SECRET_NAMES = st.sampled_from(["api_keys", "password", "tokens", "note", "items"])
_VALUES = st.recursive(
    st.one_of(st.sampled_from(["***", "hunter2", "x"]), st.integers(0, 3), st.booleans()),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(_SECRET_NAMES, inner, max_size=3)
    ),
    max_leaves=10,
)


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(_SECRET_NAMES, _VALUES, min_size=1, max_size=3))
def test_arguments_left_as_shown_are_the_calls_own(arguments: dict[str, Any]) -> None:
    shown = json.loads(json.dumps(redacted(arguments)))
    assert unredacted(shown, arguments) == arguments
