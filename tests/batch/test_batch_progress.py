"""The progress display: the widget's states in-process (no kernel), the terminal bar,
and the totals (counts, tokens, cost, ETA) it shows."""

from __future__ import annotations

import io

import pytest
from hypothesis import given
from hypothesis import strategies as st

import nbagent
from nbagent import Chat
from nbagent._display import WIDGET_MIME
from nbagent.batch import RowUpdate
from nbagent.batch._display import TerminalDisplay, WidgetDisplay
from nbagent.batch._progress import Progress, progress_html, progress_text
from nbagent.testing import ScriptedProvider, reply


def _progress() -> Progress:
    p = Progress([f"k{i}" for i in range(6)])
    p.apply(RowUpdate("k0", "running", "c0", 10, 5, 0.001))
    p.apply(RowUpdate("k0", "done", "c0", 20, 10, 0.002))
    p.apply(RowUpdate("k1", "running", "c1", 7, 0, 0.0005))
    p.apply(RowUpdate("k2", "awaiting_approval", "c2", 30, 3, 0.003))
    p.apply(RowUpdate("k3", "failed", None))
    return p


def test_the_totals_follow_each_rows_latest_update() -> None:
    snap = _progress().snapshot()
    assert snap.counts == {
        "queued": 2,
        "running": 1,
        "awaiting_approval": 1,
        "done": 1,
        "failed": 1,
    }
    assert (snap.input_tokens, snap.output_tokens) == (57, 13)  # k0 counted once, at 20+10
    assert snap.cost_usd == pytest.approx(0.0055)
    assert snap.settled == 3
    assert snap.eta is None  # too few rows finished to say


def test_an_unpriced_row_makes_the_cost_unknown_not_understated() -> None:
    p = _progress()
    p.apply(RowUpdate("k4", "done", "c4", 1, 1, None))
    assert p.snapshot().cost_usd is None
    assert "cost n/a" in progress_text(p.snapshot())


def test_the_eta_comes_from_the_rate_rows_finished_at() -> None:
    p = Progress([f"k{i}" for i in range(10)])
    for i in range(5):
        p.apply(RowUpdate(f"k{i}", "done"))
    snap = p.snapshot()
    assert snap.eta is not None and snap.eta == pytest.approx(snap.elapsed, rel=0.01)  # 5 left
    for i in range(5, 10):
        p.apply(RowUpdate(f"k{i}", "awaiting_approval"))
    assert p.snapshot().eta == 0.0  # what is left waits for people, not for the batch


def test_the_widget_shows_each_state_and_ends_static() -> None:
    p = _progress()
    display = WidgetDisplay(p, title="refunds <b>&")
    display.tick()
    html = display.widget.value
    for status, n in [
        ("queued", 2),
        ("running", 1),
        ("awaiting_approval", 1),
        ("done", 1),
        ("failed", 1),
    ]:
        assert f'data-status="{status}"' in html
        assert f"<b>{n}</b>" in html
    assert "refunds &lt;b&gt;&amp;" in html and "<b>&" not in html  # the title is escaped
    assert "50 tokens" not in html and "70 tokens" in html
    live = display.output.bundle()
    assert WIDGET_MIME in live and "text/html" in live and "text/plain" in live
    p.apply(RowUpdate("k2", "done", "c2", 30, 3, 0.003))
    display.tick()
    assert display.widget.value.count("<b>2</b>") == 2  # done 2, queued 2
    display.stop(final=True)
    assert display.closed
    # every model of it closed: the widget, its layout and its style (two models a batch
    # were left open in the kernel and the page)
    models = [display.widget, display.widget.layout, display.widget.style]
    assert [m.comm for m in models] == [None] * 3
    final = display.output.bundle()
    assert WIDGET_MIME not in final
    assert "done 2/6" in final["text/plain"]
    before = display.widget.value
    p.apply(RowUpdate("k1", "done"))
    display.tick()  # closed: nothing changes any more
    assert display.widget.value == before


def test_the_terminal_bar_is_not_spammy_off_a_tty() -> None:
    keys = [f"k{i}" for i in range(200)]
    p = Progress(keys)
    stream = io.StringIO()
    display = TerminalDisplay(p, stream=stream)
    for k in keys:
        p.apply(RowUpdate(k, "running"))
        display.tick()
        p.apply(RowUpdate(k, "done", None, 1, 1, 0.0))
        display.tick()
    display.stop(final=True)
    lines = stream.getvalue().splitlines()
    assert 5 <= len(lines) <= 12  # one per 10 % and the last
    assert lines[-1].startswith("nbagent: batch done 200/200")
    assert "400 tokens" in lines[-1]


def test_on_a_tty_the_bar_redraws_one_line_in_place() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    p = Progress(["a", "b"])
    stream = Tty()
    display = TerminalDisplay(p, stream=stream)
    p.apply(RowUpdate("a", "done"))
    display.tick()
    p.apply(RowUpdate("b", "failed"))
    display.stop(final=True)
    text = stream.getvalue()
    assert text.count("\n") == 1 and text.endswith("\n")
    assert text.count("\r") == 2
    assert "[########################]" in text


