"""The README is one screen whose example runs; the docs' examples do what their comments say.

(tests/test_docs_code_blocks.py runs every runnable block; these check what they produce.)"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from _docs import DOCS, README, ROOT, blocks, python_after, section


# ---------------------------------------------------------------- the README
def test_the_readme_is_one_screen() -> None:
    """What it is, the two commands, the promise, the sixty-second example and where to go
    next; the reference lives in the docs. (It was 139 lines, a feature tour among them.)"""
    lines = README.read_text().splitlines()
    assert len(lines) <= 80, len(lines)
    assert [line for line in lines if line.startswith("## ")] == [
        "## Sixty seconds", "## Where next", "## Documentation",
    ]  # fmt: skip


def test_the_readmes_first_two_commands_are_make_lab_and_make_test() -> None:
    shell = [b for b in blocks(README) if b.language == "bash"]
    commands = [line.split("#")[0].strip() for line in shell[0].code.splitlines()]
    assert commands[:2] == ["make lab", "make test"]
    assert "](docs/images/live-view.png)" in README.read_text()[:2000]  # the picture, on top


def test_the_readme_says_how_to_build_the_docs() -> None:
    docs = section(README, "## Documentation")
    assert "make docs" in docs and "make docs-serve" in docs


def test_every_local_link_of_the_readme_exists() -> None:
    """The site's links are checked by the strict build; the README's by this."""
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README.read_text())
    local = [link for link in links if "://" not in link]
    assert len(local) >= 20  # the picture, every task page and guide, the contributors' pages
    assert [link for link in local if not (ROOT / link).exists()] == []


def test_the_readme_links_every_task_page() -> None:
    text = README.read_text()
    for page in (
        "approve-from-a-button", "controlling-tool-execution", "decide-from-another-process",
        "batch", "ray", "mcp", "replay-and-fork", "store", "analysis", "testing",
    ):  # fmt: skip
        assert f"](docs/{page}.md)" in text, page


@pytest.mark.parametrize("page", [README, DOCS / "getting-started.md"], ids=lambda p: p.name)
def test_the_sixty_second_example_ends_with_an_approval(page: Path) -> None:
    namespace: dict[str, Any] = {}
    exec(compile(python_after(page, "## Sixty seconds"), str(page), "exec"), namespace)
    chat = namespace["chat"]
    assert chat.status == "complete"
    log = chat.log
    assert list(log["tool"]) == ["get_weather", "get_weather", "issue_refund"]
    assert list(log["status"]) == ["ok", "ok", "ok"]
    assert list(log["decision"]) == ["auto", "auto", "approved"]
    assert "refunded order 42" in chat.transcript[-1].content


# ---------------------------------------------------------------- the pages
def test_fork_and_compare_example_runs() -> None:
    page = DOCS / "replay-and-fork.md"
    namespace: dict[str, Any] = {}
    exec(compile(python_after(page, "## Fork and compare"), str(page), "exec"), namespace)
    chat, what_if, diff = namespace["chat"], namespace["what_if"], namespace["diff"]
    assert list(chat.log["status"]) == ["denied"]
    assert list(what_if.log["status"]) == ["ok"] and what_if.status == "complete"
    assert what_if.parent.chat_id == chat.id and what_if.parent.change == "decision"
    fields = set(zip(diff["step"], diff["field"], strict=True))
    assert {(1, "call 1 decision"), (1, "call 1 result"), (2, "text")} <= fields
    assert "refunded order 42" in what_if.transcript[-1].content


def test_own_loop_example_runs() -> None:
    """The complete_with_tools() loop runs as written and ends on the model's answer."""
    page = DOCS / "controlling-tool-execution.md"
    code = python_after(page, "## Your own loop: `complete_with_tools()`")
    namespace: dict[str, Any] = {"print": lambda *a: None}
    exec(compile(code, str(page), "exec"), namespace)
    messages, response = namespace["messages"], namespace["response"]
    assert [type(m).__name__ for m in messages] == [
        "ChatMessage",
        "AssistantToolCallMessage",
        "ToolResultMessage",
    ]
    assert messages[2].content == "31°C in Lagos"
    assert not response.tool_calls and "Lagos" in response.text


def test_the_approvals_example_does_what_its_comments_say() -> None:
    page = DOCS / "controlling-tool-execution.md"
    namespace: dict[str, Any] = {}
    exec(compile(python_after(page, "# Controlling tool execution"), str(page), "exec"), namespace)
    exec(compile(python_after(page, "## Approvals"), str(page), "exec"), namespace)
    log = namespace["chat"].log
    assert list(log["status"]) == ["ok", "denied", "ok"]
    assert list(log["decision"]) == ["approved", "denied", "policy"]
    assert list(log["result_preview"].iloc[[0, 2]]) == ["refunded order 43", "refunded order 8"]
    assert log["reason"].iloc[1] == "order 7 was never paid"


