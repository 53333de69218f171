"""costs: the CPU and wall seconds of every step of a run after annotate, for the manifest and the planner.

Annotate records each stage's CPU time per partition (summed into the manifest's ``stage_cpu_seconds``).
The later steps (``near_dedup_shuffle``, ``boilerplate_merge``, ``tokenizer_fit``, ``tokenize``,
``materialize``) run as tasks on the workers and as work on the driver. A task wrapped by ``costed`` writes
its CPU seconds (``time.process_time``, its threads included) to ``stats/costs/<step>/<task>.json``;
``finish`` adds the driver's part and writes ``stats/costs/<step>.json`` (``cpu_s``, ``wall_s``, ``tasks``).
A step computed again replaces its record (``start``); a reused step keeps the record of the run that
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

    def driver(self) -> float:
        """The driver's CPU seconds since the clock started."""
        return time.process_time() - self.cpu0

    def finish(self, *, inprocess: bool = False, driver_cpu: float | None = None) -> dict:
        """``inprocess``: the tasks ran in this process (their CPU is in the driver's clock already);
        ``driver_cpu``: the driver's share, when it did other steps' work after it (``driver()`` then)."""
        tasks = sorted((_dir(self.run_dir) / self.step).glob("*.json"))
        task_cpu = sum(read_json(f)["cpu_s"] for f in tasks)
        driver = time.process_time() - self.cpu0 if driver_cpu is None else driver_cpu
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
