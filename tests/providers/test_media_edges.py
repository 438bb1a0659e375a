"""What a probe of images, sounds and replay found, each pinned here.

Every provider is the real SDK client in strict mode talking to the loopback fake server.
"""

from __future__ import annotations

import base64
import json
import struct
from typing import Any

import pytest
from _provider_harness import make_provider, png

import nbagent
from nbagent import ImagePart, MediaError
from nbagent.testing import FakeLLMServer, FakeToolCall, Turn


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


# -- 1. a refused tool image leaves the others -----------------------------------


@pytest.mark.parametrize("kind", ["anthropic", "openai-chat", "openai-responses"])
def test_a_too_large_tool_image_leaves_out_only_itself(server: FakeLLMServer, kind: str) -> None:
    small, other = png(5, 5, (0, 200, 0)), png(6, 6, (0, 0, 200))
    limit = 4 * 1024 * 1024 if kind == "anthropic" else 21 * 1024 * 1024
    big = png() + b"\0" * limit

    @nbagent.tool
    def plots() -> list[Any]:
        """Make the plots."""
        return ["three plots", small, big, other]

    server.script([Turn(tool_calls=[FakeToolCall("plots", {})]), Turn(text="I see two.")])
    provider = make_provider(kind, server)
    try:
        chat = nbagent.Chat(provider=provider, display=False).with_tools(plots)
        assert chat.ask("Plot").content == "I see two."
    finally:
        provider.close()
    [result] = [m for m in chat.transcript if isinstance(m, nbagent.ToolResultMessage)]
    assert [p.data for p in result.parts] == [small, other]  # kept for the user and the store
    assert "[images not sent: image 2 is" in result.content
    assert "image 1 is" not in result.content and "image 3 is" not in result.content
    body = json.dumps(server.requests[-1].body)
    assert _b64(small) in body and _b64(other) in body and _b64(big[:3000]) not in body
    assert list(chat.log["result_type"]) == ["text+image"]


# -- 2. a URL is never fetched, and its secrets never reach the error -------------


@pytest.mark.parametrize(
    "url",
    [
        "https://user:hunter2@example.com/cat.png?key=sk-abcdef1234567890abcdef",
        "http://example.com/sk-abcdef1234567890abcdef/cat.png",
        "s3://bucket/cat.png#token=hunter2",
    ],
)
def test_a_url_is_refused_without_its_secrets(server: FakeLLMServer, url: str) -> None:
    provider = make_provider("openai-chat", server)
    try:
        chat = nbagent.Chat(provider=provider, display=False)
        with pytest.raises(MediaError, match="URLs are not fetched") as caught:
            chat.ask("What is this?", images=url)
    finally:
        provider.close()
    text = str(caught.value)
    assert "\n" not in text and len(text) < 200
    assert "hunter2" not in text and "sk-abcdef" not in text and "key=" not in text
    assert "download" in text
    assert server.requests == [] and chat.transcript == ()


def test_a_data_url_is_decoded_or_refused_briefly() -> None:
    image = png()
    part = nbagent.image("data:image/png;base64," + _b64(image), detail="low")
    assert part == ImagePart(image, "image/png", "low")
    long = "data:image/png;base64," + "A" * 100_000 + "!"
    for bad, why in [
        (long, "does not decode"),
        ("data:text/html;base64," + _b64(b"<b>hi</b>" * 1000), "only PNG, JPEG"),
        ("data:image/jpeg;base64," + _b64(image), "says image/jpeg but its bytes are image/png"),
        ("data:image/png," + "x" * 5000, "must be base64"),
    ]:
        with pytest.raises(MediaError, match=why) as caught:
            nbagent.image(bad)
        assert len(str(caught.value)) < 200


def test_a_file_url_is_its_path(tmp_path: Any) -> None:
    (tmp_path / "plot.png").write_bytes(png())
    assert nbagent.image((tmp_path / "plot.png").as_uri()) == ImagePart(png(), "image/png")


# -- 4. detail=, big files, figures a tool returned --------------------------------


def test_detail_takes_low_high_or_auto(server: FakeLLMServer) -> None:
    assert nbagent.image(png(), detail="high").detail == "high"
    with pytest.raises(ValueError, match="detail= takes 'low', 'high' or 'auto'"):
        nbagent.image(png(), detail="bogus")
    provider = make_provider("openai-chat", server)
    try:
        chat = nbagent.Chat(provider=provider, display=False)
        with pytest.raises(MediaError, match="detail 'ultra' is not 'low', 'high' or 'auto'"):
            chat.ask("Look", images=ImagePart(png(), "image/png", "ultra"))
    finally:
        provider.close()
    assert server.requests == [] and chat.transcript == ()


