"""``nbagent.ask_user``: a built-in tool through which the model asks the user a question.

Its calls never run: each parks as a :class:`~nbagent.PendingInput` of kind
``ask_user`` (the question, and the choices if the model gave some) until
``chat.answer(request, text)``; the answer is the call's result.
"""

from __future__ import annotations

from typing import Any, ClassVar

from ._tools import InputAsk, Tool
from ._types import ToolCall


class AskUser(Tool):
    """Ask the user a question and wait for the answer.

    Use it when you need a fact, a preference or a confirmation only the user
    can give. Give choices when the answer is one of a few options.
    """

    name = "ask_user"
    external = True
    parameters: ClassVar[
        dict[str, Any] | None
    ] = {  # written out: deriving it would import pydantic with nbagent
        "type": "object",
        "properties": {
            "question": {
                "type": "string",
                "description": "The question, as the user should read it.",
            },
            "choices": {
                "anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}],
                "default": None,
                "description": "The allowed answers, when the user must pick one.",
            },
        },
        "required": ["question"],
        "additionalProperties": False,
    }

    def execute(self, **kwargs: Any) -> Any:
        """Never called: the question parks until the user answers."""
        raise RuntimeError("ask_user is answered by a person (chat.answer), never run")

    def input_request(self, call: ToolCall) -> InputAsk | None:
        """The question as a pending input: free text, or one of its choices."""
        args = call.effective_arguments
        question = str(args.get("question", ""))
        raw = args.get("choices") or []
        choices = list(dict.fromkeys(str(c) for c in raw)) if isinstance(raw, list) else []
        content: dict[str, Any] = {"question": question}
        schema: dict[str, Any] = {"type": "string"}
        if choices:
            content["choices"] = choices
            schema["enum"] = choices
        return "ask_user", question, content, schema


ask_user = AskUser()
"""The built-in tool: ``chat.with_tools(nbagent.ask_user)`` lets the model ask the user.

Its calls park as pending inputs of kind ``ask_user``; answer with
``chat.answer(chat.pending_inputs[0], "text")`` (one of ``request.choices`` when
the model gave choices), or ``chat.decline(request, reason)``.
"""

__all__ = ["AskUser", "ask_user"]
