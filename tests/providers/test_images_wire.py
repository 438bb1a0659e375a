"""Images and PDFs on the wire: the real SDK clients against the strict fake server.

``chat.ask(text, images=[...])`` on Chat Completions (``image_url`` data URLs),
Responses (``input_image``) and Anthropic (``image`` blocks); a tool returning a
figure goes back to the model (Anthropic ``tool_result`` image blocks, Responses
``function_call_output`` input images, a follow-up user message on Chat
Completions); limits and formats are checked before any request; the fake
server refuses malformed parts as the APIs do. Every request part is also
validated against the SDK's own request types.
"""

from __future__ import annotations

import base64
import io
import struct
from typing import Any

import pytest
from _provider_harness import Harness, png
from pydantic import TypeAdapter

import nbagent
from nbagent import FilePart, ImagePart, MediaError
from nbagent.testing import FakeLLMServer, FakeToolCall, Turn

PDF = b"%PDF-1.4\n1 0 obj <<>> endobj\ntrailer <<>>\n%%EOF\n"


def _data_url(url: str) -> tuple[str, bytes]:
    head, _, data = url.partition(",")
    return head.removeprefix("data:").removesuffix(";base64"), base64.b64decode(data)


def user_media(api: str, body: dict[str, Any]) -> list[tuple[str, bytes]]:
    """(media type, bytes) of every image/file sent in user messages, in order."""
    found: list[tuple[str, bytes]] = []
    if api == "chat":
        for m in body["messages"]:
            if m["role"] != "user" or not isinstance(m["content"], list):
                continue
            for p in m["content"]:
                if p["type"] == "image_url":
                    found.append(_data_url(p["image_url"]["url"]))
                elif p["type"] == "file":
                    found.append(_data_url(p["file"]["file_data"]))
    elif api == "responses":
        for item in body["input"]:
            if item.get("role") == "user" and isinstance(item["content"], list):
                for p in item["content"]:
                    if p["type"] == "input_image":
                        found.append(_data_url(p["image_url"]))
                    elif p["type"] == "input_file":
                        found.append(_data_url(p["file_data"]))
    else:
        for m in body["messages"]:
            if m["role"] != "user" or not isinstance(m["content"], list):
                continue
            for b in m["content"]:
                if b["type"] in ("image", "document"):
                    source = b["source"]
                    found.append((source["media_type"], base64.b64decode(source["data"])))
    return found


def validate_with_sdk(api: str, body: dict[str, Any]) -> None:
    """Each request message/item is valid for the SDK's own request types."""
    if api == "chat":
        from openai.types.chat import ChatCompletionMessageParam

        adapter: TypeAdapter[Any] = TypeAdapter(ChatCompletionMessageParam)
        for m in body["messages"]:
            adapter.validate_python(m, strict=False)
    elif api == "responses":
        from openai.types.responses import ResponseInputItemParam

        adapter = TypeAdapter(ResponseInputItemParam)
        for item in body["input"]:
            adapter.validate_python(item)
    else:
        from anthropic.types import MessageParam

        adapter = TypeAdapter(MessageParam)
        for m in body["messages"]:
            adapter.validate_python(m)


def test_ask_with_png_bytes_path_and_pdf(harness: Harness, tmp_path: Any) -> None:
    red, blue = png(rgb=(220, 20, 20)), png(5, 5, (20, 20, 220))
    path = tmp_path / "chart.data"  # the extension is not trusted: the bytes are a PNG
    path.write_bytes(blue)
    harness.script("A red square and a blue one.")
    chat = nbagent.Chat(provider=harness.provider, stream=harness.stream, display=False)
    items: list[Any] = [red, path]
    if harness.kind != "openai-compatible":
        items.append(PDF)
    reply = chat.ask("What do you see?", images=items)
    assert reply is not None and reply.content == "A red square and a blue one."
    body = harness.server.requests[-1].body
    expected = [("image/png", red), ("image/png", blue)]
    if harness.kind != "openai-compatible":
        expected.append(("application/pdf", PDF))
    assert user_media(harness.api, body) == expected
    validate_with_sdk(harness.api, body)
    user = chat.transcript[0]
    assert isinstance(user, nbagent.ChatMessage)
    assert user.content == "What do you see?"
    assert [p.media_type for p in user.parts][:2] == ["image/png", "image/png"]
    # the next request sends the same images again (the transcript keeps them)
    harness.script("Still the same.")
    chat.ask("And now?")
    assert user_media(harness.api, harness.server.requests[-1].body) == expected


