"""The serving model, swapped when its alias moves, and a micro-batcher for concurrent requests."""

from __future__ import annotations

import asyncio
import logging
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from fundgrpo.data import analyst_labels, documents
from fundgrpo.data.canonical import NUMERIC
from fundgrpo.data.reading import IngestError
from fundgrpo.evaluation.baselines import MAX_CATEGORIES
from fundgrpo.evaluation.calibration import DecisionRule
from fundgrpo.evaluation.statistical import load_estimator
from fundgrpo.methodology.answers import Prediction
from fundgrpo.methodology.compiler import load_compiled
from fundgrpo.methodology.records import PromptRecord
from fundgrpo.model import modelling
from fundgrpo.model.inference import answer
from fundgrpo.params import load_params
from fundgrpo.registry import mlflow_registry
from fundgrpo.serving import evaluation
from fundgrpo.serving.api.settings import ApiSettings
from fundgrpo.serving.batch import missing_criteria, with_reference
from fundgrpo.serving.champion import calibration_of, check_posted_dates, prompt_records, stored_reading


@dataclass
class Loaded:
    """One servable model version: weights and tokenizer in memory, where they came from, and the
    decision rule its grade and confidence are served with."""

    version: str
    model: Any
    tokenizer: Any
    folder: Path
    rule: DecisionRule
    scratch: Any = None  # keeps a downloaded registry copy alive while this version serves


def request_groups(
    requests: list[list[dict]],
    universe_percentile: bool = False,
    max_categories: int = MAX_CATEGORIES,
    listed: dict[str, str] | None = None,
) -> list[list[int]]:
    """Waiting requests (each a list of funds) in groups whose prompt records can be built in one call:
    no category and no share class in common, so no fund's peers change (a prompt's figures are taken
    within the fund's category; with `universe_percentile` every fund is every fund's peer, and each
    request is a group of its own), and at most `max_categories` categories a group (beyond them
    gradient boosting's features leave the category out). `listed` (share class -> category in the
    reference universe): a request's fund replaces its share class's reference row, so the category
    that row leaves counts as the request's too.

    >>> request_groups([[{"share_class_id": "a", "category": "x"}], [{"share_class_id": "b", "category": "y"}],
    ...           [{"share_class_id": "c", "category": "x"}], [{"share_class_id": "a", "category": "z"}]])
    [[0, 1], [2, 3]]
    >>> request_groups([[{"share_class_id": "a", "category": "x"}], [{"share_class_id": "b", "category": "y"}]], True)
    [[0], [1]]
    >>> two = [[{"share_class_id": "a", "category": "x"}], [{"share_class_id": "b", "category": "y"}]]
    >>> request_groups(two, False, 1)
    [[0], [1]]
    >>> request_groups([[{"share_class_id": "a", "category": "x"}], [{"share_class_id": "b", "category": "y"}]],
    ...          listed={"a": "y"})  # a moves from y to x: b's peers in y lose a's old row
    [[0], [1]]
    """
    groups: list[tuple[list[int], set, set]] = []  # (requests, categories, share classes)
    for i, funds in enumerate(requests):
        ids = {str(f.get("share_class_id")) for f in funds}
        categories = {str(f.get("category")) for f in funds} | {(listed or {})[i] for i in ids & (listed or {}).keys()}
        home = None
        if not universe_percentile:
            home = next(
                (
                    g
                    for g in groups
                    if not (g[1] & categories or g[2] & ids) and len(g[1] | categories) <= max_categories
                ),
                None,
            )
        if home is None:
            groups.append(([i], categories, ids))
        else:
            home[0].append(i)
            home[1].update(categories)
            home[2].update(ids)
    return [g[0] for g in groups]


def documents_apart(funds: list[dict]) -> tuple[dict[str, list[dict]], list[dict]]:
    """The documents sent with each fund, by share class, and the funds without them.

    >>> documents_apart([{"share_class_id": "S1", "documents": [{"text": "x"}]}, {"share_class_id": "S2"}])
    ({'S1': [{'text': 'x'}]}, [{'share_class_id': 'S1'}, {'share_class_id': 'S2'}])
    """
    given = {str(f["share_class_id"]): f["documents"] for f in funds if f.get("documents")}
    return given, [{k: v for k, v in f.items() if k != "documents"} for f in funds]


