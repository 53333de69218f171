"""browse: the document viewer's read side — page through what a config drops or keeps, one document
at a time, with the rule each one fails, its other signals and its text.

Views (``VIEWS``): ``dropped`` (what ``config`` drops; with ``stage``, what that stage drops), ``kept``,
and, against the config before a change (``previous``), ``newly_dropped`` (kept before, dropped now)
and ``newly_kept`` (dropped before, kept now). Filters: a drop reason, a source, a language, a list of
doc ids. Documents come in a seeded random order: seed 0 is ``dropped_samples``' order (a hash of
the doc id; in-memory runs store each row's place in it as ``_sample_rank``), paged by offset/limit.

Cost (n documents in the run): a page is picked first (only ids and drop reasons travel), then only
its rows are read in full: their signals by an IN list of ids (in memory also by their range of
sample ranks: rows are stored in sample order, so the scan skips the rest) and their texts from
``docs/`` by an IN list (the Parquet scan prunes by it): the text read is O(page), never O(n).
Picking evaluates the rules over O(n) rows in the worst case, with these shortcuts:

- a stage whose rules and every earlier rule are per-document (language, Gopher, C4, FineWeb): only
  the documents failing one of its rules are evaluated;
- in memory at seed 0, the first 2^14 (then 2^18) rows in sample order (``SAMPLE_WINDOWS``), with the
  rest of their exact-duplicate groups, are tried before all of them: a page near the start of the
  order evaluates a few percent of the run;
- near_dedup: its drops are ``near_drops``' (remembered per config; the funnel computed them);
- newly dropped / kept (``changes``): only the documents whose signal lies between an old and a new
  threshold (or fails a rule present in one config only; exact dedup switched on or off: the
  documents with copies), the rest of their exact-duplicate groups and the documents whose near-dedup
  outcome differs are evaluated under both configs; a move of more than ``INCREMENTAL_SHARE`` of the
  documents evaluates all of them. The changed documents of the latest pairs are remembered (the change counts, the pages and
  their counts read one evaluation);
- counts and filter values of the dropped / kept views come from the funnel's remembered counts.

Text is returned verbatim: escaping it is the viewer's job.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import polars as pl
import pyarrow as pa

from lab import dedup
from lab.config import Config
from lab.errors import ConfigError
from lab.query.changes import changes
from lab.query.codes import KEPT
from lab.query.codes import of as codes_of
from lab.query.compile import codes_sql, failure_in, literal, reason_of, rules_of
from lab.query.funnels import code_counts
from lab.query.memo import Memo
from lab.query.neardup import (
    apply_near,
    candidate_edges,
    grid_col,
    near_drops,
    near_index,
    near_ranks,
    with_near,
    without_near,
)
from lab.query.run import SAMPLE_RANK, SAMPLE_SEED, SAMPLE_WINDOWS, Run, open_run, sample_order
from lab.query.sql import ident, register_ids, to_arrow
from lab.select.rules import Rule
from lab.stages import STAGE_NAMES

__all__ = ["PAGE_MAX", "VIEWS", "document_count", "document_filters", "document_texts", "documents", "sample_texts"]

VIEWS = ("dropped", "kept", "newly_dropped", "newly_kept")
PAGE_MAX = 1000  # documents per page at most (a page carries full texts)
FILTERS = ("reason", "source", "lang")  # document_filters' keys

_SCHEMA = {"doc_id": pl.Int64, "stage": pl.Utf8, "reason": pl.Utf8, "previous_reason": pl.Utf8, "source": pl.Utf8,
           "lang": pl.Utf8, "locator": pl.Int64, "url": pl.Utf8, "bytes": pl.Int64, "n_tokens": pl.Int64,
           "text": pl.Utf8, "signal": pl.Utf8, "value": pl.Float64, "op": pl.Utf8, "threshold": pl.Utf8,
           "signals": pl.Utf8, "cluster_id": pl.Int64, "kept_doc_id": pl.Int64}


@dataclass
class _Ask:
    """One validated request: the run, both rule lists, the view and its filters."""

    r: Run
    rules: list[Rule]  # config's
    prev: list[Rule] | None  # previous's (newly_* views)
    view: str
    stage: str | None
    reason: str | None
    source: str | None
    lang: str | None
    ids: np.ndarray | None

    @property
    def why_rules(self) -> list[Rule]:
        """The rules whose drop reason a row of this view shows (previous's for newly_kept)."""
        return self.prev if self.view == "newly_kept" else self.rules


def _ask(run: str | Path | Run, config: Config, view: str, stage: str | None, previous: Config | None,
         reason: str | None, source: str | None, lang: str | None, doc_ids: Sequence[int] | None) -> _Ask:
    if view not in VIEWS:
        raise ConfigError(f"view={view!r} is not allowed: must be one of {', '.join(VIEWS)}")
    if stage is not None and stage not in STAGE_NAMES:
        raise ConfigError(f"unknown stage {stage!r}; known: {', '.join(STAGE_NAMES)}")
    if view == "kept" and (stage is not None or reason is not None):
        raise ConfigError(f"view='kept' takes no stage or reason (stage={stage!r}, reason={reason!r}): kept documents "
                          "are dropped by none; use view='dropped' to see what a stage drops")
    if not isinstance(config, Config):
        raise ConfigError(f"config must be a lab.config.Config, not {type(config).__name__}")
    r = open_run(run)
    rules = rules_of(r, config)
    prev = None
    if view.startswith("newly_"):
        if previous is None:
            raise ConfigError(f"view={view!r} compares two configs: pass previous=<the config before the change>")
        if not isinstance(previous, Config):
            raise ConfigError(f"previous must be a lab.config.Config, not {type(previous).__name__}")
        prev = rules_of(r, previous)
    a = _Ask(r, rules, prev, view, stage, reason, source, lang, None)
    if reason is not None:
        allowed = [x.drop_reason for x in a.why_rules if stage is None or x.stage == stage]
        if reason not in allowed:
            where = f" for stage {stage!r}" if stage else ""
            raise ConfigError(f"reason={reason!r} is not allowed{where}: must be one of "
                              f"{', '.join(allowed) or 'none (no enabled rule)'} (full stage.reason names)")
    for key, v in (("source", source), ("lang", lang)):
        if v is not None and not isinstance(v, str):
            raise ConfigError(f"{key}={v!r} is not allowed: must be a string or None (no filter)")
    if doc_ids is not None:
        if isinstance(doc_ids, (str, bytes)) or not all(isinstance(d, (int, np.integer)) and not isinstance(d, bool)
                                                         for d in doc_ids):
            raise ConfigError(f"doc_ids={doc_ids!r:.80} is not allowed: must be a list of integer doc ids or None")
        a.ids = np.unique(np.asarray(list(doc_ids), dtype=np.int64))
    return a


def _page_args(seed: int, offset: int, limit: int) -> None:
    for key, v in (("seed", seed), ("offset", offset), ("limit", limit)):
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool):
            raise ConfigError(f"{key}={v!r} is not allowed: must be an integer")
    if offset < 0 or not 0 <= limit <= PAGE_MAX:
        raise ConfigError(f"offset={offset}, limit={limit}: offset must be >= 0 and limit in 0..{PAGE_MAX}")


