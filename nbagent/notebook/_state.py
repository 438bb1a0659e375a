"""What the notebook view shows, as plain values folded from the chat's events.

:class:`ChatState` is the one subscriber a chat needs for display: it keeps a
list of *entries* (a user message, a model step, the assistant's text, a tool
call, a budget card, an error) and updates exactly the entries an event
touches. Views listen to it and re-render only those entries, so the cost of
an event does not grow with the conversation.

Nothing here imports widgets; the renderers in ``_render`` turn entries into
HTML, markdown and text, and ``_view`` wires entries to widgets.
"""

from __future__ import annotations

import json
import re
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from .._events import (
    ApprovalDecided,
    ApprovalRequested,
    Event,
    MessageAdded,
    ModelRequestFailed,
    ModelRequestFinished,
    ModelRequestStarted,
    ReasoningDelta,
    StepFinished,
    TextDelta,
    ToolCallDelta,
    ToolCallFinished,
    ToolCallRequested,
    ToolCallStarted,
)
from .._media import IMAGE_TYPES, sniff
from .._result_text import without_edit_note
from .._types import (
    AssistantToolCallMessage,
    CallStatus,
    ChatMessage,
    DecisionVerdict,
    FilePart,
    Part,
    ProviderItem,
    Reasoning,
    ResultStatus,
    ToolCall,
)
from ._per_chat import PerChat
from ._rich import rich_html, rich_label

if TYPE_CHECKING:
    from .._base_chat import BaseChat as Chat
    from .._chat_state import ToolResult

E = TypeVar("E", bound="Entry")

# Phases, as the status line says them.
IDLE = "idle"
GENERATING = "generating"
RUNNING = "running tools"
AWAITING = "awaiting approval"
READY = "ready"  # every pending call was decided; the loop has not picked it up yet
COMPLETE = "complete"
BUDGET = "budget exhausted"
FAILED = "error"
ELSEWHERE = "driven elsewhere"  # another process drives this chat (a store's "busy")


@dataclass(eq=False)
class Entry:
    """One row of the transcript view. ``version`` bumps on every change."""

    key: str
    turn: int
    version: int = 0

    kind = "entry"


@dataclass(frozen=True)
class Thumb:
    """An image as the view shows it: a ``data:`` URL nbagent encoded itself, or just a label.

    ``src`` is only ever built here from bytes whose format was checked (never a URL
    a model or a tool gave); ``None`` when the image is too large to inline and PIL
    is not there to shrink it (the label still says what it was).
    """

    label: str
    src: str | None = None


THUMB_PIXELS = 320
"""Longest side of a thumbnail, when PIL is there to shrink an image."""
THUMB_INLINE_BYTES = 256 * 1024
"""Without PIL, an image up to this size is shown as it is; a larger one by its label."""


def _shrunk(data: bytes) -> bytes | None:
    """A PNG at most :data:`THUMB_PIXELS` on its longest side (``None`` without PIL)."""
    try:
        import io

        from PIL import Image
    except ImportError:
        return None
    try:
        with Image.open(io.BytesIO(data)) as opened:
            opened.thumbnail((THUMB_PIXELS, THUMB_PIXELS))
            img: Any = opened
            if img.mode not in ("RGB", "RGBA", "L", "LA", "P"):
                img = img.convert("RGBA")
            out = io.BytesIO()
            img.save(out, format="PNG", optimize=True)
            return out.getvalue()
    except Exception:  # a file PIL cannot read: the label only
        return None


def thumbs(parts: tuple[Part, ...]) -> tuple[Thumb, ...]:
    """What the view shows of a message's or a result's images and files."""
    import base64

    out: list[Thumb] = []
    for n, part in enumerate(parts, 1):
        size = f"{len(part.data) / 1024:.0f} KB"
        if isinstance(part, FilePart):
            out.append(Thumb(f"{part.filename} ({part.media_type}, {size})"))
            continue
        label = f"image {n} ({part.media_type}, {size})"
        kind = sniff(part.data[:16])
        if kind not in IMAGE_TYPES:  # only bytes of a checked image format go into a src
            out.append(Thumb(label))
            continue
        data: bytes | None = _shrunk(part.data)
        if data is not None:
            kind = "image/png"
        elif len(part.data) <= THUMB_INLINE_BYTES:
            data = part.data
        src = None if data is None else f"data:{kind};base64,{base64.b64encode(data).decode()}"
        out.append(Thumb(label, src))
    return tuple(out)


@dataclass(eq=False)
class UserEntry(Entry):
    text: str = ""
    images: tuple[Thumb, ...] = ()
    kind = "user"


HIDDEN_THINKING = "[the provider sent this thinking encrypted or redacted]"


def shown_items(items: tuple[ProviderItem, ...]) -> tuple[ProviderItem, ...]:
    """The provider items a step shows as folded lines: not its reasoning (the text entry's
    *Thinking* section shows that)."""
    return tuple(i for i in items if not isinstance(i, Reasoning))