def test_ask_with_a_matplotlib_figure(harness: Harness) -> None:
    plt = pytest.importorskip("matplotlib.pyplot")
    fig, ax = plt.subplots(figsize=(2, 1.5))
    ax.plot([1, 2, 3], [3, 1, 2])
    harness.script("A line that goes down then up.")
    chat = nbagent.Chat(provider=harness.provider, stream=harness.stream, display=False)
    chat.ask("What is wrong with this plot?", images=fig)
    plt.close(fig)
    [(kind, data)] = user_media(harness.api, harness.server.requests[-1].body)
    assert kind == "image/png" and data.startswith(b"\x89PNG\r\n\x1a\n")
    width, height = struct.unpack(">II", data[16:24])
    assert 100 <= width <= 220 and 80 <= height <= 160  # ~2 x 1.5 in at 100 dpi, tight


def test_ask_with_a_pil_image_and_an_ipython_image(harness: Harness) -> None:
    image_mod = pytest.importorskip("PIL.Image")
    display = pytest.importorskip("IPython.display")
    pil = image_mod.new("RGB", (7, 5), (10, 200, 10))
    ipy = display.Image(data=png(3, 3))
    harness.script("Green, and red.")
    chat = nbagent.Chat(provider=harness.provider, stream=harness.stream, display=False)
    chat.ask("Colours?", images=[pil, ipy])
    [(k1, d1), (k2, d2)] = user_media(harness.api, harness.server.requests[-1].body)
    assert (k1, k2) == ("image/png", "image/png")
    assert image_mod.open(io.BytesIO(d1)).getpixel((0, 0)) == (10, 200, 10)
    assert d2 == png(3, 3)


def test_a_tool_returning_a_figure_reaches_the_model(harness: Harness) -> None:
    plt = pytest.importorskip("matplotlib.pyplot")
    made: list[bytes] = []

    @nbagent.tool
    def plot_sales(region: str) -> Any:
        """Plot a region's sales.

        Args:
            region: The region.
        """
        fig, ax = plt.subplots(figsize=(2, 1.5))
        ax.bar(["a", "b"], [3, 5])
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
        made.append(buffer.getvalue())
        return ["Sales for " + region, fig]

    harness.script(
        Turn(tool_calls=[FakeToolCall("plot_sales", {"region": "north"})]),
        "Sales rose from 3 to 5.",
    )
    chat = nbagent.Chat(provider=harness.provider, stream=harness.stream, display=False)
    chat.with_tools(plot_sales).ask("Plot the north's sales")
    plt.close("all")
    result = chat.transcript[2]
    assert isinstance(result, nbagent.ToolResultMessage)
    assert result.content.startswith("Sales for north\n[image 1: image/png")
    [part] = result.parts
    assert part.data == made[0]
    assert chat.log["result_type"].tolist() == ["text+image"]
    body = harness.server.requests[-1].body
    validate_with_sdk(harness.api, body)
    if harness.api == "anthropic":
        [block] = [b for b in body["messages"][2]["content"] if b["type"] == "tool_result"]
        text, image = block["content"]
        assert text == {"type": "text", "text": result.content}
        assert base64.b64decode(image["source"]["data"]) == made[0]
    elif harness.api == "responses":
        [out] = [i for i in body["input"] if i.get("type") == "function_call_output"]
        text, image = out["output"]
        assert text == {"type": "input_text", "text": result.content}
        assert image["type"] == "input_image" and _data_url(image["image_url"])[1] == made[0]
    else:
        roles = [m["role"] for m in body["messages"]]
        assert roles == ["user", "assistant", "tool", "user"]
        assert body["messages"][2]["content"] == result.content
        follow = body["messages"][3]["content"]
        assert follow[0]["text"].startswith("Images and files returned by the tool calls")
        assert user_media("chat", {"messages": [body["messages"][3]]}) == [("image/png", made[0])]


def test_too_large_or_unknown_images_fail_before_any_request(harness: Harness) -> None:
    chat = nbagent.Chat(provider=harness.provider, stream=harness.stream, display=False)
    limit = 4 * 1024 * 1024 if harness.api == "anthropic" else 21 * 1024 * 1024
    big = png() + b"\0" * limit
    with pytest.raises(MediaError, match="at most"):
        chat.ask("Look", images=big)
    with pytest.raises(MediaError, match="not a PNG, JPEG, GIF, WebP or PDF"):
        chat.ask("Look", images=b"BM\x00\x00 a bitmap")
    with pytest.raises(MediaError, match="not a image/jpeg file"):
        chat.ask("Look", images=ImagePart(png(), "image/jpeg"))
    with pytest.raises(MediaError, match="PNG, JPEG, GIF or WebP"):
        chat.ask("Look", images=ImagePart(png(), "image/tiff"))
    with pytest.raises(TypeError, match="cannot send a dict as an image: pass PNG/JPEG"):
        chat.ask("Look", images={"x": 1})
    assert harness.server.requests == [] and chat.transcript == ()


