"""What the notebook view shows, as plain values read off the chat's record.

:class:`ChatState` follows the core's :class:`~nbagent._record.ChatRecord` (the
one fold of the chat's events): it keeps a list of *entries* (a user message, a
model step, the assistant's text, a tool call, a budget card, an error) and
updates exactly the entries a record change touches. Views listen to it and
re-render only those entries, so the cost of an event does not grow with the
conversation.

Nothing here imports widgets; the renderers in ``_render`` turn entries into
HTML, markdown and text, and ``_view`` wires entries to widgets.
"""

from __future__ import annotations

import contextlib
import json
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from .._approvals import HUMAN
from .._claims import Ledger
from .._errors import redact_keys
from .._events import (
    ApprovalDecided,
    Event,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
)
from .._extension import Extension
from .._html import ARGUMENTS_CHARS, clip, json_preview, json_visible, redacted
from .._media import IMAGE_TYPES, sniff, sniff_audio
from .._record import (
    CallRecord,
    ChatRecord,
    InputRecord,
    MessageRecord,
    RecordChange,
    StepRecord,
)
from .._result_text import without_edit_note
from .._secrets import Masks, named_values, redact_named, token_masks
from .._types import (
    AssistantToolCallMessage,
    AudioPart,
    ChatMessage,
    DecisionVerdict,
    FilePart,
    Part,
    PendingInput,
    ProviderItem,
    Reasoning,
    ToolResultMessage,
    Usage,
)
from ._per_chat import PerChat
from ._rich import rich_html, rich_label

if TYPE_CHECKING:
    from .._base_chat import BaseChat as Chat
    from .._chat_state import ToolResult

E = TypeVar("E", bound="Entry")
Schema = Callable[[str], dict[str, Any] | None]

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
STOPPED = "stopped · complete() resumes"  # the stop button, chat.cancel(): no step says so


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
    audio: bool = False
    """A sound: ``src`` (if any) plays in an ``<audio controls>`` player."""


THUMB_PIXELS = 320
"""Longest side of a thumbnail, when PIL is there to shrink an image."""
THUMB_INLINE_BYTES = 256 * 1024
"""Without PIL, an image up to this size is shown as it is; a larger one by its label."""
AUDIO_INLINE_BYTES = 2 * 1024 * 1024
"""A sound up to this size gets a player on the card (its bytes in the notebook); a larger
one is shown by its label only."""


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
    """What the view shows of a message's or a result's images, files and sounds."""
    import base64

    out: list[Thumb] = []
    for n, part in enumerate(parts, 1):
        size = f"{len(part.data) / 1024:.0f} KB"
        if isinstance(part, FilePart):
            out.append(Thumb(f"{part.filename} ({part.media_type}, {size})"))
            continue
        if isinstance(part, AudioPart):
            label = f"audio {n} ({part.media_type}, {size})"
            # only bytes of a checked sound format, and not too many, go into a src
            playable = sniff_audio(part.data[:16]) == part.media_type
            if not playable or len(part.data) > AUDIO_INLINE_BYTES:
                out.append(Thumb(label, None, audio=True))
                continue
            played = base64.b64encode(part.data).decode()
            out.append(Thumb(label, f"data:{part.media_type};base64,{played}", audio=True))
            continue
        label = f"image {n} ({part.media_type}, {size})"
        kind = sniff(part.data[:16])
        if kind not in IMAGE_TYPES:  # only bytes of a checked image format go into a src
            out.append(Thumb(label))
            continue
        out.append(Thumb(label, _image_src(part.data, kind)))
    return tuple(out)


_SRCS: OrderedDict[bytes, str | None] = OrderedDict()
_SRCS_KEPT = 256
_SRCS_LOCK = threading.Lock()


def _image_src(image: bytes, kind: str) -> str | None:
    """An image's thumbnail as a ``data:`` URL (``None``: shown by its label), made once per
    image: every redraw of a view built each again (PIL's shrink and base64, about 0.2 s a
    plot: 5 s a redraw for a chat of 20 plots). Kept by the bytes' digest, the last 256."""
    import base64
    import hashlib

    key = hashlib.sha256(image).digest()
    with _SRCS_LOCK:
        if key in _SRCS:
            _SRCS.move_to_end(key)
            return _SRCS[key]
    data: bytes | None = _shrunk(image)
    if data is not None:
        kind = "image/png"
    elif len(image) <= THUMB_INLINE_BYTES:
        data = image
    src = None if data is None else f"data:{kind};base64,{base64.b64encode(data).decode()}"
    with _SRCS_LOCK:
        _SRCS[key] = src
        while len(_SRCS) > _SRCS_KEPT:
            _SRCS.popitem(last=False)
    return src


@dataclass(eq=False)
class UserEntry(Entry):
    text: str = ""
    images: tuple[Thumb, ...] = ()
    kind = "user"


HIDDEN_THINKING = "[the provider sent this thinking encrypted or redacted]"


