"""What the dashboard shows, read from a workspace (`make run` / `dvc repro`) and its MLflow registry.

Figures are a model version's: the backtest and per-fund predictions that `register` logged with
that version's run (MLflow artifacts), and its GRPO reward curves (run metrics `curve.*`). The
champion's by default; any registered version by choice; without a registry, this workspace's last
training run (its files), said so on every page. Read-only: nothing here writes the registry, the
API's store or the workspace.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from fundgrpo.data import analyst_labels, peers
from fundgrpo.evaluation import agreement, calibration
from fundgrpo.evaluation.report import FundRow
from fundgrpo.methodology.compiler import Methodology, load_methodology
from fundgrpo.methodology.preparation import build_records
from fundgrpo.methodology.records import PromptRecord
from fundgrpo.methodology.splits import SPLITS
from fundgrpo.params import Params, load_params
from fundgrpo.registry import mlflow_registry
from fundgrpo.serving.dashboard.book import needs_review
from fundgrpo.serving.dashboard.labels import LABELS

GRADES = ("grpo", "sft", "base", "rule", "gbm")  # evaluators in the backtest's per-fund rows
# Canonical columns shown against peers (the export's, whichever exist), and which way is better.
PEER_METRICS = {
    "return_1y": True, "return_3y": True, "return_5y": True, "volatility_3y": False, "sharpe_3y": True,
    "sortino_3y": True, "max_drawdown_3y": True, "tracking_error_3y": False, "information_ratio_3y": True,
    "mrar_3y": True, "mrar_5y": True, "ongoing_cost": False, "fund_size": True, "manager_tenure": True,
}  # fmt: skip


@dataclass
class Figures:
    """One model version's figures: its backtest, per-fund predictions and reward curves."""

    version: int | None  # None: this workspace's files (no registry)
    aliases: list[str]
    backtest: dict | None
    predictions: list[FundRow]  # the backtest's per-fund file
    curves: list[dict] = field(default_factory=list)  # {"step", "reward", "<name>_reward", ...}
    rule: calibration.DecisionRule | None = None  # the decision rule that served each grade (None: not logged)


