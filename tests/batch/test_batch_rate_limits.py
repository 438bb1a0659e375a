"""Rate limits: a 429 storm with retry-after from the (strict) fake server, through the
real SDK; the batch halves its concurrency, waits what the server said, and grows back."""

from __future__ import annotations

import threading
import time

import pytest
from _batch_setup import Rounds, first_user_text, lookup

import nbagent
from nbagent import Chat
from nbagent._aio import run_sync
from nbagent.batch._limits import AdaptiveLimit
from nbagent.batch._local import LocalBackend
from nbagent.providers import OpenAIProvider
from nbagent.testing import FakeLLMServer, RecordedRequest, Turn

KEY = "sk-test-batch-0000000000000000"
RETRY_AFTER = 0.2


class Storm:
    """A server that serves ``per_window`` requests at once: each answer takes ``window``
    seconds, and a request arriving while ``per_window`` are being answered gets a 429
    saying ``retry-after``. Records when each prompt was refused and when it came back."""

    def __init__(self, per_window: int, window: float = 0.15) -> None:
        self.per_window, self.window = per_window, window
        self.inner = Rounds(rounds=1)
        self.lock = threading.Lock()
        self.stamps: list[float] = []
        self.refused: dict[str, list[float]] = {}
        self.seen: dict[str, list[float]] = {}

    def __call__(self, request: RecordedRequest) -> Turn | str:
        now = time.monotonic()
        prompt = first_user_text(request)
        with self.lock:
            self.seen.setdefault(prompt, []).append(now)
            self.stamps = [t for t in self.stamps if now - t < self.window]
            if len(self.stamps) >= self.per_window:
                self.refused.setdefault(prompt, []).append(now)
                return Turn(
                    status=429,
                    retry_after=RETRY_AFTER,
                    error={"message": "Rate limit reached", "type": "rate_limit_error"},
                )
            self.stamps.append(now)
        turn = self.inner(request)
        assert isinstance(turn, Turn)
        turn.delay = self.window
        return turn


def test_a_429_storm_shrinks_concurrency_waits_retry_after_and_every_row_finishes() -> None:
    storm = Storm(per_window=4)
    backend = LocalBackend()
    with FakeLLMServer(handler=storm, strict=True) as server:
        # the SDK does not retry here: every 429 reaches the batch (no double retry)
        provider = OpenAIProvider(
            "gpt-4.1-mini", base_url=server.openai_base_url, api_key=KEY, max_retries=0
        )
        try:
            result = nbagent.batch(
                [f"p{i}" for i in range(16)],
                lambda: Chat(provider=provider).with_tools(lookup),
                concurrency=16,
                backend=backend,
                progress=False,
            )
        finally:
            run_sync(provider.aclose())
    assert (result["status"] == "done").all(), result[["status", "error"]]
    assert storm.refused, "the storm refused nothing: the test proves nothing"
    assert backend.limit is not None and backend.limit.decreases >= 1
    # each refused request came back no sooner than retry-after said (the SDK's own
    # retry is off, so the next request of that prompt is the batch's continuation)
    for prompt, refused in storm.refused.items():
        for t in refused:
            later = [s for s in storm.seen[prompt] if s > t]
            assert later and later[0] - t >= RETRY_AFTER * 0.95, (prompt, later[0] - t)
    # a continuation resends only the refused request: one answered request per round
    answered = sum(len(v) for v in storm.seen.values()) - sum(
        len(v) for v in storm.refused.values()
    )
    assert answered == 16 * 2
    assert len(nbagent.read_log(result)) == 16  # one tool call each, none run twice


@pytest.mark.parametrize(
    ("retries", "said"),
    [
        (0, "(max_rate_limit_retries=0: not waited out)"),
        (1, "(still rate limited after 1 wait)"),
        (2, "(still rate limited after 2 waits)"),
    ],
)
def test_a_row_still_rate_limited_after_its_retries_fails_with_the_rate_limit_error(
    retries: int, said: str
) -> None:
    """The error counts the waits the row made: it said "after 1 waits" with
    ``max_rate_limit_retries=0`` (it waited none) and "after 3 waits" with 2."""

    def always(request: RecordedRequest) -> Turn:
        return Turn(status=429, retry_after=0, error={"message": "Rate limit reached"})

    with FakeLLMServer(handler=always) as server:
        provider = OpenAIProvider(
            "gpt-4.1-mini", base_url=server.openai_base_url, api_key=KEY, max_retries=0
        )
        try:
            result = nbagent.batch(
                ["a", "b"],
                lambda: Chat(provider=provider),
                max_rate_limit_retries=retries,
                progress=False,
            )
        finally:
            run_sync(provider.aclose())
        assert len(server.requests) == 2 * (1 + retries)  # the first try and the continuations
    assert list(result["status"]) == ["failed", "failed"]
    assert set(result["error_type"]) == {"RateLimitError"}
    assert "Rate limit reached" in result.loc[0, "error"]
    assert result.loc[0, "error"].endswith(said), result.loc[0, "error"]


def test_the_sdk_retries_first_and_a_storm_it_absorbs_never_reaches_the_batch() -> None:
    calls = {"n": 0}

    def every_other(request: RecordedRequest) -> Turn | str:
        calls["n"] += 1
        if calls["n"] % 2:
            return Turn(status=429, retry_after=0.01, error={"message": "slow down"})
        return "fine"

    backend = LocalBackend()
    with FakeLLMServer(handler=every_other) as server:
        provider = OpenAIProvider(
            "gpt-4.1-mini", base_url=server.openai_base_url, api_key=KEY, max_retries=2
        )
        try:
            result = nbagent.batch(
                ["a", "b", "c"],
                lambda: Chat(provider=provider),
                concurrency=1,
                backend=backend,
                progress=False,
            )
        finally:
            run_sync(provider.aclose())
        assert len(server.requests) == 6
    assert (result["status"] == "done").all()
    assert backend.limit is not None and backend.limit.decreases == 0


def test_retry_after_is_read_from_the_providers_error() -> None:
    with FakeLLMServer([Turn(status=429, retry_after=7, error={"message": "wait"})]) as server:
        chat = Chat(
            provider=OpenAIProvider(
                "gpt-4.1-mini", base_url=server.openai_base_url, api_key=KEY, max_retries=0
            )
        )
        with pytest.raises(nbagent.RateLimitError) as info:
            chat.ask("hi")
    assert info.value.retry_after == 7


async def _limit_walk() -> list[int]:
    limit = AdaptiveLimit(8, cooldown=0)
    seen = [limit.limit]
    limit.rate_limited()
    seen.append(limit.limit)
    limit.rate_limited()
    seen.append(limit.limit)
    for _ in range(2 + 3):  # 2 successes add one slot at 2, then 3 at 3
        limit.succeeded()
    seen.append(limit.limit)
    return seen


def test_the_limit_halves_on_a_429_and_grows_back_one_slot_per_limit_successes() -> None:
    assert run_sync(_limit_walk()) == [8, 4, 2, 4]