# --- picking the documents of a view ----------------------------------------------------------------


def _ranked(r: Run, seed: int) -> bool:
    return seed == SAMPLE_SEED and SAMPLE_RANK in r.columns


def _stage_of_view(a: _Ask) -> str | None:
    """The one stage whose drops the rows can be (from ``stage`` or the reason's stage)."""
    if a.stage is not None:
        return a.stage
    return a.reason.split(".", 1)[0] if a.reason is not None else None


def _pushed(a: _Ask, cur: duckdb.DuckDBPyConnection) -> list[str]:
    """Per-document filters (source, language, ids) as conditions on the signals table."""
    out = []
    if a.source is not None:
        out.append(f"source = {literal(a.source)}")
    if a.lang is not None:
        out.append(f"lang = {literal(a.lang)}")
    if a.ids is not None:
        out.append(register_ids(cur, "_bq_ids", a.ids))
    return out


def _selection(a: _Ask, cur: duckdb.DuckDBPyConnection, ranked: bool, window: int | None = None) -> tuple[str, bool]:
    """SQL of the view's rows after every filter: ``doc_id, reason, previous_reason, source, lang``
    (+ ``_sample_rank`` when ``ranked``), and whether ``window`` (the first rows in sample order) was
    applied. ``reason`` is config's drop reason, ``previous_reason`` previous's (newly_* views)."""
    r, rules = a.r, a.rules
    rank = [SAMPLE_RANK] if ranked else []
    pushed = _pushed(a, cur)
    stage = _stage_of_view(a)
    why = "previous_reason" if a.view == "newly_kept" else "reason"
    post = []  # conditions on the drop reason
    if a.reason is not None:
        post.append(f"{why} = {literal(a.reason)}")
    elif a.stage is not None:
        names = [x.drop_reason for x in a.why_rules if x.stage == a.stage]
        post.append(f"{why} IN ({', '.join(map(literal, names))})" if names else "FALSE")

    def finish(sql: str, extra: list[str]) -> str:
        conds = [*extra, *post]
        return f"SELECT * FROM ({sql}) WHERE {' AND '.join(conds)}" if conds else sql

    cols = ", ".join(map(ident, ["source", "lang", *rank]))
    if a.view == "dropped" and stage is not None:
        codes = [i for i, x in enumerate(rules) if x.stage == stage]
        if not codes:
            none = ("SELECT NULL::BIGINT AS doc_id, NULL::VARCHAR AS reason, NULL::VARCHAR AS previous_reason, "
                    f"NULL::VARCHAR AS source, NULL::VARCHAR AS lang{', NULL::BIGINT AS ' + SAMPLE_RANK if ranked else ''} "
                    "LIMIT 0")
            return none, False
        last = max(codes)
        mine = [rules[i] for i in codes if a.reason is None or rules[i].drop_reason == a.reason]
        if all(x.per_document for x in rules[:last + 1]):
            # only per-document rules up to the stage: its drops are among the documents failing one
            # of its rules, each decided alone (no later rule, no window)
            fails = " OR ".join(f for f in (failure_in(x, r) for x in mine) if f is not None) or "FALSE"
            within = [f"{SAMPLE_RANK} < {int(window)}"] if window is not None and ranked else []
            src = f"(SELECT * FROM signals WHERE {' AND '.join([*within, f'({fails})', *pushed])})"
            sql = codes_sql(rules[:last + 1], extra=["source", "lang", *rank], run=r, source=src)
            return finish(f"SELECT doc_id, {reason_of(rules)} AS reason, NULL::VARCHAR AS previous_reason, "
                          f"{cols} FROM ({sql}) WHERE code IN ({', '.join(map(str, codes))})", []), bool(within)
        k = near_index(rules)
        if stage == "near_dedup" and codes == [k]:
            # the stage is the near-dedup rule alone: its drops are near_drops' (remembered per config)
            ids = register_ids(cur, "_bq_nd", near_drops(r, rules).column("doc_id").to_numpy())
            where = " AND ".join([ids, *pushed])
            return finish(f"SELECT doc_id, {literal(rules[k].drop_reason)} AS reason, NULL::VARCHAR AS previous_reason, "
                          f"{cols} FROM signals WHERE {where}", []), False
    if a.view in ("dropped", "kept"):
        src, within = "signals", []
        if window is not None and ranked:
            # the first rows in sample order and the rest of their exact-duplicate groups: the rules
            # (window included) decide those rows exactly as over the whole run
            within = [f"{SAMPLE_RANK} < {int(window)}"]
            src = f"(SELECT * FROM signals WHERE {within[0]}"
            for g in dict.fromkeys(x.signal for x in rules if x.op == "first_in_group"):
                sized = f"{ident('_n_' + g)} > 1 AND " if f"_n_{g}" in r.columns else ""
                src += (f" OR ({sized}{ident(g)} IN (SELECT {ident(g)} FROM signals WHERE {sized}{within[0]} "
                        f"AND {ident(g)} IS NOT NULL))")
            src += ")"
        sql = with_near(r, cur, rules, codes_sql(rules, extra=["source", "lang", *rank], run=r, source=src))
        state = "code IS NOT NULL" if a.view == "dropped" else "code IS NULL"
        return finish(f"SELECT doc_id, {reason_of(rules)} AS reason, NULL::VARCHAR AS previous_reason, {cols} "
                      f"FROM ({sql}) WHERE {state}", [*within, *pushed]), bool(within)
    cur.register("_bq_changes", changes(r, a.prev, rules))
    sql = "SELECT * FROM _bq_changes"
    if pushed:
        sql += " WHERE " + " AND ".join(pushed)
    state = ("before IS NULL AND after IS NOT NULL" if a.view == "newly_dropped"
             else "before IS NOT NULL AND after IS NULL")
    return finish(f"SELECT doc_id, after AS reason, before AS previous_reason, {cols} FROM ({sql}) WHERE {state}",
                  []), False


