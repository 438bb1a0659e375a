"""What a card shows is what runs: characters that are not seen but change how text reads
(bidi overrides and isolates, direction marks, zero-width and tag characters) show as
``\\u202e``-style escapes everywhere the view shows text, and the editor's JSON still parses
back to exactly what the model sent."""

from __future__ import annotations

import json
import re
from typing import Any

import ipywidgets
from _views import widgets_in
from hypothesis import given
from hypothesis import strategies as st

from nbagent import Chat, Tool
from nbagent._html import esc, json_preview, md_inline, md_text, printable
from nbagent.notebook import ChatView
from nbagent.notebook._continuation import continuation_for
from nbagent.notebook._fallback import chat_mimebundle
from nbagent.notebook._widgets import ActionCard
from nbagent.testing import ScriptedProvider, call_tools, reply

INVISIBLE = (
    "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"
    "\u200b\u200c\u200d\u2060\ufeff\u180e\xad\U000e0041\U000e007f"
)
HIDDEN = re.compile(f"[{INVISIBLE}]")

texts = st.text(alphabet=st.sampled_from(list(INVISIBLE)) | st.characters(), max_size=60)


NEVER = re.compile(
    "[\u202a-\u202e\u2066-\u2069\u200b\u2060-\u2064\ufeff\u180e\xad\U000e0000-\U000e007f]"
)
JOINERS, MARKS = "\u200c\u200d", "\u200e\u200f\u061c"


def _rtl(c: str) -> bool:
    import unicodedata

    return unicodedata.bidirectional(c) in ("R", "AL")


@given(texts)
def test_printable_shows_every_invisible_character_as_an_escape(text: str) -> None:
    for shown in (printable(text), esc(text), md_inline(text), md_text(text)):
        assert NEVER.search(shown) is None, shown  # overrides, isolates, zero-width, tags
        for at, c in enumerate(shown):  # a joiner or a mark only where a script needs it
            before, after = shown[at - 1 : at], shown[at + 1 : at + 2]
            if c in JOINERS:
                assert before and (ord(before) >= 0x590 or ord(before) >= 0x2000), shown
            if c in MARKS:
                assert _rtl(before or " ") or _rtl(after or " "), shown
    # a joiner is left only between two pictographs or after a letter of a script written
    # with joiners, a direction mark only beside right-to-left letters
    assert "\u200d" not in printable("a\u200db") and printable("a\u200db") == "a\\u200db"
    assert printable("examp\u200cle.com") == "examp\\u200cle.com"
    assert printable("abc\u200fdef") == "abc\\u200fdef"
    assert printable("DE89 \u202e0099") == "DE89 \\u202e0099"


def test_scripts_written_with_joiners_and_marks_show_as_written() -> None:
    for text in (
        "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645",  # Persian "I want", a ZWNJ
        "\u0d28\u0d4d\u200d",  # a Malayalam chillu: consonant, virama, ZWJ
        "\u05e9\u05dc\u05d5\u05dd\u200f (Tel Aviv)",  # Hebrew with a right-to-left mark
    ):
        assert printable(text) == text and esc(text) == text
    assert printable("x\U000e0041") == "x\\U000e0041"


@given(st.dictionaries(texts, texts | st.integers(), max_size=5))
def test_the_json_the_editor_starts_from_shows_them_and_parses_back_the_same(
    value: dict[str, Any],
) -> None:
    text, whole = json_preview(value)
    assert whole and json.loads(text) == value
    assert HIDDEN.search(text) is None


RAN: list[str] = []


class Transfer(Tool):
    """Transfer money to an IBAN."""

    requires_approval = True

    def execute(self, iban: str, amount: int) -> str:
        RAN.append(iban)
        return "sent"


def test_a_bidi_override_in_the_arguments_shows_as_an_escape_and_the_real_value_runs() -> None:
    actual = "DE89 \u202e0099 1234 5678"  # drawn as "DE89 8765 4321 9900" by a browser
    RAN.clear()
    chat = Chat(
        provider=ScriptedProvider(
            [call_tools(("transfer", {"iban": actual, "amount": 5000}, "t1")), reply("ok")]
        ),
        display=False,
    ).with_tools(Transfer)
    view = ChatView(chat)
    chat.ask("pay the invoice")
    (card,) = [w for w in widgets_in(view) if isinstance(w, ActionCard)]
    shown = [card.value, card.arguments, *chat_mimebundle(chat).values()]
    shown += [w.value for w in widgets_in(view) if isinstance(w, ipywidgets.HTML)]
    for text in shown:
        assert "\u202e" not in text
    assert "DE89 \\u202e0099" in card.value
    card.click("edit", arguments=card.arguments)  # the editor's text, approved as it is
    assert continuation_for(chat).wait(10)
    assert [actual] == RAN
