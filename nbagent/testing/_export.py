"""A run becomes a test: :func:`to_pytest` writes a chat as a pytest file that replays it offline.

The file asks the chat's user messages again with ``replay="only"`` (the model
is never asked: :class:`~nbagent.testing.OfflineProvider`), makes the recorded
decisions, gives the recorded answers (``ask_user``, external tools), and
asserts the same calls (names, arguments, statuses), the same status and the
same final answer; it stops where the chat stopped (waiting for a decision, say).
The recorded responses go to a directory beside it (``<file stem>_recordings/``,
one JSON file per request, with the results of the calls that ran). Tools
importable by module path are imported (under their own names in the file, so
no tool name can clash with the file's) and run for real, so a change in their
behaviour changes the next request and the test fails saying which message
differs; a tool that cannot be imported (defined in a notebook, a lambda, a
closure) becomes a :func:`~nbagent.testing.stand_in` whose recorded results are
replayed, which the file says in a comment. A call the chat was given its result
for (a fork's ``result=``: it never ran) has that result replayed, its tool's
other calls run for real (an ``ask_user`` or external call is answered with it).
Tool options are set as the run set them: a fork with ``tool_options=`` at step N
asks its shared steps with its parent's and sets its own once step N has finished
(``replay_turns(options=)``). A hosted MCP server is written
without its secrets (its headers' names only, which the recordings match on).
"""

from __future__ import annotations

import builtins
import importlib
import keyword
import os
import pprint
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from .._approvals import HUMAN
from .._events import OptionsChanged, StepFinished, ToolCallStarted
from .._hosted import HostedMCP
from .._output import as_output
from .._recording import RecordedResult, _digest, provider_settings, result_slot
from .._replay import DirectoryRecordings
from .._result_text import without_edit_note
from .._tools import FunctionTool, Tool
from .._types import ChatMessage, short_id

_RAN = ("ok", "error", "timed_out")
_INPUT_KINDS = ("ask_user", "external")  # a call parked on an input (the others: a run's)
_SECRET_QUERY = re.compile(r"key|token|secret|auth|sig|pass|session|cred|code", re.I)
_HEADER_STAND_IN = "not-exported"

# names the generated file defines or imports itself: a tool's variable never takes one
_TAKEN = {
    "Path",
    "Chat",
    "HostedMCP",
    "OfflineProvider",
    "replay_turns",
    "stand_in",
    "RECORDINGS",
    "TURNS",
    "DECISIONS",
    "INPUTS",
    "OUTPUTS",
    "OPTIONS",
    "EXPECTED_CALLS",
    "EXPECTED_STATUS",
    "EXPECTED_ANSWER",
    "chat",
    "answer",
}


class _Names:
    """Unique, identifier-safe variable names for the generated file."""

    def __init__(self) -> None:
        self.used = set(_TAKEN) | set(dir(builtins))

    def take(self, prefix: str, text: str) -> str:
        base = prefix + (re.sub(r"[^0-9a-zA-Z_]+", "_", text).strip("_") or "x")
        name, n = base, 1
        while name in self.used or keyword.iskeyword(name) or not name.isidentifier():
            n += 1
            name = f"{base}_{n}"
        self.used.add(name)
        return name


def _public(module: str) -> bool:
    return not any(part.startswith("_") for part in module.split("."))


def _modules(module: str) -> Iterator[str]:
    """Where to import from: the public packages above ``module`` and itself, shortest
    first (``nbagent._ask_user`` gives ``nbagent``, then ``nbagent._ask_user``)."""
    parts = module.split(".")
    for i in range(1, len(parts)):
        if parts[i - 1].startswith("_"):
            break
        yield ".".join(parts[:i])
    yield module