def thinking_text(m: ChatMessage | AssistantToolCallMessage) -> str:
    """A message's thinking as one text (a redacted or encrypted part says so)."""
    return "\n\n".join(r.text or HIDDEN_THINKING for r in m.reasoning)


@dataclass(eq=False)
class TextEntry(Entry):
    """The assistant's text of one step (streams in, then is final).

    ``thinking``: what the model thought first (its :class:`~nbagent.Reasoning`
    text, streamed like the text), shown as a folded *Thinking* section.
    """

    step: int = 0
    text: str = ""
    streaming: bool = False
    parsed: tuple[str, tuple[tuple[str, str], ...]] | None = None
    """A structured answer (``ask(output=...)``): its type's name and (key, value) rows."""
    thinking: str = ""
    kind = "text"

    # The rendered Markdown, kept per text (set by the renderer: a settled chat is
    # rendered again for its static fallback at each settle).
    _html: tuple[str, str] | None = field(default=None, init=False, repr=False)


def parsed_rows(value: Any) -> tuple[str, tuple[tuple[str, str], ...]]:
    """A structured answer's value as its type's name and (key, value-as-text) rows.

    A field holding a list or an object shows as compact JSON; the renderer
    escapes and clips.
    """
    from pydantic_core import to_jsonable_python

    name = "" if isinstance(value, dict) else type(value).__name__
    data = to_jsonable_python(value, fallback=repr)
    items = data.items() if isinstance(data, dict) else [("value", data)]
    rows = tuple(
        (str(k), v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)) for k, v in items
    )
    return name, rows


@dataclass(eq=False)
class StepEntry(Entry):
    """One model request: model, tokens, latency, stop reason.

    ``step`` is the chat's own step number (events and the log count every
    step of the chat: model requests and tool rounds); ``number`` is what the
    view says, "step 1", "step 2"...: the model requests of the turn, from 1,
    the same steps the status line counts (a retried request keeps its number).
    """

    step: int = 0
    number: int = 0
    model: str = ""
    provider: str = ""
    status: str = "running"  # running | done | failed
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    latency_ms: float | None = None
    stop_reason: str = ""
    n_tool_calls: int = 0
    cost_usd: float | None = None
    tool_choice: str = ""
    error_type: str = ""
    error: str = ""
    streaming_calls: dict[int, str] = field(default_factory=dict)
    measured: bool = True  # False when rebuilt from a transcript: no tokens or timing known
    items: tuple[ProviderItem, ...] = ()  # what the provider ran itself in this step
    replayed: bool = False  # answered from a recording (Chat(replay=...)), not by the model
    kind = "step"


@dataclass(eq=False)
class CallEntry(Entry):
    """One tool call and everything known about it."""

    call_id: str = ""
    name: str = ""
    server: str | None = None  # the MCP server's label (a local MCP tool or a hosted one)
    hosted: bool = False  # the provider runs it: a decision is sent, nothing runs here
    step: int = 0
    arguments: dict[str, Any] = field(default_factory=dict)
    raw_arguments: str | None = None
    status: CallStatus = "requested"
    gated: bool = False
    approval_reason: str = ""
    approval_source: str = ""
    verdict: DecisionVerdict | None = None
    decided_by: str | None = None
    decision_reason: str | None = None
    decided_at: datetime | None = None
    decided_elsewhere: bool = False  # by another process or chat object, through a store
    edited_arguments: dict[str, Any] | None = None
    result: str | None = None
    result_status: ResultStatus | None = None
    error: str | None = None
    duration_ms: float | None = None
    mode: str | None = None
    replayed: bool = False  # its result is a recorded one (replay_tools): the tool did not run
    ran_before: tuple[str, ...] = ()  # earlier gated calls (tool names) still undecided when it ran
    defaults: dict[str, Any] = field(default_factory=dict)  # what the tool uses for omitted params
    result_html: str | None = None  # a rich result (a DataFrame) as inert table HTML
    result_label: str = ""  # its type (and shape), for the summary line
    result_images: tuple[Thumb, ...] = ()  # the images the tool returned, as thumbnails
    traceback: str | None = None  # where a tool that raised failed
    kind = "call"

    # What the view shows of the arguments, computed once per value (the view renders an
    # entry on every event that touches it; the arguments do not change).
    _shown: tuple[Any, str | None, str, bool] | None = field(default=None, init=False, repr=False)
    _shown_edit: tuple[Any, str] | None = field(default=None, init=False, repr=False)

    @property
    def pending(self) -> bool:
        return self.status == "awaiting_approval"

    @property
    def arguments_text(self) -> str:
        """The arguments as pretty JSON, or a bounded preview of them (see :func:`json_preview`)."""
        return self._arguments_shown()[0]

    @property
    def arguments_editable(self) -> bool:
        """Whether :attr:`arguments_text` is the whole arguments (so it can be edited)."""
        return self._arguments_shown()[1]

    def _arguments_shown(self) -> tuple[str, bool]:
        cached = self._shown
        if cached is None or cached[0] is not self.arguments or cached[1] is not self.raw_arguments:
            if self.raw_arguments is not None and not self.arguments:
                text = clip_text(self.raw_arguments)
                whole = len(text) == len(self.raw_arguments)
            else:
                text, whole = json_preview(self.arguments)
            cached = self._shown = (self.arguments, self.raw_arguments, text, whole)
        return cached[2], cached[3]

    @property
    def edited_text(self) -> str:
        """The edited arguments as pretty JSON, or a bounded preview of them."""
        cached = self._shown_edit
        if cached is None or cached[0] is not self.edited_arguments:
            cached = self._shown_edit = (
                self.edited_arguments,
                json_preview(self.edited_arguments)[0],
            )
        return cached[1]


