"""select: a config becomes an ordered list of rules, evaluated in Python or (via ``lab.query``) in SQL.

``ruleset(cfg, stats)`` lists every enabled stage's rules in funnel order, with percentile rules
("drop the lowest 5% by X") resolved to fixed thresholds from the merged global quantile and
placed after their stage's own rules. ``python_funnel`` evaluates the rules document by document
exactly as batch runs do; ``lab.query.funnel`` evaluates the same list in DuckDB; a test holds
the two equal.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import numpy as np

from lab import dedup
from lab.config import Config
from lab.errors import ConfigError
from lab.select.rules import Rule, first_failure, keep_first_in_group, with_by_lang
from lab.stages import STAGES
from lab.stats import Summary


def _pct(p: float) -> str:
    return f"{p:g}".replace(".", "_")


def percentile_rules(cfg: Config, stats: Mapping[str, Summary] | None) -> list[Rule]:
    out = []
    for i, pr in enumerate(cfg.percentiles):
        if stats is None or pr.signal not in stats:
            known = ", ".join(sorted(stats)) if stats else "none (the run has no merged statistics yet)"
            raise ConfigError(f"percentiles[{i}].signal={pr.signal!r} is not a numeric signal of this run; known: {known}")
        s = stats[pr.signal]
        if pr.drop_lowest > 0:
            out.append(Rule(pr.stage, pr.signal, ">=", s.quantile(pr.drop_lowest / 100), f"{pr.signal}_below_p{_pct(pr.drop_lowest)}"))
        if pr.drop_highest > 0:
            q = 100 - pr.drop_highest
            out.append(Rule(pr.stage, pr.signal, "<=", s.quantile(q / 100), f"{pr.signal}_above_p{_pct(q)}"))
    return out


def ruleset(cfg: Config, stats: Mapping[str, Summary] | None = None) -> list[Rule]:
    """Every enabled rule in funnel order (stage order, then rule order, percentile rules last per stage),
    with the stages' per-language thresholds (``stages.<name>.by_lang``) in each rule's ``by_lang``."""
    extra = percentile_rules(cfg, stats) if cfg.percentiles else []
    out: list[Rule] = []
    for module in STAGES:
        stage_cfg = cfg.stage(module.NAME)
        if stage_cfg.enabled:
            out += with_by_lang(module, stage_cfg, cfg.stages.overrides(module.NAME))
        out += [r for r in extra if r.stage == module.NAME]
    return out


def stage_rules(rules: Iterable[Rule], stage: str) -> list[Rule]:
    return [r for r in rules if r.stage == stage]


def _column(rows: list[Mapping[str, Any]], name: str) -> np.ndarray:
    return np.array([np.nan if r.get(name) is None else r[name] for r in rows], dtype=np.float64)


def python_funnel(rules: list[Rule], rows: Iterable[Mapping[str, Any]],
                  edges: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None) -> dict[int, str | None]:
    """doc_id -> drop reason (None = kept), evaluating ``rules`` in order, one document at a time
    for scalar rules and over the documents still alive for group rules. ``edges``: the run's
    near-duplicate candidate pairs ``(u, v, jaccard)`` between content hashes (none if omitted)."""
    alive = {r["doc_id"]: r for r in rows}
    reason: dict[int, str | None] = {d: None for d in alive}
    stages: list[str] = list(dict.fromkeys(r.stage for r in rules))
    for stage in stages:
        for rule in stage_rules(rules, stage):
            if rule.op == "first_in_cluster":
                threshold, keep, keep_signal = rule.value
                cand = sorted((r for r in alive.values() if r.get("nd_shingles")), key=lambda r: r["doc_id"])
                ids = np.array([r["doc_id"] for r in cand], dtype=np.int64)
                rank = dedup.rank_of(keep, _column(cand, "bytes"), _column(cand, keep_signal))
                u, v, j = edges if edges is not None else (np.zeros(0, np.int64),) * 2 + (np.zeros(0),)
                nodes = np.array([r["content_hash"] for r in cand], dtype=np.int64)
                for doc in dedup.keep_one_per_cluster(ids, nodes, rank, u, v, j, threshold).tolist():
                    reason[doc] = rule.drop_reason
                    del alive[doc]
            elif rule.op == "first_in_group":
                for doc, why in keep_first_in_group(rule, alive.values()).items():
                    if why:
                        reason[doc] = why
                        del alive[doc]
            else:
                for doc in list(alive):
                    if first_failure([rule], alive[doc]):
                        reason[doc] = rule.drop_reason
                        del alive[doc]
    return reason