def _exported(obj: Any, module: str, same: Any = None) -> tuple[str, str] | None:
    """``(module, name)``: ``from module import name`` gives ``obj`` (or, with ``same``, a
    value ``same`` accepts), from a public module when one has it."""
    for where in _modules(module):
        try:
            mod = importlib.import_module(where)
        except Exception:
            continue
        loaded = vars(mod)  # what the module holds now (a lazy export is not loaded here)
        listed = [a for a in getattr(mod, "__all__", ()) if a in loaded]
        for attr in [*listed, *sorted(loaded)]:
            if attr.startswith("_") and where != module:
                continue
            value = loaded[attr]
            if value is obj or (same is not None and same(value)):
                return where, attr
    return None


def _importable(t: Tool) -> tuple[str, str, bool] | None:
    """``(module, name, call)``: ``from module import name`` gives this tool back (``call``:
    it is a class, called with no argument), by a public path when there is one."""
    if isinstance(t, FunctionTool):
        module, qual = getattr(t.fn, "__module__", None), getattr(t.fn, "__qualname__", "")
        if not module or module == "__main__" or "<" in qual or "." in qual:
            return None
        found = _exported(t, module)
        return None if found is None else (*found, False)
    cls = type(t)
    module = cls.__module__
    if not module or module == "__main__" or "<" in cls.__qualname__ or "." in cls.__qualname__:
        return None
    found = _exported(t, module)  # the instance itself (nbagent.ask_user)
    if found is not None:
        return (*found, False)
    try:
        fresh = cls()
    except Exception:
        return None
    by_class = _exported(cls, module)
    if by_class is not None and _public(by_class[0]):
        return (*by_class, True)
    # a public instance the model sees the same (AskUser() is nbagent.ask_user)
    same = _exported(t, module, lambda v: type(v) is cls and v.spec == fresh.spec)
    if same is not None and _public(same[0]):
        return (*same, False)
    return None if by_class is None else (*by_class, True)


def _literal(value: Any) -> str:
    return pprint.pformat(value, width=88, sort_dicts=False)


def _slug(text: str) -> str:
    return re.sub(r"[^0-9a-zA-Z_]+", "_", text).strip("_").lower() or "chat"


