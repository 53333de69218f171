"""Where things live in a run directory (DESIGN §4). Only ``lab.io`` knows these paths."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class RunLayout:
    root: Path

    @property
    def manifest(self) -> Path:
        return self.root / "manifest.json"

    @property
    def config(self) -> Path:
        return self.root / "config.yaml"

    @property
    def docs(self) -> Path:
        return self.root / "docs"

    @property
    def signals(self) -> Path:
        return self.root / "signals"

    @property
    def rejects(self) -> Path:
        return self.root / "rejects"

    @property
    def stats(self) -> Path:
        return self.root / "stats"

    @property
    def merged_stats(self) -> Path:
        return self.stats / "merged.json"

    def part(self, kind: str, key: str) -> Path:
        """The Parquet file of one partition: ``kind`` is docs, signals or rejects."""
        return getattr(self, kind) / f"part-{key}.parquet"

    def done(self, key: str) -> Path:
        """Written last by a partition task: its metrics and statistics partials; marks it complete."""
        return self.stats / f"part-{key}.json"

    def timing(self, key: str) -> Path:
        """CPU seconds per stage of one partition (kept apart: timings are not deterministic)."""
        return self.stats / f"timing-{key}.json"

    def glob(self, kind: str) -> str:
        return str(getattr(self, kind) / "part-*.parquet")

    def make(self) -> None:
        for d in (self.docs, self.signals, self.rejects, self.stats):
            d.mkdir(parents=True, exist_ok=True)
