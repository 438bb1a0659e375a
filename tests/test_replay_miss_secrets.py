"""``ReplayMissError`` never shows a secret of the message it quotes.

A miss says which message differs and quotes it: a user message or a tool result
holding an API key or a URL's password was quoted as it was, in the exception (and
wherever it is shown or logged). The quote now goes through ``redact_keys``, before
it is cut (a key cut short is no longer recognisable).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nbagent import Chat, ReplayMissError
from nbagent._replay import PROCESS


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    PROCESS.clear()
    yield
    PROCESS.clear()


SECRETS = [
    (
        "sk-proj-ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789abcd",
        "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789abcd",
    ),
    ("sk-ant-api03-QWERTYUIOPASDFGHJKLZXCVBNM0123456789", "QWERTYUIOPASDFGHJKLZXCVBNM0123456789"),
    ("postgresql://app:Hunter2Secret@db.example.com/prod", "Hunter2Secret"),
    ("https://bob:Tr0ub4dor3xyz@git.example.com/repo.git", "Tr0ub4dor3xyz"),
]


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    secret=st.sampled_from(SECRETS),
    before=st.text(alphabet="abc ", max_size=90),
    after=st.text(alphabet="xyz ", max_size=20),
)
def test_a_miss_never_quotes_a_secret(
    tmp_path_factory: pytest.TempPathFactory, secret: tuple[str, str], before: str, after: str
) -> None:
    folder: Path = tmp_path_factory.mktemp("rec")
    Chat("demo", replay="auto", recordings=folder, display=False).ask("hello")
    PROCESS.clear()
    chat = Chat("demo", replay="only", recordings=folder, display=False)
    text, hidden = secret
    with pytest.raises(ReplayMissError) as caught:
        chat.ask(f"{before} {text} {after}")
    message = str(caught.value)
    assert "message 1 (user)" in message  # it still says which message differs
    assert hidden not in message
    assert hidden[:12] not in message  # nor the start of it, cut short