def to_pytest(chat: Any, path: str | os.PathLike[str], *, name: str | None = None) -> Path:
    """Write a pytest file that replays ``chat`` offline and checks it does the same again.

    The test stops where the chat stopped: a chat waiting for a decision or an
    answer exports a test that ends waiting for it (and checks so). Recorded
    answers (``ask_user``, external tools) are given again. A structured answer's
    type (``output=``) is imported by the test, so it must be importable from a
    module (or be a JSON Schema dict). A hosted MCP server is written without its
    headers' values and token (only the headers' names, which the recordings match
    on; the test never reaches it).

    Args:
        chat: A chat whose requests were recorded: its recordings are its own, or found
            where they were written (the process, a recordings directory, its store: a
            chat loaded from a store exports from the recordings the store keeps).
        path: The test file to write (``tests/test_weather.py``); its
            recordings go to ``<stem>_recordings/`` beside it.
        name: The test function's name (default: from the first message).

    Returns:
        The path of the test file.

    Raises:
        ValueError: The chat has nothing to replay (no recorded request: nothing in
            this process, its recordings directory or its store); a turn sent images or files,
            or an answer gave some; a turn asked for a structured answer whose type
            the test cannot import (defined in a notebook), or of a type the chat
            no longer holds (an earlier turn's, other than the latest turn's); a
            hosted MCP server's URL carries what may be a secret in its query; the
            chat's requests were made with different system prompts or models (a fork
            with ``system=`` or ``model=`` after step 0 shares its parent's requests).
    """
    path = Path(path)
    if path.suffix != ".py":
        raise ValueError(f"to_pytest writes a .py file, got {str(path)!r}")
    recordings = chat.recordings()
    if not recordings:
        raise ValueError(
            "this chat has no recorded model request to replay (none in this process, its "
            "recordings directory or its store); export the chat that ran, in its process, "
            "or give it a store or recordings= when it runs"
        )
    _one_system_and_model(chat, recordings)
    turns: list[str] = []
    turn_numbers: list[int] = []
    for m in chat.transcript:
        if isinstance(m, ChatMessage) and m.role == "user" and m.turn not in turn_numbers:
            turn_numbers.append(m.turn)
            if m.parts:
                raise ValueError(f"turn {m.turn} sent images or files; to_pytest cannot export it")
            turns.append(m.content)

    names = _Names()
    test_name = "test_" + _slug(name or f"replays_{turns[0][:40] if turns else short_id(chat.id)}")
    names.used.add(test_name)
    imports: list[str] = []
    outputs = _outputs(chat, recordings, turn_numbers, names, imports)

    calls = chat.tool_calls
    expected_calls = [(c.name, c.arguments, c.status) for c in calls]
    last = chat.last_assistant_message
    answer = None if last is None else last.content

    # the tools: imported when importable, else stand-ins with their results replayed
    definitions: list[str] = []
    uses: list[str] = []
    replayed: list[str] = []  # the stand-ins
    given = _given_results(chat)  # calls answered with a result no tool returned
    asking = {r.call_id for r in chat.record.inputs if r.kind in _INPUT_KINDS}  # answered
    given_tools = {c.name for c in calls if c.id in given and c.id not in asking}
    gated = {c.name for c in calls if c.approval is not None and c.approval.required}
    for t in chat.tools:
        found = _importable(t)
        if found is not None:
            module, attr, call = found
            var = names.take("tool_", t.name)
            imports.append(f"from {module} import {attr} as {var}")
            uses.append(var + ("()" if call else ""))
            if t.name in given_tools:
                ids = ", ".join(
                    c.id for c in calls if c.id in given and c.id not in asking and c.name == t.name
                )
                definitions.append(
                    f"# {t.name} was not run for call {ids}: the chat was given its result\n"
                    f"# (a fork's result=), which is replayed (replay_tools); its other calls\n"
                    f"# run for real.\n"
                )
            continue
        var = names.take("STAND_IN_", t.name.upper())
        spec = t.spec
        definitions.append(
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
    hosted = [_hosted(t, names, definitions) for t in chat.hosted_tools]
    uses.extend(hosted)

    decisions = {
        c.id: (c.decision.verdict, c.decision.reason, c.decision.arguments, c.decision.by)
        for c in calls
        if c.decision is not None
    }
    inputs = _inputs(chat, set(replayed), given)
    replay_tools = [*replayed, *sorted(given_tools - set(replayed))]

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
            if c.name in given_tools and c.name not in replayed and c.id not in given:
                continue  # its tool runs for real in the test: no result of it to replay
            edited = c.decision is not None and c.decision.arguments is not None
            content = without_edit_note(c.result.content, edited)
            ran = RecordedResult(c.status, content, c.result.parts, c.effective_arguments)
            sidecar.add_result(rec.key, result_slot(c.id, c.effective_arguments), ran)

    status = chat.status
    # decided (or answered) and not carried on: the recorded run stopped before complete()
    complete_last = status != "ready" and not any(c.status == "approved" for c in calls)
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
    timeline = _options_timeline(chat)
    tool_options = timeline.pop(0, {})
    replay_args = ["chat", "TURNS", "DECISIONS"]
    constants = ""
    if timeline:  # options changed after a step (a fork's tool_options=, between turns)
        replay_args.append("options=OPTIONS")
        constants += (
            "\n# the tool options set after a step, as the recorded run set them (the\n"
            "# requests before were asked with the earlier ones)\n"
            f"OPTIONS = {_literal(timeline)}\n"
        )
    if inputs:
        replay_args.append("INPUTS")
        constants += f"\nINPUTS = {_literal(inputs)}\n"
    if outputs:
        replay_args.append("outputs=OUTPUTS")
        constants += "\nOUTPUTS = {" + ", ".join(f"{i}: {v}" for i, v in outputs.items()) + "}\n"
    if not complete_last:
        replay_args.append("complete_last=False")
    stops = (
        ""
        if status == "complete"
        else f"\nThe chat stopped {_stopped(status)}; so does this test.\n"
    )
    recorded_with = provider_settings(provider)  # max_tokens, extra_body's digest: keyed on
    settings = f", settings={recorded_with!r}" if recorded_with else ""
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    body = f'''"""Chat {chat.id} replayed offline (written by nbagent.testing.to_pytest, {now}).

The model is never asked (replay="only"): its {len(recordings)} recorded response(s) are in
{folder.name}/ beside this file. Imported tools run for real, so a change in what
they return changes the next request, and the test fails saying which message
differs from the recording. It checks the same calls (names, arguments,
statuses), the same status and the same final answer.
{stops}"""

from pathlib import Path

from nbagent import Chat{", HostedMCP" if hosted else ""}
from nbagent.testing import OfflineProvider, replay_turns{", stand_in" if replayed else ""}
{"".join(line + chr(10) for line in imports)}
RECORDINGS = Path(__file__).with_name({folder.name!r})

{"".join(d + chr(10) for d in definitions)}TURNS = {_literal(turns)}

DECISIONS = {_literal(decisions)}
{constants}
EXPECTED_CALLS = {_literal(expected_calls)}

EXPECTED_STATUS = {status!r}

EXPECTED_ANSWER = {_literal(answer)}


def {test_name}() -> None:
    chat = Chat(
        provider=OfflineProvider({provider.name!r}, {provider.model!r}{settings}),
{kwargs}        replay="only",
        replay_tools={_literal(replay_tools)},
        recordings=RECORDINGS,
        display=False,
    )
    chat.with_tools({", ".join(uses)})
{f"    chat.with_tool_options(**{tool_options!r}){chr(10)}" if tool_options else ""}\
    answer = replay_turns({", ".join(replay_args)})
    assert [(c.name, c.arguments, c.status) for c in chat.tool_calls] == EXPECTED_CALLS
    assert chat.status == EXPECTED_STATUS
    assert answer == EXPECTED_ANSWER
'''
    secrets = [s for t in chat.hosted_tools for s in t.secrets() if len(s) >= 8]
    if any(s in body for s in secrets):
        raise ValueError(  # a secret the checks above missed: never written
            "to_pytest would write a hosted tool's secret into the test; nothing was written"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body, encoding="utf-8")
    return path


def _given_results(chat: Any) -> set[str]:
    """The calls answered with a result no tool returned: a fork's ``result=`` (of this
    chat, or in its shared history). Status ``ok``, never started, not a hosted call's
    verdict, not a person's answer (``ask_user``, an external tool)."""
    started = {e.call.id for e in chat.events if isinstance(e, ToolCallStarted)}
    answered = {r.call_id for r in chat.record.inputs if r.status == "accept"}
    return {
        c.id
        for c in chat.tool_calls
        if c.status == "ok"
        and c.result is not None
        and not c.hosted
        and c.id not in started
        and c.id not in answered
    }


_OPTION_DEFAULTS = {"choice": "auto", "calls": "many"}  # the options a request's key holds


def _options_timeline(chat: Any) -> dict[int, dict[str, Any]]:
    """The tool options the chat's requests were asked with, as set after which step (``0``:
    before the first): ``{0: {"calls": "one"}}``; a fork with ``tool_options=`` at step 3
    adds ``{3: {...}}`` (its shared steps were its parent's, asked with the parent's)."""
    current = dict(_OPTION_DEFAULTS)
    out: dict[int, dict[str, Any]] = {}
    last, seen = 0, False
    for e in chat.events:
        if isinstance(e, StepFinished):
            last = e.step
        elif isinstance(e, OptionsChanged):
            seen = True
            new = {k: e.options.get(k, v) for k, v in _OPTION_DEFAULTS.items()}
            changed = {k: v for k, v in new.items() if current[k] != v}
            if changed:
                out.setdefault(last, {}).update(changed)
                current = new
    if not seen:  # a history without its options' changes: the chat's options now
        now = chat.tool_options.as_dict()
        first = {k: now[k] for k, v in _OPTION_DEFAULTS.items() if now.get(k, v) != v}
        return {0: first} if first else {}
    return out


def _stopped(status: str) -> str:
    return {
        "awaiting_approval": "waiting for a decision or an answer",
        "ready": "after its last decisions, before complete() carried on",
        "budget_exhausted": "with its budget spent",
    }.get(status, f"with status {status!r}")


def _one_system_and_model(chat: Any, recordings: dict[int, Any]) -> None:
    """Refuse a chat whose requests were made with other system prompts or models than its
    own now (a fork with ``system=`` or ``model=`` after step 0 shares its parent's): the
    test sets the chat's one system prompt and model, so they could never be replayed."""
    provider = chat.provider
    model = f"{provider.name}/{provider.model}"
    system = _digest(chat.system)
    models = {model}
    systems = {system}
    for rec in recordings.values():
        fp = rec.fingerprint
        if fp.get("model"):
            models.add(str(fp["model"]))
        recorded = (fp.get("options") or {}).get("system")
        if recorded is not None:
            systems.add(recorded)
    mixed = [
        f"{len(kinds)} {what}"
        for what, kinds in (("system prompts", systems), ("models", models))
        if len(kinds) > 1
    ]
    if not mixed:
        return
    parent = getattr(chat, "parent", None)
    how = (
        f"a fork with {parent.change}= at step {parent.step}, which shares its parent's "
        f"requests up to that step"
        if parent is not None and parent.change in ("system", "model")
        else "its system prompt or model changed between its requests"
    )
    raise ValueError(
        f"to_pytest cannot export this chat: its requests were made with {' and '.join(mixed)} "
        f"({how}), and its test asks every request with one (the chat's own now), so the "
        "others could never be replayed. Export a chat whose every request used the same: "
        "the parent, or a fork made at step=0 with system= or model= (all of its requests "
        "are its own)"
    )


def _outputs(
    chat: Any, recordings: dict[int, Any], turns: list[int], names: _Names, imports: list[str]
) -> dict[int, str]:
    """The structured answer each turn asked for, as source: ``{turn index: expression}``.

    A recording keeps only a digest of its request's ``output=``; the chat says what
    each turn asked for (``chat.outputs``), and the two must agree.
    """
    none = _digest(None)
    asked = chat.outputs  # {turn: the type or schema given to ask(output=)}
    turn_of: dict[int, int] = {s.step: s.turn for s in chat.record.steps}
    specs: dict[int, Any] = {}
    for step, rec in recordings.items():
        digest = rec.fingerprint.get("options", {}).get("output", none)
        if digest == none:
            continue
        turn = turn_of.get(step)
        spec = as_output(asked[turn]) if turn is not None and turn in asked else None
        if turn is None or spec is None or digest != _digest([spec.name, spec.schema]):
            raise ValueError(
                f"turn {turn} asked for a structured answer (output=) this chat object does "
                "not hold (a chat loaded from a store keeps none: a type is code); to_pytest "
                "cannot export it: export the chat that asked"
            )
        specs[turn] = spec
    written: dict[str, str] = {}  # a type asked for in several turns is imported once
    sources = {}
    for turn, spec in specs.items():
        key = repr([spec.kind, spec.name, spec.schema])
        if key not in written:
            written[key] = _output_source(spec, names, imports)
        sources[turn] = written[key]
    return {i: sources[turn] for i, turn in enumerate(turns) if turn in sources}


def _output_source(spec: Any, names: _Names, imports: list[str]) -> str:
    """A structured answer's type as the test writes it: a schema's literal, or an import."""
    if spec.kind == "schema":
        return _literal(spec.schema)
    target = spec.target
    module, qual = getattr(target, "__module__", ""), getattr(target, "__qualname__", "")
    found = None
    if module and module != "__main__" and "<" not in qual and "." not in qual:
        found = _exported(target, module)
    if found is None:
        where = "a function's body" if "<locals>" in qual else _defined_in(target)
        raise ValueError(
            f"the chat asked for a structured answer of type {target.__name__}, defined "
            f"in {where}: the test cannot import it; define it in a module (from "
            f"mymodule import {target.__name__}), run the chat again, then export it"
        )
    source = names.take("output_", qual)
    imports.append(f"from {found[0]} import {found[1]} as {source}")
    return source


def _inputs(
    chat: Any, replayed: set[str], given: set[str]
) -> dict[str, tuple[str, Any, str | None, str]]:
    """The recorded answers of the calls that park on an input (``ask_user``, an external
    tool), by input id: ``(action, data, reason, by)``. A stand-in's are left out (its
    recorded result is replayed instead), and those of a call given its result (``given``)."""
    out: dict[str, tuple[str, Any, str | None, str]] = {}
    calls = {c.id: c for c in chat.tool_calls}
    for rec in chat.record.inputs:
        if rec.status == "pending" or rec.kind not in _INPUT_KINDS or rec.tool in replayed:
            continue
        if rec.call_id is not None and rec.call_id in given:
            # a fork's result= closed its question: the test answers it with that result
            given_call = calls.get(rec.call_id)
            if given_call is not None and given_call.result is not None:
                out[rec.input_id] = ("accept", given_call.result.value, None, HUMAN)
            continue
        call = calls.get(rec.call_id) if rec.call_id is not None else None
        if rec.status == "accept" and call is not None and call.result and call.result.parts:
            raise ValueError(
                f"the answer to {rec.tool} (input {rec.input_id!r}) gave images or files; "
                "to_pytest cannot export it"
            )
        by = rec.answered_by or "user"
        if rec.status == "accept":
            out[rec.input_id] = ("accept", rec.data, None, by)
        else:
            out[rec.input_id] = (rec.status, None, rec.reason, by)
    return out


def _hosted(t: Any, names: _Names, definitions: list[str]) -> str:
    """A hosted MCP server as the recordings saw it, without its secrets: the headers'
    values and the token are left out (the recordings keep only the headers' names)."""
    if not isinstance(t, HostedMCP):
        raise ValueError(f"to_pytest cannot export the hosted tool {t!r}")
    args = [repr(t.server_label)]
    if t.server_url is not None:
        parts = urlsplit(t.server_url)
        risky = [k for k, _ in parse_qsl(parts.query, keep_blank_values=True)]
        risky = [k for k in risky if _SECRET_QUERY.search(k)]
        if risky or parts.fragment:
            raise ValueError(
                f"HostedMCP({t.server_label!r})'s URL carries "
                f"{risky[0] if risky else 'a fragment'!r}, which may be a secret, and the "
                "recordings match on the whole URL; to_pytest does not write it: pass the "
                "secret in headers= or authorization= instead, run the chat again, then export"
            )
        host = parts.hostname or ""
        if parts.port:
            host = f"{host}:{parts.port}"
        args.append(f"server_url={parts._replace(netloc=host).geturl()!r}")
    else:
        args.append(f"connector_id={t.connector_id!r}")
    if t.header_names:
        args.append(f"headers={ {k: _HEADER_STAND_IN for k in t.header_names}!r}")
    if t.allowed_tools is not None:
        args.append(f"allowed_tools={t.allowed_tools!r}")
    args.append(f"require_approval={t.require_approval!r}")
    if t.server_description:
        args.append(f"server_description={t.server_description!r}")
    var = names.take("HOSTED_", t.server_label.upper())
    definitions.append(
        f"# {t.server_label} is hosted by the provider: the recorded responses hold its\n"
        "# calls. Its headers' values and token are not written here (the recordings\n"
        "# match on the headers' names only; the test never reaches the server).\n"
        f"{var} = HostedMCP(\n    " + ",\n    ".join(args) + ",\n)\n"
    )
    return var


def _defined_in(obj: Any) -> str:
    module = getattr(obj, "__module__", "?")
    return (
        "a notebook or script (__main__)" if module == "__main__" else f"{module} (not reachable)"
    )


def _where(t: Tool) -> str:
    return _defined_in(t.fn if isinstance(t, FunctionTool) else type(t))


def _indent(text: str) -> str:
    return text.replace("\n", "\n    ")


__all__ = ["to_pytest"]
