"""Compare runs: two or more chats side by side, aligned by step, and their differences.

::

    fork = chat.fork(chat.tool_calls[0], decision="approved")
    fork.complete()
    diff = nbagent.compare(chat, fork)     # shows both runs side by side in the cell
    diff                                    # step, field, a, b: what differs

Works for forks (their shared history folds into one row) and for the same
prompt run on different models or providers. Runs are aligned by model step
(the k-th model response of each run, see :mod:`nbagent.comparison._runs`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .._exports import publish
from ._runs import Run, differences, run_of

if TYPE_CHECKING:
    import pandas as pd

    from .._base_chat import BaseChat


class Comparison:
    """Runs side by side: displays as HTML (Markdown and text as fallbacks).

    Attributes:
        runs: The runs, in the order given.
    """

    def __init__(self, runs: Sequence[Run]):
        self.runs = tuple(runs)

    @property
    def differences(self) -> pd.DataFrame:
        """One row per (step, field) that differs: ``step``, ``field``, one column per run."""
        return differences(self.runs)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        from ._render import comparison_bundle  # the view's renderers: only when shown

        return comparison_bundle(self.runs)

    def __repr__(self) -> str:
        from ._render import comparison_text

        return comparison_text(self.runs)


def compare(
    *chats: BaseChat,
    names: Sequence[str] | None = None,
    display: bool | None = None,
) -> pd.DataFrame:
    """Show runs side by side in the cell and return what differs between them.

    Each run's model steps are read off ``chat.events`` and aligned by step
    (the k-th model response of each run in row k). Per step: the prompt, the
    model's text, each call with its arguments, decision and result, the
    stop reason, tokens, cost and latency; a field that differs is
    highlighted, and the leading steps every run shares (a fork's history)
    fold into one row.

    Args:
        *chats: Two or more chats (forks, or the same prompt on other models
            or providers; loaded chats too).
        names: A name per run (default ``a``, ``b``, ``c``...): the header of its
            column here and of its column in the DataFrame.
        display: Show the comparison (default: inside a notebook kernel only).
            ``Comparison(...)`` is what is shown; ``nbagent.comparison.Comparison``.

    Returns:
        A pandas DataFrame with one row per (``step``, ``field``) that differs
        and one column per run holding its value (``None`` where the run has no
        such step or call). Fields: ``prompt``, ``model``, ``text``,
        ``stop_reason``, ``call i``, ``call i decision``, ``call i result``,
        ``replayed`` (answered from a recording), ``input_tokens``,
        ``output_tokens``, ``cost_usd``, ``latency_ms`` (whole milliseconds:
        finer differences are noise).

    Raises:
        TypeError: Fewer than two chats, or something that is not a chat (a
            DataFrame of a batch's results: load its chats by ``chat_id``); ``names``
            a string.
        ValueError: ``names`` of the wrong length, or not unique.
    """
    for c in chats:
        if _is_frame(c):
            raise TypeError(
                "compare() takes chats, got a DataFrame: load its chats by chat_id and pass "
                "them, e.g. nbagent.compare(*[Chat.load(i, store=store) for i in "
                'df["chat_id"]])'
            )
        if not hasattr(c, "events") or not hasattr(c, "fork"):
            raise TypeError(f"compare() takes chats, got {type(c).__name__}")
    if len(chats) < 2:
        raise TypeError(f"compare() takes two or more chats, got {len(chats)}")
    if names is None:
        names = [_letters(i) for i in range(len(chats))]
    elif isinstance(names, str | bytes):
        raise TypeError(
            f"names: one name per chat, as a list (names=['old', 'new']), got the string {names!r}"
        )
    names = [str(n) for n in names]
    if len(names) != len(chats):
        raise ValueError(f"names: {len(names)} name(s) for {len(chats)} chats")
    if len(set(names)) != len(names) or {"step", "field"} & set(names):
        raise ValueError(f"names must be unique and not 'step' or 'field', got {names}")
    comparison = Comparison([run_of(c, n) for c, n in zip(chats, names, strict=True)])
    if display is None:
        from .._notice import in_kernel

        display = in_kernel()
    if display:
        from IPython.display import display as show

        show(comparison)
    return comparison.differences


def _is_frame(value: Any) -> bool:
    """A pandas DataFrame (told without importing pandas)."""
    return type(value).__name__ == "DataFrame" and type(value).__module__.startswith("pandas")


def _letters(i: int) -> str:
    letters = ""
    i += 1
    while i:
        i, r = divmod(i - 1, 26)
        letters = chr(ord("a") + r) + letters
    return letters


__all__ = ["Comparison", "compare"]

publish(__name__, globals(), __all__)
