"""One-core setup shared by the benchmark scripts: native thread pools capped at 1, optional pinning."""

from __future__ import annotations

import os

THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "RAYON_NUM_THREADS")


def one_core(pin: bool) -> int | None:
    """Cap thread pools at one thread (call before models load); with ``pin``, pin this process
    to one CPU and return its number, else None."""
    os.environ.update({var: "1" for var in THREAD_VARS})
    if pin and hasattr(os, "sched_setaffinity"):
        cpu = min(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpu})
        return cpu
    return None
