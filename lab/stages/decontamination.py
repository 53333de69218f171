"""decontamination: word n-gram overlap with the evaluation sets a corpus must not contain.

The user lists evaluation sets (``eval_sets``: a name and any input the readers take). Their texts are
normalized as near dedup normalizes and cut into word ``ngram``-grams (13 by default, as GPT-3 and OLMo
do); the n-grams' 64-bit hashes go into one frozen index, built once per run before annotate
(``prepare``), written to ``decontam/index-SHA.*`` and mapped read-only by every annotate task. ``SHA``
covers the sets' names, files and contents and ``ngram``; it is part of the signals hash, so editing an
eval set recomputes the next run's signals. Signals: ``decon_matches`` (positions whose n-gram is in the
index), ``decon_longest`` (the longest run of overlapping text, in words) and ``decon_set`` (the set most
matches come from). Rule: a kept document has fewer than ``min_matches`` matches.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from lab.dedup.signature import ngram_hashes, normalize
from lab.errors import ConfigError
from lab.fields import check, knob
from lab.io.writers import read_json, write_json, write_npy
from lab.select.rules import Rule

NAME = "decontamination"
VERSION = 1  # bump when the signals give other values (normalization, hashing)
SOURCE = "n-gram decontamination (GPT-3: 13-grams; OLMo / Dolma)"
FORMATS = ("auto", "jsonl", "parquet", "text", "warc")


@dataclass(frozen=True)
class EvalSet:
    name: str  # what reports and decon_set call it
    path: str  # a file, a directory or a glob (as an input)
    format: str = "auto"  # auto: by file extension; jsonl | parquet | text | warc
    text_field: str = "text"  # JSONL key / Parquet column of the text

    def __post_init__(self) -> None:
        check("name", self.name, bool(self.name) and self.name.strip() == self.name, "a non-empty name")
        check("path", self.path, bool(self.path), "a non-empty path")
        check("format", self.format, self.format in FORMATS, "one of " + ", ".join(FORMATS))


@dataclass(frozen=True)
class Config:
    enabled: bool = knob(True, unit="on/off",
                         help="On: a kept document shares fewer than decontamination.min_matches word n-grams "
                              "with the evaluation sets; off: every document passes.")
    min_matches: int = knob(1, unit="matching n-grams",
                            help="A kept document has fewer than this many word n-grams found in an evaluation set.",
                            source="GPT-3 / OLMo decontamination (any 13-gram overlap)")
    eval_sets: tuple[EvalSet, ...] = ()  # the evaluation sets: name, path, format, text_field; none: nothing matches
    ngram: int = 13  # words per n-gram (changing it rebuilds the index and recomputes the signals)

    def __post_init__(self) -> None:
        check("min_matches", self.min_matches, self.min_matches >= 1, ">= 1 (documents with this many matches are dropped)")
        check("ngram", self.ngram, 3 <= self.ngram <= 64, "a whole number of words in 3..64")
        names = [s.name for s in self.eval_sets]
        check("eval_sets", names, len(set(names)) == len(names), "sets with distinct names")
        for s in self.eval_sets:
            _files(s)  # a clear error now, before any work


SIGNALS = {"decon_matches": pa.int32(), "decon_longest": pa.int32(), "decon_set": pa.string()}


# --- the index -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Index:
    hashes: np.ndarray  # uint64, sorted, unique
    sets: np.ndarray  # uint8: which set (position in names) each hash first came from
    bits: np.ndarray  # uint8 bitmap of the hashes' top ``bitmap_bits(hashes.size)`` bits
    names: tuple[str, ...]
    ngram: int
    sha256: str
    report: dict  # per set: documents, texts too short, n-grams


def _input(s: EvalSet):
    from lab.io.inputs import InputConfig

    return InputConfig(path=s.path, format=s.format, text_field=s.text_field)


def _files(s: EvalSet) -> list:
    """The eval set's partitions (its files), or a ConfigError naming the set and the fix."""
    from lab.io.inputs import IngestConfig
    from lab.io.partitions import plan

    try:
        return plan([_input(s)], IngestConfig(partition_bytes=1 << 40))
    except ConfigError as e:
        raise ConfigError(f"stages.decontamination.eval_sets[{s.name}]: {e}") from None


