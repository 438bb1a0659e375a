"""**Edit arguments** then **Approve with these arguments** with nothing changed (a secret left
as the card shows it, ``***``) is a plain approval: the card is not tagged *edited*, the static
forms say "approved", and the model reads the result alone, no note of an edit."""

from __future__ import annotations

import json
from typing import Any

from _views import widgets_in

from nbagent import Chat, Tool
from nbagent.notebook import ChatView
from nbagent.notebook import _continuation as cont
from nbagent.notebook._fallback import chat_mimebundle
from nbagent.notebook._widgets import ActionCard
from nbagent.testing import ScriptedProvider, call_tools, reply

KEY = "sk-proj-ABCdef1234567890XYZabcdEFG"
ARGUMENTS = {"service": "billing", "token": KEY, "retries": 3}
RAN: list[dict[str, Any]] = []


class SetCredential(Tool):
    """Store a credential for a service."""

    requires_approval = True

    def execute(self, service: str, token: str, retries: int = 1) -> str:
        RAN.append({"service": service, "token": token, "retries": retries})
        return "stored"


def test_an_edit_approved_unchanged_is_a_plain_approval() -> None:
    RAN.clear()
    chat = Chat(
        provider=ScriptedProvider([call_tools(("set_credential", ARGUMENTS, "s1")), reply("ok")]),
        display=False,
    ).with_tools(SetCredential)
    view = ChatView(chat)
    chat.ask("save my key")
    (card,) = [w for w in widgets_in(view) if isinstance(w, ActionCard)]
    assert json.loads(card.arguments)["token"] == "***"  # the editor shows the key hidden
    card.click("edit", arguments=card.arguments)  # approved as the editor showed it
    assert cont.continuation_for(chat).wait(10)
    assert RAN == [ARGUMENTS]  # the real key ran
    call = chat.get_call("s1")
    assert call.decision is not None and call.decision.arguments is None
    (message,) = [m for m in chat.transcript if getattr(m, "role", "") == "tool"]
    assert message.content == "stored"  # no "[The user edited the arguments ...]"
    assert "edited" not in chat_mimebundle(chat)["text/plain"]
    assert "edited" not in card.value
