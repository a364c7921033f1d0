"""Fit the ScaleRL compute curve to a training run and predict its end from its first part.

    python tools/scaling_fit.py [--curve plots/grpo_rewards.json] [--train metrics/grpo.json]
                                [--key reward] [--fit-share 0.5] [--smooth 3]

Compute C of a logged step = step x seconds per step (device-seconds, from metrics/grpo.json).
Writes reports/scaling/fit.png (fitted points, held-out points, the curve) and fit.json.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from fundgrpo import io
from fundgrpo.training.scaling import fit


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--curve", default="plots/grpo_rewards.json")
    ap.add_argument("--train", default="metrics/grpo.json")
    ap.add_argument("--key", default="reward")
    ap.add_argument("--fit-share", type=float, default=0.5)
    ap.add_argument(
        "--smooth", type=int, default=3, help="moving average over logged points (training reward is noisy)"
    )
    ap.add_argument("--out", default="reports/scaling")
    args = ap.parse_args()

    rows = [r for r in json.loads(Path(args.curve).read_text()) if r.get(args.key) is not None]
    per_step = json.loads(Path(args.train).read_text())["seconds_per_step"]
    compute = np.array([r["step"] * per_step for r in rows])
    reward = np.array([r[args.key] for r in rows])
    if args.smooth > 1:
        reward = np.convolve(reward, np.ones(args.smooth) / args.smooth, mode="valid")
        compute = compute[args.smooth - 1 :]
    n_fit = max(4, int(len(compute) * args.fit_share))
    f = fit(list(compute[:n_fit]), list(reward[:n_fit]))
    predicted_end = float(f.predict([compute[-1]])[0])
    result = {
        "asymptote_A": f.a,
        "A_sd": f.a_sd,
        "efficiency_B": f.b,
        "B_sd": f.b_sd,
        "C_mid_device_seconds": f.c_mid,
        "C_mid_sd": f.c_mid_sd,
        "R0": f.r0,
        "fit_points": n_fit,
        "held_out_points": int(len(compute) - n_fit),
        "end_compute_device_seconds": float(compute[-1]),
        "predicted_end": predicted_end,
        "observed_end": float(reward[-1]),
        "held_out_mae": float(np.mean(np.abs(f.predict(compute[n_fit:]) - reward[n_fit:])))
        if len(compute) > n_fit
        else None,
    }
    out = Path(args.out)
    io.write_json(result, out / "fit.json")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    grid = np.linspace(compute.min(), compute.max() * 1.5, 200)
    ax.plot(compute[:n_fit], reward[:n_fit], "o", label="fitted")
    ax.plot(compute[n_fit:], reward[n_fit:], "x", label="held out")
    ax.plot(grid, f.predict(grid), "-", label=f"fit: A={f.a:.2f}±{f.a_sd:.2f}, B={f.b:.2f}, C_mid={f.c_mid:.0f}s")
    ax.axhline(f.a, ls=":", c="gray")
    ax.set_xlabel("training compute (device-seconds)")
    ax.set_ylabel(f"mean {args.key} (moving average of {args.smooth})")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "fit.png", dpi=110)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
