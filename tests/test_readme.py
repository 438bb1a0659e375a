"""The README's first example runs as written, offline, and does what its comments say; every
keyword its examples pass exists."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path
from typing import Any

README = Path(__file__).parent.parent / "README.md"


def test_fifteen_line_example_runs() -> None:
    text = README.read_text()
    section = text[text.index("## Fifteen lines") :]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None
    namespace: dict[str, Any] = {}
    exec(compile(code.group(1), "README.md", "exec"), namespace)
    chat = namespace["chat"]
    assert chat.status == "complete"
    log = chat.log
    assert list(log["tool"]) == ["get_weather", "get_weather", "issue_refund"]
    assert list(log["status"]) == ["ok", "ok", "ok"]
    assert list(log["decision"]) == ["auto", "auto", "approved"]
    assert "refunded order 42" in chat.transcript[-1].content


def test_fork_and_compare_example_runs() -> None:
    text = README.read_text()
    section = text[text.index("## Fork and compare") :]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None
    namespace: dict[str, Any] = {}
    exec(compile(code.group(1), "README.md", "exec"), namespace)
    chat, what_if, diff = namespace["chat"], namespace["what_if"], namespace["diff"]
    assert list(chat.log["status"]) == ["denied"]
    assert list(what_if.log["status"]) == ["ok"] and what_if.status == "complete"
    assert what_if.parent.chat_id == chat.id and what_if.parent.change == "decision"
    fields = set(zip(diff["step"], diff["field"], strict=True))
    assert {(1, "call 1 decision"), (1, "call 1 result"), (2, "text")} <= fields
    assert "refunded order 42" in what_if.transcript[-1].content


def test_own_loop_example_runs() -> None:
    """The complete_with_tools() loop runs as written and ends on the model's answer."""
    text = README.read_text()
    section = text[text.index("### Your own loop") :]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None
    namespace: dict[str, Any] = {"print": lambda *a: None}
    exec(compile(code.group(1), "README.md", "exec"), namespace)
    messages, response = namespace["messages"], namespace["response"]
    assert [type(m).__name__ for m in messages] == [
        "ChatMessage",
        "AssistantToolCallMessage",
        "ToolResultMessage",
    ]
    assert messages[2].content == "31°C in Lagos"
    assert not response.tool_calls and "Lagos" in response.text


# ---------------------------------------------------------------- keywords
def _namespace() -> dict[str, Any]:
    import nbagent
    import nbagent.log
    import nbagent.providers
    import nbagent.store
    import nbagent.testing

    names: dict[str, Any] = {}
    for module in (nbagent.testing, nbagent.store, nbagent.providers, nbagent):
        names.update({n: getattr(module, n) for n in module.__all__})
    names.update(
        nbagent=nbagent,
        log=nbagent.log,
        chat=nbagent.Chat,
        chat1=nbagent.Chat,
        provider=nbagent.OpenAIProvider,
        store=nbagent.SQLiteStore,
    )
    return names


def _resolve(node: ast.expr, names: dict[str, Any]) -> Any:
    """The function or class a call names, or None when it cannot be known statically."""
    if isinstance(node, ast.Name):
        return names.get(node.id)
    if isinstance(node, ast.Attribute):
        base = _resolve(node.value, names)
        if not (inspect.isclass(base) or inspect.ismodule(base)):
            return None  # a property's value, a call's result...
        attr = inspect.getattr_static(base, node.attr, None)
        assert attr is not None, f"the README uses {ast.unparse(node)}, which does not exist"
        return getattr(base, node.attr) if callable(attr) or inspect.ismodule(attr) else None
    return None


def _python_in_readme(text: str) -> list[ast.AST]:
    """Every python code block, and every inline code span that parses as an expression
    (``Chat(timeout=, max_retries=)`` included: a bare ``kw=`` is read as ``kw=...``)."""
    trees: list[ast.AST] = []
    for block in re.findall(r"```python\n(.*?)```", text, re.S):
        flags = ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
        trees.append(compile(block, "README.md", "exec", flags=flags))
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    for span in re.findall(r"`([^`]+)`", prose):
        try:
            trees.append(ast.parse(re.sub(r"=\s*(?=[,)])", "=...", span), mode="eval"))
        except SyntaxError:
            continue
    return trees


def _unknown_keywords(text: str) -> tuple[list[str], int]:
    """Keywords passed in ``text``'s examples that their callable does not take; how many fit."""
    names = _namespace()
    bad: list[str] = []
    checked = 0
    for tree in _python_in_readme(text):
        for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
            target = _resolve(call.func, names)
            keywords = [k.arg for k in call.keywords if k.arg is not None]
            if target is None or not keywords:
                continue
            params = inspect.signature(target).parameters
            if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
                continue  # e.g. OpenAIProvider(**client_kwargs): the SDK client takes the rest
            for name in keywords:
                if name in params and params[name].kind is not inspect.Parameter.POSITIONAL_ONLY:
                    checked += 1
                else:
                    bad.append(f"{ast.unparse(call)}: {ast.unparse(call.func)} takes no {name}=")
    return bad, checked


def test_every_keyword_in_the_readme_exists() -> None:
    """``Chat(timeout=...)`` in the README while ``Chat`` takes no ``timeout`` is a bug."""
    bad, checked = _unknown_keywords(README.read_text())
    assert bad == []
    assert checked >= 20, checked


def test_the_keyword_check_finds_an_offence() -> None:
    text = "Retries: `Chat(timeout=, max_retries=)`.\n```python\nchat.ask_later(x, wait=1)\n```\n"
    bad, _ = _unknown_keywords(text)
    assert bad == [
        "chat.ask_later(x, wait=1): chat.ask_later takes no wait=",
        "Chat(timeout=..., max_retries=...): Chat takes no timeout=",
        "Chat(timeout=..., max_retries=...): Chat takes no max_retries=",
    ]


def test_batch_example_runs(tmp_path: Path, monkeypatch: Any) -> None:
    import pandas as pd

    monkeypatch.chdir(tmp_path)
    text = README.read_text()
    section = text[text.index("## Many chats at once") :]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None
    first, _, rest = code.group(1).partition("store = SQLiteStore")
    namespace: dict[str, Any] = {}
    exec(compile(first, "README.md", "exec"), namespace)
    parked = namespace["result"]
    assert list(parked["status"]) == ["done", "awaiting_approval", "done"]
    assert list(parked["pending"]) == [0, 1, 0]
    exec(compile("store = SQLiteStore" + rest, "README.md", "exec"), namespace)
    result = namespace["result"]
    assert list(result["status"]) == ["done"] * 3
    assert list(result["chat_id"]) == list(parked["chat_id"])
    assert "refunded order 42" in result.loc[1, "reply"]
    log = namespace["nbagent"].read_log(result)
    assert list(log["tool"]) == ["order_status", "issue_refund", "order_status"]
    assert list(log["decision"]) == ["auto", "approved", "auto"]
    assert isinstance(result, pd.DataFrame)
    namespace["store"].close()
