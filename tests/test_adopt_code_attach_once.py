"""``adopt_code`` (a batch row continued from the store) gives the loaded chat what its
template was set up with in code, each once: whatever ``make_chat`` did (callbacks and
subscriptions of its own, extensions that hook themselves up in ``attach``, bound methods
of those registered by hand, an extension of a process-wide extension's type configured
otherwise), the loaded chat ends up with the hooks a chat set up that way has.

Before, what an extension's ``attach`` registered moved over and was registered again by
its new ``attach`` (an approval guard in ``before_tool_call`` ran twice), and a
``make_chat`` extension of a process-wide one's type was dropped."""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from nbagent import Chat, Extension
from nbagent._base_chat import adopt_code
from nbagent._events import ToolCallStarted
from nbagent._extension import auto_extend, stop_auto_extend
from nbagent.testing import ScriptedProvider, reply


class Wing(Extension):
    """Hooks itself up in attach when ``wired``: a subscriber and both callbacks."""

    def __init__(self, tag: str, wired: bool) -> None:
        self.tag, self.wired = tag, wired

    def attach(self, host: Any) -> None:
        if self.wired:
            host.chat.on(ToolCallStarted, self.started)
            host.chat.before_tool_call(self.before)
            host.chat.after_tool_result(self.after)

    def started(self, e: Any) -> None:
        pass

    def before(self, call: Any) -> None:
        pass

    def after(self, result: Any) -> None:
        pass


class Other(Wing):
    pass


def _labelled(label: str) -> Any:
    def fn(_: Any) -> None:
        pass

    fn.label = label  # type: ignore[attr-defined]
    return fn


def _named(fn: Any) -> tuple[str, str]:
    """A hook as the test tells hooks apart: a Wing's method by its tag, a function by label."""
    owner = getattr(fn, "__self__", None)
    if isinstance(owner, Wing):
        return (fn.__func__.__name__, owner.tag)
    return ("fn", getattr(fn, "label", None) or getattr(fn, "__qualname__", type(fn).__name__))


def _hooks(chat: Chat) -> dict[str, Counter[tuple[str, str]]]:
    return {
        "before": Counter(map(_named, chat._before)),
        "after": Counter(map(_named, chat._after)),
        "on": Counter(_named(fn) for _, fn, _ in chat._bus.subscribers()),
        "extensions": Counter((type(e).__name__, getattr(e, "tag", "")) for e in chat.extensions),
    }


_ACTION = st.one_of(
    st.tuples(st.just("on"), st.integers(0, 3)),
    st.tuples(st.just("before"), st.integers(0, 3)),
    st.tuples(st.just("after"), st.integers(0, 3)),
    st.tuples(st.sampled_from(["wing", "other"]), st.booleans()),
    st.tuples(st.sampled_from(["method-on", "method-before"]), st.integers(0, 3)),
)


def _chat() -> Chat:
    return Chat(provider=ScriptedProvider([reply("hi")]))


def _make(actions: list[tuple[str, Any]]) -> Chat:
    """A chat set up as make_chat would, step by step (the same objects each time the
    actions are replayed would not be: each call makes its own, as make_chat does)."""
    chat = _chat()
    wings: list[Wing] = []
    for n, (what, arg) in enumerate(actions):
        if what == "on":
            chat.on(ToolCallStarted, _labelled(f"on{arg}"))
        elif what == "before":
            chat.before_tool_call(_labelled(f"before{arg}"))
        elif what == "after":
            chat.after_tool_result(_labelled(f"after{arg}"))
        elif what in ("wing", "other"):
            wing = (Wing if what == "wing" else Other)(f"{what}{n}", arg)
            wings.append(wing)
            chat.extend(wing)
        elif wings:
            wing = wings[arg % len(wings)]
            if what == "method-on":
                chat.on(ToolCallStarted, wing.started)
            else:
                chat.before_tool_call(wing.before)
    return chat


@settings(max_examples=150, deadline=None)
@given(
    actions=st.lists(_ACTION, max_size=8),
    process_wide=st.sampled_from([None, "wing", "other"]),
    wired=st.booleans(),
)
def test_the_loaded_chat_has_the_hooks_of_the_chat_as_made(
    actions: list[tuple[str, Any]], process_wide: str | None, wired: bool
) -> None:
    def factory(chat: Any) -> Extension:
        return (Wing if process_wide == "wing" else Other)("everywhere", wired)

    if process_wide is not None:
        auto_extend(factory)
    try:
        as_made = _hooks(_make(actions))
        loaded, template = _chat(), _make(actions)
        adopt_code(loaded, template)
    finally:
        if process_wide is not None:
            stop_auto_extend(factory)
    assert _hooks(loaded) == as_made


def test_a_guard_an_extension_hooks_up_in_attach_runs_once_on_the_loaded_chat() -> None:
    """The critic's case, on the chats themselves: the guard is called once per call."""
    calls: list[str] = []

    class Guard(Extension):
        def attach(self, host: Any) -> None:
            host.chat.before_tool_call(self.check)

        def check(self, call: Any) -> None:
            calls.append(call.name)

    template, loaded = _chat().extend(Guard()), _chat()
    adopt_code(loaded, template)
    assert [type(e).__name__ for e in loaded.extensions] == ["Guard"]
    assert [fn.__func__.__name__ for fn in loaded._before] == ["check"]
    assert template.extensions == ()
