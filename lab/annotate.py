"""annotate: one partition in, its docs/, signals/, rejects/ and stats/ files out. No Dask here.

For each document: HTML is extracted, every stage computes its signals, and the PII stage scrubs the
stored text. ``explore`` mode computes every signal of every document, so any threshold can move later.
``batch`` mode runs the stages in funnel order and stops at the first failing per-document rule: later
signals stay empty, ``drop_reason`` says why, and the text is not stored. Group rules (exact and near
dedup) are decided later, over all partitions, by ``lab.query``; both modes keep the same documents.
Documents go through in chunks (``CHUNK_DOCS``, at most ``CHUNK_CHARS`` characters), stage by stage, so a
stage's model and tables stay in the CPU's caches. A stage's ``Collector`` gets the texts instead of
``signals`` and writes its own files (with a larger ``chunk_size``, through ``signals_batch``). Files are
written atomically; ``stats/part-KEY.json``, written last, marks the partition complete.
"""

from __future__ import annotations

import contextlib
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pyarrow as pa

from lab import stats as stats_mod
from lab.config import Config
from lab.doc import Doc
from lab.io.partitions import Partition, fingerprint
from lab.io.readers import Reject, read
from lab.io.run import RunLayout
from lab.io.schema import DOCS_SCHEMA, REJECTS_SCHEMA, numeric_signals, signals_schema
from lab.io.writers import ParquetStream, write_json, write_parquet
from lab.select.rules import Rule, first_failure
from lab.select.ruleset import ruleset
from lab.stages import STAGES, extract, pii


@dataclass
class PartitionResult:
    key: str
    docs: int = 0
    bytes: int = 0
    rejected: int = 0
    rejected_bytes: int = 0
    stats: dict[str, stats_mod.Summary] = field(default_factory=dict)

    def to_json(self) -> dict:
        """The deterministic part (no timings): same input, same JSON."""
        return {"key": self.key, "docs": self.docs, "bytes": self.bytes, "rejected": self.rejected,
                "rejected_bytes": self.rejected_bytes, "stats": {k: v.to_json() for k, v in self.stats.items()}}


def _clean(v: Any) -> Any:
    return None if isinstance(v, float) and math.isnan(v) else v


def annotate_doc(doc: Doc, cfg: Config, batch_rules: dict[str, list[Rule]] | None,
                 clock: dict[str, float], collectors: dict[str, Any] | None = None,
                 i: int = 0) -> tuple[dict, str | None]:
    """Signals of one document (the partition's ``i``-th) and the text to store (PII scrubbed; None for a
    document batch mode dropped). ``batch_rules`` (stage -> rules) set = batch mode; ``collectors``:
    stage -> its per-partition ``Collector`` (``new_collectors``)."""
    return annotate_docs([doc], cfg, batch_rules, clock, collectors, i)[0]


