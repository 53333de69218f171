"""The test oracle of rule evaluation: the rules applied in Python, one document at a time for per-document
rules (``Rule.passes``) and over the documents still alive for group rules, exactly as their definition
reads. The SQL (``lab.query.compile``) and numpy (``lab.query.codes``) evaluators are checked against it.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import numpy as np

from lab import dedup
from lab.select.rules import Rule, first_failure
from lab.select.ruleset import stage_rules


def keep_first_in_group(rule: Rule, rows: Iterable[Mapping[str, Any]]) -> dict[int, str | None]:
    """doc_id -> drop reason for a ``first_in_group`` rule over the rows still alive.

    The kept member of each group is the one with the lowest ``doc_id``; rows whose signal is
    missing are dropped with the rule's reason.
    """
    seen: set[Any] = set()
    out: dict[int, str | None] = {}
    for row in sorted(rows, key=lambda r: r["doc_id"]):
        key = row.get(rule.signal)
        if key is None or key in seen:
            out[row["doc_id"]] = rule.drop_reason
        else:
            seen.add(key)
            out[row["doc_id"]] = None
    return out


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
