"""Where things live in a run directory. Only ``lab.io`` knows these paths."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class RunLayout:
    root: Path

    @property
    def manifest(self) -> Path:
        return self.root / "manifest.json"

    @property
    def config(self) -> Path:
        return self.root / "config.yaml"

    @property
    def inputs(self) -> Path:  # every file found under the inputs: read (its size and SHA-256) or why not
        return self.root / "inputs.parquet"

    @property
    def docs(self) -> Path:
        return self.root / "docs"

    @property
    def signals(self) -> Path:
        return self.root / "signals"

    @property
    def rejects(self) -> Path:
        return self.root / "rejects"

    @property
    def labels(self) -> Path:  # append-only label files (lab.io.labels), kept across reruns
        return self.root / "labels"

    @property
    def stats(self) -> Path:
        return self.root / "stats"

    @property
    def merged_stats(self) -> Path:
        return self.stats / "merged.json"

    def part(self, kind: str, key: str) -> Path:
        """The Parquet file of one partition: ``kind`` is docs, signals or rejects."""
        return getattr(self, kind) / f"part-{key}.parquet"

    def done(self, key: str) -> Path:
        """Written last by a partition task: its metrics and statistics partials; marks it complete."""
        return self.stats / f"part-{key}.json"

    def timing(self, key: str) -> Path:
        """CPU seconds per stage of one partition (kept apart: timings are not deterministic)."""
        return self.stats / f"timing-{key}.json"

    # --- near dedup (dedup/): per-partition map outputs, per-bucket reduce outputs, clusters

    @property
    def dedup(self) -> Path:
        return self.root / "dedup"

    def signatures(self, key: str) -> Path:
        """uint32 [documents of signals/part-KEY in row order, num_perm]; rows of documents without
        a signature (no words, or dropped earlier in batch mode) are all 0xFFFFFFFF."""
        return self.dedup / "signatures" / f"part-{key}.npy"

    def shingles(self, key: str) -> tuple[Path, Path]:
        """(concatenated distinct shingle hashes uint32, row offsets int64[n + 1]); exact_jaccard only."""
        return self.dedup / "shingles" / f"part-{key}.npy", self.dedup / "shingles" / f"part-{key}.offsets.npy"

    def bands(self, key: str) -> Path:
        """The LSH map output of one partition: one row group per shuffle bucket."""
        return self.dedup / "bands" / f"part-{key}.parquet"

    def edges(self, bucket: int) -> Path:
        """Candidate pairs found by one shuffle bucket, with their Jaccard."""
        return self.dedup / "edges" / f"bucket-{bucket:05d}.parquet"

    def exact(self, bucket: int) -> Path:
        """Exact-duplicate groups (content hash, documents, lowest doc_id) found by one shuffle bucket."""
        return self.dedup / "exact" / f"bucket-{bucket:05d}.parquet"

    @property
    def clusters(self) -> Path:
        """Every node's cluster at each threshold of the grid."""
        return self.dedup / "clusters.parquet"

    @property
    def dedup_done(self) -> Path:
        return self.dedup / "done.json"

    # --- boilerplate lines (lab.linecount): per-partition count tables, merged buckets, the signal

    @property
    def boilerplate(self) -> Path:
        return self.root / "boilerplate"

    def line_counts(self, key: str) -> Path:
        """One partition's count table (site, line_hash, docs): one row group per shuffle bucket."""
        return self.boilerplate / "counts" / f"part-{key}.parquet"

    def line_records(self, key: str) -> Path:
        """Every non-empty line of the partition's documents: (doc_id, site, line_hash, chars)."""
        return self.boilerplate / "lines" / f"part-{key}.parquet"

    def merged_counts(self, bucket: int) -> Path:
        """The corpus-level count table of one shuffle bucket: (site, line_hash, docs) over all partitions."""
        return self.boilerplate / "merged" / f"bucket-{bucket:05d}.parquet"

    def line_signal(self, key: str) -> Path:
        """The corpus-level signal of one partition's documents: (doc_id, bp_line_frac)."""
        return self.boilerplate / "signal" / f"part-{key}.parquet"

    @property
    def boilerplate_done(self) -> Path:
        return self.boilerplate / "done.json"

    @property
    def models(self) -> Path:  # classifiers trained from the run (lab.quality.train), kept across reruns
        return self.root / "models"

    # --- tokenizer and tokens (tokenizer/, tokens/) ------------------------------------------------

    @property
    def tokenizer_dir(self) -> Path:
        return self.root / "tokenizer"

    @property
    def tokenizer_json(self) -> Path:
        return self.tokenizer_dir / "tokenizer.json"

    @property
    def tokenizer_sha(self) -> Path:
        return self.tokenizer_dir / "tokenizer.sha256"

    @property
    def tokenizer_fit(self) -> Path:
        """How the tokenizer was fitted: its config, the run it was fitted on, the sample's strata."""
        return self.tokenizer_dir / "fit.json"

    @property
    def tokenized_dir(self) -> Path:
        return self.root / "tokenized"

    def tokenized(self, key: str) -> Path:
        """Per document of docs/part-KEY: n_tokens, words, continued_words and the token ids."""
        return self.tokenized_dir / f"part-{key}.parquet"

    def tokenized_done(self, key: str) -> Path:
        return self.tokenized_dir / f"part-{key}.json"

    @property
    def packing_stats(self) -> Path:
        """Utilization, truncation and splits of every packing strategy x seq_len (the Packing tab)."""
        return self.stats / "packing.json"

    @property
    def fertility(self) -> tuple[Path, Path]:
        """The fertility comparison (lab.plan.fertility): stats/fertility.json and stats/fertility.parquet."""
        return self.stats / "fertility.json", self.stats / "fertility.parquet"

    @property
    def tokens(self) -> Path:
        """Packed token shards: tokens/train/, tokens/val/ (lab.tokens.shards)."""
        return self.root / "tokens"

    @property
    def tokens_done(self) -> Path:
        """What the shards were made of (``lab.steps.materialize_reads``), written with them."""
        return self.tokens / "done.json"

    @property
    def telemetry(self) -> Path:
        """Loader telemetry (``lab.tokens.loader.TokenLoader.write_telemetry``): NAME.parquet (step, wait_ms, stall) and
        NAME.json (its summary), from ``corpus-lab read-tokens`` or a trainer; outside tokens/, which
        materialize replaces."""
        return self.root / "telemetry"

    def partition_files(self, key: str) -> list[Path]:
        """Every file a partition task writes (stale ones are removed when the plan changes)."""
        return [self.part("docs", key), self.part("signals", key), self.part("rejects", key), self.done(key),
                self.timing(key), self.signatures(key), *self.shingles(key), self.bands(key),
                self.line_counts(key), self.line_records(key)]  # (line_signal: the boilerplate step's, after annotate)

    def glob(self, kind: str) -> str:
        return str(getattr(self, kind) / "part-*.parquet")

    def make(self) -> None:
        for d in (self.docs, self.signals, self.rejects, self.stats, self.dedup / "signatures", self.dedup / "shingles",
                  self.dedup / "bands", self.dedup / "edges", self.dedup / "exact", self.boilerplate / "counts",
                  self.boilerplate / "lines", self.boilerplate / "merged", self.boilerplate / "signal"):
            d.mkdir(parents=True, exist_ok=True)
