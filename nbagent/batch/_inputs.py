"""A batch's inputs as jobs: a key, a prompt (or why there is none) and the row, per input.

Accepted (``nbagent.batch(inputs, ..., prompt=, key=)``):

- a DataFrame: each row is formatted into ``prompt`` (a template such as
  ``"Summarise {title}"``, filled with the row's columns), or ``prompt`` names
  a column holding the prompts; the key is the index, or the ``key=`` column;
- a list (any iterable) of prompts (str): the key is the position; ``prompt``, if
  given, is a template whose ``{prompt}`` is each one;
- a list of dicts (rows) with a ``prompt`` template, or ``prompt`` naming the field
  holding the prompts (as a DataFrame's column): the key is the position, or each
  row's ``key=`` field.

A ``prompt`` that is neither a column (field) nor a template with fields is refused:
every row would be asked the same text.

A row that cannot be formatted (a missing column, a bad format spec) or whose prompt is
empty or only whitespace is not an error of the batch: its job carries the error and the
row fails with it (no chat is made). Keys must be unique, and none empty (NaN, ``None``,
``NaT`` in the index or the ``key=`` column): a store finds an input again by its key.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import math
import string
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .._errors import NBAgentError
from ._backend import Job

_FORMATTER = string.Formatter()


class BatchInputError(NBAgentError, ValueError):
    """A batch's inputs are wrong: raised before anything runs.

    Duplicate keys, an empty key (NaN in the index or the ``key=`` column), a ``key=`` or
    ``prompt=`` naming no column, inputs of another shape;
    with ``on_error="raise"``, also a row its prompt template cannot fill (with the default
    ``on_error``, that row fails with ``error_type`` saying so and the rest run). An
    :class:`~nbagent.NBAgentError` and a ``ValueError``.

    Not :class:`nbagent.InputError` (an answer to a pending input was refused).
    ``nbagent.batch.InputError`` is this class under its former name.
    """


InputError = BatchInputError
"""The former name of :class:`BatchInputError` (``from nbagent.batch import InputError``
still works, and catches the same errors)."""


def template_fields(template: str) -> list[str]:
    """The column names a template uses (``"{title} by {author!r}"`` -> title, author)."""
    names = []
    for _, field, _, _ in _FORMATTER.parse(template):
        if field:
            root = field.split(".", 1)[0].split("[", 1)[0]
            if root and not root.isdigit() and root not in names:
                names.append(root)
    return names


def _clean(value: Any) -> Any:
    """A cell as a plain value: numpy scalars to Python, NaN/NA/NaT to None."""
    item = getattr(value, "item", None)
    if callable(item) and type(value).__module__ == "numpy":
        with contextlib.suppress(TypeError, ValueError):
            value = item()
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    try:
        import pandas as pd

        if value is pd.NA or value is pd.NaT:
            return None
    except ImportError:  # pragma: no cover - pandas is a dependency
        pass
    return value


def _format(template: str, row: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """``(prompt, None)`` or ``(None, why not)``: a field the template uses that is empty in
    the row (NaN, NA, NaT, None) fails the row, as an empty prompt column does: "Refund
    order None" is no prompt to send (a model may make up an order to refund)."""
    with contextlib.suppress(ValueError):  # a malformed template: format_map says why below
        empty = [n for n in template_fields(template) if n in row and row[n] is None]
        if empty:
            names = ", ".join(map(repr, empty))
            return None, f"the prompt template needs {names}, empty in this row"
    try:
        return template.format_map(row), None
    except KeyError as exc:
        name = exc.args[0] if exc.args else "?"
        have = ", ".join(map(repr, list(row)[:12]))
        return None, (
            f"the prompt template needs {name!r}, which this row does not have "
            f"(it has {have}{', ...' if len(row) > 12 else ''})"
        )
    except (IndexError, ValueError, AttributeError, TypeError) as exc:
        try:  # a row's own value raised it: its text may not read either
            text = str(exc)
        except Exception as broken:
            text = f"(its message could not be read: {type(broken).__name__})"
        return (
            None,
            f"the prompt template cannot be filled from this row: {type(exc).__name__}: {text}",
        )


def _key_text(value: Any, i: int, where: str) -> str:
    """Input ``i``'s key: ``value`` (its ``where``: its index, its ``key=`` column or field) as
    text.

    Raises:
        BatchInputError: The value is empty (NaN, ``None``, ``NaT``, ``NA``): ``str()`` made
            it the key ``'None'`` (two of them: "the same key 'None'"), an input no store finds
            again as itself.
    """
    cleaned = _clean(value)
    if isinstance(cleaned, tuple):  # a MultiIndex
        return json.dumps([_clean(v) for v in cleaned], default=str, ensure_ascii=False)
    if cleaned is None:
        raise BatchInputError(
            f"input {i} has no key ({_empty_text(value)} in {where}): every input needs one "
            "(a store finds each input by its key); fill it, drop the row, or pass key= a "
            "column of unique values"
        )
    return str(cleaned)


