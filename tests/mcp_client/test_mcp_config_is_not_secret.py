"""An MCP server's ordinary configuration is not a secret; its real secrets still never show.

Every ``env=`` / header / URL-query value of 6 characters or more used to be a secret,
replaced by ``***`` wherever the server's text had it: ``APP_ENV=production`` turned a
tool's ``enum: ['production', 'staging']`` into ``['***', 'staging']`` (the model's choice
was refused), ``TZ=Europe/Paris`` cut the timezone out of the reference time server's
descriptions and answers, and ``DEFAULT_FORMAT=string`` made every ``"type": "string"`` a
``"type": "***"`` (every call refused). Now a secret is a value named like one
(``API_KEY``, ``*_TOKEN``, ``Authorization``...), shaped like a key, a URL's credentials,
or one the user marks (``secrets=[...]``); and a tool's schema keeps its structure words,
an ``enum`` member or ``default`` showing a secret being left out, not rewritten.

Also here: the name a server gives itself (its label when none is given) and its tools'
annotations (a ``title``) lose its secrets, and the DEBUG records of ``httpcore2`` (the
SDK's HTTP stack: response headers, where a server may say an ``Authorization`` back)
are scrubbed like the SDK's own. The servers are real: the official SDK's ``MCPServer``
written below, the reference ``mcp-server-time``, a plain HTTP endpoint.
"""

from __future__ import annotations

import importlib.util
import logging
import sys
import textwrap
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nbagent
from nbagent import Chat, MCPServer, ToolDefinitionError
from nbagent.mcp._secrets import scrubbed_schema, secret_name, secret_values, server_secrets
from nbagent.testing import ScriptedProvider, call_tools, reply

API_KEY = "Zq8apiKEYvalue4417"

SERVER = textwrap.dedent(
    '''
    import os
    from typing import Annotated, Literal
    from mcp.server.mcpserver import MCPServer
    from mcp.types import ToolAnnotations
    from pydantic import Field

    KEY = os.environ.get("API_KEY", "")
    CONF = os.environ.get("CONF", "")
    RO = ToolAnnotations(read_only_hint=True)
    server = MCPServer(os.environ.get("SERVER_NAME", "config"), log_level="WARNING")

    @server.tool(annotations=RO)
    def deploy(target: Literal["production", "staging"]) -> str:
        """Deploy to a target (production or staging)."""
        return f"deployed to {target}; env {os.environ['APP_ENV']}, tz {os.environ['TZ']}"

    @server.tool(annotations=RO)
    def echo(text: str) -> str:
        """Echo (format: string)."""
        return text

    @server.tool(annotations=RO)
    def whoami() -> str:
        """Says its configuration back."""
        return f"key {KEY}; conf {CONF}"

    Choice = Literal[KEY, "other"]

    @server.tool(annotations=ToolAnnotations(read_only_hint=True, title=f"Login as {KEY}"))
    def login(
        which: Choice,
        key: Annotated[str, Field(description=f"the key (default {KEY})")] = KEY,
    ) -> str:
        """Log in with the key."""
        return "in" if key == KEY else "refused"

    server.run()
    '''
)

CONFIG = {"APP_ENV": "production", "TZ": "Europe/Paris", "DEFAULT_FORMAT": "string"}


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "config_server.py"
    path.write_text(SERVER)
    return path


@pytest.fixture
def server(script: Path) -> Iterator[MCPServer]:
    env = {**CONFIG, "API_KEY": API_KEY, "SERVER_NAME": f"srv-{API_KEY}"}
    with MCPServer.stdio(sys.executable, [str(script)], env=env) as s:
        yield s


