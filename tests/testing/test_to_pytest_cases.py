"""to_pytest on the chats a first export got wrong: each exported file runs with pytest
in a subprocess, in a clean directory (no store, no network, no API key, nothing in
memory), and must pass; a change to what it replays must make it fail.

- a chat (or a fork) that stops waiting for a decision, or after deciding without
  carrying on, exports a test that stops there too;
- ``ask_user`` and external tools: the recorded answers are given again, and the
  test imports public names only;
- a structured answer (``output=``): its type is imported, or to_pytest refuses;
- a hosted MCP server is exported without its secrets, with its decisions;
- any tool name (``get-x`` beside ``get_x``, ``3d_render``, a tool called ``chat``
  or ``answer`` or ``Path``) gives a file that runs;
- who decided (a denial's ``by``, which the model reads) is made again.
"""

from __future__ import annotations

import importlib
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _exported import run_exported

import nbagent
from nbagent import Chat, HostedMCP, OpenAIProvider, tool
from nbagent._replay import PROCESS
from nbagent.testing import (
    FakeLLMServer,
    ScriptedProvider,
    Turn,
    call_tools,
    mcp_approval_request,
    mcp_call,
    mcp_list_tools,
    replay_turns,
    reply,
    to_pytest,
)

MODULE = "x18_cases_tools"