def test_a_path_too_big_for_any_api_is_refused_before_it_is_read(tmp_path: Any) -> None:
    movie = tmp_path / "movie.mp4"
    with movie.open("wb") as f:  # sparse: 1.5 GB that takes no disk
        f.write(b"\x00\x00\x00\x18ftypmp42")
        f.truncate(1536 * 1024 * 1024)
    with pytest.raises(MediaError, match=r"'movie.mp4' is 1536.0 MB; the most any API takes"):
        nbagent.image(movie)
    clip = tmp_path / "clip.mp4"  # under the bound: refused by its first bytes
    clip.write_bytes(b"\x00\x00\x00\x18ftypmp42" + b"\0" * 1000)
    with pytest.raises(MediaError, match="not a PNG, JPEG, GIF, WebP or PDF"):
        nbagent.image(clip)


def test_figures_a_tool_returns_are_closed_and_the_users_are_not(server: FakeLLMServer) -> None:
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    @nbagent.tool
    def plot(n: int) -> Any:
        """Plot n."""
        fig, ax = plt.subplots()
        ax.plot([n, 2])
        return ["a figure", fig] if n % 2 else ax  # a figure, or its Axes

    mine, _ = plt.subplots()
    before = set(plt.get_fignums())
    calls = [FakeToolCall("plot", {"n": i}) for i in range(6)]
    server.script([Turn(tool_calls=calls), Turn(text="six plots"), Turn(text="seen")])
    provider = make_provider("openai-responses", server)
    try:
        chat = nbagent.Chat(provider=provider, display=False).with_tools(plot)
        chat.ask("Plot")
        chat.ask("And mine?", images=mine)
    finally:
        provider.close()
    results = [m for m in chat.transcript if isinstance(m, nbagent.ToolResultMessage)]
    assert [len(r.parts) for r in results] == [1] * 6
    assert set(plt.get_fignums()) == before  # the tools' six closed, the user's still open
    plt.close(mine)


# -- 6. images in a dict a tool returns --------------------------------------------


def test_an_image_in_a_dict_becomes_a_label_and_a_part(server: FakeLLMServer) -> None:
    image = png(7, 7)

    @nbagent.tool
    def snapshot() -> dict[str, Any]:
        """Take a snapshot."""
        return {"caption": "north", "plot": image, "size": 7}

    server.script([Turn(tool_calls=[FakeToolCall("snapshot", {})]), Turn(text="A plot.")])
    provider = make_provider("anthropic", server)
    try:
        chat = nbagent.Chat(provider=provider, display=False).with_tools(snapshot)
        chat.ask("Snap")
    finally:
        provider.close()
    [result] = [m for m in chat.transcript if isinstance(m, nbagent.ToolResultMessage)]
    assert json.loads(result.content) == {
        "caption": "north",
        "plot": "[image 1: image/png, 0 KB]",
        "size": 7,
    }
    assert result.parts == (ImagePart(image, "image/png"),)
    assert _b64(image) in json.dumps(server.requests[-1].body)
    assert list(chat.log["result_type"]) == ["json+image"]


# -- 3. a user message's sound on Chat Completions --------------------------------


def _wav(frames: int = 800) -> bytes:
    data = b"\x00\x00" * frames
    fmt = struct.pack("<IHHIIHH", 16, 1, 1, 8000, 16000, 2, 16)
    riff = b"WAVE" + b"fmt " + fmt + b"data" + struct.pack("<I", len(data)) + data
    return b"RIFF" + struct.pack("<I", len(riff)) + riff


@pytest.mark.filterwarnings("ignore::nbagent.providers.UnknownModelWarning")  # an audio model
@pytest.mark.parametrize(("model", "heard"), [("gpt-4.1-mini", False), ("gpt-audio", True)])
def test_a_prompts_sound_reaches_only_a_model_that_hears(
    server: FakeLLMServer, model: str, heard: bool
) -> None:
    from nbagent.mcp import MCPPromptMessages

    sound = nbagent.AudioPart(_wav())
    message = nbagent.ChatMessage("user", "Transcribe this.", parts=(sound,))
    prompt = MCPPromptMessages("transcribe", None, (message,))
    server.script([Turn(text="heard"), Turn(text="again")])
    provider = make_provider("openai-chat", server, model=model)
    try:
        chat = nbagent.Chat(provider=provider, display=False)
        assert chat.ask(prompt).content == "heard"  # the strict fake refused input_audio here
        chat.ask("Once more")
    finally:
        provider.close()
    for request in server.requests:
        [content] = [m["content"] for m in request.body["messages"] if m["role"] == "user"][:1]
        kinds = [c["type"] for c in content]
        if heard:
            assert kinds == ["text", "input_audio"]
        else:
            assert kinds == ["text", "text"]
            assert content[1]["text"].startswith(f"[audio 1 not sent: {model} takes no audio")
