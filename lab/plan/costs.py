"""costs: the CPU and wall seconds of every step of a run after annotate, for the manifest and the planner.

Annotate records each stage's CPU time per partition (``stats/part-*.json``, summed into the
manifest's ``stage_cpu_seconds``: reading, extraction, every stage's signals, the MinHash
signatures). The later steps run as tasks on the workers and as work on the driver: the LSH shuffle
(``near_dedup_shuffle``: reduce tasks, the forest merges and the clusters), the boilerplate-line merge
(``boilerplate_merge``), the tokenizer fit (``tokenizer_fit``, on the driver), token counting
(``tokenize``) and materialize (``materialize``: the driver's plan, the scatter and shard tasks).

A task wrapped by ``costed`` writes its CPU seconds (``time.process_time`` of its process: one task at a
time per worker, and every thread it starts, DuckDB's and the tokenizer's, counted) to
``stats/costs/<step>/<task>.json``; the driver adds its own part (``driver``) and, when the step ends,
``finish`` writes ``stats/costs/<step>.json``: ``cpu_s`` (tasks + driver), ``wall_s``, ``tasks``. A step
computed again replaces its record (``start``); a reused step keeps the record of the run that
computed it, so the manifest's ``step_seconds`` always prices every step of the outputs it describes.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any, Callable

from lab.io.writers import read_json, write_json

STEPS = ("near_dedup_shuffle", "boilerplate_merge", "tokenizer_fit", "tokenize", "materialize")


def _dir(run_dir: str | Path) -> Path:
    return Path(run_dir) / "stats" / "costs"


def costed(fn: Callable, step: str, run_dir: str, key: str, *args: Any, **kw: Any) -> Any:
    """``fn(*args, **kw)``, its CPU seconds recorded as task ``key`` of ``step``."""
    t0 = time.process_time()
    out = fn(*args, **kw)
    path = _dir(run_dir) / step / f"{key}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json({"cpu_s": round(time.process_time() - t0, 6)}, path)
    return out


class Step:
    """One step's clock on the driver: ``start`` clears its old record; ``driver()`` times driver work;
    ``finish`` sums the tasks' records and the driver's and writes ``stats/costs/<step>.json``."""

    def __init__(self, run_dir: str | Path, step: str) -> None:
        self.run_dir, self.step = Path(run_dir), step
        shutil.rmtree(_dir(run_dir) / step, ignore_errors=True)
        (_dir(run_dir) / f"{step}.json").unlink(missing_ok=True)
        self.wall0 = time.time()
        self.cpu0 = time.process_time()  # the driver's own work in between (its threads included)

    def finish(self, *, inprocess: bool = False) -> dict:
        """``inprocess``: the tasks ran in this process (their CPU is in the driver's clock already)."""
        tasks = sorted((_dir(self.run_dir) / self.step).glob("*.json"))
        task_cpu = sum(read_json(f)["cpu_s"] for f in tasks)
        driver = time.process_time() - self.cpu0
        if inprocess:
            driver = max(driver - task_cpu, 0.0)
        rec = {"cpu_s": round(task_cpu + driver, 3), "driver_cpu_s": round(driver, 3),
               "wall_s": round(time.time() - self.wall0, 3), "tasks": len(tasks)}
        _dir(self.run_dir).mkdir(parents=True, exist_ok=True)
        write_json(rec, _dir(self.run_dir) / f"{self.step}.json")
        shutil.rmtree(_dir(self.run_dir) / self.step, ignore_errors=True)
        return rec


def recorded(run_dir: str | Path) -> dict[str, dict]:
    """step -> its record (``cpu_s``, ``driver_cpu_s``, ``wall_s``, ``tasks``), for the steps that have one."""
    d = _dir(run_dir)
    return {s: read_json(d / f"{s}.json") for s in STEPS if (d / f"{s}.json").exists()}