def test_a_batch_in_a_terminal_reports_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    result = nbagent.batch(
        [f"q{i}" for i in range(30)],
        lambda: Chat(provider=ScriptedProvider([reply("ok")])),
        progress="text",
    )
    assert (result["status"] == "done").all()
    err = capsys.readouterr().err.splitlines()
    assert 1 <= len(err) <= 12
    assert err[-1].startswith("nbagent: batch done 30/30")


def test_a_row_that_cannot_be_formatted_counts_as_failed_not_queued(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rows = [{"title": "a"}, {"other": 1}, {"title": "c"}]
    make = lambda: Chat(provider=ScriptedProvider([reply("ok")]))  # noqa: E731
    result = nbagent.batch(rows, make, prompt="{title}", progress="text")
    assert list(result["status"]) == ["done", "failed", "done"]
    run = result.attrs["nbagent_batch"]
    counts = run.progress.snapshot().counts
    assert (counts["done"], counts["failed"], counts["queued"]) == (2, 1, 0)
    last = capsys.readouterr().err.splitlines()[-1]
    assert last.startswith("nbagent: batch done 2/3 · failed 1 ·") and "queued" not in last


def test_progress_html_has_only_numbers_and_fixed_words() -> None:
    html = progress_html(_progress().snapshot(), title="t")
    assert "<script" not in html
    assert "ETA" not in html  # not enough finished rows yet


class _Clock:
    """A hand-moved clock: the working time is checked without waiting."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_time_shown_excludes_time_every_row_waits_for_people() -> None:
    clock = _Clock()
    p = Progress(["a", "b"], clock=clock)
    p.apply(RowUpdate("a", "running"))
    p.apply(RowUpdate("b", "running"))
    clock.now += 4
    p.apply(RowUpdate("a", "done"))
    clock.now += 1
    p.apply(RowUpdate("b", "awaiting_approval"))  # nothing left to work on: the clock stops
    clock.now += 3600  # an hour before someone decides
    assert p.snapshot().elapsed == pytest.approx(5)
    assert "ran 5s" in progress_text(p.snapshot()) and "ran 5s" in progress_html(p.snapshot())
    p.apply(RowUpdate("b", "running"))  # approved: the batch works again
    clock.now += 2
    assert p.snapshot().elapsed == pytest.approx(7)
    p.apply(RowUpdate("b", "done"))
    clock.now += 100
    assert p.snapshot().elapsed == pytest.approx(7)


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["a", "b", "c"]),
            st.sampled_from(["queued", "running", "awaiting_approval", "done", "failed"]),
            st.floats(min_value=0, max_value=1000, allow_nan=False),
        ),
        max_size=30,
    )
)
def test_the_working_time_counts_exactly_the_spans_with_work_left(
    steps: list[tuple[str, str, float]],
) -> None:
    clock = _Clock()
    p = Progress(["a", "b", "c"], clock=clock)
    status = dict.fromkeys("abc", "queued")
    expected = 0.0
    for key, new, gap in steps:
        busy = any(s in ("queued", "running") for s in status.values())
        clock.now += gap
        expected += gap if busy else 0.0
        p.apply(RowUpdate(key, new))  # type: ignore[arg-type]
        status[key] = new
        assert p.snapshot().elapsed == pytest.approx(expected)


def test_the_bar_says_how_parked_rows_continue_with_the_live_count() -> None:
    p = Progress(["a", "b", "c"])
    for k in "abc":
        p.apply(RowUpdate(k, "awaiting_approval"))
    assert "await approval" not in progress_text(p.snapshot())  # nobody watches them yet
    p.parked_hint = True
    assert "3 rows await approval and continue by themselves" in progress_text(p.snapshot())
    assert "3 rows await approval" in progress_html(p.snapshot())
    p.apply(RowUpdate("a", "done"))
    p.apply(RowUpdate("b", "done"))
    assert "1 row awaits approval and continues by itself" in progress_text(p.snapshot())
    p.apply(RowUpdate("c", "done"))
    text, html = progress_text(p.snapshot()), progress_html(p.snapshot())
    assert "continue" not in text and "nba-batch-parked" not in html  # never a stale count


def test_a_bar_whose_cell_ran_again_closes_and_stops_ticking(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Parked rows keep a batch's bar live after its cell returned; when the cell runs
    again (JupyterLab removed the bar), its models close and its ticker ends, while the
    batch's rows are left as they are."""
    import asyncio
    from types import SimpleNamespace

    import IPython.display

    from nbagent import _display

    monkeypatch.setattr(IPython.display, "display", lambda *a, **k: None)
    monkeypatch.setattr(_display, "hook_post_run_cell", lambda: None)
    monkeypatch.setattr(_display, "running_cell_id", lambda: "cell-b")
    p = _progress()
    display = WidgetDisplay(p)
    display.interval = 0.01

    async def shown_then_cleared() -> None:
        display.show()
        display.start()
        await asyncio.sleep(0.05)
        assert display._ticker is not None and not display._ticker.done()
        _display.clear_cells(SimpleNamespace(cell_id="cell-b", cell_meta={}))
        await asyncio.sleep(0.05)
        assert display._ticker.done()  # ended by itself, not cancelled

    try:
        asyncio.run(shown_then_cleared())
    finally:
        _display._by_cell.clear()
    assert display.closed
    models = [display.widget, display.widget.layout, display.widget.style]
    assert [m.comm for m in models] == [None] * 3
    assert p.snapshot().counts["awaiting_approval"] == 1  # the rows, as they were