def shown_items(items: tuple[ProviderItem, ...]) -> tuple[ProviderItem, ...]:
    """The provider items a step shows as folded lines: not its reasoning (the text entry's
    *Thinking* section shows that) nor the text the model wrote (its text entry shows it)."""
    return tuple(i for i in items if not isinstance(i, Reasoning) and not i.is_text)


def commentary_text(m: ChatMessage | AssistantToolCallMessage) -> str:
    """What the model said on the way (Responses commentary messages), as one text."""
    return "\n\n".join(i.commentary for i in m.items if i.commentary)


def thinking_text(m: ChatMessage | AssistantToolCallMessage) -> str:
    """A message's thinking as one text (a redacted or encrypted part says so)."""
    return "\n\n".join(r.text or HIDDEN_THINKING for r in m.reasoning)


def sources_of(m: ChatMessage | AssistantToolCallMessage) -> tuple[tuple[str, str], ...]:
    """The answer's cited sources as (title, URL) pairs, each once, in order (URL ``""`` for
    a document passage); the renderer escapes both and links only web URLs."""
    out: dict[tuple[str, str], None] = {}
    for c in m.citations:
        url = c.get("url") or (c.get("source") if c.get("type") == "search_result_location" else "")
        title = c.get("title") or c.get("document_title") or url or str(c.get("type") or "source")
        out[(str(title), str(url or ""))] = None
    return tuple(out)


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
    claims: tuple[str, ...] = ()
    """A final answer's claims of actions that did not happen (:mod:`nbagent._claims`)."""
    commentary: str = ""
    """What the model said on the way (a preamble between tool calls), shown as such."""
    sources: tuple[tuple[str, str], ...] = ()
    """The answer's cited sources: (title, URL) pairs, shown under it."""
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
    """One model request: the core's record of it (``r``: model, tokens, latency, stop
    reason) and what only the view knows.

    The view says "step N" with ``r.step``, the chat's own step number: the one
    the log, fork and compare use, counting steps as ``max_steps`` does (model
    requests and tool rounds, so a tool round sits between "step 1" and "step 3";
    a retried request keeps its number).
    """

    r: StepRecord = field(default_factory=lambda: StepRecord(0, 0))
    status: str = "running"  # running | done | failed (the view's totals counted it once done)
    streaming_calls: dict[int, str] = field(default_factory=dict)
    items: tuple[ProviderItem, ...] = ()  # what the provider ran itself in this step
    kind = "step"


@dataclass(eq=False)
class CallEntry(Entry):
    """One tool call: the core's record of it (``r``, read here, written only by the fold)
    and what only the view knows."""

    r: CallRecord = field(default_factory=lambda: CallRecord("", ""))
    decided_elsewhere: bool = False  # by another process or chat object, through a store
    decided_in_code: bool = False  # a person's decision (``by="user"``) made in code, not on a card
    decided_by_hand: bool = False  # ... made on its card (or at ``chat.review()``)
    result: str | None = None  # the result the model read, without the note an edit adds
    ran_before: tuple[str, ...] = ()  # earlier gated calls (tool names) still undecided when it ran
    defaults: dict[str, Any] = field(default_factory=dict)  # what the tool uses for omitted params
    result_html: str | None = None  # a rich result (a DataFrame) as inert table HTML
    result_label: str = ""  # its type (and shape), for the summary line
    result_peek: str | None = None  # its first rows (inert table HTML), for the folded line
    result_images: tuple[Thumb, ...] = ()  # the images the tool returned, as thumbnails
    traceback: str | None = None  # where a tool that raised failed
    inputs: tuple[PendingInput, ...] = ()  # what a person is asked for it, still unanswered
    # its inputs answered (declined, cancelled), each with whether it was on its card
    settled_inputs: tuple[tuple[InputRecord, bool], ...] = ()
    kind = "call"

    _result: ToolResultMessage | None = field(default=None, init=False, repr=False)
    # What the view shows of the arguments (they do not change), computed once.
    _shown: tuple[str, bool] | None = field(default=None, init=False, repr=False)
    # The arguments (and an edit's) as shown: secrets redacted, each kept with what it shows.
    _redacted: tuple[Any, Any] | None = field(default=None, init=False, repr=False)
    _redacted_edit: tuple[Any, Any] | None = field(default=None, init=False, repr=False)

    @property
    def pending(self) -> bool:
        return self.r.status == "awaiting_approval"

    @property
    def gated(self) -> bool:
        return self.r.approval is not None and self.r.approval.required

    @property
    def awaits_input(self) -> bool:
        """Parked for a person's answer (an external tool's call, ``ask_user``)."""
        return self.r.status == "awaiting_input"

    @property
    def asks(self) -> bool:
        """Something about this call waits for a person: its approval or an input (a parked
        call's, or one a server asked for in the middle of the call)."""
        return self.pending or self.awaits_input or bool(self.inputs)

    @property
    def verdict(self) -> DecisionVerdict | None:
        return self.r.decided.verdict if self.r.decided is not None else None

    @property
    def raw_arguments(self) -> str | None:
        return self.r.call.raw_arguments if self.r.call is not None else None

    @property
    def shown_arguments(self) -> dict[str, Any]:
        """The model's arguments as the view shows them: every string in them (keys too)
        with anything shaped like an API key or URL credentials as ``***``. The call runs
        with ``r.arguments``; a person edits from these (see ``_html.unredacted``)."""
        arguments = self.r.arguments
        if self._redacted is None or self._redacted[0] is not arguments:
            self._redacted = (arguments, redacted(arguments))
        shown: dict[str, Any] = self._redacted[1]
        return shown

    @property
    def shown_edited(self) -> dict[str, Any] | None:
        """An edit's arguments as the view shows them (redacted), or ``None``: not edited."""
        edited = self.r.edited_arguments
        if edited is None:
            return None
        if self._redacted_edit is None or self._redacted_edit[0] is not edited:
            self._redacted_edit = (edited, redacted(edited))
        shown: dict[str, Any] = self._redacted_edit[1]
        return shown

    @property
    def shown_raw_arguments(self) -> str | None:
        """Arguments that were not valid JSON, as shown (secrets redacted), or ``None``."""
        raw = self.raw_arguments
        return None if raw is None else redact_named(raw[: 2 * ARGUMENTS_CHARS])

    @property
    def arguments_text(self) -> str:
        """The arguments as pretty JSON, or a bounded preview of them (see :func:`json_preview`)."""
        return self._arguments_shown()[0]

    @property
    def arguments_editable(self) -> bool:
        """Whether :attr:`arguments_text` is the whole arguments (so it can be edited)."""
        return self._arguments_shown()[1]

    def _arguments_shown(self) -> tuple[str, bool]:
        if self._shown is None:
            raw, shown_raw = self.raw_arguments, self.shown_raw_arguments
            if raw is not None and shown_raw is not None and not self.r.arguments:
                # the whole text (so editable) only when nothing in it was hidden
                whole = len(clip(raw)) == len(raw) and shown_raw == raw
                self._shown = (json_visible(clip(shown_raw)), whole)
            else:
                self._shown = json_preview(self.shown_arguments)
        return self._shown


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

    ``steps`` counts steps as ``max_steps`` does (the record's ``steps_taken``:
    model requests and tool rounds that did work), so a budget of 3 steps that ran
    out reads "3 steps".
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


