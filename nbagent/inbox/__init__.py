"""The approvals inbox: every pending approval across chats, decided from one place.

``nbagent.inbox(store_or_chats)`` lists the calls waiting for a decision in
live chats, in a store, or in a batch's chats; filter them by tool, server
and argument values; approve or deny a selection, or everything a filter
matches (the widget previews exactly what that covers and asks to confirm).
In a notebook it is a widget that keeps itself fresh; everywhere it is a
Python API: ``inbox.pending`` (a DataFrame), ``inbox.filter(...)``,
``inbox.preview(...)``, ``inbox.approve(...)``, ``inbox.deny(..., reason=...)``,
``inbox.refresh()``.

Importing this package is cheap: pandas is imported by the DataFrames, and
anywidget by the widget, on first use.
"""

from __future__ import annotations

from .._exports import publish as _publish
from ._filter import Filter
from ._inbox import Inbox, inbox

__all__ = ["Filter", "Inbox", "inbox"]

_publish(__name__, globals(), __all__)
