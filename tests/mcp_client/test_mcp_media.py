"""Images and audio from MCP tools (issue 26, item 3: media).

An image block (recognised by its bytes) reaches the model as a real image part, through
the real SDK clients against the strict fake server, on the three wire formats; the card
shows it as a thumbnail (a ``data:`` URL nbagent encoded from sniffed bytes, escaped,
shrunk); audio and images in formats no API takes become a line saying so.
"""

from __future__ import annotations

import base64
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from _mcp_servers import PROTOCOL_SERVER

from nbagent import AnthropicProvider, Chat, ImagePart, MCPServer, OpenAIProvider
from nbagent.mcp._results import result_value
from nbagent.testing import FakeLLMServer, FakeToolCall, Turn

KEY = "sk-test-0000000000000000000000000000"


@pytest.fixture(scope="module")
def server() -> Iterator[MCPServer]:
    s = MCPServer.stdio(sys.executable, [PROTOCOL_SERVER], prefix="p")
    yield s
    s.close()


def provider(api: str, fake: FakeLLMServer) -> Any:
    if api == "anthropic":
        return AnthropicProvider(
            "claude-sonnet-4-5", base_url=fake.anthropic_base_url, api_key=KEY, max_retries=0
        )
    return OpenAIProvider(
        "gpt-4.1-mini", api=api, base_url=fake.openai_base_url, api_key=KEY, max_retries=0
    )


def sent_images(api: str, body: dict[str, Any]) -> list[bytes]:
    """The image bytes a request sends back with the tool's result."""
    out: list[bytes] = []
    if api == "anthropic":
        for m in body["messages"]:
            for b in m["content"] if isinstance(m["content"], list) else []:
                for c in b.get("content", []) if b.get("type") == "tool_result" else []:
                    if isinstance(c, dict) and c.get("type") == "image":
                        out.append(base64.b64decode(c["source"]["data"]))
    elif api == "responses":
        for item in body["input"]:
            if item.get("type") == "function_call_output" and isinstance(item["output"], list):
                for p in item["output"]:
                    if p["type"] == "input_image":
                        out.append(base64.b64decode(p["image_url"].partition(",")[2]))
    else:
        for m in body["messages"]:
            if m["role"] == "user" and isinstance(m["content"], list):
                for p in m["content"]:
                    if p["type"] == "image_url":
                        out.append(base64.b64decode(p["image_url"]["url"].partition(",")[2]))
    return out


@pytest.mark.parametrize("api", ["chat", "responses", "anthropic"])
def test_an_mcp_image_reaches_the_model_as_a_real_image(server: MCPServer, api: str) -> None:
    with FakeLLMServer() as fake:
        fake.script([Turn(tool_calls=[FakeToolCall("p_picture", {})]), Turn(text="a red square")])
        chat = Chat(provider=provider(api, fake), display=False).with_tools(server)
        chat.ask("show me the picture")
        result = chat.get_call(chat.tool_calls[0].id).result
        assert result is not None and result.status == "ok"
        assert result.content == "a red square\n[image 1: image/png, 0 KB]"
        [part] = result.parts
        assert isinstance(part, ImagePart) and part.data.startswith(b"\x89PNG")
        assert sent_images(api, fake.requests[-1].body) == [part.data]
        assert chat.log["result_type"].tolist() == ["text+image"]
        html = chat._repr_mimebundle_()["text/html"]
        assert '<img class="nba-thumb" src="data:image/png;base64,' in html
        chat.close()


def test_audio_is_a_line_saying_the_model_cannot_hear_it(server: MCPServer) -> None:
    result = server.call("sound")
    assert result.startswith("a short silence\n[audio: audio/wav, ")
    assert "the model cannot hear audio" in result and result.parts == ()
    assert result.content[1]["type"] == "audio"  # the raw block stays for Python code


class _Block:
    def __init__(self, **kw: Any) -> None:
        self.__dict__.update(kw)


class _Result:
    def __init__(self, *blocks: Any) -> None:
        self.content, self.structured_content, self.is_error = list(blocks), None, False


def test_an_image_is_judged_by_its_bytes_not_its_declared_type() -> None:
    svg = base64.b64encode(b"<svg xmlns='http://www.w3.org/2000/svg'/>").decode()
    fake_png = _Block(type="image", mime_type="image/png", data=svg)
    not_b64 = _Block(type="image", mime_type="image/png", data="%%% not base64")
    value = result_value(_Result(fake_png, not_b64))
    assert value.parts == ()
    assert value.splitlines()[0].startswith("[image: image/png, ")
    assert "cannot be shown it" in value


def test_an_embedded_binary_resource_holding_a_pdf_or_image_is_a_part() -> None:
    png = base64.b64decode(
        "iVBORw0KGgoAAAANSUhEUgAAAAgAAAAICAIAAABLbSncAAAAEklEQVR4nGP4z8CAFWEXHbQSACj/P8Fu7N9hAAAAAElFTkSuQmCC"
    )
    pdf = b"%PDF-1.4\n%%EOF\n"
    blocks = [
        _Block(
            type="resource",
            resource=_Block(
                uri="docs://a/report",
                blob=base64.b64encode(pdf).decode(),
                mime_type="application/pdf",
            ),
        ),
        _Block(
            type="resource",
            resource=_Block(
                uri="docs://logo", blob=base64.b64encode(png).decode(), mime_type="image/png"
            ),
        ),
    ]
    value = result_value(_Result(*blocks))
    assert [type(p).__name__ for p in value.parts] == ["FilePart", "ImagePart"]
    assert value.parts[0].filename == "report.pdf"  # type: ignore[union-attr]
    assert value.splitlines() == ["[file 1: application/pdf, 0 KB]", "[image 2: image/png, 0 KB]"]
