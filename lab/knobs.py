"""knobs: every threshold of a config as a control the dashboard and the notebooks can move.

A *knob* is one field of one stage's config (``gopher_quality.min_words``), described well enough
to draw a widget: its kind (``number``, ``integer``, ``switch``, ``choice``, ``languages``), its
current value, and for numbers the range of the signal it thresholds in this run (the exact
min and max, so a slider spans what the documents actually hold). Which signal a field
thresholds is found, not listed: the field is nudged and the rule whose value follows it names
the signal. ``apply`` turns moved knobs back into a ``Config`` (validated like any config), so
what a user exports is exactly what ``corpus-lab run --config`` reads.

Signature parameters (MinHash ngram, bands, rows, seed, ...) are not knobs: changing them means
recomputing signals, not moving a threshold.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from lab.config import Config, build, to_dict
from lab.stages import STAGES, near_dedup

# fields that are not thresholds: they decide how signals are computed (a rerun), not which pass
_NOT_KNOBS = {"near_dedup": {"ngram", "bands", "rows", "seed", "exact_jaccard", "max_group_pairs", "shuffle_buckets",
                             "keep_signal"}}


@dataclass(frozen=True)
class Knob:
    stage: str
    key: str
    kind: str  # number | integer | switch | choice | languages
    value: Any
    signal: str | None = None  # the signal column the threshold applies to (numbers and integers)
    lo: float | None = None  # the signal's range in the run, widened to include the value
    hi: float | None = None
    options: tuple = ()  # choice / languages

    @property
    def name(self) -> str:
        return f"{self.stage}.{self.key}"


def _signal_of(cfg: Config, stage: str, key: str) -> str | None:
    """The signal of the rule whose threshold follows ``stage.key`` when it is nudged."""
    module = next(m for m in STAGES if m.NAME == stage)
    stage_cfg = cfg.stage(stage)
    value = getattr(stage_cfg, key)
    before = module.rules(dataclasses.replace(stage_cfg, enabled=True))
    for nudged in (value + 1, value - 1) if isinstance(value, int) else (value * 0.5 + 0.25, value * 0.9):
        try:
            after = module.rules(dataclasses.replace(stage_cfg, enabled=True, **{key: nudged}))
        except Exception:  # noqa: BLE001 - an out-of-range nudge: try the other direction
            continue
        for a, b in zip(before, after):
            if a.value != b.value:
                return a.signal
    return None


def knobs(cfg: Config, ranges: dict[str, tuple[float, float]] | None = None,
          languages: tuple[str, ...] = ()) -> list[Knob]:
    """Every movable threshold of ``cfg``, in funnel order. ``ranges``: signal -> (min, max) in the
    run (``lab.query.signal_ranges``); ``languages``: the languages present (for the keep list)."""
    out: list[Knob] = []
    for module in STAGES:
        stage = module.NAME
        stage_cfg = cfg.stage(stage)
        for f in dataclasses.fields(stage_cfg):
            if f.name in _NOT_KNOBS.get(stage, ()):
                continue
            value = getattr(stage_cfg, f.name)
            if f.name == "enabled":
                out.append(Knob(stage, f.name, "switch", value))
            elif stage == "near_dedup" and f.name == "threshold":
                out.append(Knob(stage, f.name, "choice", value, options=near_dedup.GRID))
            elif stage == "near_dedup" and f.name == "keep":
                out.append(Knob(stage, f.name, "choice", value, options=near_dedup.KEEP))
            elif stage == "language" and f.name == "keep":
                out.append(Knob(stage, f.name, "languages", value,
                                options=tuple(sorted(set(languages) | set(value)))))
            elif isinstance(value, bool):
                out.append(Knob(stage, f.name, "switch", value))
            elif isinstance(value, (int, float)):
                signal = _signal_of(cfg, stage, f.name)
                lo, hi = (ranges or {}).get(signal, (None, None)) if signal else (None, None)
                if lo is not None:
                    lo, hi = min(lo, value), max(hi, value)
                out.append(Knob(stage, f.name, "integer" if isinstance(value, int) else "number", value, signal, lo, hi))
    return out


def values(cfg: Config) -> dict[str, Any]:
    """``stage.key`` -> value of every knob of ``cfg``."""
    return {k.name: k.value for k in knobs(cfg)}


def apply(cfg: Config, moved: dict[str, Any]) -> Config:
    """``cfg`` with the knobs in ``moved`` (``stage.key`` -> value) set; validated like any config."""
    d = to_dict(cfg)
    for name, value in moved.items():
        stage, _, key = name.partition(".")
        if stage not in d["stages"] or key not in d["stages"][stage]:
            from lab.errors import ConfigError

            raise ConfigError(f"knob {name!r} does not exist; knobs are stage.key of a stage config, "
                              f"e.g. gopher_quality.min_words")
        d["stages"][stage][key] = list(value) if isinstance(value, tuple) else value
    return build(Config, d)
