"""The scorecard: one row per case and check, a DataFrame with a summary, a plot and a display.

pandas is imported only when a scorecard is made (``import nbagent`` stays light), so the
class is made on first use (:func:`scorecard_type`).
"""

from __future__ import annotations

import functools
from typing import Any

from .._display import enable_inline_png
from .._html import esc, style_tag

COLUMNS: dict[str, str] = {
    "case": "string",
    "branch": "string",
    "check": "string",
    "passed": "boolean",
    "score": "Float64",
    "detail": "string",
    "error": "string",
    "status": "string",
    "answer": "string",
    "chat_id": "string",
}
"""The scorecard's columns and dtypes, in order."""

ANSWER_CHARS = 200


def empty_rows() -> dict[str, list[Any]]:
    """The scorecard's columns, each an empty list (rows are appended column by column)."""
    return {c: [] for c in COLUMNS}


def make_scorecard(rows: dict[str, list[Any]]) -> Any:
    """A :class:`Scorecard` of ``rows`` (the columns of :data:`COLUMNS`)."""
    import pandas as pd

    frame = pd.DataFrame(rows, columns=list(COLUMNS)).astype(COLUMNS)
    return scorecard_type()(frame)


def _is_sweep(df: Any) -> bool:
    return "branch" in df.columns and bool(df["branch"].notna().any())


def summarize(df: Any) -> Any:
    """Per check (and branch, in a sweep): cases, passed, failed, not applicable, errors,
    pass rate (of the cases it applied to) and mean score."""
    import pandas as pd

    missing = [c for c in ("check", "passed", "score", "error") if c not in df.columns]
    if missing:
        raise KeyError(f"not a scorecard: it has no {', '.join(missing)} column")
    keys = ["branch", "check"] if _is_sweep(df) else ["check"]
    out = []
    for key, part in df.groupby(keys, sort=False, dropna=False):
        names = key if isinstance(key, tuple) else (key,)
        errors = int(part["error"].notna().sum())
        passed = int((part["passed"] == True).sum())  # noqa: E712 (nullable booleans)
        failed = int((part["passed"] == False).sum())  # noqa: E712
        judged = passed + failed
        out.append(
            {
                **dict(zip(keys, names, strict=True)),
                "cases": len(part),
                "passed": passed,
                "failed": failed,
                "not_applicable": len(part) - judged - errors,
                "errors": errors,
                "pass_rate": passed / judged if judged else float("nan"),
                "mean_score": float(part["score"].astype("float64").mean()),
            }
        )
    columns = [*keys, "cases", "passed", "failed", "not_applicable", "errors"]
    frame = pd.DataFrame(out, columns=[*columns, "pass_rate", "mean_score"])
    return frame.astype({c: "int64" for c in columns if c not in keys})


BRANCH_CHECK = " / "
"""What joins a sweep's branch and check in a :func:`per_case` column's name."""


def per_case(df: Any, values: str = "passed") -> Any:
    """One row per case, a column per check (per branch and check in a sweep, named
    ``"<branch> / <check>"``), in the scorecard's order, indexed like the cases: the
    ``case`` keys are text (a store finds a case by them), the index here is the cases'
    own (a DataFrame's labels, a list's positions), so ``cases.join(card.per_case())``
    lines up, for an evaluation and a sweep alike."""
    import pandas as pd

    frame = pd.DataFrame(df)
    columns = ["branch", "check"] if _is_sweep(frame) else ["check"]
    table = frame.pivot(index="case", columns=columns, values=values)
    order = list(dict.fromkeys(frame["case"]))
    wanted = list(dict.fromkeys(zip(*(frame[c] for c in columns), strict=True)))
    table = table.reindex(index=order)
    table = table.reindex(columns=wanted if len(columns) > 1 else [w[0] for w in wanted])
    if len(columns) > 1:  # one level, as the cases have: a join lines up
        table.columns = pd.Index(
            [BRANCH_CHECK.join(str(p) for p in c) for c in table.columns], dtype=object
        )
    labels, name = _case_labels(df)
    table.index = pd.Index([labels.get(k, k) for k in table.index], name=name)
    table.columns.name = None
    return table