def test_configuration_values_stay_in_schemas_descriptions_and_results(
    server: MCPServer,
) -> None:
    tools = {t.remote_name: t for t in server.list_tools()}
    deploy = tools["deploy"].parameters["properties"]["target"]
    assert deploy["enum"] == ["production", "staging"] and deploy["type"] == "string"
    assert tools["echo"].parameters["properties"]["text"]["type"] == "string"
    assert tools["echo"].description == "Echo (format: string)."
    provider = ScriptedProvider(
        [
            call_tools(("deploy", {"target": "production"}), ("echo", {"text": "a string"})),
            reply("ok"),
        ]
    )
    with Chat(provider=provider, display=False).with_tools(server) as chat:
        chat.ask("deploy")
        first, second = chat.tool_calls
        assert first.status == "ok" and first.result is not None
        assert first.result.content == "deployed to production; env production, tz Europe/Paris"
        assert second.result is not None and second.result.content == "a string"


def test_the_real_secret_still_never_reaches_the_model_the_label_or_the_log(
    server: MCPServer,
) -> None:
    tools = {t.remote_name: t for t in server.list_tools()}
    assert API_KEY not in server.label and server.label.startswith("srv-")
    login = tools["login"]
    assert API_KEY not in repr(login.annotations) and "***" in login.annotations["title"]
    props = login.parameters["properties"]
    assert props["which"]["enum"] == ["other"]  # the secret member left out, not rewritten
    assert "default" not in props["key"] and props["key"]["type"] == "string"
    assert "***" in props["key"]["description"]
    provider = ScriptedProvider(
        [call_tools(("whoami", {}), ("login", {"which": "other"})), reply("ok")]
    )
    with Chat(provider=provider, display=False).with_tools(server) as chat:
        chat.ask("who")
        whoami, logged = chat.tool_calls
        assert whoami.result is not None and whoami.result.content == "key ***; conf "
        assert logged.result is not None and logged.result.content == "in"  # its own default
        everything = (
            repr(provider.requests)
            + chat.log.frame().to_json(default_handler=str, date_format="iso")
            + repr(chat.record)
            + repr(server)
        )
        assert API_KEY not in everything


def test_a_value_the_user_marks_is_a_secret(script: Path) -> None:
    conf = "conf-value-not-named-secret"
    with pytest.raises(ToolDefinitionError, match="secrets="):
        MCPServer.stdio(sys.executable, [str(script)], secrets="abcdefgh")
    with pytest.raises(ToolDefinitionError, match="fewer than"):
        MCPServer.stdio(sys.executable, [str(script)], secrets=["abc"])
    env = {**CONFIG, "CONF": conf}
    with MCPServer.stdio(sys.executable, [str(script)], env=env) as plain:
        assert str(plain.call("whoami")) == f"key ; conf {conf}"
    with MCPServer.stdio(sys.executable, [str(script)], env=env, secrets=[conf]) as marked:
        assert str(marked.call("whoami")) == "key ; conf ***"


def test_the_reference_time_server_keeps_its_timezone() -> None:
    if importlib.util.find_spec("mcp_server_time") is None:
        pytest.skip("mcp_server_time is not installed (pip install -e '.[dev]')")
    args = ["-m", "mcp_server_time", "--local-timezone", "Europe/Paris"]
    with MCPServer.stdio(sys.executable, args, env={"TZ": "Europe/Paris"}, prefix="time") as s:
        tools = {t.remote_name: t for t in s.list_tools()}
        described = tools["get_current_time"].parameters["properties"]["timezone"]
        assert "Europe/Paris" in described["description"]
        answer = s.call("get_current_time", {"timezone": "Europe/Paris"})
        assert answer.structured_content["timezone"] == "Europe/Paris"


