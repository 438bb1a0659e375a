"""Chat: a :class:`~nbagent._base_chat.BaseChat` with the standard wings plugged in.

This is the one place that wires wings into a chat: the call log
(``chat.log``), the store (``Chat(store=...)``, ``Chat.load``) and, inside a
Jupyter kernel, the live notebook view. Each is an
:class:`~nbagent.Extension`; the core below knows them only through that seam.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, Literal

from ._base_chat import BaseChat
from ._fork import UNSET, Plan
from ._types import Message, ToolCall
from .providers import Provider


class Chat(BaseChat):
    """A conversation with a model that can call tools.

    Args:
        model: Model name (``"gpt-4.1-mini"``, ``"claude-sonnet-4-5"``, ``"demo"``).
            The provider is inferred from it. ``Chat()`` alone picks the best
            provider with an API key in the environment, else the offline demo.
        provider: A provider object, or a name (``"openai"``, ``"openai-responses"``,
            ``"openai-compatible"``, ``"anthropic"``, ``"demo"``).
        system: System instructions.
        base_url: Endpoint of an OpenAI-compatible server (Ollama, vLLM...) or a proxy.
        api_key: API key (else the provider's environment variable). Never logged.
        max_steps: Steps ``complete()`` takes before stopping with
            ``budget_exhausted`` (default: ``nbagent.configure(max_steps=)``, 25).
        on_tool_error: ``"result"`` (a raising tool's error is sent to the model
            and the loop goes on) or ``"raise"`` (raise :class:`ToolExecutionError`;
            the transcript stays valid and ``complete()`` resumes).
        stream: Stream responses (default from ``nbagent.configure``).
        store: A path or store object to persist the chat (see ``nbagent.store``).
        id: The chat id (default: a new time-ordered UUID, see
            :func:`~nbagent._base_chat.new_chat_id`).
        display: Render live in a notebook (default from ``nbagent.configure``).
        reasoning: How much the model thinks: ``"low"``, ``"medium"``, ``"high"``
            (an effort) or a thinking budget in tokens (an int, at least 1024;
            Anthropic only); ``None`` (the default) sends nothing and leaves the
            provider's default. Its thinking is kept in the transcript
            (``message.reasoning``) and sent back across tool rounds.
        max_cost_usd: Dollars the whole chat (every turn) may spend: checked
            before each model request, once reached the chat parks with
            ``budget_exhausted`` (default: ``nbagent.configure(max_cost_usd=)``,
            none). ``chat.cost_usd`` is the running total.
        max_total_tokens: Input plus output tokens the whole chat may use,
            checked the same way (``chat.usage.total_tokens``).
        cache: Prompt caching: on Anthropic, mark the system prompt, the tools
            and the latest messages with ``cache_control`` breakpoints (at most
            4) so later requests read them from the cache. OpenAI caches long
            prompts by itself; cached tokens are priced at the cached rate on
            both.
        replay: ``"auto"``: answer a request from the recording of an
            identical one (same model, messages, tools and options), else ask
            the model and record; ``"only"``: never ask the model (a miss
            raises :class:`~nbagent.ReplayMissError` saying what differs);
            ``"off"``: always ask. Default: ``nbagent.configure(replay=)``,
            ``"off"``. Every response is recorded (the process, the store, a
            ``recordings`` directory) whatever this says.
        replay_tools: ``True`` (or tool names): a call whose recorded outcome
            is found (the response was replayed and the call ran before) gets
            that result and the tool does not run again. Default: the configured.
        recordings: A directory where recordings are kept too (one JSON file
            per request): a notebook rerun in a fresh kernel replays from it.
            Default: ``nbagent.configure(recordings=)``.
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        provider: Provider | str | None = None,
        system: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        max_steps: int | None = None,
        on_tool_error: Literal["result", "raise"] = "result",
        stream: bool | None = None,
        store: Any = None,
        id: str | None = None,
        display: bool | None = None,
        reasoning: str | int | None = None,
        max_cost_usd: float | None = None,
        max_total_tokens: int | None = None,
        cache: bool = False,
        replay: str | None = None,
        replay_tools: bool | Collection[str] | None = None,
        recordings: str | os.PathLike[str] | None = None,
    ):
        super().__init__(
            model,
            provider=provider,
            system=system,
            base_url=base_url,
            api_key=api_key,
            max_steps=max_steps,
            on_tool_error=on_tool_error,
            stream=stream,
            id=id,
            display=display,
            reasoning=reasoning,
            max_cost_usd=max_cost_usd,
            max_total_tokens=max_total_tokens,
            cache=cache,
            replay=replay,
            replay_tools=replay_tools,
            recordings=recordings,
        )
        from .log import CallLog

        self._log = CallLog(self.record)
        if store is not None:
            from .store import attach_store

            attach_store(self, store)
        from .notebook import install_auto_display  # no-op outside a Jupyter kernel

        install_auto_display(self)

    # ------------------------------------------------------------------ the log
    @property
    def log(self) -> Any:
        """One row per tool call (a pandas DataFrame); see ``nbagent.log``."""
        return self._log.calls()

    @property
    def steps(self) -> Any:
        """One row per model request (a pandas DataFrame)."""
        return self._log.steps()

    @property
    def messages(self) -> Any:
        """One row per message (a pandas DataFrame); the values are in ``transcript``."""
        return self._log.messages()

    # ---------------------------------------------------------------- the store
    @classmethod
    def load(
        cls,
        chat_id: str,
        *,
        store: Any,
        tools: Sequence[Any] = (),
        provider: Provider | str | None = None,
        model: str | None = None,
        always_allow: Mapping[Any, Callable[[ToolCall], bool]] | None = None,
        **chat_kwargs: Any,
    ) -> Chat:
        """Rebuild a stored chat, in this or any other process, and keep persisting it.

        Tools and callbacks are code, so pass the tools again. Loaded without them,
        the chat can still be read and decided (``approve``/``deny``: a controller
        that decides and leaves the running to a job), but a call ready to run whose
        tool is missing here never runs and is never answered in its place:
        ``complete()`` raises :class:`ToolUnavailableError` and the call keeps its
        decision for a process that has the tool. A gated call is never run ungated. Decisions made
        through the store are applied; a call left running by a process that is
        gone is in doubt (see ``nbagent.store``). The chat's ``always_allow``
        rules come back (revoked ones stay revoked); a rule with a ``when``
        predicate comes back only with its predicate (``always_allow=``): without
        it, it approves nothing, with a warning, and is never widened into an
        unconditional rule.

        Args:
            chat_id: The chat's id (``chat.id``; ``store.chats()`` lists them).
            store: A path or store object.
            tools: The chat's tools.
            provider: Default: the stored provider name.
            model: Default: the stored model.
            always_allow: The ``when`` predicates of the chat's stored conditional
                ``always_allow`` rules, by tool (or tool name).
            **chat_kwargs: Other ``Chat`` arguments (``api_key``, ``base_url``,
                ``system``, ``max_steps``...); stored values are the defaults.

        Raises:
            StoreError: Unknown chat id, or the store cannot be read.
            ValueError: ``always_allow`` names a tool with no stored conditional rule.
        """
        from .store import load_chat

        return load_chat(
            cls,
            chat_id,
            store=store,
            tools=tools,
            provider=provider,
            model=model,
            always_allow=always_allow,
            **chat_kwargs,
        )

    # ---------------------------------------------------------------- forks
    def fork(  # type: ignore[override]  # the base's **wings, narrowed to a Chat's one wing
        self,
        call: ToolCall | str | None = None,
        /,
        *,
        step: int | None = None,
        result: Any = UNSET,
        arguments: Any = UNSET,
        decision: Any = UNSET,
        reason: str | None = None,
        system: Any = UNSET,
        model: Any = UNSET,
        tool_options: Any = UNSET,
        by: str | None = None,
        store: Any = UNSET,
    ) -> Chat:
        """A new chat sharing this one's history up to a point, with at most one thing changed.

        The point is a step (``step=``), a call (``call`` with one of ``result=``,
        ``arguments=`` or ``decision=``), or neither: the whole history as it is now. At a
        step (or no point) at most one of ``system=``, ``model=`` or ``tool_options=``
        changes; with no change the fork is the same history, to run again (another
        sample).

        The fork has this chat's tools, tool options, budgets and approval policies
        (``always_allow``, rules); callbacks and ``chat.on`` subscriptions are not copied.
        It has its own id; ``fork.parent`` says where it came from. This chat is not
        touched (but for :meth:`refresh`, run first: decisions made elsewhere are read
        before the fork is planned). A call approved but not run yet at the fork point is
        asked for again in the fork: an approval runs its call once, in the chat it was
        given in.

        Args:
            call: A call of this chat (or its id): the fork starts at the end of that
                call's round, the other calls of the same response exactly as they are
                here (never run again), the model not asked yet. Takes exactly one of
                ``result=``, ``arguments=`` or ``decision=``.
            step: The chat as it stood when its step ``step`` ended (the step numbers of
                ``chat.steps`` and of the log's ``run_step``). For a model step its
                response (text and calls) is in; the decisions made after it and its
                calls' results are not: driving the fork asks for those approvals again
                and runs the calls then. ``0``: the first prompt only.
            result: With ``call``: the call answered as if its tool had returned this
                value (an approved or ungated call; it does not run in the fork).
            arguments: With ``call``: approved with these arguments instead (recorded as
                an approval's edit, checked against the tool's schema); it runs once the
                fork is driven.
            decision: With ``call``: ``"approved"`` or ``"denied"``, decided the other
                way (or decided, if it waits here). Approved, it runs exactly once when
                the fork is driven; denied, it never runs in the fork.
            reason: Goes with ``decision=`` (a denial's is sent to the model).
            system: The change at the point: a new system prompt, or ``None`` for none.
            model: The change at the point: a model name, or a provider object.
            tool_options: The change at the point: per-tool options, as
                :meth:`with_tool_options` takes them.
            by: Who made the decision (default ``"user"``; ``nbagent.evaluation.sweep``
                gives ``"evaluate"``, so its branches teach ``suggest_policies``
                nothing); goes with ``decision=`` and with ``arguments=`` of a gated
                call.
            store: Where the fork is stored (default: this chat's store, if it has
                one; ``None``: nowhere). A stored fork is a chat of its own with a
                link to its parent: ``Chat.load(fork_id, store=...)`` brings it
                back, ``parent`` included, in any process.

        Returns:
            The fork, a new :class:`Chat`.

        Raises:
            TypeError: Two changes, or a change that does not go with the point.
            ValueError: No such step; a change that changes nothing or cannot be (a
                result for a denied call, a decision for an ungated one).
            DecisionError: An unknown call, arguments the tool refuses or a deny rule
                matches, or another decision for a call a rule decided (a rule's
                decision is final, and the fork keeps this chat's rules).
        """
        return self._fork(
            call,
            {"store": store},
            step=step,
            result=result,
            arguments=arguments,
            decision=decision,
            reason=reason,
            system=system,
            model=model,
            tool_options=tool_options,
            by=by,
        )

    def _spawn(self, p: Plan, store: Any = UNSET, **wings: Any) -> Chat:
        from .store import attach_store, fork_store, hold_lease

        lease = None
        if store is UNSET:  # the parent's store; shared by path or URL, with a lease of its own
            store, lease = fork_store(self)
        try:
            fork = super()._spawn(p, **wings)
            if store is not None:
                attach_store(fork, store, parent=p.parent)
        except BaseException:
            if lease is not None:
                lease(False)
            raise
        if lease is not None:  # closing the parent leaves the fork's store open
            hold_lease(fork, store, lease)
        return fork

    # ------------------------------------------------------- the notebook view
    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        from .notebook import chat_mimebundle

        return chat_mimebundle(self)

    def _ipython_display_(self) -> None:
        from .notebook import display_chat

        display_chat(self)

    def review(
        self,
        *,
        input: Callable[[str], str] | None = None,
        print: Callable[..., Any] | None = None,
    ) -> Message | None:
        """Decide pending approvals at an ``input()`` prompt (a terminal), then continue.

        Answers: approve, deny, edit, always allow, revoke an always-allow,
        skip (not asked again in this review), quit. Closed input stops the
        questions; the review then says which calls still wait and how to
        decide them, and returns normally (see :func:`nbagent.notebook.review`).
        """
        from .notebook import review

        prompt: dict[str, Any] = {}
        if input is not None:
            prompt["input"] = input
        if print is not None:
            prompt["print"] = print
        return review(self, **prompt)


__all__ = ["Chat"]