class Workspace:
    """The workspace at `root`: params, registry, outputs; one per dashboard process."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root).resolve()
        self.params: Params = load_params(self.root / "params.yaml")

    # -- language and methodology

    def methodology(self) -> Methodology | None:
        """The compiled methodology, None before the `methodology` stage has run."""
        folder = self.root / self.params.methodology.out_dir
        return load_methodology(folder) if (folder / "rubric.json").exists() else None

    def language(self) -> str:
        m = self.methodology()
        lang = m.language if m else "en"
        return lang if lang in LABELS else "en"

    # -- registry

    def tracking_uri(self) -> str:
        return mlflow_registry.local_uri(mlflow_registry.tracking_uri(self.params.register), self.root)

    def _client(self):
        from mlflow import MlflowClient

        os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # no bars in the server's log
        uri = self.tracking_uri()
        if uri.startswith("sqlite:///") and not Path(uri[len("sqlite:///") :]).exists():
            return None  # no registry here yet (and none made by looking)
        return MlflowClient(tracking_uri=uri)

    def versions(self) -> list[dict]:
        """Every registered version, newest first: aliases, when, the gate's verdict, its backtest metrics."""
        client = self._client()
        if client is None:
            return []
        name = self.params.register.model_name
        found = client.search_model_versions(f"name='{name}'")
        if not found:
            return []
        aliases = client.get_registered_model(name).aliases or {}  # search results leave aliases empty
        out = []
        for v in found:
            run = client.get_run(v.run_id) if v.run_id else None
            tags, metrics = (run.data.tags, run.data.metrics) if run else ({}, {})
            out.append(
                {
                    "version": int(v.version),
                    "aliases": sorted(a for a, n in aliases.items() if str(n) == str(v.version)),
                    "created": pd.Timestamp(v.creation_timestamp, unit="ms", tz="UTC"),
                    "passed": tags.get("gate.passed"),
                    "reason": tags.get("gate.reason", ""),
                    "run_id": v.run_id,
                    "metrics": {k[len("backtest.") :]: m for k, m in metrics.items() if k.startswith("backtest.")},
                }
            )
        return sorted(out, key=lambda r: r["version"], reverse=True)

    def last_run(self) -> dict | None:
        """metrics/register.json: the last training run's registration (the gate may have refused it)."""
        path = self.root / self.params.register.decision
        return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None

    def figures(self, version: int | None, versions: list[dict] | None = None) -> Figures:
        """Version `version`'s figures from its MLflow run; None: this workspace's files."""
        if version is None:
            return self._workspace_figures()
        entry = next(v for v in (versions if versions is not None else self.versions()) if v["version"] == version)
        client = self._client()
        backtest, predictions, curves = None, [], []
        rule: calibration.DecisionRule | None = None
        with tempfile.TemporaryDirectory() as tmp:
            local = {}
            fit_file = Path(self.params.calibrate.out).name  # logged at the run's artifact root
            for rel in (self.params.backtest.metrics, self._predictions_path(), fit_file):
                try:  # the file lands as tmp/<its name>
                    local[rel] = Path(client.download_artifacts(entry["run_id"], Path(rel).as_posix(), tmp))
                except Exception:  # noqa: BLE001 - an older run without it: the page says so
                    continue
            if self.params.backtest.metrics in local:
                backtest = json.loads(local[self.params.backtest.metrics].read_text(encoding="utf-8"))
            if self._predictions_path() in local:
                predictions = FundRow.read(local[self._predictions_path()])
            if fit_file in local:
                rule = calibration.DecisionRule.of(json.loads(local[fit_file].read_text(encoding="utf-8")))
        run = client.get_run(entry["run_id"])
        names = sorted(k for k in run.data.metrics if k.startswith("curve."))
        by_step: dict[int, dict] = {}
        for key in names:
            for m in client.get_metric_history(entry["run_id"], key):
                by_step.setdefault(int(m.step), {"step": int(m.step)})[key[len("curve.") :]] = m.value
        curves = [by_step[s] for s in sorted(by_step)]
        return Figures(version, entry["aliases"], backtest, predictions, curves, rule)

    def _predictions_path(self) -> Path:
        return Path(self.params.backtest.report_dir) / "predictions.jsonl"

    def _workspace_figures(self) -> Figures:
        metrics = self.root / self.params.backtest.metrics
        rows = self.root / self._predictions_path()
        curves = self.root / self.params.grpo.reward_curves
        fit = self.root / self.params.calibrate.out
        last = self.last_run() or {}
        return Figures(
            last.get("version"),
            [last["alias"]] if last.get("alias") else [],
            json.loads(metrics.read_text(encoding="utf-8")) if metrics.exists() else None,
            FundRow.read(rows) if rows.exists() else [],
            json.loads(curves.read_text(encoding="utf-8")) if curves.exists() else [],
            calibration.DecisionRule.of(json.loads(fit.read_text(encoding="utf-8"))) if fit.exists() else None,
        )

    # -- funds

    def funds(self) -> pd.DataFrame:
        """The validated universe (names, categories, metrics), one row per share class."""
        path = self.root / self.params.validate.out
        if not path.exists():
            return pd.DataFrame(columns=["share_class_id", "name", "category"])
        return pd.read_parquet(path).astype({"share_class_id": str})

    def documents(self) -> pd.DataFrame:
        """The documents `ingest` checked (ids, dates, kinds, texts); empty before any."""
        path = self.root / self.params.ingest.documents_out
        return pd.read_parquet(path) if path.exists() else pd.DataFrame(columns=["document_id", "date", "kind"])

    def records(self) -> dict[str, PromptRecord]:
        """Prepared records by share class (every split): the methodology's evidence, rule score, peers."""
        out = {}
        for split in SPLITS:
            path = self.root / self.params.prepare.out_dir / f"{split}.jsonl"
            if path.exists():
                out.update({r.share_class_id: r for r in PromptRecord.read(path)})
        return out

    # -- monitoring

    def drift(self) -> list[dict]:
        """Each monitored batch's summary, oldest first, with its report folder (relative to root)."""
        base = self.root / self.params.monitor.report_dir
        rows = []
        for path in sorted(base.glob("*/*/summary.json")):
            s = json.loads(path.read_text(encoding="utf-8"))
            rows.append({**s, "folder": path.parent.relative_to(self.root).as_posix()})
        return sorted(rows, key=lambda r: (str(r.get("date")), str(r.get("batch"))))

    # -- the API's store (read only)

    def store_url(self) -> str:
        return analyst_labels.store_url(self.params.decisions.store_url, self.root)

    def store_history(self, share_class_id: str) -> tuple[list[dict], list[dict]]:
        """(evaluations, decisions) of one share class in the API's store, oldest first; none without a store."""
        decisions = analyst_labels.export_all(self.store_url())
        decided = decisions[decisions["share_class_id"].astype(str) == share_class_id].to_dict("records")
        return stored_evaluations(self.store_url(), share_class_id), decided