def _in_memory(a: _Ask) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray | None] | None:
    """In memory: (codes, the view's rows after every filter in sample order, each row's code under
    config, under previous for the newly_* views); None when SQL must answer (a Parquet run, or rules
    ``lab.query.codes`` leaves to SQL)."""
    c = codes_of(a.r)
    if c is None:
        return None
    now = c.codes(a.rules)
    was = c.codes(a.prev) if a.prev is not None else None
    if now is None or (a.prev is not None and was is None):
        return None
    kept_now = now == KEPT
    if a.view == "dropped":
        mask = ~kept_now
    elif a.view == "kept":
        mask = kept_now
    elif a.view == "newly_dropped":
        mask = (was == KEPT) & ~kept_now
    else:
        mask = (was != KEPT) & kept_now
    why, rules = (was, a.prev) if a.view == "newly_kept" else (now, a.rules)
    if a.reason is not None or a.stage is not None:
        ok = np.array([(a.reason is None or x.drop_reason == a.reason) and (a.stage is None or x.stage == a.stage)
                       for x in rules] + [False])  # code -1 (kept) looks up the last entry
        mask &= ok[why]
    for name, value in (("source", a.source), ("lang", a.lang)):
        if value is not None:
            col = c.column(name)
            idx = col.dictionary.index(value) if col.dictionary is not None and value in col.dictionary else None
            if idx is None:
                return c, np.zeros(0, dtype=np.int64), now, was
            mask &= col.values == idx
            if col.valid is not None:
                mask &= col.valid
    if a.ids is not None:
        mask &= np.isin(c.values("doc_id"), a.ids)
    return c, np.flatnonzero(mask), now, was


