"""Pretrained evaluators against the experts: collect kept runs, generate research/pretrained.md.

    # 1. a run: a fresh copy of the repo with profiles applied, `dvc repro`, kept
    python benchmarks/time/pipeline.py --profile smollm2 --keep                    # prints "running in DIR"
    # (optional) the sampling-headroom check on its SFT start, before GRPO (DIR holds research/experiments/ too)
    (cd DIR && python research/experiments/sampling_headroom/sampling_headroom.py models/sft 8 \\
        --splits validation --max-funds 96 --out headroom.json)
    # 2. its figures into research/results/pretrained/<dataset>/<variant>/ (small JSON, committed)
    python benchmarks/contest/pretrained_report.py collect DIR --dataset synthetic --variant sft-grpo
    # 3. the page, from every collected run
    python benchmarks/contest/pretrained_report.py report

Variants: `sft-grpo` (the profile as it is: zero-shot, SFT and GRPO rows), `grpo-from-instruct`
(`sft.enabled: false`: GRPO straight from the instruct model), `reasoning-first` (answers state the
weighted evidence before the grade), `no-rule` (`prepare.show_rule: false`: the prompt without the
methodology's own score and grade), `context` (`profiles/morningstar-context.yaml`: 1-year return,
3-year Sharpe and alpha shown as context), `top-layers` (`profiles/lora-top15.yaml`: LoRA on the top
15 layers only), `two-epochs` (that and `research/profiles/sft-2epochs.yaml`: two SFT epochs),
`top-layers-again` (the top-layers profile run a second time), `bf16` (that with
`profiles/cpu-bf16.yaml`: bfloat16 steps). Rows of one dataset are on the same test funds (checked by the
backtest's test fingerprint). GRPO - SFT comes with a paired bootstrap 95 % interval by fund.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
RESEARCH = HERE.parents[1] / "research"
RESULTS = RESEARCH / "results" / "pretrained"
PAGE = RESEARCH / "pretrained.md"
LM_ROWS = {"base": "zero-shot (no training)", "sft": "SFT (LoRA)", "grpo": "GRPO from SFT"}
VARIANT_GRPO = {
    "grpo-from-instruct": "GRPO from the instruct model (no SFT)",
    "reasoning-first": "reasoning-first SFT + GRPO",
}
# The same profile before `prepare.show_rule`: the prompt without the methodology's own score and grade.
NO_RULE = "no-rule"
# The same profile with context metrics in the prompt (the rule scorer is unchanged).
CONTEXT = "context"
# The same profile with LoRA on the top layers only (`profiles/lora-top15.yaml`).
TOP_LAYERS = "top-layers"
# That, with two SFT epochs (`research/profiles/sft-2epochs.yaml`).
TWO_EPOCHS = "two-epochs"
# The top-layers profile run again, unchanged: how far two runs of one profile differ on 2 CPU cores.
TOP_LAYERS_AGAIN = "top-layers-again"
# The top-layers profile with bfloat16 SFT and GRPO steps (`profiles/cpu-bf16.yaml`).
BF16 = "bf16"
# Variants that change one thing and keep SFT + GRPO: (what changed, as a row label; its paragraph's
# opening; the variant it changes, whose SFT its SFT is compared with: None for the main run)
SFT_GRPO_VARIANTS = {
    CONTEXT: (
        "prompt with context metrics",
        "**Context metrics in the prompt** (`profiles/morningstar-context.yaml`: 1-year return, "
        "3-year Sharpe and alpha beside the periods, not scored",
        None,
    ),
    TOP_LAYERS: (
        "LoRA on the top {top} layers only",
        "**LoRA on the top {top} layers only** (`profiles/lora-top15.yaml`, for SFT and GRPO: "
        "the backward pass stops at the lowest adapted layer",
        None,
    ),
    TWO_EPOCHS: (
        "LoRA on the top {top} layers, {epochs:g} SFT epochs",
        "**{epochs:g} SFT epochs, LoRA on the top {top} layers** "
        "(`profiles/lora-top15.yaml` + `research/profiles/sft-2epochs.yaml`: "
        "the top-layers run above trained {epochs:g} times as long",
        TOP_LAYERS,
    ),
    TOP_LAYERS_AGAIN: (
        "LoRA on the top {top} layers, a second run",
        "**The top-layers run again** (the same profiles on another day: "
        "how far two runs of one profile differ on 2 CPU cores",
        TOP_LAYERS,
    ),
    BF16: (
        "LoRA on the top {top} layers, bfloat16 steps",
        "**bfloat16 steps on a CPU with AVX-512 BF16** (`profiles/lora-top15.yaml` + "
        "`profiles/cpu-bf16.yaml`: SFT and GRPO under bfloat16 autocast (the trainers' `bf16`); "
        "the weights and the backtest's answers stay float32",
        TOP_LAYERS,
    ),
}


def collect(run: Path, dataset: str, variant: str) -> Path:
    """Copy a kept run's figures (metrics, stage times, per-fund grades) into RESULTS."""
    out = RESULTS / dataset / variant
    out.mkdir(parents=True, exist_ok=True)
    params = yaml.safe_load((run / "params.yaml").read_text(encoding="utf-8"))
    metrics = {
        name: json.loads((run / "metrics" / f"{name}.json").read_text())
        for name in ("backtest", "sft", "baseline", "prepare")
    }
    # the grpo stage's metrics, kept under "train" in the collected summaries (runs before the
    # stage was renamed wrote metrics/train.json)
    grpo = run / "metrics" / "grpo.json"
    metrics["train"] = json.loads((grpo if grpo.exists() else run / "metrics" / "train.json").read_text())
    for key in ("curves", "eval_curve"):
        metrics["train"].pop(key, None)
    summary = {
        "params": {k: params.get(k) for k in ("model", "prepare", "sft", "grpo", "backtest", "methodology")},
        "bench": json.loads((run / "bench.json").read_text()) if (run / "bench.json").exists() else None,
        "eval_curve": json.loads((run / "plots" / "eval_rewards.json").read_text())
        if (run / "plots" / "eval_rewards.json").exists()
        else [],
        **metrics,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n")
    fund_of = {
        r["share_class_id"]: r["fund_id"]
        for r in map(json.loads, (run / "data/prepared/test.jsonl").read_text(encoding="utf-8").splitlines())
    }
    with (out / "per_fund.jsonl").open("w") as f:
        for line in (run / "reports/backtest/predictions.jsonl").read_text(encoding="utf-8").splitlines():
            r = json.loads(line)
            keep = {
                k: v
                for k, v in r.items()
                if k.endswith(("_grade", "_valid", "_confidence")) or k in ("grpo_text", "grpo_probs")
            }
            f.write(
                json.dumps({"share_class_id": r["share_class_id"], "fund_id": fund_of[r["share_class_id"]], **keep})
                + "\n"
            )
    for extra in (
        "headroom.json",
        "overhead.json",
        "from_instruct.json",
    ):  # written into the run by the benchmarks above
        if (run / extra).exists():
            shutil.copy(run / extra, out / extra)
    calibration = run / (params.get("calibrate") or {}).get("out", "models/calibration.json")
    if calibration.exists():  # the calibrate stage's fit and its validation figures
        shutil.copy(calibration, out / "calibration.json")
    return out


def _fmt(v, digits: int = 3) -> str:
    return "–" if v is None else f"{v:.{digits}f}"


def _minutes(seconds) -> str:
    return "–" if seconds is None else f"{seconds / 60:.1f}"


def _row(label: str, m: dict, trained, answering, evidence=True) -> str:
    """One evaluator's table row: its backtest metrics, training and answering minutes."""
    cites = _fmt(m.get("evidence")) if evidence else "–"
    return (
        f"| {label} | {_fmt(m['valid_json'])} | {_fmt(m['exact'])} | {_fmt(m['within_one'])} "
        f"| {_fmt(m['qwk'])} | {_fmt(m['spearman'])} "
        f"| {cites} | {_minutes(trained)} | {_minutes(answering)} |"
    )


def _paired(per_fund: list[dict], other: list[dict]) -> tuple[list[tuple[dict, dict]], list[int], list[str]]:
    """(row, the other run's row) for each test share class, with the expert grades and fund ids."""
    by_id = {r["share_class_id"]: r for r in other}
    paired = [(r, by_id[r["share_class_id"]]) for r in per_fund]
    return paired, [r["expert_grade"] for r, _ in paired], [r["fund_id"] for r, _ in paired]


def dataset_section(name: str, runs: dict[str, dict]) -> list[str]:
    from fundgrpo.evaluation.agreement import paired_bootstrap

    main = runs.get("sft-grpo")
    out = [f"## {name}", ""]
    if main is None:
        return out + ["(no `sft-grpo` run collected)", ""]
    s, per_fund = main["summary"], main["per_fund"]
    bt, bench = s["backtest"], s["bench"] or {}
    stage = bench.get("stage_seconds", {})
    grades = sorted({r["expert_grade"] for r in per_fund})
    p = s["params"]
    out += [
        f"Model `{p['model']['pretrained'] or 'embedded (about 1M parameters, tokenizer trained on the prompts)'}`, "
        f"prompts `{p['prepare'].get('prompt_style', 'full')}` "
        f"({s['prepare'].get('prompt_tokens_mean', '?')} tokens on average, "
        f"answers {s['prepare'].get('answer_tokens_mean', '?')}), "
        f"methodology `{p['methodology']['path']}`, its own score and grade in the prompt (`show_rule`): "
        f"{'yes' if p['prepare'].get('show_rule') else 'no'}; {bt['n_funds']} test share classes of "
        f"{len({r['fund_id'] for r in per_fund})} funds, the same for every row "
        f"(test fingerprint `{bt['test_fingerprint']}`). "
        f"SFT: {p['sft']['epochs']} epoch(s), {s['sft'].get('steps')} steps of {p['sft']['batch_size']}, "
        f"LoRA r {p['sft']['lora']['r']}; "
        f"GRPO: {s['train']['steps']} steps of {p['grpo']['per_device_train_batch_size']} completions "
        f"({p['grpo']['num_generations']} per prompt), lr {p['grpo']['learning_rate']}, "
        f"kept: {s['train'].get('kept')}.",
        "",
        "| evaluator | valid JSON | exact | within one | QWK | Spearman | cites evidence | training min "
        "| answering the test funds min |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    train_seconds = {"base": None, "sft": s["sft"].get("seconds"), "grpo": s["train"].get("seconds")}
    for key, label in LM_ROWS.items():
        m = bt["models"][key]
        out.append(_row(label, m, train_seconds[key], m.get("seconds")))
    for variant, label in VARIANT_GRPO.items():
        if variant in runs:
            other = runs[variant]["summary"]
            if other["backtest"]["test_fingerprint"] != bt["test_fingerprint"]:
                raise SystemExit(f"{name}/{variant}: another test set than sft-grpo")
            rows = [("grpo", label, (other["sft"].get("seconds") or 0) + (other["train"].get("seconds") or 0))]
            if variant == "reasoning-first":  # its own SFT start too: the answer style changes SFT as well
                rows = [
                    ("sft", "reasoning-first SFT (LoRA)", other["sft"].get("seconds")),
                    ("grpo", "reasoning-first GRPO from that SFT", other["train"].get("seconds")),
                ]
            for key, row_label, trained in rows:
                m = other["backtest"]["models"][key]
                out.append(_row(row_label, m, trained, m.get("seconds")))
    if NO_RULE in runs:
        other = runs[NO_RULE]["summary"]
        if other["backtest"]["test_fingerprint"] != bt["test_fingerprint"]:
            raise SystemExit(f"{name}/{NO_RULE}: another test set than sft-grpo")
        for key, row_label, trained in (
            ("sft", "SFT, prompt without the methodology's verdict", other["sft"].get("seconds")),
            ("grpo", "GRPO from that SFT", other["train"].get("seconds")),
        ):
            m = other["backtest"]["models"][key]
            out.append(_row(row_label, m, trained, m.get("seconds")))
    for variant, (change, _, _) in SFT_GRPO_VARIANTS.items():
        if variant not in runs:
            continue
        other = runs[variant]["summary"]
        if other["backtest"]["test_fingerprint"] != bt["test_fingerprint"]:
            raise SystemExit(f"{name}/{variant}: another test set than sft-grpo")
        change = change.format(
            top=other["params"]["sft"]["lora"].get("top_layers"), epochs=other["params"]["sft"]["epochs"]
        )
        for key, row_label, trained in (
            ("sft", f"SFT, {change}", other["sft"].get("seconds")),
            ("grpo", f"GRPO from that SFT ({other['train']['steps']} steps)", other["train"].get("seconds")),
        ):
            m = other["backtest"]["models"][key]
            out.append(_row(row_label, m, trained, m.get("seconds")))
    for key, label in (("rule", "rule scorer (the methodology)"), ("gbm", "gradient boosting (`baseline`)")):
        m = bt["models"][key]
        secs = s["baseline"].get("seconds") if key == "gbm" else None
        out.append(_row(label, m, secs, None, evidence=False))

    if s["train"].get("kept") == "start":
        out += [
            "",
            f"**GRPO − SFT** is zero by construction: no GRPO evaluation beat the SFT start on greedy validation "
            f"{s['train'].get('best_metric')} ({s['train'].get('start_value')} at the start, "
            f"best {s['train'].get('best_value')}), "
            'so the stage kept the start (`"kept": "start"` in `metrics/grpo.json`).',
        ]
    else:
        out += ["", "**GRPO − SFT**, paired bootstrap by fund (2,000 resamples of the test funds, 95 % interval):", ""]
        out += ["| metric | GRPO − SFT | 95 % interval |", "|---|---|---|"]
        expert = [r["expert_grade"] for r in per_fund]
        groups = [r["fund_id"] for r in per_fund]
        for metric in ("exact", "qwk"):
            b = paired_bootstrap(
                expert, [r["grpo_grade"] for r in per_fund], [r["sft_grade"] for r in per_fund], groups, grades, metric
            )
            out.append(f"| {metric} | {b['diff']:+.3f} | [{b['lo']:+.3f}, {b['hi']:+.3f}] |")
    if "reasoning-first" in runs:
        rf = runs["reasoning-first"]
        paired, expert, groups = _paired(per_fund, rf["per_fund"])
        rs = rf["summary"]["train"]
        out += [
            "",
            "**Reasoning-first** (`profiles/reasoning-first.yaml`, "
            f"answers {rf['summary']['prepare'].get('answer_tokens_mean', '?')} tokens): "
            f"GRPO kept {rs.get('kept')} (greedy validation {rs.get('best_metric')} {rs.get('start_value')} "
            f"at the start, best {rs.get('best_value')}). "
            "Paired bootstrap by fund, as above:",
            "",
            "| comparison | metric | difference | 95 % interval |",
            "|---|---|---|---|",
        ]
        for title, a_key, b_key, a_src, b_src in (
            ("reasoning-first GRPO − its SFT", "grpo_grade", "sft_grade", 1, 1),
            ("reasoning-first SFT − brief SFT", "sft_grade", "sft_grade", 1, 0),
            ("reasoning-first GRPO − brief SFT", "grpo_grade", "sft_grade", 1, 0),
        ):
            for metric in ("exact", "qwk"):
                b = paired_bootstrap(
                    expert,
                    [pair[a_src][a_key] for pair in paired],
                    [pair[b_src][b_key] for pair in paired],
                    groups,
                    grades,
                    metric,
                )
                out.append(f"| {title} | {metric} | {b['diff']:+.3f} | [{b['lo']:+.3f}, {b['hi']:+.3f}] |")
        rf_curve = [r for r in rf["summary"].get("eval_curve", []) if "eval_greedy_qwk" in r]
        if rf_curve:
            out += [
                "",
                "Its greedy validation agreement at each evaluation: "
                + ", ".join(
                    f"step {r['step']}: exact {r['eval_greedy_exact']:.3f} / QWK {r['eval_greedy_qwk']:.3f}"
                    for r in rf_curve
                )
                + ".",
            ]
    if NO_RULE in runs:
        nr = runs[NO_RULE]
        paired, expert, groups = _paired(per_fund, nr["per_fund"])
        ns = nr["summary"]["train"]
        out += [
            "",
            "**The methodology's verdict in the prompt** (`prepare.show_rule`): "
            'the rows "without the methodology\'s verdict" '
            "are the same profile measured before it "
            f"(prompts {nr['summary']['prepare'].get('prompt_tokens_mean', '?')} tokens; "
            f"its GRPO kept {ns.get('kept')}, greedy validation "
            f"{ns.get('best_metric')} {ns.get('start_value')} at the start, best {ns.get('best_value')}). "
            "Paired bootstrap by fund, with it against without it and against the baselines:",
            "",
            "| comparison | metric | difference | 95 % interval |",
            "|---|---|---|---|",
        ]
        for title, a_key, b_key, b_src in (
            ("SFT with − without", "sft_grade", "sft_grade", 1),
            ("GRPO with − without", "grpo_grade", "grpo_grade", 1),
            ("GRPO with − rule scorer", "grpo_grade", "rule_grade", 0),
            ("GRPO with − gradient boosting", "grpo_grade", "gbm_grade", 0),
        ):
            for metric in ("exact", "qwk"):
                b = paired_bootstrap(
                    expert,
                    [pair[0][a_key] for pair in paired],
                    [pair[b_src][b_key] for pair in paired],
                    groups,
                    grades,
                    metric,
                )
                out.append(f"| {title} | {metric} | {b['diff']:+.3f} | [{b['lo']:+.3f}, {b['hi']:+.3f}] |")
    for variant, (change, opening, base) in SFT_GRPO_VARIANTS.items():
        if variant not in runs or (base and base not in runs):
            continue
        v = runs[variant]
        paired, expert, groups = _paired(per_fund, v["per_fund"])
        vs, bench_v = v["summary"], v["summary"].get("bench") or {}
        top, epochs = vs["params"]["sft"]["lora"].get("top_layers"), vs["params"]["sft"]["epochs"]
        # the SFT this variant changes: the main run's, or another variant's (on the same funds, checked above)
        base_sft = {r["share_class_id"]: r["sft_grade"] for r in runs[base]["per_fund"]} if base else None
        base_top = runs[base]["summary"]["params"]["sft"]["lora"].get("top_layers") if base else None
        base_label = f"SFT, {SFT_GRPO_VARIANTS[base][0].format(top=base_top).split(',')[0]}" if base else "SFT above"
        stages_v = ", ".join(f"{k} {_minutes(t)}" for k, t in bench_v.get("stage_seconds", {}).items() if t >= 60)
        out += [
            "",
            opening.format(top=top, epochs=epochs)
            + f"; prompts {vs['prepare'].get('prompt_tokens_mean', '?')} tokens; "
            f"SFT {vs['sft'].get('steps')} steps, "
            f"{_fmt((vs['sft'].get('seconds') or 0) / max(1, vs['sft'].get('steps') or 1), 1)} s a step; "
            f"GRPO {vs['train']['steps']} steps, kept {vs['train'].get('kept')}; "
            f"`dvc repro` {_minutes(bench_v.get('total_seconds'))} min"
            + (f": {stages_v} min" if stages_v else "")
            # the machine's speed on the day, where both runs did identical work (same base model, same
            # prompts, greedy)
            + (
                "; the zero-shot answers to the test funds, the same work in both runs, "
                f"took {vs['backtest']['models']['base'].get('seconds')} s "
                f"against {bt['models']['base'].get('seconds')} s in the run above"
                if vs["prepare"].get("prompt_tokens_mean") == s["prepare"].get("prompt_tokens_mean")
                else ""
            )
            + "). "
            + (
                f"Its SFT gives the same grade as the {base} run's SFT on "
                f"{sum(base_sft[p[1]['share_class_id']] == p[1]['sft_grade'] for p in paired)} "
                f"of {len(paired)} test share classes. "
                if base
                else ""
            )
            + "Paired bootstrap by fund, its kept model against the rows above:",
            "",
            "| comparison | metric | difference | 95 % interval |",
            "|---|---|---|---|",
        ]
        short = (
            change.format(top=top, epochs=epochs).split(",")[-1].strip()
            if base
            else change.format(top=top).split(",")[0]
        )
        # GRPO against its own start only where it moved (a kept start is zero by construction)
        own = (
            ()
            if vs["train"].get("kept") == "start"
            else ((f"GRPO, {short} − its SFT", "grpo_grade", "sft_grade", 1, ("exact", "qwk")),)
        )
        for title, a_key, b_key, b_src, metrics in (
            *own,
            (f"SFT, {short} − {base_label}", "sft_grade", "sft_grade", "base" if base else 0, ("exact", "qwk")),
            (f"GRPO, {short} − rule scorer", "grpo_grade", "rule_grade", 0, ("exact", "within_one", "qwk", "spearman")),
            (f"GRPO, {short} − gradient boosting", "grpo_grade", "gbm_grade", 0, ("exact", "qwk")),
        ):
            for metric in metrics:
                other_grades = (
                    [base_sft[pair[1]["share_class_id"]] for pair in paired]
                    if b_src == "base"
                    else [pair[b_src][b_key] for pair in paired]
                )
                b = paired_bootstrap(expert, [pair[1][a_key] for pair in paired], other_grades, groups, grades, metric)
                out.append(f"| {title} | {metric} | {b['diff']:+.3f} | [{b['lo']:+.3f}, {b['hi']:+.3f}] |")
    curve = [r for r in s.get("eval_curve", []) if "eval_greedy_qwk" in r]
    if curve:
        out += [
            "",
            "GRPO's greedy validation agreement at each evaluation (step 0 is its SFT start): "
            + ", ".join(
                f"step {r['step']}: exact {r['eval_greedy_exact']:.3f} / QWK {r['eval_greedy_qwk']:.3f}" for r in curve
            )
            + ".",
        ]
    for which, run in (("", main), (", measured without the methodology's verdict in the prompt", runs.get(NO_RULE))):
        if not run or "headroom" not in run:
            continue
        h = next(iter(run["headroom"].values()))
        out += [
            "",
            f"**Sampling headroom of the SFT start**{which} "
            f"(`research/experiments/sampling_headroom/sampling_headroom.py`, {h['n']} test share classes, "
            f"k = {h['k']}, temperature {h['temperature']}): GRPO sharpens towards what the policy's samples agree on, "
            "so it has room where maj@k beats greedy.",
            "",
            "| decision | exact | within one | QWK | Spearman |",
            "|---|---|---|---|---|",
        ]
        for label, m in h["decisions"].items():
            out.append(f"| {label} | {m['exact']:.3f} | {m['within_one']:.3f} | {m['qwk']:.3f} | {m['spearman']:.3f} |")
        out += ["", f"pass@{h['k']} {h['pass_at_k']:.3f}; the samples disagree on {h['disagree']:.1%} of the funds."]
    if "from_instruct" in main:
        f = main["from_instruct"]
        valid = [r["json_reward"] for r in f["per_step"] if r.get("json_reward") is not None]
        out += [
            "",
            "**GRPO straight from the instruct model** (no SFT; "
            f"`research/experiments/grpo_from_instruct/grpo_from_instruct.py`, {f['steps']} steps of "
            f"{p['grpo']['per_device_train_batch_size']} completions, {f['seconds'] / 60:.1f} min): "
            "valid-JSON share of its samples "
            "per step "
            + ", ".join(f"{v:.2f}" for v in valid)
            + "; mean reward per step "
            + ", ".join(f"{r['reward']:.2f}" for r in f["per_step"])
            + "; spread within groups (reward_std) "
            + ", ".join(f"{r['reward_std']:.2f}" for r in f["per_step"])
            + ".",
        ]
    if "overhead" in main:
        o = main["overhead"]
        out += [
            "",
            f"**Pipeline overhead** (`benchmarks/time/grpo_overhead.py`, {o['steps']} GRPO steps, "
            "evaluation and checkpoints off, "
            "the `train` stage and a bare TRL `GRPOTrainer` script as whole processes, alternately): "
            + "; ".join(
                f"stage {q['stage_s']:.0f} s vs bare {q['bare_s']:.0f} s "
                f"(peak {q.get('stage_peak_rss_mb')} vs {q.get('bare_peak_rss_mb')} MB)"
                for q in o["pairs"]
            )
            + f"; median ratio {o['median_ratio']:.3f}.",
        ]
    if p["methodology"]["path"].endswith("_ko.yaml"):
        texts = [r.get("grpo_text", "") for r in per_fund if r.get("grpo_valid")]
        reasons = [json.loads(t).get("reasoning", "") for t in texts]
        hangul = sum(any("\uac00" <= ch <= "\ud7a3" for ch in t) for t in reasons)
        out += ["", f"Reasoning in Korean: {hangul} of {len(reasons)} valid GRPO answers contain Hangul. Examples:", ""]
        out += [f"- `{t}`" for t in texts[:3]]
    if bench:
        rows = ", ".join(f"{k} {_minutes(v)}" for k, v in stage.items())
        total = (
            f"`dvc repro` {_minutes(bench['total_seconds'])} min in all ({rows} min)"
            if bench.get("total_seconds")
            else f"{rows} min"
        )
        out += [
            "",
            f"**Time** (`python benchmarks/time/pipeline.py --profile {' '.join(bench['profiles'])} --keep`, "
            f"{bench['nproc']} cores): {total}." + (f" {bench['note']}" if bench.get("note") else ""),
        ]
    memory = {
        name: s[key].get("peak_rss_mb") for name, key in (("SFT", "sft"), ("GRPO", "train"), ("backtest", "backtest"))
    }
    out += [
        "",
        "**Peak memory** of each stage's process (`peak_rss_mb` in its metrics): "
        + ", ".join(f"{k} {v} MB" for k, v in memory.items() if v)
        + ".",
    ]
    return out + [""]


# Runs of the evidence-and-confidence wave (issue 25), beside the dataset's `sft-grpo` run:
# variant -> (what it changes, the variant it changes or None for the main run)
TRUST_VARIANTS = {
    "pooled": ("beliefs read and pooled", None),  # the evaluator as served, on a profile run before it existed
    "evidence": ("statistical estimate in the prompt", None),
    "stated": ("stated confidence + calibration reward", None),
    "embedded-evidence": ("embedded model, statistical estimate in the prompt", None),
}


def _trust_row(label: str, m: dict, block: dict | None) -> str:
    b = block or {}
    return (
        f"| {label} | {_fmt(m.get('valid_json'))} | {_fmt(m.get('exact'))} | {_fmt(m.get('qwk'))} "
        f"| {_fmt(b.get('ece'))} | {_fmt(b.get('brier'))} | {_fmt(b.get('exact_top70'))} "
        f"| {_fmt(m.get('unsupported'))} |"
    )


def _interval(b: dict) -> str:
    return f"{b['diff']:+.3f} [{b['lo']:+.3f}, {b['hi']:+.3f}]"


def _flat(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        out.update(_flat(v, f"{prefix}{k}.") if isinstance(v, dict) else {f"{prefix}{k}": v})
    return out


# settings that say where outputs go or how the backtest reads them, not what is trained
_NOT_TRAINING = ("calibrate.", "backtest.", "register.", "evidence.", "evaluate.", "monitor.", "serve.")


def _settings_changed(a: dict, b: dict) -> set[str]:
    """Training settings set in both runs that differ (a setting new since the older run is not a change)."""
    fa, fb = _flat(a["summary"]["params"]), _flat(b["summary"]["params"])
    return {
        k
        for k in fa.keys() & fb.keys()
        if fa[k] != fb[k] and not k.startswith(_NOT_TRAINING) and not k.endswith(("metrics", "curves", "_dir"))
    } | {k for k in fa.keys() - fb.keys() if k == "prepare.show_model" and fa[k] not in (None, "none")}


def closest_run(variant: str, runs: dict[str, dict]) -> str | None:
    """The collected run on the same test funds whose training settings differ least from `variant`'s."""
    me = runs[variant]
    fingerprint = me["summary"]["backtest"]["test_fingerprint"]
    model = me["summary"]["params"]["model"].get("pretrained")
    others = [
        v
        for v in runs
        if v != variant
        and v not in TRUST_VARIANTS
        and runs[v]["summary"]["backtest"]["test_fingerprint"] == fingerprint
        and runs[v]["summary"]["params"]["model"].get("pretrained") == model  # the same model, or no comparison
    ]
    return min(others, key=lambda v: (len(_settings_changed(me, runs[v])), v), default=None)


def trust_section(name: str, runs: dict[str, dict]) -> list[str]:
    """Evidence in the prompt, grade probabilities, calibrated confidence: the rows of each run that
    has them, against gradient boosting and against the row each changes."""
    from fundgrpo.evaluation.agreement import filled, paired_bootstrap

    have = [
        v
        for v in ("sft-grpo", *TRUST_VARIANTS)
        if v in runs and "trust" in runs[v]["summary"]["backtest"]["models"].get("grpo", {})
    ]
    if not have:
        return []
    main = runs[have[0]]
    bt = main["summary"]["backtest"]
    out = [
        f"### {name}: evidence and confidence",
        "",
        "Grade probabilities are read where the grade is decided (`fundgrpo/model/belief.py`); the GRPO rows'",
        "confidence is the calibrate stage's choice on validation, the SFT rows' the belief at the score as read,",
        "gradient boosting's its class probability. ECE: expected calibration error (10 bins); Brier: multi-class;",
        '"top 70 %": exact on the 70 % of funds each evaluator is surest of; "misstated": share of valid answers',
        "citing a criterion with no data or on the wrong side. An invalid answer is a miss.",
        "",
        "| evaluator | valid JSON | exact | QWK | ECE | Brier | exact, top 70 % | misstated |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for variant in have:
        r = runs[variant]["summary"]
        models = r["backtest"]["models"]
        if r["backtest"]["test_fingerprint"] != bt["test_fingerprint"]:
            raise SystemExit(f"{name}/{variant}: another test set than {have[0]}")
        change = "" if variant == "sft-grpo" else f", {TRUST_VARIANTS[variant][0]}"
        sft_block = (models["sft"].get("calibration") or {}).get("score")
        out.append(_trust_row(f"SFT{change}", models["sft"], sft_block))
        kept = r["train"].get("kept")
        out.append(
            _trust_row(
                f"GRPO{change} (kept {kept}; {models['grpo']['trust'].get('chosen')})",
                models["grpo"],
                models["grpo"]["trust"],
            )
        )
    gbm = bt["models"]["gbm"]
    out.append(_trust_row("gradient boosting", gbm, gbm.get("trust")))
    rule = bt["models"]["rule"]
    out.append(_trust_row("rule scorer (the methodology)", rule, None))

    out += ["", "Paired bootstrap by fund (resamples of the test funds, 95 % interval):", ""]
    out += ["| comparison | exact | QWK | exact, top 70 % | ECE | Brier |", "|---|---|---|---|---|---|"]
    for variant in have:
        r = runs[variant]["summary"]
        comps = r["backtest"].get("comparisons") or {}
        change = "" if variant == "sft-grpo" else f" ({variant})"
        for key, title in (("grpo-gbm", "GRPO − gradient boosting"), ("sft-gbm", "SFT − gradient boosting"),
                           ("grpo-sft (raw beliefs)", "GRPO − SFT, beliefs as read")):  # fmt: skip
            c = comps.get(key)
            if not c:
                continue
            cells = [_interval(c[k]) if k in c else "–" for k in ("exact", "qwk", "exact_top70", "ece", "brier")]
            out.append(f"| {title}{change} | " + " | ".join(cells) + " |")
    grades = sorted({r["expert_grade"] for r in main["per_fund"]})
    changed, alone = {}, []
    for variant in have:  # against the run it changes: the collected run whose settings differ least
        if variant == "sft-grpo" and "sft-grpo" in runs:
            continue
        base = TRUST_VARIANTS[variant][1] or closest_run(variant, runs)
        if base is None:
            alone.append(variant)
            continue
        changed[variant] = base
        paired, expert, groups = _paired(runs[variant]["per_fund"], runs[base]["per_fund"])
        for key in ("sft_grade", "grpo_grade"):
            cells = []
            # an invalid answer is a miss in both runs (older runs stored the middle grade for it)
            valid = key.replace("_grade", "_valid")
            a_grades, b_grades = (
                filled(expert, [r[key] if r.get(valid, True) else None for r in rows], grades)
                for rows in ([a for a, _ in paired], [z for _, z in paired])
            )
            for metric in ("exact", "qwk"):
                b = paired_bootstrap(expert, a_grades, b_grades, groups, grades, metric)
                cells.append(_interval(b))
            who = "SFT" if key == "sft_grade" else "GRPO"
            out.append(f"| {who} ({variant}) − {who} ({base}) | " + " | ".join(cells) + " | – | – | – |")
    for variant in alone:
        out += ["", f"`{variant}`: no collected run of the same model on these funds to compare it with."]
    for variant, base in changed.items():
        diff = sorted(_settings_changed(runs[variant], runs[base]))
        fa, fb = _flat(runs[variant]["summary"]["params"]), _flat(runs[base]["summary"]["params"])
        added = sorted(k for k in fa.keys() - fb.keys() if not k.startswith(_NOT_TRAINING) and k not in diff)
        added = [k for k in added if not k.endswith(("metrics", "curves", "_dir"))]
        out += [
            "",
            f"`{variant}` is compared with `{base}`, the collected run whose settings differ least: "
            + ", ".join(f"`{k}`" for k in diff)
            + (
                f"; settings added since that run, at their defaults: {', '.join(f'`{k}`' for k in added)}"
                if added
                else ""
            )
            + ".",
        ]

    for variant in have:
        run = runs[variant]
        fit = run.get("calibration")
        models = run["summary"]["backtest"]["models"]
        if not fit:
            continue
        options = fit.get("options", {})
        out += [
            "",
            f"**Which confidence** ({variant}; `calibrate`, {fit.get('validation_funds')} validation funds, "
            f"chosen `{fit.get('chosen')}`, temperature {fit.get('temperature')}): validation ECE / Brier of each "
            "option, and on the test funds the beliefs as read:",
            "",
            "| belief | validation ECE | validation Brier | test ECE (as read) | test Brier (as read) |",
            "|---|---|---|---|---|",
        ]
        for key, o in options.items():
            method, kind = key.split("/")
            test = (models["grpo"].get("calibration") or {}).get(method) if kind == "token" else None
            out.append(
                f"| {key} | {_fmt(o.get('ece'))} | {_fmt(o.get('brier'))} "
                f"| {_fmt((test or {}).get('ece'))} | {_fmt((test or {}).get('brier'))} |"
            )
        ways = models["grpo"].get("grade_from")
        if ways:
            out += [
                "",
                "The grade reported, on the test funds (GRPO): "
                + "; ".join(f"{way} exact {_fmt(m['exact'])} / QWK {_fmt(m['qwk'])}" for way, m in ways.items())
                + " (`calibrate.grade_from`).",
            ]
    return out + [""]


def report() -> str:
    lines = [
        "# Pretrained evaluators on CPU",
        "",
        "Generated by `python benchmarks/contest/pretrained_report.py report` from the runs collected under",
        "`research/results/pretrained/` (commands in the script's docstring). Figures are exact agreement with",
        "the experts' grades, within one grade, quadratic weighted kappa and Spearman on the test funds; in runs",
        "before the evidence-and-confidence wave an invalid answer counted as the middle grade, since then as a",
        'miss. "cites evidence" is the evidence reward: does the reasoning',
        "name the criteria that weigh most for the fund, on the right side. Times are on 2 CPU cores.",
        "",
    ]
    for dataset in sorted(p.name for p in RESULTS.iterdir() if p.is_dir()) if RESULTS.exists() else []:
        runs = {}
        for folder in sorted((RESULTS / dataset).iterdir()):
            run = {
                "summary": json.loads((folder / "summary.json").read_text()),
                "per_fund": [json.loads(line) for line in (folder / "per_fund.jsonl").read_text().splitlines()],
            }
            for extra in ("headroom", "overhead", "from_instruct", "calibration"):
                if (folder / f"{extra}.json").exists():
                    run[extra] = json.loads((folder / f"{extra}.json").read_text())
            runs[folder.name] = run
        lines += dataset_section(dataset, runs)
        lines += trust_section(dataset, runs)
    notes = RESEARCH / "notes" / "pretrained_notes.md"
    if notes.exists():  # the measured reasons, written by hand beside the generated tables
        lines += [notes.read_text(encoding="utf-8").strip(), ""]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    c = sub.add_parser("collect")
    c.add_argument("run", type=Path)
    c.add_argument("--dataset", required=True)
    c.add_argument(
        "--variant", required=True, choices=["sft-grpo", *VARIANT_GRPO, NO_RULE, *SFT_GRPO_VARIANTS, *TRUST_VARIANTS]
    )
    sub.add_parser("report")
    args = ap.parse_args()
    if args.command == "collect":
        print(f"collected into {collect(args.run, args.dataset, args.variant)}")
    else:
        PAGE.write_text(report() + "\n", encoding="utf-8")
        print(f"wrote {PAGE}")


if __name__ == "__main__":
    main()
