"""A failed model request reads as one clean error in a cell; the traceback is on demand.

In-process through IPython's own shell (what a kernel runs), and with a real
kernel through nbclient, both against the loopback fake server with the real
OpenAI SDK client.
"""

from __future__ import annotations

import json
import re
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbclient
import nbformat
import pytest

from nbagent import AuthenticationError, Chat, ProviderConnectionError, ServerError
from nbagent.providers import OpenAIProvider
from nbagent.testing import FakeLLMServer, Turn

KEY = "sk-test-SECRET-0123456789"
ANSI = re.compile(r"\x1b\[[0-9;]*m")
INTERNALS = ("httpx", "httpcore", "_base_client", "site-packages", "Traceback")


@pytest.fixture
def shell(capsys: pytest.CaptureFixture[str]) -> Iterator[Any]:
    interactiveshell = pytest.importorskip("IPython.core.interactiveshell")
    shell = interactiveshell.InteractiveShell.instance()
    try:
        yield shell
    finally:
        interactiveshell.InteractiveShell.clear_instance()


def _provider(url: str) -> OpenAIProvider:
    return OpenAIProvider(
        "gpt-4.1-mini", base_url=url, api_key=KEY, compatible=False, max_retries=0
    )


def _run(shell: Any, capsys: pytest.CaptureFixture[str], source: str) -> tuple[Any, str]:
    capsys.readouterr()
    result = shell.run_cell(source)
    out = capsys.readouterr()
    return result, ANSI.sub("", out.out + out.err)


def _ask_in_a_cell(
    shell: Any, capsys: pytest.CaptureFixture[str], turn: Turn
) -> tuple[Chat, Any, str, list[str]]:
    """``chat.ask('hi')`` run as a cell, the server answering ``turn``: the chat, the cell's
    result, what it showed, and its lines that are not blank."""
    with FakeLLMServer([turn]) as server:
        chat = Chat(provider=_provider(server.openai_base_url), display=False)
        shell.user_ns["chat"] = chat
        result, shown = _run(shell, capsys, "chat.ask('hi')")
    return chat, result, shown, [line for line in shown.splitlines() if line.strip()]


@pytest.mark.parametrize(
    ("turn", "cls", "said", "chained"),
    [
        (
            Turn(status=500, error={"message": "upstream broke"}),
            ServerError,
            "upstream broke",
            True,
        ),
        (  # the SDK's error shows the key: it is not chained (see providers/_errors.py)
            Turn(status=401, error={"message": f"Incorrect API key provided: {KEY}."}),
            AuthenticationError,
            "Incorrect API key provided: ***",
            False,
        ),
    ],
)
def test_a_cell_shows_one_line_and_the_traceback_is_on_demand(
    shell: Any,
    capsys: pytest.CaptureFixture[str],
    turn: Turn,
    cls: type,
    said: str,
    chained: bool,
) -> None:
    chat, result, shown, lines = _ask_in_a_cell(shell, capsys, turn)
    assert isinstance(result.error_in_exec, cls)
    assert lines == [
        f"{cls.__name__}: {result.error_in_exec}",
        "(the full traceback: print(chat.last_error.details()))",
    ]
    assert said in lines[0] and KEY not in shown
    assert not any(word in shown for word in INTERNALS)
    # On demand: the whole chain, through the SDK, with no key in it.
    assert chat.last_error is result.error_in_exec
    _, details = _run(shell, capsys, "print(chat.last_error.details())")
    assert details.startswith("Traceback") and "_drive_sync" in details  # through the loop
    assert details.rstrip().endswith(str(result.error_in_exec))
    assert ("The above exception was the direct cause" in details) is chained
    assert ("_base_client" in details) is chained  # the openai SDK's own frames
    assert KEY not in details


