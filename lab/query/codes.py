"""In-memory runs: each document's first failing rule as one array, updated by a slider move.

A slider move changes one threshold. Answered in SQL, each question about it (the funnel, the open
card's histograms, what the change drops) evaluates the rules again and reads the moved rows' rule
columns back out of DuckDB: a scattered read that costs per column, ~60-150 ms at 1M rows, paid by
every question. Here the signals are numpy arrays (loaded from the in-memory table once, column by
column on first use) and the answer to "which rule drops each document" under a config is one
``int16`` array of codes (the index of the first failing rule, ``KEPT`` when none), remembered for
the latest configs. A config that differs from a remembered one only in thresholds recomputes the
codes of the rows whose outcome can differ — those between an old and a new threshold, and every
member of their exact-duplicate groups — and the near-dedup drops over the new survivors; the
funnel, the histograms and the change are then counts over the codes (``np.bincount``).

The semantics are the SQL's (``lab.query.codes_sql``), and tests hold the two equal on the sample
under many configs. Rules this module cannot evaluate the same way (a float column holding NaN,
which DuckDB orders above every number; strings compared by order) make ``codes`` return None, and
the caller answers in SQL.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lab import dedup
from lab.query.memo import Memo
from lab.query.neardup import candidate_edges
from lab.query.sql import ident, to_arrow
from lab.select.rules import LANG, Rule

ENABLED = True  # False: every question is answered in SQL (tests hold the two answers equal)
KEPT = -1  # the code of a document no rule drops
MEMO = 32  # codes arrays remembered per run (2 MB each at 1M documents)
INCREMENTAL_SHARE = 0.25  # recompute every row when more of them than this may change


class Column:
    """One signal as numpy: ``values`` (NULLs filled), ``valid`` (None: no NULLs), and for strings the
    dictionary their ``values`` index."""

    def __init__(self, arr: pa.ChunkedArray) -> None:
        self.valid: np.ndarray | None = None
        self.dictionary: list | None = None
        self.has_nan = False
        if arr.null_count:
            self.valid = pc.is_valid(arr).to_numpy(zero_copy_only=False)
        if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
            enc = pc.dictionary_encode(arr).combine_chunks()
            self.dictionary = enc.dictionary.to_pylist()
            self.values = enc.indices.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int32)
        elif pa.types.is_boolean(arr.type):
            self.values = arr.fill_null(False).to_numpy(zero_copy_only=False)
        else:
            zero = pa.scalar(0, arr.type)
            self.values = arr.fill_null(zero).to_numpy(zero_copy_only=False)
            self.has_nan = self.values.dtype.kind == "f" and bool(np.isnan(self.values).any())


class Codes:
    """The rule codes of an in-memory run's documents (``of(run)``); row ``i`` is the signals table's
    row with ``_sample_rank == i``."""

    def __init__(self, run: Any) -> None:
        self.run = run
        self.lock = threading.RLock()
        self.cols: dict[str, Column] = {}
        self.memo = Memo(MEMO)  # tuple(rules) -> codes with near dedup applied
        self.pre_memo = Memo(MEMO)  # tuple(rules without near's value) -> codes without it
        self.count_memo = Memo(MEMO)  # (rules, by) -> funnel counts
        self.hist_memo = Memo(MEMO)  # (rules, (stage, signals, bin columns)) -> histogram counts
        self.inflight: dict[tuple, threading.Event] = {}  # rules -> set when their codes are computed
        self.row_sets: dict[tuple[str, str], np.ndarray] = {}  # (column, value) -> its rows (``rows_of``)
        self.n = int(run.cursor().execute("SELECT count(*) FROM signals").fetchone()[0])
        self._groups: dict[str, tuple] = {}
        self._order: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # signal -> its sorted values and their rows
        self._nd_rows: dict[bool, np.ndarray] = {}
        # the table is stored in _sample_rank order (open_run); a scan keeps insertion order, so a column
        # is read without sorting it again, unless the ranks say otherwise
        rank = to_arrow(run.cursor().sql("SELECT _sample_rank FROM signals")).column(0).to_numpy()
        self.in_order = bool(np.array_equal(rank, np.arange(self.n)))

    # --- columns ------------------------------------------------------------------------------------

    def column(self, name: str) -> Column:
        with self.lock:
            col = self.cols.get(name)
            if col is None:
                order = "" if self.in_order else " ORDER BY _sample_rank"
                t = to_arrow(self.run.cursor().sql(f"SELECT {ident(name)} FROM signals{order}"))
                col = self.cols[name] = Column(t.column(0))
            return col

    def values(self, name: str, rows: np.ndarray | None = None) -> np.ndarray:
        v = self.column(name).values
        return v if rows is None else v[rows]

    def supports(self, rules: list[Rule]) -> bool:
        """Whether every rule evaluates here exactly as in SQL."""
        for x in rules:
            if x.signal not in self.run.columns:
                return False
            if x.op == "first_in_cluster":
                _, keep, keep_signal = x.value
                if (keep == "best_signal" and keep_signal not in self.run.columns) or "nd_shingles" not in self.run.columns:
                    return False
                # NULL content hashes reach it only without exact dedup before it (SQL then has NULL nodes)
                exact_first = any(y.op == "first_in_group" and y.signal == "content_hash" for y in rules[:rules.index(x)])
                if not exact_first and self.column("content_hash").valid is not None:
                    return False
                continue
            if x.op == "first_in_group":
                continue
            col = self.column(x.signal)
            if col.has_nan:
                return False
            if x.by_lang:  # per-row thresholds: numbers by the lang column's dictionary
                if LANG not in self.run.columns or col.dictionary is not None or self.column(LANG).dictionary is None:
                    return False
            if col.dictionary is not None:
                if x.op not in ("in", "==", "!=") or not all(isinstance(v, str) for v in _listed(x)):
                    return False
            elif not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in _listed(x)):
                return False
        return True

    # --- one rule -----------------------------------------------------------------------------------

    def fails(self, rule: Rule, rows: np.ndarray | None = None) -> np.ndarray:
        """Whether each row (or each of ``rows``) fails a per-document rule; a NULL never passes."""
        col = self.column(rule.signal)
        x = col.values if rows is None else col.values[rows]
        if col.dictionary is not None:  # compare the dictionary once, then look each row's entry up
            d = np.array(col.dictionary, dtype=object)
            passes_d = _passes(rule, d) if d.size else np.zeros(0, dtype=bool)
            ok = passes_d[x] if d.size else np.zeros(x.shape, dtype=bool)
        else:
            ok = _passes(rule, x, self._thresholds(rule, rows) if rule.by_lang else rule.value)
        if col.valid is not None:
            ok &= col.valid if rows is None else col.valid[rows]
        return ~ok

    def _thresholds(self, rule: Rule, rows: np.ndarray | None = None) -> np.ndarray:
        """Each row's threshold of a rule with per-language thresholds (NULL lang: the rule's own)."""
        lang = self.column(LANG)
        table = np.array([rule.value_for(d) for d in lang.dictionary] + [rule.value])
        idx = lang.values if rows is None else lang.values[rows]
        if lang.valid is not None:
            idx = np.where(lang.valid if rows is None else lang.valid[rows], idx, len(lang.dictionary))
        return table[idx]

    def moved(self, old: Rule, new: Rule) -> np.ndarray | bool:
        """Rows whose outcome of this rule differs between two thresholds; False when none can (the
        same rule), True when it is not a threshold move (every row may differ)."""
        if (old.stage, old.signal, old.op, old.reason) != (new.stage, new.signal, new.op, new.reason):
            return True
        if (old.value == new.value and old.by_lang == new.by_lang) or old.op in ("first_in_group", "first_in_cluster"):
            return False
        if old.by_lang or new.by_lang:  # another threshold per language: compare the two outcomes row by row
            return self.fails(old) != self.fails(new)
        if old.op not in (">=", "<=", "==", "!="):
            return True
        col = self.column(old.signal)
        if old.op in (">=", "<=") and col.dictionary is None and col.values.dtype.kind in "iuf":
            # the rows between the two thresholds, from the column's sorted order: no pass over every row
            values, rows = self._sorted(old.signal)
            lo, hi = sorted((old.value, new.value))
            side = "left" if old.op == ">=" else "right"  # >=: lo <= x < hi differ; <=: lo < x <= hi
            i0, i1 = np.searchsorted(values, [lo, hi], side=side)
            mask = np.zeros(self.n, dtype=bool)
            mask[rows[i0:i1]] = True
            return mask
        return self.fails(old) != self.fails(new)

    def _sorted(self, signal: str) -> tuple[np.ndarray, np.ndarray]:
        """(the non-NULL values of a column in ascending order, their rows); made on first use."""
        with self.lock:
            if signal not in self._order:
                col = self.column(signal)
                rows = np.arange(self.n) if col.valid is None else np.flatnonzero(col.valid)
                v = col.values[rows]
                o = np.argsort(v, kind="stable")
                self._order[signal] = (v[o], rows[o])
            return self._order[signal]

    def prepare(self, signals: list[str]) -> None:
        """Sort the threshold signals among ``signals`` now (what ``moved`` reads), so that the first move of
        each is as fast as the next ones (an argsort of the column: ~0.1 s at 1M documents)."""
        for s in signals:
            if s in self.run.columns:
                col = self.column(s)
                if col.dictionary is None and col.values.dtype.kind in "iuf":
                    self._sorted(s)

    # --- every rule ---------------------------------------------------------------------------------

    def _groups_of(self, signal: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(group id per row, -1 for NULL; rows of groups with several members ordered by group then
        doc_id; the start of each such group in that order, with a last entry for the end; per group
        id, its index among those groups, -1 for a group of one)."""
        with self.lock:
            if signal not in self._groups:
                col = self.column(signal)
                _, gid = np.unique(col.values, return_inverse=True)
                gid = gid.astype(np.int64)
                if col.valid is not None:
                    gid[~col.valid] = -1
                sizes = np.bincount(gid[gid >= 0], minlength=int(gid.max()) + 1 if gid.size else 0)
                multi = np.flatnonzero((gid >= 0) & (sizes[np.maximum(gid, 0)] > 1))
                multi = multi[np.lexsort((self.values("doc_id", multi), gid[multi]))]
                g = gid[multi]
                starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]]) if g.size else np.zeros(0, dtype=np.int64)
                slot = np.full(sizes.size, -1, dtype=np.int64)
                slot[g[starts]] = np.arange(starts.size)
                self._groups[signal] = (gid, multi, np.r_[starts, g.size], slot)
            return self._groups[signal]

    def _evaluate(self, rules: list[Rule], rows: np.ndarray | None = None, start: int = 0) -> np.ndarray:
        """Codes without the near-dedup rule of every row, or of ``rows``, which pass the rules before
        ``start`` and hold every member of their exact-duplicate groups that is alive at it."""
        m = self.n if rows is None else rows.size
        codes = np.full(m, KEPT, dtype=np.int16)
        for i, rule in enumerate(rules):
            if i < start or rule.op == "first_in_cluster":
                continue
            alive = codes == KEPT
            if rule.op == "first_in_group":
                gid, multi, _, _ = self._groups_of(rule.signal)
                g = gid if rows is None else gid[rows]
                drop = alive & (g < 0)
                if rows is None:  # the precomputed order of the groups with several members
                    cand = multi[alive[multi]]
                    gc = g[cand]
                else:
                    sub = np.flatnonzero(alive & (g >= 0))
                    sub = sub[np.lexsort((self.values("doc_id", rows[sub]), g[sub]))]
                    cand, gc = sub, g[sub]
                later = np.r_[False, gc[1:] == gc[:-1]] if gc.size else np.zeros(0, dtype=bool)
                drop[cand[later]] = True
            else:
                drop = alive & self.fails(rule, rows)
            codes[drop] = i
        return codes

    def _pre(self, rules: list[Rule]) -> np.ndarray:
        """Codes without the near-dedup rule (remembered; incremental from a remembered config)."""
        key = tuple(_without_value(rules))
        with self.lock:
            if (hit := self.pre_memo.get(key)) is not None:
                return hit
            known = [(k, v) for k, v in self.pre_memo.recent() if len(k) == len(key)]
        out = None
        for old, old_codes in known[:4]:
            masks = [self.moved(a, b) for a, b in zip(old, key)]
            if any(x is True for x in masks):
                continue
            first = next((i for i, x in enumerate(masks) if x is not False), len(masks))
            r_mask = np.zeros(self.n, dtype=bool)
            for x in masks:
                if x is not False:
                    r_mask |= x
            for x in key[first:]:  # every member of a touched exact-duplicate group after the first move
                if x.op == "first_in_group":
                    gid, multi, starts, slot = self._groups_of(x.signal)
                    g = gid[np.flatnonzero(r_mask)]
                    which = np.unique(slot[g[g >= 0]])
                    which = which[which >= 0]
                    if which.size:
                        lens = starts[which + 1] - starts[which]
                        pos = np.repeat(starts[which] - np.r_[0, np.cumsum(lens)[:-1]], lens) + np.arange(lens.sum())
                        r_mask[multi[pos]] = True
            rows = np.flatnonzero(r_mask)
            if rows.size > INCREMENTAL_SHARE * self.n:
                continue
            # a row dropped before the first moved rule keeps its code: the rules before it are the same
            c = old_codes[rows]
            rows = rows[(c == KEPT) | (c >= first)]
            out = old_codes.copy()
            out[rows] = self._evaluate(list(key), rows, first)
            break
        if out is None:
            out = self._evaluate(list(key))
        out.setflags(write=False)
        with self.lock:
            self.pre_memo.put(key, out)
        return out

    def codes(self, rules: list[Rule]) -> np.ndarray | None:
        """Each row's code under ``rules`` (near dedup applied); None when SQL must answer. Computed once
        when several threads ask at the same time (a move's funnel and histograms): the others wait."""
        key = tuple(rules)
        with self.lock:
            if (hit := self.memo.get(key)) is not None:
                return hit
            wait = self.inflight.get(key)
            if wait is None:
                self.inflight[key] = threading.Event()
        if wait is not None:
            wait.wait()
            with self.lock:
                if (hit := self.memo.get(key)) is not None:
                    return hit
            return self.codes(rules)  # the other thread found SQL must answer (or failed): ask again
        try:
            return self._codes(rules, key)
        finally:
            with self.lock:
                self.inflight.pop(key).set()

    def _codes(self, rules: list[Rule], key: tuple) -> np.ndarray | None:
        if not self.supports(rules):
            return None
        pre = self._pre(rules)
        k = next((i for i, x in enumerate(rules) if x.op == "first_in_cluster"), None)
        out = pre
        if k is not None:
            drop = self._near_drops(rules, k, pre)
            if drop.size:
                out = pre.copy()
                out[drop] = k
                out.setflags(write=False)
        with self.lock:
            self.memo.put(key, out)
        return out

    def _near_drops(self, rules: list[Rule], k: int, pre: np.ndarray) -> np.ndarray:
        """Rows the near-dedup rule drops among the documents alive before it (as ``near_drops``)."""
        threshold, keep, keep_signal = rules[k].value
        exact_first = any(x.op == "first_in_group" and x.signal == "content_hash" for x in rules[:k])
        u, v, j = candidate_edges(self.run)
        if exact_first and not u.size:
            return np.zeros(0, dtype=np.int64)
        with self.lock:
            if exact_first not in self._nd_rows:
                nodes = self.values("content_hash")
                ok = np.isin(nodes, np.union1d(u, v))
                if self.column("content_hash").valid is not None:
                    ok &= self.column("content_hash").valid
                if not exact_first:
                    gid, multi, _, _ = self._groups_of("content_hash")
                    ok[multi] = True
                self._nd_rows[exact_first] = np.flatnonzero(ok)
            nd = self._nd_rows[exact_first]
        c = pre[nd]
        shingles = self.column("nd_shingles")
        alive = ((c == KEPT) | (c > k)) & (self.values("nd_shingles", nd) > 0)
        if shingles.valid is not None:
            alive &= shingles.valid[nd]
        rows = nd[alive]
        nbytes = self.values("bytes", rows).astype(np.float64)
        if self.column("bytes").valid is not None:
            nbytes[~self.column("bytes").valid[rows]] = np.nan
        signal = None
        if keep == "best_signal":
            signal = self.values(keep_signal, rows).astype(np.float64)
            if self.column(keep_signal).valid is not None:
                signal[~self.column(keep_signal).valid[rows]] = np.nan
        ranks = dedup.rank_of(keep, nbytes, signal if signal is not None else np.full(rows.size, np.nan))
        doc_ids = self.values("doc_id", rows)
        keepers = dedup.cluster_keepers(doc_ids, self.values("content_hash", rows), ranks, u, v, j, threshold)
        return rows[keepers != doc_ids]

    # --- counts over codes --------------------------------------------------------------------------

    def weights(self) -> tuple[np.ndarray, np.ndarray | None]:
        """Each row's bytes and tokens (None without token counts), NULL as 0."""
        tok = self.values("n_tokens") if "n_tokens" in self.run.columns else None
        return self.values("bytes"), tok

    def _nearest(self, memo: Memo, rules: list[Rule], extra: Any) -> tuple[np.ndarray, Any] | None:
        """(codes, remembered answer) of the latest config in ``memo`` (keyed ``(rules, extra)``) with the
        same rules as ``rules`` at other thresholds, whose codes are still remembered."""
        shape = [(x.stage, x.signal, x.op, x.reason) for x in rules]
        with self.lock:
            for (old, ex), answer in memo.recent():
                if ex == extra and [(x.stage, x.signal, x.op, x.reason) for x in old] == shape and old in self.memo:
                    return self.memo.get(old), answer
        return None

    def funnel_counts(self, rules: list[Rule], by: str | None) -> dict | None:
        """(group, code or None) -> [docs, bytes, tokens] (``lab.query.code_counts`` with near dedup
        applied); None when SQL must answer. From a remembered config: only the rows whose code
        differs are counted again."""
        codes = self.codes(rules)
        if codes is None:
            return None
        key = (tuple(rules), by)
        with self.lock:
            if (hit := self.count_memo.get(key)) is not None:
                return hit
        near = self._nearest(self.count_memo, rules, by)
        if near is None:
            out = self._counts(codes, by, len(rules))
        else:
            old_codes, old = near
            rows = np.flatnonzero(old_codes != codes)
            out = shift_counts(old, self._counts(old_codes, by, len(rules), rows), self._counts(codes, by, len(rules), rows))
        with self.lock:
            self.count_memo.put(key, out)
        return out

    def _counts(self, codes: np.ndarray, by: str | None, n_rules: int, rows: np.ndarray | None = None) -> dict:
        nbytes, tok = self.weights()
        width = n_rules + 1
        key = (codes if rows is None else codes[rows]).astype(np.int64) + 1
        names: list = [None]
        if by is not None:
            col = self.column(by)
            g = (col.values if rows is None else col.values[rows]).astype(np.int64) + 1
            if col.valid is not None:
                g = np.where(col.valid if rows is None else col.valid[rows], g, 0)
            names = [None, *col.dictionary] if col.dictionary is not None else [None]
            key = g * width + key
        size = len(names) * width
        pick = (lambda a: a) if rows is None else (lambda a: a[rows])
        docs = np.bincount(key, minlength=size)
        b = np.bincount(key, weights=pick(nbytes), minlength=size)
        t = np.bincount(key, weights=pick(tok), minlength=size) if tok is not None else np.zeros(size)
        out = {}
        for flat in np.flatnonzero(docs):
            grp, code = divmod(int(flat), width)
            out[(names[grp], None if code == 0 else code - 1)] = [int(docs[flat]), int(b[flat]), int(t[flat])]
        return out

    def rows_of(self, name: str, value: str) -> np.ndarray:
        """The rows whose string column ``name`` holds ``value`` (sorted; remembered per value)."""
        key = (name, value)
        with self.lock:
            rows = self.row_sets.get(key)
        if rows is None:
            col = self.column(name)
            d = col.dictionary or []
            if value not in d:
                rows = np.zeros(0, dtype=np.int64)
            else:
                hit = col.values == d.index(value)
                rows = np.flatnonzero(hit if col.valid is None else hit & col.valid)
            with self.lock:
                self.row_sets[key] = rows
        return rows

    def histogram_counts(self, rules: list[Rule], stage: str | None, signals: list[str], bin_cols: list[str],
                         mine: list[list[Rule]], lang: str | None = None) -> dict | None:
        """``lab.query.distribution._aggregate``'s answer — (signal index, bin or None, dropped by the stage,
        dropped by another rule than the signal's own ``mine``) -> [docs, bytes, tokens] over the
        documents reaching ``stage`` (``lang``: of that language only) — from the codes; None when SQL
        must answer. From a remembered config: only the rows whose code or own-rule outcome differs are
        counted again (one language's rows are counted whole: they are a share of the run)."""
        codes = self.codes(rules)
        if codes is None:
            return None
        span = [i for i, x in enumerate(rules) if x.stage == stage]
        if lang is not None:
            return self._hist(codes, span, signals, bin_cols, mine, self.rows_of(LANG, lang))
        extra = (stage, tuple(signals), tuple(bin_cols))
        key = (tuple(rules), extra)
        with self.lock:
            if (hit := self.hist_memo.get(key)) is not None:
                return hit
        near = self._nearest(self.hist_memo, rules, extra)
        if near is None:
            out = self._hist(codes, span, signals, bin_cols, mine)
        else:
            old_codes, old = near
            old_rules = next(k for (k, ex), _ in self.hist_memo.recent() if ex == extra and self.memo.get(k) is old_codes)
            own = np.zeros(self.n, dtype=bool)
            for a, b in zip(old_rules, rules):
                if any(b in m for m in mine):
                    moved = self.moved(a, b)
                    if moved is not False:
                        own |= moved
            rows = np.flatnonzero((old_codes != codes) | own)
            old_mine = [[old_rules[rules.index(x)] for x in m] for m in mine]
            out = shift_counts(old, self._hist(old_codes, span, signals, bin_cols, old_mine, rows),
                         self._hist(codes, span, signals, bin_cols, mine, rows))
        with self.lock:
            self.hist_memo.put(key, out)
        return out

    def _hist(self, codes: np.ndarray, span: list[int], signals: list[str], bin_cols: list[str],
              mine: list[list[Rule]], rows: np.ndarray | None = None) -> dict:
        nbytes, tok = self.weights()
        c = codes if rows is None else codes[rows]
        if span:
            first, last = min(span), max(span)
            reach = np.flatnonzero((c == KEPT) | (c >= first))
            dropped = (c[reach] >= first) & (c[reach] <= last)
        else:
            reach = np.arange(c.size)
            dropped = np.zeros(c.size, dtype=bool)
        at = reach if rows is None else rows[reach]
        b, t = nbytes[at], tok[at] if tok is not None else None
        out = {}
        for i, (s, col) in enumerate(zip(signals, bin_cols)):
            fails = np.zeros(at.size, dtype=bool)
            for x in mine[i]:
                fails |= self.fails(x, at)
            other = dropped & ~fails
            binned = self.column(col)
            nb = int(binned.values.max()) + 2 if binned.values.size else 1
            bin_ = binned.values[at].astype(np.int64) + 1
            if binned.valid is not None:
                bin_ = np.where(binned.valid[at], bin_, 0)
            k = (bin_ * 2 + dropped) * 2 + other
            size = nb * 4
            docs = np.bincount(k, minlength=size)
            by = np.bincount(k, weights=b, minlength=size)
            bt = np.bincount(k, weights=t, minlength=size) if t is not None else np.zeros(size)
            for flat in np.flatnonzero(docs):
                bb, rest = divmod(int(flat), 4)
                out[(i, None if bb == 0 else bb - 1, bool(rest // 2), bool(rest % 2))] = \
                    [int(docs[flat]), int(by[flat]), int(bt[flat])]
        return out

    def changed(self, before: list[Rule], after: list[Rule]) -> tuple[np.ndarray, list, list] | None:
        """The rows whose drop reason differs between two rule lists, with each of those rows' reasons
        (None: kept) under both; None when SQL must answer."""
        a, b = self.codes(before), self.codes(after)
        if a is None or b is None:
            return None
        if [x.drop_reason for x in before] == [x.drop_reason for x in after]:  # a threshold move: same codes
            rows = np.flatnonzero(a != b)
            name = lambda rules, k: None if k == KEPT else rules[k].drop_reason  # noqa: E731
            return (rows, [name(before, k) for k in a[rows].tolist()], [name(after, k) for k in b[rows].tolist()])
        names = list(dict.fromkeys(x.drop_reason for x in (*before, *after)))
        ids = {n: i for i, n in enumerate(names)}
        ra = np.array([ids[x.drop_reason] for x in before] + [-1], dtype=np.int64)[a]  # code -1 -> the last: -1
        rb = np.array([ids[x.drop_reason] for x in after] + [-1], dtype=np.int64)[b]
        rows = np.flatnonzero(ra != rb)
        name = lambda i: None if i < 0 else names[i]  # noqa: E731
        return rows, [name(i) for i in ra[rows].tolist()], [name(i) for i in rb[rows].tolist()]

    def table(self, rows: np.ndarray, names: list[str]) -> pa.Table:
        """The given rows' columns as Arrow, NULLs as they are in the signals table."""
        arrays = []
        for name in names:
            col = self.column(name)
            mask = None if col.valid is None else ~col.valid[rows]
            if col.dictionary is not None:
                dic = pa.array(col.dictionary, pa.string())
                arrays.append(pa.DictionaryArray.from_arrays(pa.array(col.values[rows], pa.int32(), mask=mask), dic)
                              .cast(pa.string()))
            else:
                arrays.append(pa.array(col.values[rows], mask=mask))
        return pa.table(arrays, names=names)


def shift_counts(counts: dict, before: dict, after: dict) -> dict:
    """Remembered counts (key -> [docs, bytes, tokens]) with a subset's counts under the old rules or codes
    (``before``) taken out and its counts under the new ones (``after``) put in; empty keys dropped.

    >>> shift_counts({"a": [3, 30, 9]}, {"a": [1, 10, 3]}, {"b": [1, 10, 3]})
    {'a': [2, 20, 6], 'b': [1, 10, 3]}
    """
    out = {k: list(v) for k, v in counts.items()}
    for sign, part in ((-1, before), (1, after)):
        for k, v in part.items():
            acc = out.setdefault(k, [0, 0, 0])
            for i in range(3):
                acc[i] += sign * v[i]
    return {k: v for k, v in out.items() if v[0]}


def _listed(rule: Rule) -> tuple:
    return tuple(rule.value) if rule.op == "in" else rule.values


def _passes(rule: Rule, x: np.ndarray, v: Any = None) -> np.ndarray:
    """Whether each value passes ``rule`` at threshold ``v`` (a number, or one per value)."""
    v = rule.value if v is None else v
    if rule.op == ">=":
        return x >= v
    if rule.op == "<=":
        return x <= v
    if rule.op == "==":
        return x == v
    if rule.op == "!=":
        return x != v
    if rule.op == "in":
        return np.isin(x, np.array(list(v), dtype=object if x.dtype == object else None))
    raise ValueError(f"{rule.drop_reason}: {rule.op} is a group rule, not a predicate")


def _without_value(rules: list[Rule]) -> list[Rule]:
    return [Rule(x.stage, x.signal, x.op, None, x.reason) if x.op == "first_in_cluster" else x for x in rules]


_codes_lock = threading.Lock()


def of(run: Any) -> Codes | None:
    """The run's ``Codes`` (made on first use), or None for a run read from Parquet (not in memory)."""
    if run.memo is None or not ENABLED:
        return None
    with _codes_lock:
        if run.codes is None:
            run.codes = Codes(run)
        return run.codes