def test_which_names_and_values_are_secrets() -> None:
    for name in ("API_KEY", "GITHUB_TOKEN", "DB_PASSWORD", "Authorization", "X-Api-Key"):
        assert secret_name(name), name
    for name in ("Cookie", "PGPASS", "AWS_SECRET_ACCESS_KEY", "SESSION_ID", "client_secret"):
        assert secret_name(name), name
    for name in ("GPG_PASSPHRASE", "VAULT_PASSCODE", "SMTP_LOGIN", "MSSQL_CONNECTION_STRING"):
        assert secret_name(name), name  # secrets by name, whatever their values look like
    for name in ("TZ", "APP_ENV", "HOME", "LOG_LEVEL", "DEFAULT_FORMAT", "GIT_AUTHOR_NAME"):
        assert not secret_name(name), name
    found = secret_values(
        {
            "TZ": "Europe/Paris",
            "REGION": "europe-west1",
            "X_CUSTOM": "Bearer abcdefgh-123",
            "ANY": "ghp_0123456789abcdefABCDEF",
            "DATABASE_URL": "postgresql://app:pa55word99@db.internal/prod",
        }
    )
    assert "Europe/Paris" not in found and "europe-west1" not in found
    assert {"Bearer abcdefgh-123", "ghp_0123456789abcdefABCDEF", "pa55word99"} <= set(found)
    url = "https://h.example/mcp?region=europe-west1&api_key=qs-secret-value"
    secrets = server_secrets(url=url)
    assert "qs-secret-value" in secrets and "europe-west1" not in secrets
    assert "europe-west1" not in repr(MCPServer.http(url))  # the repr still hides it


_WORDS = st.sampled_from(["string", "integer", "object", "production", "Europe/Paris", "date-time"])
_SECRETS = st.lists(st.sampled_from(["string", "production", "date-time", API_KEY]), max_size=3)


@settings(max_examples=200, deadline=None)
@given(
    secrets=_SECRETS,
    kind=_WORDS,
    fmt=_WORDS,
    members=st.lists(st.one_of(_WORDS, st.just(API_KEY)), min_size=1, max_size=4),
    default=st.one_of(_WORDS, st.just(API_KEY)),
)
def test_a_scrubbed_schema_keeps_its_structure_and_shows_no_secret(
    secrets: list[str], kind: str, fmt: str, members: list[str], default: str
) -> None:
    schema = {
        "type": "object",
        "required": ["type"],
        "properties": {
            "type": {  # a property named like a keyword
                "type": kind,
                "format": fmt,
                "enum": members,
                "default": default,
                "description": f"one of {members}, {API_KEY}",
            },
            "items": {"type": "array", "items": {"type": kind, "const": default}},
        },
    }
    out = scrubbed_schema(schema, server_secrets(values=secrets))
    prop, items = out["properties"]["type"], out["properties"]["items"]
    assert out["type"] == "object" and out["required"] == ["type"]
    assert (prop["type"], prop["format"], items["items"]["type"]) == (kind, fmt, kind)
    assert set(prop.get("enum", [])) <= set(members)  # members left out, never rewritten
    assert prop.get("default", default) == default
    for secret in secrets:
        shown = repr(out).replace(repr(kind), "").replace(repr(fmt), "")
        assert secret not in shown or secret in (kind, fmt)


class _Echo(BaseHTTPRequestHandler):
    """An endpoint that refuses every request, saying its Authorization back in a header."""

    def do_POST(self) -> None:
        self.send_response(401)
        self.send_header("WWW-Authenticate", f'Bearer error="{self.headers.get("Authorization")}"')
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_DELETE = do_POST

    def log_message(self, *args: Any) -> None:
        pass


def test_the_http_stacks_debug_records_never_show_the_servers_secret(
    caplog: pytest.LogCaptureFixture,
) -> None:
    httpd = HTTPServer(("127.0.0.1", 0), _Echo)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    caplog.set_level(logging.DEBUG)
    try:
        url = f"http://127.0.0.1:{httpd.server_port}/mcp"
        server = MCPServer.http(
            url, headers={"Authorization": f"Bearer {API_KEY}"}, connect_timeout=10
        )
        with pytest.raises(nbagent.MCPServerError):
            server.connect()
        server.close()
    finally:
        httpd.shutdown()
        httpd.server_close()
    records = [r for r in caplog.records if r.name.startswith("httpcore2")]
    assert records, "httpcore2 did not log (the check would prove nothing)"
    assert any("WWW-Authenticate" in r.getMessage() for r in records)
    assert not [r.getMessage() for r in caplog.records if API_KEY in r.getMessage()]
