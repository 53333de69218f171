"""The unit that flows through the stages: one document and where it came from."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass


@dataclass(slots=True)
class Doc:
    """One input document.

    ``source`` is the input file (relative to its input root) and ``locator`` the position
    inside it (byte offset of a JSONL line in the decompressed stream, row index of a Parquet
    row, offset of a WARC record, 0 for a plain-text file). Together they make ``doc_id``,
    so ids do not depend on how the input was partitioned or how many workers ran.
    """

    source: str
    locator: int
    text: str
    raw_bytes: int  # size of the record as read, before decoding
    url: str = ""
    record_id: str = ""  # the input's own id field, when it has one
    decode_errors: int = 0  # undecodable bytes replaced by U+FFFD
    encoding: str = "utf-8"  # the codec the record was decoded with
    encoding_source: str = "default"  # where that came from: bom, header, meta, detected, default (lab.io.decoding)
    is_html: bool = False

    @property
    def doc_id(self) -> int:
        return doc_id(self.source, self.locator)


def doc_id(source: str, locator: int) -> int:
    """Stable signed 64-bit id of a document from its source and locator.

    >>> doc_id("a.jsonl", 0) == doc_id("a.jsonl", 0) != doc_id("a.jsonl", 1)
    True
    """
    digest = hashlib.blake2b(f"{source}\x00{locator}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little", signed=True)