@dataclass
class Deciders:
    """Who made a person's decisions (``by="user"``) on a chat's calls, as this kernel saw them.

    One per chat, shared by every state of it (a live one and one rebuilt from the
    record agree). A click on a card (or an answer at ``chat.review()``) marks its
    call first (``by_hand``); a decision seen without that mark was made in code
    (``in_code``), as was the decision a fork was made with. A decision made
    before this kernel saw the chat (a loaded one, or one decided in code before it was
    shown) is in neither: its card says the verdict and not who ("approved"), as nothing
    here saw who made it.
    ``inputs_by_hand`` are the pending inputs answered on their card (by input id).
    ``tracebacks``: where each failed tool call failed, the other thing a view made later
    needs that the record does not hold (both kept by :func:`follow_quietly`).
    """

    by_hand: set[str] = field(default_factory=set)
    in_code: set[str] = field(default_factory=set)
    inputs_by_hand: set[str] = field(default_factory=set)
    tracebacks: dict[str, str] = field(default_factory=dict)  # call id -> where it failed
    decided_at: dict[str, Any] = field(default_factory=dict)  # call id -> its decision's time
    following: bool = False  # :func:`follow_quietly` hooked the chat


_deciders_by_id: weakref.WeakValueDictionary[str, Deciders] = weakref.WeakValueDictionary()
"""Each chat's :class:`Deciders` by chat id, while its chat lives: a fork made in this
kernel starts from its parent's (the calls they share were decided as the parent's were)."""


def _new_deciders(chat: Chat) -> Deciders:
    deciders = Deciders()
    parent = getattr(chat, "parent", None)
    if parent is not None:
        shared = _deciders_by_id.get(parent.chat_id)
        if shared is not None:
            # only the decisions the fork shares: made before it (the same decision, at
            # the same time), not a click in the parent since on a call both still had
            with _follow_lock:
                known = dict(shared.decided_at)
                mine = {r.call_id: r.decided.at for r in chat.record.calls if r.decided}
                same = {c for c, at in mine.items() if known.get(c) == at}
                deciders.by_hand |= shared.by_hand & same
                deciders.in_code |= shared.in_code & same
                deciders.tracebacks.update(shared.tracebacks)
        if parent.call_id and parent.change in ("decision", "arguments"):
            # chat.fork(call, decision=...): that call's decision is the fork's, made in code
            deciders.by_hand.discard(parent.call_id)
            deciders.in_code.add(parent.call_id)
    with contextlib.suppress(TypeError):  # a chat without a string id: no fork finds it
        _deciders_by_id[chat.id] = deciders
    return deciders


