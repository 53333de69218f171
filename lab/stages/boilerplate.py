"""boilerplate: the share of a document's characters in lines its site repeats in many documents.

Navigation rows that extraction keeps ("Prev Up Home Next", a repeated title, a footer) make FineWeb's
duplicated-line rule drop good pages; here they are counted per *site* (the URL's host; without a URL,
the source file): a line is boilerplate when at least ``min_docs`` documents of the site contain it.
Lines are normalized first (``normalize_line``). Each partition's ``Collector`` writes a count table and
line records; ``lab.linecount`` merges the tables and computes the corpus-level signal ``bp_line_frac``
(the share of characters in such lines), which ``lab.query.open_run`` joins on. ``bp_lines`` counts a
document's non-empty lines. Rule: ``bp_line_frac <= max_line_frac`` (the default 1.0 makes no rule; a
rule needs explore mode). ``remove_lines`` drops those lines from kept texts before tokenizing.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from lab.fields import check, knob
from lab.select.rules import Rule
from lab.stages.url import host_of

NAME = "boilerplate"
VERSION = 2  # bump when signals() or the line records give other values (2: a scrubbed document's lines as stored)
SOURCE = "corpus-lab (per-site line counts; FineWeb's duplicated-line rule measured across a site's pages)"
_WS = re.compile(r"\s+")
_DIGIT = re.compile(r"\d")


@dataclass(frozen=True)
class Config:
    enabled: bool = knob(True, unit="on/off",
                         help="On: a kept document has at most max_line_frac of its characters in lines its site "
                              "repeats; off: every document passes.")
    max_line_frac: float = knob(1.0, unit="fraction of characters",
                                help="A kept document has at most this share of its characters in lines seen in at "
                                     "least min_docs documents of its site (1.0: no rule).", signal="bp_line_frac")
    min_docs: int = 3  # documents of a site a line must appear in to count as boilerplate (k; >= 2)
    remove_lines: bool = False  # drop boilerplate lines from the kept documents' text before tokenizing

    def __post_init__(self) -> None:
        check("max_line_frac", self.max_line_frac, 0.0 <= self.max_line_frac <= 1.0, "a fraction in 0..1")
        check("min_docs", self.min_docs, isinstance(self.min_docs, int) and self.min_docs >= 2,
              "a whole number of documents >= 2 (a line in one document is not repeated)")

    def merge_params(self) -> dict:
        """What the corpus-level signal depends on besides the line records (not part of the signals hash:
        changing ``min_docs`` recomputes the signal from the stored records, no document is annotated again)."""
        return {"min_docs": self.min_docs}


SIGNALS = {"bp_lines": pa.int32(), "bp_line_frac": pa.float64()}
CORPUS_SIGNALS = ("bp_line_frac",)  # filled after the merge (lab.linecount), NULL in signals/


def normalize_line(line: str) -> str:
    """The form under which two lines count as the same line.

    >>> normalize_line("  Page 3 of 12 \\t| NEXT ")
    'page 0 of 00 | next'
    """
    return _DIGIT.sub("0", _WS.sub(" ", unicodedata.normalize("NFKC", line)).strip().lower())


def line_hash(normalized: str) -> int:
    """A 64-bit hash of a normalized line (int64).

    >>> line_hash("home") == line_hash(normalize_line(" HOME "))
    True
    """
    digest = hashlib.blake2b(normalized.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "little", signed=True)


def site_of(url: str | None, source: str) -> str:
    """The site a document's lines are counted in: its URL's host, else its source.

    >>> site_of("https://www.example.com/a", "x.jsonl"), site_of(None, "x.jsonl")
    ('example.com', 'x.jsonl')
    """
    return host_of(url or "") or source


def lines(text: str) -> list[tuple[int, int]]:
    """(line_hash, characters of the stripped line) of every line non-empty after normalization, in order.

    >>> [c for _, c in lines("Home | Next\\n\\n  Body text.  \\n")]
    [11, 10]
    """
    out = []
    for line in text.splitlines():
        n = normalize_line(line)
        if n:
            out.append((line_hash(n), len(line.strip())))
    return out


def line_frac(records: list[tuple[int, int]], total_chars: int, boiler: set[int] | frozenset[int]) -> float:
    """The share of ``total_chars`` in the lines whose hash is in ``boiler`` (0.0 without characters).

    >>> line_frac([(1, 10), (2, 30)], 40, {1})
    0.25
    """
    if total_chars <= 0:
        return 0.0
    return sum(c for h, c in records if h in boiler) / total_chars


def signals(text: str) -> dict:
    """Without a document there is no site: the line count only (the fraction comes from the merge)."""
    return {"bp_lines": len(lines(text))}


def rules(cfg: Config) -> list[Rule]:
    if cfg.max_line_frac >= 1.0:
        return []  # every fraction is <= 1: a rule would drop nothing and need the merge
    return [Rule(NAME, "bp_line_frac", "<=", cfg.max_line_frac, "boilerplate_lines")]


def remove_boilerplate(text: str, boiler: set[int] | frozenset[int]) -> str:
    """``text`` without the lines whose normalized hash is in ``boiler`` (other lines kept verbatim).

    >>> remove_boilerplate("Home | Next\\nBody.\\nhome  |  next", {line_hash("home | next")})
    'Body.\\n'
    """
    kept = [line for line in text.splitlines(keepends=True)
            if not (n := normalize_line(line)) or line_hash(n) not in boiler]
    return "".join(kept)


LINE_SCHEMA = pa.schema([("doc_id", pa.int64()), ("site", pa.string()), ("line_hash", pa.int64()),
                         ("chars", pa.int32())])
COUNT_SCHEMA = pa.schema([("site", pa.string()), ("line_hash", pa.int64()), ("docs", pa.int64())])


def site_hash(site: str) -> int:
    """A 64-bit hash of a site name (uint64), mixed into the shuffle bucket of its lines."""
    return int.from_bytes(hashlib.blake2b(site.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little")


def count_table(records: pa.Table) -> pa.Table:
    """(site, line_hash, docs) of line records: per (site, line) the number of distinct documents, sorted.

    >>> t = pa.table({"doc_id": [1, 1, 2], "site": ["a", "a", "a"], "line_hash": [7, 7, 7], "chars": [3, 3, 3]})
    >>> count_table(t).to_pylist()
    [{'site': 'a', 'line_hash': 7, 'docs': 2}]
    """
    distinct = records.group_by(["site", "line_hash", "doc_id"]).aggregate([])
    g = distinct.group_by(["site", "line_hash"]).aggregate([("doc_id", "count")])
    out = pa.table({"site": g["site"], "line_hash": g["line_hash"], "docs": g["doc_id_count"]})
    return out.cast(COUNT_SCHEMA).sort_by([("site", "ascending"), ("line_hash", "ascending")])


def buckets_of(counts: pa.Table, n_buckets: int) -> np.ndarray:
    """The shuffle bucket of each (site, line_hash) row (``lab.dedup.shuffle.bucket_of``'s layout)."""
    from lab.dedup.shuffle import bucket_of

    sites = counts.column("site").to_pylist()
    known: dict[str, int] = {}
    sh = np.fromiter((known.setdefault(s, site_hash(s)) for s in sites), dtype=np.uint64, count=len(sites))
    lh = counts.column("line_hash").to_numpy().astype(np.int64).view(np.uint64)
    return bucket_of(lh ^ sh, 0, n_buckets)


class Collector:
    """Per partition: each document's line records (site, hash, characters), then ``write`` the
    partition's count table split into shuffle buckets and its line records."""

    def __init__(self, cfg: Config, n_buckets: int = 1, run_dir: Any = None) -> None:
        self.cfg, self.n_buckets = cfg, n_buckets
        self.rows: dict[int, tuple[str, list[tuple[int, int]]]] = {}  # row -> (site, line records)

    def signals(self, i: int, text: str, doc: Any) -> dict:
        recs = lines(text)
        self.rows[i] = (site_of(getattr(doc, "url", None), getattr(doc, "source", "") or ""), recs)
        return {"bp_lines": len(recs)}

    def stored(self, i: int, text: str) -> None:
        """The text stored for row ``i`` differs from the one annotated (PII scrubbed): count its lines as
        stored, so a site's repeated line holding an address ("Contact: webmaster@...") is counted and
        removed under one hash (``remove_lines`` reads the stored text)."""
        if i in self.rows:
            self.rows[i] = (self.rows[i][0], lines(text))

    def records(self, doc_ids: np.ndarray) -> pa.Table:
        """The partition's line records, documents in row order (``doc_ids``: the signals' doc_id column)."""
        ids, sites, hashes, chars = [], [], [], []
        for i in sorted(self.rows):
            site, recs = self.rows[i]
            ids += [int(doc_ids[i])] * len(recs)
            sites += [site] * len(recs)
            hashes += [h for h, _ in recs]
            chars += [c for _, c in recs]
        return pa.table({"doc_id": pa.array(ids, pa.int64()), "site": pa.array(sites, pa.string()),
                         "line_hash": pa.array(hashes, pa.int64()), "chars": pa.array(chars, pa.int32())},
                        schema=LINE_SCHEMA)

    def write(self, layout: Any, key: str, signals: pa.Table) -> None:
        from lab.io.writers import write_parquet, write_parquet_groups

        recs = self.records(signals.column("doc_id").to_numpy())
        counts = count_table(recs)
        bucket = buckets_of(counts, self.n_buckets)
        order = np.argsort(bucket, kind="stable")
        counts, bucket = counts.take(order), bucket[order]
        bounds = np.searchsorted(bucket, np.arange(self.n_buckets + 1))
        groups = {b: counts.slice(bounds[b], bounds[b + 1] - bounds[b]) for b in range(self.n_buckets)
                  if bounds[b + 1] > bounds[b]}
        layout.line_counts(key).parent.mkdir(parents=True, exist_ok=True)
        layout.line_records(key).parent.mkdir(parents=True, exist_ok=True)
        write_parquet_groups(groups, layout.line_counts(key), COUNT_SCHEMA)
        write_parquet(recs, layout.line_records(key))
