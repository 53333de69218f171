"""One-core setup shared by the benchmark scripts: native thread pools capped at 1, optional pinning."""

from __future__ import annotations

import os
import time

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


def timed(fn, repeat: int) -> list[tuple[float, float]]:
    """(wall, CPU) seconds of each of ``repeat`` calls of ``fn()``."""
    out = []
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        fn()
        out.append((time.perf_counter() - wall, time.process_time() - cpu))
    return out
