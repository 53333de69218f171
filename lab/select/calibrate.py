"""calibrate: per-language thresholds from each language's own distributions (``corpus-lab calibrate``).

A threshold tuned on English cuts another language's documents somewhere else: German words are
longer, Chinese has few spaces, each language has its own share of short lines. FineWeb-2 therefore
sets each language's threshold where the English one sits in the English distribution. Here, for
every threshold rule of the calibrated stages (``STAGES``: the heuristic filters), ``p`` is the share
of the reference language's documents that fail the rule on its own, and a language's threshold is
where the same share of its documents fails: its ``p``-quantile for a minimum, its ``(1-p)``-quantile
for a maximum (``lab.query.quantiles``). With ``retention=R`` instead, every rule's share is scaled by
one factor per language, found by bisection, so that the language keeps ``R`` of its documents through
the calibrated rules together (the rules' relative strictness stays the reference's).

Each value is snapped to its knob's step (what the dashboard's slider shows) and checked by the
stage's config. A rule is calibrated for a language only where its share ``p`` means at least one of
that language's documents on each side (``p * n >= 1`` and ``(1 - p) * n >= 1``): below that, a
quantile would be the extreme of the sample (a maximum of 0 where no document has any), so the base
threshold stays if it too cuts less than one of them, and otherwise the threshold goes to the sample's
extreme (it then cuts none: the reference cuts next to none). The base also stays where it already cuts
the language at the share (within one document: anywhere in a gap between two values cuts the same). Languages with fewer than ``min_docs`` documents keep the base thresholds (a quantile
of a handful of documents is noise); they are listed as skipped. The result is the base config with
``stages.<stage>.by_lang`` overrides (``config_text``): ``corpus-lab funnel RUN --config FILE --by
lang`` shows each language's retention under it, and ``corpus-lab run --config FILE`` applies it.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import polars as pl
import yaml

from lab import query
from lab.config import Config, to_dict
from lab.errors import ConfigError
from lab.select import knobs
from lab.select.rules import Rule
from lab.stages import BY_NAME, STAGE_NAMES

STAGES = ("gopher_quality", "gopher_repetition", "c4", "fineweb")  # the heuristic filters FineWeb-2 calibrates
MIN_DOCS = 50
BISECT_STEPS = 30


@dataclass(frozen=True)
class Threshold:
    """One calibrated knob: its rule in the base config and how much of the reference language it fails."""

    knob: knobs.Knob
    rule: Rule
    ref_fail: float  # share of the reference language's documents failing the rule alone


@dataclass
class Calibration:
    reference: str
    mode: str  # "percentile" or "retention R"
    overrides: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)  # stage -> lang -> key -> value
    report: pl.DataFrame | None = None  # one row per language and knob
    skipped: dict[str, str] = field(default_factory=dict)  # language -> why it keeps the base thresholds


def _quantile(grid: np.ndarray, p: float) -> float:
    """The smallest grid value at or above probability ``p`` (as ``quantile_disc``).

    >>> _quantile(np.array([1.0, 2.0, 3.0]), 0.3), _quantile(np.array([1.0, 2.0, 3.0]), 0.0)
    (2.0, 1.0)
    """
    i = min(len(grid) - 1, max(0, math.ceil(p * (len(grid) - 1) - 1e-9)))
    return float(grid[i])


def value_at(t: Threshold, grid: np.ndarray, p: float) -> Any:
    """The threshold at which about ``p`` of the documents whose quantiles are ``grid`` fail ``t``'s rule.

    >>> k = knobs.Knob("s", "min_x", "integer", 5, "x", step=1)
    >>> t = Threshold(k, Rule("s", "x", ">=", 5, "few"), 0.1)
    >>> value_at(t, np.arange(101.0), 0.25), value_at(dataclasses.replace(t, rule=Rule("s", "x", "<=", 5, "many")),
    ...                                                np.arange(101.0), 0.25)
    (25, 75)
    """
    v = _quantile(grid, p if t.rule.op == ">=" else 1.0 - p)
    return knobs.snap(t.knob, v)


def thresholds(run, cfg: Config, stages: Sequence[str], reference: str) -> list[Threshold]:
    """The numeric threshold knobs of the enabled ``stages`` whose rule compares a signal (``>=``/``<=``)."""
    out = []
    langs = tuple(lang for lang, _ in query.languages(run))
    for k in knobs.knobs(cfg, query.signal_ranges(run), langs):
        if k.stage not in stages or k.kind not in ("number", "integer") or not k.signal:
            continue
        stage_cfg = cfg.stage(k.stage)
        if not getattr(stage_cfg, "enabled", True):
            continue
        rule = next((r for r in BY_NAME[k.stage].rules(stage_cfg)
                     if r.signal == k.signal and r.op in (">=", "<=") and r.value == k.value), None)
        if rule is not None:
            out.append(Threshold(k, rule, 0.0))
    shares = query.fail_shares(run, [t.rule for t in out], reference)
    return [dataclasses.replace(t, ref_fail=s) for t, s in zip(out, shares)]


def _rules_at(ts: Sequence[Threshold], values: Sequence[Any]) -> list[Rule]:
    return [dataclasses.replace(t.rule, value=v) for t, v in zip(ts, values)]


def _value(t: Threshold, grid: np.ndarray, p: float, n: int, base_fail: float) -> Any:
    """``value_at``; where ``p`` expects less than one of the ``n`` documents on one side, no quantile is
    placed: the base threshold if it too fails less than one of them (``base_fail``: its share), else the
    sample's extreme on that side (fails none, or all)."""
    if p * n < 1:
        return t.knob.value if base_fail * n < 1 else value_at(t, grid, 0.0)
    if (1 - p) * n < 1:
        return t.knob.value if (1 - base_fail) * n < 1 else value_at(t, grid, 1.0)
    return value_at(t, grid, p)


