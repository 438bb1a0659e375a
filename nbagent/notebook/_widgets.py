"""The action cards: one anywidget model per decision.

Four kinds: ``approval`` (a gated call: the card *is* the call's card, its
HTML in ``value``, with the buttons drawn inside it), ``batch`` (Approve all /
Deny all for the pending calls of one response), ``budget`` (the step budget
ran out: Continue / Stop) and ``input`` (a pending input under its call's card:
an elicitation's form with Accept / Decline / Cancel, a URL with Done /
Decline, a sampling request with Approve / Deny / a reply of one's own,
``ask_user``'s text box or choices, an external call's result with Submit /
Decline).

The browser side (``approval.js``) draws the buttons and, on the first click,
disables every control at once and sends the action,
``{"kind", "reason", "arguments", "data", "nonce"}``, as a custom message (not as a
trait: Jupyter Widgets holds a second state update until the kernel reports the
first one idle, which a kernel running an awaiting cell does not do, so a second
click on a card would never arrive). Setting the ``action`` trait does the same.
The kernel side accepts one action per card while the card is ``pending`` (a second
click, a second view of the same card, or a repeated nonce is ignored), hands
the action to the view's handler, and reflects the outcome in ``state``,
``summary`` and ``error``. The one action a decided card takes is ``revoke``
(take back "Always allow"), once, while ``revocable``. Tests drive a card
exactly as the browser does, with :meth:`ActionCard.click`.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anywidget
import traitlets

_HERE = Path(__file__).parent
_nonces = itertools.count(1)

ActionHandler = Callable[["ActionCard", dict[str, Any]], None]
"""``handler(card, action)``: perform the action; raise :class:`CardError` to show
an error on the card and leave it pending."""


class CardError(Exception):
    """An action could not be applied; the message is shown on the card."""


class ActionCard(anywidget.AnyWidget):
    """A card with buttons that decides something (see the module docstring).

    Traits (all synced):
        kind: ``"approval"``, ``"batch"``, ``"budget"`` or ``"input"``.
        value: The call's card as HTML (approval cards), rendered and escaped by
            ``_cards`` like every entry of the view; the buttons go into its
            ``.nba-controls`` slot.
        state: ``pending`` (buttons live), ``working`` (an action is being
            applied), then ``approved`` / ``denied`` / ``continued`` /
            ``stopped``, ``answered`` / ``declined`` / ``cancelled`` (input cards), or
            ``closed`` (nothing left to decide here).
        tool: Tool name as shown (approval cards): through ``redact_keys``, as a name the
            model or a provider wrote may hold ``password=...``; the card acts on
            ``tool_name``, the name as sent, which stays in Python (never synced).
        arguments: The call's arguments as pretty JSON (the editor's start value), or
            a bounded preview of them when they are huge.
        editable: Whether ``arguments`` is the whole arguments; when it is a preview,
            the card offers no editor (``chat.approve(call, arguments=...)`` still works).
        reason: Why the call needs approval.
        hosted: The provider runs the call (a hosted MCP server): the decision is sent
            to it; no argument editor (the core refuses to edit a hosted call).
        steps: Steps "Continue" adds (budget cards).
        budget: The budget that ran out: ``steps``, ``cost`` or ``tokens`` (budget cards).
        increment: What "Continue" adds, as its label says it (``+25 steps``,
            ``+$0.50``, ``+10,000 tokens``; budget cards).
        count: How many calls "Approve all" / "Deny all" decide (batch cards).
        call_ids: Those calls (batch cards).
        input_id: The pending input's id (input cards).
        input_kind: Its kind: ``elicitation``, ``elicitation_url``, ``sampling``,
            ``ask_user`` or ``external`` (input cards).
        fields: An elicitation's form fields (``_forms.for_browser``; input cards).
        choices: ``ask_user``'s choices, drawn as buttons (input cards).
        revocable: The call was approved by "Always allow", which still holds:
            the card offers to take it back (``revoke``).
        summary: One line saying what was decided.
        note: A note under the card (what taking back "Always allow" did).
        error: The last error (invalid edited arguments...), else empty.
        action: Set by the browser: ``{"kind", "reason", "arguments", "data", "nonce"}``
            (``data``: an input card's answer as entered).
    """

    # As text, not paths: anywidget connects every instance made with a path to the file's
    # change signal (for hot reloading), which keeps each widget, and what its handlers
    # hold (a view, its chat), for the life of the process.
    _esm = (_HERE / "approval.js").read_text(encoding="utf-8")
    _css = (_HERE / "approval.css").read_text(encoding="utf-8")

    kind = traitlets.Unicode("approval").tag(sync=True)
    state = traitlets.Unicode("pending").tag(sync=True)
    tool = traitlets.Unicode("").tag(sync=True)
    call_id = traitlets.Unicode("").tag(sync=True)
    value = traitlets.Unicode("").tag(sync=True)
    arguments = traitlets.Unicode("{}").tag(sync=True)
    editable = traitlets.Bool(True).tag(sync=True)
    reason = traitlets.Unicode("").tag(sync=True)
    hosted = traitlets.Bool(False).tag(sync=True)
    steps = traitlets.Int(0).tag(sync=True)
    budget = traitlets.Unicode("steps").tag(sync=True)
    increment = traitlets.Unicode("").tag(sync=True)
    count = traitlets.Int(0).tag(sync=True)
    call_ids = traitlets.List(traitlets.Unicode()).tag(sync=True)
    input_id = traitlets.Unicode("").tag(sync=True)
    input_kind = traitlets.Unicode("").tag(sync=True)
    fields = traitlets.List(traitlets.Dict()).tag(sync=True)
    choices = traitlets.List(traitlets.Unicode()).tag(sync=True)
    revocable = traitlets.Bool(False).tag(sync=True)
    note = traitlets.Unicode("").tag(sync=True)
    summary = traitlets.Unicode("").tag(sync=True)
    error = traitlets.Unicode("").tag(sync=True)
    action = traitlets.Dict({}).tag(sync=True)

    def __init__(
        self, handler: ActionHandler | None = None, *, tool_name: str | None = None, **kwargs: Any
    ):
        super().__init__(**kwargs)
        self._handler = handler
        # The tool's own name, for always_allow / revoke: kept here, out of the synced
        # state a saved notebook keeps (``tool`` is the name as shown).
        self.tool_name: str = self.tool if tool_name is None else tool_name
        self._lock = threading.Lock()
        self._seen: set[str] = set()
        self.late = False  # the action being handled reached a batch card already closed
        self.on_rendered: Callable[[], Any] | None = None
        # The pages (browser tabs, a page reloaded) that drew the card, by the token each
        # page's script draws once: a second one means the card was drawn anew on a page
        # that cannot receive its output's updates (see ChatView._card_rendered).
        self.pages: set[str] = set()
        self.observe(self._on_action, names="action")
        self.on_msg(self._on_custom_msg)

    def __repr__(self) -> str:
        return f"ActionCard(kind={self.kind!r}, tool={self.tool!r}, state={self.state!r})"

    # ------------------------------------------------------------------ browser
    def _on_custom_msg(self, _widget: Any, content: Any, _buffers: Any) -> None:
        event = content.get("event") if isinstance(content, dict) else None
        if event == "rendered":
            page = content.get("page")
            if isinstance(page, str) and page:
                self.pages.add(page[:64])
            if self.on_rendered is not None:
                self.on_rendered()
        elif event == "action":
            self._apply(content.get("action"))

    def _on_action(self, change: dict[str, Any]) -> None:
        self._apply(change.get("new"))

    def _apply(self, action: Any) -> None:
        """One action from the browser (or :meth:`click`): at most once per nonce, and
        only while the card is pending (a revoke: while it is revocable)."""
        if not isinstance(action, dict) or not action.get("kind"):
            return
        nonce = str(action.get("nonce", ""))
        revoke = action.get("kind") == "revoke"
        with self._lock:
            if nonce in self._seen:
                return  # the same click seen twice
            if revoke:
                if not self.revocable:
                    return  # taken back already (a double click)
                self._seen.add(nonce)
                self.revocable = False
                self.error = ""
            else:
                late = (  # a batch card closed between the click and its arrival: another
                    # card's click, handled first, left one call waiting; "Deny all" still
                    # means that call (and the view says which were decided first)
                    self.kind == "batch"
                    and self.state == "closed"
                    and action.get("kind") in ("approve_all", "deny_all")
                    and bool(self.call_ids)
                )
                if self.state != "pending" and not late:
                    return  # a double click, a second view, or a card already decided
                self.late = late
                self._seen.add(nonce)
                self.state = "working"
                self.error = ""
        try:
            if self._handler is None:
                raise CardError("this card is not connected to a chat any more")
            self._handler(self, action)
        except CardError as exc:
            self.error = str(exc)
            if self.state == "working":
                self.state = "pending"
        except Exception as exc:  # never lose an error in a comm handler
            self.error = f"{type(exc).__name__}: {exc}"
            if self.state == "working":
                self.state = "pending"

    # -------------------------------------------------------------------- tests
    def click(
        self,
        kind: str,
        *,
        reason: str = "",
        arguments: str | dict[str, Any] | None = None,
        data: Any = None,
    ) -> None:
        """Do what a click in the browser does: send the action with a fresh nonce.

        ``kind`` is ``approve``, ``deny``, ``edit``, ``always``, ``revoke``
        (approval cards), ``approve_all``, ``deny_all`` (batch cards),
        ``continue``, ``stop`` (budget cards) or ``accept``, ``decline``, ``cancel``
        (input cards, with the answer as entered in ``data``: a form's values by
        field name, as text, a checkbox's bool, the chosen options; a text box's text).
        """
        import json

        if isinstance(arguments, dict):
            arguments = json.dumps(arguments)
        action = {
            "kind": kind,
            "reason": reason,
            "arguments": arguments if arguments is not None else self.arguments,
            "data": data,
            "nonce": f"py-{next(_nonces)}",
        }
        self._on_custom_msg(self, {"event": "action", "action": action}, [])

    def close_card(self, summary: str = "") -> None:
        """Nothing left to decide here (the turn moved on)."""
        if self.state in ("pending", "working"):
            self.state = "closed"
        if summary:
            self.summary = summary