def _stamp(cfg: Config) -> tuple:
    from lab.io.partitions import files_of

    out = []
    for s in cfg.eval_sets:
        for path in sorted({f for part in _files(s) for f in files_of(part)}):
            st = Path(path).stat()  # only the key of the in-process cache below: any write moves ctime
            out.append((s.name, s.format, s.text_field, path, st.st_mtime_ns, st.st_size, st.st_ctime_ns, st.st_ino))
    return (cfg.ngram, tuple(out))


def index_sha(cfg: Config) -> str:
    """The index's identity: the sets' names, fields, files and contents, and ``ngram`` ('' without sets)."""
    return _sha(_stamp(cfg)) if cfg.eval_sets else ""


@lru_cache(maxsize=8)
def _sha(stamp: tuple) -> str:
    h = hashlib.sha256(json.dumps([VERSION, stamp[0], [x[:4] for x in stamp[1]]]).encode())
    for x in stamp[1]:
        with open(x[3], "rb") as f:
            while chunk := f.read(1 << 20):
                h.update(chunk)
    return h.hexdigest()[:16]


def build_index(cfg: Config) -> Index:
    """Read every eval set and hash its n-grams. A set with no readable text is a ConfigError."""
    from lab.io.inputs import IngestConfig
    from lab.io.readers import Reject, read

    ingest = IngestConfig(partition_bytes=1 << 40)
    parts, ids, report = [], [], {}
    for k, s in enumerate(cfg.eval_sets):
        docs = short = rejected = 0
        reasons: list[str] = []
        for part in _files(s):
            for item in read(part, _input(s), ingest):
                if isinstance(item, Reject):
                    rejected += 1
                    if len(reasons) < 3:
                        reasons.append(f"{item.source}@{item.locator}: {item.reason}")
                    continue
                h = ngram_hashes(normalize(item.text), cfg.ngram, whole_if_short=False)
                docs += 1
                short += h.size == 0
                parts.append(h)
                ids.append(np.full(h.size, k, dtype=np.uint8))
        if docs == short:
            why = f" ({rejected} unreadable records: {'; '.join(reasons)})" if rejected else ""
            raise ConfigError(f"stages.decontamination.eval_sets[{s.name}] ({s.path}): no text of {cfg.ngram} words or "
                              f"more{why}; check the path, format and text_field "
                              f"(text_field={s.text_field!r}), or remove the set")
        report[s.name] = {"documents": docs, "too_short": int(short), "unreadable": rejected,
                          "ngrams": int(sum(p.size for p in parts[-docs:]))}
    hashes = np.concatenate(parts) if parts else np.zeros(0, dtype=np.uint64)
    sets = np.concatenate(ids) if ids else np.zeros(0, dtype=np.uint8)
    hashes, first = np.unique(hashes, return_index=True)  # sorted; each hash's first set in config order
    return Index(hashes, sets[first], bitmap(hashes), tuple(s.name for s in cfg.eval_sets), cfg.ngram,
                 index_sha(cfg), report)


def bitmap_bits(n: int) -> int:
    """log2 of the bitmap's size for ``n`` hashes: at least 16 bits per hash (about 1 false candidate in 16)."""
    return min(max(20, (16 * max(n, 1) - 1).bit_length()), 34)


def _top(hashes: np.ndarray, k: int) -> np.ndarray:
    return (np.asarray(hashes, dtype=np.uint64) >> np.uint64(64 - k)).astype(np.int64)


def bitmap(hashes: np.ndarray) -> np.ndarray:
    k = bitmap_bits(hashes.size)
    top = _top(hashes, k)
    bits = np.zeros(1 << (k - 3), dtype=np.uint8)
    np.bitwise_or.at(bits, top >> 3, np.left_shift(1, top & 7).astype(np.uint8))
    return bits


