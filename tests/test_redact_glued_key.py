"""A key glued after an underscore (``use_sk-proj-...``, as a model may write it in a tool's
name) is a key: ``\\b`` does not match after ``_``, so it was shown whole (and the model read it).
Prefixes with a hyphen (``sk-``, ``xai-``, ``pplx-``, ``nvapi-``) cannot be part of an
identifier, so an identifier (``load_hf_checkpoint2024v1``) still reads as one."""

from __future__ import annotations

import string

from hypothesis import given, settings
from hypothesis import strategies as st

from nbagent._secrets import redact_keys, scrub_keys

KEYS = (
    "sk-proj-Abc123Def456Ghi789Jkl012",
    "sk-ant-api03-abcdefghij0123456789",
    "xai-abcDEF0123456789ghijKLMN",
    "pplx-abcDEF0123456789ghijKLMN",
    "nvapi-abcDEF0123456789ghijKLMN_x-yz1234",
)


def test_a_key_glued_after_an_underscore_is_hidden() -> None:
    for key in KEYS:
        for text in (f"use_{key}", f"tool_{key} now", f"__{key}"):
            shown = redact_keys(text)
            assert key not in shown and "***" in shown, shown
            assert key not in scrub_keys(text, ()), text


def test_identifiers_with_a_prefix_after_an_underscore_stay() -> None:
    for name in (
        "load_hf_checkpoint2024v1abc",
        "my_gsk_abcDEF0123456789ghij",
        "use_r8_abcDEF0123456789ghij",
        "cfg_AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStU",
        "disk_skew_2024_0123456789",
    ):
        assert redact_keys(f"uses {name}") == f"uses {name}"


@settings(max_examples=300)
@given(
    st.text(string.ascii_lowercase, min_size=1, max_size=6),
    st.text(string.ascii_letters + string.digits + "_", max_size=40),
)
def test_an_identifier_after_a_word_and_an_underscore_is_never_read_as_a_key(
    word: str, rest: str
) -> None:
    name = f"{word}_{rest}"
    assert redact_keys(f"call {name} now") == f"call {name} now"
