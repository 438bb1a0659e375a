"""Every nbagent error crosses a process boundary whole: a batch worker, Ray or
``multiprocessing`` pickles what a row raised and the parent reads the same error back
(its class, message and attributes). Errors whose constructor takes something other than
their message (a call, an output type) could not be unpickled before."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

import nbagent
import nbagent._errors as errors
import nbagent._inputs  # its SamplingRefused is an nbagent error too
from nbagent import LLMToolResponse, ToolCall
from nbagent._chat_state import EditUnchecked


def _made(cls: type[BaseException]) -> BaseException:
    call = ToolCall("call_1", "issue_refund", {"order_id": 42})
    special: dict[type[BaseException], Any] = {
        errors.OutputValidationError: lambda: cls("Forecast", '{"city": "Os', ["not valid JSON"]),
        errors.PendingToolCallsError: lambda: cls([call]),
        errors.ToolUnavailableError: lambda: cls([call]),
        errors.ToolArgumentsError: lambda: cls(
            "cut off",
            provider="openai",
            response=LLMToolResponse("", (call,), 10, 2, "gpt-4.1", "openai", "max_tokens"),
            problems={"call_1": "the response was cut off"},
        ),
        errors.ToolExecutionError: lambda: cls(call, ValueError("boom")),
        EditUnchecked: lambda: cls("the edit cannot be checked now", transient=True),
    }
    if cls in special:
        return special[cls]()  # type: ignore[no-any-return]
    if issubclass(cls, errors.ProviderError):
        return cls("too many requests", provider="openai", status_code=429, retry_after=2.0)
    try:
        return cls("something went wrong")
    except TypeError:  # an error that writes its own message (WaitCancelled)
        return cls()


def _every(cls: type[BaseException]) -> list[type[BaseException]]:
    below = cls.__subclasses__()
    return [cls, *(c for b in below for c in _every(b))]


ERRORS = sorted(set(_every(errors.NBAgentError)), key=lambda c: c.__name__)


@pytest.mark.parametrize("cls", ERRORS, ids=lambda c: c.__name__)
def test_every_error_pickles_whole(cls: type[BaseException]) -> None:
    error = _made(cls)
    back = pickle.loads(pickle.dumps(error))
    assert type(back) is cls
    assert str(back) == str(error) and back.args == error.args
    mine = {k: v for k, v in vars(error).items() if k not in ("call", "calls", "error")}
    assert {k: v for k, v in vars(back).items() if k in mine} == mine
    if isinstance(error, errors.ToolExecutionError):
        assert (back.call.id, back.call.arguments) == ("call_1", {"order_id": 42})
        assert isinstance(back.error, ValueError) and str(back.error) == "boom"
    if isinstance(error, errors.ToolArgumentsError):
        assert [c.id for c in back.calls] == ["call_1"] and back.problems == error.problems
    if isinstance(error, (errors.PendingToolCallsError, errors.ToolUnavailableError)):
        assert [c.id for c in back.calls] == ["call_1"]


def test_the_public_errors_are_all_checked() -> None:
    public = {
        n
        for n in nbagent.__all__
        if isinstance(getattr(nbagent, n), type)
        and issubclass(getattr(nbagent, n), errors.NBAgentError)
    }
    assert public <= {c.__name__ for c in ERRORS}


def test_every_public_error_is_an_nbagent_error() -> None:
    """``except nbagent.NBAgentError`` catches every error nbagent raises (the docs' promise):
    ``SchemaValidationError`` and the batch's input error were plain ``ValueError``s."""
    import importlib

    import nbagent

    batch = importlib.import_module("nbagent.batch")  # the package (nbagent.batch: the function)
    public = [getattr(nbagent, n) for n in nbagent.__all__] + [
        getattr(batch, n) for n in batch.__all__
    ]
    errors = [
        e
        for e in public
        if isinstance(e, type) and issubclass(e, Exception) and not issubclass(e, Warning)
    ]
    assert nbagent.SchemaValidationError in errors and batch.InputError in errors
    strays = [e.__name__ for e in errors if not issubclass(e, nbagent.NBAgentError)]
    assert strays == ["SkipToolCall"]  # not an error: a callback raises it to skip a call
