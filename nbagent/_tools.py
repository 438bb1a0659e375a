"""Tools: the ``@tool`` decorator, the ``Tool`` base class, and the current call.

A tool is anything with a name, a description, a parameter schema and an
``execute`` method. Plain functions become tools through ``@tool``; classes
subclass :class:`Tool` and implement ``execute(**kwargs)``. Either may take a
parameter named ``tool_call``: it receives the executing :class:`ToolCall` and
never appears in the schema. From deeper inside a tool,
:func:`current_tool_call` returns the same object.

A :class:`ToolSource` gives a chat tools it does not define itself and whose
list may change while the chat runs (an MCP server, ``nbagent.MCPServer``):
``chat.with_tools(source)`` asks it for its current tools before every model request.

An async tool that uses a resource bound to one event loop (an ``aiohttp``
session, a client made on the notebook's loop) names that loop with
``loop=``: its coroutine then always runs there, whichever loop drives the
chat (see :func:`nbagent._aio.run_on_loop`).

Code that waits on something it can give up (an MCP request) registers with
:func:`on_chat_cancel`, so ``chat.cancel()`` frees it instead of waiting for it.
"""

from __future__ import annotations

import contextvars
import copy
import functools
import inspect
import json
import re
import threading
import types
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol, TypeAlias, overload

from ._errors import ToolDefinitionError
from ._events import is_async_callable
from ._schema import (
    INJECTED_PARAMS,
    JSON_TYPES,
    ParameterModel,
    SchemaValidationError,
    call_target,
    callable_docs,
    check_name,
    check_plain_json,
    check_property_keys,
    format_validation_error,
    function_parameters,
    parse_docstring,
    validate_json_schema,
)
from ._types import InputKind, ToolCall, ToolSpec

if TYPE_CHECKING:
    import asyncio
    import concurrent.futures

ApprovalResolver = Callable[[ToolCall], "bool | None"]
LoopOption: TypeAlias = "asyncio.AbstractEventLoop | Literal['current'] | None"
InputAsk = tuple[InputKind, str, dict[str, Any], "dict[str, Any] | None"]
"""What a call waits for instead of running: (kind, message, content, answer schema)."""

_current_call: contextvars.ContextVar[ToolCall | None] = contextvars.ContextVar(
    "nbagent_current_tool_call", default=None
)


class InputAsker(Protocol):
    """How code running a chat's tool call asks a person for something mid-call.

    Given to the call's code by the core (:func:`current_input_asker`); an MCP
    server's elicitation or sampling request in the middle of a call uses it.
    """

    def ask(
        self,
        kind: InputKind,
        message: str,
        content: dict[str, Any],
        schema: dict[str, Any] | None,
        server: str | None,
    ) -> tuple[str, concurrent.futures.Future[tuple[str, Any]]]:
        """Park a pending input on the call; its id and a future of ``(action, data)``."""

    def withdraw(self, input_id: str, why: str) -> None:
        """Give up an input still waiting (the call ended first): recorded as cancelled."""

    async def sample(
        self,
        input_id: str,
        messages: list[Any],
        system: str | None,
        max_tokens: int | None,
        provider: Any = None,
    ) -> Any:
        """Run an approved sampling request on ``provider`` (default: the chat's); its response.

        Its tokens and cost count in the chat's totals and budgets.
        """

    @property
    def parks(self) -> bool:
        """Whether the call may park on its inputs (raise ``InputsRequired``) instead of
        waiting in memory: the chat keeps its answers durably (a store)."""
        return False

    def resume(self) -> dict[str, Any] | None:
        """The answers this run retries with, when the call parked on inputs before (see
        :class:`InputsRequired`): ``{"request_state", "ready", "answers": {key: {"input_id",
        "kind", "action", "data", "content"}}}``; ``None``: a first run."""
        return None


class InputsRequired(Exception):
    """Raised by a running call: it parks on these inputs instead of waiting in memory.

    The call's run ends with the call ``awaiting_input`` on one
    :class:`~nbagent.PendingInput` per request (each stored with ``key`` and
    ``state``); once every one is answered the call is runnable again, is claimed
    like any run, and its code finds the answers in ``current_input_asker().resume()``
    (a 2026-07-28 MCP server's ``InputRequiredResult``, retried with
    ``input_responses`` and ``request_state``).

    Args:
        requests: ``(key, kind, message, content, schema)`` for each input asked.
        state: The opaque state the retry carries back (the server's ``request_state``).
        ready: Responses known without asking (roots), by key, as JSON.
        server: The MCP server's label.
    """

    def __init__(
        self,
        requests: Sequence[tuple[str, InputKind, str, dict[str, Any], dict[str, Any] | None]],
        state: str | None,
        ready: dict[str, Any] | None = None,
        server: str | None = None,
    ):
        super().__init__(f"the call waits for {len(requests)} input(s)")
        self.requests = list(requests)
        self.state = state
        self.ready = dict(ready or {})
        self.server = server


_current_asker: contextvars.ContextVar[InputAsker | None] = contextvars.ContextVar(
    "nbagent_input_asker", default=None
)


def current_input_asker() -> InputAsker | None:
    """The running call's way to ask a person for input (``None`` outside a chat's call)."""
    return _current_asker.get()


def current_tool_call() -> ToolCall | None:
    """The :class:`ToolCall` being executed, from anywhere inside a tool (else ``None``).

    Works in every concurrency mode: the call is bound in the thread or task
    that runs the tool, and in tasks it starts (``asyncio.create_task``,
    ``asyncio.to_thread``). A plain thread or a thread pool the tool starts does
    not inherit it (``None`` there): submit ``contextvars.copy_context().run``.
    """
    return _current_call.get()


