"""The tool-call log: a chat's record (``chat.record``, folded by the core) as pandas DataFrames.

The log folds nothing itself: a DataFrame is built from the record only when
asked for (``chat.log``, ``chat.steps``, ``chat.messages``) and cached until the
record changes (:class:`CallLog`). pandas is imported then, never by
``import nbagent``.

Every frame has fixed columns in a fixed order, with pandas nullable dtypes,
so an empty chat gives an empty frame with the same dtypes. Times are
``datetime64[ns, UTC]``.

``chat.log``: one row per tool call, in request order. The columns a glance
needs come first (``tool``, ``status``, ``decision``, ``duration_ms``, then
arguments, result, error, who decided and why: the first ten, which a
notebook shows of a wide frame), the ids last.

=================  ==============  =====================================================
column             dtype           meaning
=================  ==============  =====================================================
tool               string          tool name
status             category        ``requested``, ``awaiting_approval``, ``approved``,
                                   ``awaiting_input``, ``denied``, ``running``, ``ok``, ``error``,
                                   ``cancelled``, ``skipped``, ``timed_out``, ``in_doubt``;
                                   for a hosted ``mcp_call`` also ``ran_despite_denial``,
                                   ``ran_unapproved`` (see below)
decision           category        see below
duration_ms        Float64         run time of the tool itself
arguments          object          the model's arguments (a dict)
result_preview     string          first 200 characters of the result sent to the model
result_type        string          what an ``ok`` result holds: ``text``, ``json``, ``image``,
                                   ``text+image``, ``file``, ``text+audio``... (NA otherwise)
error              string          why it did not succeed (error, timed_out, cancelled,
                                   skipped, rejected arguments); NA for ok and denied
decided_by         string          ``user``, ``resolver``, ``policy:always_allow:<tool>``,
                                   ``rule`` (``chat.add_rule``; the rule is the reason),
                                   ``store``...; NA when nobody decided
reason             string          the decision's reason (a denial's is sent to the model)
edited_arguments   object          arguments a human approved instead (dict) or None
decided_at         datetime64 UTC  when it was decided
requires_approval  boolean         gated (decided once, when the call was requested)
approval_source    string          why gated: ``none``, ``tool``, ``resolver``
approval_reason    string          the gate's sentence (what the approval card shows)
server             string          the MCP server label, when the tool is on one
hosted             boolean         the provider runs it (a hosted MCP approval, or a
                                   provider item); never run by nbagent
replayed           boolean         its result is a recorded one (``replay_tools``): the
                                   tool did not run again; NA until it finishes
shared             boolean         a fork's copy of its parent's outcome (``chat.fork``):
                                   it ran, or was answered, in the parent; NA until final
ran_before         string          the earlier gated calls of its response still awaiting
                                   a decision when it ran (``insert (c1)``; the default
                                   ``order="ready"``): its result cannot reflect them;
                                   NA otherwise
item_type          string          a provider item's wire type (``mcp_call``,
                                   ``mcp_list_tools``, ``web_search_call``...) or
                                   ``mcp_approval_request``; NA for a local call
progress           Float64         the latest progress the call reported while it ran
                                   (an MCP server's notification, ``report_progress``)
progress_total     Float64         what ``progress`` counts up to, if the call said
progress_message   string          the latest progress report's message
log_messages       Int64           log messages its MCP server sent while it ran
input_kind         string          what a person was asked for the call (``external``,
                                   ``ask_user``, ``elicitation``, ``elicitation_url``,
                                   ``sampling``); NA when nobody was asked
answered_by        string          who answered it (``user``, ``inbox``, ``nbagent`` for
                                   one withdrawn when the call ended...); NA until then
answered_at        datetime64 UTC  when it was answered (the last answer, if several)
input_wait_ms      Float64         how long the call waited for its inputs (summed)
turn               Int64           user turn (1 for the first ``ask``)
step               Int64           the model request that asked for the call
run_step           Int64           the step (tool round) that ran it; NA if it never ran
concurrency        category        ``sequential``, ``threads``, ``async``; NA if not run
requested_at       datetime64 UTC  the model's response arrived
started_at         datetime64 UTC  the call was about to run
finished_at        datetime64 UTC  it reached a final status
model              string          model that asked for the call
provider           string          its provider
arguments_json     string          ``arguments`` as JSON text (export, string search)
chat_id            string          the chat
call_id            string          provider call id (unique within a chat)
=================  ==============  =====================================================

``decision`` is one of:

- ``auto``: the call was not gated; it ran (or was rejected) without a decision;
- ``pending``: gated and awaiting a decision (``chat.log.query("decision == 'pending'")``
  is the to-do list);
- ``approved`` / ``denied``: decided by a human (``decided_by == "user"``), the
  tool's resolver (``"resolver"``) or another process (``"store"``);
- ``policy``: approved by a session policy such as ``chat.always_allow(tool)``;
- ``none``: gated, but never needed a decision (rejected before approval:
  unknown tool, invalid arguments, over the call limit, cut-off response).

The latest decision wins: a human overruling a resolver shows the human's.

Hosted tools have rows too (``hosted`` true): an approval the provider asked
for is a gated call (``item_type`` ``mcp_approval_request``; ``ok`` once the
approval was sent, ``denied`` when denied); what the provider ran or listed
(:class:`~nbagent.ProviderItem`) is a row per item, with its status (``ok`` or
``error``; NA for an item type nbagent does not know) and, for an ``mcp_call``
that followed an approval, that approval's decision (else ``auto``). An
``mcp_call`` the provider ran against the chat's decision has its own status:
``ran_despite_denial`` (its approval was denied: ``decision`` says ``denied``)
or ``ran_unapproved`` (``require_approval`` asked for an approval the chat
had not given when it ran; ``decision`` ``none``, or that of an earlier
request it names); its ``error`` column holds the call's own error, if it failed.
``chat.log.query("status.str.startswith('ran_')")`` lists them. Thinking
(:class:`~nbagent.Reasoning` items) is no call and has no row; its tokens are
in ``chat.steps`` (``reasoning_tokens``).

``chat.steps``: one row per model request (a failed request is a row with its
error; its retry reuses the step number, so ``step`` is not unique).

=================  ==============  =====================================================
chat_id            string
turn               Int64
step               Int64
model              string          the model that answered (else the one asked)
provider           string
tool_choice        string          as sent: ``auto``, ``required``, ``none`` or a tool
n_messages         Int64           transcript length sent
input_tokens       Int64           includes cached tokens
output_tokens      Int64
cached_tokens      Int64
reasoning_tokens   Int64           output tokens spent thinking (part of output_tokens)
cache_write_tokens Int64           input tokens written to the prompt cache (Anthropic)
cost_usd           Float64         NA when the model's prices are unknown; 0 when replayed
replayed           boolean         answered from a recording (``Chat(replay=...)``): the
                                   tokens are the recorded ones, nothing was spent now
shared             boolean         a fork's copy of its parent's request (``chat.fork``):
                                   its tokens and cost were spent by the parent
latency_ms         Float64
stop_reason        category        ``end``, ``tool_use``, ``max_tokens``, ``refusal``,
                                   ``pause_turn``, ``context_window``, ``other``
raw_stop_reason    string          the provider's own
n_tool_calls       Int64
started_at         datetime64 UTC
finished_at        datetime64 UTC  NA while in flight
error_type         string          exception class of a failed request
error              string          its message
=================  ==============  =====================================================

``chat.messages``: one row per transcript message.

=================  ==============  =====================================================
chat_id            string
index              Int64           position in ``chat.transcript``
turn               Int64
role               category        ``system``, ``user``, ``assistant``, ``tool``
kind               category        ``text``, ``tool_calls``, ``tool_result``
content            string          full text (NA for tool calls without text)
citations          object          the sources the text cites (Anthropic web search,
                                   documents), each a dict as the API sent it; None
n_tool_calls       Int64           calls asked for (``tool_calls`` messages), else 0
tool_call_id       string          the call a result answers
tool               string          its tool
status             category        a result's status (same categories as ``chat.log``)
is_error           boolean         sent as an error result
stop_reason        category        assistant messages
added_at           datetime64 UTC
=================  ==============  =====================================================
"""