class ChatState:
    """The view's model of one chat, read off the chat's record (thread-safe).

    The facts (messages, model steps, calls, totals) come from the core's
    :class:`~nbagent._record.ChatRecord`: each change it reports updates the
    entries it touches. The view keeps only what the record has not: the text
    as it streams, the tool a step is calling, a failed tool's traceback, the
    budget cards' answers, errors outside the chat, and the phase it says.
    """

    def __init__(
        self,
        record: ChatRecord,
        tool_schema: Schema | None = None,
        *,
        deciders: Deciders | None = None,
    ):
        self.chat_id = record.chat_id
        self.record = record
        self.lock = threading.RLock()
        self.deciders = deciders or Deciders()  # who made a person's decisions (see there)
        self._listeners: list[Listener] = []
        self._errors = 0
        # name -> the tool's JSON schema (the defaults it will use).
        self.tool_schema: Schema = tool_schema or (lambda _name: None)
        self._rebuild()

    @classmethod
    def from_chat(cls, chat: Chat) -> ChatState:
        """What ``chat`` shows now, not following it (a snapshot)."""
        return cls(chat.record, _schema_lookup(chat), deciders=_deciders.get(chat))

    def deciding_by_hand(self, call_id: str) -> contextlib.AbstractContextManager[None]:
        """A person is deciding ``call_id`` on a card, not in code: what runs in the ``with``
        records that decision (see :func:`_deciding`)."""
        return _deciding(self.deciders, self.record, call_id, self.lock)

    def mark_input_by_hand(self, input_id: str) -> None:
        """A person is answering ``input_id`` on its card, not in code."""
        with self.lock:
            self.deciders.inputs_by_hand.add(input_id)

    # -------------------------------------------------------------- reading
    def entries_for(self, turn: int | None) -> list[Entry]:
        if turn is None:
            return list(self.entries)
        return list(self._by_turn.get(turn, ()))  # a turn's view costs its entries, not the chat's

    def count_for(self, turn: int | None) -> int:
        """How many entries the chat (or one turn) has, without copying them."""
        return len(self.entries) if turn is None else len(self._by_turn.get(turn, ()))

    def totals_for(self, turn: int | None) -> Totals:
        return self.totals.get(turn) or Totals()

    def pending_cards(self) -> list[Entry]:
        """Entries a person must act on: a call awaiting approval or an input, a budget card."""
        return [e for e in self.entries if waits_for_someone(e)]

    # ------------------------------------------------------------ listeners
    def add_listener(self, fn: Listener) -> None:
        with self.lock:
            self._listeners = [*self._listeners, fn]

    def remove_listener(self, fn: Listener) -> None:
        with self.lock:
            self._listeners = [f for f in self._listeners if f is not fn and f != fn]

    def _tell(self, changed: list[Entry], settled: bool) -> None:
        for fn in self._listeners:
            fn(changed, settled)

    # ------------------------------------------------------- following
    def on_change(self, change: RecordChange) -> None:
        """The record's subscriber: update the entries ``change`` touched, tell the views."""
        with self.lock:
            settled = False
            if change.kind == "reset":
                self._rebuild()
                changed, settled = list(self.entries), True
            elif change.kind == "call":
                record = self.record.get(str(change.key))
                changed = [] if record is None else self._call(record, change.event)
            elif change.kind == "step":
                step = self.record.steps[int(change.key or 0)]
                changed = self._model_step(int(change.key or 0), step)
                settled = step.error_type is not None  # a failed request: nobody drives
            elif change.kind == "message":
                changed = self._message(self.record.messages[int(change.key or 0)])
            elif change.kind == "input":  # asked or answered: its call's card shows it
                asked = self.record.input(str(change.key))
                record = self.record.get(asked.call_id) if asked and asked.call_id else None
                changed = [] if record is None else self._call(record, change.event)
            else:
                changed = self._chat_step(change.key)
                settled = self.record.last_step in _SETTLED
            if changed or settled:
                self._tell(changed, settled)

    def on_fragment(self, event: Event) -> None:
        """A bus subscriber for what the record leaves out: text, thinking and a called
        tool's name as they stream in."""
        if not isinstance(event, (TextDelta, ReasoningDelta, ToolCallDelta)):
            return
        with self.lock:
            step = self.by_key.get(f"s:{event.step}")
            if isinstance(event, ToolCallDelta):
                if not isinstance(step, StepEntry) or not event.name:
                    return
                if event.index in step.streaming_calls:
                    return
                step.streaming_calls[event.index] = event.name
                entry: Entry = step
            else:
                text = self._text(event.step, step.turn if step is not None else self.turn)
                if isinstance(event, TextDelta):
                    text.text = self._hide(text.text + event.text)
                else:
                    text.thinking = self._hide(text.thinking + event.text)
                text.streaming = True
                entry = text
            self._tell([_touch(entry)], False)

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
            self._tell([entry], True)
            return entry

    def set_budget_status(self, key: str, status: str) -> Entry | None:
        with self.lock:
            entry = self.by_key.get(key)
            if not isinstance(entry, BudgetEntry) or entry.status == status:
                return None
            entry.status = status
            self._tell([_touch(entry)], False)
            return entry

    def run_stopped(self, error: BaseException) -> None:
        """A run of the loop ended by raising ``error``, which no step event says: the stop
        button or ``chat.cancel()`` (``stopped``), or an error while a tool ran or the model
        was asked (``error``). The phase says so, not "running tools" for ever; the views
        settle."""
        import asyncio

        from .._errors import ChatCancelled

        with self.lock:
            phase = self.totals_for(self.turn).phase
            if isinstance(error, (ChatCancelled, KeyboardInterrupt, asyncio.CancelledError)):
                if phase in (COMPLETE, AWAITING, BUDGET, ELSEWHERE, FAILED, STOPPED):
                    return  # what the run ended on already says where the chat is
                now = STOPPED
            elif phase in (RUNNING, GENERATING, READY):
                now = FAILED
            else:
                return
            self._phase(self.turn, now)
            changed: list[Entry] = []
            for e in self._by_turn.get(self.turn, ()):
                if isinstance(e, TextEntry) and e.streaming:  # no more text comes
                    e.streaming = False
                    changed.append(_touch(e))
            self._tell(changed, True)

    def add_traceback(self, call_id: str, text: str) -> None:
        """Keep where a tool failed (its exception reaches ``after_tool_result`` callbacks
        only) on the call's entry, and tell the views."""
        with self.lock:
            entry = self.by_key.get(f"c:{call_id}")
            if isinstance(entry, CallEntry):
                entry.traceback = text
                self._tell([_touch(entry)], False)

    # ------------------------------------------------------------- entries
    def _rebuild(self) -> None:
        """Every entry from the record, in the order a live view gets them: each answer's
        request(s) (a failed attempt first), its text, its calls."""
        self.entries: list[Entry] = []
        self.by_key: dict[str, Entry] = {}
        self._by_turn: dict[int, list[Entry]] = {}  # each turn's entries, in order
        self.totals: dict[int | None, Totals] = {None: Totals()}
        self.turn = 0
        self._step = 0  # the step whose answer comes next
        self._attempt: dict[int, int] = {}  # step -> the position of its request shown
        self._budgets = 0
        self._last_budget: BudgetEntry | None = None
        self._ledger = Ledger()  # the calls so far, as a final answer's claims are read
        # the values the chat's calls were given under a secret's name (``password``): an
        # answer, its thinking or a result that quotes one shows it as ``***``
        self._secrets: set[str] = set()
        self._masks: Masks | None = None
        with self.record.reading() as r:
            steps = list(enumerate(r.steps))
            for m in r.messages:
                while m.role == "assistant" and steps:
                    i, s = steps.pop(0)
                    self._model_step(i, s)
                    if s.error_type is None:
                        break
                self._message(m)
                for c in getattr(m.message, "tool_calls", ()):
                    call = r.get(c.id)
                    if call is not None:
                        self._call(call, None)
            for i, s in steps:
                self._model_step(i, s)
            for turn, totals in self.totals.items():
                totals.steps = r.steps_taken(turn)
            last = r.last_step
            if last == "budget_exhausted":
                self._chat_step(r.step)
            self._phase(self.turn, _PHASES.get(last or "", IDLE))
            if last == "awaiting_approval" and not self._waiting(self.turn):
                self._phase(self.turn, READY)

    def _add(self, entry: E) -> E:
        old = self.by_key.get(entry.key)
        turn = self._by_turn.setdefault(entry.turn, [])
        if old is not None:  # a retried request reuses its step number
            self.entries[self.entries.index(old)] = entry
            former = self._by_turn[old.turn]
            if former is turn:
                turn[turn.index(old)] = entry
            else:
                former.remove(old)
                turn.append(entry)
            entry.version = old.version + 1
        else:
            self.entries.append(entry)
            turn.append(entry)
        self.by_key[entry.key] = entry
        self.totals.setdefault(entry.turn, Totals())
        return entry

    def _note_secrets(self, *arguments: Any) -> None:
        """Keep the values ``arguments`` give under a secret's name, to hide them in text."""
        found = named_values(*arguments) - self._secrets
        if found:
            self._secrets |= found
            self._masks = token_masks(tokens=self._secrets)

    def _hide(self, text: str) -> str:
        """``text`` as shown: a value a call was given under a secret's name as ``***``."""
        return self._masks.hide(text) if self._masks is not None and text else text

    def _count_steps(self, turn: int) -> None:
        """The steps taken, in the chat and in ``turn``, as the record counts them."""
        self.totals[None].steps = self.record.steps_taken()
        self.totals.setdefault(turn, Totals()).steps = self.record.steps_taken(turn)

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

    def _text(self, step: int, turn: int) -> TextEntry:
        entry = self.by_key.get(f"t:{step}")
        if not isinstance(entry, TextEntry):
            entry = self._add(TextEntry(f"t:{step}", turn, step=step))
        return entry

    def _message(self, m: MessageRecord) -> list[Entry]:
        msg: Any = m.message
        if m.role == "user":
            self.turn = max(self.turn, m.turn)
            parts = getattr(msg, "parts", ())
            user = self._add(
                UserEntry(f"m:{m.index}", m.turn, text=m.content or "", images=thumbs(parts))
            )
            self._phase(m.turn, GENERATING)
            return [user]
        if m.role != "assistant":
            return []
        changed: list[Entry] = []
        # its own calls' secrets first: its text or thinking may say what it passes them
        self._note_secrets(*(c.arguments for c in getattr(msg, "tool_calls", ()) or ()))
        step = self.by_key.get(f"s:{self._step}")
        items = shown_items(msg.items)
        if items and isinstance(step, StepEntry) and step.items != items:
            step.items = items  # what the provider ran itself, shown before the step's text
            changed.append(_touch(step))
        text, thinking = m.content or "", thinking_text(msg)
        said = commentary_text(msg)
        if not (text or thinking or said) and f"t:{self._step}" not in self.by_key:
            return changed
        entry = self._text(self._step, m.turn)
        entry.text, entry.thinking, entry.streaming = self._hide(text), self._hide(thinking), False
        entry.commentary, entry.sources = self._hide(said), sources_of(msg)
        parsed = getattr(msg, "parsed", None)
        if parsed is not None:
            entry.parsed = parsed_rows(parsed)
        if m.kind == "text" and parsed is None:  # a final answer: does it claim what never ran?
            claims = self._ledger.claims(text, turn=m.turn)
            entry.claims = tuple(c.describe() for c in claims)
        changed.append(_touch(entry))
        return changed

    def _model_step(self, i: int, s: StepRecord) -> list[Entry]:
        """The ``i``-th model request of the record (started, answered or failed)."""
        key = f"s:{s.step}"
        entry = self.by_key.get(key)
        changed: list[Entry] = []
        if not isinstance(entry, StepEntry) or self._attempt.get(s.step) != i:
            # A new request, or a failed one asked again: the same step, the same number.
            self._attempt[s.step] = i
            self._step = s.step
            self.turn = max(self.turn, s.turn)
            changed += self._resolve_budgets()
            stale = self.by_key.get(f"t:{s.step}")
            if isinstance(stale, TextEntry):  # text of a failed attempt with the same number
                stale.text, stale.thinking, stale.streaming = "", "", False
                changed.append(_touch(stale))
            entry = self._add(StepEntry(key, s.turn, r=s))
        done = entry.status == "done"
        entry.status = "failed" if s.error_type else "running" if s.finished_at is None else "done"
        changed.append(_touch(entry))
        if entry.status == "running":
            self._phase(s.turn, GENERATING)
            return changed
        text = self.by_key.get(f"t:{s.step}")
        if isinstance(text, TextEntry) and text.streaming:
            text.streaming = False
            changed.append(_touch(text))
        if entry.status == "failed":
            self._phase(s.turn, FAILED)
        elif not done:
            usage = s.usage or Usage()
            for turn in (None, s.turn):
                t = self.totals.setdefault(turn, Totals())
                t.input_tokens += usage.input_tokens
                t.output_tokens += usage.output_tokens
                if s.cost_usd is not None:
                    t.cost_usd += s.cost_usd
                    t.cost_known = True
            if not s.n_tool_calls and s.stop_reason != "pause_turn":
                self._phase(s.turn, COMPLETE)  # the model answered (step() callers see it too)
        return changed

    def _chat_step(self, step: Any) -> list[Entry]:
        """A step of the chat ended: a budget card when a budget ran out; the phase."""
        last, turn = self.record.last_step, self.turn
        self._count_steps(turn)
        if last == "budget_exhausted":
            self._budgets += 1
            entry = self._add(
                BudgetEntry(
                    f"b:{self._budgets}",
                    turn,
                    number=self._budgets,
                    step=int(step or 0),
                    budget=self.record.last_budget or "steps",
                )
            )
            self._last_budget = entry
            self._phase(turn, BUDGET)
            return [entry]
        if last in _PHASES:
            self._phase(turn, _PHASES[last])
        return []

    def _call(self, r: CallRecord, event: Event | None) -> list[Entry]:
        if r.call is None:
            return []  # what the provider ran itself: its step's line shows it
        self._ledger.note(r)
        key = f"c:{r.call_id}"
        entry = self.by_key.get(key)
        if r.edited_arguments is not None:  # an edit's secrets (the model's: when first seen)
            self._note_secrets(r.edited_arguments)
        if not isinstance(entry, CallEntry):
            self._note_secrets(r.call.arguments)
            turn = r.turn if r.turn is not None else self.turn
            defaults = tool_defaults(self.tool_schema(r.tool), r.call.arguments)
            entry = self._add(CallEntry(key, turn, r=r, defaults=defaults))
            entry.traceback = self.deciders.tracebacks.get(r.call_id)  # failed before it was shown
            for t in (None, turn):
                self.totals.setdefault(t, Totals()).calls += 1
        if isinstance(event, ApprovalDecided):
            entry.decided_elsewhere = event.elsewhere  # made outside this chat object
            _note_decision(self.deciders, r.call_id, event.decision, event.elsewhere)
        entry.decided_in_code = r.call_id in self.deciders.in_code
        entry.decided_by_hand = r.call_id in self.deciders.by_hand
        if r.result is not entry._result:
            entry._result = result = r.result
            edited = r.decided is not None and r.decided.arguments is not None
            entry.result = self._hide(without_edit_note(result.content, edited)) if result else None
            value = result.value if result else None
            entry.result_html, entry.result_label = _rich(value)
            entry.result_peek = _peek(value, entry.result_html)
            entry.result_images = thumbs(result.parts) if result else ()
        entry.ran_before = tuple(self._call_name(cid) for cid in r.ran_before)
        mine = [i for i in self.record.inputs if i.call_id == r.call_id]
        entry.inputs = tuple(i.request for i in mine if i.status == "pending")
        by_hand = self.deciders.inputs_by_hand
        entry.settled_inputs = tuple(
            (i, i.input_id in by_hand) for i in mine if i.status != "pending"
        )
        changed: list[Entry] = [_touch(entry)]
        if r.status == "running":
            self._phase(entry.turn, RUNNING)
            changed += self._resolve_budgets()
        elif (entry.pending and entry.verdict is None) or entry.awaits_input:
            self._phase(entry.turn, AWAITING)
        elif (
            r.decided
            and self.totals_for(entry.turn).phase == AWAITING
            and not self._waiting(entry.turn)
        ):
            self._phase(entry.turn, READY)  # no longer awaiting approval, whoever decided
        return changed

    def _waiting(self, turn: int) -> bool:
        """Whether a call of ``turn`` still waits for a decision (looks at that turn only:
        its entries are the last ones, unless an older turn is decided late)."""
        for x in reversed(self.entries):
            if x.turn < turn:
                break
            if isinstance(x, CallEntry) and x.turn == turn and (x.pending or x.awaits_input):
                return True
        return False

    def _call_name(self, call_id: str) -> str:
        entry = self.by_key.get(f"c:{call_id}")
        # shown only (a card's "ran before" note): as the model reads a name it wrote
        name = entry.r.tool if isinstance(entry, CallEntry) and entry.r.tool else call_id
        return redact_keys(name)


