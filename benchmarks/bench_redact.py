"""redact_keys reads a text once: the worst texts cost what an ordinary one of the same
length does.

Every tool result and error text passes through ``redact_keys`` before the model, the log
and the store see it. Two shapes of text made it quadratic (each start of a long word tried
the URL-credentials expression; each prefix of a run like ``sk-sk-sk-...`` rescanned the
run for a digit): 4-6 s for 40,000 characters. Cookies and Basic credentials are read a part
at a time: a header of thousands of cookies is the most parts a text of its length holds.
Target: each worst case at most 3x an ordinary text of the same length holding a key and a
URL with credentials, in the same run.
"""

from __future__ import annotations

from benchmarks._common import Result, interleaved
from nbagent._errors import redact_keys

SIZE = 40_000
ORDINARY = (
    "order 42 refunded via https://me:s3cret@api.example/v1 with key "
    "sk-proj-abcdefghij0123456789 and the rest is prose about the weather. "
) * (SIZE // 130)
WORST = {
    "a long word and an @": "a" * SIZE + "@",
    "a run of key prefixes": "sk-" * (SIZE // 3),
    "a run of URL schemes": "x://" * (SIZE // 4) + "@",
    # each cookie's value is hidden, each Set-Cookie attribute read: a loop step a part
    "a Cookie header of many cookies": "Cookie: " + "a=b; " * (SIZE // 5),
    "Set-Cookie headers joined": "Set-Cookie: " + "a=b, Path=/, " * (SIZE // 13),
    "Set-Cookie values without names": "Set-Cookie: " + "YWJjZA0x/A==, " * (SIZE // 14),
    "quoted cookies in JSON": '{"Set-Cookie": "' + 'a=\\"b\\"; ' * (SIZE // 10) + '"}',
    "Authorization: a scheme again": "Authorization: Token " * (SIZE // 21),
    "Authorization: Basic again": "Authorization: Basic Basic " * (SIZE // 27),
}


def run(quick: bool = False) -> list[Result]:
    repeat = 5 if quick else 15
    fns = {"ordinary": lambda: redact_keys(ORDINARY)}
    fns.update({name: (lambda t=text: redact_keys(t)) for name, text in WORST.items()})
    times = interleaved(fns, repeat)
    base = times["ordinary"][1] or 1e-9
    results = []
    for name in WORST:
        ratio = times[name][1] / base
        results.append(
            Result(
                f"redact_keys, {name} ({SIZE:,} chars) / ordinary text",
                ratio,
                "x",
                "<= 3x",
                ratio <= 3.0,
                f"{times[name][1] * 1000:.2f} ms CPU vs {base * 1000:.2f} ms",
            )
        )
    return results