from __future__ import annotations

import functools
import json
import threading
import weakref
from collections.abc import Sequence
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from .._errors import display_safe, safe_display
from .._hosted import BREACHES
from .._optional import require
from .._record import CallRecord, ChatRecord
from .._types import CALL_STATUSES, CONCURRENCY_MODES, ROLES, STOP_REASONS

if TYPE_CHECKING:
    import pandas as pd

DECISIONS = ("auto", "pending", "approved", "denied", "policy", "none")
LOG_STATUSES = (*CALL_STATUSES, *BREACHES)
"""A row's status: a call's, or a hosted call the provider ran against the chat's decision."""
MODES = CONCURRENCY_MODES
MESSAGE_KINDS = ("text", "tool_calls", "tool_result")

# A column kind is "string", "Int64", "Float64", "boolean", "datetime", "json"
# (a dict column, object dtype) or a tuple of categories.
ColumnKind = str | tuple[str, ...]

CALL_COLUMNS: dict[str, ColumnKind] = {
    # what happened: the columns a glance at ``chat.log.head()`` needs
    "tool": "string",
    "status": LOG_STATUSES,
    "decision": DECISIONS,
    "duration_ms": "Float64",
    "arguments": "json",
    "result_preview": "string",
    "result_type": "string",
    "error": "string",
    # the decision (who, why, what they changed, when), then the gate that asked for it
    "decided_by": "string",
    "reason": "string",
    "edited_arguments": "json",
    "decided_at": "datetime",
    "requires_approval": "boolean",
    "approval_source": "string",
    "approval_reason": "string",
    "server": "string",
    "hosted": "boolean",
    "replayed": "boolean",
    "shared": "boolean",
    "ran_before": "string",
    "item_type": "string",
    "progress": "Float64",
    "progress_total": "Float64",
    "progress_message": "string",
    "log_messages": "Int64",
    # what a person was asked for it (an external result, ask_user, a server's request)
    "input_kind": "string",
    "answered_by": "string",
    "answered_at": "datetime",
    "input_wait_ms": "Float64",
    # where and when it ran
    "turn": "Int64",
    "step": "Int64",
    "run_step": "Int64",
    "concurrency": MODES,
    "requested_at": "datetime",
    "started_at": "datetime",
    "finished_at": "datetime",
    "model": "string",
    "provider": "string",
    # for machines: JSON text and the ids
    "arguments_json": "string",
    "chat_id": "string",
    "call_id": "string",
}