def waits_for_someone(e: Entry) -> bool:
    """Whether a person must act on ``e``: a call's approval or input, a budget card."""
    if isinstance(e, CallEntry):
        return e.asks
    return isinstance(e, BudgetEntry) and e.pending


_PHASES = {
    "complete": COMPLETE,
    "awaiting_approval": AWAITING,
    "budget_exhausted": BUDGET,
    "busy": ELSEWHERE,  # a step hook (the store): another process drives this chat
}
_SETTLED = frozenset(_PHASES)
"""The step kinds after which nobody drives (a deliberate subset of StepKind)."""


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


PEEK_ROWS = 3
"""Rows of a rich result (a DataFrame) shown on its call's folded line."""


def _peek(value: Any, html: str | None) -> str | None:
    """The first :data:`PEEK_ROWS` rows of a rich result as inert table HTML (the whole
    table when it is that short or has no ``head``), or ``None`` without a rich form."""
    if html is None:
        return None
    shape = getattr(value, "shape", None)
    head = getattr(value, "head", None)
    if not (isinstance(shape, tuple) and shape and isinstance(shape[0], int)) or not callable(head):
        return html
    if shape[0] <= PEEK_ROWS:
        return html
    try:
        return rich_html(head(PEEK_ROWS))
    except Exception:  # the object's own code: its failure only costs the peek
        return None


