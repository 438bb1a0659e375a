"""Every text the inbox's widget builds (the summary after a click, errors, the filter in
words, the preview) shows no API key: a denial reason quoting one reads ``sk-***``; and the
reason itself is not left in the widget's synced state (which a saved notebook keeps)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nbagent
from nbagent import Chat, Tool
from nbagent.testing import ScriptedProvider, call_tools, reply


class Rotate(Tool):
    """Rotate a credential."""

    requires_approval = True

    def execute(self, name: str) -> str:
        raise AssertionError("never run in these tests")


def parked(name: str) -> Chat:
    script = [call_tools(("rotate", {"name": name})), reply("done")]
    chat = Chat(provider=ScriptedProvider(script), display=False).with_tools(Rotate)
    chat.ask("rotate")
    return chat


PREFIXES = ["sk-proj-", "sk-ant-", "gsk_", "xai-", "AIza", "hf_", "pplx-", "nvapi-", "r8_"]
keys = st.builds(
    lambda prefix, body, digit: prefix + body + digit + body[::-1],
    st.sampled_from(PREFIXES),
    st.text(
        alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", min_size=8, max_size=30
    ),
    st.sampled_from("0123456789"),
)
around = st.text(alphabet="abc XYZ,.;:()", max_size=12)


def _texts(w: Any) -> list[str]:
    """Every text trait the front end draws, and the preview's and decided list's texts."""
    out = [
        w.summary,
        w.error,
        w.python_filter,
        w.filter_problem,
        w.sources,
        getattr(w, "stale", ""),
    ]
    out += [str(v) for v in w.preview.values()]
    out.append(str(w.action))  # synced state a saved notebook keeps
    out += [d["words"] for d in w.decided]
    return out


@pytest.fixture(scope="module")
def chats() -> list[Chat]:
    return [parked(f"svc-{i}") for i in range(120)]


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(key=keys, before=around, after=around)
def test_a_denial_reason_quoting_a_key_is_shown_redacted(
    chats: list[Chat], key: str, before: str, after: str
) -> None:
    chat = next(c for c in chats if c.pending_approvals)  # one not decided by an earlier example
    box = nbagent.inbox([chat], continue_chats=False)
    w = box.widget
    try:
        w.click("deny", keys=[w.rows[0]["key"]], reason=f"{before} {key} {after}")
        assert w.summary.startswith("Denied 1 call ("), (w.summary, w.error)
        for text in _texts(w):
            assert key not in text, text
        assert "***" in w.summary
    finally:
        box.close()


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(key=keys)
def test_a_filter_holding_a_key_is_shown_redacted(chats: list[Chat], key: str) -> None:
    box = nbagent.inbox(chats[-1:], continue_chats=False)
    w = box.widget
    try:
        box.filter(where={"name": key, "x": lambda v: True})  # set from Python: described
        w.click("preview", verb="deny", reason=f"rotate {key}")
        assert w.python_filter and w.preview
        for text in _texts(w):
            assert key not in text, text
        w.click("cancel")
        w.query = {"tool": "", "server": "", "text": f"name<{key}"}  # a term it cannot read
        assert w.filter_problem
        for text in _texts(w):
            assert key not in text, text
    finally:
        box.close()
