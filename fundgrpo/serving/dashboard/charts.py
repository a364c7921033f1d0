"""The dashboard's charts (Vega-Lite through Altair, which Streamlit draws): each a pure function of
a frame from fundgrpo/serving/dashboard/workspace.py, so a test can read its spec."""

from __future__ import annotations

import altair as alt
import pandas as pd

GRADE_ORDER = ["1", "2", "3", "4", "5", "invalid"]


def _order(values) -> list[str]:
    present = {str(v) for v in values}
    return [g for g in GRADE_ORDER if g in present] + sorted(present - set(GRADE_ORDER))


def confusion_heatmap(frame: pd.DataFrame, title: str) -> alt.LayerChart:
    """Expert grade (rows) against predicted (columns), counts written in the cells."""
    order = _order(list(frame["expert"]) + list(frame["predicted"]))
    base = alt.Chart(frame, title=title).encode(
        x=alt.X("predicted:N", sort=order, title=None, axis=alt.Axis(orient="top", labelAngle=0)),
        y=alt.Y("expert:N", sort=order, title=None),
    )
    cells = base.mark_rect().encode(color=alt.Color("funds:Q", scale=alt.Scale(scheme="blues"), legend=None))
    text = base.mark_text().encode(
        text="funds:Q",
        color=alt.condition(alt.datum.funds > frame["funds"].max() / 2, alt.value("white"), alt.value("black")),
    )
    return (cells + text).properties(width=220, height=220)


def grade_distribution(frame: pd.DataFrame, labels: dict[str, str]) -> alt.Chart:
    """Share classes per grade, one bar group per evaluator."""
    return (
        alt.Chart(frame)
        .mark_bar()
        .encode(
            x=alt.X("grade:N", sort=_order(frame["grade"]), title=labels["grade"]),
            xOffset="evaluator:N",
            y=alt.Y("funds:Q", title=labels["funds_n"]),
            color=alt.Color("evaluator:N", title=labels["evaluator"]),
            tooltip=["evaluator", "grade", "funds"],
        )
        .properties(height=260)
    )


def curves(curve: list[dict], step_title: str = "step") -> alt.Chart:
    """GRPO's rewards by step (`curve`: one dict per logged step, as the trainer logs it): the total and each
    named reward."""
    frame = pd.DataFrame(curve)
    keep = [c for c in frame.columns if c == "reward" or c.endswith("_reward")]
    long = frame.melt(id_vars=["step"], value_vars=keep, var_name="reward", value_name="value").dropna()
    return (
        alt.Chart(long)
        .mark_line(point=True)
        .encode(
            x=alt.X("step:Q", title=step_title),
            y=alt.Y("value:Q", title=None),
            color="reward:N",
            tooltip=["step", "reward", alt.Tooltip("value:Q", format=".3f")],
        )
        .properties(height=280)
    )


def reliability(frame: pd.DataFrame, labels: dict[str, str]) -> alt.LayerChart:
    """Accuracy against stated confidence per bin, the diagonal for perfect calibration."""
    diagonal = (
        alt.Chart(pd.DataFrame({"x": [0.0, 1.0]}))
        .mark_line(strokeDash=[4, 4], color="gray")
        .encode(x=alt.X("x:Q", title=labels["confidence"]), y=alt.Y("x:Q", title=labels["accuracy"]))
    )  # the same titles on both layers: Vega-Lite would otherwise join them ("x, accuracy")
    points = (
        alt.Chart(frame)
        .mark_circle()
        .encode(
            x=alt.X("confidence:Q", scale=alt.Scale(domain=[0, 1]), title=labels["confidence"]),
            y=alt.Y("accuracy:Q", scale=alt.Scale(domain=[0, 1]), title=labels["accuracy"]),
            size=alt.Size("funds:Q", title=labels["funds_n"]),
            tooltip=["confidence", "accuracy", "funds"],
        )
    )
    return (diagonal + points).properties(height=260)


def per_version(frame: pd.DataFrame) -> alt.Chart:
    """Each metric by model version (frame: version, metric, value)."""
    return (
        alt.Chart(frame)
        .mark_line(point=True)
        .encode(
            x=alt.X("version:O", axis=alt.Axis(labelAngle=0)),
            y=alt.Y("value:Q", title=None),
            color="metric:N",
            tooltip=["version", "metric", alt.Tooltip("value:Q", format=".3f")],
        )
        .properties(height=260)
    )


def drift_over_time(frame: pd.DataFrame, thresholds: dict[str, float], labels: dict[str, str]) -> alt.LayerChart:
    """Feature drift share and rating migration per batch, each threshold a dashed rule."""
    named = frame.assign(figure=frame["figure"].map(lambda f: labels.get(f, f)))
    lines = (
        alt.Chart(named)
        .mark_line(point=True)
        .encode(
            x=alt.X("date:T", title=labels["date"]),
            y=alt.Y("value:Q", title=None),
            color=alt.Color("figure:N", title=None),
            tooltip=["date", "batch", "verdict", "figure", alt.Tooltip("value:Q", format=".3f")],
        )
    )
    rules = pd.DataFrame([{"figure": labels.get(k, k), "threshold": v} for k, v in thresholds.items() if v])
    if rules.empty:
        return lines.properties(height=260)
    dashed = alt.Chart(rules).mark_rule(strokeDash=[4, 4]).encode(y="threshold:Q", color=alt.Color("figure:N"))
    return (lines + dashed).properties(height=260)


def percentiles(frame: pd.DataFrame, labels: dict[str, str]) -> alt.Chart:
    """The fund's percentile among its peers per metric (100 = best)."""
    return (
        alt.Chart(frame)
        .mark_bar()
        .encode(
            y=alt.Y("metric:N", sort=None, title=None),
            x=alt.X("percentile:Q", scale=alt.Scale(domain=[0, 100]), title=labels["percentile"]),
            color=alt.Color("percentile:Q", scale=alt.Scale(scheme="redyellowgreen", domain=[0, 100]), legend=None),
            tooltip=["metric", "value", "peer_median", alt.Tooltip("percentile:Q", format=".0f")],
        )
        .properties(height=alt.Step(22))
    )


def probabilities(probs: list[float], labels: dict[str, str]) -> alt.Chart:
    """The model's probability of each grade."""
    frame = pd.DataFrame({"grade": [str(i + 1) for i in range(len(probs))], "p": probs})
    return (
        alt.Chart(frame)
        .mark_bar()
        .encode(
            x=alt.X("grade:N", title=labels["grade"], axis=alt.Axis(labelAngle=0)),
            y=alt.Y("p:Q", scale=alt.Scale(domain=[0, 1]), title=None),
            tooltip=["grade", alt.Tooltip("p:Q", format=".2f")],
        )
        .properties(height=180)
    )


def history(frame: pd.DataFrame, labels: dict[str, str]) -> alt.Chart:
    """The fund's model grade by version, the expert's grade as a dashed line."""
    long = frame.melt(id_vars=["version"], value_vars=["model", "expert"], var_name="who", value_name="grade")
    long["who"] = long["who"].map({"model": labels["model"], "expert": labels["expert"]})
    return (
        alt.Chart(long.dropna())
        .mark_line(point=True)
        .encode(
            x=alt.X("version:O", title=labels["version"]),
            y=alt.Y("grade:Q", scale=alt.Scale(domain=[1, 5]), title=labels["grade"]),
            color=alt.Color("who:N", title=None),
            strokeDash="who:N",
        )
        .properties(height=200)
    )