def _schema_lookup(chat: Chat) -> Callable[[str], dict[str, Any] | None]:
    """``name -> input schema`` of ``chat``'s tools (held weakly: the state outlives nothing)."""
    ref = weakref.ref(chat)

    def schema(name: str) -> dict[str, Any] | None:
        live = ref()
        if live is None:
            return None
        try:
            for t in live.known_tools:  # never live.tools: a display must not wait on a server
                if t.name == name:
                    return t.input_schema
        except Exception:  # a tool's schema property raised: no defaults shown
            return None
        return None

    return schema


TRACEBACK_CHARS = 20_000
"""A traceback longer than this is shown cut, with an ellipsis."""


def traceback_text(exc: BaseException) -> str:
    """``exc``'s traceback as the view shows it: from the tool's own code on (nbagent's
    runner frames left out), anything shaped like an API key or URL credentials as ``***``
    (what a tool's exception says often holds the key or DSN it failed with; the log's error
    line is redacted the same way), clipped."""
    import traceback

    tb = exc.__traceback__
    while tb is not None and _is_ours(tb.tb_frame.f_code.co_filename):
        tb = tb.tb_next
    text = "".join(traceback.format_exception(type(exc), exc, tb or exc.__traceback__))
    # Redacted before the final cut (a key cut in two would no longer look like one), on a
    # bounded text (the scrubber's cost grows with what it reads).
    text = redact_keys(text[: 2 * TRACEBACK_CHARS])
    return text if len(text) <= TRACEBACK_CHARS else text[:TRACEBACK_CHARS] + "\n…"