STEP_COLUMNS: dict[str, ColumnKind] = {
    "chat_id": "string",
    "turn": "Int64",
    "step": "Int64",
    "model": "string",
    "provider": "string",
    "tool_choice": "string",
    "n_messages": "Int64",
    "input_tokens": "Int64",
    "output_tokens": "Int64",
    "cached_tokens": "Int64",
    "reasoning_tokens": "Int64",
    "cache_write_tokens": "Int64",
    "cost_usd": "Float64",
    "replayed": "boolean",
    "shared": "boolean",
    "latency_ms": "Float64",
    "stop_reason": STOP_REASONS,
    "raw_stop_reason": "string",
    "n_tool_calls": "Int64",
    "started_at": "datetime",
    "finished_at": "datetime",
    "error_type": "string",
    "error": "string",
}

MESSAGE_COLUMNS: dict[str, ColumnKind] = {
    "chat_id": "string",
    "index": "Int64",
    "turn": "Int64",
    "role": ROLES,
    "kind": MESSAGE_KINDS,
    "content": "string",
    "citations": "json",
    "n_tool_calls": "Int64",
    "tool_call_id": "string",
    "tool": "string",
    "status": LOG_STATUSES,  # one vocabulary for every status column (exports read by name)
    "is_error": "boolean",
    "stop_reason": STOP_REASONS,
    "added_at": "datetime",
}