def annotate_docs(docs: list[Doc], cfg: Config, batch_rules: dict[str, list[Rule]] | None,
                  clock: dict[str, float], collectors: dict[str, Any] | None = None,
                  first: int = 0) -> list[tuple[dict, str | None]]:
    """``annotate_doc`` of consecutive documents (the partition's ``first``-th on), stage by stage: a
    collector with ``signals_batch`` gets all of them that reach its stage in one call."""
    rows: list[dict[str, Any]] = []
    texts: list[str] = []
    method = cfg.stage("extract").method  # how HTML becomes text (a signal parameter)
    t0 = time.thread_time()
    for doc in docs:
        rows.append({"doc_id": doc.doc_id, "source": doc.source, "bytes": 0, "raw_bytes": doc.raw_bytes,
                     "decode_errors": doc.decode_errors, "encoding": doc.encoding,
                     "encoding_source": doc.encoding_source, "drop_reason": None})
        text = extract.html_to_text(doc.text, method) if doc.is_html else doc.text
        rows[-1]["bytes"] = len(text.encode("utf-8", "surrogatepass"))
        texts.append(text)
    clock["extract"] = clock.get("extract", 0.0) + (time.thread_time() - t0)
    alive = list(range(len(docs)))  # the documents no stage has dropped (batch mode)
    for module in STAGES:
        if not alive:
            break
        t0 = time.thread_time()
        collector = (collectors or {}).get(module.NAME)
        size = getattr(collector, "chunk_size", 1)
        if collector is not None and len(alive) > 1 and size > 1 and hasattr(collector, "signals_batch"):
            out = [s for j in range(0, len(alive), size)  # at most chunk_size documents at once
                   for s in collector.signals_batch([(first + k, texts[k], docs[k]) for k in alive[j:j + size]])]
        elif collector is not None:
            out = [collector.signals(first + k, texts[k], docs[k]) for k in alive]
        elif hasattr(module, "signals_many"):  # the stage's model looks at the chunk's documents together
            out = module.signals_many([texts[k] for k in alive])
        else:
            out = [module.signals(texts[k]) for k in alive]
        for k, signals in zip(alive, out):
            rows[k].update({name: _clean(v) for name, v in signals.items()})
        clock[module.NAME] = clock.get(module.NAME, 0.0) + (time.thread_time() - t0)
        if batch_rules is not None and module.NAME in batch_rules:
            for k in alive:
                rows[k]["drop_reason"] = first_failure(batch_rules[module.NAME], rows[k])
            alive = [k for k in alive if rows[k]["drop_reason"] is None]
    results: list[tuple[dict, str | None]] = []
    for k, (row, text) in enumerate(zip(rows, texts)):
        if row["drop_reason"] is not None:
            results.append((row, None))  # batch mode keeps no text of a dropped document: nothing to scrub or tokenize
            continue
        if row.get("pii_total"):  # stored text never holds PII
            t0 = time.thread_time()
            scrubbed = pii.scrub(text, ip_ranges=cfg.stage("pii").ip_ranges)  # what its signals counted
            clock["pii"] = clock.get("pii", 0.0) + (time.thread_time() - t0)
            if scrubbed != text:
                for c in (collectors or {}).values():  # what a collector keeps of the text is the stored text's
                    if hasattr(c, "stored"):
                        c.stored(first + k, scrubbed)
            text = scrubbed
        results.append((row, text))
    return results


def new_collectors(cfg: Config, n_buckets: int, run_dir: Path | None = None) -> dict[str, Any]:
    """stage -> a fresh per-partition ``Collector`` of every stage that has one."""
    return {m.NAME: m.Collector(cfg.stage(m.NAME), n_buckets, run_dir) for m in STAGES if hasattr(m, "Collector")}


CHUNK_DOCS = 64  # documents annotated stage by stage at a time (fewer than the shared caches keep: 256)
CHUNK_CHARS = 1 << 22  # and at most this many characters of them (a chunk's texts are held together)
ROWS_PER_BATCH = 4096  # documents' signals held as Python dicts before they become one Arrow batch
REPORT_EVERY_S = 0.5  # how often a partition reports the input it has read (``report``)