_PACKAGE = str(Path(__file__).resolve().parents[1])


def _is_ours(filename: str) -> bool:
    return filename.startswith(_PACKAGE)


def _touch(entry: Entry) -> Entry:
    entry.version += 1
    return entry


def _note_decision(deciders: Deciders, call_id: str, decision: Any, elsewhere: bool) -> None:
    deciders.decided_at[call_id] = decision.at
    if not elsewhere and decision.by == HUMAN and call_id not in deciders.by_hand:
        deciders.in_code.add(call_id)


def _new_state(chat: Chat) -> ChatState:
    """Made from the record and subscribed to it at once: it hears exactly the changes
    folded after it read the record, even while another thread drives the chat."""
    follow_quietly(chat)
    with chat.record.reading():
        state = ChatState.from_chat(chat)
        chat.record.subscribe(state.on_change)
    chat.on(None, state.on_fragment)  # the text as it streams (fragments flow from now on)
    chat.extend(_RunStopped(state))
    return state


class _RunStopped(Extension):
    """Tells the display state when a run ends by raising (no event says so)."""

    def __init__(self, state: ChatState) -> None:
        self._state = weakref.ref(state)

    def run_stopped(self, error: BaseException) -> None:
        state = self._state()
        if state is not None:
            state.run_stopped(error)


