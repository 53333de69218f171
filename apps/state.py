"""The dashboard's state as plain objects: what each tab shows, derived from ``lab`` calls only.

Widgets live in ``apps/dashboard.py``; everything they display is computed here, so it can be
tested without a browser (set values, read derived tables). No SQL here: every number comes
from ``lab.query`` (over one process-wide in-memory run, a cursor per call) and the other ``lab``
modules.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from lab import dedup, knobs, plan, query
from lab.config import Config, dumps, load
from lab.stages import near_dedup

UNITS = ("docs", "bytes", "tokens")


def curve(f: pl.DataFrame) -> dict[str, list]:
    """The funnel chart's columns: ``stage`` and, per unit, the share of the input still in after it.

    >>> f = pl.DataFrame({"stage": ["a", "b"], "docs_in": [4, 4], "docs_out": [4, 1]})
    >>> curve(f)
    {'stage': ['a', 'b'], 'docs': [1.0, 0.25]}
    """
    out = {"stage": f["stage"].to_list()}
    for unit in UNITS:
        if f"{unit}_out" in f.columns:
            n = f[f"{unit}_in"][0] if f.height else 0
            out[unit] = (f[f"{unit}_out"] / n).to_list() if n else [1.0] * f.height
    return out


@dataclass(frozen=True)
class FunnelView:
    """What the Funnel tab shows for one config (``FunnelState.view``)."""

    config_hash: str  # lab.config.Config.config_hash of the thresholds it answers for
    funnel: pl.DataFrame  # the table: split by language or source when asked
    retention: dict[str, float]  # unit -> share kept over all stages (whole run)
    curve: dict[str, list]  # the chart's columns (``curve``), whole run


@dataclass
class FunnelState:
    """One session's thresholds over a run, and the funnel they give."""

    run_dir: Path
    base: Config = None  # type: ignore[assignment]  # the run's own config (config.yaml)
    moved: dict[str, Any] = field(default_factory=dict)  # knob name -> value the user set

    def __post_init__(self) -> None:
        self.run_dir = Path(self.run_dir)
        self.run = query.open_run(self.run_dir, in_memory=True)
        if self.base is None:
            self.base = load(self.run_dir / "config.yaml")

    # --- inputs ----------------------------------------------------------------------------------

    def knobs(self) -> list[knobs.Knob]:
        langs = tuple(lang for lang, _ in query.languages(self.run))
        return knobs.knobs(self.config, query.signal_ranges(self.run), langs)

    def set(self, name: str, value: Any) -> None:
        """Move one knob (validated: a bad value raises ConfigError and changes nothing)."""
        knobs.apply(self.base, {**self.moved, name: value})
        self.moved[name] = value

    def reset(self) -> None:
        self.moved.clear()

    # --- derived ---------------------------------------------------------------------------------

    @property
    def config(self) -> Config:
        moved = tuple(self.moved.items())  # a move asks for it a few times: build it once
        base, seen, cfg = getattr(self, "_config", (None, None, None))
        if base is not self.base or seen != moved:
            cfg = knobs.apply(self.base, self.moved)
            self._config = (self.base, moved, cfg)
        return cfg

    def funnel(self, by: str | None = None, *, config: Config | None = None) -> pl.DataFrame:
        """The funnel under the current thresholds (or under ``config``, a snapshot of them)."""
        return query.funnel(self.run, self.config if config is None else config, by=by)

    def view(self, by: str | None = None, *, config: Config | None = None) -> FunnelView:
        """Everything the Funnel tab shows for the current thresholds (or ``config``) but the samples.

        ``config`` lets the dashboard take a snapshot on the server's event loop and compute this on
        a query thread while the user moves on.
        """
        cfg = self.config if config is None else config
        f = self.funnel(by, config=cfg)
        whole = f if by is None else self.funnel(config=cfg)
        return FunnelView(cfg.config_hash(), f, self.retention(whole), curve(whole))

    def retention(self, f: pl.DataFrame | None = None) -> dict[str, float]:
        """Documents, bytes (and tokens) kept over all stages: the retention product (of ``f``, the
        ungrouped funnel of the current thresholds, when the caller already has it)."""
        f = self.funnel() if f is None else f
        first, last = f.row(0, named=True), f.row(-1, named=True)
        out = {"docs": last["docs_out"] / first["docs_in"] if first["docs_in"] else 1.0,
               "bytes": last["bytes_out"] / first["bytes_in"] if first["bytes_in"] else 1.0}
        if "tokens_in" in f.columns:
            out["tokens"] = last["tokens_out"] / first["tokens_in"] if first["tokens_in"] else 1.0
        return out

    def dropped(self, stage: str, n: int = 5, *, config: Config | None = None) -> pl.DataFrame:
        return query.dropped_samples(self.run, self.config if config is None else config, stage, n)

    def export_yaml(self) -> str:
        """The chosen thresholds as the config file ``corpus-lab run --config`` reads."""
        return dumps(self.config)

    def export_command(self, path: str = "corpus-lab-config.yaml") -> str:
        return f"corpus-lab run --config {path} --mode batch"


@dataclass
class ClusterState:
    """The near-duplicate cluster browser: a threshold of the grid, a page, one open cluster."""

    run_dir: Path
    threshold: float = 0.8
    sort: str = "size"
    page: int = 0
    page_size: int = 20
    open_cluster: int | None = None

    def clusters(self) -> pl.DataFrame:
        return query.clusters(self.run_dir, self.threshold, sort=self.sort, offset=self.page * self.page_size,
                              limit=self.page_size)

    def count(self) -> dict[str, int]:
        return query.cluster_count(self.run_dir, self.threshold)

    def members(self) -> pl.DataFrame:
        if self.open_cluster is None:
            return pl.DataFrame()
        return query.cluster_members(self.run_dir, self.open_cluster, self.threshold)

    def diff(self, a: int = 0, b: int = 1) -> list[tuple[str, str]]:
        """Word diff of the open cluster's members ``a`` and ``b`` (by position)."""
        m = self.members()
        if len(m) <= max(a, b):
            return []
        return dedup.diff(m["text"][a], m["text"][b])

    def s_curve(self) -> tuple[Any, Any]:
        cfg = load(Path(self.run_dir) / "config.yaml").stages.near_dedup
        return dedup.s_curve(cfg.bands, cfg.rows)


@dataclass
class PlannerState:
    """The throughput planner's inputs (defaults measured on the run) and its outputs (``lab.plan``)."""

    run_dir: Path
    token_target: float = 1e12
    days: float = 30.0
    gpus: int = 256
    deadline_days: float = 7.0
    bytes_per_token_on_disk: int = 4
    measured: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.measured = plan.from_manifest(self.run_dir)

    @property
    def bytes_per_token(self) -> float:
        return self.measured["bytes_per_token"] or 4.0  # no token counts yet: a common figure for BPE on English

    def result(self) -> dict:
        return plan.plan(self.token_target, self.days, self.gpus, retentions=self.measured["retention"]["bytes"],
                         bytes_per_token=self.bytes_per_token,
                         stage_cpu_seconds_per_byte=self.measured["stage_cpu_seconds_per_byte"],
                         deadline_days=self.deadline_days, bytes_per_token_on_disk=self.bytes_per_token_on_disk)


GRID = near_dedup.GRID
