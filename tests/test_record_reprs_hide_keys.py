"""``repr`` of the chat's record rows hides keys as ``repr(ToolCall)`` does.

``repr(chat.record.inputs)`` showed a key the model put in its question (and in a decline's
reason) in clear, and ``repr`` of a call's row its arguments, though ``repr`` of the
``PendingInput`` and the ``ToolCall`` inside them showed ``***``.
"""

from __future__ import annotations

from nbagent import Chat, ask_user, tool
from nbagent.testing import ScriptedProvider, call_tools, reply

SK = "sk-proj-Abc123Def456Ghi789Jkl012Mno345"
PASSWORD = "hunter2-correct-horse"


@tool
def connect(host: str, api_key: str, dsn: str) -> str:
    """Connect.

    Args:
        host: Where.
        api_key: The key.
        dsn: The database.
    """
    return "connected"


def test_the_record_rows_show_no_key() -> None:
    chat = Chat(
        provider=ScriptedProvider(
            [
                call_tools(
                    ("connect", {"host": "h", "api_key": SK, "dsn": f"pg://u:{PASSWORD}@h/d"}),
                    ("ask_user", {"question": f"Is {SK} still valid?"}, "q1"),
                    ("ask_user", {"question": f"Rotate {SK}?"}, "q2"),
                ),
                reply("done"),
            ]
        ),
        display=False,
    ).with_tools(connect, ask_user)
    chat.ask("go")
    chat.answer("q1", "yes")
    chat.decline("q2", f"ask about {SK} later")
    chat.complete()
    inputs = repr(chat.record.inputs)
    assert SK not in inputs
    assert "Is sk-*** still valid?" in inputs and "ask about sk-*** later" in inputs
    assert "InputRecord(input_id='q1'" in inputs
    call = repr(chat.record.call(chat.record.calls[0].call_id))
    assert call.startswith("CallRecord(call_id=")
    assert SK not in call and PASSWORD not in call and "'api_key': '***'" in call
    # the values themselves are the record's
    assert SK in chat.record.inputs[0].message
