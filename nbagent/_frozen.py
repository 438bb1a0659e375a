"""Read-only JSON containers: a recorded call's arguments, as the model (or a person) gave them.

A :class:`~nbagent.ToolCall`'s ``arguments`` (and an edit's, ``Decision.arguments``)
are the record of what was asked. Once a chat has recorded a call they are
:class:`FrozenDict` / :class:`FrozenList`: changed in place (a ``before_tool_call``
callback setting a key, a UI popping one from ``pending_approvals``) or replaced
whole (``call.arguments = {...}``: :class:`~nbagent.ToolCall` refuses it), the tool ran
with one value while the log, the store and the model read another, and the
model's real request was lost. Changing them raises ``TypeError`` saying how to
run a call with other arguments (``chat.approve(call, arguments=...)``).

They are ``dict`` and ``list`` (``isinstance``, ``json.dumps``, pandas and pydantic
read them as such); ``dict(args)`` is a shallow copy, ``copy.copy`` and
``copy.deepcopy`` give plain containers to change. A tool runs with
:func:`thawed` copies: its own changes to its inputs reach nobody else.

The provider's own JSON (a :class:`~nbagent.ProviderItem`'s ``raw``, and the copies of it
the chat record hands out: a hosted call's input, a citation) is read-only the same way,
as :class:`SentDict` / :class:`SentList` (:func:`sent`), refused with its own reason: it
goes back to the provider as it came.
"""

from __future__ import annotations

from typing import Any, NoReturn

READ_ONLY = (
    "a tool call's arguments are read-only once its chat has recorded them (they are what was "
    "asked, and what the log, the store and the model read); to run the call with other "
    "arguments use chat.approve(call, arguments={...}); copy.deepcopy(call.arguments) gives a "
    "copy you can change"
)


def _refuse(self: Any, *args: Any, **kwargs: Any) -> NoReturn:
    raise TypeError(READ_ONLY)


class FrozenDict(dict[str, Any]):
    """A ``dict`` that refuses changes (see the module's docstring)."""

    __slots__ = ()
    __setitem__ = __delitem__ = __ior__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenDict, (dict(self),))

    def __copy__(self) -> dict[str, Any]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[str, Any]:
        return thawed(self)


class FrozenList(list[Any]):
    """A ``list`` that refuses changes (see the module's docstring)."""

    __slots__ = ()
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse
    append = extend = insert = pop = remove = clear = sort = reverse = _refuse

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenList, (list(self),))

    def __copy__(self) -> list[Any]:
        return list(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> list[Any]:
        return thawed(self)


SENT_AS_IT_CAME = (
    "what the provider sent is read-only (a hosted call's input, a citation): it goes back to "
    "the provider as it came and is what the store keeps, so a change here would show one "
    "thing and send or keep another; copy.deepcopy(value) gives a copy you can change"
)


def _refuse_sent(self: Any, *args: Any, **kwargs: Any) -> NoReturn:
    raise TypeError(SENT_AS_IT_CAME)


class SentDict(FrozenDict):
    """A dict of the provider's own JSON (a :class:`~nbagent.ProviderItem`'s ``raw``, the
    chat record's copies of it): read-only, refused with its own reason."""

    __slots__ = ()
    __setitem__ = __delitem__ = __ior__ = _refuse_sent
    clear = pop = popitem = setdefault = update = _refuse_sent

    def __reduce__(self) -> tuple[Any, ...]:
        return (SentDict, (dict(self),))


class SentList(FrozenList):
    """A list of the provider's own JSON (see :class:`SentDict`)."""

    __slots__ = ()
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse_sent
    append = extend = insert = pop = remove = clear = sort = reverse = _refuse_sent

    def __reduce__(self) -> tuple[Any, ...]:
        return (SentList, (list(self),))


def sent(value: Any) -> Any:
    """A read-only copy of the provider's JSON ``value`` (every dict and list in it)."""
    if isinstance(value, dict):
        return SentDict({k: sent(v) for k, v in value.items()})
    if isinstance(value, list):
        return SentList(sent(v) for v in value)
    return value


def frozen(value: Any) -> Any:
    """``value`` with every dict and list in it read-only (anything else as it is)."""
    if isinstance(value, dict):
        if isinstance(value, FrozenDict):
            return value
        return FrozenDict({k: frozen(v) for k, v in value.items()})
    if isinstance(value, list) and not isinstance(value, FrozenList):
        return FrozenList(frozen(v) for v in value)
    return value


def thawed(value: Any) -> Any:
    """A copy of ``value`` whose dicts and lists are plain ones, free to change."""
    if isinstance(value, dict):
        return {k: thawed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [thawed(v) for v in value]
    return value
