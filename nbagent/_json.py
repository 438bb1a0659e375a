"""Compact JSON encoders built once: ``json.dumps`` without its per-call set-up.

``json.dumps`` with any keyword builds a ``JSONEncoder`` on every call, and
``JSONEncoder.encode`` builds its C encoder on every call too: for the small
values nbagent encodes per event or per message (a store's rows, a request's
digests) that set-up costs more than the encoding. :func:`compact_encoder`
builds the C encoder once, with ``separators=(",", ":")``,
``ensure_ascii=False`` and ``default=str`` (a value JSON cannot hold is encoded
as its ``str()``), and without the circular-reference bookkeeping (the values
are JSON data; a cycle still fails, with ``RecursionError``). It is used only if
it gives byte-identical output to the standard encoder on a probe; otherwise
(another Python's private API) the standard encoder is returned.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any


def compact_encoder(*, sort_keys: bool = False) -> Callable[[Any], str]:
    """A function encoding a value as compact JSON (see the module docstring)."""
    standard = json.JSONEncoder(
        ensure_ascii=False, separators=(",", ":"), default=str, sort_keys=sort_keys
    )
    make = getattr(json.encoder, "c_make_encoder", None)
    basestring = getattr(json.encoder, "c_encode_basestring", None)
    if make is None or basestring is None:
        return standard.encode
    try:
        encoder = make(None, str, basestring, None, ":", ",", sort_keys, False, True)
        join = "".join

        def encode(value: Any) -> str:
            return join(encoder(value, 0))

        probe = {"b": [1, 2.5, None, True, 'é\n"x'], "a": {"c": float("nan")}, "d": object}
        if encode(probe) != standard.encode(probe) or encode("s") != standard.encode("s"):
            return standard.encode
        return encode
    except Exception:  # another Python's private API: the public one
        return standard.encode


__all__ = ["compact_encoder"]