def stored_evaluations(url: str, share_class_id: str) -> list[dict]:
    """The API's stored evaluations of one share class (none when there is no store; none is created)."""
    import sqlalchemy as sa

    parsed = sa.engine.make_url(url)
    if parsed.get_backend_name() == "sqlite" and (not parsed.database or not Path(parsed.database).exists()):
        return []
    engine = sa.create_engine(url, future=True)
    try:
        with engine.connect() as conn:
            if not sa.inspect(conn).has_table("evaluations"):
                return []
            t = sa.Table("evaluations", sa.MetaData(), autoload_with=conn)
            q = sa.select(t).where(t.c.share_class_id == share_class_id).order_by(t.c.id)
            rows = conn.execute(q).mappings().all()
    finally:
        engine.dispose()
    out = []
    for r in rows:
        e = r["evaluation"] if isinstance(r["evaluation"], dict) else json.loads(r["evaluation"])
        out.append(
            {
                "evaluation_id": r["id"],
                "at": pd.Timestamp(r["created_at"]).isoformat(),
                "model_version": r["model_version"],
                "grade": e.get("grade"),
                "confidence": e.get("confidence"),
            }
        )
    return out


# -- pure helpers (each page's table), tested without a browser


def fund_table(
    predictions: list[FundRow], funds: pd.DataFrame, rule, decided: set[str] | frozenset = frozenset()
) -> pd.DataFrame:
    """One row per tested share class: name, category, expert, model (and its direction), confidence,
    the methodology's and gradient boosting's grades, whether it needs an analyst (the queue's rule;
    never a share class in `decided`, which an analyst has settled since).

    >>> from fundgrpo.params import EvaluateParams
    >>> rows = [FundRow.of({"share_class_id": "A", "fund_id": "F", "category": "Bond", "expert_grade": 3,
    ...          "grpo_grade": 4, "grpo_valid": True, "grpo_confidence": 0.4, "rule_grade": 4, "rule_valid": True,
    ...          "gbm_grade": 3, "gbm_valid": True})]
    >>> t = fund_table(rows, pd.DataFrame({"share_class_id": ["A"], "name": ["Alpha Bond"]}), EvaluateParams())
    >>> t.loc[0, "name"], int(t.loc[0, "direction"]), bool(t.loc[0, "needs_analyst"])
    ('Alpha Bond', 1, True)
    >>> bool(fund_table(rows, pd.DataFrame({"share_class_id": ["A"]}), EvaluateParams(), {"A"}).loc[0, "needs_analyst"])
    False
    """
    names = dict(zip(funds["share_class_id"].astype(str), funds["name"])) if "name" in funds else {}
    out = []
    for r in predictions:
        grade, expert = r.served.grade, r.expert_grade
        out.append(
            {
                "share_class_id": str(r.share_class_id),
                "name": names.get(str(r.share_class_id), ""),
                "category": r.category,
                "expert": expert,
                "model": grade,
                "direction": None if grade is None or expert is None else (grade > expert) - (grade < expert),
                "confidence": r.served.confidence,
                "rule": r.grade_of("rule"),
                "gbm": r.grade_of("gbm"),
                "needs_analyst": needs_review(r, rule) and str(r.share_class_id) not in decided,
            }
        )
    return pd.DataFrame(out, columns=list(FUND_COLUMNS))


FUND_COLUMNS = (
    "share_class_id", "name", "category", "expert", "model", "direction", "confidence", "rule", "gbm", "needs_analyst"
)  # fmt: skip


