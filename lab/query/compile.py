"""compile: rules (``lab.select.rules.Rule``) -> SQL text, with no connection needed.

Rules compile to one ``CASE`` expression that names each document's first failing rule (its
``code``: the rule's index in the list; NULL when it passes them all), in funnel order; the funnel
is then a single ``GROUP BY`` over that computed code (measured faster than one ``FILTER`` aggregate
per stage; ``bench/funnel_query.py`` times both shapes).
Group rules (exact dedup) become a window over the documents still alive at that point, so one member
of each group always survives the earlier stages' filtering. The near-dedup rule
(``first_in_cluster``) is no SQL: ``lab.query.neardup`` applies its drops to the codes. A ``Run``,
when given, only makes the SQL smaller: NULL guards only on the columns that hold NULLs, no condition
for a rule no document can fail, group sizes that let singleton groups skip the window.

>>> print(failure(Rule("gopher_quality", "gq_words", ">=", 50, "too_short")))
("gq_words" IS NULL OR "gq_words" < 50)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from lab.config import Config
from lab.errors import ConfigError, NotReadyError, RunStateError
from lab.query.sql import ident, quote
from lab.select.rules import COMPARISONS, LANG, Rule
from lab.select.ruleset import ruleset

if TYPE_CHECKING:
    from lab.query.run import Run


def literal(v: Any) -> str:
    """A threshold as an SQL literal.

    >>> [literal(v) for v in (True, 3, 0.5, "it's")]
    ['TRUE', '3', '0.5', "'it''s'"]
    """
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return quote(v)
    raise ConfigError(f"rule threshold {v!r} ({type(v).__name__}) cannot be used in SQL; use a number or a string")


def predicate(rule: Rule) -> str:
    """The SQL condition a kept document satisfies; NULL (a missing signal) never passes.

    >>> print(predicate(Rule("language", "lang", "in", ("en", "de"), "other_language")))
    coalesce("lang" IN ('en', 'de'), FALSE)
    >>> predicate(Rule("exact_dedup", "content_hash", "first_in_group", None, "duplicate"))
    Traceback (most recent call last):
    ...
    ValueError: exact_dedup.duplicate: first_in_group is a group rule, not a predicate
    """
    return f"coalesce({_compare(rule, negate=False)}, FALSE)"


def failure(rule: Rule, *, nullable: bool = True) -> str:
    """The SQL condition a document fails ``rule`` on (the negation of ``predicate``).

    >>> print(failure(Rule("gopher_quality", "gq_words", ">=", 50, "too_short")))
    ("gq_words" IS NULL OR "gq_words" < 50)
    >>> print(failure(Rule("gopher_quality", "gq_words", ">=", 50, "too_short"), nullable=False))
    "gq_words" < 50
    """
    cond = _compare(rule, negate=True)
    return f"({ident(rule.signal)} IS NULL OR {cond})" if nullable else cond


def _compare(rule: Rule, *, negate: bool) -> str:
    col = ident(rule.signal)
    if rule.op == "in":
        return f"{col} {'NOT IN' if negate else 'IN'} ({', '.join(literal(v) for v in rule.value)})"
    ops = {">=": ("<", ">="), "<=": (">", "<="), "==": ("<>", "="), "!=": ("=", "<>")}
    if rule.op not in ops:
        raise ValueError(f"{rule.drop_reason}: {rule.op} is a group rule, not a predicate")
    return f"{col} {ops[rule.op][0 if negate else 1]} {_threshold_sql(rule)}"


def _threshold_sql(rule: Rule) -> str:
    """A comparison's threshold in SQL: a literal, or with per-language thresholds a ``CASE`` on ``lang``
    (a document without a language is held to the rule's own value).

    >>> print(_threshold_sql(Rule("gopher_quality", "gq_stop_words", ">=", 2, "too_few_stop_words", (("de", 3), ("zh", 0)))))
    CASE "lang" WHEN 'de' THEN 3 WHEN 'zh' THEN 0 ELSE 2 END
    >>> print(failure(Rule("gopher_quality", "gq_stop_words", ">=", 2, "too_few_stop_words", (("de", 3),))))
    ("gq_stop_words" IS NULL OR "gq_stop_words" < CASE "lang" WHEN 'de' THEN 3 ELSE 2 END)
    """
    if not rule.by_lang:
        return literal(rule.value)
    whens = " ".join(f"WHEN {literal(lang)} THEN {literal(v)}" for lang, v in rule.by_lang)
    return f"CASE {ident(LANG)} {whens} ELSE {literal(rule.value)} END"


def failure_in(rule: Rule, run: Run | None) -> str | None:
    """``failure(rule)`` for this run, or None when no document of it can fail the rule: the column's
    exact min and max (in-memory runs) already satisfy the threshold and it has no NULLs. With
    per-language thresholds, every one of them must be satisfied (whatever a document's language).

    >>> from types import SimpleNamespace
    >>> words = Rule("gopher_quality", "gq_words", ">=", 50, "too_short")
    >>> [failure_in(words, SimpleNamespace(nullable=frozenset(n), ranges={"gq_words": (lo, 900.0)}))
    ...  for n, lo in (((), 6.0), ((), 60.0), (("gq_words",), 60.0))]
    ['"gq_words" < 50', None, '"gq_words" IS NULL']
    >>> zh = Rule("gopher_quality", "gq_words", ">=", 50, "too_short", (("zh", 70),))
    >>> print(failure_in(zh, SimpleNamespace(nullable=frozenset(), ranges={"gq_words": (60.0, 900.0)})))
    "gq_words" < CASE "lang" WHEN 'zh' THEN 70 ELSE 50 END
    """
    nullable = run is None or run.nullable is None or rule.signal in run.nullable
    rng = run.ranges.get(rule.signal) if run is not None and run.ranges else None
    values = rule.values
    if rng is not None and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        lo, hi = rng
        if (rule.op == ">=" and lo >= max(values)) or (rule.op == "<=" and hi <= min(values)) \
                or (rule.op == "==" and all(lo == hi == v for v in values)):
            return f"{ident(rule.signal)} IS NULL" if nullable else None
    return failure(rule, nullable=nullable)


def check_columns(run: Run, names: Sequence[str]) -> None:
    from lab.io.schema import signals_schema

    for n in names:
        if n not in run.columns:
            if n in signals_schema().names:  # a stage this run was made without (an older corpus-lab)
                raise NotReadyError(f"signal {n!r} is not in this run: it was made before that signal's stage "
                                    f"existed; rerun it (`corpus-lab run --config {run.layout.config}`: its "
                                    "partitions are annotated again with every stage of this version)")
            raise ConfigError(f"signal {n!r} is not in this run; known: {', '.join(run.columns)}")


def codes_sql(rules: list[Rule], *, extra: Sequence[str] = (), run: Run | None = None,
              source: str = "signals") -> str:
    """A query of ``doc_id, bytes, code`` (+ ``extra`` columns): ``code`` is the index in ``rules``
    of each document's first failing rule, NULL when it passes them all.

    Scalar rules become one ``CASE`` over negated predicates (NULL guards only on columns that have
    NULLs, when ``run`` says which). A group rule keeps the lowest ``doc_id`` per value among the
    documents still alive; when ``run`` holds group sizes (``_n_<signal>``), only documents of
    groups with more than one member go through the window.

    Scalar rules in a row share one ``CASE``; a group rule wraps the query so far in its window
    (each layer keeps only the columns the later ones read):

    >>> words = Rule("gopher_quality", "gq_words", ">=", 50, "too_short")
    >>> lang = Rule("language", "lang", "in", ("en", "de"), "other_language")
    >>> print(codes_sql([words, lang]))  # doctest: +NORMALIZE_WHITESPACE
    SELECT "doc_id", "bytes", coalesce(code, CASE WHEN ("gq_words" IS NULL OR "gq_words" < 50) THEN 0
      WHEN ("lang" IS NULL OR "lang" NOT IN ('en', 'de')) THEN 1 END) AS code
    FROM (SELECT "doc_id", "bytes", "gq_words", "lang", NULL::INTEGER AS code FROM signals)
    >>> exact = Rule("exact_dedup", "content_hash", "first_in_group", None, "duplicate")
    >>> print(codes_sql([lang, exact]))  # doctest: +NORMALIZE_WHITESPACE
    SELECT "doc_id", "bytes", CASE WHEN code IS NOT NULL THEN code WHEN "content_hash" IS NULL
      OR row_number() OVER (PARTITION BY "content_hash", code IS NULL ORDER BY doc_id) > 1 THEN 1 END AS code
    FROM (SELECT "doc_id", "bytes", "content_hash", coalesce(code, CASE WHEN ("lang" IS NULL
      OR "lang" NOT IN ('en', 'de')) THEN 0 END) AS code
    FROM (SELECT "doc_id", "bytes", "lang", "content_hash", NULL::INTEGER AS code FROM signals))
    """
    base = list(dict.fromkeys(["doc_id", "bytes", *extra]))
    sized = {r.signal for r in rules if r.op == "first_in_group" and run is not None and f"_n_{r.signal}" in run.columns}

    def keep_after(i: int) -> list[str]:
        """Columns the layers after rule ``i`` still read: each layer projects down to these."""
        later = [c for r in rules[i + 1:] for c in r.columns]
        later += [f"_n_{r.signal}" for r in rules[i + 1:] if r.op == "first_in_group" and r.signal in sized]
        return [c for c in dict.fromkeys(later) if c not in base]

    cols = list(dict.fromkeys([*base, *(c for r in rules for c in r.columns), *(f"_n_{c}" for c in sorted(sized))]))
    sql = f"SELECT {', '.join(map(ident, cols))}, NULL::INTEGER AS code FROM {source}"
    pending: list[tuple[int, Rule]] = []

    def select_list(i: int, code: str) -> str:
        return ", ".join([*map(ident, base + keep_after(i)), f"{code} AS code"])

    def flush(sql: str) -> str:
        if not pending:
            return sql
        last = pending[-1][0]
        whens = [(i, failure_in(r, run)) for i, r in pending]
        whens = " ".join(f"WHEN {f} THEN {i}" for i, f in whens if f is not None)
        pending.clear()
        code = f"coalesce(code, CASE {whens} END)" if whens else "code"
        return f"SELECT {select_list(last, code)} FROM ({sql})"

    for i, rule in enumerate(rules):
        if rule.op == "first_in_cluster":  # decided afterwards over the survivors' edges (near_drops)
            continue
        if rule.op != "first_in_group":
            pending.append((i, rule))
            continue
        sql = flush(sql)
        col = ident(rule.signal)
        if rule.signal in sized:
            n = ident(f"_n_{rule.signal}")
            sql = (f"WITH prev AS MATERIALIZED ({sql}) "
                   f"SELECT {select_list(i, f'CASE WHEN code IS NULL AND {col} IS NULL THEN {i} ELSE code END')} "
                   f"FROM prev WHERE NOT (code IS NULL AND {n} > 1 AND {col} IS NOT NULL) "
                   f"UNION ALL SELECT {select_list(i, f'CASE WHEN row_number() OVER (PARTITION BY {col} ORDER BY doc_id) > 1 THEN {i} END')} "
                   f"FROM prev WHERE code IS NULL AND {n} > 1 AND {col} IS NOT NULL")
        else:
            sql = (f"SELECT {select_list(i, f'CASE WHEN code IS NOT NULL THEN code WHEN {col} IS NULL OR row_number() OVER (PARTITION BY {col}, code IS NULL ORDER BY doc_id) > 1 THEN {i} END')} "
                   f"FROM ({sql})")
    return flush(sql)


def changed_rules(old: Rule, new: Rule) -> str | None:
    """SQL condition on the documents whose outcome of this rule differs between ``old`` and ``new``
    (the same rule at another threshold), or None when the change is not a threshold move. With
    per-language thresholds, each language listed in either rule (and every other language together)
    is compared at its own pair of thresholds.

    >>> a = Rule("gopher_quality", "gq_stop_words", ">=", 2, "too_few_stop_words")
    >>> print(changed_rules(a, Rule("gopher_quality", "gq_stop_words", ">=", 2, "too_few_stop_words", (("de", 3),))))
    (("lang" = 'de' AND ("gq_stop_words" >= 2 AND "gq_stop_words" < 3)))
    """
    if (old.stage, old.signal, old.op, old.reason) != (new.stage, new.signal, new.op, new.reason):
        return None
    if old.value == new.value and old.by_lang == new.by_lang:
        return "FALSE"
    if old.op not in COMPARISONS or not all(isinstance(v, (int, float)) for v in (*old.values, *new.values)):
        return None
    if old.by_lang or new.by_lang:
        langs = sorted({lang for lang, _ in (*old.by_lang, *new.by_lang)})
        lang = ident(LANG)
        parts = []
        for code in langs:
            c = changed_rules(Rule(old.stage, old.signal, old.op, old.value_for(code), old.reason),
                         Rule(new.stage, new.signal, new.op, new.value_for(code), new.reason))
            if c != "FALSE":
                parts.append(f"({lang} = {literal(code)} AND {c})")
        c = changed_rules(Rule(old.stage, old.signal, old.op, old.value, old.reason),
                     Rule(new.stage, new.signal, new.op, new.value, new.reason))
        if c != "FALSE":
            parts.append(f"(({lang} IS NULL OR {lang} NOT IN ({', '.join(map(literal, langs))})) AND {c})")
        return f"({' OR '.join(parts)})" if parts else "FALSE"
    col, lo, hi = ident(old.signal), min(old.value, new.value), max(old.value, new.value)
    if old.op == ">=":  # passes iff x >= v: the outcome differs for lo <= x < hi
        return f"({col} >= {literal(lo)} AND {col} < {literal(hi)})"
    if old.op == "<=":  # passes iff x <= v: differs for lo < x <= hi
        return f"({col} > {literal(lo)} AND {col} <= {literal(hi)})"
    return f"{col} IN ({literal(lo)}, {literal(hi)})"


def moved_between(old: Sequence[Rule], new: Sequence[Rule]) -> str | None:
    """SQL condition on the documents whose outcome of some rule differs between two rule lists of the
    same shape (``changed_rules`` of each pair, OR-ed; "FALSE" when none moved), or None when a change
    is not a threshold move."""
    conds = [changed_rules(a, b) for a, b in zip(old, new)]
    if len(old) != len(new) or any(c is None for c in conds):
        return None
    return " OR ".join(c for c in conds if c != "FALSE") or "FALSE"


def reason_of(rules: list[Rule], code: str = "code") -> str:
    """SQL mapping a code (the column ``code``, or an expression of one) to its drop reason; NULL stays NULL.

    >>> print(reason_of([Rule("gopher_quality", "gq_words", ">=", 50, "too_short"),
    ...                   Rule("language", "lang", "in", ("en",), "other_language")]))
    (['gopher_quality.too_short', 'language.other_language'])[code + 1]
    """
    if not rules:
        return "NULL::VARCHAR"
    at = "code" if code == "code" else f"({code})"
    return f"([{', '.join(quote(r.drop_reason) for r in rules)}])[{at} + 1]"


def rules_of(r: Run, config: Config) -> list[Rule]:
    """The config's rules for this run; a batch run only answers for the thresholds it ran with
    (it skipped the later stages' signals of the documents it dropped)."""
    rules = ruleset(config, r.stats())
    check_columns(r, list(dict.fromkeys(c for x in rules for c in x.columns)))
    if r.config is not None and r.config.mode == "batch" and ruleset(r.config) != rules:
        raise RunStateError(f"{r.layout.root} is a batch run: it answers only for the thresholds it ran with; "
                            "run the inputs with mode: explore to move thresholds afterwards")
    return rules
