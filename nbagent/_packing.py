"""Values kept small in memory: pickled, then deflated against a dictionary.

What nbagent keeps many of for a long time, and rarely reads again, is kept
packed: a batch's done rows keep their chats' events (``batch._run``), the
process keeps its most recent model responses (``_replay.MemoryRecordings``).
Such values are alike (the same event types, field names, tool schemas and
prompts), and each is small, so deflating each one alone finds little to
share; deflating it against a dictionary finds most of it there. A
:class:`Packer`'s dictionary is the first value it packs (its last 32 KiB: the
window deflate can reach back into), and never changes afterwards, so every
value it packed unpacks with it. Measured on a batch's 3-round chats: their
events pickle to 4.1 KiB, deflate alone to 1.8 KiB, against the first chat's to
0.5 KiB, in less CPU (31 against 51 us); a model response and its fingerprint
go from 2.4 KiB of objects to a third of a KiB.

A value packed here is only ever unpacked by the same :class:`Packer`, in the
same process, from bytes it made itself: ``pickle`` reads nothing from outside.
"""

from __future__ import annotations

import threading
from typing import Any

_WINDOW = 32 * 1024  # how far back deflate looks: the dictionary's useful end
_WBITS = -15  # raw deflate, a 32 KiB window (no header nor checksum: bytes made here)


class Packer:
    """Packs values (:meth:`pack`) and unpacks what it packed (:meth:`unpack`).

    Thread-safe: the dictionary is set once, by the first value packed.
    """

    __slots__ = ("_lock", "_zdict")

    def __init__(self) -> None:
        self._zdict: bytes | None = None
        self._lock = threading.Lock()

    def pack(self, value: Any) -> bytes:
        """``value``, pickled and deflated.

        Raises:
            Exception: ``value`` cannot be pickled (what ``pickle`` raises: the caller
                keeps the value itself).
        """
        import pickle  # with the first value packed, not with ``import nbagent``
        import zlib

        raw = pickle.dumps(value, pickle.HIGHEST_PROTOCOL)
        zdict = self._zdict
        if zdict is None:
            with self._lock:
                if self._zdict is None:
                    self._zdict = raw[-_WINDOW:]
                zdict = self._zdict
        deflate = zlib.compressobj(1, zlib.DEFLATED, _WBITS, zdict=zdict)
        return deflate.compress(raw) + deflate.flush()

    def unpack(self, data: bytes) -> Any:
        """The value :meth:`pack` made ``data`` of."""
        import pickle
        import zlib

        zdict = self._zdict
        if zdict is None:
            raise ValueError("this packer packed nothing")
        inflate = zlib.decompressobj(_WBITS, zdict=zdict)
        return pickle.loads(inflate.decompress(data) + inflate.flush())


__all__ = ["Packer"]