class Evaluator:
    """The serving model (swapped when the alias moves), the methodology and the reference universe,
    and a micro-batcher that generates for concurrent requests together."""

    def __init__(self, root: Path, settings: ApiSettings) -> None:

        self.root, self.settings = root, settings
        self.params = load_params(root / "params.yaml")
        self.methodology, self.schema = load_compiled(root / self.params.methodology.out_dir)
        self.reference = pd.read_parquet(root / self.params.validate.out)
        self.known = frozenset(self.reference["share_class_id"].astype(str))  # outside it: new to the universe
        self.listed = dict(zip(self.reference["share_class_id"].astype(str), self.reference["category"].astype(str)))
        rated = self.reference.dropna(subset=["expert_grade"])
        self.export_grades = dict(zip(rated["share_class_id"].astype(str), rated["expert_grade"].astype(int)))
        self.decisions_path = root / self.params.decisions.out
        self.decided: tuple[Any, dict] = (None, {})  # (file stamp, share class -> (grade, decision id))
        self.estimator = load_estimator(root / self.params.evidence.out_dir)  # gradient boosting for new funds
        self.target = settings.model or f"models:/{self.params.register.model_name}@champion"
        self.current: Loaded | None = None
        self.note: str | None = None  # why the version served is not the one the alias names
        self.gate_records: dict = {}  # the gate's record per version (they never change)
        self.checked_at = 0.0
        self.swap_lock = threading.Lock()
        self.queue: asyncio.Queue | None = None
        self.busy_since: float | None = None  # monotonic time the running generation started
        self.closing = False
        # Every torch call (loading, generating) runs on this one thread. OpenMP keeps a pool of
        # threads per calling thread; two pools on two cores make each idle thread sleep at once
        # (libgomp throttles its spinning) and each parallel region wake them: about twice as slow.
        self.worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fundgrpo-model")
        self._worker_thread: int = self.worker.submit(threading.get_ident).result()

    def on_worker(self, fn, *args):
        """`fn(*args)` on the model's thread (at once when already there), waiting for its result."""
        if threading.get_ident() == self._worker_thread:
            return fn(*args)
        return self.worker.submit(fn, *args).result()

    # -- which version

    def _resolve(self) -> str:
        """The version string the target points at now (a folder is its own version)."""
        if not self.target.startswith("models:/"):
            return str(self.target)
        from mlflow import MlflowClient

        uri = mlflow_registry.local_uri(mlflow_registry.tracking_uri(self.params.register), self.root)
        name, _, alias = self.target[len("models:/") :].partition("@")
        serving = self.current.version.rsplit("/", 1)[-1] if self.current is not None else None
        # AliasError says what to serve instead; for `champion`, only a version the gate promoted
        version, note = mlflow_registry.served_version(
            MlflowClient(tracking_uri=uri), name, alias, keep=serving, cache=self.gate_records,
            compiled_now=self.methodology,
        )  # fmt: skip
        if note and note != self.note:
            logging.getLogger("fundgrpo.serving.api").warning("%s", note)
        self.note = note
        return f"models:/{name}/{version}"

    def _load(self, version: str) -> Loaded:

        if not version.startswith("models:/"):
            model, tokenizer = modelling.load(version, self.params.generation.dtype)
            rule = calibration_of(self.root / version, self.params, self.root)
            return Loaded(version, model, tokenizer, Path(version), rule)
        import mlflow

        mlflow.set_tracking_uri(
            mlflow_registry.local_uri(mlflow_registry.tracking_uri(self.params.register), self.root)
        )
        scratch = tempfile.TemporaryDirectory(prefix="fundgrpo-api-")
        folder = mlflow_registry.load_components(version, Path(scratch.name))
        model, tokenizer = modelling.load(folder, self.params.generation.dtype)
        return Loaded(version, model, tokenizer, folder, calibration_of(folder, self.params, self.root), scratch)

    def serving(self, force: bool = False) -> Loaded:
        """The version to answer with; re-resolves the alias every `alias_check_s` seconds."""
        now = time.monotonic()
        if self.current is not None and not force and now - self.checked_at < self.settings.alias_check_s:
            return self.current
        with self.swap_lock:
            if self.current is None or force or now - self.checked_at >= self.settings.alias_check_s:
                version = self._resolve()
                if self.current is None or version != self.current.version:
                    loaded = self.on_worker(self._load, version)  # the old version serves until this is ready
                    self.current = loaded
                    logging.getLogger("fundgrpo.serving.api").info("serving %s", version)
                self.checked_at = time.monotonic()
        return self.current

    def label(self, share_class_id: str) -> dict | None:
        """The expert grade the pipeline trains and tests with for this share class: an analyst's
        decision (the `decisions` stage's table, read again when it changes) or the export's."""
        try:
            st = self.decisions_path.stat()
            stamp = (st.st_mtime_ns, st.st_size)
        except FileNotFoundError:
            stamp = None
        if stamp != self.decided[0]:
            table = analyst_labels.read(self.decisions_path) if stamp else None
            by_id = {} if table is None else {
                str(r.share_class_id): (int(r.grade), int(r.decision_id)) for r in table.itertuples()
            }  # fmt: skip
            self.decided = (stamp, by_id)
        if share_class_id in self.decided[1]:
            grade, decision_id = self.decided[1][share_class_id]
            return {"grade": grade, "source": "analyst", "decision_id": decision_id}
        if share_class_id in self.export_grades:
            return {"grade": self.export_grades[share_class_id], "source": "export"}
        return None

    # -- answering

    def posted(self, funds: list[dict]) -> pd.DataFrame | None:
        """The documents sent with `funds` (each fund's `documents`), checked as ingest checks a file and
        against the as-of date; None when none were sent. An `IngestError` names the fund and document."""
        given, plain = documents_apart(funds)
        return self.checked_documents(given, pd.DataFrame(plain))

    def checked_documents(self, given: dict[str, list[dict]], plain: pd.DataFrame) -> pd.DataFrame | None:
        """`posted` of documents already set apart from their funds (`documents_apart`)."""
        if not given:
            return None
        if not self.methodology.qualitative:
            raise IngestError("documents: the methodology judges nothing from documents; send the funds without them")
        frame = documents.posted(given, plain, self.params.ingest.documents)
        check_posted_dates(frame, documents.as_of(self.params.ingest.documents, with_reference(plain, self.reference)))
        return frame

    def records(self, funds: list[dict]) -> list[tuple[PromptRecord, str]]:
        given, funds = documents_apart(funds)
        frame = pd.DataFrame(funds)
        posted = self.checked_documents(given, frame)
        for column in NUMERIC:  # None from JSON -> NaN, so peer percentiles see numbers
            if column in frame:
                frame[column] = pd.to_numeric(frame[column], errors="coerce")
        frame["expert_grade"] = frame["expert_grade"].astype("Int64") if "expert_grade" in frame else pd.NA
        if "fund_id" not in frame or frame["fund_id"].isna().any():
            frame["fund_id"] = frame.get("fund_id", pd.Series(index=frame.index, dtype=object)).fillna(
                frame["share_class_id"]
            )
        universe = with_reference(frame, self.reference)
        if not self.params.prepare.universe_percentile:
            # every figure a prompt shows is taken within the fund's category: its peers are all it needs
            universe = universe[universe["category"].isin(set(frame["category"]))]
        only = [str(f["share_class_id"]) for f in funds]
        by_id = {
            r.share_class_id: r
            for r in prompt_records(
                universe,
                self.methodology,
                self.params.prepare,
                only=only,
                estimator=self.estimator,
                reading=stored_reading(self.params, self.methodology, universe, self.root, posted, only),
            )
        }
        lacking = missing_criteria(frame, self.methodology)
        return [(by_id[str(f["share_class_id"])], lacks) for f, lacks in zip(funds, lacking)]

    def generate(self, loaded: Loaded, records: list[PromptRecord], deadline: float | None = None) -> list[Prediction]:

        b = self.params.generation
        return answer(
            loaded.model,
            loaded.tokenizer,
            records,
            self.methodology,
            schema=self.schema,
            max_new_tokens=b.max_new_tokens,
            batch_size=b.batch_size,
            desc="api",
            rule=loaded.rule,
            deadline=deadline,
        )

    def stuck_for(self) -> float:
        """Seconds the running generation has gone past a request's timeout (0 when none has)."""
        if self.busy_since is None:
            return 0.0
        return max(0.0, time.monotonic() - self.busy_since - self.settings.timeout_s)

    def fail_waiting(self, reason: str) -> int:
        """Fail every queued request (a stopping server): each gets `reason` instead of waiting on."""
        failed = 0
        while self.queue is not None and not self.queue.empty():
            _, _, fut, _ = self.queue.get_nowait()
            if not fut.done():
                fut.set_exception(RuntimeError(reason))
                failed += 1
        return failed

    def prepare_and_generate(self, loaded: Loaded, items: list, deadline: float) -> list:
        """Each request's prompt records (its funds beside the reference universe, apart from the other
        requests': a fund's peers never depend on who else asked; requests that share no category are
        built in one call: `request_groups`), then one generation for them all; per request (records, answers),
        or the exception its records raised. One thread does both, in turn: the model's (`worker`)."""
        requests = [funds for _, funds, _, _ in items]
        built: list = [None] * len(items)
        for group in request_groups(requests, self.params.prepare.universe_percentile, listed=self.listed):
            try:
                made = self.records([f for i in group for f in requests[i]])
            except Exception:  # noqa: BLE001 - built again one by one: the request at fault gets its error
                made = None
            start = 0
            for i in group:
                if made is not None:
                    built[i] = made[start : start + len(requests[i])]
                    start += len(requests[i])
                    continue
                try:
                    built[i] = self.records(requests[i])
                except Exception as err:  # noqa: BLE001 - that request alone gets its error
                    built[i] = err
        records = [r for b in built if not isinstance(b, Exception) for r, _ in b]
        answers = self.generate(loaded, records, deadline) if records else []
        out: list = []
        start = 0
        for b in built:
            if isinstance(b, Exception):
                out.append(b)
                continue
            out.append((b, answers[start : start + len(b)]))
            start += len(b)
        return out

    async def batcher(self) -> None:
        """Collect requests for `batch_wait_ms`, then per version build each request's prompt records and
        generate once for them all (`prepare_and_generate`), and hand each its records and answers."""
        assert self.queue is not None
        loop = asyncio.get_running_loop()
        while True:
            first = await self.queue.get()
            batch = [first]
            deadline = loop.time() + self.settings.batch_wait_ms / 1000
            while (left := deadline - loop.time()) > 0:
                try:
                    batch.append(await asyncio.wait_for(self.queue.get(), left))
                except asyncio.TimeoutError:
                    break
            by_version: dict[str, list] = {}
            for item in batch:
                if not item[2].done():  # a request that already timed out is not generated for
                    by_version.setdefault(item[0].version, []).append(item)
            for items in by_version.values():
                loaded = items[0][0]
                # stop generating when the earliest request's timeout is reached: the model is freed
                deadline = min(enqueued for *_, enqueued in items) + self.settings.timeout_s
                self.busy_since = time.monotonic()
                try:
                    done = await loop.run_in_executor(self.worker, self.prepare_and_generate, loaded, items, deadline)
                except Exception as err:  # noqa: BLE001 - each waiting request gets the failure
                    for _, _, fut, _ in items:
                        if not fut.done():
                            fut.set_exception(err)
                    continue
                finally:
                    self.busy_since = None
                for (_, _, fut, _), result in zip(items, done):
                    if fut.done():
                        continue
                    if isinstance(result, Exception):
                        fut.set_exception(result)
                    else:
                        fut.set_result(result)

    async def evaluate(self, funds: list[dict]) -> tuple[str, list[dict]]:
        loop = asyncio.get_running_loop()
        loaded = await loop.run_in_executor(None, self.serving)  # pinned: a swap does not touch this request
        fut: asyncio.Future = loop.create_future()
        assert self.queue is not None
        if self.closing:
            raise RuntimeError("the server is stopping")
        await self.queue.put((loaded, funds, fut, time.monotonic()))
        records, answers = await asyncio.wait_for(fut, self.settings.timeout_s)
        grades = self.methodology.grades
        in_prompt = {"rule": self.params.prepare.show_rule, "gbm": self.params.prepare.show_model == "gbm"}
        out = []
        for fund, (record, lacks), p in zip(funds, records, answers):
            e = evaluation.build(
                record,
                p,
                loaded.rule,
                self.methodology,
                name=fund.get("name"),
                lacking=lacks,
                rule=self.params.evaluate,
                known=self.known,
            )
            out.append(
                evaluation.as_json(
                    e,
                    grades,
                    in_prompt,
                    expert=self.label(record.share_class_id),  # the label in training, if any
                    model_version=loaded.version,
                )
            )
        return loaded.version, out
