"""near_dedup: MinHash signatures of word 5-gram shingles; one document kept per near-duplicate cluster.

Signal side: ``nd_shingles`` (distinct shingles; 0: no words, never a near-duplicate) and, per partition
(``Collector``), the MinHash signatures (``dedup/signatures/part-KEY.npy``), the shingle sets with
``exact_jaccard``, and the LSH band records split into shuffle buckets (``dedup/bands/``): the map side
of ``lab.dedup.shuffle``. How words and signatures are computed: ``lab.dedup.signature``. Decision side
(``lab.dedup`` builds edges and clusters, ``lab.query`` applies the rule): a group is a connected
component of the candidate edges with Jaccard >= ``threshold`` among the documents that passed every
earlier stage; one member is kept, chosen by ``keep``. Only pairs LSH makes candidates get an edge, so
``bands`` x ``rows`` bound the recall (``lab.dedup.recall``): ``recall_line`` states it,
``recall_warning`` warns below 0.7, and ``min_threshold`` derives bands x rows that reach 0.95 there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from lab.dedup.forest import GRID
from lab.dedup.keep import KEEP
from lab.dedup.recall import TARGET_RECALL, WARN_BELOW, bands_rows, lowest_threshold, recall_at
from lab.dedup.shuffle import band_groups, write_bands
from lab.dedup.signature import signature
from lab.fields import check, knob
from lab.io.run import RunLayout
from lab.io.writers import write_npy
from lab.select.rules import Near, Rule
from lab.text import segment

NAME = "near_dedup"
VERSION = 2  # bump when signals() (or what it reads: word lists, models) gives other values
# 2: shingles of the document's words (ICU words for unspaced scripts; 1: space-separated for every language)
SOURCE = "MinHash LSH (FineWeb/datatrove: word 5-grams, 14 bands x 8 rows)"
@dataclass(frozen=True)
class Config:
    enabled: bool = knob(True, unit="on/off",
                         help="On: a kept document is the one member kept of its group of near-duplicate survivors; "
                              "off: near-duplicates are all kept.")
    threshold: float = knob(0.8, unit="Jaccard",
                            help="Survivors linked by a word 5-gram Jaccard at or above this form a group, of which "
                                 "one member is kept; only pairs that LSH makes candidates are linked, so the expected "
                                 "pair recall at this threshold (set by bands x rows) is shown with it, with a warning "
                                 "below 0.7 (stages.near_dedup.min_threshold raises it).",
                            source="MinHash LSH candidates as FineWeb/datatrove make them; the 0.8 cut on their "
                                   "Jaccard is corpus-lab's", choices=GRID)
    keep: str = knob("lowest_id", unit="policy",
                     help="The member kept of each near-duplicate group: the lowest doc_id, the longest (bytes), or "
                          "the highest keep_signal.",
                     source="corpus-lab (lowest_id: deterministic)", choices=KEEP)
    keep_signal: str = "fw_line_punct_ratio"  # best_signal: the numeric signal whose highest value wins (checked by lab.config)
    # signature parameters: changing any of these recomputes signatures (they are part of the signals hash)
    ngram: int = 5  # words per shingle
    bands: int = 14  # LSH bands
    rows: int = 8  # values per band; num_perm = bands * rows
    # the lowest threshold to be used (a Jaccard in 0.50..0.95), or null: bands and rows as written; set, bands x rows
    # as written is a budget of permutations within which bands and rows are derived: the most rows per band, then
    # the fewest bands, whose expected pair recall at min_threshold is >= 0.95 (lab.dedup.recall.bands_rows)
    min_threshold: float | None = None
    seed: int = 1  # seed of datasketch's permutations
    # store shingle sets (about half the size of the text) and give every candidate pair its exact
    # Jaccard; false: the signature's estimate (saves the space, costs precision near the threshold)
    exact_jaccard: bool = True
    max_group_pairs: int = 100  # a band bucket with more members links them in a chain (all pairs otherwise)
    shuffle_buckets: int = 0  # LSH shuffle: reduce tasks; 0 = one per partition (memory per task bounded)

    def __post_init__(self) -> None:
        check("threshold", self.threshold, any(abs(self.threshold - g) < 1e-9 for g in GRID),
              "one of the precomputed grid " + ", ".join(f"{g:.2f}" for g in GRID))
        check("keep", self.keep, self.keep in KEEP, "one of " + ", ".join(KEEP))
        check("ngram", self.ngram, 1 <= self.ngram <= 32, "a whole number of words in 1..32")
        check("bands", self.bands, 1 <= self.bands <= 255, "1..255")
        check("rows", self.rows, 1 <= self.rows <= 64, "1..64")
        if self.min_threshold is not None:
            self._derive_bands_rows()
        check("max_group_pairs", self.max_group_pairs, self.max_group_pairs >= 2, ">= 2")
        check("shuffle_buckets", self.shuffle_buckets, 0 <= self.shuffle_buckets <= 65535,
              "0 (one per partition) or a count in 1..65535")

    def _derive_bands_rows(self) -> None:
        """bands and rows for ``min_threshold`` within the budget of bands x rows as written (a derived pair
        derives itself again: a saved config loads unchanged)."""
        t = self.min_threshold
        lo, hi = GRID[0], GRID[-1]
        check("min_threshold", t, lo <= t <= hi, f"a Jaccard in {lo:.2f}..{hi:.2f} (the thresholds the funnel can "
              "use); set one, or remove the key to keep bands and rows as written")
        layout = bands_rows(t, self.num_perm)
        check("min_threshold", t, layout is not None,
              f"reachable with an expected pair recall >= {TARGET_RECALL} by at most bands x rows = {self.num_perm} "
              "permutations; raise bands or rows (the budget), or raise min_threshold")
        object.__setattr__(self, "bands", layout[0])  # frozen: the derived pair is what the run uses and saves
        object.__setattr__(self, "rows", layout[1])

    @property
    def num_perm(self) -> int:
        return self.bands * self.rows

    def signature_params(self) -> dict:
        """What signatures and the shuffle's files depend on (part of the run's signals hash); ``min_threshold``
        only when set, so that the runs made before it existed keep their signals."""
        derived = {} if self.min_threshold is None else {"min_threshold": self.min_threshold}
        return {"ngram": self.ngram, "bands": self.bands, "rows": self.rows, "seed": self.seed,
                "exact_jaccard": self.exact_jaccard, "shuffle_buckets": self.shuffle_buckets, **derived}


def signal_params(cfg: Config) -> dict:
    """What the signals and the signatures depend on besides ``VERSION``: the signature parameters, the
    language model and the segmenter (the words of unspaced scripts)."""
    return {**cfg.signature_params(), **segment.signal_params()}


def recall(cfg: Config, threshold: float | None = None) -> float:
    """The expected pair recall at ``threshold`` (default: the config's) with the config's bands x rows.

    >>> round(recall(Config()), 3), round(recall(Config(), 0.5), 3)
    (0.924, 0.053)
    """
    return recall_at(cfg.threshold if threshold is None else threshold, cfg.bands, cfg.rows)


def recall_line(cfg: Config, threshold: float | None = None) -> str:
    """The expected pair recall at ``threshold`` (default: the config's), as the CLI and the dashboard say it.

    >>> recall_line(Config())
    'near_dedup: expected pair recall 0.92 at Jaccard 0.80 (14 bands x 8 rows; a pair exactly at the threshold)'
    """
    t = cfg.threshold if threshold is None else threshold
    return (f"near_dedup: expected pair recall {recall(cfg, t):.2f} at Jaccard {t:.2f} "
            f"({cfg.bands} bands x {cfg.rows} rows; a pair exactly at the threshold)")


def recall_warning(cfg: Config, threshold: float | None = None) -> str:
    """What to do when the expected pair recall at ``threshold`` (default: the config's) is below 0.7; "" otherwise.

    >>> recall_warning(Config())
    ''
    >>> recall_warning(Config(threshold=0.6))  # doctest: +NORMALIZE_WHITESPACE
    'near_dedup: expected pair recall 0.21 at Jaccard 0.60 is below 0.7: 14 bands x 8 rows make only 21% of the
    pairs at that Jaccard candidates, the others get no edge; use a threshold of 0.75 or more, or set
    stages.near_dedup.min_threshold: 0.6 and run again (signatures are recomputed)'
    """
    t = cfg.threshold if threshold is None else threshold
    r = recall(cfg, t)
    if r >= WARN_BELOW:
        return ""
    safe = lowest_threshold(GRID, cfg.bands, cfg.rows)
    raise_it = f"use a threshold of {safe:.2f} or more, or " if safe is not None else ""
    return (f"near_dedup: expected pair recall {r:.2f} at Jaccard {t:.2f} is below {WARN_BELOW}: {cfg.bands} bands x "
            f"{cfg.rows} rows make only {r:.0%} of the pairs at that Jaccard candidates, the others get no edge; "
            f"{raise_it}set stages.near_dedup.min_threshold: {t:g} and run again (signatures are recomputed)")


SIGNALS = {"nd_shingles": pa.int32()}  # distinct shingles; 0 = no words (never a near-duplicate)


def rules(cfg: Config) -> list[Rule]:
    # lab.query decides it over the surviving documents' candidate edges
    return [Rule(NAME, "content_hash", "first_in_cluster", Near(cfg.threshold, cfg.keep, cfg.keep_signal),
                 "near_duplicate")]


class Collector:
    """The partition's near-dedup output, filled as annotate reads its documents (the stage's
    per-partition hook): ``signals(i, text, doc)`` for the partition's i-th document that reaches the
    stage, then ``write`` once with the partition's signals table (its ``content_hash`` and
    ``doc_id`` columns key the shuffle records)."""

    def __init__(self, cfg: Config, n_buckets: int = 1, run_dir: Any = None) -> None:
        self.cfg, self.n_buckets = cfg, n_buckets
        # row -> signature, grown by doubling (documents without a shingle keep the empty signature): one
        # array, not an object per document
        self.matrix = np.full((1024, cfg.num_perm), np.uint32(0xFFFFFFFF), dtype=np.uint32)
        self.has = np.zeros(1024, dtype=bool)
        self.sets: list[np.ndarray] = []  # shingle hashes (exact_jaccard) of rows set_rows, concatenated in blocks
        self.set_rows: list[int] = []
        self.set_sizes: list[int] = []
        self._pending: list[np.ndarray] = []

    def signals(self, i: int, text: str, doc: object = None) -> dict:
        sig, shingles = signature(text, self.cfg)
        if shingles.size:
            if i >= self.has.size:
                grow = max(i + 1, 2 * self.has.size) - self.has.size
                self.matrix = np.concatenate([self.matrix, np.full((grow, self.cfg.num_perm), np.uint32(0xFFFFFFFF),
                                                                   dtype=np.uint32)])
                self.has = np.concatenate([self.has, np.zeros(grow, dtype=bool)])
            self.matrix[i], self.has[i] = sig, True
        if self.cfg.exact_jaccard and shingles.size:
            self._pending.append(shingles)
            self.set_rows.append(i)
            self.set_sizes.append(shingles.size)
            if len(self._pending) >= 4096:  # a block of small arrays becomes one array
                self.sets.append(np.concatenate(self._pending))
                self._pending = []
        return {"nd_shingles": int(shingles.size)}

    def write(self, layout: RunLayout, key: str, signals: pa.Table) -> None:
        n = signals.num_rows
        if self.has.size < n:
            self.matrix = np.concatenate([self.matrix, np.full((n - self.has.size, self.cfg.num_perm),
                                                               np.uint32(0xFFFFFFFF), dtype=np.uint32)])
            self.has = np.concatenate([self.has, np.zeros(n - self.has.size, dtype=bool)])
        matrix, has = self.matrix[:n], self.has[:n]
        content = signals.column("content_hash")
        groups = band_groups(matrix, has, content.fill_null(0).to_numpy(),
                             content.is_valid().to_numpy(zero_copy_only=False),
                             signals.column("doc_id").to_numpy(), self.cfg, self.n_buckets)
        write_npy(np.ascontiguousarray(matrix), layout.signatures(key))
        if self.cfg.exact_jaccard:  # rows' sets in row order; a row without shingles has an empty one
            values, offsets = layout.shingles(key)
            sizes = np.zeros(n, dtype=np.int64)
            sizes[np.asarray(self.set_rows, dtype=np.int64)] = self.set_sizes
            blocks = self.sets + self._pending
            write_npy(np.concatenate(blocks) if blocks else np.zeros(0, dtype=np.uint32), values)
            write_npy(np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64), offsets)
        write_bands(layout, key, groups)
