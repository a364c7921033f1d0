"""MLflow registry: log a candidate, register it, and move aliases only through the gate.

The gate compares the candidate with the current `champion` on the same backtest
(same test funds and labels, identified by a fingerprint). The first model must
beat the rule scorer. A candidate that loses, or produces too little valid JSON,
gets the `challenger` alias; `champion` never moves on a failed or worse run.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import yaml

from fundgrpo.methodology.compiler import Methodology, described, fingerprint
from fundgrpo.params import GateParams, RegisterParams

CHAMPION, CHALLENGER = "champion", "challenger"


class MlflowUnavailable(RuntimeError):
    """The MLflow tracking store cannot be reached; the message names the URI."""


def check_tracking(uri: str, timeout_s: float = 5.0) -> str:
    """Fail with a clear message when the tracking store cannot be reached; return a one-line status."""
    if uri.startswith(("http://", "https://")):
        url = uri.rstrip("/") + "/health"
        try:
            with urllib.request.urlopen(url, timeout=timeout_s) as response:
                if response.status != 200:
                    raise MlflowUnavailable(f"MLflow tracking server {uri} answered {response.status} on /health")
        except (urllib.error.URLError, OSError) as err:
            reason = getattr(err, "reason", err)
            raise MlflowUnavailable(
                f"MLflow tracking server {uri} is unreachable ({reason}); start it "
                "(docs/operations.md) or point MLFLOW_TRACKING_URI at a running one"
            ) from err
        return f"MLflow tracking server {uri} is up"
    if uri.startswith("sqlite:///"):
        folder = Path(uri[len("sqlite:///") :]).parent
        if not folder.is_dir():
            raise MlflowUnavailable(f"MLflow store {uri}: folder {folder} does not exist")
        return f"MLflow store {uri}"
    return f"MLflow store {uri} (not checked)"


@dataclass(frozen=True)
class GateDecision:
    promote: bool
    reason: str
    candidate: float
    baseline: float
    baseline_name: str


def decide(
    candidate: dict[str, float],
    baseline: dict[str, float],
    baseline_name: str,
    gate: GateParams,
    non_inferior: bool = False,
) -> GateDecision:
    """The promotion rule, pure: beat the baseline by more than `gate.margin`, or, `non_inferior` (the
    statistical model with its rule), fall below it by no more than `gate.statistical_margin`.

    >>> g = GateParams(metric="qwk", margin=0.01, min_valid_json=0.9)
    >>> decide({"qwk": 0.5, "valid_json": 1.0}, {"qwk": 0.4}, "rule", g).promote
    True
    >>> decide({"qwk": 0.405, "valid_json": 1.0}, {"qwk": 0.4}, "champion v1", g).reason
    'qwk 0.405 does not beat champion v1 0.4 by more than 0.01'
    >>> decide({"qwk": 0.9, "valid_json": 0.5}, {"qwk": 0.4}, "rule", g).promote
    False
    >>> decide({"qwk": 0.7, "valid_json": 1.0}, {"qwk": 0.7}, "gradient boosting", g, non_inferior=True).reason
    'qwk 0.7 is not below gradient boosting 0.7 by more than 0'
    >>> decide({"qwk": 0.69, "valid_json": 1.0}, {"qwk": 0.7}, "gradient boosting", g, non_inferior=True).promote
    False
    """
    value, base = float(candidate[gate.metric]), float(baseline[gate.metric])
    worse = calibration_worse(candidate, baseline, baseline_name, gate)
    if worse:
        return GateDecision(False, worse, value, base, baseline_name)
    if candidate.get("valid_json", 1.0) < gate.min_valid_json:
        return GateDecision(
            False,
            f"valid JSON rate {candidate['valid_json']:.3g} is below {gate.min_valid_json:g}",
            value,
            base,
            baseline_name,
        )
    if non_inferior:
        m = gate.statistical_margin
        ok = value >= base - m - 1e-12
        if m >= 0:
            said = f"is {'not ' if ok else ''}below {baseline_name} {base:.4g} by more than {m:g}"
        else:
            said = f"{'beats' if ok else 'does not beat'} {baseline_name} {base:.4g} by at least {-m:g}"
        return GateDecision(ok, f"{gate.metric} {value:.4g} {said}", value, base, baseline_name)
    if value > base + gate.margin:
        return GateDecision(
            True,
            f"{gate.metric} {value:.4g} beats {baseline_name} {base:.4g} by more than {gate.margin:g}",
            value,
            base,
            baseline_name,
        )
    return GateDecision(
        False,
        f"{gate.metric} {value:.4g} does not beat {baseline_name} {base:.4g} by more than {gate.margin:g}",
        value,
        base,
        baseline_name,
    )


def calibration_worse(candidate: dict, baseline: dict, baseline_name: str, gate: GateParams) -> str | None:
    """Why the candidate's calibration fails the gate (`gate.ece_tolerance`), or None: its expected
    calibration error on the test funds may exceed the baseline's by at most the tolerance; a
    baseline without one (the rule scorer, an older champion) is not compared.

    >>> g = GateParams(ece_tolerance=0.01)
    >>> calibration_worse({"trust": {"ece": 0.08}}, {"trust": {"ece": 0.05}}, "champion v1", g)
    'expected calibration error 0.08 is worse than champion v1 0.05 by more than 0.01'
    >>> calibration_worse({"trust": {"ece": 0.08}}, {"qwk": 0.5}, "rule scorer", g) is None
    True
    """
    if gate.ece_tolerance is None:
        return None
    mine, theirs = (candidate.get("trust") or {}).get("ece"), (baseline.get("trust") or {}).get("ece")
    if mine is None:
        return "the candidate has no calibration figures (gate.ece_tolerance is set): rerun calibrate and backtest"
    if theirs is not None and mine > theirs + gate.ece_tolerance:
        return (
            f"expected calibration error {mine:.4g} is worse than {baseline_name} {theirs:.4g} "
            f"by more than {gate.ece_tolerance:g}"
        )
    return None


def tracking_uri(params: RegisterParams) -> str:
    """MLFLOW_TRACKING_URI from the environment wins over params (server credentials stay there too)."""
    return os.environ.get("MLFLOW_TRACKING_URI") or params.tracking_uri


def workspace() -> Path:
    """The DVC workspace a stage belongs to: `DVC_ROOT`, else the current directory.

    `dvc exp run --queue` (and `--temp`) runs the stages in a copy under `.dvc/tmp/exps/`
    and sets DVC_ROOT to the user's workspace, so relative MLflow paths in params are
    anchored there and queued experiments log into the workspace's own store.
    """
    return Path(os.environ.get("DVC_ROOT") or ".").absolute()


def local_uri(uri: str, root: Path) -> str:
    """A relative sqlite URI made absolute under `root`; any other URI unchanged.

    >>> local_uri("sqlite:///mlflow.db", Path("/ws"))
    'sqlite:////ws/mlflow.db'
    >>> local_uri("sqlite:////abs/mlflow.db", Path("/ws")), local_uri("http://127.0.0.1:5000", Path("/ws"))
    ('sqlite:////abs/mlflow.db', 'http://127.0.0.1:5000')
    """
    if uri.startswith("sqlite:///") and not uri.startswith("sqlite:////"):
        return f"sqlite:///{(root / uri[len('sqlite:///') :]).absolute()}"
    return uri


def setup(params: RegisterParams) -> str:
    """Point MLflow at the tracking store and make sure the experiment exists; return its id.

    Relative paths (a sqlite store, the artifact location) are taken from the workspace
    (`workspace()`), so a run inside a queued DVC experiment's temporary copy still logs
    into the workspace's store, and an experiment first created there keeps its artifacts
    in the workspace, not in a folder DVC deletes after the run.
    """
    import mlflow

    root = workspace()
    uri = local_uri(tracking_uri(params), root)
    mlflow.set_tracking_uri(uri)
    experiment = mlflow.get_experiment_by_name(params.experiment)
    if experiment is not None:
        return experiment.experiment_id
    location = None
    if uri.startswith("sqlite:") or uri.startswith("file:") or "://" not in uri:
        location = (root / params.artifact_location).resolve().as_uri()
    try:
        return mlflow.create_experiment(params.experiment, artifact_location=location)
    except mlflow.exceptions.MlflowException as err:  # another process created it in between
        if err.error_code != "RESOURCE_ALREADY_EXISTS":
            raise
        return mlflow.get_experiment_by_name(params.experiment).experiment_id


def flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """{"a": {"b": 1}} -> {"a.b": 1}

    >>> flatten({"a": {"b": 1, "c": [1, 2]}, "d": "x"})
    {'a.b': 1, 'a.c': '[1, 2]', 'd': 'x'}
    """
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, f"{key}."))
        elif isinstance(v, (list, tuple)):
            out[key] = str(list(v))
        else:
            out[key] = v
    return out


LOCK_SUFFIX = ".promotion-lock"


@contextmanager
def promotion_lock(
    client, name: str, timeout_s: float = 900.0, stale_s: float = 3600.0, poll_s: float = 0.5, log=print
):
    """One gate decision at a time for `name`, across processes and machines sharing a registry.

    Reading the champion, deciding and moving the alias must not interleave: two candidates that
    both read "no champion" would both be promoted, and the worse one could end up `champion`.
    The lock is a registered model named `<name>.promotion-lock`: the registry creates a name
    atomically (a second create fails), on SQLite and on a tracking server's database alike.
    A lock older than `stale_s` (its holder died) is taken over, saying so.
    """

    from mlflow.exceptions import MlflowException

    lock = f"{name}{LOCK_SUFFIX}"
    deadline = time.monotonic() + timeout_s
    me = f"{socket.gethostname()}:{os.getpid()}"
    while True:
        try:
            client.create_registered_model(
                lock,
                tags={"holder": me, "since": f"{time.time():.3f}"},
                description=(
                    "held while a candidate passes the promotion gate; see fundgrpo/registry/mlflow_registry.py"
                ),
            )
            break
        except MlflowException as err:
            if err.error_code != "RESOURCE_ALREADY_EXISTS":
                raise
        try:
            held = client.get_registered_model(lock)
        except MlflowException:
            continue  # released in between
        holder, since = held.tags.get("holder", "?"), float(held.tags.get("since", "0") or 0)
        if time.time() - since > stale_s or not holder_alive(holder):
            log(
                f"taking over the promotion lock {lock!r} of {holder}, "
                f"held {time.time() - since:.0f} s (its holder is gone)"
            )
            client.delete_registered_model(lock)
            continue
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"{holder} still holds the promotion lock {lock!r} after {timeout_s:g} s; if no registration "
                f"is running, remove it: MlflowClient().delete_registered_model({lock!r})"
            )
        time.sleep(poll_s)
    try:
        yield
    finally:
        try:
            client.delete_registered_model(lock)
        except MlflowException as err:  # the registry went away: say so, and let the first error through
            log(
                f"could not release the promotion lock {lock!r} ({str(err)[:200]}); "
                "the next registration takes it over "
                f"at once on this host, after {stale_s:g} s elsewhere"
            )


def holder_alive(holder: str) -> bool:
    """False only for a lock holder `host:pid` on this host whose process is gone.

    >>> import os, socket
    >>> holder_alive(f"{socket.gethostname()}:{os.getpid()}"), holder_alive("elsewhere:1")
    (True, True)
    """

    host, _, pid = holder.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return True  # another machine's process: only its age tells
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# A version is created tagged `registration: pending` and marked `complete` once its alias is set:
# a registration cut off in between (the stage killed, the server gone) leaves a pending version
# without an alias, which the next registration removes before it reads the champion.
REGISTRATION = "registration"


def finish_pending(client, name: str, log=print) -> None:
    """Remove the versions of `name` whose registration never set their alias; mark complete the
    pending ones that did get it (the tag update was what failed)."""
    for found in client.search_model_versions(f"name = '{name}'"):
        if found.tags.get(REGISTRATION) != "pending":
            continue
        version = client.get_model_version(name, found.version)  # carries its aliases
        if version.aliases:
            client.set_model_version_tag(name, version.version, REGISTRATION, "complete")
        else:
            log(f"removing {name} v{version.version}: its registration did not finish (run {version.run_id})")
            client.delete_model_version(name, version.version)


def discard_pending(client, name: str, version: str, log=print) -> None:
    """Best effort, after a failed registration: delete the version unless it holds an alias.
    When the registry does not answer, the next registration removes it (finish_pending)."""
    from mlflow.exceptions import MlflowException

    try:
        if not client.get_model_version(name, version).aliases:
            client.delete_model_version(name, version)
            log(f"removed {name} v{version}: its registration did not finish")
    except MlflowException:
        log(f"{name} v{version} is left tagged {REGISTRATION}=pending; the next registration removes it")


def champion_version(client, name: str):
    """The version holding the champion alias, or None."""
    from mlflow.exceptions import MlflowException

    try:
        return client.get_model_version_by_alias(name, CHAMPION)
    except MlflowException:
        return None


class AliasError(LookupError):
    """A models:/NAME@ALIAS that points at nothing, with what to do instead."""


def version_by_alias(client, name: str, alias: str) -> str:
    """The version `alias` points at; an AliasError naming what to serve instead when none does
    (on a fresh run no version is `champion` until the gate promotes one)."""
    from mlflow.exceptions import MlflowException

    try:
        return str(client.get_model_version_by_alias(name, alias).version)
    except MlflowException as err:
        try:
            versions = client.search_model_versions(f"name = '{name}'")
        except MlflowException:
            versions = []
        if not versions:
            raise AliasError(f"models:/{name}@{alias}: no model {name!r} is registered yet (run `dvc repro`)") from err
        latest = max(int(v.version) for v in versions)
        why = " (the gate has not promoted any version; metrics/register.json says why)" if alias == CHAMPION else ""
        raise AliasError(
            f"models:/{name}@{alias}: no version carries the alias {alias!r}{why}; serve one explicitly, "
            f"e.g. models:/{name}/{latest}, or a model folder such as models/policy"
        ) from err


# The gate's decision is logged as an artifact of the candidate's run (`register`): the MLflow UI can
# move aliases and edit tags, not artifacts. Serving follows `champion` only to a version whose
# record says the gate promoted it (a hand-made rollback to an earlier such version is fine).
GATE_RECORD = "gate.json"


@dataclass(frozen=True)
class MethodologyStamp:
    """The methodology a version was trained on, as its gate record names it."""

    name: str
    version: str
    language: str
    fingerprint: str

    @classmethod
    def of(cls, m: Methodology) -> MethodologyStamp:
        return cls(m.name, m.version, m.language, fingerprint(m))


@dataclass(frozen=True)
class GateRecord:
    """What the gate decided for one version, logged with its run (GATE_RECORD): serving trusts it,
    not the alias (the MLflow UI can move aliases and edit tags, not artifacts). One serializer
    (`as_dict`, the artifact) and one reader (`of`)."""

    version: str
    promoted: bool  # the gate promoted it to `champion`
    reason: str  # the gate's decision in words
    passed: bool | None = None  # it passed the gate (True and not promoted: register.promote is off)
    metric: str | None = None  # the gate's metric (register.gate.metric)
    candidate: float | None = None  # the candidate's figure on that metric
    baseline: float | None = None  # what it was compared with, and whose (baseline_name)
    baseline_name: str | None = None
    methodology: MethodologyStamp | None = None  # what it was trained on (None: registered before records named it)
    serves: str | None = None  # what its grades are, in words (`story.served_words`)

    def as_dict(self) -> dict:
        return asdict(self)  # the methodology's stamp nested as its own dict

    @classmethod
    def of(cls, data: Mapping) -> GateRecord:
        """The record from its JSON; `version`, `promoted` and `reason` are required (what serving
        decides on), the rest are None where an older or hand-written record lacks them.

        >>> GateRecord.of({"version": "3", "promoted": True, "reason": "beat"}).methodology is None
        True
        >>> GateRecord.of({"version": "3", "promoted": "yes", "reason": "beat"})
        Traceback (most recent call last):
        ValueError: gate record: promoted must be true or false, not 'yes'
        """
        missing = [k for k in ("version", "promoted", "reason") if k not in data]
        unknown = sorted(set(data) - {f.name for f in fields(cls)})
        if missing or unknown:
            raise ValueError(f"gate record: missing {missing}, unknown {unknown}")
        if not isinstance(data["promoted"], bool):
            raise ValueError(f"gate record: promoted must be true or false, not {data['promoted']!r}")
        stamp = data.get("methodology")
        return cls(**{**data, "version": str(data["version"]),
                      "methodology": MethodologyStamp(**stamp) if stamp else None})  # fmt: skip

    def fingerprint(self) -> str | None:
        return None if self.methodology is None else self.methodology.fingerprint


def gate_record(client, name: str, version: str, cache: dict | None = None) -> GateRecord | None:
    """The gate's decision for `name` v`version` (its run's GATE_RECORD), or None when it has none
    (registered by hand, or before gate records) or one that does not read as a record (said on
    stderr). Records never change: `cache` keeps them."""

    key = (client.tracking_uri, name, str(version))
    if cache is not None and key in cache:
        return cache[key]
    run_id = client.get_model_version(name, version).run_id
    record = None
    if run_id:
        with tempfile.TemporaryDirectory() as tmp:
            try:
                path = client.download_artifacts(run_id, GATE_RECORD, tmp)
                data = json.loads(Path(path).read_text(encoding="utf-8"))
            except Exception:  # noqa: BLE001 - no such artifact (MLflow raises several kinds): no record
                data = None
        try:
            record = None if data is None else GateRecord.of(data)
        except (ValueError, TypeError, AttributeError) as err:
            print(f"{name} v{version}: its {GATE_RECORD} is not a gate record ({err}); taken as none", file=sys.stderr)
    if record is not None and record.version != str(version):
        record = None  # another registration of the run: the gate judged that version, not this one
    if cache is not None:
        cache[key] = record
    return record


def promoted_by_gate(gate: GateRecord | None) -> bool:
    """True when a gate record says the gate promoted the version.

    >>> promoted_by_gate(GateRecord("1", True, "beat")), promoted_by_gate(GateRecord("1", False, "lost"))
    (True, False)
    >>> promoted_by_gate(None)
    False
    """
    return gate is not None and gate.promoted


def trained_on(gate: GateRecord | None) -> str:
    """The methodology a gate record says its version was trained on, in words.

    >>> trained_on(GateRecord("1", True, "beat", methodology=MethodologyStamp("House", "2", "ko", "ab12")))
    "'House' v2 (ko, fingerprint ab12)"
    >>> trained_on(None)
    'an unrecorded methodology'
    """
    m = gate.methodology if gate is not None else None
    if m is None:
        return "an unrecorded methodology"
    return f"{m.name!r} v{m.version} ({m.language}, fingerprint {m.fingerprint})"


def matches(gate: GateRecord | None, methodology: str | None) -> bool:
    """Whether a version may answer under the compiled methodology (its fingerprint, `methodology`):
    its gate record names the same one; a record without one (older versions) is not refused.

    >>> a = GateRecord("1", True, "beat", methodology=MethodologyStamp("House", "2", "ko", "a"))
    >>> matches(a, "a"), matches(a, "b"), matches(GateRecord("1", True, "beat"), "b"), matches(a, None)
    (True, False, True, True)
    """
    recorded = gate.fingerprint() if gate is not None else None
    return methodology is None or recorded is None or recorded == methodology


def served_version(
    client,
    name: str,
    alias: str,
    keep: str | None = None,
    cache: dict | None = None,
    compiled_now: Methodology | None = None,
) -> tuple[str, str | None]:
    """(version to serve, note) for models:/name@alias. For `champion`, only a version the gate
    promoted and, given the methodology compiled now (`compiled_now`), one trained on it (its gate
    record's fingerprint): when the alias points at another (moved by hand, in the MLflow UI; or
    trained before the methodology file changed), `keep` (the version serving now) if it qualifies, else
    the newest version that does; the note says so. Another alias is served as it is, but never under
    another methodology. An AliasError when nothing servable exists, naming both methodologies."""
    methodology = fingerprint(compiled_now) if compiled_now is not None else None
    compiled = described(compiled_now) if compiled_now is not None else "the methodology compiled now"
    version = version_by_alias(client, name, alias)
    record = gate_record(client, name, version, cache) if alias == CHAMPION or methodology else None
    other = not matches(record, methodology)
    if alias != CHAMPION:
        if other:
            raise AliasError(
                f"models:/{name}@{alias} is v{version}, trained on {trained_on(record)}; {compiled} is another "
                f"(fingerprint {methodology}): it would answer in another methodology's words and grades. Retrain "
                "(`dvc repro`), or compile the methodology it was trained on"
            )
        return version, None
    if promoted_by_gate(record) and not other:
        return version, None
    if other:
        note = (
            f"{alias} points at v{version}, trained on {trained_on(record)}, but {compiled} is another "
            f"(fingerprint {methodology})"
        )
    else:
        why = record.reason if record else "no gate record: the alias was set by hand"
        note = f"{alias} points at v{version}, which the gate did not promote ({why})"

    def servable(v: str) -> bool:
        found = gate_record(client, name, v, cache)
        return promoted_by_gate(found) and matches(found, methodology)

    if keep is not None and keep != version and servable(keep):
        return keep, f"{note}; serving v{keep}, the version the gate promoted that was serving"
    numbers = sorted((int(v.version) for v in client.search_model_versions(f"name = '{name}'")), reverse=True)
    for number in numbers:
        if str(number) != version and servable(str(number)):
            return str(number), f"{note}; serving v{number}, the newest version the gate promoted on it"
    raise AliasError(
        f"models:/{name}@{alias}: {note}, and no version the gate promoted is left to serve"
        + (" under it: retrain (`dvc repro`), or compile the methodology the champion was trained on" if other else "")
    )


CALIBRATION_FILE = "calibration.json"  # a version's confidence fit, written beside its weights


def load_components(model_uri: str, dst: Path) -> Path:
    """Download a registered model into `dst`; return one folder `from_pretrained` loads.

    The transformers flavour keeps weights in `model/` and the tokenizer in
    `components/tokenizer/`; the tokenizer files are copied beside the weights, and the
    calibration fit logged in the model's metadata is written there as CALIBRATION_FILE.
    """

    import mlflow

    local = Path(mlflow.artifacts.download_artifacts(artifact_uri=model_uri, dst_path=str(dst)))
    weights = next((p.parent for p in local.rglob("config.json")), None)
    if weights is None:
        raise FileNotFoundError(f"no Hugging Face model files under {model_uri}")
    tokenizer = local / "components" / "tokenizer"
    if tokenizer.is_dir():
        for f in tokenizer.iterdir():
            shutil.copy2(f, weights / f.name)
    mlmodel = local / "MLmodel"
    if mlmodel.exists():
        fit = ((yaml.safe_load(mlmodel.read_text(encoding="utf-8")) or {}).get("metadata") or {}).get("calibration")
        if fit:
            (weights / CALIBRATION_FILE).write_text(json.dumps(fit) + "\n", encoding="utf-8")
    return weights
