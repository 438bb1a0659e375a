"""A run becomes a test: :func:`to_pytest` writes a chat as a pytest file that replays it offline.

The file asks the chat's user messages again with ``replay="only"`` (the model
is never asked: :class:`~nbagent.testing.OfflineProvider`), makes the recorded
decisions, and asserts the same calls (names, arguments, statuses) and the
same final answer. The recorded responses go to a directory beside it
(``<file stem>_recordings/``, one JSON file per request, with the results of
the calls that ran). Tools importable by module path are imported and run for
real, so a change in their behaviour changes the next request and the test
fails saying which message differs; a tool that cannot be imported (defined
in a notebook, a lambda, a closure) becomes a
:func:`~nbagent.testing.stand_in` whose recorded results are replayed, which
the file says in a comment.
"""

from __future__ import annotations

import importlib
import os
import pprint
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .._recording import RecordedResult
from .._replay import DirectoryRecordings
from .._result_text import without_edit_note
from .._tools import FunctionTool, Tool
from .._types import ChatMessage, short_id

_RAN = ("ok", "error", "timed_out")


def _importable(t: Tool) -> str | None:
    """``from module import name`` (or ``name()`` for a class), if that gives this tool back."""
    target: Any = t if isinstance(t, FunctionTool) else type(t)
    fn = t.fn if isinstance(t, FunctionTool) else target
    module, qual = getattr(fn, "__module__", None), getattr(fn, "__qualname__", "")
    if not module or module == "__main__" or "<" in qual or "." in qual:
        return None
    try:
        found = getattr(importlib.import_module(module), qual)
    except Exception:
        return None
    if isinstance(t, FunctionTool):
        return f"from {module} import {qual}" if found is t else None
    if found is not target:
        return None
    try:
        target()
    except Exception:
        return None
    return f"from {module} import {qual}"


def _literal(value: Any) -> str:
    return pprint.pformat(value, width=88, sort_dicts=False)


def _slug(text: str) -> str:
    return re.sub(r"[^0-9a-zA-Z_]+", "_", text).strip("_").lower() or "chat"