TOOLS = '''
import dataclasses

from pydantic import BaseModel

from nbagent import Tool, tool


@tool(requires_approval=True)
def refund(order_id: int) -> str:
    """Issue a refund."""
    return f"refunded {order_id}"


@tool(external=True)
def sign(party: str) -> str:
    """Have the contract signed by a person."""


@tool
def answer(question: str) -> str:
    """Answer from the FAQ."""
    return "FAQ says: 42"


@tool
def chat(message: str) -> str:
    """Send a message to support."""
    return "sent"


@tool
def Path(where: str) -> str:
    """A path between two places."""
    return "north, then east"


class Chat(Tool):
    """Open a support chat."""

    name = "open_chat"

    def execute(self, topic: str) -> str:
        return f"chat about {topic} opened"


class City(BaseModel):
    city: str
    temp: float
'''


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A directory with an importable tools module, on sys.path."""
    PROCESS.clear()
    src = tmp_path / "project"
    src.mkdir()
    (src / f"{MODULE}.py").write_text(TOOLS)
    monkeypatch.syspath_prepend(str(src))
    sys.modules.pop(MODULE, None)
    yield src
    sys.modules.pop(MODULE, None)
    PROCESS.clear()


def _tools() -> Any:
    return importlib.import_module(MODULE)


def _clean_copy(written: Path) -> Path:
    """The exported file, its recordings and the tools module, alone in a new directory."""
    clean = written.parent.parent / f"clean_{written.stem}"
    clean.mkdir()
    shutil.copy(written, clean)
    recordings = written.with_name(f"{written.stem}_recordings")
    shutil.copytree(recordings, clean / recordings.name)
    shutil.copy(written.parent / f"{MODULE}.py", clean)
    return clean / written.name


def _exported(chat: Chat, project: Path, stem: str) -> Path:
    written = to_pytest(chat, project / f"{stem}.py")
    PROCESS.clear()
    return _clean_copy(written)


def _passes(test: Path) -> str:
    run = run_exported(test)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 passed" in run.stdout
    return test.read_text()


def _fails(test: Path, source: str, *expected: str) -> str:
    test.write_text(source)
    run = run_exported(test)
    assert run.returncode == 1, run.stdout + run.stderr
    for text in expected:
        assert text in run.stdout, run.stdout
    return run.stdout


# --------------------------------------------------------------- where the run stopped
def test_a_chat_waiting_for_a_decision_exports_a_test_that_stops_there(project: Path) -> None:
    chat = Chat(provider=ScriptedProvider([call_tools(("refund", {"order_id": 42}, "r1"))]))
    chat.with_tools(_tools().refund)
    chat.ask("Refund order 42")
    assert chat.status == "awaiting_approval"
    test = _exported(chat, project, "test_waiting")
    source = _passes(test)
    assert "EXPECTED_STATUS = 'awaiting_approval'" in source
    assert "('refund', {'order_id': 42}, 'awaiting_approval')" in source
    # it checks where it stopped: a run that went on would not pass
    changed = source.replace("STATUS = 'awaiting_approval'", "STATUS = 'complete'")
    _fails(test, changed, "assert chat.status == EXPECTED_STATUS")


def test_a_fork_that_parks_exports_a_test_that_stops_there(project: Path) -> None:
    script = [
        call_tools(("refund", {"order_id": 1}, "r1")),
        call_tools(("refund", {"order_id": 2}, "r2")),
        call_tools(("refund", {"order_id": 2}, "r2")),  # the fork's next answer
    ]
    chat = Chat(provider=ScriptedProvider(script)).with_tools(_tools().refund)
    chat.ask("Refund orders 1 and 2, one at a time")
    chat.deny(chat.pending_approvals[0], reason="not this one")
    chat.complete()
    fork = chat.fork("r1", decision="approved")
    fork.complete()
    assert fork.status == "awaiting_approval"
    assert [c.status for c in fork.tool_calls] == ["ok", "awaiting_approval"]
    _passes(_exported(fork, project, "test_fork_parks"))


def test_decided_but_not_carried_on_replays_without_running_the_call(project: Path) -> None:
    chat = Chat(
        provider=ScriptedProvider(
            [call_tools(("refund", {"order_id": 1}, "r1"), ("refund", {"order_id": 2}, "r2"))]
        )
    ).with_tools(_tools().refund)
    chat.ask("Refund 1 and 2")
    chat.approve("r1")  # and stop: complete() never ran it
    assert [c.status for c in chat.tool_calls] == ["approved", "awaiting_approval"]
    source = _passes(_exported(chat, project, "test_decided_only"))
    assert "complete_last=False" in source


def test_a_call_left_waiting_before_the_next_message_is_said_clearly() -> None:
    chat = Chat(
        provider=ScriptedProvider([call_tools(("refund", {"order_id": 7}, "r1"))]),
        display=False,
    )

    @tool(requires_approval=True)
    def refund(order_id: int) -> str:
        """Refund."""
        return "done"

    chat.with_tools(refund)
    with pytest.raises(AssertionError, match=r"refund\(\{'order_id': 7\}\) waits after message 1"):
        replay_turns(chat, ["Refund 7", "and then?"], {})


# ------------------------------------------------------------------------ inputs
def test_ask_user_answers_are_exported_and_given_again(project: Path) -> None:
    def model(request: Any) -> Any:
        if not any(getattr(m, "role", "") == "assistant" for m in request.messages):
            return call_tools(
                ("ask_user", {"question": "Which colour?", "choices": ["red", "green"]}, "q1")
            )
        return reply(f"You chose: {request.messages[-1].content}")

    chat = Chat(provider=ScriptedProvider([model], repeat_last=True)).with_tools(nbagent.ask_user)
    chat.ask("Ask me a colour")
    chat.answer(chat.pending_inputs[0], "green")
    chat.complete()
    assert chat.last_assistant_message.content == "You chose: green"
    test = _exported(chat, project, "test_ask")
    source = _passes(test)
    assert "from nbagent import ask_user as tool_ask_user" in source
    assert "nbagent._" not in source  # public names only
    assert "INPUTS = {'q1': ('accept', 'green', None, 'user')}" in source
    # the answer is what the replay gives: another one makes the next request differ
    _fails(test, source.replace("'green', None", "'red', None"), "ReplayMissError")


def test_an_external_tool_declined_and_one_waiting(project: Path) -> None:
    script = [call_tools(("sign", {"party": "ACME"}, "s1")), call_tools(("sign", {"party": "B"}))]
    chat = Chat(provider=ScriptedProvider(script)).with_tools(_tools().sign)
    chat.ask("Get it signed")
    chat.decline(chat.pending_inputs[0], "ACME is closed", by="ops")
    chat.complete()
    assert chat.status == "awaiting_approval" and chat.pending_inputs  # the second waits
    source = _passes(_exported(chat, project, "test_external"))
    assert "'s1': ('decline', None, 'ACME is closed', 'ops')" in source


# ----------------------------------------------------------------- structured answers
def test_a_structured_answer_with_an_importable_type_is_exported(project: Path) -> None:
    chat = Chat(provider=ScriptedProvider([reply("hi"), reply('{"city": "Oslo", "temp": 3.5}')]))
    chat.ask("hello")
    assert chat.ask("Weather?", output=_tools().City).parsed.city == "Oslo"
    test = _exported(chat, project, "test_structured")
    source = _passes(test)
    assert f"from {MODULE} import City as output_City" in source
    assert "outputs=OUTPUTS" in source and "OUTPUTS = {1: output_City}" in source


def test_a_structured_answer_of_a_json_schema_is_exported(project: Path) -> None:
    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer"}},
        "required": ["n"],
        "additionalProperties": False,
    }
    chat = Chat(provider=ScriptedProvider([reply('{"n": 3}')]))
    chat.ask("How many?", output=schema)
    _passes(_exported(chat, project, "test_schema"))


def test_a_structured_answer_the_test_cannot_import_is_refused(tmp_path: Path) -> None:
    from pydantic import BaseModel

    class Local(BaseModel):  # a notebook's class: the test cannot import it
        city: str

    chat = Chat(provider=ScriptedProvider([reply('{"city": "Oslo"}')]), display=False)
    chat.ask("Where?", output=Local)
    with pytest.raises(ValueError, match=r"type Local, defined in .*: the test cannot import it"):
        to_pytest(chat, tmp_path / "test_local.py")
    assert not (tmp_path / "test_local.py").exists()


def test_structured_answers_of_earlier_turns_are_exported_each_with_its_type(
    project: Path,
) -> None:
    """Every turn's ``output=`` is the chat's to say (``chat.outputs``); only the latest
    was kept, so a chat that asked for a type and went on could not be exported."""
    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer"}},
        "required": ["n"],
        "additionalProperties": False,
    }
    city = '{"city": "Oslo", "temp": 1}'
    chat = Chat(
        provider=ScriptedProvider([reply(city), reply("ok"), reply(city), reply('{"n": 2}')])
    )
    chat.ask("Weather?", output=_tools().City)
    chat.ask("Thanks")
    chat.ask("And now?", output=_tools().City)
    chat.ask("How many?", output=schema)
    assert chat.outputs == {1: _tools().City, 3: _tools().City, 4: schema}
    source = _passes(_exported(chat, project, "test_turns"))
    assert source.count(f"from {MODULE} import City") == 1
    assert "OUTPUTS = {0: output_City, 2: output_City, 3: {" in source.replace("\n", "")


# ---------------------------------------------------------------------- hosted MCP
def _hosted_chat(server: FakeLLMServer, wiki: HostedMCP) -> Chat:
    provider = OpenAIProvider(
        "gpt-4.1-mini",
        api="responses",
        api_key="sk-PROVIDER-SECRET",
        base_url=server.openai_base_url,
    )
    chat = Chat(provider=provider, display=False).with_tools(wiki)
    chat.ask("What does the wiki say?")
    chat.approve(chat.pending_approvals[0], reason="fine")
    chat.complete()
    return chat


def _wiki(req: Any) -> Turn:
    answered = [i for i in req.body.get("input", []) if i.get("type") == "mcp_approval_response"]
    if not answered:
        return Turn(
            hosted=[
                mcp_list_tools("deepwiki", "ask"),
                mcp_approval_request("deepwiki", "ask", {"q": "x"}, id="mcpr_a"),
            ]
        )
    return Turn(
        text="It says 42",
        hosted=[mcp_call("deepwiki", "ask", {"q": "x"}, output="42", approval_request_id="mcpr_a")],
    )


def test_a_hosted_mcp_server_is_exported_without_its_secrets(project: Path) -> None:
    wiki = HostedMCP(
        "deepwiki",
        server_url="https://user:URLPASS@mcp.deepwiki.example/mcp?v=2",
        headers={"Authorization": "Bearer HEADER-SECRET", "X-Team": "TEAM-SECRET"},
        authorization="OAUTH-SECRET",
    )
    with FakeLLMServer(handler=_wiki) as server:
        chat = _hosted_chat(server, wiki)
    assert chat.last_assistant_message.content == "It says 42"
    test = _exported(chat, project, "test_hosted")
    every = "".join(p.read_text() for p in test.parent.rglob("*") if p.is_file())
    for secret in ("HEADER-SECRET", "TEAM-SECRET", "OAUTH-SECRET", "URLPASS", "sk-PROVIDER"):
        assert secret not in every
    source = _passes(test)
    assert "server_url='https://mcp.deepwiki.example/mcp?v=2'" in source
    assert "'mcpr_a': ('approved', 'fine', None, 'user')" in source


def test_a_hosted_url_carrying_a_key_is_refused(project: Path) -> None:
    wiki = HostedMCP("deepwiki", server_url="https://mcp.deepwiki.example/mcp?api_key=QSECRET")
    with FakeLLMServer(handler=_wiki) as server:
        chat = _hosted_chat(server, wiki)
    with pytest.raises(ValueError, match=r"URL carries 'api_key'.*headers= or authorization="):
        to_pytest(chat, project / "test_keyed.py")
    assert not (project / "test_keyed.py").exists()


# --------------------------------------------------------------------------- names
def _named(name: str, approval: bool = False) -> Any:
    def fn(x: int) -> str:
        return f"{name}:{x}"

    fn.__doc__ = f"Tool {name}."
    return tool(name=name, requires_approval=approval)(fn)


def test_tool_names_never_clash_or_break_the_file(project: Path) -> None:
    names = ["get-x", "get_x", "Lookup", "lookup", "3d_render", "class"]
    script = [call_tools(*[(n, {"x": i}) for i, n in enumerate(names)]), reply("done")]
    chat = Chat(provider=ScriptedProvider(script)).with_tools(*[_named(n) for n in names])
    chat.ask("go")
    assert [c.status for c in chat.tool_calls] == ["ok"] * len(names)
    source = _passes(_exported(chat, project, "test_names"))
    assert "STAND_IN_GET_X = " in source and "STAND_IN_GET_X_2 = " in source
    assert "STAND_IN_3D_RENDER = " in source


def test_imported_tools_named_like_the_files_own_names(project: Path) -> None:
    t = _tools()
    script = [
        call_tools(
            ("answer", {"question": "q"}),
            ("chat", {"message": "m"}),
            ("Path", {"where": "w"}),
            ("open_chat", {"topic": "t"}),
        ),
        reply("done"),
    ]
    chat = Chat(provider=ScriptedProvider(script)).with_tools(t.answer, t.chat, t.Path, t.Chat)
    chat.ask("go")
    assert [c.status for c in chat.tool_calls] == ["ok"] * 4
    source = _passes(_exported(chat, project, "test_shadow"))
    assert f"from {MODULE} import Chat as tool_open_chat" in source
    assert "tool_open_chat()" in source
    assert f"from {MODULE} import Path as tool_Path" in source
    assert f"from {MODULE} import chat as tool_chat" in source


# ---------------------------------------------------------------------- who decided
def test_a_denial_by_someone_else_than_the_user_is_made_again_by_them(project: Path) -> None:
    script = [call_tools(("refund", {"order_id": 3}, "r1")), reply("not refunded")]
    chat = Chat(provider=ScriptedProvider(script)).with_tools(_tools().refund)
    chat.ask("Refund 3")
    chat.deny("r1", reason="fraud check", by="risk-team")  # the model reads "denied by risk-team"
    chat.complete()
    source = _passes(_exported(chat, project, "test_by"))
    assert "'r1': ('denied', 'fraud check', None, 'risk-team')" in source


def test_a_chat_loaded_from_a_store_exports_from_the_stores_recordings(tmp_path: Path) -> None:
    """The store keeps every response it was sent, so a chat loaded from it (another
    kernel, after a restart) exports a test as the chat that ran would."""
    import subprocess
    import sys

    db = tmp_path / "s.db"
    chat = Chat(provider=ScriptedProvider([reply("hi")]), store=db, display=False)
    chat.ask("hello")
    chat.close()
    loaded = Chat.load(chat.id, store=db, provider=ScriptedProvider([]))
    try:
        test_file = to_pytest(loaded, tmp_path / "test_loaded.py")
    finally:
        loaded.close()
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test_file)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "1 passed" in ran.stdout


def test_a_chat_with_no_recording_anywhere_says_so(tmp_path: Path) -> None:
    chat = Chat(provider=ScriptedProvider([]), display=False)
    with pytest.raises(ValueError, match="no recorded model request to replay"):
        to_pytest(chat, tmp_path / "test_nothing.py")


@pytest.mark.parametrize(
    "settings", [{"extra_body": {"temperature": 0, "seed": 7}}, {"max_tokens": 500}]
)
def test_a_run_recorded_with_provider_settings_exports_a_test_that_replays(
    tmp_path: Path, settings: dict[str, Any]
) -> None:
    """A request's key holds what its provider adds to every request (a non-default
    max_tokens, a digest of extra_body), so the exported test, which replays through an
    OfflineProvider, missed every recording; it now writes the settings it was recorded
    with (extra_body only as its digest: it may hold a gateway's token)."""
    import shutil
    import subprocess
    import sys

    from nbagent.providers import OpenAIProvider
    from nbagent.testing import FakeLLMServer, Turn

    with FakeLLMServer(turns=[Turn(text="hello there")]) as server:
        provider = OpenAIProvider(
            "gpt-4.1-mini", base_url=server.openai_base_url, api_key="sk-x", **settings
        )
        chat = Chat(provider=provider, display=False)
        chat.ask("question")
        test_file = to_pytest(chat, tmp_path / "made" / "test_settings.py")
    written = test_file.read_text()
    assert "settings={" in written and "temperature" not in written  # a digest, not the body
    clean = tmp_path / "clean"
    clean.mkdir()
    shutil.copy(test_file, clean)
    shutil.copytree(
        test_file.with_name("test_settings_recordings"), clean / "test_settings_recordings"
    )
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_settings.py"],
        capture_output=True,
        text=True,
        cwd=clean,
        timeout=300,
    )
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