def case_labels(run: Any) -> tuple[dict[str, Any], Any]:
    """Each case key's label among the cases of a batch ``run`` (its inputs: a DataFrame's
    index labels, a list's positions), and the index's name."""
    jobs = getattr(run, "jobs", None)
    if not jobs:  # a detached run's: the keys are all there is
        return {}, "case"
    index = getattr(run, "index", None)
    if index is not None and len(index) == len(jobs):
        return {j.key: index[j.index] for j in jobs}, index.name
    return {j.key: j.index for j in jobs}, None


def _case_labels(df: Any) -> tuple[dict[str, Any], Any]:
    """Each case key's label among the cases (the batch's inputs), and the index's name:
    the run's, or those a sweep kept of its first run (:func:`case_labels`)."""
    run = df.attrs.get("nbagent_batch")
    kept = getattr(run, "case_labels", None)
    if kept is not None:
        return kept
    return case_labels(run)


def plot_scorecard(df: Any, ax: Any = None) -> Any:
    """A horizontal bar per check: its pass rate (grouped by branch in a sweep)."""
    from .._optional import require

    require("matplotlib", "evaluate(...).plot()")
    summary = summarize(df)
    checks = list(dict.fromkeys(summary["check"]))
    branches = list(dict.fromkeys(summary["branch"])) if "branch" in summary else [None]
    if ax is None:
        from matplotlib.figure import Figure

        enable_inline_png()
        size = (8.0, 1.2 + 0.35 * len(checks) * len(branches))
        fig = Figure(figsize=size, layout="constrained")
        ax = fig.add_subplot()
    else:
        fig = ax.get_figure()
    height = 0.8 / max(len(branches), 1)
    for j, branch in enumerate(branches):
        part = summary if branch is None else summary[summary["branch"] == branch]
        rates = dict(zip(part["check"], part["pass_rate"], strict=True))
        ys = [i + j * height for i in range(len(checks))]
        values = [0.0 if rates.get(c) != rates.get(c) else rates.get(c, 0.0) for c in checks]
        ax.barh(ys, values, height=height * 0.9, label=None if branch is None else str(branch))
        for y, v in zip(ys, values, strict=True):
            ax.text(min(v, 1.0) + 0.01, y, f"{v:.0%}", va="center", fontsize=8)
    ax.set_yticks([i + (len(branches) - 1) * height / 2 for i in range(len(checks))])
    ax.set_yticklabels([c if len(c) <= 48 else c[:47] + "…" for c in checks], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, 1.12)
    ax.set_xlabel("pass rate")
    if branches != [None]:
        ax.legend(fontsize=8, frameon=False, loc="lower right")
    return fig


def headline(df: Any) -> str:
    """One line: cases, checks, how many judgements passed."""
    unscored = df.attrs.get("nbagent_unscored")
    if unscored is not None and len(df) == 0:  # evaluate() given no check
        return (
            f"{unscored} case(s) ran, no check scored them: score them with "
            "nbagent.evaluation.score(nbagent.batch_results(card), checks)"
        )
    cases = df["case"].nunique() if "case" in df else len(df)
    checks = df["check"].nunique() if "check" in df else 0
    given = df.attrs.get("nbagent_checks")
    if not len(df) and isinstance(given, int):  # no case (or none left by a filter)
        checks = given
    passed = int((df["passed"] == True).sum()) if "passed" in df else 0  # noqa: E712
    judged = int(df["passed"].notna().sum()) if "passed" in df else 0
    errors = int(df["error"].notna().sum()) if "error" in df else 0
    rate = f" ({passed / judged:.0%})" if judged else ""
    tail = f", {errors} check error(s)" if errors else ""
    return f"{cases} case(s) × {checks} check(s): {passed} of {judged} passed{rate}{tail}"