def _page_in_memory(a: _Ask, found: tuple, offset: int, limit: int) -> pl.DataFrame:
    """The page of ``_in_memory``'s rows: doc_id, reason, previous_reason, _sample_rank."""
    c, rows, now, was = found
    rows = rows[offset:offset + limit]

    def names(rules: list[Rule], codes: np.ndarray) -> list[str | None]:
        return [None if k == KEPT else rules[k].drop_reason for k in codes[rows].tolist()]

    before = names(a.prev, was) if was is not None else [None] * rows.size
    return pl.DataFrame({"doc_id": c.values("doc_id", rows).astype(np.int64), "reason": names(a.rules, now),
                         "previous_reason": before, SAMPLE_RANK: rows.astype(np.int64)},
                        schema={"doc_id": pl.Int64, "reason": pl.Utf8, "previous_reason": pl.Utf8,
                                SAMPLE_RANK: pl.Int64})


# --- the page's details -----------------------------------------------------------------------------


def _threshold_text(rule: Rule, lang: str | None = None) -> str | None:
    """A rule's threshold as the config writes it (the one a document of language ``lang`` is held to).

    >>> _threshold_text(Rule("language", "lang", "in", ("en",), "other_language"))
    "['en']"
    >>> _threshold_text(Rule("language", "lang_score", ">=", 0.69597288, "low_score"))
    '0.69597288'
    >>> _threshold_text(Rule("gopher_quality", "gq_stop_words", ">=", 2, "too_few_stop_words", (("de", 3),)), "de")
    '3'
    """
    if rule.op == "in":
        return repr(list(rule.value))
    if rule.op == "first_in_cluster":
        return repr(rule.value[0])
    if rule.op == "first_in_group":
        return None
    return repr(rule.value_for(lang))


