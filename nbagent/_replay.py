"""Record and replay: every model response is recorded; an identical request is answered from it.

Where recordings live (:class:`Recordings`), searched in this order and all
written to (but a recordings directory with ``replay="only"``: it is read, never
written, and the process is neither: :meth:`Replayer.sources`, :meth:`Replayer.writes_to`):

1. a recordings directory, ``Chat(recordings=path)`` or
   ``nbagent.configure(recordings=path)``: one JSON file per request, so a
   whole notebook rerun in a fresh kernel (nbclient, papermill) replays, and
   the directory can be committed beside the notebook. Looked in first, as it
   was named (:func:`searched`): two exported tests of the same question,
   answered differently, each replay their own folder's answer in one pytest
   session;
2. the process (:data:`PROCESS`, the most recent :data:`PROCESS_LIMIT`):
   a new ``Chat`` in the same kernel (a rerun cell) finds them. With
   ``replay="off"`` (the default) only for a chat that has no other place
   (no store, no directory): a chat with a store finds its recordings there,
   so a batch of thousands of chats with a store leaves none in memory (each
   chat keeps its own while it lives: :meth:`Replayer.recorded`, what
   ``to_pytest`` exports);
3. the chat's store (``Chat(store=...)``), through the ``recordings`` hook of
   its extension (:class:`~nbagent.Extension`): the ``recordings`` table
   (migration ``m009``), and results read from the store's call records.

:class:`ReplayingProvider` wraps the chat's provider for one request (at the
provider seam, so the loop, the view, the log and the store see a replayed
response exactly as a live one): ``replay="auto"`` answers from a recording
when one has the request's key, else asks the model and records;
``"only"`` never asks the model and raises :class:`ReplayMissError` (what
differs from the nearest recording) on a miss; ``"off"`` always asks (and
records). A replayed response plays its recorded stream fragments (or made-up
ones, if it did not stream or nobody heard it: then the request had no
``on_delta`` and made none) into the request's ``on_delta``, and comes back
with ``replayed=True``.

Tool results (``replay_tools``): a call that ran (``ok``, ``error``,
``timed_out``) is recorded under the key of the response that asked for it
and its call id; a replayed response asks for the same calls with the same
ids, so the chat finds their results and hands them to the runner instead of
running the tool.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import warnings
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field, fields, replace
from datetime import UTC
from operator import attrgetter
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from ._config import get_config
from ._errors import ProviderError
from ._packing import Packer
from ._recording import (
    Prefix,
    RecordedResult,
    Recording,
    differences,
    fingerprint,
    nearest,
    provider_settings,
    recording_in,
    recording_out,
    request_key,
    result_in,
    result_out,
    synthetic_deltas,
)
from ._secrets import redact_keys
from ._types import LLMToolResponse, ToolCall, short_id
from .providers import ModelRequest, Provider, StreamDelta

PROCESS_LIMIT = 4096
"""Recordings (and as many tool results) the process keeps, most recently used first."""
PROCESS_BYTES = 64 * 1024 * 1024
"""About how much text the process's recordings may hold (responses, fragments, results)."""
FRESH = 64
"""How many of the newest recordings and results the process keeps unpacked, then packs
together (:class:`MemoryRecordings`)."""


def _size(value: Recording | RecordedResult) -> int:
    """About how much memory a recording or a result holds (its text)."""
    if isinstance(value, RecordedResult):
        return len(value.content) + sum(len(p.data) for p in value.parts) + 64
    r = value.response
    size = len(r.text) + 64 * len(value.fingerprint.get("tools", ())) + 256
    size += sum(len(str(c.arguments)) + len(c.raw_arguments or "") for c in r.tool_calls)
    size += sum(len(str(i.raw)) for i in r.items)
    size += sum(len(d.text) + 48 for d in value.deltas or ())
    return size


class ReplayMissError(ProviderError):
    """``replay="only"`` and no recording answers the request (the model was not asked).

    The message says what differs from the nearest recording: the model, a
    message, the tools or the options.
    """


