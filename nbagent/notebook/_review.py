"""``chat.review()``: decide pending approvals at a prompt (a terminal, or no widgets).

For each pending call: show it, ask, record the decision; then continue the
loop (``chat.complete()``) and repeat while new approvals come up. The answers:

- ``a`` approve, ``d`` deny (then an optional reason), ``e`` edit the
  arguments (JSON) and approve;
- ``l`` always allow the tool (this session), ``r`` revoke an always-allow
  (offered while there is one: ``chat.always_allowed``);
- ``s`` (or an empty line) skip: not in this review; the call stays pending
  and is not asked again until the next ``review()``;
- ``q`` quit: no more questions.

Closed input (stdin at its end, ``input()`` raising ``EOFError``) is a quit,
not an error; so is a front end that cannot answer ``input()`` at all (a
notebook run by nbclient or papermill: IPython's ``StdinNotImplementedError``).
Either way the decisions already made are carried out (the loop continues up
to the next approval), and the review ends by saying which calls still wait
and how to decide them. It returns normally.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from .._errors import redact_keys
from .._html import json_preview, printable, redacted, unredacted
from ._state import deciding_by_hand

if TYPE_CHECKING:
    from .._base_chat import BaseChat as Chat
    from .._types import Message, ToolCall

_CHOICES = "[a]pprove, [d]eny, [e]dit arguments, a[l]ways allow this tool, [s]kip, [q]uit"
_REVOKE = ", [r]evoke always-allow"


class _Stop(Exception):
    """No more questions: the user quit, or there is no more input (``why`` says which)."""

    def __init__(self, why: str = ""):
        self.why = why


def review(
    chat: Chat,
    *,
    input: Callable[[str], str] = input,
    print: Callable[..., Any] = print,
) -> Message | None:
    """Answer pending approvals at a prompt (terminal, or any front end without widgets).

    See the module docstring for the answers. What is printed shows control
    characters as escapes (an escape sequence in a model's arguments or answer
    is seen, not run by the terminal), and huge arguments as a bounded preview
    (``chat.tool_calls`` keeps them whole).

    Args:
        chat: The chat whose pending approvals to decide.
        input: Asks one question, returns the answer (``EOFError``: no more input).
        print: Prints a line.

    Returns:
        The chat's last assistant message.
    """

    def say(*values: Any) -> None:  # every line printed here goes through this
        print(*(printable(str(v)) for v in values))

    def ask(prompt: str) -> str:
        try:
            return input(prompt)
        except EOFError:
            raise _Stop("No more input (stdin is closed)") from None
        except NotImplementedError as exc:  # IPython's StdinNotImplementedError (nbclient)
            if type(exc).__name__ != "StdinNotImplementedError":
                raise
            raise _Stop("No input here (this front end cannot answer input())") from None

    skipped: set[str] = set()
    stop: _Stop | None = None
    if not chat.pending_approvals:
        say("No call is waiting for approval.")
    while stop is None:
        todo = [c for c in chat.pending_approvals if c.id not in skipped]
        if not todo:
            break
        decided = False
        for call in todo:
            if not call.pending_approval:  # decided meanwhile (an always-allow)
                continue
            try:
                answer = _ask_about(chat, call, ask, say)
            except _Stop as exc:
                stop = exc
                break
            if answer == "skipped":
                skipped.add(call.id)
            else:
                decided = True
        if not decided:
            break
        chat.complete()  # what was decided is carried out, even when the review stops here
    if stop is not None:
        say(f"\n{stop.why}: stopped asking." if stop.why else "\nStopped asking.")
    reply = chat.last_assistant_message
    if reply is not None and getattr(reply, "content", None):
        say(f"\nAssistant: {redact_keys(str(reply.content))}")
    _still_pending(chat, say)
    return reply


def _choices(chat: Chat) -> str:
    return _CHOICES + (_REVOKE if chat.always_allowed else "")


def _ask_about(
    chat: Chat, call: ToolCall, ask: Callable[[str], str], say: Callable[..., None]
) -> Literal["decided", "skipped"]:
    """Ask about one call until it is decided or skipped (``_Stop``: quit or no input)."""
    # A name the model (or a provider) wrote is printed as the model reads it
    # (``password=***``), and so is the reason, which names the call; the call keeps its name.
    reason = redact_keys(call.approval.reason) if call.approval else ""
    label = f"{call.server} · {redact_keys(call.name)}" if call.server else redact_keys(call.name)
    say(f"\n{label} ({call.id}) needs approval" + (f": {reason}" if reason else ""))
    say(json_preview(redacted(call.arguments))[0])  # secrets as *** (an edit is typed anew)
    while True:
        if not call.pending_approval:  # decided meanwhile (elsewhere, or an always-allow)
            return "decided"
        answer = ask(f"{_choices(chat)}? ").strip().lower()
        # A person decides here: a view of the chat says "by you" for a decision recorded
        # inside deciding_by_hand (a skip, a quit, a refused edit mark nothing).
        try:
            if answer in ("a", "approve", "y", "yes"):
                with deciding_by_hand(chat, call.id):
                    chat.approve(call)
            elif answer in ("d", "deny", "n", "no"):
                why = ask("reason (optional): ").strip() or None
                with deciding_by_hand(chat, call.id):
                    chat.deny(call, reason=why)
            elif answer in ("e", "edit"):
                text = ask("arguments as JSON: ")
                try:
                    edited = json.loads(text)
                except ValueError as exc:
                    say(f"not valid JSON: {exc}")
                    continue
                if not isinstance(edited, dict):
                    say("the arguments must be a JSON object")
                    continue
                try:  # a value left as printed ("***") is the call's own, as on a card
                    edited = unredacted(edited, call.arguments)
                except ValueError as exc:
                    say(str(exc))
                    continue
                with deciding_by_hand(chat, call.id):
                    chat.approve(call, arguments=edited)
            elif answer in ("l", "always"):
                chat.always_allow(call.name)
                say(
                    f"{redact_keys(call.name)}: always allowed from now on; [r] in a review or "
                    f"{_revoke_code(chat, call.name)} takes it back."
                )
            elif answer in ("r", "revoke") and chat.always_allowed:
                _revoke(chat, ask, say)
                continue
            elif answer in ("s", "skip", ""):
                return "skipped"
            elif answer in ("q", "quit"):
                raise _Stop()
            else:
                say(f"please answer one of: {_choices(chat)}")
                continue
        except _Stop:
            raise
        except Exception as exc:  # DecisionError: invalid edit, decided elsewhere...
            say(f"{type(exc).__name__}: {exc}")
            continue
        return "decided"


def _revoke_code(chat: Chat, name: str) -> str:
    """The code that takes back "always allow" for ``name``: by its name, or where that
    would print a secret (a name the model wrote), by its place in ``chat.always_allowed``."""
    if redact_keys(name) == name or name not in chat.always_allowed:
        return f"chat.revoke({redact_keys(name)!r})"
    return f"chat.revoke(chat.always_allowed[{chat.always_allowed.index(name)}])"


def _revoke(chat: Chat, ask: Callable[[str], str], say: Callable[..., None]) -> None:
    allowed = chat.always_allowed
    listed = ", ".join(redact_keys(a) for a in allowed)
    name = allowed[0]
    if len(allowed) > 1:
        typed = ask(f"revoke which ({listed})? ").strip()
        # a name as listed (``password=***``) names the rule it shows, if it shows one only
        meant = [a for a in allowed if a == typed]
        meant = meant or [a for a in allowed if redact_keys(a) == typed]
        if len(meant) != 1:
            say(f"{redact_keys(repr(typed))} is not always allowed (always allowed: {listed})")
            return
        name = meant[0]
    chat.revoke(name)
    say(f"{redact_keys(name)}: no longer always allowed; its next calls ask again.")


def _still_pending(chat: Chat, say: Callable[..., None]) -> None:
    """Say which calls still wait for a decision, and how to decide them."""
    pending = chat.pending_approvals
    allowed = chat.always_allowed
    if allowed:
        say(
            f"Always allowed (run without asking): {', '.join(redact_keys(a) for a in allowed)}; "
            f"{_revoke_code(chat, allowed[0])} stops that."
        )
    if not pending:
        return
    n = len(pending)
    say(f"{n} call{'s' if n != 1 else ''} still waiting for approval:")
    for c in pending:
        say(f"  {f'{c.server} · ' if c.server else ''}{redact_keys(c.name)} ({c.id})")
    first = pending[0].id
    say(
        f"Decide with chat.approve({first!r}) or chat.deny({first!r}, reason=...), then "
        "chat.complete(); or run chat.review() again."
    )