def filter_funds(
    table: pd.DataFrame, search: str = "", categories: list[str] | None = None, disagree: bool = False,
    review_only: bool = False,
) -> pd.DataFrame:  # fmt: skip
    """Rows whose name, category or share class holds `search` (any case), in `categories`, and so on.

    >>> t = pd.DataFrame({"share_class_id": ["A1", "B2"], "name": ["Alpha Bond", "Beta Equity"],
    ...                   "category": ["Bond", "Equity"], "direction": [0, 1], "needs_analyst": [False, True]})
    >>> filter_funds(t, search="beta")["share_class_id"].tolist(), filter_funds(t, disagree=True)["name"].tolist()
    (['B2'], ['Beta Equity'])
    >>> filter_funds(t, search="BOND")["share_class_id"].tolist()  # the category too
    ['A1']
    """
    keep = pd.Series(True, index=table.index)
    if search.strip():
        needle = search.strip().casefold()
        hay = table.reindex(columns=["name", "category", "share_class_id"]).fillna("").astype(str)
        keep &= hay.apply(lambda column: column.str.casefold().str.contains(needle, regex=False)).any(axis=1)
    if categories:
        keep &= table["category"].isin(categories)
    if disagree:
        keep &= table["direction"].fillna(1) != 0  # an invalid answer disagrees too
    if review_only:
        keep &= table["needs_analyst"]
    return table[keep]


SORTS = ("tested", "low", "high", "name")


def sort_funds(table: pd.DataFrame, order: str) -> pd.DataFrame:
    """`table` in one of SORTS: as tested, least or most confident first (no confidence last), by name.

    >>> t = pd.DataFrame({"name": ["b", "a", "c"], "confidence": [0.9, None, 0.2]})
    >>> sort_funds(t, "low")["name"].tolist(), sort_funds(t, "name")["name"].tolist()
    (['c', 'b', 'a'], ['a', 'b', 'c'])
    """
    if order not in SORTS:
        raise ValueError(f"order must be one of {SORTS}, got {order!r}")
    if order == "tested":
        return table
    if order == "name":
        return table.sort_values("name", kind="stable")
    return table.sort_values("confidence", ascending=order == "low", na_position="last", kind="stable")


def peer_table(funds: pd.DataFrame, share_class_id: str) -> pd.DataFrame:
    """The share class's metrics against its category: value, peer median, percentile (100 = best).

    >>> f = pd.DataFrame({"share_class_id": ["A", "B", "C"], "category": ["x"] * 3,
    ...                   "ongoing_cost": [0.5, 1.0, 1.5], "sharpe_3y": [1.0, 0.5, None]})
    >>> peer_table(f, "A").to_dict("records")[-1]
    {'metric': 'ongoing_cost', 'value': 0.5, 'peer_median': 1.0, 'percentile': 100.0}
    """
    columns = [c for c in PEER_METRICS if c in funds.columns]
    row = funds.index[funds["share_class_id"].astype(str) == share_class_id]
    if not len(row) or not columns:
        return pd.DataFrame(columns=["metric", "value", "peer_median", "percentile"])
    i = row[0]
    category = funds.loc[i, "category"]
    same = funds[funds["category"] == category]
    out = []
    for c in columns:
        value = funds.loc[i, c]
        if pd.isna(value):
            continue
        pct = peers.percentile_within(same, c, higher_is_better=PEER_METRICS[c]).loc[i]
        out.append({"metric": c, "value": float(value), "peer_median": float(same[c].median()), "percentile": pct})
    return pd.DataFrame(out, columns=["metric", "value", "peer_median", "percentile"])


def built_record(funds: pd.DataFrame, methodology: Methodology, share_class_id: str) -> PromptRecord | None:
    """The record of a share class `prepare` wrote none for (no expert grade: a new fund, or one the
    methodology does not rate), built from the universe as `prepare` builds it: its peers, rule score
    and grade, percentiles and why it is not rated. None when the universe does not hold it.

    >>> from fundgrpo.methodology.compiler import example_methodology
    >>> f = pd.DataFrame({"share_class_id": ["A", "B", "C"], "fund_id": ["A", "B", "C"], "category": ["x"] * 3,
    ...                   "sharpe_3y": [1.0, 0.5, None], "ongoing_cost": [0.5, 1.0, 1.5]})
    >>> r = built_record(f, example_methodology(), "C")
    >>> r.peers, r.rule_grade, r.not_rated, r.evidence
    (3, None, 'not rated: data for 40% of the criteria weight, the methodology needs 50%; missing: Sharpe ratio', \
'{"sharpe_3y": null, "cost": 0.0, "tenure": null}')
    >>> built_record(f, example_methodology(), "A").rule_grade, built_record(f, example_methodology(), "Z")
    (5, None)
    """
    built = build_records(funds, methodology, only=[share_class_id], labelled_only=False)
    return built[0] if built else None