# ------------------------------------------------------------------- where they live
@runtime_checkable
class Recordings(Protocol):
    """A place recordings live (the process, a directory, a store)."""

    def find(self, key: str) -> Recording | None:
        """The recording of the request with this key, if any."""
        ...

    def add(self, recording: Recording, chat_id: str, step: int, replayed: bool) -> None:
        """Keep ``recording``, answered to ``chat_id`` at ``step``.

        ``replayed``: the chat got it from a recording (kept if missing, never
        replacing one); else the model just answered (it replaces an older one).
        """
        ...

    def candidates(self, fp: dict[str, Any]) -> Iterable[Recording]:
        """Recordings to compare a missed request with (to say what differs)."""
        ...

    def result(self, key: str, call_id: str) -> RecordedResult | None:
        """The recorded outcome of call ``call_id`` asked for by the response of ``key``."""
        ...

    def add_result(self, key: str, call_id: str, result: RecordedResult) -> None:
        """Keep a call's outcome (a store has it already in its call records)."""
        ...


_NO_MESSAGES = object()  # a fingerprint without messages' digests (kept packed as it is)
_RESPONSE_FIELDS = tuple(f.name for f in fields(LLMToolResponse))
_CALL_FIELDS = tuple(f.name for f in fields(ToolCall))
_DELTA_FIELDS = tuple(f.name for f in fields(StreamDelta))
_CALLS = _RESPONSE_FIELDS.index("tool_calls")
_response_values = attrgetter(*_RESPONSE_FIELDS)
_call_values = attrgetter(*_CALL_FIELDS)
_delta_values = attrgetter(*_DELTA_FIELDS)
_UTC = 0  # a recording's time zone when it is UTC (as every recording made here is)


def _flat(rec: Recording) -> tuple[Any, ...]:
    """``rec`` as plain values, its messages' digests left out: what the process keeps.

    A snapshot: its calls' values as they are now (a ``ToolCall`` is the chat's to
    decide and run, so the object may change later). Pickle writes it in a third of the
    time the objects take (7.6 against 21.6 us a streamed response: no dataclass state
    dicts, and no time zone object, which pickles through Python code).
    """
    at = rec.created_at
    fp = rec.fingerprint
    if "messages" in fp:
        fp = {**fp, "messages": None}
    values = list(_response_values(rec.response))
    values[_CALLS] = tuple(map(_call_values, values[_CALLS]))
    deltas = None if rec.deltas is None else tuple(map(_delta_values, rec.deltas))
    tz = _UTC if at.tzinfo is UTC else at.tzinfo
    return (rec.key, fp, tuple(values), deltas, rec.chat_id, rec.step, at.replace(tzinfo=None), tz)


def _unflat(flat: tuple[Any, ...]) -> Recording:
    """The recording :func:`_flat` made ``flat`` of, in objects of its own (new calls, a
    new fingerprint dict) when ``flat`` is a copy."""
    key, fp, values, deltas, chat_id, step, at, tz = flat
    response = dict(zip(_RESPONSE_FIELDS, values, strict=True))
    response["tool_calls"] = tuple(
        ToolCall(**dict(zip(_CALL_FIELDS, c, strict=True))) for c in response["tool_calls"]
    )
    if deltas is not None:
        deltas = tuple(StreamDelta(**dict(zip(_DELTA_FIELDS, d, strict=True))) for d in deltas)
    created = at.replace(tzinfo=UTC if tz == _UTC else tz)
    return Recording(key, fp, LLMToolResponse(**response), deltas, chat_id, step, created)


