"""``evaluate(..., decide=...)`` over chats that ask a person (``ask_user``, an external
tool) parks those cases: ``decide=`` decides gated calls, never an input. The line under
the scorecard said "decide= left them undecided (it returned None, or raised...)" though
``decide`` was never called; it now says the rows wait for an input, which ``decide=``
does not answer (and how to answer it).
"""

from __future__ import annotations

from typing import Any

import pytest

import nbagent
from nbagent import Chat, ask_user
from nbagent.evaluation import answer_contains


@pytest.mark.parametrize("with_decide", [True, False])
def test_rows_waiting_for_an_answer_say_decide_does_not_give_it(
    capsys: pytest.CaptureFixture[str], with_decide: bool
) -> None:
    asked: list[Any] = []

    def decide(call: Any) -> str:
        asked.append(call)
        return "approve"

    card = nbagent.evaluate(
        ["Ask the user which colour they prefer"],
        lambda: Chat("demo", display=False).with_tools(ask_user),
        [answer_contains("green")],
        decide=decide if with_decide else None,
        progress=False,
    )
    assert asked == []  # an input is never put to decide=
    assert list(card["status"]) == ["awaiting_approval"]
    notices = [line for line in capsys.readouterr().err.splitlines() if "await an input" in line]
    assert notices
    (line,) = notices
    assert "decide= does not answer it" in line and "chat.answer" in line
    assert ("decide= left them undecided" in line) == with_decide  # said of gated calls only
    assert "gated calls" in line