def verdict_table(record: PromptRecord, methodology: Methodology) -> pd.DataFrame:
    """The methodology's criteria for one fund: label, weight, the fund's percentile among peers.

    >>> from fundgrpo.methodology.compiler import example_methodology
    >>> verdict_table(PromptRecord.example(evidence='{"cost": 80.0}'), example_methodology()).to_dict("records")[1]
    {'criterion': 'ongoing cost', 'weight': 0.4, 'percentile': 80.0}
    """
    evidence = json.loads(record.evidence)
    rows = [
        {"criterion": methodology.label(c), "weight": c.weight, "percentile": evidence.get(c.id)}
        for c in methodology.criteria
    ]
    return pd.DataFrame(rows, columns=["criterion", "weight", "percentile"])


def version_history(share_class_id: str, figures: list[Figures]) -> pd.DataFrame:
    """The share class's grade by each version that tested it (its expert grade beside)."""
    out = []
    for f in figures:
        row = next((r for r in f.predictions if str(r.share_class_id) == share_class_id), None)
        if row is not None:
            out.append(
                {
                    "version": f.version,
                    "model": row.served.grade,
                    "confidence": row.served.confidence,
                    "expert": row.expert_grade,
                }
            )
    return pd.DataFrame(out, columns=["version", "model", "confidence", "expert"])


def reliability(predictions: list[FundRow], key: str = "grpo", bins: int = 10) -> pd.DataFrame:
    """Confidence against accuracy per bin (`calibration.reliability`, the backtest's): an invalid answer
    counts at confidence 0, wrong, as the backtest counts it.

    >>> from fundgrpo.evaluation.report import Graded
    >>> said = (Graded(3, True, 0.95), Graded(2, True, 0.91), Graded(None, False))
    >>> rows = [FundRow("A", "F", "Bond", 3, graded={"grpo": g}) for g in said]
    >>> reliability(rows).to_dict("records")
    [{'bin': '0.0-0.1', 'confidence': 0.0, 'accuracy': 0.0, 'funds': 1}, {'bin': '0.9-1.0', 'confidence': 0.93, 'accuracy': 0.5, 'funds': 2}]
    """  # noqa: E501
    said = [(r.expert_grade, r.graded[key]) for r in predictions if r.expert_grade is not None and key in r.graded]
    if not any(g.confidence is not None for _, g in said):
        return pd.DataFrame(columns=["bin", "confidence", "accuracy", "funds"])
    confidence = [float(g.confidence or 0.0) for _, g in said]
    correct = [g.grade is not None and int(g.grade) == int(expert) for expert, g in said]
    found = calibration.reliability(confidence, correct, bins)
    return pd.DataFrame(found, columns=["bin", "confidence", "accuracy", "funds"])


def confusion(predictions: list[FundRow], key: str, grades: list[int]) -> pd.DataFrame:
    """Counts of (expert, predicted) for evaluator `key`, long, the empty cells left out
    (`agreement.confusion`, the backtest's: an invalid answer is predicted "invalid").

    >>> from fundgrpo.evaluation.report import Graded
    >>> row = FundRow("A", "F", "Bond", 3, graded={"grpo": Graded(None, False)})
    >>> confusion([row], "grpo", [1, 2, 3]).to_dict("records")
    [{'expert': '3', 'predicted': 'invalid', 'funds': 1}]
    """
    rows = [r for r in predictions if r.expert_grade is not None and key in r.graded]
    table = agreement.confusion([r.expert_grade for r in rows], [r.graded[key].grade for r in rows], grades)
    long = table.stack().rename("funds").reset_index()
    long.columns = ["expert", "predicted", "funds"]
    long = long[long["funds"] > 0].astype({"expert": str, "predicted": str, "funds": int})
    return long.reset_index(drop=True)