_deciders: PerChat[Deciders] = PerChat(_new_deciders, "deciders")

# One state per chat, shared by every view of it.
_states: PerChat[ChatState] = PerChat(_new_state, "display state")


def state_for(chat: Chat) -> ChatState:
    """The chat's display state: made once, from its record, and following it."""
    return _states.get(chat)


def follow_quietly(chat: Chat) -> None:
    """Keep what a later view of ``chat`` shows and its record does not hold: a failed
    tool's traceback (only ``after_tool_result`` callbacks see the exception) and which
    decisions were made in code. Two callbacks, called for results and decisions only:
    a chat shown by nobody (a batch's, in a kernel) does not pay for a display state that
    follows every event (about as much CPU as the chat's own loop). Idempotent."""
    deciders = _deciders.get(chat)
    with _follow_lock:
        if deciders.following:
            return
        deciders.following = True
    ref = weakref.ref(chat)

    def keep(result: ToolResult) -> None:
        exc = result.error
        if exc is None:
            return
        try:
            text = traceback_text(exc)
        except Exception:  # formatting a strange exception must not cost the chat anything
            return
        deciders.tracebacks[result.call.id] = text
        held = ref()
        state = _states.peek(held) if held is not None else None
        if state is not None:
            state.add_traceback(result.call.id, text)

    def decided(event: Event) -> None:
        if isinstance(event, ApprovalDecided):
            with _follow_lock:
                _note_decision(deciders, event.call.id, event.decision, event.elsewhere)

    chat.after_tool_result(keep)
    chat.on(ApprovalDecided, decided)


_follow_lock = threading.Lock()


def deciding_by_hand(chat: Chat, call_id: str) -> contextlib.AbstractContextManager[None]:
    """A person is deciding ``call_id`` at ``review()``'s prompt, not in code (whether or
    not a view shows the chat yet): what runs in the ``with`` records that decision."""
    return _deciding(_deciders.get(chat), chat.record, call_id, _follow_lock)


@contextlib.contextmanager
def _deciding(deciders: Deciders, record: ChatRecord, call_id: str, lock: Any) -> Iterator[None]:
    """Mark ``call_id`` as decided by a person for the decision recorded inside the ``with``
    (its event reads the mark: "by you", not "decided in code"). When that fails (an edit
    the tool's schema refuses, invalid JSON) and the call is still undecided, the mark goes:
    a later ``chat.approve`` in a cell says "decided in code", as it would have without the
    failed try."""
    with lock:
        deciders.by_hand.add(call_id)
    try:
        yield
    except BaseException:
        r = record.get(call_id)
        if r is None or r.decided is None:
            with lock:
                deciders.by_hand.discard(call_id)
        raise


def existing_state(chat: Chat) -> ChatState | None:
    """The chat's display state if something made one (none is made)."""
    return _states.peek(chat)
