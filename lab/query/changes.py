"""changes: two configs over one run: the documents whose drop reason differs, evaluated under both.

A slider move asks what it newly drops and keeps. Only documents whose outcome can differ are evaluated:
those with a signal between an old and a new threshold (or failing a rule present in one list only),
the rest of their exact-duplicate groups, and the documents near dedup drops under one config and not
the other. In memory the codes (``lab.query.codes``) answer; on disk, one SQL query over that set.
"""

from __future__ import annotations

from collections.abc import Sequence

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lab.query.codes import of as codes_of
from lab.query.compile import changed_rules, codes_sql, failure, literal, reason_of
from lab.query.funnels import INCREMENTAL_SHARE
from lab.query.memo import Memo
from lab.query.neardup import near_drops, near_index
from lab.query.run import SAMPLE_RANK, Run
from lab.query.sql import ident, register_ids, to_arrow
from lab.select.rules import Rule


def _key(x: Rule) -> tuple:
    return x.stage, x.signal, x.op, x.reason


def moved_condition(a: Rule | None, b: Rule | None, r: Run | None = None) -> str | None:
    """SQL condition true for every document whose outcome of this one rule may differ between ``a``
    and ``b`` (either None: the rule is absent there), or None when there is none (a threshold that
    is not a number). Near dedup is compared by its drop sets, not here: "FALSE". A group rule
    switched on or off moves the members of groups of more than one document and those without a
    value (in memory the group sizes say which).

    >>> print(moved_condition(Rule("l", "lang", "in", ("en",), "x"), Rule("l", "lang", "in", ("en", "de"), "x")))
    "lang" IN ('de')
    """
    if a is not None and b is not None:
        if a.op == "first_in_cluster":
            return "FALSE"
        if a.op == "in" and a.value != b.value:
            diff = sorted(set(a.value) ^ set(b.value), key=repr)
            return f"{ident(a.signal)} IN ({', '.join(literal(v) for v in diff)})" if diff else "FALSE"
        return changed_rules(a, b)
    x = a if a is not None else b
    if x.op == "first_in_cluster":
        return "FALSE"
    if x.op == "first_in_group":
        col = ident(x.signal)
        if r is not None and f"_n_{x.signal}" in r.columns:
            return f"({col} IS NULL OR {ident('_n_' + x.signal)} > 1)"
        return f"({col} IS NULL OR {col} IN (SELECT {col} FROM signals GROUP BY ALL HAVING count(*) > 1))"
    return failure(x)


