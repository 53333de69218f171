"""Rules are data: (stage, signal, comparison, threshold, reason).

A stage's ``rules(cfg)`` returns a list of them. ``lab.query`` compiles them to SQL predicates
over the signals table; ``passes``/``first_failure`` here evaluate the very same rules in Python
for batch runs, and a test holds the two equal on every sample document.

A rule states what a document must satisfy to be kept. A missing signal (NULL/None) never
passes a rule: a document with no text has no words, so it cannot have enough of them.
Two comparisons are decided over the documents still alive rather than one at a time:
``first_in_group`` keeps the first document (lowest ``doc_id``) of each group of equal signal
values among the documents that passed every earlier stage (see ``keep_first_in_group``);
``first_in_cluster`` keeps one document per connected component of near-duplicate edges among
them (``lab.neardup.keep.keep_one_per_cluster``), with a ``Near`` value: its threshold and keep policy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Literal, Mapping, NamedTuple

Op = Literal[">=", "<=", "==", "!=", "in", "first_in_group", "first_in_cluster"]
OPS: tuple[str, ...] = (">=", "<=", "==", "!=", "in", "first_in_group", "first_in_cluster")
GROUP_OPS: tuple[str, ...] = ("first_in_group", "first_in_cluster")  # decided over the survivors


class Near(NamedTuple):
    """The value of a ``first_in_cluster`` rule: link survivors at ``threshold`` Jaccard, keep one by ``keep``."""

    threshold: float  # one of lab.neardup.forest.GRID
    keep: str  # lab.neardup.keep.KEEP: lowest_id | longest | best_signal
    keep_signal: str  # best_signal: the numeric signal whose highest value wins


@dataclass(frozen=True)
class Rule:
    stage: str
    signal: str
    op: Op
    value: Any  # threshold; a tuple for "in"; None for "first_in_group"; a Near for "first_in_cluster"
    reason: str  # short name; the full drop reason is f"{stage}.{reason}"

    def __post_init__(self) -> None:
        if self.op not in OPS:
            raise ValueError(f"rule {self.stage}.{self.reason}: unknown op {self.op!r}; known: {', '.join(OPS)}")

    @property
    def per_document(self) -> bool:
        return self.op not in GROUP_OPS

    @property
    def drop_reason(self) -> str:
        return f"{self.stage}.{self.reason}"

    def passes(self, row: Mapping[str, Any]) -> bool:
        """Whether one document's signals satisfy this rule (not for ``first_in_group``).

        >>> Rule("gopher_quality", "gq_words", ">=", 50, "too_short").passes({"gq_words": 49})
        False
        """
        x = row.get(self.signal)
        if x is None or (isinstance(x, float) and x != x):  # None and NaN never pass
            return False
        if self.op == ">=":
            return x >= self.value
        if self.op == "<=":
            return x <= self.value
        if self.op == "==":
            return x == self.value
        if self.op == "!=":
            return x != self.value
        if self.op == "in":
            return x in self.value
        raise ValueError(f"rule {self.drop_reason} ({self.op}) is decided over a group, not one document")


def first_failure(rules: Iterable[Rule], row: Mapping[str, Any]) -> str | None:
    """The drop reason of the first per-document rule ``row`` fails, or None if it passes all."""
    for rule in rules:
        if rule.op not in GROUP_OPS and not rule.passes(row):
            return rule.drop_reason
    return None


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