class CancelEvent(threading.Event):
    """A chat's cancel flag (``chat.cancel()``) that also wakes waiters able to give up.

    Setting it calls, once, every function registered with :meth:`register`
    (from the thread that sets it); one registered after it is set is called at once.
    """

    def __init__(self) -> None:
        super().__init__()
        self._waiters_lock = threading.Lock()
        self._waiters: dict[int, Callable[[], object]] = {}
        self._next = 0

    def set(self) -> None:
        super().set()  # before the lock: register() either sees the flag or is collected here
        with self._waiters_lock:
            waiters = list(self._waiters.values())
            self._waiters.clear()
        for fn in waiters:
            try:
                fn()
            except Exception:  # a waiter's problem must not stop the others or cancel()
                continue

    def register(self, fn: Callable[[], object]) -> Callable[[], None]:
        """Call ``fn`` when the flag is set; returns a function that withdraws it."""
        with self._waiters_lock:
            if not self.is_set():
                key = self._next
                self._next += 1
                self._waiters[key] = fn
                return lambda: self._withdraw(key)
        fn()
        return _nothing

    def _withdraw(self, key: int) -> None:
        with self._waiters_lock:
            self._waiters.pop(key, None)


def _nothing() -> None:
    return None


_chat_cancel: contextvars.ContextVar[CancelEvent | None] = contextvars.ContextVar(
    "nbagent_chat_cancel", default=None
)


def on_chat_cancel(fn: Callable[[], object]) -> Callable[[], None]:
    """Have ``fn`` called if the chat this code runs for is cancelled (``chat.cancel()``).

    For a tool or a tool source waiting on something it can abandon: ``fn``
    (called from the cancelling thread, so it must only signal) gives up the
    wait. Outside a chat's tool call or tool listing nothing is registered.

    Returns:
        A function that withdraws ``fn`` (call it once the wait is over).
    """
    cancel = _chat_cancel.get()
    return cancel.register(fn) if cancel is not None else _nothing


@contextmanager
def _cancelled_by(cancel: CancelEvent | None) -> Iterator[None]:
    """Code run inside belongs to the chat whose cancel flag is ``cancel``."""
    token = _chat_cancel.set(cancel)
    try:
        yield
    finally:
        _chat_cancel.reset(token)


class CallReporter(Protocol):
    """What a running call may tell its chat besides its result (the core implements it).

    Every method may be called from any thread (an MCP session's notifications
    arrive on nbagent's background loop); a report made after the call finished
    is dropped.
    """

    def progress(self, progress: float, total: float | None, message: str | None) -> bool:
        """How far the call is (a ``ToolCallProgress`` event); whether it was kept."""

    def log(self, level: str, message: str, logger: str | None) -> bool:
        """A log message a server sent while the call ran (a ``ToolCallLog`` event)."""


_call_reporter: contextvars.ContextVar[CallReporter | None] = contextvars.ContextVar(
    "nbagent_call_reporter", default=None
)


def call_reporter() -> CallReporter | None:
    """The running call's reporter (``None`` outside a chat's tool call).

    For code that reports from elsewhere (an MCP session's callbacks on the
    background loop): take it inside the call, use it from anywhere.
    """
    return _call_reporter.get()


def report_progress(
    progress: float, total: float | None = None, message: str | None = None
) -> bool:
    """Say how far the running tool call is: its card shows a progress bar.

    Call it from anywhere inside a tool (every concurrency mode, sync or
    async); the chat emits a :class:`~nbagent.ToolCallProgress` event, the call's
    record keeps the latest (``chat.log``'s ``progress``, ``progress_total`` and
    ``progress_message``), and the live view draws it. Outside a chat's tool
    call it does nothing, so a tool stays callable on its own::

        @tool
        def crunch(n: int) -> str:
            for i in range(n):
                ...
                nbagent.report_progress(i + 1, n, f"chunk {i + 1} of {n}")
            return "done"

    Args:
        progress: How far it is (a number that grows: items, bytes, percent...).
        total: What ``progress`` counts up to, if known.
        message: What it is doing now (one short line).

    Returns:
        Whether the report reached a chat (``False`` outside a call, or when it
        repeats the last one or comes too soon after it: reports are kept at
        most every 0.1 s unless their message changes or they reach ``total``).

    Raises:
        TypeError: ``progress`` or ``total`` is not a number.
    """
    for name, value in (("progress", progress), ("total", total)):
        if value is None and name == "total":
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise TypeError(f"report_progress: {name} must be a number, got {value!r}")
    if message is not None and not isinstance(message, str):
        raise TypeError(f"report_progress: message must be a string, got {message!r}")
    reporter = _call_reporter.get()
    if reporter is None:
        return False
    return reporter.progress(float(progress), None if total is None else float(total), message)


@contextmanager
def _bind_call(
    call: ToolCall,
    cancel: CancelEvent | None = None,
    reporter: CallReporter | None = None,
    asker: InputAsker | None = None,
) -> Iterator[None]:
    token = _current_call.set(call)
    reported = _call_reporter.set(reporter)
    asking = _current_asker.set(asker)
    try:
        with _cancelled_by(cancel):
            yield
    finally:
        _call_reporter.reset(reported)
        _current_asker.reset(asking)
        _current_call.reset(token)


def _snake(name: str) -> str:
    s = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name)
    return re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", s).lower()


