"""log.to_csv / read_csv and to_parquet / read_parquet with any frame, not only the log's.

Parquet keeps each column's dtype exactly (it is in the file's metadata). A CSV file is a
plain CSV any tool reads (the '#nbagent {...}' first line that recorded the dtypes was a
junk first row in Excel and garbage headers for ``pd.read_csv``): read_csv gives the log's
frames back with their dtypes, and a column named like the log's gets the log's dtype only
where its values fit it (the readers once wiped a batch's ``status`` 'done' to NA and raised
on a float ``step``). A literal ``<NA>`` string stays a string. Files written with the first
line, and files written before dtypes were recorded, still read.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nbagent
from nbagent import Chat, log, tool
from nbagent.log import _known_kinds
from nbagent.log._projection import dtypes, pandas_dtype
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


def _same(got: Any, want: Any) -> bool:
    """One value read back from a plain CSV file as it was written: missing as missing,
    text as the same text, a flag as the same flag, a number as an equal number."""
    if isinstance(want, (dict, list)):
        return bool(got == want)
    if pd.isna(want):
        return not isinstance(got, (dict, list)) and bool(pd.isna(got))
    if isinstance(got, (dict, list)) or pd.isna(got):
        return False
    if isinstance(want, str) or isinstance(got, str):
        return isinstance(want, str) and isinstance(got, str) and got == want
    flag = (bool, np.bool_)
    if isinstance(want, flag) or isinstance(got, flag):
        return isinstance(want, flag) and isinstance(got, flag) and bool(got == want)
    return bool(got == want)


def _same_values(back: pd.DataFrame, df: pd.DataFrame) -> None:
    """``back`` holds ``df``'s columns, rows and values (a plain CSV says no dtypes: the
    dtypes may differ, never a value)."""
    assert back.columns.tolist() == df.columns.tolist() and len(back) == len(df)
    for name in df.columns:
        for i, (got, want) in enumerate(zip(back[name], df[name], strict=True)):
            assert _same(got, want), (name, i, got, want)


def _batch() -> pd.DataFrame:
    result = nbagent.batch(
        ["hello", "Refund order 42", "hi"],
        lambda: Chat("demo").with_tools(refund),
        progress=False,
    )
    assert set(result["status"]) == {"done", "awaiting_approval"}
    return result


def _scorecard() -> pd.DataFrame:
    from nbagent.evaluation import answer_contains

    cases = pd.DataFrame({"q": ["hello", "hi"]})
    card = nbagent.evaluate(
        cases, lambda: Chat("demo"), [answer_contains("zzz")], prompt="{q}", progress=False
    )
    assert card["status"].notna().all()
    return card


def test_a_batch_result_comes_back_with_its_statuses_and_values(tmp_path: Path) -> None:
    result = _batch()
    back = _round_trip("parquet", result, tmp_path / "r.parquet")
    pd.testing.assert_frame_equal(back, result)  # Parquet: every dtype too
    assert back.attrs == {}  # the run stays behind, without a warning
    back = _round_trip("csv", result, tmp_path / "r.csv")
    assert back["status"].tolist() == result["status"].tolist()  # not NA
    assert back["key"].astype(str).tolist() == result["key"].tolist()  # '0': a CSV can't say
    _same_values(back.drop(columns="key"), result.drop(columns="key"))
    assert back.attrs == {}


def test_a_scorecard_comes_back_with_its_statuses_and_values(tmp_path: Path) -> None:
    card = _scorecard()
    back = _round_trip("parquet", card, tmp_path / "c.parquet")
    pd.testing.assert_frame_equal(back, card, check_frame_type=False)  # a plain frame back
    back = _round_trip("csv", card, tmp_path / "c.csv")
    assert back["status"].tolist() == card["status"].tolist()
    assert back["case"].astype(str).tolist() == card["case"].tolist()
    _same_values(back.drop(columns="case"), card.drop(columns="case"))


def _tickets() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "ticket": [1, 2],
            "status": ["open", "closed"],
            "model": ["x", "y"],
            "step": [1.5, 2.0],
            "decision": pd.Categorical(["yes", "no"]),
            "turn": pd.array([True, None], dtype="boolean"),
            "arguments": ["not json", "{"],
            "started_at": ["monday", "tuesday"],
        }
    )


def test_a_users_frame_with_columns_named_like_the_logs(tmp_path: Path) -> None:
    tickets = _tickets()
    back = _round_trip("parquet", tickets, tmp_path / "t.parquet")
    pd.testing.assert_frame_equal(back, tickets)
    back = _round_trip("csv", tickets, tmp_path / "t.csv")  # the float step raised
    _same_values(back, tickets)
    assert back["step"].tolist() == [1.5, 2.0]
    assert back["turn"].tolist()[0] is True  # flags are not made the log's Int64 turn
    assert back["status"].tolist() == ["open", "closed"]


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


def test_the_csv_is_a_plain_csv_any_reader_reads(tmp_path: Path) -> None:
    """No first line of nbagent's own: ``pd.read_csv(path)`` (and Excel, Sheets...) read
    the columns and rows to_csv wrote, the header first."""
    chat = Chat(
        provider=ScriptedProvider(
            [call_tools(("echo", {"s": "<NA>"}), ("echo", {"s": 'a,\n"b"'})), reply("ok")]
        )
    ).with_tools(echo)
    chat.ask("go")
    frames = {
        "calls": nbagent.read_log(chat),
        "steps": nbagent.read_log(chat, "steps"),
        "summary": log.summary(chat).reset_index(),  # its index is written as a column
        "batch": _batch(),
        "scorecard": _scorecard(),
    }
    for what, df in frames.items():
        path = log.to_csv(df, tmp_path / f"{what}.csv")
        assert path.read_text(encoding="utf-8").split("\n", 1)[0] == ",".join(df.columns)
        plain = pd.read_csv(path)
        assert plain.columns.tolist() == df.columns.tolist(), what
        assert len(plain) == len(df), what
        if "status" in df:
            assert plain["status"].tolist() == df["status"].astype(object).tolist(), what


text = st.text(st.sampled_from(["<", "N", "A", ">", "\\", ",", '"', "\n", "x", " ", "$"]))
LOG_NAMES = ["status", "decision", "step", "model", "tool", "stop_reason", "other"]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    values=st.lists(
        st.one_of(
            st.none(),
            text,
            st.sampled_from(["<NA>", "\\<NA>", "ok", "denied", "done", "end", "auto"]),
        ),
        max_size=6,
    ),
    floats=st.lists(
        st.one_of(st.none(), st.floats(allow_nan=False, allow_infinity=False)),
        min_size=6,
        max_size=6,
    ),
    ints=st.lists(st.one_of(st.none(), st.integers(-(2**53), 2**53)), min_size=6, max_size=6),
    name=st.sampled_from(LOG_NAMES),
)
def test_any_text_and_numbers_round_trip(
    tmp_path: Path, values: list[Any], floats: list[Any], ints: list[Any], name: str
) -> None:
    """Parquet gives back every dtype; CSV every value, and the log's dtype to a column
    named like the log's exactly when its values fit it."""
    n = len(values)
    df = pd.DataFrame(
        {
            name: pd.Series(values, dtype=object),
            "as_category": pd.Categorical(values),
            "as_string": pd.array(values, dtype="string"),
            "x": pd.array(floats[:n], dtype="Float64"),
            "turn": pd.array(ints[:n], dtype="Int64"),
        }
    )
    pd.testing.assert_frame_equal(
        _round_trip("parquet", df, tmp_path / "h.parquet"), df, check_exact=True
    )
    back = _round_trip("csv", df, tmp_path / "h.csv")
    _same_values(back, df)
    assert back["turn"].dtype == "Int64"
    kind = _known_kinds().get(name)
    if kind is not None:
        want = pandas_dtype(kind)
        present = [v for v in values if v is not None]
        fits = (
            all(v in want.categories for v in present)
            if isinstance(want, pd.CategoricalDtype)
            else isinstance(want, pd.StringDtype) or not present
        )
        assert (back[name].dtype == want) is fits, (back[name].dtype, want)


@pytest.mark.parametrize("fmt", FORMATS)
def test_empty_frames_round_trip(fmt: str, tmp_path: Path) -> None:
    assert _round_trip(fmt, pd.DataFrame(), tmp_path / f"none.{fmt}").empty
    calls = nbagent.read_log(Chat(model="demo"))
    back = _round_trip(fmt, calls, tmp_path / f"calls.{fmt}")
    pd.testing.assert_frame_equal(back, calls)


def test_a_csv_file_with_the_dtypes_line_still_reads() -> None:
    """Files nbagent wrote with a '#nbagent {...}' first line read with those dtypes."""
    calls = log.read_csv(LEGACY / "calls_v2.csv")
    assert calls.dtypes.to_dict() == dtypes("calls")
    assert calls["status"].tolist() == ["ok", "ok", "denied"]
    assert calls["result_preview"].tolist()[:2] == ["<NA>", "42"]
    assert calls["arguments"].tolist() == [{"s": "<NA>"}, {"s": "42"}, {"order_id": 1}]
    batch = log.read_csv(LEGACY / "batch_v2.csv")
    assert batch["status"].tolist() == ["done", "awaiting_approval"]
    assert batch["key"].tolist() == ["0", "1"] and batch["key"].dtype == "string"


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
