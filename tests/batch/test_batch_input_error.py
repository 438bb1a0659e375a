"""A batch's input error is an nbagent error, and not the other ``InputError``.

``nbagent.batch.InputError`` was a plain ``ValueError`` named like ``nbagent.InputError`` (an
answer to a pending input was refused), which it is not: ``except nbagent.NBAgentError``
(documented as the base of every nbagent error) missed it. It is ``BatchInputError`` now, an
``NBAgentError`` and still a ``ValueError``; ``nbagent.batch.InputError`` names the same class.
"""

from __future__ import annotations

import pickle

import pandas as pd
import pytest

import nbagent
from nbagent import Chat
from nbagent.batch import BatchInputError, InputError

FRAME = pd.DataFrame({"title": ["a", None]})


def _raised(**kwargs: object) -> BaseException:
    with pytest.raises(Exception) as info:
        nbagent.batch(FRAME, lambda: Chat("demo"), progress=False, **kwargs)  # type: ignore[arg-type]
    return info.value


@pytest.mark.parametrize(
    "kwargs",
    [
        {"prompt": "Say {title}", "key": "nope"},  # key= names no column
        {"prompt": "neither a column nor a template"},
        {"prompt": "Say {title}", "on_error": "raise"},  # a row the template cannot fill
    ],
    ids=["key", "prompt", "row"],
)
def test_a_batch_input_error_is_an_nbagent_error_and_a_value_error(
    kwargs: dict[str, object],
) -> None:
    error = _raised(**kwargs)
    assert type(error) is BatchInputError
    assert isinstance(error, nbagent.NBAgentError) and isinstance(error, ValueError)
    assert not isinstance(error, nbagent.InputError)  # not an answer refused
    assert f"{type(error).__module__}.{type(error).__qualname__}" == "nbagent.batch.BatchInputError"
    again = pickle.loads(pickle.dumps(error))  # back from a worker process, as raised
    assert type(again) is BatchInputError and str(again) == str(error)


def test_the_former_name_still_imports_and_catches() -> None:
    assert InputError is BatchInputError
    with pytest.raises(InputError, match="not a column"):
        nbagent.batch(FRAME, lambda: Chat("demo"), prompt="{title}", key="nope", progress=False)
