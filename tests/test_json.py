"""The compact encoders built once (``nbagent._json``) write exactly what the standard
encoder writes: a recording's key (a digest of this text) and a store's rows must not
change with the encoder."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from nbagent._json import compact_encoder

_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(_values, st.booleans())
def test_the_text_is_the_standard_encoders(value: Any, sort_keys: bool) -> None:
    standard = json.dumps(
        value, sort_keys=sort_keys, separators=(",", ":"), ensure_ascii=False, default=str
    )
    assert compact_encoder(sort_keys=sort_keys)(value) == standard


def test_a_value_json_cannot_hold_is_its_str() -> None:
    assert compact_encoder()({"when": object}) == json.dumps(
        {"when": str(object)}, separators=(",", ":")
    )