def to_pytest(chat: Any, path: str | os.PathLike[str], *, name: str | None = None) -> Path:
    """Write a pytest file that replays ``chat`` offline and checks it does the same again.

    Args:
        chat: A chat that ran in this process (its recordings are found where
            they live: the process, a recordings directory, its store).
        path: The test file to write (``tests/test_weather.py``); its
            recordings go to ``<stem>_recordings/`` beside it.
        name: The test function's name (default: from the first message).

    Returns:
        The path of the test file.

    Raises:
        ValueError: The chat has nothing to replay (no recorded request in
            this process, e.g. a chat loaded from a store), or a turn sent
            images (not exported).
    """
    path = Path(path)
    if path.suffix != ".py":
        raise ValueError(f"to_pytest writes a .py file, got {str(path)!r}")
    recordings = chat.recordings()
    if not recordings:
        raise ValueError(
            "this chat has no recorded model request to replay (only a chat that ran in "
            "this process has them: run the chat, then export it)"
        )
    transcript = chat.transcript
    turns: list[str] = []
    seen_turns: set[int] = set()
    for m in transcript:
        if isinstance(m, ChatMessage) and m.role == "user" and m.turn not in seen_turns:
            seen_turns.add(m.turn)
            if m.parts:
                raise ValueError(f"turn {m.turn} sent images or files; to_pytest cannot export it")
            turns.append(m.content)

    calls = chat.tool_calls
    decisions = {
        c.id: (c.decision.verdict, c.decision.reason, c.decision.arguments)
        for c in calls
        if c.decision is not None and not c.hosted
    }
    expected_calls = [(c.name, c.arguments, c.status) for c in calls]
    last = chat.last_assistant_message
    answer = None if last is None else last.content

    # the tools: imported when importable, else stand-ins with their results replayed
    imports: list[str] = []
    stand_ins: list[str] = []
    uses: list[str] = []
    replayed: list[str] = []
    gated = {c.name for c in calls if c.approval is not None and c.approval.required}
    for t in chat.tools:
        line = _importable(t)
        if line is not None:
            imports.append(line)
            uses.append(line.rsplit(" ", 1)[1] + ("" if isinstance(t, FunctionTool) else "()"))
            continue
        var = _slug(t.name).upper() + "_STAND_IN"
        spec = t.spec
        stand_ins.append(
            f"# {t.name} cannot be imported here (defined in {_where(t)}): its recorded\n"
            f"# results are replayed (replay_tools), the tool itself never runs in this test.\n"
            f"{var} = stand_in(\n"
            f"    {spec.name!r},\n"
            f"    {spec.description!r},\n"
            f"    {_indent(_literal(spec.input_schema))},\n"
            f"    requires_approval={t.name in gated},\n"
            ")\n"
        )
        uses.append(var)
        replayed.append(t.name)

    # the recordings, and the results of the calls that ran
    folder = path.with_name(f"{path.stem}_recordings")
    sidecar = DirectoryRecordings(folder)
    by_id = {c.id: c for c in calls}
    for step, rec in sorted(recordings.items()):
        sidecar.add(rec, chat.id, step, False)
        for asked in rec.response.tool_calls:
            c = by_id.get(asked.id)
            if c is None or c.result is None or c.status not in _RAN:
                continue
            edited = c.decision is not None and c.decision.arguments is not None
            content = without_edit_note(c.result.content, edited)
            ran = RecordedResult(c.status, content, c.result.parts, c.effective_arguments)
            sidecar.add_result(rec.key, c.id, ran)

    provider = chat.provider
    options = {
        "system": chat.system,
        "reasoning": chat.reasoning,
        "cache": chat.cache,
        "max_steps": chat.max_steps,
        "max_cost_usd": chat.max_cost_usd,
        "max_total_tokens": chat.max_total_tokens,
    }
    kwargs = "".join(f"        {k}={v!r},\n" for k, v in options.items() if v not in (None, False))
    tool_options = {
        k: v
        for k, v in chat.tool_options.as_dict().items()
        if k in ("choice", "calls") and v not in ("auto", "many")
    }
    test_name = "test_" + _slug(name or f"replays_{turns[0][:40] if turns else short_id(chat.id)}")
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    body = f'''"""Chat {chat.id} replayed offline (written by nbagent.testing.to_pytest, {now}).

The model is never asked (replay="only"): its {len(recordings)} recorded response(s) are in
{folder.name}/ beside this file. Imported tools run for real, so a change in what
they return changes the next request, and the test fails saying which message
differs from the recording. It checks the same calls (names, arguments,
statuses) and the same final answer.
"""

from pathlib import Path

from nbagent import Chat
from nbagent.testing import OfflineProvider, replay_turns, stand_in
{"".join(line + chr(10) for line in imports)}
RECORDINGS = Path(__file__).with_name({folder.name!r})

{"".join(s + chr(10) for s in stand_ins)}TURNS = {_literal(turns)}

DECISIONS = {_literal(decisions)}

EXPECTED_CALLS = {_literal(expected_calls)}

EXPECTED_ANSWER = {_literal(answer)}


def {test_name}() -> None:
    chat = Chat(
        provider=OfflineProvider({provider.name!r}, {provider.model!r}),
{kwargs}        replay="only",
        replay_tools={_literal(replayed)},
        recordings=RECORDINGS,
        display=False,
    )
    chat.with_tools({", ".join(uses)})
{f"    chat.with_tool_options(**{tool_options!r}){chr(10)}" if tool_options else ""}\
    answer = replay_turns(chat, TURNS, DECISIONS)
    assert [(c.name, c.arguments, c.status) for c in chat.tool_calls] == EXPECTED_CALLS
    assert answer == EXPECTED_ANSWER
'''
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body, encoding="utf-8")
    return path


def _where(t: Tool) -> str:
    fn = t.fn if isinstance(t, FunctionTool) else type(t)
    module = getattr(fn, "__module__", "?")
    return (
        "a notebook or script (__main__)" if module == "__main__" else f"{module} (not reachable)"
    )


def _indent(text: str) -> str:
    return text.replace("\n", "\n    ")


__all__ = ["to_pytest"]