def _empty_text(value: Any) -> str:
    """An empty cell as pandas shows it: NaN, None, NaT, <NA>."""
    if value is None:
        return "None"
    if isinstance(value, float) or type(value).__module__ == "numpy":
        with contextlib.suppress(TypeError, ValueError):
            if math.isnan(float(value)):
                return "NaN"
    try:
        return str(value)
    except Exception:  # an odd object's __str__: still said
        return type(value).__name__


def jobs_from(inputs: Any, prompt: str | None = None, key: str | None = None) -> list[Job]:
    """The jobs of a batch's inputs (see the module docstring).

    Raises:
        BatchInputError: Keys are not unique, ``prompt``/``key`` name something the
            inputs do not have, or ``inputs`` is not one of the accepted shapes.
    """
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover
        pd = None  # type: ignore[assignment]
    if pd is not None and isinstance(inputs, pd.Series):
        inputs = inputs.to_frame(name=inputs.name if inputs.name is not None else "prompt")
        if prompt is None:
            prompt = str(inputs.columns[0])
    if pd is not None and isinstance(inputs, pd.DataFrame):
        jobs = _frame_jobs(inputs, prompt, key)
    elif isinstance(inputs, (str, bytes, Mapping)):
        raise BatchInputError(
            f"inputs must be a DataFrame, a list of prompts or a list of rows (dicts), "
            f"got one {type(inputs).__name__}; wrap a single prompt in a list"
        )
    elif isinstance(inputs, Iterable):
        jobs = _list_jobs(list(inputs), prompt, key)
    else:
        raise BatchInputError(
            f"inputs must be a DataFrame, a list of prompts or a list of rows (dicts), "
            f"got {type(inputs).__name__}"
        )
    jobs = [_unless_blank(job) for job in jobs]
    seen: dict[str, int] = {}
    for job in jobs:
        if job.key in seen:
            raise BatchInputError(
                f"inputs {seen[job.key]} and {job.index} have the same key {job.key!r}: "
                "keys must be unique (a store finds each input by its key); "
                "pass key= a column of unique values, or reset the index"
            )
        seen[job.key] = job.index
    return jobs


def _unless_blank(job: Job) -> Job:
    """``job``, failed when its prompt is empty or only whitespace (a cell, a list's item,
    a template filled with empty text): asked it, a chat refuses it (``ask() needs a
    question``) once it was made and stored; failed here, no chat is made."""
    if job.error is not None or job.prompt is None or job.prompt.strip():
        return job
    what = "empty" if not job.prompt else "only whitespace"
    return dataclasses.replace(job, prompt=None, error=f"the prompt is {what}: nothing to ask")


def input_index(inputs: Any) -> Any:
    """The index a batch's result takes from its inputs: a DataFrame's or a Series's (the
    rows line up with the inputs, ``result.join(df)``), else ``None`` (positions)."""
    if hasattr(inputs, "columns") or _is_series(inputs):
        return getattr(inputs, "index", None)
    return None


def _is_series(inputs: Any) -> bool:
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - pandas is a dependency
        return False
    return isinstance(inputs, pd.Series)


def _frame_jobs(df: Any, prompt: str | None, key: str | None) -> list[Job]:
    columns = [str(c) for c in df.columns]
    if key is not None and key not in columns:
        raise BatchInputError(f"key={key!r} is not a column (columns: {columns})")
    if prompt is None:
        if "prompt" not in columns:
            raise BatchInputError(
                "pass prompt=: a template filled from each row (prompt='Summarise {title}') "
                f"or the name of a column holding the prompts (columns: {columns})"
            )
        prompt = "prompt"
    is_column = prompt in columns
    if not is_column and not template_fields(prompt):
        raise BatchInputError(
            f"prompt={prompt!r} is neither a column nor a template with {{column}} fields "
            f"(columns: {columns})"
        )
    names = [str(c) for c in df.columns]
    whole = _whole_number_columns(df)
    jobs = []
    for i, (index, values) in enumerate(
        zip(df.index, df.itertuples(index=False, name=None), strict=True)
    ):
        row = {n: _clean(v) for n, v in zip(names, values, strict=True)}
        for n in whole:
            if row[n] is not None:
                row[n] = int(row[n])
        if key is None:
            k = _key_text(index, i, "the index")
        elif row[key] is None:  # said as the cell shows it (NaN, NaT), not as cleaned
            k = _key_text(values[names.index(key)], i, f"column {key!r}")
        else:
            k = _key_text(row[key], i, f"column {key!r}")
        if is_column:
            text = row[prompt]
            if isinstance(text, str):
                jobs.append(Job(k, i, text, row))
            else:
                why = "is empty" if text is None else f"is a {type(text).__name__}, not text"
                jobs.append(Job(k, i, None, row, f"column {prompt!r} {why}"))
        else:
            filled, error = _format(prompt, row)
            jobs.append(Job(k, i, filled, row, error))
    return jobs