class Tool:
    """Base class for tools written as classes.

    Subclass it and implement ``execute(self, **params)`` (a ``staticmethod`` or a
    ``classmethod`` too: every parameter after ``cls`` is the model's); the parameters'
    type hints and the ``Args:`` sections of the class docstring and of
    ``execute``'s (``execute``'s wins for a parameter both describe) become the
    schema; the description is the class docstring's summary::

        class IssueRefund(Tool):
            \"\"\"Issues a refund for an order.\"\"\"
            requires_approval = True

            def execute(self, order_id: int, tool_call: ToolCall | None = None) -> str:
                ...

    Class attributes (all inherited by subclasses):
        name: Tool name; defaults to the class name in snake_case.
        description: Defaults to the class docstring.
        requires_approval: ``True`` gates every call behind a decision; a
            resolver decides per call instead (see below).
        timeout: Seconds before a running call is abandoned as ``timed_out``.
        idempotent: Safe to rerun after a crash left the call in doubt.
        parameters: A raw JSON Schema, instead of one derived from ``execute``:
            a dict with ``"type": "object"`` (the arguments are a JSON object),
            checked when the class is defined (every ``type`` word one JSON Schema
            knows, JSON throughout, no ``tool_call`` property: that name is
            reserved for the call). A pydantic model class stands for its JSON
            Schema, and the model validates each call's arguments: ``execute``
            receives its field values (a date as a ``date``).
        loop: The event loop an async ``execute`` must run on (its resources
            are bound to it); ``None``: whichever loop drives the chat.
        server: The label of the server the tool comes from (an MCP server's
            ``label``); ``None`` for a tool defined in this process.
        approval_note: Why its calls need a decision, when there is more to say
            than that it requires one (an MCP tool: "marked destructive by the
            server"); shown on approval cards and kept in the log.
        external: Its calls are never run here: each parks (status
            ``awaiting_input``, a :class:`~nbagent.PendingInput` of kind
            ``external``) until a result is supplied from outside
            (``chat.answer(call, result)``), for work done by a person or
            another system. A gated external call is decided first, then parks.

    A resolver decides per call: ``requires_approval`` defined as a method
    ``def requires_approval(self, tool_call) -> bool | None``, or set to a
    function of the call (``staticmethod(fn)``, a lambda, a plain function
    taking only the call), or, equivalently, ``approval(self, call)``.
    ``True`` runs the call, ``False`` denies it (the model gets the structured
    denial), ``None`` leaves it pending. It is asked again at every step
    (``complete()``, ``step()``, after ``Chat.load``) while the call waits,
    so it must be an idempotent read with no side effects. One that raises
    or returns anything else leaves the call pending, its reason saying why.

    Raises:
        ToolDefinitionError: At class creation, when ``requires_approval`` is
            neither a bool nor a callable taking the call (a string, a
            number), or when ``approval`` is a resolver and ``requires_approval``
            is one too, or ``True``, or ``False`` set in the same class (the
            resolver would overrule it);
            when ``execute`` is a generator (a tool returns its result);
            when a parameter's default does not match its type; or when
            ``parameters`` is not a JSON Schema of an object (see above).
    """

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    requires_approval: ClassVar[Any] = False
    timeout: ClassVar[float | None] = None
    idempotent: ClassVar[bool] = False
    parameters: ClassVar[dict[str, Any] | None] = None
    approval: ClassVar[Any] = None
    loop: ClassVar[asyncio.AbstractEventLoop | None] = None
    server: ClassVar[str | None] = None
    approval_note: ClassVar[str | None] = None
    external: ClassVar[bool] = False
    _params: ClassVar[ParameterModel | None] = None
    _parameters_model: ClassVar[tuple[dict[str, Any], Any] | None] = None
    """``(schema, model)`` when ``parameters`` was declared as a pydantic model class."""

    def __init_subclass__(cls, abstract: bool = False, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if abstract:
            return
        if "name" not in cls.__dict__ or not cls.__dict__["name"]:
            cls.name = _snake(cls.__name__)
        check_name(cls.name)
        if "description" not in cls.__dict__ or not cls.__dict__["description"]:
            cls.description = parse_docstring(cls.__doc__)[0] if cls.__doc__ else ""
        if "parameters" in cls.__dict__:
            cls.parameters, cls._parameters_model = _declared_parameters(
                f"{cls.__name__}.parameters", cls.__dict__["parameters"]
            )
        execute = cls.__dict__.get("execute")
        own_docs = parse_docstring(cls.__dict__.get("__doc__"))[1]
        if execute is None and own_docs and cls.execute is not Tool.execute:
            execute = inspect.getattr_static(cls, "execute")  # inherited: described again
        if execute is not None and cls.parameters is None:
            code, skip_first = _execute_code(cls, execute)
            if not cls.external:
                _refuse_generator(f"{cls.__name__}.execute", code)
            cls._params = function_parameters(code, skip_first=skip_first, docs=_class_docs(cls))
            if not cls.description:
                cls.description = parse_docstring(code.__doc__)[0]
        if cls.timeout is not None and cls.timeout <= 0:
            raise ToolDefinitionError(f"{cls.__name__}.timeout must be positive")
        own = cls.__dict__.get("requires_approval", _UNSET)
        if own is not _UNSET:
            cls.requires_approval = _class_gate(cls.__name__, own)
        if cls.approval is not None and (
            callable(cls.requires_approval) or cls.requires_approval is True or own is False
        ):
            raise _both(cls.__name__, cls.requires_approval)

    # -- what providers see -------------------------------------------------
    @property
    def input_schema(self) -> dict[str, Any]:
        if self.parameters is not None:
            return self.parameters
        if self._params is None:
            return {"type": "object", "properties": {}, "additionalProperties": False}
        return self._params.schema

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(self.name, self.description or self.name, self.input_schema)

    @functools.cached_property
    def is_async(self) -> bool:
        return _is_async(self._target())

    @property
    def resolver(self) -> ApprovalResolver | None:
        """The function deciding each call (``requires_approval`` or ``approval``), if any."""
        gate = self.requires_approval
        if callable(gate):
            return gate
        resolver: ApprovalResolver | None = self.approval
        return resolver

    @property
    def has_resolver(self) -> bool:
        return self.resolver is not None

    def input_request(self, call: ToolCall) -> InputAsk | None:
        """What a call of this tool waits for instead of running, or ``None`` (it runs).

        An ``external`` tool's call waits for its result: ``("external", message,
        content, schema)``, the content holding the call's arguments and no schema
        (any value a tool may return is a result). A tool that asks a person
        something (:data:`~nbagent.ask_user`) overrides it.
        """
        if not self.external:
            return None
        arguments = call.effective_arguments
        shown = json.dumps(arguments, ensure_ascii=False, default=str)
        if len(shown) > 200:
            shown = shown[:197] + "..."
        message = f"{self.name} is done outside nbagent: give its result for {shown}"
        return "external", message, {"arguments": arguments}, None

    def _target(self) -> Callable[..., Any]:
        return self.execute

    @functools.cached_property
    def _wants_tool_call(self) -> bool:
        try:
            return "tool_call" in inspect.signature(self._target()).parameters
        except (TypeError, ValueError):
            return False

    # -- running ------------------------------------------------------------
    def validate_arguments(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Check and convert a model's arguments.

        The check is strict JSON Schema validation against :attr:`input_schema`,
        the schema the model was shown (``"12"`` is not an integer, ``"yes"``
        not a boolean), the same check a store applies to arguments edited
        from another process. Then, for a tool built from a signature, the
        valid JSON is converted into the parameters' Python types (nested
        models, enums, dates).

        Raises:
            SchemaValidationError: Naming each problem.
        """
        if not isinstance(arguments, dict):
            raise SchemaValidationError("arguments must be a JSON object")
        problems = validate_json_schema(arguments, self.input_schema)
        if problems:
            if self.parameters is None and self._params is not None:
                # what only the converter sees (a dict key that is not a number), in the same
                # round: a model that mends the schema's problems is not refused once more
                problems = [*problems, *self._params.more_problems(arguments, problems)]
            raise SchemaValidationError("; ".join(problems))
        if self.parameters is not None:
            declared = self._parameters_model
            if declared is None or declared[0] is not self.parameters:
                return dict(arguments)
            try:  # a pydantic model declared as the parameters: its field values
                instance = declared[1].model_validate(arguments)
            except Exception as exc:
                raise SchemaValidationError(format_validation_error(exc)) from exc
            return {name: getattr(instance, name) for name in type(instance).model_fields}
        if self._params is None:
            if arguments:
                raise SchemaValidationError(
                    "; ".join(f"{k}: unexpected argument" for k in arguments)
                )
            return {}
        try:
            return self._params.validate(arguments)
        except Exception as exc:
            raise SchemaValidationError(format_validation_error(exc)) from exc

    def bind(self, call: ToolCall, kwargs: dict[str, Any]) -> dict[str, Any]:
        if self._wants_tool_call:
            kwargs = {**kwargs, "tool_call": call}
        return kwargs

    def execute(self, *args: Any, **kwargs: Any) -> Any:
        """Run one call: a subclass defines it with its own parameters (the tool's schema),
        sync or ``async``, e.g. ``def execute(self, order_id: int) -> str``. Declared as
        ``(*args, **kwargs)`` so such an override type-checks (mypy ``--strict``)."""
        raise NotImplementedError(f"{type(self).__name__}.execute is not implemented")

    def __repr__(self) -> str:
        return f"<Tool {self.name}{_gate_words(self)}>"


class FunctionTool(Tool, abstract=True):
    """A tool made from a plain function by :func:`tool`. Calling it calls the function.

    It may also be made from a ``functools.partial`` (the arguments the partial
    binds are left out of the schema; its name and docstring are the wrapped
    function's) or a callable object (its ``__call__``'s parameters; its name is
    the class's in snake_case, its description ``__call__``'s docstring or the
    class's).

    ``@tool`` on a method in a class body (its first parameter named ``self``)
    makes a method tool: ``self`` is not in the schema, and the tool read from an
    instance (``svc.lookup``) is bound to it, ready for ``with_tools``; the one
    read from the class (``Svc.lookup``) has no instance to run with, and
    ``with_tools`` refuses it. ``@classmethod`` over ``@tool`` (first parameter
    ``cls``) is bound to the class, read from it or from an instance.

    A tool made from a tool (``tool(name="south_stock")(south.stock)``, or from a
    ``functools.partial`` of one) runs the same code and keeps the options it is not
    given again: its gate (unless ``requires_approval`` or ``approval`` is given),
    name, description, timeout, ``idempotent``, ``external`` and ``loop``.
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        requires_approval: bool | ApprovalResolver | None = None,
        approval: ApprovalResolver | None = None,
        timeout: float | None = None,
        idempotent: bool = False,
        loop: LoopOption = None,
        external: bool = False,
    ):
        if not callable(fn):
            raise ToolDefinitionError(f"@tool needs a function, got {fn!r}")
        inner = _tool_inside(fn)
        if inner is not None:  # a tool made from a tool: what is not given again is kept
            if requires_approval is None and approval is None:
                approval = inner.approval  # a resolver under its older name: it alone decides
                requires_approval = inner.requires_approval if approval is None else None
            name = name or inner.name
            description = description or inner.description
            timeout = inner.timeout if timeout is None else timeout
            idempotent = idempotent or inner.idempotent
            external = external or inner.external
            loop = inner.loop if loop is None else loop
            if fn is inner:
                fn = inner._target()  # the function it runs (read from an instance: bound)
        self.fn: Callable[..., Any] = fn
        self.name = check_name(name or _default_name(fn))  # type: ignore[misc]
        if isinstance(requires_approval, bool) and approval is not None:
            raise _both(f"tool {self.name!r}", requires_approval)
        if requires_approval is None:
            requires_approval = False
        check_gate(f"tool {self.name!r}", requires_approval, approval)
        doc_desc, _ = callable_docs(fn)
        self.description = description or doc_desc  # type: ignore[misc]
        self.requires_approval = requires_approval  # type: ignore[misc]
        self.approval = approval  # type: ignore[misc]
        if timeout is not None and timeout <= 0:
            raise ToolDefinitionError(f"tool {self.name!r}: timeout must be positive")
        self.timeout = timeout  # type: ignore[misc]
        self.idempotent = idempotent  # type: ignore[misc]
        self.external = bool(external)  # type: ignore[misc]
        if not self.external:
            _refuse_generator(f"tool {self.name!r}", fn)
        self.loop = _bound_loop(self.name, fn, loop)  # type: ignore[misc]
        self._method = _is_method(fn)
        self._params = function_parameters(fn, skip_first=self._method)  # type: ignore[misc]
        if inspect.isfunction(fn) or inspect.ismethod(fn):
            functools.update_wrapper(self, fn)
        else:  # a partial or a callable object: its attributes are not the tool's
            self.__wrapped__ = fn
            self.__doc__ = getattr(call_target(fn), "__doc__", None) or fn.__doc__

    def __get__(self, obj: Any, objtype: type | None = None) -> FunctionTool:
        """Read from an instance, a method tool is bound to it (as a method would be)."""
        if obj is None or not self._method:
            return self
        bound = copy.copy(self)
        bound.fn = self.fn.__get__(obj, objtype)
        bound.__wrapped__ = bound.fn  # what signatures read: the bound method, without self
        bound._method = False
        return bound

    def _target(self) -> Callable[..., Any]:
        return self.fn

    def execute(self, **kwargs: Any) -> Any:
        return self.fn(**kwargs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<tool {self.name}{_gate_words(self)}>"


def _default_name(fn: Any) -> str:
    """A tool's name when none is given: the function's (a partial's: the one it wraps);
    a callable object's class name in snake_case."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    name = getattr(fn, "__name__", None)
    return name if isinstance(name, str) else _snake(type(fn).__name__)


def _tool_inside(fn: Any) -> FunctionTool | None:
    """The tool a callable is made from: ``fn`` itself, or the one a partial wraps."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    return fn if isinstance(fn, FunctionTool) else None


def _is_method(fn: Any) -> bool:
    """A function written as a method: a plain function whose first parameter is ``self``,
    or ``cls`` in a class body (``@classmethod`` over ``@tool``: bound to the class)."""
    if not inspect.isfunction(fn):
        return False
    params = list(inspect.signature(fn).parameters.values())
    if not params or params[0].kind not in (
        inspect.Parameter.POSITIONAL_ONLY,
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
    ):
        return False
    if params[0].name == "self":
        return True
    owner = fn.__qualname__.rpartition(".")[0]
    return params[0].name == "cls" and bool(owner) and not owner.endswith("<locals>")


def _is_async(fn: Any) -> bool:
    """Whether calling ``fn`` gives a coroutine to await (an ``async def __call__`` too)."""
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(call_target(fn))


def _refuse_generator(owner: str, fn: Any) -> None:
    """Refuse a generator as a tool's code, when it is defined.

    Calling one runs nothing: its body would run only when something iterates it,
    outside the call (after its timeout, its approval, its record). A tool returns
    its whole result; it can report progress while it runs.
    """
    target = call_target(fn)
    if inspect.isgeneratorfunction(target) or inspect.isasyncgenfunction(target):
        raise ToolDefinitionError(
            f"{owner} is a generator: a tool returns its result, it does not yield it; "
            "collect the items (return a list) and show progress with nbagent.report_progress()"
        )


def _execute_code(cls: type, execute: Any) -> tuple[Callable[..., Any], bool]:
    """The code a Tool class's ``execute`` (as written in a class body) runs, and whether its
    first parameter is the instance (``self``) and so not one of the tool's parameters.

    A ``staticmethod`` has no instance parameter; a ``classmethod`` is bound to the class,
    its ``cls`` filled in.
    """
    if isinstance(execute, staticmethod):
        return execute.__func__, False
    if isinstance(execute, classmethod):
        return execute.__get__(None, cls), False
    return execute, True


_SUBSCHEMA = (
    *("items", "additionalProperties", "not", "contains", "propertyNames", "if", "then"),
    *("else", "additionalItems", "unevaluatedProperties", "unevaluatedItems"),
)
_SUBSCHEMA_LISTS = ("anyOf", "allOf", "oneOf", "prefixItems")
_SUBSCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")


def _schema_problems(node: Any, where: str, depth: int = 0) -> list[str]:
    """What makes ``node`` no JSON Schema a model API takes (a type word that does not
    exist, a keyword holding the wrong kind of value), each with its place."""
    if isinstance(node, bool):
        return []  # true / false: anything / nothing
    if not isinstance(node, dict):
        return [f"{where}: a schema is a dict, got {type(node).__name__} {node!r:.60}"]
    if depth > 64:
        return [f"{where}: nested too deeply"]
    problems: list[str] = []
    kind = node.get("type")
    if kind is not None:
        words = kind if isinstance(kind, list) else [kind]
        for word in words:
            if word not in JSON_TYPES:
                problems.append(
                    f"{where}: type {word!r} is not a JSON Schema type "
                    f"({', '.join(sorted(JSON_TYPES))})"
                )
    required = node.get("required")
    if required is not None and not (
        isinstance(required, list) and all(isinstance(r, str) for r in required)
    ):
        problems.append(f"{where}: 'required' is a list of property names, got {required!r:.60}")
    for key in _SUBSCHEMA:
        if key in node:
            value = node[key]
            if key == "items" and isinstance(value, list):  # the older tuple form
                for i, item in enumerate(value):
                    problems += _schema_problems(item, f"{where}.items[{i}]", depth + 1)
            else:
                problems += _schema_problems(value, f"{where}.{key}", depth + 1)
    for key in _SUBSCHEMA_LISTS:
        if key in node:
            value = node[key]
            if not isinstance(value, list):
                problems.append(f"{where}: {key!r} is a list of schemas, got {value!r:.60}")
                continue
            for i, item in enumerate(value):
                problems += _schema_problems(item, f"{where}.{key}[{i}]", depth + 1)
    for key in _SUBSCHEMA_MAPS:
        if key in node:
            value = node[key]
            if not isinstance(value, dict):
                problems.append(f"{where}: {key!r} maps names to schemas, got {value!r:.60}")
                continue
            for name, item in value.items():
                problems += _schema_problems(item, f"{where}.{key}[{name!r}]", depth + 1)
    return problems


def check_parameters_schema(owner: str, schema: Any) -> dict[str, Any]:
    """Refuse a raw parameter schema a model API would reject or a call could not honour.

    A tool's arguments are a JSON object, so the schema is a dict with ``"type": "object"``
    whose ``properties`` (if any) are schemas; every ``type`` word, at any depth, is one
    JSON Schema knows; it is JSON (it is sent as it is); and it does not declare
    ``tool_call``, the parameter through which a tool receives its call (the model's value
    would be replaced by it).

    Returns:
        The schema, unchanged.

    Raises:
        ToolDefinitionError: Naming ``owner`` and each problem.
    """
    if not isinstance(schema, dict):
        raise ToolDefinitionError(
            f"{owner} must be a JSON Schema dict ({{'type': 'object', 'properties': {{...}}}}) "
            f"or a pydantic model class, got {type(schema).__name__} {schema!r:.80}"
        )
    if schema.get("type") != "object":
        raise ToolDefinitionError(
            f"{owner} must describe an object ({{'type': 'object', 'properties': {{...}}}}): "
            f"a tool's arguments are a JSON object; got type {schema.get('type')!r}"
        )
    problems = _schema_problems(schema, "parameters")
    if problems:
        raise ToolDefinitionError(f"{owner} is not a valid JSON Schema: " + "; ".join(problems))
    check_plain_json(owner, schema)  # sent as it is: no inf, no dates
    check_property_keys(owner, schema)  # a name one provider refuses fails every request
    reserved = sorted(
        INJECTED_PARAMS & (set(schema.get("properties") or {}) | set(schema.get("required") or []))
    )
    if reserved:
        raise ToolDefinitionError(
            f"{owner}: {reserved[0]!r} is reserved: an execute() parameter of that name "
            "receives the ToolCall being run, and is never shown to the model; name the "
            "property otherwise"
        )
    return schema


def _declared_parameters(
    owner: str, value: Any
) -> tuple[dict[str, Any] | None, tuple[dict[str, Any], Any] | None]:
    """A Tool class's ``parameters`` as declared: ``(schema, None)`` for a raw JSON Schema,
    ``(its JSON Schema, (schema, model))`` for a pydantic model class (its calls' arguments
    are then validated by the model, and ``execute`` receives the model's field values),
    ``(None, None)`` for none (the schema comes from ``execute``'s signature)."""
    if value is None:
        return None, None
    if isinstance(value, type) and hasattr(value, "model_json_schema"):
        try:
            schema = value.model_json_schema()
        except Exception as exc:
            raise ToolDefinitionError(
                f"{owner}: cannot describe {value.__name__} as JSON Schema: {exc}"
            ) from exc
        return check_parameters_schema(owner, schema), (schema, value)
    return check_parameters_schema(owner, value), None


def _class_docs(cls: type) -> dict[str, str]:
    """The parameter descriptions of a Tool class's own docstrings (``Args:``), nearest class
    first; ``execute``'s docstring wins over all of them."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if klass is not Tool and isinstance(klass, type) and issubclass(klass, Tool):
            docs.update(parse_docstring(klass.__dict__.get("__doc__"))[1])
    return docs


@overload
def tool(fn: Callable[..., Any], /) -> FunctionTool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    requires_approval: bool | ApprovalResolver | None = None,
    approval: ApprovalResolver | None = None,
    timeout: float | None = None,
    idempotent: bool = False,
    loop: LoopOption = None,
    external: bool = False,
) -> Callable[[Callable[..., Any]], FunctionTool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    requires_approval: bool | ApprovalResolver | None = None,
    approval: ApprovalResolver | None = None,
    timeout: float | None = None,
    idempotent: bool = False,
    loop: LoopOption = None,
    external: bool = False,
) -> FunctionTool | Callable[[Callable[..., Any]], FunctionTool]:
    """Turn a function into a tool; usable bare (``@tool``) or with options.

    Args:
        fn: The function. Its type hints and Google/NumPy/Sphinx docstring
            become the schema; a ``tool_call`` parameter receives the call.
            A method in a class body works too (``self`` is left out; the tool
            read from an instance is bound to it), and so do a
            ``functools.partial`` (its bound arguments are left out) and a
            callable object (its ``__call__``). A sync function returning a
            coroutine has it awaited inside the call. A tool (or a partial of
            one) gives a tool running the same code that keeps every option not
            given here (its gate unless ``requires_approval`` or ``approval``
            is given): ``tool(name="south_stock")(south.stock)``.
        name: Tool name (default: the function's name; a callable object's
            class name in snake_case).
        description: Tool description (default: the docstring's summary).
        requires_approval: ``True`` gates every call behind a decision. A
            resolver ``(call) -> True | False | None`` decides per call
            instead: ``True`` runs it, ``False`` denies it, ``None`` leaves
            it pending; it is asked again at every step while the call
            waits (after ``Chat.load`` too), so it must be an idempotent
            read. ``None`` (the default) means ``False``.
        approval: The same resolver, under its older name: give one or the
            other, not both (``requires_approval=True`` or ``False`` next to
            ``approval=fn`` is refused too: the resolver alone would decide).
        timeout: Seconds before a running call becomes ``timed_out``.
        idempotent: Safe to rerun after a crash left the call in doubt.
        loop: For an async function whose resources are bound to one event
            loop: that loop, or ``"current"`` for the loop running where the
            tool is defined (a notebook's). Its calls then run on that loop,
            whichever loop drives the chat; a call made while that loop is
            blocked (``chat.ask()`` in a cell blocks the notebook's) fails at
            once with a :class:`~nbagent.ToolLoopError` result instead of
            hanging: use ``await chat.ask_async()`` there.
        external: The function is never run: each call parks (status
            ``awaiting_input``) until its result is supplied from outside,
            ``chat.answer(call, result)`` (work done by a person or another
            system). Its signature and docstring still make the schema.

    Raises:
        ToolDefinitionError: A name providers reject, ``*args``, a
            parameter type that has no JSON Schema, a default its type
            rejects (``x: int = "many"``; ``None`` is allowed), a generator
            (return a list instead), ``loop=`` on a
            function that is not async (or ``"current"`` with no loop
            running), a ``requires_approval`` that is neither a bool nor a
            function of the call, or both gates given (``approval`` next to
            a ``requires_approval`` that is a resolver, ``True`` or ``False``).
    """

    def wrap(f: Callable[..., Any]) -> FunctionTool:
        return FunctionTool(
            f,
            name=name,
            description=description,
            requires_approval=requires_approval,
            approval=approval,
            timeout=timeout,
            idempotent=idempotent,
            loop=loop,
            external=external,
        )

    if fn is not None:
        return wrap(fn)
    return wrap


_UNSET: Any = object()


def _class_gate(owner: str, value: Any) -> Any:
    """A ``requires_approval`` set in a class body, as the class keeps it.

    A bool stays; ``None`` is ``False``; a method ``(self, tool_call)``, a
    ``staticmethod``/``classmethod``, a property or a callable object stays as written; a
    plain function taking only the call (``requires_approval = rule``, a
    lambda) becomes a ``staticmethod``, so it receives the call, not the tool.
    """
    if value is None:
        return False
    if isinstance(value, (staticmethod, classmethod)):
        _refuse_async_gate(owner, value.__func__)
    if isinstance(value, (bool, staticmethod, classmethod, property)):
        return value  # a property's value is checked per instance, in with_tools
    if callable(value):
        _refuse_async_gate(owner, value)
    if inspect.isfunction(value):
        try:
            params = list(inspect.signature(value).parameters.values())
        except (TypeError, ValueError):
            return value
        positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        required = [p for p in positional if p.default is p.empty]
        method = (positional and positional[0].name in ("self", "cls")) or len(required) >= 2
        if not method:
            _check_arity(owner, value, 1)
            return staticmethod(value)
        _check_arity(owner, value, 2)
        return value
    if callable(value):
        return value
    raise _bad_gate(owner, value)


def _check_arity(owner: str, fn: Callable[..., Any], n: int) -> None:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return  # no signature to check (a builtin): it is asked at call time
    try:
        sig.bind(*range(n))
    except TypeError:
        what = "(self, tool_call)" if n == 2 else "(tool_call)"
        raise ToolDefinitionError(
            f"{owner}: a requires_approval resolver is called as {what}; "
            f"{getattr(fn, '__qualname__', fn)!r} cannot take that"
        ) from None


def _refuse_async_gate(owner: str, fn: Any, what: str = "requires_approval") -> None:
    """Refuse an ``async def`` approval rule (or one whose ``__call__`` is), when the tool is
    defined: a rule is asked on the thread deciding the call and never awaited, so its body
    would never run and its call would wait for a decision for ever."""
    # as callbacks are judged: what calling it makes (a sync adapter around an async
    # function, asgiref's async_to_sync, runs it; its __wrapped__ is not what is called)
    if is_async_callable(fn):
        label = getattr(fn, "__qualname__", None) or type(fn).__qualname__
        raise ToolDefinitionError(
            f"{owner}: {what} takes a plain function, got the async callable {label!r}: an "
            "approval rule is asked on the thread deciding the call and never awaited, so its "
            "body would never run (the call would wait for a decision for ever); write it as "
            "a plain `def` (read what it needs before the chat runs, or decide from your own "
            "async code with chat.approve / chat.deny)"
        )


def _bad_gate(owner: str, value: Any) -> ToolDefinitionError:
    return ToolDefinitionError(
        f"{owner}: requires_approval must be True, False or a resolver "
        f"(tool_call) -> True | False | None, got {value!r}"
    )


def _both(owner: str, requires_approval: Any = None) -> ToolDefinitionError:
    """Both gate spellings given: a resolver twice, or a resolver (``approval``) next to a
    fixed ``requires_approval`` it would silently overrule."""
    if isinstance(requires_approval, bool):
        return ToolDefinitionError(
            f"{owner}: requires_approval={requires_approval} and an approval resolver "
            "are both given, and the resolver would decide every call alone; give one: "
            "requires_approval=True to ask about every call, or the resolver (as "
            "requires_approval=fn or approval=fn) to decide per call"
        )
    return ToolDefinitionError(
        f"{owner}: a resolver is given twice (requires_approval and approval); "
        "give it as one of them"
    )


def check_gate(owner: str, requires_approval: Any, approval: Any) -> None:
    """Refuse a gate that cannot mean anything, when the tool is defined.

    ``requires_approval`` is a bool (``None`` counts as ``False``) or a
    resolver; ``approval`` is ``None`` or a resolver; not both resolvers.

    Raises:
        ToolDefinitionError: Naming the owner and the value.
    """
    if requires_approval is not None and not isinstance(requires_approval, bool):
        if not callable(requires_approval):
            raise _bad_gate(owner, requires_approval)
        if approval is not None:
            raise _both(owner)
        _refuse_async_gate(owner, requires_approval)
        if inspect.isfunction(requires_approval) or inspect.ismethod(requires_approval):
            _check_arity(owner, requires_approval, 1)
    if approval is not None and not callable(approval):
        raise ToolDefinitionError(
            f"{owner}: approval must be a resolver (tool_call) -> True | False | None, "
            f"got {approval!r}"
        )
    if approval is not None:
        _refuse_async_gate(owner, approval, "approval")


def _gate_words(t: Tool) -> str:
    if t.has_resolver:
        return ", approval rule"
    return ", requires_approval" if t.requires_approval else ""


def _bound_loop(name: str, fn: Callable[..., Any], loop: LoopOption) -> Any:
    import asyncio

    if loop is None:
        return None
    if not _is_async(fn):
        raise ToolDefinitionError(
            f"tool {name!r}: loop= is for async functions (a sync tool runs on a thread, "
            "not on an event loop)"
        )
    if loop == "current":
        try:
            return asyncio.get_running_loop()
        except RuntimeError:
            raise ToolDefinitionError(
                f"tool {name!r}: loop='current' needs a running event loop where the tool "
                "is defined (a notebook cell, an async function); pass the loop itself"
            ) from None
    if not isinstance(loop, asyncio.AbstractEventLoop):
        raise ToolDefinitionError(
            f"tool {name!r}: loop= takes an event loop or 'current', got {loop!r}"
        )
    return loop


class ToolSource:
    """Tools a chat gets from elsewhere, whose list may change (an MCP server).

    ``chat.with_tools(source)`` keeps the source, not a copy of its tools:
    before every model request the chat asks :meth:`source_tools` for the
    current list (the source answers from a cache unless its list changed). A chat
    that takes the source (``with_tools``, a fork) calls :meth:`attach`; ``chat.close()``
    calls :meth:`release`, which closes it unless a source shared by several chats
    (an MCP server) still has one that is open.
    """

    def source_tools(self) -> tuple[Tool, ...]:
        """The source's tools now (it may connect first)."""
        raise NotImplementedError

    def all_tools(self) -> tuple[Tool, ...]:
        """Every tool of what the source draws from, those it leaves out included (a view of
        an MCP server's tools: all the server lists); by default :meth:`source_tools`.

        A decision made elsewhere on a call of a tool this chat does not offer is judged
        by it: a tool the chat's own setup leaves out is no sign the tool is gone.
        """
        return self.source_tools()

    def attach(self, user: object) -> None:
        """``user`` (a chat) uses the source from now on."""

    def release(self, user: object) -> None:
        """``user`` (a chat) is closed: by default the source closes."""
        self.close()

    def close(self) -> None:
        """Release what the source holds (a connection, a process); it may reopen later."""


def _named(tool: Tool | type[Tool]) -> None:
    """Refuse a base class (``Tool`` itself, or one declared ``abstract=True``) as a tool."""
    if not getattr(tool, "name", None):
        cls = tool if isinstance(tool, type) else type(tool)
        raise ToolDefinitionError(
            f"{cls.__name__} is a base class, not a tool: subclass it, with a docstring "
            "and an execute() method"
        )


def as_tool(obj: Any) -> Tool:
    """Normalise what ``with_tools`` accepts: a Tool instance or class, or a function."""
    if isinstance(obj, types.MethodType) and isinstance(obj.__func__, FunctionTool):
        # ``@classmethod`` over ``@tool`` where classmethod no longer binds what it wraps
        # (Python 3.13+): the tool, bound as it would bind itself, keeping its options
        obj = obj.__func__.__get__(obj.__self__, type(obj.__self__))
    if isinstance(obj, Tool):
        _named(obj)
        if isinstance(obj, FunctionTool) and obj._method:
            owner = getattr(obj.fn, "__qualname__", obj.name).rpartition(".")[0] or "its class"
            raise ToolDefinitionError(
                f"tool {obj.name!r} is a method of {owner}: give the one read from an "
                f"instance (with_tools(instance.{getattr(obj.fn, '__name__', obj.name)})), "
                "which has the instance to run with"
            )
        check_gate(f"tool {obj.name!r}", obj.requires_approval, obj.approval)
        _check_instance_parameters(obj)
        return obj
    if isinstance(obj, type) and issubclass(obj, Tool):
        _named(obj)
        try:
            inst = obj()
        except TypeError as exc:
            raise ToolDefinitionError(
                f"{obj.__name__} needs constructor arguments; pass an instance instead"
            ) from exc
        check_gate(f"tool {inst.name!r}", inst.requires_approval, inst.approval)
        _check_instance_parameters(inst)
        return inst
    if callable(obj):
        return FunctionTool(obj)
    raise ToolDefinitionError(f"not a tool: {obj!r} (use @tool, a Tool subclass, or a function)")


def _check_instance_parameters(t: Tool) -> None:
    """Refuse a raw schema set on a tool instance (its class's was checked when defined)."""
    schema = t.parameters
    if schema is None or schema is type(t).parameters:
        return
    owner = f"tool {t.name!r}: parameters"
    if isinstance(schema, type) and hasattr(schema, "model_json_schema"):
        raise ToolDefinitionError(
            f"{owner} is a pydantic model class set on an instance; declare it on the class "
            "(parameters = Model), or set its JSON Schema (Model.model_json_schema())"
        )
    check_parameters_schema(owner, schema)


_MISSING: Any = object()
_DERIVED = frozenset(
    {"_params", "_method", "__wrapped__", "__doc__", "__name__", "__qualname__", "__module__"}
    | {"__annotations__", "__type_params__"}
)
"""A tool's attributes that follow from its code and options (compared instead)."""


def _state(t: Tool) -> dict[str, Any]:
    """What makes a tool instance the tool it is beyond its class: its own attributes
    (a FunctionTool's function and options, a configured instance's settings)."""
    cached = {
        key
        for klass in type(t).__mro__
        for key, value in vars(klass).items()
        if isinstance(value, functools.cached_property)
    }
    state = {k: v for k, v in getattr(t, "__dict__", {}).items() if k not in cached}
    for klass in type(t).__mro__:
        slots = vars(klass).get("__slots__", ())
        for slot in (slots,) if isinstance(slots, str) else slots:
            state.setdefault(slot, getattr(t, slot, _MISSING))
    return {k: v for k, v in state.items() if k not in _DERIVED}


def _same_value(a: Any, b: Any) -> bool:
    if a is b:
        return True
    if isinstance(a, functools.partial) and isinstance(b, functools.partial):
        return (
            _same_value(a.func, b.func)
            and _same_value(a.args, b.args)
            and _same_value(a.keywords, b.keywords)
        )
    try:
        return bool(a == b)
    except Exception:  # no plain answer (an array's ==): not known to be the same
        return False


def tool_difference(a: Tool, b: Tool) -> str | None:
    """How two tools differ, or ``None`` when they are one tool.

    One tool: the same object, or two of the same class with equal attributes (``@tool``
    twice over one function with the same options, a method tool read twice from one
    instance, a ``Tool`` class and an instance made without arguments). Anything else (a
    gate or a timeout of its own, another function, another configured instance) is
    another tool.
    """
    if a is b:
        return None
    if type(a) is not type(b):
        return f"a {type(a).__name__} and a {type(b).__name__}"
    first, second = _state(a), _state(b)
    differing = [
        key
        for key in sorted(first.keys() | second.keys())
        if not _same_value(first.get(key, _MISSING), second.get(key, _MISSING))
    ]
    if not differing:
        return None
    if "fn" in differing:
        fa, fb = first.get("fn"), second.get("fn")
        if (
            isinstance(fa, types.MethodType)
            and isinstance(fb, types.MethodType)
            and fa.__func__ is fb.__func__
        ):
            return "they are one method of two different instances"
        return "they run different functions"
    shown = ", ".join(differing[:4]) + (", ..." if len(differing) > 4 else "")
    return f"their {shown} differ" if len(differing) > 1 else f"their {shown} differs"


def tool_name_of(obj: Any) -> str:
    """The tool name designated by a name, a Tool class or instance, or a function."""
    if isinstance(obj, str):
        return obj
    if isinstance(obj, Tool):
        return obj.name
    if isinstance(obj, type) and issubclass(obj, Tool):
        return obj.name
    if callable(obj):
        return _default_name(obj)
    if isinstance(obj, ToolCall):  # a pending call is what a person has at hand
        raise ToolDefinitionError(
            f"a tool is named by its name, its Tool or its function, not by a call: "
            f"pass {obj.name!r} (call.name) to name the tool of {obj.name}({obj.id})"
        )
    raise ToolDefinitionError(f"cannot name a tool from {obj!r}")


__all__ = [
    "INJECTED_PARAMS",
    "FunctionTool",
    "SchemaValidationError",
    "Tool",
    "ToolSource",
    "as_tool",
    "check_gate",
    "check_parameters_schema",
    "current_tool_call",
    "report_progress",
    "tool",
    "tool_difference",
    "tool_name_of",
]