def test_the_step_example_names_the_kinds_it_shows() -> None:
    page = DOCS / "controlling-tool-execution.md"
    code = python_after(page, "## Driving the loop: step, complete and budgets")
    namespace: dict[str, Any] = {}
    exec(compile(python_after(page, "# Controlling tool execution"), str(page), "exec"), namespace)
    lines = code.splitlines()
    exec(compile("\n".join(lines[:2]), str(page), "exec"), namespace)
    for line in lines[2:]:
        expression, _, comment = line.partition("#")
        assert eval(expression, namespace) == eval(comment, {})


def test_batch_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pandas as pd

    monkeypatch.chdir(tmp_path)
    page = DOCS / "batch.md"
    first, _, rest = python_after(page, "# Run over a DataFrame").partition("store = SQLiteStore")
    namespace: dict[str, Any] = {}
    exec(compile(first, str(page), "exec"), namespace)
    parked = namespace["result"]
    assert list(parked["status"]) == ["done", "awaiting_approval", "done"]
    assert list(parked["pending"]) == [0, 1, 0]
    exec(compile("store = SQLiteStore" + rest, str(page), "exec"), namespace)
    result = namespace["result"]
    assert list(result["status"]) == ["done"] * 3
    assert list(result["chat_id"]) == list(parked["chat_id"])
    assert "refunded order 42" in result.loc[1, "reply"]
    log = namespace["nbagent"].read_log(result)
    assert list(log["tool"]) == ["order_status", "issue_refund", "order_status"]
    assert list(log["decision"]) == ["auto", "approved", "auto"]
    assert isinstance(result, pd.DataFrame)
    namespace["store"].close()


def test_the_token_budget_example_stops_then_finishes() -> None:
    page = DOCS / "costs-and-budgets.md"
    code = python_after(page, "## Budgets")
    head, _, tail = code.partition("chat.status, chat.exhausted_budget")
    namespace: dict[str, Any] = {}
    exec(compile(head, str(page), "exec"), namespace)
    chat = namespace["chat"]
    assert (chat.status, chat.exhausted_budget) == ("budget_exhausted", "tokens")
    exec(compile(tail.partition("\n")[2], str(page), "exec"), namespace)
    assert chat.status == "complete"


def test_the_extras_table_has_every_extra_and_what_dev_includes() -> None:
    """getting-started.md's table lacked `nbagent[otel]`, and its `dev` row left otel out."""
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    rows = {
        found.group(1): found.group(2)
        for found in re.finditer(
            r"^\| `nbagent\[(\w+)\]` \| ([^|]*) \|", (DOCS / "getting-started.md").read_text(), re.M
        )
    }
    assert sorted(rows) == sorted(extras)
    included = re.match(r"nbagent\[([\w,]+)\]", extras["dev"][0])
    assert included is not None
    named = {word.strip() for word in rows["dev"].split(",")}
    assert [extra for extra in included.group(1).split(",") if extra not in named] == []


def test_the_result_cap_is_described_as_it_cuts() -> None:
    """A result was said to be "capped at 20,000 characters"; it keeps 20,000 and adds a line
    saying how many were cut (20,035 characters for a result of 20,050)."""
    from nbagent._result_text import to_content

    text = to_content("x" * 20_050)
    assert text == "x" * 20_000 + "\n[truncated: 50 more characters]"
    page = " ".join((DOCS / "controlling-tool-execution.md").read_text().split())
    assert "keeps its first 20,000 and a line saying how many were cut" in page
    assert "`[truncated: N more characters]`" in page


def test_the_log_glance_is_described_as_the_rich_display_only() -> None:
    """analysis.md said `chat.log` displays a glance; `print`/`repr` are pandas' own."""
    import nbagent

    chat = nbagent.Chat("demo")
    chat.ask("What is the weather in Paris?")
    log = chat.log
    import pandas as pd

    assert repr(log) == repr(pd.DataFrame(log))  # pandas' own, as any frame
    assert "decided_by" not in log._repr_mimebundle_()["text/plain"].split("\n")[0]
    page = " ".join((DOCS / "analysis.md").read_text().split())
    assert "`print(chat.log)` and `repr(chat.log)` are pandas' own, every column" in page


def test_park_decide_resume_runs_again_in_the_same_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run twice against one agent.db (a notebook's cells run again), the example decided the
    call by its bare id, which the demo model gives every chat's first call: the second run
    found it in two chats and raised DecisionError. It decides the call it was given."""
    page = DOCS / "decide-from-another-process.md"
    park = python_after(page, "## Park, decide, resume")
    decide = python_after(page, "## Park, decide, resume", index=1)
    monkeypatch.chdir(tmp_path)
    for _ in range(2):
        namespace: dict[str, Any] = {}
        exec(compile(park, str(page), "exec"), namespace)
        exec(compile(decide, str(page), "exec"), namespace)
        chat = namespace["chat"]
        assert chat.status == "complete"
        assert list(chat.log["status"]) == ["ok"] and list(chat.log["decision"]) == ["approved"]
        namespace["store"].close()
