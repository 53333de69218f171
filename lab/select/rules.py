"""Rules are data: (stage, signal, comparison, threshold, reason).

A stage's ``rules(cfg)`` returns a list of them. ``lab.query`` evaluates them over a run: SQL over
its Parquet, numpy over a run held in memory. ``passes``/``first_failure`` here read a rule's
definition on one document's signals: a batch run's annotate stops a document at its first failure
with them, and the tests check both of ``lab.query``'s evaluators against them.

A rule states what a document must satisfy to be kept. A missing signal (NULL/None) never
passes a rule: a document with no text has no words, so it cannot have enough of them.
Two comparisons are decided over the documents still alive rather than one at a time:
``first_in_group`` keeps the first document (lowest ``doc_id``) of each group of equal signal
values among the documents that passed every earlier stage;
``first_in_cluster`` keeps one document per connected component of near-duplicate edges among
them (``lab.dedup.keep.keep_one_per_cluster``), with a ``Near`` value: its threshold and keep policy.

A comparison may carry per-language thresholds (``by_lang``: ``(lang, value)`` pairs, from a stage's
``by_lang`` config section, see ``with_by_lang``): a document whose ``lang`` signal is listed is held to
that value, any other (and one without a language) to ``value``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Iterable, Literal, Mapping, NamedTuple

from lab.errors import ConfigError

Op = Literal[">=", "<=", "==", "!=", "in", "first_in_group", "first_in_cluster"]
OPS: tuple[str, ...] = (">=", "<=", "==", "!=", "in", "first_in_group", "first_in_cluster")
GROUP_OPS: tuple[str, ...] = ("first_in_group", "first_in_cluster")  # decided over the survivors
COMPARISONS: tuple[str, ...] = (">=", "<=", "==", "!=")  # the ops a per-language threshold applies to
LANG = "lang"  # the signal per-language thresholds are looked up by (the language stage's)


class Near(NamedTuple):
    """The value of a ``first_in_cluster`` rule: link survivors at ``threshold`` Jaccard, keep one by ``keep``."""

    threshold: float  # one of lab.dedup.forest.GRID
    keep: str  # lab.dedup.keep.KEEP: lowest_id | longest | best_signal
    keep_signal: str  # best_signal: the numeric signal whose highest value wins


@dataclass(frozen=True)
class Rule:
    stage: str
    signal: str
    op: Op
    value: Any  # threshold; a tuple for "in"; None for "first_in_group"; a Near for "first_in_cluster"
    reason: str  # short name; the full drop reason is f"{stage}.{reason}"
    by_lang: tuple[tuple[str, Any], ...] = ()  # (lang, threshold) sorted by lang; other languages: value

    def __post_init__(self) -> None:
        if self.op not in OPS:
            raise ValueError(f"rule {self.stage}.{self.reason}: unknown op {self.op!r}; known: {', '.join(OPS)}")
        if self.by_lang and self.op not in COMPARISONS:
            raise ValueError(f"rule {self.drop_reason}: per-language thresholds need a comparison "
                             f"({', '.join(COMPARISONS)}), not {self.op}")

    @property
    def columns(self) -> tuple[str, ...]:
        """The signals this rule reads: its own, and ``lang`` when it has per-language thresholds."""
        return (self.signal, LANG) if self.by_lang and self.signal != LANG else (self.signal,)

    @property
    def values(self) -> tuple[Any, ...]:
        """Every threshold a document may be held to: ``value`` and the per-language ones."""
        return (self.value, *(v for _, v in self.by_lang))

    def value_for(self, lang: Any) -> Any:
        """The threshold a document of language ``lang`` is held to.

        >>> r = Rule("gopher_quality", "gq_stop_words", ">=", 2, "too_few_stop_words", (("de", 3),))
        >>> r.value_for("de"), r.value_for("en"), r.value_for(None)
        (3, 2, 2)
        """
        for code, v in self.by_lang:
            if code == lang:
                return v
        return self.value

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
        >>> Rule("gopher_quality", "gq_words", ">=", 50, "too_short", (("zh", 20),)).passes({"gq_words": 49, "lang": "zh"})
        True
        """
        x = row.get(self.signal)
        if x is None or (isinstance(x, float) and x != x):  # None and NaN never pass
            return False
        v = self.value_for(row.get(LANG)) if self.by_lang else self.value
        if self.op == ">=":
            return x >= v
        if self.op == "<=":
            return x <= v
        if self.op == "==":
            return x == v
        if self.op == "!=":
            return x != v
        if self.op == "in":
            return x in self.value
        raise ValueError(f"rule {self.drop_reason} ({self.op}) is decided over a group, not one document")


def first_failure(rules: Iterable[Rule], row: Mapping[str, Any]) -> str | None:
    """The drop reason of the first per-document rule ``row`` fails, or None if it passes all."""
    for rule in rules:
        if rule.op not in GROUP_OPS and not rule.passes(row):
            return rule.drop_reason
    return None


def with_by_lang(module: ModuleType, cfg: Any, overrides: Mapping[str, Mapping[str, Any]]) -> list[Rule]:
    """``module.rules(cfg)`` with per-language thresholds: ``overrides`` maps a language to the config
    fields it sets (``{"de": {"min_stop_words": 3}}``). Each language's rules are the stage's own rules
    under ``dataclasses.replace(cfg, **fields)``; they must be the same rules (stage, signal, op and
    reason, in order) at other thresholds, and a threshold that differs is carried in ``by_lang``.

    >>> from lab.stages import gopher_quality as gq
    >>> [r.by_lang for r in with_by_lang(gq, gq.Config(), {"de": {"min_stop_words": 3}}) if r.by_lang]
    [(('de', 3),)]
    """
    base = module.rules(cfg)
    if not overrides:
        return base
    per: dict[int, list[tuple[str, Any]]] = {}
    for lang, fields in sorted(overrides.items()):
        variant = module.rules(dataclasses.replace(cfg, **fields))
        shape = [(r.stage, r.signal, r.op, r.reason) for r in variant]
        if shape != [(r.stage, r.signal, r.op, r.reason) for r in base]:
            raise ConfigError(f"{module.NAME}.by_lang.{lang}: by_lang overrides thresholds only; "
                              f"{', '.join(sorted(fields))} changes which rules apply (set it for every language "
                              "in the stage's own section instead)")
        for i, (a, b) in enumerate(zip(base, variant)):
            if a.value != b.value:
                if a.op not in COMPARISONS:
                    raise ConfigError(f"{module.NAME}.by_lang.{lang}: {', '.join(sorted(fields))} sets the "
                                      f"threshold of {a.drop_reason} ({a.op}), which is not compared one document "
                                      f"at a time; only {', '.join(COMPARISONS)} thresholds can differ by language")
                per.setdefault(i, []).append((lang, b.value))
    return [dataclasses.replace(r, by_lang=tuple(per[i])) if i in per else r for i, r in enumerate(base)]
