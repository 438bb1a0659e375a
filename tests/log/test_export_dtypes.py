"""log.to_csv / to_parquet give any frame back as it was written: each column's own dtype
is in the file (the readers chose dtypes by column name, so a batch's ``status`` 'done'
came back NA and a float ``step`` raised); a literal ``<NA>`` string stays a string; files
written before the dtypes were recorded still read."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nbagent
from nbagent import Chat, log, tool
from nbagent.log._projection import dtypes
from nbagent.testing import ScriptedProvider, call_tools, reply

FORMATS = {
    "csv": (log.to_csv, log.read_csv),
    "parquet": (log.to_parquet, log.read_parquet),
}
LEGACY = Path(__file__).parent / "legacy"  # written by nbagent before this change


def _round_trip(fmt: str, df: pd.DataFrame, path: Path) -> pd.DataFrame:
    write, read = FORMATS[fmt]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # pandas' "could not serialize attrs", "Categorical..."
        return read(write(df, path))


@tool(requires_approval=True)
def refund(order_id: int) -> str:
    """Refund an order.

    Args:
        order_id: The order number.
    """
    return "refunded"


@tool
def echo(s: str) -> str:
    """Echo."""
    return s


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_batch_result_comes_back_with_its_statuses(fmt: str, tmp_path: Path) -> None:
    result = nbagent.batch(
        ["hello", "Refund order 42", "hi"],
        lambda: Chat("demo").with_tools(refund),
        progress=False,
    )
    assert set(result["status"]) == {"done", "awaiting_approval"}
    back = _round_trip(fmt, result, tmp_path / f"r.{fmt}")
    pd.testing.assert_frame_equal(back, result)
    assert back.attrs == {}  # the run stays behind, without a warning


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_scorecard_comes_back_with_its_statuses(fmt: str, tmp_path: Path) -> None:
    from nbagent.evaluation import answer_contains

    cases = pd.DataFrame({"q": ["hello", "hi"]})
    card = nbagent.evaluate(
        cases, lambda: Chat("demo"), [answer_contains("zzz")], prompt="{q}", progress=False
    )
    assert card["status"].notna().all()
    back = _round_trip(fmt, card, tmp_path / f"c.{fmt}")
    pd.testing.assert_frame_equal(back, card, check_frame_type=False)  # a plain frame back


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_users_frame_keeps_the_dtypes_of_columns_named_like_the_logs(
    fmt: str, tmp_path: Path
) -> None:
    tickets = pd.DataFrame(
        {
            "ticket": [1, 2],
            "status": ["open", "closed"],
            "model": ["x", "y"],
            "step": [1.5, 2.0],
            "decision": pd.Categorical(["yes", "no"]),
            "turn": pd.array([True, None], dtype="boolean"),
        }
    )
    back = _round_trip(fmt, tickets, tmp_path / f"t.{fmt}")
    pd.testing.assert_frame_equal(back, tickets)


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_literal_na_token_is_a_string_and_missing_is_missing(fmt: str, tmp_path: Path) -> None:
    weird = ["<NA>", "\\<NA>", "\\\\<NA>", "", "NA", "nan", "None", "<NA> ", "a\\<NA>"]
    calls = [("echo", {"s": w}, f"e{i}") for i, w in enumerate(weird)]
    chat = Chat(provider=ScriptedProvider([call_tools(*calls), reply("done")])).with_tools(echo)
    chat.ask("go")
    df = nbagent.read_log(chat)
    assert df["result_preview"].tolist() == weird
    back = _round_trip(fmt, df, tmp_path / f"x.{fmt}")
    pd.testing.assert_frame_equal(back, df, check_exact=True)
    assert back["error"].isna().all() and back["result_preview"].notna().all()


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("kind", ["calls", "steps", "messages"])
def test_log_frames_round_trip_exactly(fmt: str, kind: str, tmp_path: Path) -> None:
    chat = Chat(
        provider=ScriptedProvider(
            [call_tools(("echo", {"s": "<NA>"}), ("refund", {"order_id": 1})), reply("<NA>")]
        )
    ).with_tools(echo, refund)
    chat.ask("go")
    chat.deny(chat.pending_approvals[0], reason="<NA>")
    chat.complete()
    df = nbagent.read_log(chat, kind)
    back = _round_trip(fmt, df, tmp_path / f"{kind}.{fmt}")
    pd.testing.assert_frame_equal(back, df, check_exact=True)
    assert back.dtypes.to_dict() == dtypes(kind)


def test_the_csv_says_its_dtypes_on_a_first_line_another_reader_skips(tmp_path: Path) -> None:
    df = pd.DataFrame({"status": ["done"], "n": pd.array([None], dtype="Int64")})
    path = log.to_csv(df, tmp_path / "x.csv")
    assert path.read_text(encoding="utf-8").startswith("#nbagent {")
    plain = pd.read_csv(path, skiprows=1)
    assert plain.columns.tolist() == ["status", "n"] and plain["status"].tolist() == ["done"]


text = st.text(st.sampled_from(["<", "N", "A", ">", "\\", ",", '"', "\n", "x", " ", "$"]))


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    values=st.lists(st.one_of(st.none(), text, st.sampled_from(["<NA>", "\\<NA>"])), max_size=6),
    floats=st.lists(
        st.one_of(st.none(), st.floats(allow_nan=False, allow_infinity=False)),
        min_size=6,
        max_size=6,
    ),
    name=st.sampled_from(["status", "step", "model", "tool", "other"]),
)
def test_any_text_and_numbers_round_trip(
    tmp_path: Path, values: list[Any], floats: list[Any], name: str
) -> None:
    n = len(values)
    df = pd.DataFrame(
        {
            name: pd.array(values, dtype="string"),
            "as_category": pd.Categorical(values),
            "plain": pd.Series(values, dtype=object),
            "x": pd.array(floats[:n], dtype="Float64"),
        }
    )
    for fmt in FORMATS:
        back = _round_trip(fmt, df, tmp_path / f"h.{fmt}")
        pd.testing.assert_frame_equal(back, df, check_exact=True)


# ------------------------------------------------------------- files of the old format
def test_old_csv_and_parquet_log_files_still_read() -> None:
    for name in ("calls_v1.csv", "calls_v1.parquet"):
        read = log.read_csv if name.endswith(".csv") else log.read_parquet
        df = read(LEGACY / name)
        assert df.dtypes.to_dict() == dtypes("calls")
        assert df["tool"].tolist() == ["echo", "echo", "refund"]
        assert df["status"].tolist() == ["ok", "ok", "denied"]
        assert df["result_preview"].tolist()[:2] == ["hi", ""]
        assert df["arguments"].tolist()[2] == {"order_id": 1}
    steps = log.read_csv(LEGACY / "steps_v1.csv")
    assert steps.dtypes.to_dict() == dtypes("steps")


def test_an_old_batch_file_keeps_its_statuses() -> None:
    """The old reader wiped a batch's ``status`` ('done' is no call status): an old file
    still holds them, and they are read as they are."""
    for back in (
        log.read_csv(LEGACY / "batch_v1.csv"),
        log.read_parquet(LEGACY / "batch_v1.parquet"),
    ):
        assert back["status"].tolist() == ["done", "done"]