def pairs_sql(r: Run, cur: duckdb.DuckDBPyConnection, before: list[Rule], after: list[Rule],
               extra: Sequence[str] = ()) -> str:
    """A query of ``doc_id, bytes, before, after`` (+ ``extra``): each document's drop reason under
    ``before`` and ``after`` (NULL = kept), for a set of documents that holds every document whose
    reason differs (often far fewer than all; all of them when more than ``INCREMENTAL_SHARE`` of the
    documents may change).

    Outside the set no outcome can change: a document none of whose signals lies between an old
    and a new threshold (or fails a rule present in only one list) has the same per-document
    outcomes; exact dedup depends only on which members of its group are alive, so the whole groups
    of such documents join the set; near dedup is compared as the two drop sets of ``near_drops``.
    Cost: one scan for the seed documents (read at most ``INCREMENTAL_SHARE`` of the run), one more
    only when a seed has exact copies, then both rule lists over the set.
    """
    ka, kb = {_key(x): x for x in before}, {_key(x): x for x in after}
    conds: list[str | None] | None = None
    if len(ka) == len(before) and len(kb) == len(after):
        conds = [moved_condition(ka.get(k), kb.get(k), r) for k in dict.fromkeys([*ka, *kb])]
    nd_a = near_drops(r, before).column("doc_id").to_numpy()
    nd_b = near_drops(r, after).column("doc_id").to_numpy()
    groups = list(dict.fromkeys(x.signal for x in (*before, *after) if x.op == "first_in_group"))
    source, cte = "signals", ""
    if conds is not None and None not in conds:
        need = [c for c in dict.fromkeys(["doc_id", "bytes", *extra, *(c for x in (*before, *after) for c in x.columns),
                                           *(f"_n_{g}" for g in groups)]) if c in r.columns]
        moved = " OR ".join(f"({c})" for c in conds if c != "FALSE") or "FALSE"
        flip = np.setxor1d(nd_a, nd_b)
        total = cur.execute("SELECT count(*) FROM signals").fetchall()[0][0]
        cap = max(int(INCREMENTAL_SHARE * total), 0)
        # narrow reads first (a wide read costs about the same for 1 row as for all: every column's
        # segments are scanned), then one wide read of exactly the candidates; the near-dedup flips
        # apart (an IN inside an OR would probe every row)
        keys = ", ".join(map(ident, [c for c in dict.fromkeys(["doc_id", *groups, *(f"_n_{g}" for g in groups)])
                                      if c in r.columns]))
        seed = to_arrow(cur.sql(f"SELECT {keys} FROM signals WHERE {moved} LIMIT {cap + 1}"))
        if flip.size and seed.num_rows <= cap:
            flips = to_arrow(cur.sql(f"SELECT {keys} FROM signals WHERE {register_ids(cur, '_bq_flip', flip)}"))
            seed = pa.concat_tables([seed, flips.cast(seed.schema)])
        if seed.num_rows <= cap:
            ids = [seed.column("doc_id").to_numpy()]
            for g in groups:  # the rest of the seeds' exact-duplicate groups (in memory: singletons skipped)
                vals = seed.column(g)
                if f"_n_{g}" in seed.column_names:
                    vals = vals.filter(pc.greater(seed.column(f"_n_{g}"), 1))
                vals = pc.unique(vals.drop_null())
                if len(vals):
                    cur.register("_bq_groups", pa.table({"v": vals}))
                    sized = f"{ident('_n_' + g)} > 1 AND " if f"_n_{g}" in r.columns else ""
                    ids.append(to_arrow(cur.sql(f"SELECT doc_id FROM signals WHERE {sized}{ident(g)} IN "
                                              f"(SELECT v FROM _bq_groups)")).column("doc_id").to_numpy())
            cand = register_ids(cur, "_bq_cand_ids", np.unique(np.concatenate(ids)))
            cte = f"WITH _bq_cand AS MATERIALIZED (SELECT {', '.join(map(ident, need))} FROM signals WHERE {cand}) "
            source = "_bq_cand"

    def near(rules: list[Rule], nd: np.ndarray, tag: str) -> str:
        k = near_index(rules)
        if k is None or not nd.size:
            return "code"
        # near_drops holds only documents whose other rules keep them up to near dedup: code k
        return f"CASE WHEN {register_ids(cur, '_bq_nd_' + tag, nd)} THEN {k} ELSE code END"

    # one pipeline, no join: ``before``'s evaluation carries every column ``after``'s needs
    carry = [c for c in dict.fromkeys([*extra, *(c for x in after for c in x.columns),
                                       *(f"_n_{g}" for g in groups if f"_n_{g}" in r.columns)])
             if c not in ("doc_id", "bytes")]
    sa = codes_sql(before, extra=carry, run=r, source=source)
    sa = f"(SELECT * EXCLUDE (code), {reason_of(before, near(before, nd_a, 'a'))} AS _before FROM ({sa}))"
    sb = codes_sql(after, extra=[*extra, "_before"], run=r, source=sa)
    more = "".join(f", {ident(c)}" for c in dict.fromkeys(extra) if c not in ("doc_id", "bytes"))
    return (f"{cte}SELECT doc_id, bytes, _before AS before, {reason_of(after, near(after, nd_b, 'b'))} AS after{more} "
            f"FROM ({sb})")


MEMO_CHANGES = 8  # per process: the changed documents of the most recent (run, before, after) pairs
_changes_memo = Memo(MEMO_CHANGES)  # (id(run), before rules, after rules) -> (run, table)


def changes(r: Run, before: list[Rule], after: list[Rule]) -> pa.Table:
    """The documents whose drop reason differs between two rule lists: ``doc_id, bytes, before, after,
    source, lang, n_tokens`` (+ ``_sample_rank`` in memory). Remembered for the most recent pairs: a
    slider release asks for the change counts, then the newly dropped / kept pages, of one pair."""
    key = (id(r), tuple(before), tuple(after))
    hit = _changes_memo.get(key)
    if hit is not None and hit[0] is r:
        return hit[1]
    cur = r.cursor()
    extra = [c for c in ("source", "lang", "n_tokens", SAMPLE_RANK) if c in r.columns]
    c = codes_of(r)
    found = c.changed(before, after) if c is not None else None
    if found is not None:  # in memory: from each document's code under both
        rows, was, now = found
        t = c.table(rows, ["doc_id", "bytes", *extra])
        out = pa.table({"doc_id": t.column("doc_id"), "bytes": t.column("bytes"), "before": pa.array(was, pa.string()),
                        "after": pa.array(now, pa.string()), **{n: t.column(n) for n in extra}})
    else:
        out = to_arrow(cur.sql(f"SELECT * FROM ({pairs_sql(r, cur, before, after, extra)}) "
                             "WHERE before IS DISTINCT FROM after"))
    if "n_tokens" not in out.column_names:
        out = out.append_column("n_tokens", pa.nulls(out.num_rows, pa.int64()))
    _changes_memo.put(key, (r, out))
    return out
