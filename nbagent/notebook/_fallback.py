"""A chat's static forms: the bundles its views show outside a live widget.

``text/html``, ``text/markdown`` and ``text/plain`` of a chat (or one turn):
what a view's output carries beside its widget and alone once it is static,
what its twin shows after the kernel is gone (:func:`twin_bundle`, with how to
decide a call still waiting), and what a kernel without ipywidgets shows
(:func:`static_view`). How they are displayed and kept up to date is
:mod:`nbagent._display`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .._display import LiveOutput, mark_dirty
from .._html import esc, md_inline, printable
from .._secrets import redact_keys
from .._types import short_id
from ._render import conversation_html, conversation_markdown, conversation_text, fence_block
from ._state import BudgetEntry, CallEntry, ChatState, Entry, state_for

if TYPE_CHECKING:
    from .._base_chat import BaseChat as Chat


def bundle_for(
    state: ChatState,
    turn: int | None = None,
    *,
    skip: frozenset[str] = frozenset(),
    phase: str | None = None,
    title: str = "",
    short: bool = True,
) -> dict[str, str]:
    """The three static representations of a chat (or one turn of it).

    One of them is whole: ``text/html``, what GitHub, nbviewer and JupyterLab without a
    kernel show, its older entries folded and saved folded (a finished call as its one
    line). ``text/markdown`` and ``text/plain`` (a terminal, ``make demo``) say how many
    entries fold and show the rest, so a saved notebook holds one copy of a long chat,
    not three.

    Args:
        skip: Keys of entries not to show (a continuation view shows only what
            happened from where it took over).
        phase: Say this on the status line instead of the state's phase
            ("continued in cell [7]").
        title: A first line (where a continuation view comes from).
        short: Leave the folded entries out of ``text/markdown`` and ``text/plain``
            (``False``: all of them, as ``chat``'s own repr prints them).
    """
    with state.lock:
        entries: list[Entry] = [e for e in state.entries_for(turn) if e.key not in skip]
        totals = state.totals_for(turn)
        if phase is not None:
            totals = dataclasses.replace(totals, phase=phase)
        text = conversation_text(entries, totals, short=short)
        markdown = conversation_markdown(entries, totals, short=short)
        if title:
            text = f"{printable(title)}\n{text}"
            markdown = f"*{md_inline(title)}*\n\n{markdown}"
        return {
            "text/html": conversation_html(entries, totals, title=title),
            "text/markdown": markdown,
            "text/plain": text,
        }


def orphan_words(chat: Chat, pending: Sequence[Entry]) -> tuple[str, list[str], str]:
    """What to tell someone who reopens the notebook with a new kernel.

    Returns a sentence, the code that decides the call, and a last sentence, as plain text
    (control and invisible characters as escapes); every name and id in the code is a
    Python string literal (:func:`_literal`), whatever the provider's id holds.
    """
    calls = [e for e in pending if isinstance(e, CallEntry)]
    # Tool names keep their spelling (never capitalized); the verb agrees with the count.
    # A name the model wrote is shown as it reads it (``password=***``), as on the card.
    names = [f"{redact_keys(e.r.tool)} ({e.r.call_id})" for e in calls]
    if not names:
        subject = "A step budget was"
    elif len(names) == 1:
        subject = f"The call {names[0]} was"
    else:
        subject = f"The calls {', '.join(names[:-1])} and {names[-1]} were"
    lead = (
        f"{subject} waiting for a decision in a kernel session that has ended (the notebook "
        "was reopened, or its kernel restarted): its buttons can no longer reach the chat."
    )
    location = _store_location(chat)
    first = calls[0].r.call_id if calls else "<call id>"
    if location is None:
        return (
            lead,
            [],
            "This chat had no store, so its state ended with that kernel: run the cells "
            'again to ask anew. With Chat(store="chats.db"), pending decisions outlive the '
            "kernel and Chat.load(...) then chat.approve(...) decide them.",
        )
    q, call = _literal, _literal(first)
    code = [
        f"chat = Chat.load({q(chat.id)}, store={q(location)}, tools=[...])",
        f'chat.approve({call})  # or chat.deny({call}, reason="...")',
        "chat.complete()",
    ]
    tail = f"Or from any process: open_store({q(location)}).approve({call})."
    return printable(lead), code, tail


def _literal(text: str) -> str:
    """``text`` as a double-quoted Python string literal that reads as what it holds: JSON's
    escapes (a quote, a backslash, a newline) and :func:`printable`'s (``\\x1b``, ``\\u202e``)
    are Python's too, so the code runs with exactly ``text``, and shows no control or
    invisible character."""
    return printable(json.dumps(text, ensure_ascii=False))


def _store_location(chat: Chat) -> str | None:
    for ext in chat.extensions:
        location = getattr(getattr(ext, "store", None), "location", None)
        if isinstance(location, str):
            return location
    return None


def twin_bundle(
    chat: Chat,
    state: ChatState,
    turn: int | None,
    *,
    skip: frozenset[str] = frozenset(),
    title: str = "",
) -> dict[str, str]:
    """What a view that waits for a decision leaves for a reopened notebook (its twin)."""
    data = bundle_for(state, turn, skip=skip, title=title)
    with state.lock:
        pending = [
            e
            for e in state.entries_for(turn)
            if isinstance(e, (CallEntry, BudgetEntry)) and e.pending and e.key not in skip
        ]
    lead, code, tail = orphan_words(chat, pending)
    block = "\n".join(code)
    notice = f"<div><b>{esc(lead)}</b></div>"
    if code:
        notice += f'<div>To decide it now:</div><pre class="nba-json">{esc(block)}</pre>'
    notice += f"<div>{esc(tail)}</div>"
    data["text/html"] += f'<div class="nba-chat nba-orphan">{notice}</div>'
    data["text/plain"] += "\n".join(["", lead, *(f"    {line}" for line in code), tail])
    fence = f"\n\n{fence_block(block, 'python')}" if code else ""
    data["text/markdown"] += f"\n\n> **{md_inline(lead)}**{fence}\n\n{md_inline(tail)}"
    return data


def running_twin_bundle(
    chat: Chat,
    state: ChatState,
    turn: int | None,
    running: Sequence[CallEntry],
    *,
    skip: frozenset[str] = frozenset(),
    title: str = "",
) -> dict[str, str]:
    """What a view leaves for a kernel that ends while ``running`` run (its twin then): the
    transcript, and that their outcome is unknown (never "awaiting approval": they were
    decided, and may have done what they do)."""
    data = bundle_for(state, turn, skip=skip, title=title)
    names = [f"{redact_keys(e.r.tool)} ({e.r.call_id})" for e in running]
    what = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
    lead = printable(
        f"The kernel session ended while {what} ran (the notebook was reopened, or its kernel "
        "restarted): whether it finished is unknown."
    )
    location = _store_location(chat)
    if location is None:
        tail = (
            "This chat had no store, so its state ended with that kernel. Check whether the "
            "call took effect before running the cells again: they would ask anew."
        )
    else:
        tail = printable(
            f"Its store ({_literal(location)}) keeps the call as in doubt, never run again by "
            f"itself: Chat.load({_literal(chat.id)}, store={_literal(location)}, tools=[...]) "
            "shows it; check whether it took effect before going on."
        )
    notice = f"<div><b>{esc(lead)}</b></div><div>{esc(tail)}</div>"
    notice = f'<div class="nba-chat nba-orphan">{notice}</div>'
    data["text/html"] += notice
    data["text/plain"] += f"\n{lead}\n{tail}"
    data["text/markdown"] += f"\n\n> **{md_inline(lead)}**\n\n{md_inline(tail)}"
    return data


def chat_mimebundle(chat: Chat) -> dict[str, str]:
    """``Chat._repr_mimebundle_``: the whole conversation as HTML, markdown and text (all of
    it: what a terminal prints for ``chat``)."""
    data = bundle_for(_state(chat), short=False)
    data["text/plain"] = f"{printable(repr(chat))}\n{data['text/plain']}"
    return data


def _state(chat: Chat) -> ChatState:
    """The shared display state if the chat has one, else a snapshot (no subscription)."""
    from ._state import existing_state

    state = existing_state(chat)
    return state if state is not None else ChatState.from_chat(chat)


def static_view(chat: Chat, turn: int | None = None) -> LiveOutput:
    """Show the static bundle of ``chat`` (or one turn), refreshed as the chat settles.

    What a kernel without ipywidgets shows; also what a headless run saves.
    """
    state = state_for(chat)
    output = LiveOutput(f"nbagent-{short_id(chat.id)}", lambda: bundle_for(state, turn), twin=False)

    def on_change(changed: list[Entry], settled: bool) -> None:
        if turn is not None and any(e.turn > turn for e in changed):
            state.remove_listener(on_change)
        elif settled:
            output.refresh()
        else:
            mark_dirty(output)

    state.add_listener(on_change)
    output.show()
    return output