def test_a_tool_image_too_large_becomes_a_note(harness: Harness) -> None:
    limit = 4 * 1024 * 1024 if harness.api == "anthropic" else 21 * 1024 * 1024

    @nbagent.tool
    def snapshot() -> bytes:
        """Take a snapshot."""
        return png() + b"\0" * limit

    harness.script(Turn(tool_calls=[FakeToolCall("snapshot", {})]), "Too big to see.")
    chat = nbagent.Chat(provider=harness.provider, stream=harness.stream, display=False)
    chat.with_tools(snapshot).ask("Snap")
    result = chat.transcript[2]
    assert isinstance(result, nbagent.ToolResultMessage) and result.parts == ()
    assert "[images not sent: image 1 is" in result.content
    assert chat.last_assistant_message is not None
    assert chat.last_assistant_message.content == "Too big to see."


# -- the strict fake refuses what the APIs refuse -------------------------------

_B64 = base64.b64encode(png()).decode()


@pytest.mark.parametrize(
    ("api", "body", "message"),
    [
        (
            "chat",
            {
                "messages": [
                    {
                        "role": "assistant",
                        "content": [
                            {
                                "type": "image_url",
                                "image_url": {"url": f"data:image/png;base64,{_B64}"},
                            }
                        ],
                    }
                ]
            },
            "only allowed for messages with role 'user'",
        ),
        (
            "chat",
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "image_url", "image_url": {"url": "data:image/png;base64,@@@"}}
                        ],
                    }
                ]
            },
            "base64-encoded data URL",
        ),
        (
            "chat",
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "image_url",
                                "image_url": {
                                    "url": "data:image/png;base64,"
                                    + base64.b64encode(b"not an image").decode()
                                },
                            }
                        ],
                    }
                ]
            },
            "unsupported image",
        ),
        (
            "responses",
            {
                "input": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "input_image", "image_url": f"data:image/png;base64,{_B64}"}
                        ],
                    }
                ]
            },
            "detail",
        ),
        (
            "anthropic",
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "image",
                                "source": {
                                    "type": "base64",
                                    "media_type": "image/jpeg",
                                    "data": _B64,
                                },
                            }
                        ],
                    }
                ]
            },
            "does not match the provided media type image/jpeg",
        ),
        (
            "anthropic",
            {
                "messages": [
                    {"role": "user", "content": "hi"},
                    {
                        "role": "assistant",
                        "content": [
                            {
                                "type": "image",
                                "source": {
                                    "type": "base64",
                                    "media_type": "image/png",
                                    "data": _B64,
                                },
                            }
                        ],
                    },
                ]
            },
            "only allowed in `user` messages",
        ),
        (
            "anthropic",
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "document",
                                "source": {
                                    "type": "base64",
                                    "media_type": "application/pdf",
                                    "data": "%%%",
                                },
                            }
                        ],
                    }
                ]
            },
            "not valid base64",
        ),
    ],
)
def test_the_strict_fake_refuses_malformed_parts(
    api: str, body: dict[str, Any], message: str
) -> None:
    from nbagent.testing._wire_media import check_media

    error = check_media(api, body)
    assert error is not None and error.status == 400
    assert message in error.message


_WAV = base64.b64encode(b"RIFF\x24\x00\x00\x00WAVEfmt " + bytes(32)).decode()


def _audio(fmt: str = "wav", data: str = _WAV) -> dict[str, Any]:
    return {"type": "input_audio", "input_audio": {"data": data, "format": fmt}}


@pytest.mark.parametrize(
    ("api", "body", "message"),
    [
        (  # Chat Completions takes input_audio only from an audio model
            "chat",
            {"model": "gpt-4.1-mini", "messages": [{"role": "user", "content": [_audio()]}]},
            "does not support audio input",
        ),
        (
            "chat",
            {"model": "gpt-audio", "messages": [{"role": "tool", "content": [_audio()]}]},
            "Audio is only allowed for messages with role 'user'",
        ),
        (
            "chat",
            {"model": "gpt-audio", "messages": [{"role": "user", "content": [_audio("ogg")]}]},
            "Supported values are: 'wav' and 'mp3'",
        ),
        (
            "chat",
            {"model": "gpt-audio", "messages": [{"role": "user", "content": [_audio("mp3")]}]},
            "not valid mp3",
        ),
        (
            "responses",
            {"input": [{"role": "user", "content": [_audio()]}]},
            "Supported values are: 'input_text', 'input_image', and 'input_file'",
        ),
        (
            "responses",
            {"input": [{"type": "function_call_output", "call_id": "c", "output": [_audio()]}]},
            "Supported values are: 'input_text', 'input_image', and 'input_file'",
        ),
        (
            "anthropic",
            {"messages": [{"role": "user", "content": [{"type": "audio", "data": _WAV}]}]},
            "does not match any of the expected tags",
        ),
    ],
)
def test_the_strict_fake_refuses_audio_where_the_api_does(
    api: str, body: dict[str, Any], message: str
) -> None:
    from nbagent.testing._wire_media import check_media

    error = check_media(api, body)
    assert error is not None and error.status == 400
    assert message in error.message


