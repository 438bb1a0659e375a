"""Images and audio from MCP tools (issue 26, item 3: media).

An image block (recognised by its bytes) reaches the model as a real image part, through
the real SDK clients against the strict fake server, on the three wire formats; the card
shows it as a thumbnail (a ``data:`` URL nbagent encoded from sniffed bytes, escaped,
shrunk). A sound (WAV or MP3, by its bytes) goes as an ``input_audio`` part to a Chat
Completions audio model; where the API takes no audio (another model, Responses,
Anthropic) the model reads a line saying why; the card has a player either way. Images
and sounds in formats no API takes become a line saying so.
"""

from __future__ import annotations

import base64
import json
import sys
import warnings
from collections.abc import Iterator
from typing import Any

import pytest
from _mcp_servers import PROTOCOL_SERVER

from nbagent import AnthropicProvider, AudioPart, Chat, ImagePart, MCPServer, OpenAIProvider
from nbagent.mcp._results import result_value
from nbagent.providers import UnknownModelWarning
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


def sent_audio(body: dict[str, Any]) -> list[tuple[str, bytes]]:
    """The ``input_audio`` parts of a Chat Completions request: (format, bytes)."""
    return [
        (p["input_audio"]["format"], base64.b64decode(p["input_audio"]["data"]))
        for m in body["messages"]
        if isinstance(m.get("content"), list)
        for p in m["content"]
        if p["type"] == "input_audio"
    ]


def test_an_mcp_sound_reaches_an_audio_model_as_input_audio(server: MCPServer) -> None:
    with FakeLLMServer() as fake, warnings.catch_warnings():
        warnings.simplefilter("ignore", UnknownModelWarning)  # the catalog has no prices for it
        fake.script([Turn(tool_calls=[FakeToolCall("p_sound", {})]), Turn(text="silence")])
        model = OpenAIProvider(
            "gpt-audio-mini", base_url=fake.openai_base_url, api_key=KEY, max_retries=0
        )
        chat = Chat(provider=model, display=False).with_tools(server)
        chat.ask("play the sound")  # the strict fake takes input_audio from an audio model
        result = chat.get_call(chat.tool_calls[0].id).result
        assert result is not None and result.status == "ok"
        [part] = result.parts
        assert isinstance(part, AudioPart) and part.media_type == "audio/wav"
        assert part.data.startswith(b"RIFF") and part.data[8:12] == b"WAVE"
        assert result.content == "a short silence\n[audio 1: audio/wav, 2 KB]"
        body = fake.requests[-1].body
        assert sent_audio(body) == [("wav", part.data)]
        [follow_up] = [m for m in body["messages"] if m["role"] == "user"][1:]
        assert follow_up["content"][0]["text"].startswith("Images and files returned by")
        html = chat._repr_mimebundle_()["text/html"]
        assert (
            '<audio class="nba-audio" controls preload="none" src="data:audio/wav;base64,' in html
        )
        chat.close()


@pytest.mark.parametrize(
    ("api", "why"),
    [
        ("chat", "gpt-4.1-mini takes no audio input (on Chat Completions only audio models do"),
        ("responses", "the Responses API takes no audio input"),
        ("anthropic", "Anthropic's API takes no audio input"),
    ],
)
def test_where_the_api_takes_no_audio_the_model_reads_why(
    server: MCPServer, api: str, why: str
) -> None:
    with FakeLLMServer() as fake:
        fake.script([Turn(tool_calls=[FakeToolCall("p_sound", {})]), Turn(text="no sound")])
        chat = Chat(provider=provider(api, fake), display=False).with_tools(server)
        chat.ask("play the sound")  # strict: any audio part would be a 400 here
        assert chat.transcript[-1].content == "no sound"
        result = chat.get_call(chat.tool_calls[0].id).result
        assert result is not None and isinstance(result.parts[0], AudioPart)
        body = json.dumps(fake.requests[-1].body)
        assert f"[audio 1 not sent: {why}" in body
        assert (
            "input_audio" not in body
            and base64.b64encode(result.parts[0].data[:30]).decode()[:20] not in body
        )
        html = chat._repr_mimebundle_()["text/html"]  # the person can still play it
        assert '<audio class="nba-audio"' in html
        chat.close()


def test_the_card_plays_only_checked_sounds_of_a_bounded_size() -> None:
    from nbagent.notebook._cards import thumbs_html
    from nbagent.notebook._state import AUDIO_INLINE_BYTES, thumbs

    wav = b"RIFF\x24\x00\x00\x00WAVEfmt " + bytes(64)
    mp3 = b"ID3\x04\x00" + bytes(64)
    big = b"RIFF\x24\x00\x00\x00WAVEfmt " + bytes(AUDIO_INLINE_BYTES)
    liar = b"<script>alert(1)</script>" + bytes(16)  # declared a WAV, is not one
    shown = thumbs((AudioPart(wav), AudioPart(mp3, "audio/mpeg"), AudioPart(big), AudioPart(liar)))
    assert [t.src is not None for t in shown] == [True, True, False, False]
    assert shown[1].src.startswith("data:audio/mpeg;base64,")  # type: ignore[union-attr]
    html = thumbs_html(shown)
    assert html.count("<audio ") == 2 and "<script" not in html
    assert "[audio 3 (audio/wav, " in html and "[audio 4 (audio/wav, 0 KB)]" in html


def test_an_audio_block_is_judged_by_its_bytes() -> None:
    wav = b"RIFF\x24\x00\x00\x00WAVEfmt " + bytes(16)
    mp3 = bytes([0xFF, 0xFB, 0x90, 0x64]) + bytes(16)  # an MPEG-1 layer III frame header
    ogg = b"OggS" + bytes(16)
    blocks = [
        _Block(type="audio", mime_type="audio/ogg", data=base64.b64encode(wav).decode()),
        _Block(type="audio", mime_type="audio/mpeg", data=base64.b64encode(mp3).decode()),
        _Block(type="audio", mime_type="audio/wav", data=base64.b64encode(ogg).decode()),
    ]
    value = result_value(_Result(*blocks))
    assert [(p.media_type, p.format) for p in value.parts] == [  # type: ignore[union-attr]
        ("audio/wav", "wav"),
        ("audio/mpeg", "mp3"),
    ]
    assert value.splitlines()[:2] == ["[audio 1: audio/wav, 0 KB]", "[audio 2: audio/mpeg, 0 KB]"]
    assert value.splitlines()[2].startswith("[audio: audio/wav, 20 bytes; not a WAV or MP3 file")


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