def _json_value(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def _exact_keepers(r: Run, cur: duckdb.DuckDBPyConnection, rules: list[Rule], i: int,
                   hashes: list[int]) -> dict[int, int]:
    """content_hash -> the member exact dedup (rule ``i``) keeps: the lowest doc_id of the group
    among the documents alive before it. Evaluated over the groups' members only (whole groups)."""
    if not hashes:
        return {}
    col = ident(rules[i].signal)
    src = f"(SELECT * FROM signals WHERE {col} IN ({', '.join(map(str, hashes))}))"
    sql = codes_sql(rules[:i + 1], extra=[rules[i].signal], run=r, source=src)
    return dict(cur.execute(f"SELECT {col}, min(doc_id) FROM ({sql}) WHERE code IS NULL GROUP BY ALL").fetchall())


def _near_keepers(r: Run, cur: duckdb.DuckDBPyConnection, rules: list[Rule], k: int,
                  nodes: list[int], clusters: list[int]) -> dict[int, int]:
    """doc_id -> the member near dedup (rule ``k``) keeps in its group, for the members of the given
    grid ``clusters`` and ``nodes``: a survivors' group lies inside the grid cluster at the same
    threshold (a subgraph's component), so the members of those clusters (whole exact-copy groups)
    decide it exactly as ``near_drops`` does over all documents."""
    threshold, keep, keep_signal = rules[k].value
    col = grid_col(threshold)
    cond = f"content_hash IN ({', '.join(map(str, nodes))})" if nodes else "FALSE"
    if clusters:
        cond += f" OR content_hash IN (SELECT node FROM clusters WHERE {col} IN ({', '.join(map(str, clusters))}))"
    rank = {"lowest_id": "doc_id", "longest": "bytes", "best_signal": keep_signal}[keep]
    src = f"(SELECT * FROM signals WHERE {cond})"
    sql = codes_sql(rules, extra=["content_hash", "nd_shingles", rank], run=r, source=src)
    alive = to_arrow(cur.sql(f"SELECT doc_id, content_hash, bytes::DOUBLE AS fbytes, {ident(rank)}::DOUBLE AS rank "
                           f"FROM ({sql}) WHERE (code IS NULL OR code > {k}) AND nd_shingles > 0"))
    doc_ids = alive.column("doc_id").to_numpy()
    u, v, j = candidate_edges(r)
    ranks = near_ranks(keep, alive)
    keepers = dedup.cluster_keepers(doc_ids, alive.column("content_hash").to_numpy(), ranks, u, v, j, threshold)
    return dict(zip(doc_ids.tolist(), keepers.tolist()))


def _details(a: _Ask, cur: duckdb.DuckDBPyConnection, page: pl.DataFrame, with_text: bool = True) -> pl.DataFrame:
    """The page's rows in full (see ``documents``), in the page's order (texts null unless ``with_text``)."""
    r, rules = a.r, a.rules
    if page.height == 0:
        return pl.DataFrame(schema=_SCHEMA)
    ids = ", ".join(map(str, page["doc_id"].to_list()))
    where = f"doc_id IN ({ids})"
    if SAMPLE_RANK in page.columns:  # rows are stored in sample order: the rank range skips the others
        where += f" AND {SAMPLE_RANK} BETWEEN {int(page[SAMPLE_RANK].min())} AND {int(page[SAMPLE_RANK].max())}"
    text = "text" if with_text else "NULL::VARCHAR AS text"  # each text costs a row group's decompression
    rows = cur.sql(f"SELECT s.*, d.locator, d.url, d.text FROM (SELECT * FROM signals WHERE {where}) s "
                   f"LEFT JOIN (SELECT doc_id, locator, url, {text} FROM docs WHERE doc_id IN ({ids})) d USING (doc_id)").pl()
    by_id = {row["doc_id"]: row for row in rows.iter_rows(named=True)}
    rule_of = {x.drop_reason: x for x in rules}
    sig_cols = [c for c in rows.columns if not c.startswith("_") and c not in ("locator", "url", "text")]
    # dedup drops: the cluster they belong to and the member kept in their place
    i_exact = next((i for i, x in enumerate(rules) if x.op == "first_in_group" and x.stage == "exact_dedup"), None)
    k = near_index(rules)
    exact_hashes, near_nodes = [], []
    for d, why in zip(page["doc_id"], page["reason"]):
        h = by_id[d]["content_hash"] if d in by_id else None
        if h is None:
            continue
        if i_exact is not None and why == rules[i_exact].drop_reason:
            exact_hashes.append(h)
        if k is not None and why == rules[k].drop_reason:
            near_nodes.append(h)
    cluster_of: dict[int, int] = {}
    if near_nodes:
        col = grid_col(rules[k].value[0])
        cluster_of = dict(cur.execute(f"SELECT node, {col} FROM clusters WHERE node IN ({', '.join(map(str, near_nodes))}) "
                                      f"AND {col} IS NOT NULL").fetchall())
    exact_keeper = _exact_keepers(r, cur, rules, i_exact, sorted(set(exact_hashes))) if exact_hashes else {}
    near_keeper = (_near_keepers(r, cur, rules, k, sorted(set(near_nodes)), sorted(set(cluster_of.values())))
                   if near_nodes else {})

    out = []
    for d, why, before in zip(page["doc_id"], page["reason"], page["previous_reason"]):
        s = by_id.get(d, {})
        rule = rule_of.get(why)
        row = {"doc_id": d, "stage": rule.stage if rule else None, "reason": why, "previous_reason": before,
               "source": s.get("source"), "lang": s.get("lang"), "locator": s.get("locator"), "url": s.get("url"),
               "bytes": s.get("bytes"), "n_tokens": s.get("n_tokens"), "text": s.get("text"),
               "signal": None, "value": None, "op": None, "threshold": None,
               "signals": json.dumps({c: _json_value(s.get(c)) for c in sig_cols}, ensure_ascii=False),
               "cluster_id": None, "kept_doc_id": None}
        if rule is not None:
            row["op"], row["threshold"] = rule.op, _threshold_text(rule, s.get("lang"))
            if rule.per_document:
                v = s.get(rule.signal)
                row["signal"] = rule.signal
                row["value"] = float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None
            elif rule.op == "first_in_group":
                row["kept_doc_id"] = exact_keeper.get(s.get("content_hash"))
            else:
                row["cluster_id"] = cluster_of.get(s.get("content_hash"))
                row["kept_doc_id"] = near_keeper.get(d)
        out.append(row)
    return pl.DataFrame(out, schema=_SCHEMA)


def _remembered(a: _Ask, by: str | None) -> dict[tuple[Any, str | None], int] | None:
    """(group, drop reason) -> documents of a dropped / kept view, from the funnel's counts (remembered
    per config in memory: usually no query at all), or None when they cannot answer (newly_* views,
    a doc_ids filter)."""
    if a.view not in ("dropped", "kept") or a.ids is not None:
        return None
    c = codes_of(a.r)
    counts = c.funnel_counts(a.rules, by) if c is not None else None
    if counts is None:
        counts = apply_near(a.r, a.rules, by, code_counts(a.r, without_near(a.rules), by))
    out: dict[tuple[Any, str | None], int] = {}
    for (group, code), v in counts.items():
        why = None if code is None else a.rules[code].drop_reason
        if (why is None) != (a.view == "kept"):
            continue
        if a.reason is not None and why != a.reason:
            continue
        if a.stage is not None and a.rules[code].stage != a.stage:
            continue
        out[(group, why)] = out.get((group, why), 0) + v[0]
    return out


# --- the API ---------------------------------------------------------------------------------------


def documents(run: str | Path | Run, config: Config, *, view: str = "dropped", stage: str | None = None,
              previous: Config | None = None, reason: str | None = None, source: str | None = None,
              lang: str | None = None, doc_ids: Sequence[int] | None = None, seed: int = 0, offset: int = 0,
              limit: int = 20, with_text: bool = True) -> pl.DataFrame:
    """One page of a view's documents in a seeded random order, each with its text and why it is dropped.

    ``view``: one of ``VIEWS`` (``newly_*`` need ``previous``, the config before the change);
    ``stage``: only what that stage drops; filters ``reason`` (``stage.reason``; for newly_kept the
    reason ``previous`` dropped it for), ``source``, ``lang``, ``doc_ids``. Seed 0 is
    ``dropped_samples``' order. Columns: doc_id, stage and reason (config's drop; null if kept),
    previous_reason (previous's drop in the newly_* views), source, lang, locator, url, bytes,
    n_tokens (null without token counts), text (verbatim), signal / value / op / threshold (the
    failed rule: its column, the document's value, the comparison, the threshold as the config
    writes it; signal and value null for dedup rules, threshold the Jaccard for near dedup),
    signals (JSON of every signal column, integers exact), cluster_id (near_dedup drops: the cluster
    on the precomputed grid at the config's threshold) and kept_doc_id (exact / near dedup drops: the
    member the stage keeps in their place; it passes that stage, a later stage may still drop it).
    ``with_text=False``: text left null (a viewer showing one document at a time reads each text with
    ``document_texts``: a text costs the decompression of its row group, ~10 ms in a run of ~10 KB
    documents, and a page's documents lie in as many row groups as there are documents).
    """
    _page_args(seed, offset, limit)
    a = _ask(run, config, view, stage, previous, reason, source, lang, doc_ids)
    cur = a.r.cursor()
    ranked = _ranked(a.r, seed)
    order = SAMPLE_RANK if ranked else sample_order(seed)
    if limit == 0:
        return pl.DataFrame(schema=_SCHEMA)
    found = _in_memory(a) if ranked else None
    if found is not None:
        return _details(a, cur, _page_in_memory(a, found, offset, limit), with_text)
    for window in (*SAMPLE_WINDOWS, None):
        sql, windowed = _selection(a, cur, ranked, window)
        page = cur.sql(f"SELECT doc_id, reason, previous_reason{', ' + SAMPLE_RANK if ranked else ''} FROM ({sql}) "
                       f"ORDER BY {order} "
                       f"LIMIT {int(limit)} OFFSET {int(offset)}").pl()
        # a window holds the first rows in sample order: its page is the page if it is full
        if not windowed or page.height == limit:
            break
    return _details(a, cur, page, with_text)


def document_texts(run: str | Path | Run, doc_ids: Sequence[int]) -> dict[int, str]:
    """doc_id -> text (as stored in ``docs/``, verbatim) of the given documents that exist."""
    if isinstance(doc_ids, (str, bytes)) or not all(isinstance(d, (int, np.integer)) and not isinstance(d, bool)
                                                     for d in doc_ids):
        raise ConfigError(f"doc_ids={doc_ids!r:.80} is not allowed: must be a list of integer doc ids")
    if not doc_ids:
        return {}
    r = open_run(run)
    wanted = [int(d) for d in dict.fromkeys(doc_ids)]
    out, missing = {}, []
    for d in wanted:
        hit = _texts.get((id(r), d))
        if hit is not None and hit[0] is r:
            out[d] = hit[1]
        else:
            missing.append(d)
    if missing:
        ids = ", ".join(map(str, missing))
        read = dict(r.cursor().execute(f"SELECT doc_id, text FROM docs WHERE doc_id IN ({ids})").fetchall())
        _remember_texts(r, read)
        out.update(read)
    return {d: out[d] for d in wanted if d in out}


TEXTS_MEMO_BYTES = 64 << 20  # per process: the texts read most recently (a slider move re-reads its page's first)
_texts = Memo(TEXTS_MEMO_BYTES, weigh=lambda hit: len(hit[1]))  # (id(run), doc_id) -> (run, text)


def _remember_texts(r: Run, texts: dict[int, str]) -> None:
    """Keep texts read from ``r`` (the most recent ones, up to ``TEXTS_MEMO_BYTES`` of characters)."""
    for d, t in texts.items():
        if t is not None and (id(r), d) not in _texts:
            _texts.put((id(r), d), (r, t))


def sample_texts(run: str | Path | Run, n: int, *, seed: int = 0, exclude: Sequence[int] = ()) -> dict[int, str]:
    """doc_id -> text of ``n`` documents of the run taken in a seeded hash order of their ids (the same
    ``n``, seed and run: the same documents), skipping ``exclude`` and documents without stored text."""
    r = open_run(run)
    cur = r.cursor()
    cur.register("_exclude", pa.table({"doc_id": pa.array([int(d) for d in exclude], pa.int64())}))
    rows = cur.execute(f"SELECT doc_id, text FROM docs WHERE text IS NOT NULL AND length(trim(text)) > 0 "
                       f"AND doc_id NOT IN (SELECT doc_id FROM _exclude) ORDER BY {sample_order(seed)} "
                       f"LIMIT {int(n)}").fetchall()
    return dict(rows)


def document_count(run: str | Path | Run, config: Config, *, view: str = "dropped", stage: str | None = None,
                   previous: Config | None = None, reason: str | None = None, source: str | None = None,
                   lang: str | None = None, doc_ids: Sequence[int] | None = None) -> int:
    """How many documents ``documents`` pages through with the same arguments."""
    a = _ask(run, config, view, stage, previous, reason, source, lang, doc_ids)
    if source is None or lang is None:
        by, value = ("source", source) if source is not None else ("lang", lang) if lang is not None else (None, None)
        counts = _remembered(a, by)
        if counts is not None:
            return sum(n for (group, _), n in counts.items() if by is None or group == value)
    found = _in_memory(a)
    if found is not None:
        return int(found[1].size)
    cur = a.r.cursor()
    sql, _ = _selection(a, cur, False)
    return int(cur.execute(f"SELECT count(*) FROM ({sql})").fetchall()[0][0])


def document_filters(run: str | Path | Run, config: Config, *, view: str = "dropped", stage: str | None = None,
                     previous: Config | None = None) -> dict[str, list[tuple[str, int]]]:
    """The values the view's filters can take, with their document counts, most documents first:
    ``{"reason": [(stage.reason, n), ...], "source": [...], "lang": [...]}``. The reason is the one
    the view shows (previous's for newly_kept); missing languages are left out (not a filter value)."""
    a = _ask(run, config, view, stage, previous, None, None, None, None)
    out: dict[str, list[tuple[str, int]]] = {k: [] for k in FILTERS}
    if _remembered(a, None) is not None:
        for key, by in (("reason", None), ("source", "source"), ("lang", "lang")):
            acc: dict[str, int] = {}
            for (group, why), n in _remembered(a, by).items():
                value = why if by is None else group
                if value is not None:
                    acc[value] = acc.get(value, 0) + n
            out[key] = list(acc.items())
        return {k: sorted(v, key=lambda t: (-t[1], t[0])) for k, v in out.items()}
    cur = a.r.cursor()
    sql, _ = _selection(a, cur, False)
    why = "previous_reason" if view == "newly_kept" else "reason"
    rows = cur.execute(f"SELECT {why}, source, lang, GROUPING({why}, source, lang) AS g, count(*) AS n FROM ({sql}) "
                       f"GROUP BY GROUPING SETS (({why}), (source), (lang))").fetchall()
    # GROUPING bits: 4 = reason aggregated away, 2 = source, 1 = lang
    slot = {3: ("reason", 0), 5: ("source", 1), 6: ("lang", 2)}
    for row in rows:
        key, i = slot[row[3]]
        if row[i] is not None:
            out[key].append((row[i], int(row[4])))
    return {k: sorted(v, key=lambda t: (-t[1], t[0])) for k, v in out.items()}