class MemoryRecordings:
    """The process's recordings: the most recent ones, so a rerun cell replays.

    Kept packed (:mod:`nbagent._packing`), a third of a KiB a response instead
    of 2.4 KiB of objects: the process holds thousands and reads one back only
    when a request is answered from it. A recording's messages' digests stay
    an object: they are a chain its chat's later requests share. What cannot
    be pickled stays unpacked.

    Packed in batches, off the request: the newest :data:`FRESH` recordings
    and results are kept as values (a recording as the snapshot :func:`_flat`
    takes, sharing its texts with the chat that made it), and packed together
    when that many more have come. Packing one value between two requests
    costs 4x what it costs among others (measured: a recording of a streamed
    response 116 against 28 us: the pickler's code and the values are cold
    after a request's network and parsing), the largest part of what
    recording added to a 10-round Anthropic loop. Every recording read back
    is made of objects of its own, packed or not.
    """

    def __init__(
        self, limit: int = PROCESS_LIMIT, max_bytes: int = PROCESS_BYTES, fresh: int = FRESH
    ):
        self.limit = limit
        self.max_bytes = max_bytes
        self.fresh = fresh
        self._lock = threading.Lock()
        # a recording: (its packed bytes, or its snapshot, and its messages' digests), or
        # the Recording itself when no snapshot can be taken of it
        self._recordings: OrderedDict[str, tuple[Any, Any] | Recording] = OrderedDict()
        self._results: OrderedDict[tuple[str, str], bytes | RecordedResult] = OrderedDict()
        self._sizes: dict[Any, int] = {}
        self._bytes = 0
        self._packers = (Packer(), Packer())  # responses, results: each its own dictionary
        # kept unpacked, to be packed: (table, key, the value kept)
        self._unpacked: list[tuple[OrderedDict[Any, Any], Any, Any]] = []

    def _keep(self, table: OrderedDict[Any, Any], key: Any, value: Any, size: int) -> None:
        """Put ``value`` (of ``size``) in ``table`` (most recent), then drop the oldest past
        the limits."""
        self._bytes -= self._sizes.pop(key, 0)
        table[key] = value
        table.move_to_end(key)
        self._sizes[key] = size
        self._bytes += size
        while len(table) > self.limit or (self._bytes > self.max_bytes and len(table) > 1):
            old, _ = table.popitem(last=False)
            self._bytes -= self._sizes.pop(old, 0)

    def _keep_unpacked(
        self, table: OrderedDict[Any, Any], key: Any, value: Any, size: int
    ) -> list[tuple[OrderedDict[Any, Any], Any, Any]]:
        """Keep ``value`` unpacked for now (under the lock); the batch to pack when full."""
        self._keep(table, key, value, size)
        self._unpacked.append((table, key, value))
        if len(self._unpacked) < self.fresh:
            return []
        batch, self._unpacked = self._unpacked, []
        return batch

    def _pack_all(self, batch: list[tuple[OrderedDict[Any, Any], Any, Any]]) -> None:
        """Pack ``batch`` (outside the lock: nothing changes a value kept), then keep each
        packed where it is still the value kept."""
        if not batch:
            return
        packed = [(table, key, value, self._pack(value)) for table, key, value in batch]
        with self._lock:
            for table, key, value, kept in packed:
                if table.get(key) is value:  # not replaced nor dropped meanwhile
                    table[key] = kept

    def _pack(self, value: Any) -> Any:
        """A value kept, packed; itself when it cannot be (not picklable, or no snapshot)."""
        try:
            if isinstance(value, RecordedResult):
                return self._packers[1].pack(value)
            if isinstance(value, tuple):
                flat, digests = value
                return (self._packers[0].pack(flat), digests)
        except Exception:  # not picklable: kept as it is
            pass
        return value

    def _recording(self, kept: tuple[Any, Any] | Recording) -> Recording:
        """The recording ``kept`` holds, in objects of its own (but the digests' chain)."""
        if isinstance(kept, Recording):
            return kept
        data, digests = kept
        if isinstance(data, bytes):
            flat = self._packers[0].unpack(data)
        else:  # not packed yet: a copy (the snapshot's values are the chat's own objects)
            import pickle

            try:
                flat = pickle.loads(pickle.dumps(data, pickle.HIGHEST_PROTOCOL))
            except Exception:  # not picklable: its own fingerprint dict at least
                flat = (data[0], dict(data[1]), *data[2:])
        rec = _unflat(flat)
        if digests is not _NO_MESSAGES:
            rec.fingerprint["messages"] = digests  # a fresh dict, this copy's own
        return rec

    def __repr__(self) -> str:
        return f"MemoryRecordings({len(self._recordings)} recordings)"

    def __len__(self) -> int:
        return len(self._recordings)

    def clear(self) -> None:
        with self._lock:
            self._recordings.clear()
            self._results.clear()
            self._sizes.clear()
            self._unpacked.clear()
            self._bytes = 0

    def _used(self, key: str) -> tuple[Any, Any] | Recording | None:
        """What is kept under ``key``, now the most recently used, if anything."""
        with self._lock:
            kept = self._recordings.get(key)
            if kept is not None:
                self._recordings.move_to_end(key)
            return kept

    def find(self, key: str) -> Recording | None:
        kept = self._used(key)
        return None if kept is None else self._recording(kept)

    def add(self, recording: Recording, chat_id: str, step: int, replayed: bool) -> None:
        if replayed and self._used(recording.key) is not None:
            return  # kept already (a replay never replaces one): no snapshot taken
        kept: tuple[Any, Any] | Recording = recording
        with contextlib.suppress(Exception):  # no snapshot of it: kept as it is
            kept = (_flat(recording), recording.fingerprint.get("messages", _NO_MESSAGES))
        size = _size(recording)
        with self._lock:
            if replayed and recording.key in self._recordings:
                self._recordings.move_to_end(recording.key)
                return
            batch = self._keep_unpacked(self._recordings, recording.key, kept, size)
        self._pack_all(batch)

    def candidates(self, fp: dict[str, Any]) -> Iterable[Recording]:
        with self._lock:
            kept = list(self._recordings.values())
        return [self._recording(k) for k in kept]

    def result(self, key: str, call_id: str) -> RecordedResult | None:
        with self._lock:
            kept = self._results.get((key, call_id))
        if kept is None or isinstance(kept, RecordedResult):
            return kept
        result: RecordedResult = self._packers[1].unpack(kept)
        return result

    def add_result(self, key: str, call_id: str, result: RecordedResult) -> None:
        size = _size(result)
        with self._lock:
            batch = self._keep_unpacked(self._results, (key, call_id), result, size)
        self._pack_all(batch)


