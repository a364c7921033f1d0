"""Thread counts for every library, set in one place: a 2-core machine oversubscribes easily.

`configure()` runs before each stage's work (`fundgrpo.cli.run_stage`), so torch and OpenMP
read it when they load:
  * FUNDGRPO_THREADS (environment) caps torch, OpenMP (scikit-learn) and BLAS threads;
    default: the CPUs this process may use. An OMP_NUM_THREADS etc. already set wins.
  * tokenizers' own thread pool is off (it forks badly under DataLoader workers and adds
    nothing on 2 cores).
  * `small_data()` runs a block on one OpenMP thread: gradient boosting on a few thousand rows
    gains nothing from more, and on a busy machine spinning threads stall it (measured: the
    baseline stage 300 s with the default threads on a busy 2-core machine, 9 s with one).
"""

from __future__ import annotations

import functools
import os
import sys

THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def count() -> int:
    """FUNDGRPO_THREADS, else the CPUs this process may run on, shared among the processes
    `accelerate launch` (torchrun) starts on this machine (LOCAL_WORLD_SIZE)."""
    if os.environ.get("FUNDGRPO_THREADS"):
        return max(1, int(os.environ["FUNDGRPO_THREADS"]))
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = os.cpu_count() or 1
    return max(1, cpus // max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1"))))


def configure() -> int:
    """Set the thread environment (and torch's pool if already loaded); returns the count."""
    n = count()
    for var in THREAD_VARS:
        os.environ.setdefault(var, str(n))
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if "torch" in sys.modules:  # loaded before us: its pool is sized already, resize it
        sys.modules["torch"].set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    return n


def small_data():
    """A context in which OpenMP (scikit-learn) uses one thread."""
    return _controller().limit(limits=1, user_api="openmp")


@functools.cache
def _controller():
    """The thread pools loaded so far, found once: finding them scans every loaded library (4 ms,
    a sixth of the API's records for one fund). The first caller has scikit-learn loaded already."""
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()