def _whole_number_columns(df: Any) -> list[str]:
    """The float columns holding only whole numbers (and empty cells): pandas makes an int
    column float to hold a NaN, and keeps it float after ``dropna()``; its rows would fill
    ``"Refund order 41.0"``."""
    out = []
    for name, column in zip(df.columns, (df.iloc[:, j] for j in range(df.shape[1])), strict=True):
        if getattr(column.dtype, "kind", "") != "f":
            continue
        known = column.dropna()
        with contextlib.suppress(TypeError, ValueError, OverflowError):
            if len(known) and bool(((known % 1) == 0).all()) and bool((known.abs() < 2**53).all()):
                out.append(str(name))
    return out


def _list_jobs(items: list[Any], prompt: str | None, key: str | None) -> list[Job]:
    # prompt= naming a field of the rows is that field, as a frame's column is; else a
    # template, which needs a field: one with none would ask every row the same text
    is_field = prompt is not None and any(
        isinstance(item, Mapping) and any(str(k) == prompt for k in item) for item in items
    )
    if prompt is not None and not is_field and not template_fields(prompt):
        rows = any(isinstance(item, Mapping) for item in items)
        raise BatchInputError(
            f"prompt={prompt!r} is neither a field of the "
            f"{'rows' if rows else 'inputs'} nor a template with {{field}} fields, so every "
            "input would be asked the same; "
            + (
                "name the field holding the prompts, or use its {field}"
                if rows
                else "a list of prompts fills '{prompt}' with each one: 'Be brief. {prompt}'"
            )
        )
    jobs = []
    for i, item in enumerate(items):
        if isinstance(item, str):
            if key is not None:
                raise BatchInputError("key= names a field of each row; a list of prompts has none")
            text, error = (
                (item, None) if prompt is None or is_field else _format(prompt, {"prompt": item})
            )
            jobs.append(Job(str(i), i, text, item, error))
        elif isinstance(item, Mapping):
            row = {str(k): _clean(v) for k, v in item.items()}
            k = str(i)
            if key is not None:
                if key not in row:
                    jobs.append(Job(str(i), i, None, row, f"row {i} has no key field {key!r}"))
                    continue
                raw = next((v for f, v in item.items() if str(f) == key), None)
                k = _key_text(raw if row[key] is None else row[key], i, f"field {key!r}")
            if prompt is None:
                if isinstance(row.get("prompt"), str):
                    jobs.append(Job(k, i, row["prompt"], row))
                else:
                    jobs.append(
                        Job(k, i, None, row, "pass prompt= a template, or give each row a 'prompt'")
                    )
                continue
            if is_field:
                jobs.append(_field_job(k, i, row, prompt))
                continue
            filled, error = _format(prompt, row)
            jobs.append(Job(k, i, filled, row, error))
        else:
            why = f"an input must be a prompt (str) or a row (dict), got {type(item).__name__}"
            jobs.append(Job(str(i), i, None, item, why))
    return jobs


def _field_job(key: str, i: int, row: dict[str, Any], field: str) -> Job:
    """Row ``i``'s job whose prompt is its ``field`` (a row without it, or with no text
    in it, fails alone, as a frame's empty cell does)."""
    if field not in row:
        return Job(key, i, None, row, f"row {i} has no field {field!r}")
    text = row[field]
    if isinstance(text, str):
        return Job(key, i, text, row)
    why = "is empty" if text is None else f"is a {type(text).__name__}, not text"
    return Job(key, i, None, row, f"field {field!r} {why}")


def batch_id_of(jobs: Sequence[Job]) -> str:
    """A batch id derived from the inputs: the same keys and prompts give the same id.

    So rerunning the same cell with a store finds the batch again; changing a
    prompt (the template, a row) makes a new batch. ``nbagent.batch(name=)``
    names one instead.
    """
    h = hashlib.sha256()
    for job in jobs:
        h.update(json.dumps([job.key, job.prompt, job.error], ensure_ascii=False).encode())
        h.update(b"\n")
    return "batch-" + h.hexdigest()[:20]


__all__ = [
    "BatchInputError",
    "InputError",
    "batch_id_of",
    "input_index",
    "jobs_from",
    "template_fields",
]
