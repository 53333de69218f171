"""near_dedup: MinHash signatures of word 5-gram shingles; one document kept per near-duplicate cluster.

The stage's signal is ``nd_shingles`` (distinct shingles; 0: no words, never a near-duplicate); its
per-partition output (``Collector``) is the partition's MinHash signatures
(``dedup/signatures/part-KEY.npy``, row i = the partition's i-th document), its shingle sets with
``exact_jaccard``, and its LSH band records split into shuffle buckets (``dedup/bands/``): the map
side of the shuffle that ``lab.neardup.shuffle`` reduces. How a signature is computed is
``lab.neardup.signature``.

Decision side (``lab.neardup`` builds candidate edges and clusters; ``lab.query`` applies the rule):
a near-duplicate group is a connected component of the candidate edges with Jaccard >= ``threshold``
among the documents that passed every earlier stage; one member per group is kept, chosen by
``keep``. Documents with equal ``content_hash`` share one node (their signatures are equal).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from lab.io.run import RunLayout
from lab.io.writers import write_npy
from lab.neardup.forest import GRID
from lab.neardup.keep import KEEP
from lab.neardup.shuffle import band_groups, write_bands
from lab.neardup.signature import signature
from lab.rules import Near, Rule
from lab.stages.fields import check, knob

NAME = "near_dedup"
VERSION = 1  # bump when signals() (or what it reads: word lists, models) gives other values
SOURCE = "MinHash LSH (FineWeb/datatrove: word 5-grams, 14 bands x 8 rows)"
@dataclass(frozen=True)
class Config:
    enabled: bool = knob(True, unit="on/off",
                         help="On: a kept document is the one member kept of its group of near-duplicate survivors; "
                              "off: near-duplicates are all kept.")
    threshold: float = knob(0.8, unit="Jaccard",
                            help="Survivors linked by a word 5-gram Jaccard at or above this form a group, of which "
                                 "one member is kept.",
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
        check("max_group_pairs", self.max_group_pairs, self.max_group_pairs >= 2, ">= 2")
        check("shuffle_buckets", self.shuffle_buckets, 0 <= self.shuffle_buckets <= 65535,
              "0 (one per partition) or a count in 1..65535")

    @property
    def num_perm(self) -> int:
        return self.bands * self.rows

    def signature_params(self) -> dict:
        """What signatures and the shuffle's files depend on (part of the run's signals hash)."""
        return {"ngram": self.ngram, "bands": self.bands, "rows": self.rows, "seed": self.seed,
                "exact_jaccard": self.exact_jaccard, "shuffle_buckets": self.shuffle_buckets}


def signal_params(cfg: Config) -> dict:
    """What the signals and the signatures depend on besides ``VERSION``."""
    return cfg.signature_params()


SIGNALS = {"nd_shingles": pa.int32()}  # distinct shingles; 0 = no words (never a near-duplicate)


def rules(cfg: Config) -> list[Rule]:
    # lab.query and lab.select.python_funnel decide it over the surviving documents' candidate edges
    return [Rule(NAME, "content_hash", "first_in_cluster", Near(cfg.threshold, cfg.keep, cfg.keep_signal),
                 "near_duplicate")]


class Collector:
    """The partition's near-dedup output, filled as annotate reads its documents (the stage's
    per-partition hook): ``signals(i, text, doc)`` for the partition's i-th document that reaches the
    stage, then ``write`` once with the partition's signals table (its ``content_hash`` and
    ``doc_id`` columns key the shuffle records)."""

    def __init__(self, cfg: Config, n_buckets: int = 1, run_dir: Any = None) -> None:
        self.cfg, self.n_buckets = cfg, n_buckets
        self.signatures: dict[int, np.ndarray] = {}  # row -> signature, documents with at least one shingle
        self.sets: dict[int, np.ndarray] = {}  # row -> shingle hashes (exact_jaccard)

    def signals(self, i: int, text: str, doc: object = None) -> dict:
        sig, shingles = signature(text, self.cfg)
        if shingles.size:
            self.signatures[i] = sig
        if self.cfg.exact_jaccard:
            self.sets[i] = shingles
        return {"nd_shingles": int(shingles.size)}

    def write(self, layout: RunLayout, key: str, signals: pa.Table) -> None:
        n = signals.num_rows
        matrix = np.full((n, self.cfg.num_perm), np.uint32(0xFFFFFFFF), dtype=np.uint32)
        has = np.zeros(n, dtype=bool)
        for i, sig in self.signatures.items():
            matrix[i], has[i] = sig, True
        content = signals.column("content_hash")
        groups = band_groups(matrix, has, content.fill_null(0).to_numpy(),
                             content.is_valid().to_numpy(zero_copy_only=False),
                             signals.column("doc_id").to_numpy(), self.cfg, self.n_buckets)
        write_npy(matrix, layout.signatures(key))
        if self.cfg.exact_jaccard:
            empty = np.zeros(0, dtype=np.uint32)
            sets = [self.sets.get(i, empty) for i in range(n)]
            values, offsets = layout.shingles(key)
            write_npy(np.concatenate(sets) if sets else empty, values)
            write_npy(np.concatenate([[0], np.cumsum([s.size for s in sets])]).astype(np.int64), offsets)
        write_bands(layout, key, groups)
