"""The columns of a run's Parquet files: ``docs/``, ``signals/`` and ``rejects/``."""

from __future__ import annotations

import pyarrow as pa

from lab.stages import STAGES

BASE_SIGNALS = {
    "doc_id": pa.int64(),
    "source": pa.string(),
    "bytes": pa.int64(),  # UTF-8 bytes of the document's text (extracted from HTML; before the PII scrub)
    "raw_bytes": pa.int64(),  # bytes of the record as read (JSON keys, markup, the WARC record)
    "decode_errors": pa.int64(),  # undecodable bytes replaced by U+FFFD on read (any charset)
    "encoding": pa.string(),  # the codec the record was decoded with (utf-8, cp1252, cp932, ...)
    "encoding_source": pa.string(),  # where that came from: bom, header, meta, detected, default (lab.io.decoding)
}
DOCS_SCHEMA = pa.schema([("doc_id", pa.int64()), ("source", pa.string()), ("locator", pa.int64()),
                         ("url", pa.string()), ("record_id", pa.string()), ("text", pa.string())])
REJECTS_SCHEMA = pa.schema([("source", pa.string()), ("locator", pa.int64()), ("reason", pa.string()),
                            ("raw_bytes", pa.int64()), ("partition", pa.string())])


def signals_schema() -> pa.Schema:
    """``BASE_SIGNALS`` (ingest: doc_id, source, bytes, raw_bytes, decoding), every stage's signals in funnel order,
    drop_reason."""
    fields = list(BASE_SIGNALS.items())
    for m in STAGES:
        fields += list(m.SIGNALS.items())
    fields.append(("drop_reason", pa.string()))  # batch mode: first failing per-document rule
    return pa.schema(fields)


def numeric_signals() -> list[str]:
    """Signals that get global statistics (every integer or float column but the id)."""
    return [f.name for f in signals_schema()
            if (pa.types.is_integer(f.type) or pa.types.is_floating(f.type)) and f.name not in IDENTIFIERS]


IDENTIFIERS = ("doc_id", "content_hash")  # integer columns that are keys, not quantities

# inputs.parquet: every file found under the inputs, read or skipped (lab.steps.fingerprints)
INPUTS_SCHEMA = pa.schema([("input", pa.int32()), ("source", pa.string()), ("path", pa.string()),
                           ("bytes", pa.int64()), ("sha256", pa.string()), ("partition", pa.string()),
                           ("skipped", pa.string())])
