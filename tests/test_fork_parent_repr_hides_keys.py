"""``repr(fork.parent)`` hides a key or a password as ``ToolCall``'s repr does.

``ForkParent`` had the dataclass repr: ``value={'host': 'b', 'password': 'n3wPassw0rd!'}``
and a result's ``postgresql://admin:ResPW99@db/x`` were printed whole (a link read back
from a store written before its value was hidden, or one made by hand, holds them).
"""

from __future__ import annotations

from typing import Any

import pytest

from nbagent import ForkParent

CASES: list[tuple[str, Any, str]] = [
    ("arguments", {"host": "b", "password": "n3wPassw0rd!"}, "n3wPassw0rd!"),
    ("arguments", {"creds": {"api_key": "k9Zq81LmNo24"}}, "k9Zq81LmNo24"),
    ("result", "postgresql://admin:ResPW99@db/x", "ResPW99"),
    ("result", "key sk-proj-FORKKEY1234567890abcd", "FORKKEY1234567890"),
    ("system", "use api_key=Xy7Qp2Lm9Rt4 for the CRM", "Xy7Qp2Lm9Rt4"),
]


@pytest.mark.parametrize(("change", "value", "secret"), CASES)
def test_the_repr_hides_the_values_secrets(change: str, value: Any, secret: str) -> None:
    parent = ForkParent("c1", 2, "k" if change != "system" else None, change, value)  # type: ignore[arg-type]
    shown = repr(parent)
    assert secret not in shown
    assert "***" in shown
    assert shown.startswith("ForkParent(chat_id='c1', step=2, ")
    assert f"change={change!r}" in shown
    assert parent.value == value  # only the repr hides: the link keeps its value


def test_a_plain_value_is_shown_as_it_is() -> None:
    parent = ForkParent("c1", 1, "k", "decision", "approved")
    assert repr(parent) == (
        "ForkParent(chat_id='c1', step=1, call_id='k', change='decision', value='approved')"
    )
    assert repr(ForkParent("c1", 0)) == (
        "ForkParent(chat_id='c1', step=0, call_id=None, change='none', value=None)"
    )
