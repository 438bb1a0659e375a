"""Durable chats: persist a chat as it runs, resume it anywhere, decide from elsewhere.

::

    from nbagent.store import SQLiteStore

    chat = Chat(model="gpt-4.1-mini", store="agent.db").with_tools(IssueRefund)
    chat.ask("Refund order 42")               # parks: awaiting approval, on disk

    # later, in any process (a script, another notebook, a web form):
    store = SQLiteStore("agent.db")
    store.pending_approvals()                 # every call waiting, in every chat
    store.approve(call_id)                    # or store.deny(call_id, reason="...")

    # after a kernel restart:
    chat = Chat.load(chat_id, store="agent.db", tools=[IssueRefund])
    chat.complete()                           # applies the decision, runs the tool once

**At most once.** Right before a tool runs, its call is claimed in a
transaction (``requested``/``approved`` -> ``running``); only the process that
made that change runs it. A call found ``running`` after its process died is
*in doubt*: a ``CallInDoubt`` event, then the model is told the outcome is
unknown (status ``in_doubt``); it is never rerun silently. A tool declared
``idempotent`` is rerun instead. If two processes drive one chat at once, the
one that loses a claim stops (its step returns ``"busy"`` with a
:class:`StoreConflictWarning`) and must ``Chat.load`` again.

**Many processes, many machines.** :class:`PostgresStore` (``store=
"postgresql://user:password@host/db"``, ``pip install 'nbagent[postgres]'``)
implements the same protocol with the same guarantees on a shared server.

**Decisions as they happen.** ``store.watch(chat_ids)`` returns a
:class:`DecisionWatch` whose ``wait(timeout)`` returns the chats that got a
decision (PostgreSQL pushes it with ``LISTEN``/``NOTIFY``; SQLite is polled);
``follow(store, chat_ids, callback)`` calls back instead. Both are served by
one follower per store object in a process, shared by every consumer.

:class:`Store` is the seam both implement.
"""

from __future__ import annotations

from .._exports import publish as _publish

# Re-exported as `x as x` and left out of __all__: this face's API for the rest of nbagent
# (Chat, the batch), not for users.
from ._attach import attach_batch_chat as attach_batch_chat
from ._attach import attach_store as attach_store
from ._attach import fork_store as fork_store
from ._attach import hold_lease as hold_lease
from ._attach import load_chat as load_chat
from ._attach import open_store
from ._attach import store_of as store_of
from ._follow import Subscription, follow
from ._migrations import SCHEMA_VERSION
from ._postgres import PostgresStore
from ._postgres import is_dsn as is_dsn
from ._protocol import (
    BatchStore,
    ChatInfo,
    Store,
    StoreConflictWarning,
    StoredCall,
    StoredInput,
)
from ._sqlite import SQLiteStore
from ._watch import DecisionWatch

__all__ = [
    "SCHEMA_VERSION",
    "BatchStore",
    "ChatInfo",
    "DecisionWatch",
    "PostgresStore",
    "SQLiteStore",
    "Store",
    "StoreConflictWarning",
    "StoredCall",
    "StoredInput",
    "Subscription",
    "follow",
    "open_store",
]

_publish(__name__, globals(), __all__)