def test_the_strict_fake_takes_input_audio_from_an_audio_model(server: FakeLLMServer) -> None:
    import openai

    client = openai.OpenAI(api_key="k", base_url=server.openai_base_url, max_retries=0)
    server.script(["heard it"])
    content = [{"type": "text", "text": "listen"}, _audio()]
    answer = client.chat.completions.create(
        model="gpt-4o-audio-preview",
        messages=[{"role": "user", "content": content}],  # type: ignore[misc,list-item]
    )
    assert answer.choices[0].message.content == "heard it"
    validate_with_sdk("chat", server.requests[-1].body)


def test_the_strict_fake_answers_a_bad_image_with_a_400(server: FakeLLMServer) -> None:
    import openai

    client = openai.OpenAI(api_key="k", base_url=server.openai_base_url, max_retries=0)
    server.script(["never sent"])
    bad = [{"type": "image_url", "image_url": {"url": "data:image/gif;base64,aGVsbG8="}}]
    with pytest.raises(openai.BadRequestError, match="unsupported image"):
        client.chat.completions.create(
            model="gpt-4.1-mini", messages=[{"role": "user", "content": bad}]
        )


def test_nbagent_image_makes_parts() -> None:
    part = nbagent.image(png(), detail="low")
    assert isinstance(part, ImagePart) and part.detail == "low" and part.media_type == "image/png"
    assert isinstance(nbagent.image(PDF), FilePart)
    assert nbagent.image(part) is part
    assert repr(part).startswith("ImagePart(image/png, ")
    with pytest.raises(FileNotFoundError):
        nbagent.image("/no/such/file.png")


def test_the_log_says_what_a_result_held() -> None:
    from nbagent._result_text import result_type, to_result

    assert result_type(*to_result({"a": 1})) == "json"
    assert result_type(*to_result("hello")) == "text"
    assert result_type(*to_result(png())) == "image"
    assert result_type(*to_result(["see", png(), PDF])) == "text+image+file"
    assert result_type(*to_result([png(), png()])) == "image"


def test_the_demo_model_describes_images_it_is_sent_and_tool_images() -> None:
    image_mod = pytest.importorskip("PIL.Image")
    out = io.BytesIO()
    image_mod.new("RGB", (30, 20), (31, 119, 180)).save(out, format="PNG")
    chat = nbagent.Chat(model="demo", display=False)
    reply = chat.ask("What is this?", images=[out.getvalue(), PDF])
    assert reply is not None
    assert "(1) a 30x20 PNG image, all blue; (2) a PDF document" in reply.content

    @nbagent.tool
    def render_chart(name: str) -> Any:
        """Render a chart.

        Args:
            name: The chart.
        """
        return ["Chart " + name, png(8, 4, (250, 250, 250))]

    chat = nbagent.Chat(model="demo", display=False).with_tools(render_chart)
    reply = chat.ask("render chart sales")
    assert reply is not None and "I see a 8x4 PNG image, all white." in reply.content


def test_ask_async_and_ask_later_take_images(harness: Harness) -> None:
    import asyncio

    harness.script("Async red.", "Later blue.")
    chat = nbagent.Chat(provider=harness.provider, stream=harness.stream, display=False)
    red, blue = png(rgb=(220, 20, 20)), png(rgb=(20, 20, 220))
    reply = asyncio.run(chat.ask_async("Colour?", images=[red]))
    assert reply is not None and reply.content == "Async red."
    assert user_media(harness.api, harness.server.requests[-1].body) == [("image/png", red)]
    chat.ask_later("And this?", images=blue)
    assert len(harness.server.requests) == 1  # ask_later sends nothing
    chat.complete()
    sent = user_media(harness.api, harness.server.requests[-1].body)
    assert sent == [("image/png", red), ("image/png", blue)]


def test_an_axes_and_an_ipython_image_of_a_url() -> None:
    plt = pytest.importorskip("matplotlib.pyplot")
    display = pytest.importorskip("IPython.display")
    fig, ax = plt.subplots(figsize=(1, 1))
    part = nbagent.image(ax)  # what df.plot() returns: its figure is sent
    plt.close(fig)
    assert isinstance(part, ImagePart) and part.data.startswith(b"\x89PNG")
    remote = display.Image(url="https://example.com/x.png")
    with pytest.raises(TypeError, match="holds no data: download the file"):
        nbagent.image(remote)