def test_a_message_with_a_servers_traceback_in_it_still_shows_as_one_line(
    shell: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """A gateway's 500 whose message holds its own traceback (or a long body) filled five
    lines and 2,900 characters of the cell: one line, the rest in ``details()``."""
    message = (
        "Upstream failure.\nTraceback (most recent call last):\n"
        '  File "gateway.py", line 12, in handle\nValueError: boom ' + "x" * 3000
    )
    chat, result, _, lines = _ask_in_a_cell(
        shell, capsys, Turn(status=500, error={"message": message})
    )
    assert isinstance(result.error_in_exec, ServerError)
    assert lines == [
        "ServerError: openai: Error code: 500 - Upstream failure. …",
        "(the whole message and traceback: print(chat.last_error.details()))",
    ]
    assert "gateway.py" in chat.last_error.details()  # type: ignore[union-attr]


def test_a_connection_failure_hides_httpx_and_httpcore(
    shell: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    chat = Chat(provider=_provider(f"http://127.0.0.1:{port}/v1"), display=False)
    shell.user_ns["chat"] = chat
    result, shown = _run(shell, capsys, "chat.ask('hi')")
    assert isinstance(result.error_in_exec, ProviderConnectionError)
    assert len([line for line in shown.splitlines() if line.strip()]) == 2
    assert not any(word in shown for word in INTERNALS)
    details = chat.last_error.details()  # type: ignore[union-attr]
    assert "httpcore" in details and "httpx" in details


def test_caught_elsewhere_the_hint_names_sys_last_value(
    shell: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from nbagent.providers import ModelRequest

    with FakeLLMServer([Turn(status=503)]) as server:
        shell.user_ns["provider"] = _provider(server.openai_base_url)
        shell.user_ns["ModelRequest"] = ModelRequest
        result, shown = _run(shell, capsys, "provider.complete(ModelRequest(()))")
    assert isinstance(result.error_in_exec, ServerError)
    assert shown.strip().splitlines()[-1] == "(the full traceback: print(sys.last_value.details()))"
    assert sys.last_value is result.error_in_exec


# ------------------------------------------------------------------ a real kernel
@pytest.mark.notebook
@pytest.mark.parametrize(
    ("status", "message", "said"),
    [
        (500, "upstream broke", "upstream broke (server_error)"),
        (
            401,
            f"Incorrect API key provided: {KEY}",
            "Incorrect API key provided: *** (invalid_request_error); check the API key "
            "(argument api_key= or the OPENAI_API_KEY environment variable)",
        ),
    ],
)
def test_the_saved_notebook_keeps_the_one_line_error(
    tmp_path: Path, status: int, message: str, said: str
) -> None:
    error = {"message": message}
    with FakeLLMServer([Turn(status=status, error=error)]) as server:
        nb = nbformat.v4.new_notebook()
        nb.cells = [
            nbformat.v4.new_code_cell(
                "from nbagent import Chat\n"
                "from nbagent.providers import OpenAIProvider\n"
                f"provider = OpenAIProvider('gpt-4.1-mini', base_url={server.openai_base_url!r},"
                f" api_key={KEY!r}, compatible=False, max_retries=0)\n"
                "chat = Chat(provider=provider)"
            ),
            nbformat.v4.new_code_cell("chat.ask('What is the weather in Paris?')"),
            nbformat.v4.new_code_cell("print(chat.last_error.details())"),
        ]
        nbclient.NotebookClient(
            nb,
            timeout=120,
            kernel_name="python3",
            allow_errors=True,
            resources={"metadata": {"path": str(tmp_path)}},
        ).execute()
    errors = [o for o in nb.cells[1].outputs if o.output_type == "error"]
    (err,) = errors
    name = "ServerError" if status == 500 else "AuthenticationError"
    assert err.ename == name
    shown = [ANSI.sub("", line) for line in err.traceback]
    assert shown == [
        f"{name}: openai: Error code: {status} - {said}",
        "(the full traceback: print(chat.last_error.details()))",
    ]
    # the view above it says the same in one line, and nothing anywhere shows the key
    view = next(o for o in nb.cells[1].outputs if "text/plain" in o.get("data", {}))
    assert f"{name}: openai: Error code: {status}" in view.data["text/plain"]
    assert KEY not in json.dumps([c.outputs for c in nb.cells[1:]])
    printed = "".join(o.get("text", "") for o in nb.cells[2].outputs)
    assert printed.startswith("Traceback") and f"Error code: {status}" in printed
    assert ("_base_client" in printed) is (status == 500)  # chained unless it showed the key