def _summary_html(df: Any) -> str:
    summary = summarize(df)
    head = "".join(f"<th>{esc(c)}</th>" for c in summary.columns)
    rows = []
    for rec in summary.itertuples(index=False):
        cells = []
        for name, value in zip(summary.columns, rec, strict=True):
            if name == "pass_rate":
                text = "–" if value != value else f"{value:.0%}"
                cells.append(f"<td>{text}</td>")
            elif name == "mean_score":
                cells.append(f"<td>{'–' if value != value else f'{value:.2f}'}</td>")
            else:
                cells.append(f"<td>{esc(value)}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    body = "".join(rows)
    return f"<table class='nba-cmp-table'><thead><tr>{head}</tr></thead><tbody>{body}</tbody>" + (
        "</table>"
    )


PICKLED_ATTRS = ("nbagent_checks", "nbagent_unscored")
"""The attrs a pickled scorecard keeps (its run and chats are live objects of this process)."""


def unpickle_scorecard(frame: Any) -> Any:
    """A scorecard again, from the frame its ``__reduce__`` pickled."""
    card = scorecard_type()(frame)
    card.attrs = dict(frame.attrs)
    return card


@functools.cache
def scorecard_type() -> type:
    """The ``Scorecard`` class (a ``pandas.DataFrame`` subclass), made once pandas is needed."""
    import pandas as pd

    class Scorecard(pd.DataFrame):
        """What :func:`nbagent.evaluate` returns: one row per case and check.

        Columns: ``case`` (the case's key), ``branch`` (a decision sweep's branch),
        ``check``, ``passed`` (``<NA>``: the check did not apply, or raised),
        ``score`` (0 to 1), ``detail`` (why), ``error`` (a check that raised),
        ``status`` (the chat's batch status), ``answer`` (its final answer, clipped)
        and ``chat_id`` (open it: the batch's chats, or ``Chat.load`` from the store).
        It is a DataFrame: filter it (``card[card.passed == False]``), join it.
        """

        @property
        def _constructor(self) -> type:
            return Scorecard

        def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
            """Pickled (``pickle``, ``to_pickle``, joblib, multiprocessing) as its rows and
            the attrs that are plain values: the class is made at run time, so it is
            rebuilt by :func:`unpickle_scorecard`; the link to its batch run and chats
            (``read_log(card)``) stays in this process."""
            frame = pd.DataFrame(self)
            frame.attrs = {k: v for k, v in self.attrs.items() if k in PICKLED_ATTRS}
            return unpickle_scorecard, (frame,)

        def summary(self) -> pd.DataFrame:
            """Per check (and branch): cases, passed, failed, not_applicable, errors,
            pass_rate (of the cases it applied to), mean_score."""
            return summarize(self)

        def plot(self, ax: Any = None) -> Any:  # type: ignore[override]
            """Each check's pass rate as a bar (per branch in a sweep); a matplotlib Figure."""
            return plot_scorecard(self, ax)

        def per_case(self, values: str = "passed") -> pd.DataFrame:
            """One row per case, a column per check (``values``: ``passed``, ``score``,
            ``detail``...), indexed like the cases: ``cases.join(card.per_case())``."""
            return per_case(self, values)

        def failures(self) -> pd.DataFrame:
            """The rows that failed or raised, as a plain DataFrame."""
            bad = (self["passed"] == False).fillna(False) | self["error"].notna()  # noqa: E712
            return pd.DataFrame(self[bad])

        def _repr_html_(self) -> str | None:
            if not {"check", "passed", "score", "error", "case"} <= set(self.columns):
                return pd.DataFrame(self)._repr_html_()  # type: ignore[operator]
            table = pd.DataFrame(self)._repr_html_()  # type: ignore[operator]  # (pandas-stubs lack it)
            return (
                f"{style_tag()}<div class='nba-chat'><p><b>nbagent.evaluate</b> · "
                f"{esc(headline(self))}</p>{_summary_html(self)}"
                f"<details><summary>every case and check ({len(self)} rows)</summary>"
                f"{table}</details></div>"
            )

        def __repr__(self) -> str:
            if not {"check", "passed", "score", "error", "case"} <= set(self.columns):
                return super().__repr__()
            if not len(self):
                return headline(self)
            return f"{headline(self)}\n\n{summarize(self).to_string(index=False)}"

    Scorecard.__module__ = "nbagent.evaluation"
    return Scorecard