SCHEMAS: dict[str, dict[str, ColumnKind]] = {
    "calls": CALL_COLUMNS,
    "steps": STEP_COLUMNS,
    "messages": MESSAGE_COLUMNS,
}


def _recorded(schema: dict[str, ColumnKind]) -> list[str]:
    """The columns a record holds per row: all but ``chat_id`` (one per chat, added when built)."""
    return [name for name in schema if name != "chat_id"]


_USAGE = (
    "input_tokens",
    "output_tokens",
    "cached_tokens",
    "reasoning_tokens",
    "cache_write_tokens",
)


GLANCE = ("tool", "status", "decision", "duration_ms", "arguments", "result_preview")
"""The columns ``chat.log`` displays: what a glance needs (the frame keeps all of them)."""


def glance(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` (a calls frame), displayed with the :data:`GLANCE` columns only.

    ``df`` stays a plain DataFrame with every column (indexing, filters,
    ``assert_frame_equal`` and every derived frame work, and show, as before);
    only its own display is curated, ending with a line that says how many
    columns it leaves out and that ``df.frame()`` shows them all. Secrets in the
    cells display as ``***`` (:func:`display_safe`), in ``df.frame()`` too; the
    values stay the calls' own.
    """
    full = df

    def whole() -> pd.DataFrame:
        """The whole frame, every column, displayed whole (secrets as ``***``)."""
        return safe_display(full.copy(deep=False))

    def bundle(include: Any = None, exclude: Any = None) -> dict[str, str]:
        shown = display_safe(full[[c for c in GLANCE if c in full.columns]])
        hidden = len(full.columns) - len(shown.columns)
        hint = (
            f"{len(full)} call{'s' if len(full) != 1 else ''}; {hidden} more columns "
            "(decided_by, reason, error, times, ids...): chat.log.frame() shows them all"
        )
        out = {"text/plain": f"{shown!r}\n{hint}"}
        html = shown._repr_html_()  # type: ignore[operator]  # (pandas-stubs lack it)
        if html is not None:  # None when pandas is told not to write HTML
            out["text/html"] = f'{html}<p style="opacity: 0.7; margin: 2px 0">{hint}</p>'
        return out

    # On this object only (pandas' own attribute rules bypassed): a copy, a slice or any
    # derived frame is an ordinary DataFrame again.
    object.__setattr__(df, "_repr_mimebundle_", bundle)
    object.__setattr__(df, "_repr_html_", lambda: bundle().get("text/html"))
    object.__setattr__(df, "frame", whole)
    return df


STEPS_ATTR = "nbagent_steps"
"""The key of a calls frame's :class:`StepsRef` in its ``attrs``."""


class StepsRef:
    """The way from a chat's calls frame (``chat.log``) to its steps frame.

    Kept in ``attrs``, which pandas copies deeply into every frame derived from it: a
    copy is this object itself (no DataFrame is held, none copied). It holds the chat's
    record (what the frames are built from) and its :class:`CallLog` weakly (for the
    cached frame). A pickled one comes back without its chat and gives ``None``.
    """

    __slots__ = ("__weakref__", "_log", "_record")

    def __init__(self, log: CallLog | None):
        self._log = None if log is None else weakref.ref(log)
        self._record = None if log is None else log.record

    def __call__(self) -> pd.DataFrame | None:
        """The chat's steps frame as it is now (``chat.steps``), or None."""
        log = self._log() if self._log is not None else None
        if log is not None:
            return log.steps()
        return build_frame([self._record], "steps") if self._record is not None else None

    def __copy__(self) -> StepsRef:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> StepsRef:
        return self

    def __eq__(self, other: object) -> bool:  # pd.concat keeps attrs all its parts share
        return isinstance(other, StepsRef) and other._record is self._record

    def __hash__(self) -> int:
        return id(self._record)

    def __reduce__(self) -> tuple[Any, ...]:
        return (StepsRef, (None,))  # the record (locks, a live chat's) stays behind

    def __repr__(self) -> str:
        chat = self._record.chat_id if self._record is not None else None
        return f"StepsRef({chat!r})"


class CallLog:
    """One chat's DataFrames, built from its record when asked for and cached until it changes.

    Args:
        record: The chat's :class:`~nbagent._record.ChatRecord` (``chat.record``), or
            one folded from stored events (:func:`nbagent._record.fold`).
    """

    def __init__(self, record: ChatRecord):
        self.record = record
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[int, pd.DataFrame]] = {}

    def __repr__(self) -> str:
        return f"CallLog({self.record!r})"

    def frame(self, kind: str = "calls") -> pd.DataFrame:
        """The ``calls``, ``steps`` or ``messages`` DataFrame (cached until the record changes)."""
        version = self.record.version
        with self._lock:
            cached = self._cache.get(kind)
        if cached is None or cached[0] != version:
            with self.record.reading():
                version = self.record.version
                df = build_frame([self.record], kind)
            cached = (version, df)
            with self._lock:
                self._cache[kind] = cached
        return cached[1].copy(deep=False)

    def calls(self) -> pd.DataFrame:
        """One row per tool call (see the module docstring for the columns).

        The frame has every column; shown in a notebook it displays the curated ones
        (:data:`GLANCE`; ``print`` shows pandas' own text of every column), and its
        ``frame()`` is the whole frame, displayed whole (see :func:`glance`). Its
        ``attrs["nbagent_steps"]`` (a :class:`StepsRef`) gives the chat's steps, so
        ``log.summary(chat.log)`` has the tokens and cost of the requests.
        """
        df = glance(self.frame("calls"))
        df.attrs[STEPS_ATTR] = StepsRef(self)
        return df

    def steps(self) -> pd.DataFrame:
        """One row per model request."""
        return self.frame("steps")

    def messages(self) -> pd.DataFrame:
        """One row per transcript message."""
        return self.frame("messages")


def _columns(record: ChatRecord, kind: str) -> list[list[Any]]:
    """The record's rows, one list per column in schema order, without ``chat_id``."""
    with record.reading():
        if kind == "calls":
            return _call_columns(record.calls)
        if kind == "steps":
            return _step_columns(record)
        return _transposed(record.messages, _recorded(MESSAGE_COLUMNS))


def _transposed(rows: Sequence[Any], names: list[str]) -> list[list[Any]]:
    """One list per field (a column at a time: no per-row tuples for the collector to scan)."""
    return [list(map(attrgetter(name), rows)) for name in names]


_CALL_FIELDS = [n for n in _recorded(CALL_COLUMNS) if n != "arguments_json"]


def _call_columns(calls: Sequence[CallRecord]) -> list[list[Any]]:
    cols = dict(zip(_CALL_FIELDS, _transposed(calls, _CALL_FIELDS), strict=True))
    cols["arguments_json"] = list(map(_to_json, cols["arguments"]))
    before = cols["ran_before"]
    tools = {r.call_id: r.tool for r in calls} if any(before) else {}
    cols["ran_before"] = [
        ", ".join(f"{tools[c]} ({c})" if c in tools else c for c in ids) if ids else None
        for ids in before
    ]
    return [cols[name] for name in _recorded(CALL_COLUMNS)]


def _step_columns(record: ChatRecord) -> list[list[Any]]:
    steps = record.steps
    names = [n for n in _recorded(STEP_COLUMNS) if n not in _USAGE]
    cols = dict(zip(names, _transposed(steps, names), strict=True))
    for name in _USAGE:
        cols[name] = [None if s.usage is None else getattr(s.usage, name) for s in steps]
    return [cols[name] for name in _recorded(STEP_COLUMNS)]


_ENCODER = json.JSONEncoder(ensure_ascii=False, default=str)
_C_ENCODER = getattr(json.encoder, "c_make_encoder", None)
_encode = (
    # JSONEncoder.encode without building its C encoder on every call (same settings)
    functools.partial(
        _C_ENCODER(None, str, json.encoder.encode_basestring, None, ": ", ", ", False, False, True),
        _current_indent_level=0,
    )
    if _C_ENCODER is not None
    else None
)


def _to_json(value: Any) -> str | None:
    if value is None:
        return None
    try:
        return "".join(_encode(value)) if _encode is not None else _ENCODER.encode(value)
    except (TypeError, ValueError, RecursionError):  # e.g. circular structures
        return json.dumps(repr(value))


# ------------------------------------------------------------ materialise
def build_frame(records: Sequence[ChatRecord], kind: str) -> pd.DataFrame:
    """One DataFrame of ``kind`` over several chats' records, with the schema's dtypes."""
    require("pandas", "chat.log (and every nbagent.log frame)")
    import pandas as pd

    try:
        schema = SCHEMAS[kind]
    except KeyError:
        raise ValueError(f"kind must be 'calls', 'steps' or 'messages', got {kind!r}") from None
    names = list(schema)
    parts = [(r.chat_id, _columns(r, kind)) for r in records]
    ids: list[Any] = []
    for chat_id, part in parts:
        ids += [chat_id] * len(part[0])
    if len(parts) == 1:
        columns: list[list[Any]] = list(parts[0][1])
    else:
        columns = [[] for _ in range(len(names) - 1)]
        for _, part in parts:
            for dest, values in zip(columns, part, strict=True):
                dest.extend(values)
    columns.insert(names.index("chat_id"), ids)  # the records hold every column but this one
    data = {name: column(values, schema[name]) for name, values in zip(names, columns, strict=True)}
    return pd.DataFrame(data, index=pd.RangeIndex(len(ids)))


def column(values: Sequence[Any], kind: ColumnKind) -> Any:
    """A pandas array of ``kind`` (see :data:`CALL_COLUMNS`) from Python values (None = NA)."""
    import numpy as np
    import pandas as pd

    if isinstance(kind, tuple):
        codes = _codes(kind)
        missing = -1 if kind is not STOP_REASONS else codes["other"]  # unknown stop reasons
        arr = np.fromiter(
            (-1 if v is None else codes.get(v, missing) for v in values), np.int8, len(values)
        )
        return pd.Categorical.from_codes(arr, dtype=pd.CategoricalDtype(list(kind)))
    if kind == "string":
        return _strings(values)
    if kind == "datetime":
        idx = pd.DatetimeIndex(list(values))
        idx = idx.tz_localize("UTC") if idx.tz is None else idx.tz_convert("UTC")
        return idx.as_unit("ns").array
    if kind == "json":
        return np.fromiter(values, dtype=object, count=len(values))
    dtype: Any = kind
    return pd.array(list(values), dtype=dtype)


def _strings(values: Sequence[Any]) -> Any:
    import numpy as np
    import pandas as pd

    dtype = pd.StringDtype()
    if dtype.storage == "pyarrow":  # build the Arrow array directly: 2-10x faster
        import pyarrow as pa

        try:
            return pd.array(pa.array(values, type=pa.large_string()), dtype=dtype)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            pass  # not all str: let pandas convert
    return pd.array(np.array(values, dtype=object), dtype=dtype)


@functools.cache
def _codes(categories: tuple[str, ...]) -> dict[str, int]:
    return {c: i for i, c in enumerate(categories)}


def pandas_dtype(kind: ColumnKind) -> Any:
    """The pandas dtype of a column kind (see :data:`CALL_COLUMNS`)."""
    import numpy as np
    import pandas as pd

    if isinstance(kind, tuple):
        return pd.CategoricalDtype(list(kind))
    if kind == "datetime":
        return pd.DatetimeTZDtype("ns", "UTC")
    if kind == "json":
        return np.dtype(object)
    return pd.api.types.pandas_dtype(kind)


def dtypes(kind: str) -> dict[str, Any]:
    """The pandas dtype of every column of the ``calls``, ``steps`` or ``messages`` frame."""
    return {name: pandas_dtype(k) for name, k in SCHEMAS[kind].items()}