def index_path(run_dir: Path, sha: str) -> Path:
    """The index's report; its arrays are beside it (``.hashes.npy``, ``.sets.npy``)."""
    return Path(run_dir) / "decontam" / f"index-{sha}.json"


def prepare(cfg: Config, run_dir: Path) -> dict | None:
    """Build the run's index once (before annotate) unless it is there; returns its report (None without sets)."""
    if not cfg.eval_sets:
        return None
    path = index_path(run_dir, index_sha(cfg))
    if path.is_file():
        return read_json(path)["report"]
    idx = build_index(cfg)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_npy(idx.hashes, path.with_suffix(".hashes.npy"))
    write_npy(idx.sets, path.with_suffix(".sets.npy"))
    write_npy(idx.bits, path.with_suffix(".bits.npy"))
    write_json({"names": list(idx.names), "ngram": idx.ngram, "sha256": idx.sha256, "report": idx.report}, path)
    return idx.report


@lru_cache(maxsize=2)
def load_index(path: str) -> Index:
    p = Path(path)
    meta = read_json(p)
    arrays = (np.load(p.with_suffix(f".{k}.npy"), mmap_mode="r") for k in ("hashes", "sets", "bits"))
    return Index(*arrays, tuple(meta["names"]), int(meta["ngram"]), meta["sha256"], meta["report"])


# --- signals ---------------------------------------------------------------------------------------------


def match(text: str, index: Index) -> dict[str, Any]:
    """The signals of one text against an index."""
    h = ngram_hashes(normalize(text), index.ngram, whole_if_short=False)
    if h.size == 0 or index.hashes.size == 0:
        return {"decon_matches": 0, "decon_longest": 0, "decon_set": ""}
    k = bitmap_bits(index.hashes.size)
    top = _top(h, k)
    maybe = np.flatnonzero((index.bits[top >> 3] >> (top & 7).astype(np.uint8)) & 1)
    hit = np.zeros(h.size, dtype=bool)
    at = np.zeros(h.size, dtype=np.int64)
    if maybe.size:
        found = np.searchsorted(index.hashes, h[maybe])
        found[found == index.hashes.size] = 0
        at[maybe] = found
        hit[maybe] = index.hashes[found] == h[maybe]
    n = int(hit.sum())
    if n == 0:
        return {"decon_matches": 0, "decon_longest": 0, "decon_set": ""}
    edges = np.diff(np.concatenate(([0], hit.view(np.int8), [0])))
    run = int((np.flatnonzero(edges == -1) - np.flatnonzero(edges == 1)).max())
    counts = np.bincount(index.sets[at[hit]], minlength=len(index.names))
    return {"decon_matches": n, "decon_longest": run + index.ngram - 1, "decon_set": index.names[int(counts.argmax())]}


class Collector:
    """Per partition: the run's index (mapped once per process), each document's text through ``match``."""

    def __init__(self, cfg: Config, n_buckets: int = 1, run_dir: Path | None = None) -> None:
        self.index = None
        if cfg.eval_sets:
            if run_dir is None:
                self.index = build_index(cfg)
            else:
                path = index_path(run_dir, index_sha(cfg))
                if not path.is_file():
                    prepare(cfg, run_dir)
                self.index = load_index(str(path))

    def signals(self, i: int, text: str, doc: Any = None) -> dict:
        if self.index is None:
            return {"decon_matches": 0, "decon_longest": 0, "decon_set": ""}
        return match(text, self.index)

    def write(self, layout: Any, key: str, signals: pa.Table) -> None:
        """No files per partition (the index is the run's)."""


def signals(text: str) -> dict:
    """Without evaluation sets nothing matches."""
    return {"decon_matches": 0, "decon_longest": 0, "decon_set": ""}


def signal_params(cfg: Config) -> dict:
    return {"index": index_sha(cfg), "ngram": cfg.ngram}


def rules(cfg: Config) -> list[Rule]:
    return [Rule(NAME, "decon_matches", "<=", cfg.min_matches - 1, "contaminated")]