PROCESS = MemoryRecordings()
"""The recordings of this process (``nbagent._replay.PROCESS.clear()`` forgets them)."""


class DirectoryRecordings:
    """Recordings as files: ``<dir>/<key>.json`` each (response, stream fragments, results).

    Written atomically (a temporary file renamed), so two kernels writing the
    same directory never leave half a file. Plain JSON: commit it beside the
    notebook and a fresh checkout replays.
    """

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        if self.path.exists() and not self.path.is_dir():
            raise ValueError(f"recordings must be a directory; {self.path} is a file")
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"DirectoryRecordings({str(self.path)!r})"

    def _file(self, key: str) -> Path:
        return self.path / f"{key}.json"

    def _read(self, key: str) -> dict[str, Any] | None:
        try:
            data = json.loads(self._file(key).read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise ValueError(f"recording {self._file(key)} cannot be read: {exc}") from exc
        return data if isinstance(data, dict) else None

    def _write(self, key: str, data: dict[str, Any]) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        tmp = self.path / f".{key}.{os.getpid()}.{threading.get_ident()}.tmp"
        tmp.write_text(json.dumps(data, ensure_ascii=False, indent=1), encoding="utf-8")
        os.replace(tmp, self._file(key))

    def find(self, key: str) -> Recording | None:
        data = self._read(key)
        return None if data is None else recording_in(data)

    def add(self, recording: Recording, chat_id: str, step: int, replayed: bool) -> None:
        with self._lock:
            try:
                old = self._read(recording.key)
            except ValueError:
                old = None  # damaged: written again
            if replayed and old is not None:
                return
            data = recording_out(recording)
            if old is not None and old.get("response") == data["response"]:
                data["results"] = old.get("results", {})  # the same answer: its results hold
            self._write(recording.key, data)

    def candidates(self, fp: dict[str, Any]) -> Iterable[Recording]:
        if not self.path.is_dir():
            return []
        out = []
        for f in sorted(self.path.glob("*.json")):
            try:
                out.append(recording_in(json.loads(f.read_text(encoding="utf-8"))))
            except (OSError, ValueError, KeyError):
                continue  # not a recording: not a candidate
        return out

    def result(self, key: str, call_id: str) -> RecordedResult | None:
        data = self._read(key)
        found = (data or {}).get("results", {}).get(call_id)
        return None if found is None else result_in(found)

    def add_result(self, key: str, call_id: str, result: RecordedResult) -> None:
        with self._lock:
            data = self._read(key)
            if data is None:
                return
            data.setdefault("results", {})[call_id] = result_out(result)
            self._write(key, data)


# ------------------------------------------------------------------ one chat's replay
@dataclass
class Replayer:
    """One chat's replay settings and what it answered from which recording.

    Attributes:
        mode / tools / directory: The chat's own ``replay``, ``replay_tools``
            and ``recordings`` (``None``: ``nbagent.configure``).
        keys: The key of each step's request (to find its calls' results).
        replayed_steps: The steps answered from a recording.
        own: This chat's recordings by step (held with the chat, not the process).
    """

    chat_id: str
    mode: str | None = None
    tools: bool | frozenset[str] | None = None
    directory: DirectoryRecordings | None = None
    keys: dict[int, str] = field(default_factory=dict)
    replayed_steps: set[int] = field(default_factory=set)
    prefix: Prefix = field(default_factory=Prefix)
    own: dict[int, Recording] = field(default_factory=dict)

    @property
    def effective_mode(self) -> str:
        return self.mode or get_config().replay

    def recorded(
        self, step: int, extra: Iterable[Recordings] = (), *, quiet: bool = False
    ) -> Recording | None:
        """The recording of ``step``'s request: this chat's own, else where recordings live.
        ``quiet``: a source that cannot be read is a miss without a warning (a fork saving a
        chat whose store's file is gone: that store is why it is forked, and said so)."""
        found = self.own.get(step)
        key = self.keys.get(step)
        if found is not None and found.key == key:
            return found
        if key is None:
            return None
        sources = self.sources(extra)
        if PROCESS not in sources:  # replay="off": what this process recorded counts too
            sources.insert(0, PROCESS)
        for source in searched(sources):
            if quiet:
                try:
                    found = source.find(key)
                except Exception:
                    continue
            else:
                found = _safely("read recordings from", source.find, source, key)
            if found is not None:
                return found
        return None

    def restore_keys(self, sources: Iterable[Recordings]) -> None:
        """A loaded chat's step keys, read back from where they were noted (a store's model
        requests, through its recordings' ``step_keys(chat_id)``); steps known already keep
        theirs. Without them, ``replay_tools`` found no recorded result for a call of a
        replayed step once the chat was loaded again (a kernel restart while it waited
        for an approval), and the side-effecting tool ran again."""
        for source in sources:
            read = getattr(source, "step_keys", None)
            if not callable(read):
                continue
            found = _safely("read recordings from", read, source, self.chat_id)
            for step, key in (found or {}).items():
                self.keys.setdefault(step, key)

    def replays_tool(self, name: str) -> bool:
        tools = self.tools if self.tools is not None else get_config().replay_tools
        return name in tools if isinstance(tools, frozenset) else bool(tools)

    def sources(self, extra: Iterable[Recordings] = ()) -> list[Recordings]:
        """Where this chat's requests are looked up and recorded: the process, the
        recordings directory and the extensions' (a store); looked up in
        :func:`searched`'s order. With ``replay="off"`` the process only when there is
        no other place (memory kept only when needed); with ``replay="only"`` and a
        recordings directory, not the process: the chat replays what its folder (and its
        store) holds, so an exported test's outcome never depends on the tests that ran
        before it in the process."""
        out: list[Recordings] = []
        directory = self.directory
        if directory is None and get_config().recordings is not None:
            directory = DirectoryRecordings(get_config().recordings)  # type: ignore[arg-type]
        if directory is not None:
            out.append(directory)
        out.extend(extra)
        mode = self.effective_mode
        if not out or (mode != "off" and not (mode == "only" and directory is not None)):
            out.insert(0, PROCESS)
        return out

    def writes_to(self, source: Recordings) -> bool:
        """Whether what this chat replays or runs is written to ``source``: never to a
        recordings folder with ``replay="only"`` (it replays what the folder holds; an
        exported test leaves its committed folder as it was written)."""
        return not (self.effective_mode == "only" and isinstance(source, DirectoryRecordings))

    def provider(self, inner: Provider, step: int, extra: Iterable[Recordings] = ()) -> Provider:
        """``inner`` wrapped for one request of ``step`` (see :class:`ReplayingProvider`)."""
        return ReplayingProvider(inner, self, step, self.sources(extra))

    def find_result(
        self, step: int, call_id: str, extra: Iterable[Recordings] = ()
    ) -> RecordedResult | None:
        """The recorded outcome of a call asked for at ``step``, if its response had one."""
        key = self.keys.get(step)
        if key is None:
            return None
        for source in searched(self.sources(extra)):
            found: RecordedResult | None = _safely(
                "read recordings from", source.result, source, key, call_id
            )
            if found is not None:
                return found
        return None

    def add_result(
        self, step: int, call_id: str, result: RecordedResult, extra: Iterable[Recordings] = ()
    ) -> None:
        key = self.keys.get(step)
        if key is None:
            return
        for source in self.sources(extra):
            if self.writes_to(source):
                _safely("record in", source.add_result, source, key, call_id, result)


def searched(sources: list[Recordings]) -> list[Recordings]:
    """``sources`` in the order a request is looked up: a recordings directory first.

    It was named for this chat (``Chat(recordings=)``, ``configure(recordings=)``, an
    exported test's folder), so the process's recording of the same request by another
    chat (another exported test of the same question, in one pytest session) never wins."""
    folders = [s for s in sources if isinstance(s, DirectoryRecordings)]
    return folders + [s for s in sources if not isinstance(s, DirectoryRecordings)]


def _safely(doing: str, fn: Any, source: Recordings, *args: Any) -> Any:
    """Read from or write to one source (``doing`` says which, for the warning); a failure
    warns and counts as a miss (a damaged file), never costing the response or the call."""
    try:
        return fn(*args)
    except Exception as exc:
        warnings.warn(
            f"nbagent: could not {doing} {source!r}: {type(exc).__name__}: {exc}",
            RuntimeWarning,
            stacklevel=3,
        )
        return None


class ReplayingProvider:
    """A provider answering from recordings, else asking ``inner`` and recording (see module)."""

    def __init__(self, inner: Provider, replayer: Replayer, step: int, sources: list[Recordings]):
        self.inner = inner
        self.name = inner.name
        self.model = inner.model
        self.replayer = replayer
        self.step = step
        self.sources = sources

    def _lookup(self, request: ModelRequest) -> tuple[str, dict[str, Any], LLMToolResponse | None]:
        fp = fingerprint(
            self.inner.name,
            self.inner.model,
            request,
            self.replayer.prefix,
            provider_settings(self.inner),
        )
        key = request_key(fp)
        self.replayer.keys[self.step] = key
        self.replayer.replayed_steps.discard(self.step)  # a retried step number
        mode = self.replayer.effective_mode
        if mode == "off":
            return key, fp, None
        for source in searched(self.sources):
            rec = _safely("read recordings from", source.find, source, key)
            if rec is None:
                continue
            # a gap filled; a store notes this step's key. With this request's fingerprint (the
            # same key): its digests are the chat's chain, so a store writes only its new link
            here = replace(rec, fingerprint=fp)
            self.replayer.own[self.step] = here
            for other in self.sources:
                if self.replayer.writes_to(other):
                    add = other.add
                    _safely("record in", add, other, here, self.replayer.chat_id, self.step, True)
            self.replayer.replayed_steps.add(self.step)
            if request.on_delta is not None:
                for delta in (
                    rec.deltas if rec.deltas is not None else synthetic_deltas(rec.response)
                ):
                    request.on_delta(delta)
            return key, fp, replace(rec.response, replayed=True)
        if mode == "only":
            raise ReplayMissError(self._miss(fp, request))
        return key, fp, None

    def _miss(self, fp: dict[str, Any], request: ModelRequest) -> str:
        seen: dict[str, Recording] = {}
        for source in self.sources:
            try:
                for rec in source.candidates(fp):
                    seen.setdefault(rec.key, rec)
            except Exception:  # a source that cannot list: explain with the others
                continue
        head = (
            f"replay='only': no recording answers this request (step {self.step}, "
            f"{fp['model']}, {len(fp['messages'])} messages); the model was not asked"
        )
        where = redact_keys(", ".join(repr(s) for s in self.sources))  # a DSN's password
        best = nearest(fp, seen.values())
        if best is None:
            return f"{head}. No recordings at all in {where}." + self._mend()
        diffs = differences(fp, best.fingerprint, request) or ["nothing visible (a new format?)"]
        return (
            f"{head}. The nearest recording (step {best.step} of chat "
            f"{short_id(best.chat_id) or '?'}, "
            f"{best.created_at:%Y-%m-%d %H:%M}) differs in "
            + "; ".join(diffs)
            + f". Searched: {where}."
            + (self._mend() or " Run with replay='auto' to ask the model and record.")
        )

    def _mend(self) -> str:
        """How an exported test's miss is mended: its OfflineProvider never asks a model, so
        replay='auto' cannot record the request; the test is exported again (else "")."""
        if not getattr(self.inner, "asks_no_model", False):  # the testing wing's provider
            return ""
        return (
            " This test's recordings folder has no recording of this request (an exported "
            "test replays only its own folder, and its OfflineProvider never asks a model): if "
            "the chat now sends this request, export the test again with "
            "nbagent.testing.to_pytest(chat, path) from a chat that ran."
        )

    def _tee(self, request: ModelRequest) -> tuple[ModelRequest, list[StreamDelta] | None]:
        sink = request.on_delta
        if sink is None:
            return request, None
        caught: list[StreamDelta] = []

        def tee(delta: StreamDelta) -> None:
            caught.append(delta)
            sink(delta)

        return replace(request, on_delta=tee), caught

    def _record(
        self,
        key: str,
        fp: dict[str, Any],
        response: LLMToolResponse,
        deltas: list[StreamDelta] | None,
    ) -> None:
        if not isinstance(response, LLMToolResponse):
            return  # the loop reports a provider returning something else
        rec = Recording(
            key,
            fp,
            response,
            tuple(deltas) if deltas is not None else None,
            self.replayer.chat_id,
            self.step,
        )
        self.replayer.own[self.step] = rec
        for source in self.sources:
            _safely("record in", source.add, source, rec, self.replayer.chat_id, self.step, False)

    def complete(self, request: ModelRequest) -> LLMToolResponse:
        key, fp, found = self._lookup(request)
        if found is not None:
            return found
        sent, deltas = self._tee(request)
        response = self.inner.complete(sent)
        self._record(key, fp, response, deltas)
        return response

    async def complete_async(self, request: ModelRequest) -> LLMToolResponse:
        """Async twin of :meth:`complete` (the lookup and the recording are shared)."""
        key, fp, found = self._lookup(request)
        if found is not None:
            return found
        sent, deltas = self._tee(request)
        response = await self.inner.complete_async(sent)
        self._record(key, fp, response, deltas)
        return response


__all__ = [
    "PROCESS",
    "DirectoryRecordings",
    "MemoryRecordings",
    "Recordings",
    "ReplayMissError",
    "Replayer",
    "ReplayingProvider",
]