def distribution(predictions: list[FundRow]) -> pd.DataFrame:
    """How many share classes each evaluator (and the experts) gave each grade; the untrained base
    model, whose answers are mostly invalid, is left out (the backtest table has it)."""
    out: dict[tuple[str, str], int] = {}
    for r in predictions:
        given = [("expert", r.expert_grade), *((e, r.graded[e].grade) for e in GRADES if e != "base" and e in r.graded)]
        for who, grade in given:
            g = "invalid" if grade is None else str(grade)
            out[(who, g)] = out.get((who, g), 0) + 1
    return pd.DataFrame([{"evaluator": w, "grade": g, "funds": n} for (w, g), n in out.items()])


def drift_series(summaries: list[dict]) -> pd.DataFrame:
    """Per batch: date, feature drift share, the champion's rating migration, verdict (long form).

    >>> drift_series([{"batch": "b", "date": "2026-01-01", "verdict": "drift",
    ...                "data_drift": {"share": 0.4}, "prediction_drift": {"migration": 0.1}}]).to_dict("records")
    [{'date': '2026-01-01', 'batch': 'b', 'verdict': 'drift', 'figure': 'feature_drift', 'value': 0.4}, \
{'date': '2026-01-01', 'batch': 'b', 'verdict': 'drift', 'figure': 'migration', 'value': 0.1}]
    """
    out = []
    for s in summaries:
        base = {"date": s.get("date"), "batch": s.get("batch"), "verdict": s.get("verdict")}
        figures = {
            "feature_drift": (s.get("data_drift") or {}).get("share"),
            "migration": (s.get("prediction_drift") or {}).get("migration"),
        }
        out += [{**base, "figure": k, "value": v} for k, v in figures.items() if v is not None]
    return pd.DataFrame(out, columns=["date", "batch", "verdict", "figure", "value"])


def transitions(summary: dict) -> pd.DataFrame:
    """One batch's rating migration as (reference grade, batch grade, share classes)."""
    table = (summary.get("prediction_drift") or {}).get("transitions") or {}
    rows = [{"before": str(b), "after": str(a), "funds": n} for b, row in table.items() for a, n in row.items()]
    return pd.DataFrame(rows, columns=["before", "after", "funds"])


def shown_line(t: dict[str, str], figures: Figures, champion: int | None, registered: bool, model: str) -> str:
    """Which version's figures a page shows and which version the API serves.

    >>> t = {"figures_of": "Figures of {model} v{version} ({alias}); the API serves {serving}.",
    ...      "no_champion": "none"}
    >>> shown_line(t, Figures(2, ["challenger"], None, []), 1, True, "m")
    'Figures of m v2 (challenger); the API serves champion v1.'
    """
    serving = t["no_champion"] if champion is None else f"champion v{champion}"
    alias = ", ".join(figures.aliases) or "-"
    key = "figures_of" if registered else "figures_ws"
    return t[key].format(model=model, version=figures.version, alias=alias, serving=serving)


def starting_grade(item: dict, grades: list[int]) -> int:
    """The grade a decision form starts from: the model's, else the methodology's, else gradient
    boosting's, else the middle grade (never silently the first).

    >>> starting_grade({"grade": 4}, [1, 2, 3, 4, 5]), starting_grade({"grade": None, "rule_grade": 2}, [1, 2, 3])
    (4, 2)
    >>> starting_grade({"grade": None}, [1, 2, 3, 4, 5])
    3
    """
    for found in (item.get("grade"), item.get("rule_grade"), (item.get("evidence") or {}).get("gbm_grade")):
        if found in grades:
            return found
    return grades[len(grades) // 2]


def label_text(expert: dict | None, t: dict[str, str]) -> str:
    """The label a share class trains with now, in words: '4 (analyst)', '3 (export)', or none.

    >>> label_text({"grade": 4, "source": "analyst"}, {"analyst": "analyst", "export": "export", "none": "-"})
    '4 (analyst)'
    >>> label_text(None, {"analyst": "analyst", "export": "export", "none": "-"})
    '-'
    """
    if not expert:
        return t["none"]
    source = str(expert.get("source"))
    return f"{expert['grade']} ({t.get(source, source)})"