def _scale_for(run, ts: Sequence[Threshold], grids: dict[str, np.ndarray], lang: str, n: int, target: float,
               base_fails: Sequence[float]) -> float:
    """The factor on every rule's reference share at which ``lang`` keeps ``target`` of its documents."""
    top = max((t.ref_fail for t in ts), default=0.0)
    if top <= 0.0:
        return 0.0
    lo, hi = 0.0, 1.0 / top

    def keeps(s: float) -> float:
        values = [_value(t, grids[t.rule.signal], min(1.0, t.ref_fail * s), n, b) for t, b in zip(ts, base_fails)]
        return query.keep_share(run, _rules_at(ts, values), lang)

    if keeps(lo) <= target:
        return lo
    for _ in range(BISECT_STEPS):
        mid = (lo + hi) / 2
        if keeps(mid) >= target:
            lo = mid
        else:
            hi = mid
    return lo


def calibrate(run: str | Path, cfg: Config, *, reference: str = "en", retention: float | None = None,
              stages: Sequence[str] = STAGES, min_docs: int = MIN_DOCS,
              languages: Sequence[str] | None = None) -> Calibration:
    """Per-language thresholds for the run's languages (or ``languages``), as ``by_lang`` overrides of ``cfg``."""
    for s in stages:
        if s not in STAGE_NAMES:
            raise ConfigError(f"calibrate: unknown stage {s!r}; known: {', '.join(STAGE_NAMES)}")
    if retention is not None and not 0.0 < retention <= 1.0:
        raise ConfigError(f"calibrate: retention={retention!r} is not a share; give a number in (0, 1], e.g. 0.7")
    counts = dict(query.languages(run))
    if counts.get(reference, 0) < min_docs:
        raise ConfigError(f"calibrate: the reference language {reference!r} has {counts.get(reference, 0)} documents "
                          f"in this run, fewer than min_docs={min_docs}; choose another --reference (languages: "
                          f"{', '.join(f'{k} {v}' for k, v in list(counts.items())[:8])}) or lower --min-docs")
    cal = Calibration(reference, "percentile" if retention is None else f"retention {retention:g}")
    wanted = [lang for lang in (languages if languages is not None else counts) if lang != reference]
    langs = []
    for lang in wanted:
        if counts.get(lang, 0) < min_docs:
            cal.skipped[lang] = f"{counts.get(lang, 0)} documents (< {min_docs})"
        else:
            langs.append(lang)
    ts = thresholds(run, cfg, stages, reference)
    grids_by_signal = {sig: query.quantiles(run, sig, langs) for sig in {t.rule.signal for t in ts}}
    rows = []
    for lang in langs:
        grids = {sig: g[lang] for sig, g in grids_by_signal.items() if lang in g}
        usable = [t for t in ts if t.rule.signal in grids]
        n = counts[lang]
        base_fails = query.fail_shares(run, [t.rule for t in usable], lang)
        scale = 1.0 if retention is None else _scale_for(run, usable, grids, lang, n, retention, base_fails)
        chosen: list[tuple[Threshold, Any]] = []
        for t, base_fail in zip(usable, base_fails):
            p = min(1.0, t.ref_fail * scale)
            if abs(base_fail - p) <= 1 / n:
                v = t.knob.value  # the base threshold already cuts the language at that share (within a document)
            else:
                v = _value(t, grids[t.rule.signal], p, n, base_fail)
            try:  # the stage's own checks (ranges, order of a minimum and a maximum)
                dataclasses.replace(cfg.stage(t.knob.stage), **{t.knob.key: v})
            except ConfigError as e:
                cal.skipped[f"{lang}: {t.knob.stage}.{t.knob.key}"] = f"{v!r} refused by the stage ({e})"
                continue
            if v != t.knob.value:
                cal.overrides.setdefault(t.knob.stage, {}).setdefault(lang, {})[t.knob.key] = v
            chosen.append((t, v))
        fails = query.fail_shares(run, _rules_at([t for t, _ in chosen], [v for _, v in chosen]), lang)  # one query
        rows += [{"lang": lang, "documents": n, "knob": f"{t.knob.stage}.{t.knob.key}", "reference_value": t.knob.value,
                  "reference_fails": t.ref_fail, "value": v, "fails": f} for (t, v), f in zip(chosen, fails)]
    cal.report = pl.DataFrame(rows, schema={"lang": pl.Utf8, "documents": pl.Int64, "knob": pl.Utf8,
                                            "reference_value": pl.Float64, "reference_fails": pl.Float64,
                                            "value": pl.Float64, "fails": pl.Float64}, strict=False)
    return cal


def config_text(base: Config, cal: Calibration) -> str:
    """``base`` as YAML with the calibration's ``by_lang`` overrides in each stage it touched (``lab.config.loads``
    reads it back)."""
    data = to_dict(base)
    for stage, by_lang in cal.overrides.items():  # merged into the base's own overrides (calibrated keys win)
        section = data["stages"][stage].setdefault("by_lang", {})
        for lang, values in sorted(by_lang.items()):
            section[lang] = dict(sorted({**section.get(lang, {}), **values}.items()))
    head = (f"# per-language thresholds: corpus-lab calibrate ({cal.mode}; reference language {cal.reference!r})\n")
    return head + yaml.safe_dump(data, sort_keys=False, default_flow_style=False, width=100)