@dataclass(eq=False)
class BudgetEntry(Entry):
    """A step, cost or token budget ran out: offer to continue or stop."""

    number: int = 0
    step: int = 0
    status: str = "pending"  # pending | continued | stopped
    budget: str = "steps"  # steps | cost | tokens
    kind = "budget"

    @property
    def pending(self) -> bool:
        return self.status == "pending"


@dataclass(eq=False)
class ErrorEntry(Entry):
    """Something failed outside a step (a continuation after a click, a callback)."""

    number: int = 0
    title: str = ""
    detail: str = ""
    kind = "error"


@dataclass
class Totals:
    """Counters for the status line (one per turn, one for the whole chat).

    ``steps`` counts the model requests shown as step entries (started, finished
    or failed; a retry is the same step), so "3 steps" matches "step 1 ... step 3".
    """

    steps: int = 0
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    cost_known: bool = False
    phase: str = IDLE


Listener = Callable[[list[Entry], bool], Any]
"""``fn(changed_entries, settled)``: entries created or changed by one event;
``settled`` is true when the chat stopped driving (answered, waiting for a
decision, out of budget, or failed)."""


def pretty_json(value: Any) -> str:
    try:
        return json.dumps(value, indent=2, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return repr(value)


# ------------------------------------------------------------------ bounded previews
VALUE_CHARS = 2_000  # a string (a value or a key) longer than this shows its start
ARGUMENTS_CHARS = 20_000  # arguments whose JSON is longer than this show a preview
_MAX_DEPTH = 40  # deeper containers show as {…} / […]


def json_preview(
    value: Any, *, limit: int = ARGUMENTS_CHARS, value_chars: int = VALUE_CHARS
) -> tuple[str, bool]:
    """``(text, whole)``: ``value`` as pretty JSON when that is at most ``limit`` characters
    (``whole`` is true), else a bounded preview: each string's first ``value_chars``
    characters, about ``limit`` characters in all, and notes such as
    ``… 1,998,000 more characters`` or ``… 49,000 more keys`` for what is left out.

    The cost is bounded by ``limit``, not by the size of ``value`` (a 2 MB string or
    50,000 keys cost what ``limit`` characters cost), so a view can call it on
    anything a model sent.
    """
    if fits(value, limit):
        try:
            text = pretty_json(value)
        except RecursionError:
            text = ""
        else:
            if len(text) <= limit:
                return _json_controls(text), True
    return _json_controls(_Preview(limit, value_chars).render(value)), False


_C1 = re.compile(r"[\x7f-\x9f]")


def _json_controls(text: str) -> str:
    """DEL and C1 characters (which JSON leaves as they are) as ``\\u`` escapes: the text
    stays the same JSON, and a terminal escape sequence in it is seen, not acted on."""
    if _C1.search(text) is None:
        return text
    return _C1.sub(lambda m: f"\\u{ord(m[0]):04x}", text)


def clip_text(text: str, limit: int = ARGUMENTS_CHARS) -> str:
    """``text`` itself when it has at most ``limit`` characters, else its start and a note."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n… {len(text) - limit:,} more characters"


def fits(value: Any, limit: int) -> bool:
    """Whether ``value``'s pretty JSON may fit in ``limit`` characters: a lower bound of its
    length (strings unescaped, each item on its own indented line) is at most ``limit``.
    Stops as soon as the bound passes ``limit``, so it visits O(limit) items."""
    size = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        v, depth = stack.pop()
        if isinstance(v, str):
            size += len(v) + 2
        elif isinstance(v, (dict, list, tuple)):
            size += 2 + len(v) * (2 * depth + 3)  # per item: newline, indent (, comma)
            if size > limit:
                return False
            if isinstance(v, dict):
                for k, x in v.items():
                    size += len(k) + 4 if isinstance(k, str) else 3
                    stack.append((x, depth + 1))
            else:
                stack.extend((x, depth + 1) for x in v)
        else:
            size += 1
        if size > limit:
            return False
    return True


class _Preview:
    """Pretty JSON with a budget: long strings clipped, containers cut when it runs out.

    Each item of a container gets an equal share of what is left of the container's
    budget, so one huge value cannot hide its siblings (the ``path`` after 50,000 keys
    of ``data`` is still shown).
    """

    def __init__(self, limit: int, value_chars: int):
        self.limit = limit
        self.value_chars = value_chars
        self.parts: list[str] = []
        self.size = 0

    def render(self, value: Any) -> str:
        self.value(value, 0, self.limit)
        return "".join(self.parts)

    def emit(self, text: str) -> None:
        self.parts.append(text)
        self.size += len(text)

    def value(self, v: Any, depth: int, stop: int) -> None:
        """Render ``v``; a container stops adding items once the output reaches ``stop``."""
        if isinstance(v, str):
            self.string(v)
        elif isinstance(v, dict):
            self.container(v, v.items(), depth, stop, "{}", "key")
        elif isinstance(v, (list, tuple)):
            self.container(v, v, depth, stop, "[]", "item")
        else:
            try:
                text = json.dumps(v, ensure_ascii=False, default=str)
            except (TypeError, ValueError, RecursionError):
                text = repr(v)
            self.clipped(text)

    def string(self, s: str) -> None:
        if len(s) <= self.value_chars:
            self.emit(json.dumps(s, ensure_ascii=False))
        else:
            head = json.dumps(s[: self.value_chars], ensure_ascii=False)
            self.emit(f"{head}… {len(s) - self.value_chars:,} more characters")

    def clipped(self, text: str) -> None:
        if len(text) <= self.value_chars:
            self.emit(text)
        else:
            rest = len(text) - self.value_chars
            self.emit(f"{text[: self.value_chars]}… {rest:,} more characters")

    def container(
        self, v: Any, items: Any, depth: int, stop: int, brackets: str, noun: str
    ) -> None:
        n = len(v)
        if n == 0:
            self.emit(brackets)
            return
        if depth >= _MAX_DEPTH:
            self.emit(f"{brackets[0]}… {_count(n, noun)}{brackets[1]}")
            return
        pad = "  " * (depth + 1)
        self.emit(brackets[0])
        for i, item in enumerate(items):
            if self.size >= stop:
                self.emit(f"\n{pad}… {_count(n - i, 'more ' + noun)}")
                break
            self.emit(",\n" + pad if i else "\n" + pad)
            if noun == "key":
                key, item = item
                self.string(key if isinstance(key, str) else _key(key))
                self.emit(": ")
            self.value(item, depth + 1, self.size + (stop - self.size) // (n - i))
        self.emit("\n" + "  " * depth + brackets[1])


def _key(key: Any) -> str:
    """A non-string key as JSON writes it (``true``, ``null``, ``3``)."""
    try:
        return json.dumps(key) if isinstance(key, (bool, int, float)) or key is None else str(key)
    except (TypeError, ValueError):
        return repr(key)


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


class ChatState:
    """The view's model of one chat, folded from its events (thread-safe)."""

    def __init__(self, chat_id: str):
        self.chat_id = chat_id
        self.entries: list[Entry] = []
        self.by_key: dict[str, Entry] = {}
        self.totals: dict[int | None, Totals] = {None: Totals()}
        self.turn = 0
        self.lock = threading.RLock()
        self._step = 0
        self._turn_of_step: dict[int, int] = {}
        self._budgets = 0
        self._last_budget: BudgetEntry | None = None
        self._errors = 0
        self._listeners: list[Listener] = []
        # name -> the tool's JSON schema (the defaults it will use), set by state_for.
        self.tool_schema: Callable[[str], dict[str, Any] | None] = lambda _name: None

    # -------------------------------------------------------------- reading
    def entries_for(self, turn: int | None) -> list[Entry]:
        if turn is None:
            return list(self.entries)
        return [e for e in self.entries if e.turn == turn]

    def totals_for(self, turn: int | None) -> Totals:
        return self.totals.get(turn) or Totals()

    def pending_cards(self) -> list[Entry]:
        return [e for e in self.entries if isinstance(e, (CallEntry, BudgetEntry)) and e.pending]

    # ------------------------------------------------------------ listeners
    def add_listener(self, fn: Listener) -> None:
        with self.lock:
            self._listeners = [*self._listeners, fn]

    def remove_listener(self, fn: Listener) -> None:
        with self.lock:
            self._listeners = [f for f in self._listeners if f is not fn and f != fn]

    # ------------------------------------------------------------- folding
    def on_event(self, event: Event) -> None:
        """The chat subscriber: fold ``event`` in, then tell the views what changed."""
        with self.lock:
            changed = self.apply(event)
            settled = _settles(event)
            if not changed and not settled:
                return
            for fn in self._listeners:
                fn(changed, settled)

    def add_error(self, title: str, detail: str, turn: int | None = None) -> ErrorEntry:
        """Record an error that happened outside the chat's own events (and tell the views)."""
        with self.lock:
            self._errors += 1
            entry = ErrorEntry(
                f"e:{self._errors}",
                self.turn if turn is None else turn,
                number=self._errors,
                title=title,
                detail=detail,
            )
            self._add(entry)
            self._phase(entry.turn, FAILED)
            for fn in self._listeners:
                fn([entry], True)
            return entry

    def set_budget_status(self, key: str, status: str) -> Entry | None:
        with self.lock:
            entry = self.by_key.get(key)
            if not isinstance(entry, BudgetEntry) or entry.status == status:
                return None
            entry.status = status
            entry.version += 1
            for fn in self._listeners:
                fn([entry], False)
            return entry

    def apply(self, event: Event) -> list[Entry]:
        """Fold one event in; return the entries it created or changed.

        One ``case`` per event type (the types are disjoint), roughly the most
        frequent first: streamed text and arguments, then messages and steps
        (two of each per round), then the calls' lifecycle and the requests.
        """
        match event:
            case TextDelta():
                return self._text(event.step, event.text, append=True)
            case ReasoningDelta():
                return self._text(event.step, "", append=True, thinking=event.text)
            case ToolCallDelta():
                return self._call_streaming(event)
            case MessageAdded():
                return self._items(event) + self._message(event)
            case StepFinished():
                return self._step_finished(event)
            case ToolCallStarted():
                return self._call_update(
                    event.call,
                    status="running",
                    arguments_run=dict(event.arguments),
                    phase=RUNNING,
                )
            case ToolCallFinished():
                return self._call_finished(event)
            case ToolCallRequested():
                return self._requested(event)
            case ModelRequestStarted():
                return self._started(event)
            case ModelRequestFinished():
                return self._finished(event)
            case ApprovalRequested():
                return self._call_update(
                    event.call,
                    status="awaiting_approval",
                    approval_reason=event.reason,
                    approval_source=event.source,
                    phase=AWAITING,
                )
            case ApprovalDecided():
                return self._decided(event)
            case ModelRequestFailed():
                return self._failed(event)
            case _:
                return []

    # ---------------------------------------------------------------- steps
    def _add(self, entry: E) -> E:
        old = self.by_key.get(entry.key)
        if old is not None:  # a retried request reuses its step number
            self.entries[self.entries.index(old)] = entry
            entry.version = old.version + 1
        else:
            self.entries.append(entry)
        self.by_key[entry.key] = entry
        self.totals.setdefault(entry.turn, Totals())
        return entry

    def _count_step(self, turn: int) -> int:
        """Count a new step of ``turn`` (in its totals and the chat's); its number in the turn."""
        self.totals[None].steps += 1
        totals = self.totals.setdefault(turn, Totals())
        totals.steps += 1
        return totals.steps

    def _phase(self, turn: int, phase: str) -> None:
        self.totals[None].phase = phase
        self.totals.setdefault(turn, Totals()).phase = phase

    def _resolve_budgets(self) -> list[Entry]:
        """The loop moved on: an undecided budget card counts as continued."""
        e = self._last_budget
        if e is None or e.status != "pending":
            return []
        e.status = "continued"
        return [_touch(e)]

    def _message(self, event: MessageAdded) -> list[Entry]:
        m = event.message
        if isinstance(m, ChatMessage) and m.role == "user":
            self.turn = max(self.turn, event.turn)
            entry = self._add(
                UserEntry(f"m:{event.index}", event.turn, text=m.content, images=thumbs(m.parts))
            )
            self._phase(event.turn, GENERATING)
            return [entry]
        if isinstance(m, (ChatMessage, AssistantToolCallMessage)) and m.role == "assistant":
            text = m.content or ""
            thinking = thinking_text(m)
            key = f"t:{self._step}"
            if not text and not thinking and key not in self.by_key:
                return []
            changed = self._text(self._step, text, append=False, turn=event.turn, thinking=thinking)
            text_entry = changed[0]
            if isinstance(m, ChatMessage) and m.parsed is not None:
                assert isinstance(text_entry, TextEntry)
                text_entry.parsed = parsed_rows(m.parsed)
            return changed
        return []

    def _items(self, event: MessageAdded) -> list[Entry]:
        """What the provider ran itself (an assistant message's ``items``) joins its step's
        line, shown before the step's text."""
        items = shown_items(getattr(event.message, "items", ()))
        step = self.by_key.get(f"s:{self._step}")
        if not items or not isinstance(step, StepEntry) or step.items == items:
            return []
        step.items = items
        return [_touch(step)]

    def _text(
        self, step: int, text: str, *, append: bool, turn: int | None = None, thinking: str = ""
    ) -> list[Entry]:
        key = f"t:{step}"
        entry = self.by_key.get(key)
        if not isinstance(entry, TextEntry):
            t = turn if turn is not None else self._turn_of_step.get(step, self.turn)
            entry = TextEntry(key, t, step=step, text="", streaming=append)
            self._add(entry)
        if append:
            entry.text += text
            entry.thinking += thinking
            entry.streaming = True
        else:
            entry.text = text
            entry.thinking = thinking
            entry.streaming = False
        return [_touch(entry)]

    def _started(self, e: ModelRequestStarted) -> list[Entry]:
        self._step = e.step
        self._turn_of_step[e.step] = e.turn
        self.turn = max(self.turn, e.turn)
        changed = self._resolve_budgets()
        retried = self.by_key.get(f"s:{e.step}")  # a failed request asked again: the same step
        number = retried.number if isinstance(retried, StepEntry) else self._count_step(e.turn)
        entry = StepEntry(
            f"s:{e.step}",
            e.turn,
            step=e.step,
            number=number,
            model=e.model,
            provider=e.provider,
            tool_choice=e.tool_choice,
        )
        stale = self.by_key.get(f"t:{e.step}")
        if isinstance(stale, TextEntry):  # text of a failed attempt with the same number
            stale.text, stale.thinking, stale.streaming = "", "", False
            changed.append(_touch(stale))
        changed.append(self._add(entry))
        self._phase(e.turn, GENERATING)
        return changed

    def _finished(self, e: ModelRequestFinished) -> list[Entry]:
        entry = self.by_key.get(f"s:{e.step}")
        if not isinstance(entry, StepEntry):
            number = self._count_step(e.turn)
            entry = self._add(StepEntry(f"s:{e.step}", e.turn, step=e.step, number=number))
        entry.model, entry.provider = e.model, e.provider
        entry.status = "done"
        entry.input_tokens = e.usage.input_tokens
        entry.output_tokens = e.usage.output_tokens
        entry.cached_tokens = e.usage.cached_tokens
        entry.latency_ms = e.latency_ms
        entry.stop_reason = e.stop_reason
        entry.n_tool_calls = e.n_tool_calls
        entry.cost_usd = e.cost_usd
        entry.replayed = e.replayed
        for key in (None, e.turn):
            t = self.totals.setdefault(key, Totals())
            t.input_tokens += e.usage.input_tokens
            t.output_tokens += e.usage.output_tokens
            if e.cost_usd is not None:
                t.cost_usd += e.cost_usd
                t.cost_known = True
        if e.n_tool_calls == 0 and e.stop_reason != "pause_turn":
            self._phase(e.turn, COMPLETE)  # the model answered (step() callers see it too)
        changed: list[Entry] = [_touch(entry)]
        text = self.by_key.get(f"t:{e.step}")
        if isinstance(text, TextEntry) and text.streaming:
            text.streaming = False
            changed.append(_touch(text))
        return changed

    def _failed(self, e: ModelRequestFailed) -> list[Entry]:
        entry = self.by_key.get(f"s:{e.step}")
        if not isinstance(entry, StepEntry):
            number = self._count_step(e.turn)
            entry = self._add(
                StepEntry(f"s:{e.step}", e.turn, step=e.step, number=number, model=e.model)
            )
        entry.status = "failed"
        entry.error_type, entry.error = e.error_type, e.error
        entry.latency_ms = e.latency_ms
        self._phase(e.turn, FAILED)
        return [_touch(entry)]

    def _step_finished(self, e: StepFinished) -> list[Entry]:
        if e.kind == "budget_exhausted":
            self._budgets += 1
            entry = self._add(
                BudgetEntry(
                    f"b:{self._budgets}",
                    e.turn,
                    number=self._budgets,
                    step=e.step,
                    budget=e.budget or "steps",
                )
            )
            self._last_budget = entry
            self._phase(e.turn, BUDGET)
            return [entry]
        if e.kind == "complete":
            self._phase(e.turn, COMPLETE)
        elif e.kind == "awaiting_approval":
            self._phase(e.turn, AWAITING)
        elif e.kind == "busy":  # a step hook (the store): another process drives this chat
            self._phase(e.turn, ELSEWHERE)
        return []

    # ---------------------------------------------------------------- calls
    def _call_streaming(self, e: ToolCallDelta) -> list[Entry]:
        """A call's name streamed in: the step line says which tool is being called."""
        step = self.by_key.get(f"s:{e.step}")
        if isinstance(step, StepEntry) and e.name and e.index not in step.streaming_calls:
            step.streaming_calls[e.index] = e.name
            return [_touch(step)]
        return []

    def _requested(self, e: ToolCallRequested) -> list[Entry]:
        c = e.call
        entry = CallEntry(
            f"c:{c.id}",
            e.turn,
            call_id=c.id,
            name=c.name,
            server=c.server,
            hosted=c.hosted,
            step=e.step,
            arguments=dict(c.arguments),
            raw_arguments=c.raw_arguments,
            gated=e.approval.required,
            approval_reason=e.approval.reason,
            approval_source=e.approval.source,
            defaults=tool_defaults(self.tool_schema(c.name), c.arguments),
        )
        for key in (None, e.turn):
            self.totals.setdefault(key, Totals()).calls += 1
        return [self._add(entry)]

    def _call_update(
        self,
        call: ToolCall,
        *,
        phase: str | None = None,
        arguments_run: dict[str, Any] | None = None,
        **fields: Any,
    ) -> list[Entry]:
        entry = self.by_key.get(f"c:{call.id}")
        if not isinstance(entry, CallEntry):
            entry = self._add(_call_entry(call, self._turn_of_step.get(self._step, self.turn)))
        for name, value in fields.items():
            setattr(entry, name, value)
        if arguments_run is not None and arguments_run != entry.arguments:
            entry.edited_arguments = arguments_run
        if phase is not None:
            self._phase(entry.turn, phase)
        changed: list[Entry] = [_touch(entry)]
        if phase == RUNNING:
            changed.extend(self._resolve_budgets())
        return changed

    def _decided(self, e: ApprovalDecided) -> list[Entry]:
        decision = e.decision
        changed = self._call_update(
            e.call,
            status=decision.verdict,
            verdict=decision.verdict,
            decided_by=decision.by,
            decision_reason=decision.reason,
            decided_at=decision.at,
            decided_elsewhere=e.elsewhere,
            edited_arguments=decision.arguments,
        )
        turn = changed[0].turn
        if self.totals_for(turn).phase == AWAITING and not self._waiting(turn):
            self._phase(turn, READY)  # no longer awaiting approval, whoever decided
        return changed

    def _waiting(self, turn: int) -> bool:
        """Whether a call of ``turn`` still waits for a decision (looks at that turn only:
        its entries are the last ones, unless an older turn is decided late)."""
        for x in reversed(self.entries):
            if x.turn < turn:
                break
            if isinstance(x, CallEntry) and x.turn == turn and x.pending:
                return True
        return False

    def _call_finished(self, e: ToolCallFinished) -> list[Entry]:
        entry = self.by_key.get(f"c:{e.call.id}")
        edited = isinstance(entry, CallEntry) and entry.edited_arguments is not None
        edited = edited or (e.call.decision is not None and e.call.decision.arguments is not None)
        html, label = _rich(e.result.value)
        return self._call_update(
            e.call,
            status=e.status,
            result=without_edit_note(e.result.content, edited),
            result_status=e.result.status,
            result_html=html,
            result_label=label,
            result_images=thumbs(e.result.parts),
            error=e.error,
            duration_ms=e.duration_ms,
            mode=e.mode,
            replayed=e.replayed,
            ran_before=tuple(self._call_name(cid) for cid in e.ran_before),
        )

    def _call_name(self, call_id: str) -> str:
        entry = self.by_key.get(f"c:{call_id}")
        return entry.name if isinstance(entry, CallEntry) and entry.name else call_id

    def add_traceback(self, call_id: str, text: str) -> None:
        """Keep where a tool failed (its exception reaches ``after_tool_result`` callbacks
        only) on the call's entry, and tell the views."""
        with self.lock:
            entry = self.by_key.get(f"c:{call_id}")
            if not isinstance(entry, CallEntry):
                return
            entry.traceback = text
            _touch(entry)
            for fn in self._listeners:
                fn([entry], False)

    # ------------------------------------------------------- reconstruction
    @classmethod
    def from_chat(cls, chat: Chat) -> ChatState:
        """Rebuild what can be rebuilt from a chat's transcript and calls (no step timings)."""
        state = cls(chat.id)
        step = 0
        for index, m in enumerate(chat.transcript):
            turn = getattr(m, "turn", 0)
            state.turn = max(state.turn, turn)
            if isinstance(m, ChatMessage) and m.role == "user":
                state._add(UserEntry(f"m:{index}", turn, text=m.content))
            elif isinstance(m, (ChatMessage, AssistantToolCallMessage)) and m.role == "assistant":
                step += 1
                state._turn_of_step[step] = turn
                calls = getattr(m, "tool_calls", ())
                state._add(
                    StepEntry(
                        f"s:{step}",
                        turn,
                        step=step,
                        number=state._count_step(turn),
                        model=chat.model,
                        provider=chat.provider.name,
                        status="done",
                        stop_reason=m.stop_reason,
                        n_tool_calls=len(calls),
                        measured=False,
                        items=shown_items(m.items),
                    )
                )
                thinking = thinking_text(m)
                if m.content or thinking:
                    parsed = getattr(m, "parsed", None)
                    rows = parsed_rows(parsed) if parsed is not None else None
                    state._add(
                        TextEntry(
                            f"t:{step}",
                            turn,
                            step=step,
                            text=m.content or "",
                            thinking=thinking,
                            parsed=rows,
                        )
                    )
                for c in calls:
                    state._add(_call_entry(c, turn, step, _schema_lookup(chat)))
                    for key in (None, turn):
                        state.totals.setdefault(key, Totals()).calls += 1
        state._step = step
        for e in chat.events:  # the one fact the transcript lacks: which results ran early
            if isinstance(e, ToolCallFinished) and e.ran_before:
                entry = state.by_key.get(f"c:{e.call.id}")
                if isinstance(entry, CallEntry):
                    entry.ran_before = tuple(state._call_name(cid) for cid in e.ran_before)
        usage = chat.usage
        state.totals[None].input_tokens = usage.input_tokens
        state.totals[None].output_tokens = usage.output_tokens
        if chat.cost_usd is not None:
            state.totals[None].cost_usd, state.totals[None].cost_known = chat.cost_usd, True
        status = chat.status
        if status == "budget_exhausted":
            state._budgets = 1
            which = chat.exhausted_budget or "steps"
            state._last_budget = state._add(
                BudgetEntry("b:1", state.turn, number=1, step=step, budget=which)
            )
        phase = {
            "complete": COMPLETE,
            "awaiting_approval": AWAITING,
            "budget_exhausted": BUDGET,
            "idle": IDLE,
        }.get(status, IDLE)
        state._phase(state.turn, phase)
        return state


def _call_entry(
    c: ToolCall,
    turn: int,
    step: int = 0,
    schema: Callable[[str], dict[str, Any] | None] | None = None,
) -> CallEntry:
    approval = c.approval
    d = c.decision
    result = c.result
    edited = d.arguments if d is not None else None
    html, label = _rich(result.value if result is not None else None)
    return CallEntry(
        f"c:{c.id}",
        turn,
        call_id=c.id,
        name=c.name,
        server=c.server,
        hosted=c.hosted,
        step=step,
        arguments=dict(c.arguments),
        raw_arguments=c.raw_arguments,
        status=c.status,
        gated=bool(approval and approval.required),
        approval_reason=approval.reason if approval else "",
        approval_source=approval.source if approval else "",
        verdict=d.verdict if d else None,
        decided_by=d.by if d else None,
        decision_reason=d.reason if d else None,
        decided_at=d.at if d else None,
        edited_arguments=edited,
        result=without_edit_note(result.content, edited is not None) if result else None,
        result_status=result.status if result else None,
        result_html=html,
        result_label=label,
        result_images=thumbs(result.parts) if result is not None else (),
        duration_ms=_duration(c),
        defaults=tool_defaults(schema(c.name) if schema else None, c.arguments),
    )


def tool_defaults(schema: dict[str, Any] | None, arguments: dict[str, Any]) -> dict[str, Any]:
    """The defaults ``schema`` declares for the parameters ``arguments`` leaves out."""
    props = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(props, dict):
        return {}
    return {
        name: p["default"]
        for name, p in props.items()
        if isinstance(p, dict) and "default" in p and name not in arguments
    }


def _rich(value: Any) -> tuple[str | None, str]:
    """A result value's inert table HTML and label (a DataFrame), or ``(None, "")``."""
    if value is None:
        return None, ""
    html = rich_html(value)
    return (html, rich_label(value)) if html is not None else (None, "")


def _schema_lookup(chat: Chat) -> Callable[[str], dict[str, Any] | None]:
    """``name -> input schema`` of ``chat``'s tools (held weakly: the state outlives nothing)."""
    ref = weakref.ref(chat)

    def schema(name: str) -> dict[str, Any] | None:
        live = ref()
        if live is None:
            return None
        try:
            for t in live.tools:
                if t.name == name:
                    return t.input_schema
        except Exception:  # a tool's schema property raised: no defaults shown
            return None
        return None

    return schema


def _traceback_of(exc: BaseException) -> str:
    """``exc``'s traceback from the tool's own code on (nbagent's runner frames left out),
    clipped."""
    import traceback

    tb = exc.__traceback__
    while tb is not None and _is_ours(tb.tb_frame.f_code.co_filename):
        tb = tb.tb_next
    text = "".join(traceback.format_exception(type(exc), exc, tb or exc.__traceback__))
    return text if len(text) <= 20_000 else text[:20_000] + "\n…"


_PACKAGE = str(Path(__file__).resolve().parents[1])


def _is_ours(filename: str) -> bool:
    return filename.startswith(_PACKAGE)


def _duration(c: ToolCall) -> float | None:
    if c.started_at is None or c.finished_at is None:
        return None
    return (c.finished_at - c.started_at).total_seconds() * 1000.0


def _touch(entry: Entry) -> Entry:
    entry.version += 1
    return entry


def _settles(event: Event) -> bool:
    """Whether the chat stops driving with ``event`` (answered, parked, out of budget, failed)."""
    match event:
        case StepFinished():
            # A deliberate subset of the step kinds (StepKind): those after which nobody drives.
            return event.kind in ("complete", "awaiting_approval", "budget_exhausted", "busy")
        case ModelRequestFailed():
            return True
        case _:
            return False


def _new_state(chat: Chat) -> ChatState:
    state = ChatState.from_chat(chat) if chat.transcript else ChatState(chat.id)
    state.tool_schema = _schema_lookup(chat)
    chat.on(None, state.on_event)
    chat.after_tool_result(_keep_traceback(state))
    return state


# One state per chat, shared by every view of it.
_states: PerChat[ChatState] = PerChat(_new_state)


def state_for(chat: Chat) -> ChatState:
    """The chat's display state: subscribed once, rebuilt from the transcript if late."""
    return _states.get(chat)


def _keep_traceback(state: ChatState) -> Callable[[ToolResult], None]:
    """An ``after_tool_result`` callback: a failed call's traceback onto its entry."""

    def keep(result: ToolResult) -> None:
        exc = result.error
        if exc is not None:
            try:
                text = _traceback_of(exc)
            except Exception:  # formatting a strange exception must not cost the chat anything
                return
            state.add_traceback(result.call.id, text)

    return keep


def has_state(chat: Chat) -> bool:
    return chat in _states
