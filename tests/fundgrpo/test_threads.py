"""Thread settings in one place: FUNDGRPO_THREADS reaches torch and OpenMP, whichever loads first."""

import os
import subprocess
import sys

import pytest

CHECK = """
import sys
{first}
from fundgrpo import threads
threads.configure()
import torch
from threadpoolctl import threadpool_info
import sklearn.ensemble  # loads OpenMP
openmp = [p["num_threads"] for p in threadpool_info() if p["user_api"] == "openmp"]
with threads.small_data():
    small = [p["num_threads"] for p in threadpool_info() if p["user_api"] == "openmp"]
print(torch.get_num_threads(), max(openmp), max(small))
"""


@pytest.mark.parametrize("first", ["", "import torch"])
def test_fundgrpo_threads_caps_torch_and_openmp(first):
    env = {
        k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
    }
    env["FUNDGRPO_THREADS"] = "1"
    done = subprocess.run(
        [sys.executable, "-c", CHECK.format(first=first)], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "1", "1"]