def annotate_partition(part: Partition, cfg: Config, run_dir: str | Path, n_buckets: int = 1,
                       signals_hash: str | None = None, fp: dict | None = None,
                       report: Callable[[int], None] | None = None) -> dict:
    """Read, annotate and write one partition; returns its metrics (also written to stats/part-KEY.json).
    ``n_buckets``: reduce tasks of the near-dedup shuffle (the engine's choice, the same for every partition);
    ``signals_hash`` and ``fp`` (its ``fingerprint``): the driver's, recorded with the partition (by default
    computed here); ``report(n)``: called about every ``REPORT_EVERY_S`` with the input bytes read since
    the last call (a progress bar that moves within a partition)."""
    layout = RunLayout(Path(run_dir))
    inp = cfg.inputs[part.input_index]
    batch_rules = None
    if cfg.mode == "batch":  # per-document rules short-circuit the later stages (percentiles are refused in batch)
        batch_rules = {}
        for r in ruleset(cfg):
            if r.per_document:
                batch_rules.setdefault(r.stage, []).append(r)
    schema = signals_schema()
    batches: list[pa.RecordBatch] = []  # the signals so far as columns, not a dict per document
    rows: list[dict] = []  # the latest documents' signals, until ROWS_PER_BATCH of them become a batch
    n_rows = 0
    collectors = new_collectors(cfg, n_buckets, Path(run_dir))
    docs: dict[str, list] = {n: [] for n in DOCS_SCHEMA.names}
    rejects: dict[str, list] = {n: [] for n in REJECTS_SCHEMA.names}
    result = PartitionResult(part.key)
    clock: dict[str, float] = {}
    t_read = time.thread_time()
    unreported, last = 0, time.monotonic()
    chunk = max([getattr(c, "chunk_size", 1) for c in collectors.values()] + [CHUNK_DOCS])  # documents at a time
    pending: list[Doc] = []
    pending_chars = 0

    layout.make()
    finish = contextlib.ExitStack()  # the docs file, written as the documents come (atomically, on close)
    docs_out = finish.enter_context(ParquetStream(layout.part("docs", part.key), DOCS_SCHEMA))

    def flush(last: bool = False) -> None:
        nonlocal pending_chars, n_rows
        for doc, (row, text) in zip(pending, annotate_docs(pending, cfg, batch_rules, clock, collectors, n_rows)):
            rows.append(row)
            result.docs += 1
            result.bytes += doc.raw_bytes
            for k, v in (("doc_id", row["doc_id"]), ("source", doc.source), ("locator", doc.locator),
                         ("url", doc.url), ("record_id", doc.record_id), ("text", text)):
                docs[k].append(v)
        n_rows += len(pending)
        if len(docs["doc_id"]) >= ROWS_PER_BATCH:
            docs_out.add_columns(docs)
            for column in docs.values():
                column.clear()
        if len(rows) >= ROWS_PER_BATCH or (last and rows):
            batches.append(pa.RecordBatch.from_pylist(rows, schema=schema))
            rows.clear()
        pending.clear()
        pending_chars = 0

    try:
        for item in read(part, inp, cfg.ingest):
            if report is not None:
                unreported += item.raw_bytes
                if time.monotonic() - last >= REPORT_EVERY_S:
                    report(unreported)
                    unreported, last = 0, time.monotonic()
            if isinstance(item, Reject):
                result.rejected += 1
                result.rejected_bytes += item.raw_bytes
                for k, v in (("source", item.source), ("locator", item.locator), ("reason", item.reason),
                             ("raw_bytes", item.raw_bytes), ("partition", part.key)):
                    rejects[k].append(v)
                continue
            pending.append(item)
            pending_chars += len(item.text)
            if len(pending) >= chunk or pending_chars >= CHUNK_CHARS:
                flush()
        flush(last=True)
        total = time.thread_time() - t_read
        clock["ingest"] = max(total - sum(clock.values()), 0.0)

        signals = pa.Table.from_batches(batches, schema=schema)  # chunked as made: no second copy
        batches.clear()
        result.stats = {name: stats_mod.Summary.of(  # one column at a time
            signals.column(name).to_numpy().astype(np.float64) if signals.num_rows else np.zeros(0))
            for name in numeric_signals()}

        for name, collector in collectors.items():
            t0 = time.thread_time()
            collector.write(layout, part.key, signals)
            clock[name] = clock.get(name, 0.0) + (time.thread_time() - t0)
        docs_out.add_columns(docs)
        finish.close()  # docs/part-KEY.parquet complete
    except BaseException:
        finish.__exit__(*sys.exc_info())  # the unfinished docs file is removed
        raise
    write_parquet(signals, layout.part("signals", part.key))
    write_parquet(pa.table(rejects, schema=REJECTS_SCHEMA), layout.part("rejects", part.key))
    write_json({"key": part.key, "cpu_seconds": {k: round(v, 6) for k, v in clock.items()}}, layout.timing(part.key))
    out = result.to_json()
    out["signals_hash"] = signals_hash or cfg.signals_hash()
    out["fingerprint"] = fp or fingerprint(part)
    out["shuffle_buckets"] = n_buckets
    write_json(out, layout.done(part.key))  # last: marks the partition complete
    out["cpu_seconds"] = clock
    return out
