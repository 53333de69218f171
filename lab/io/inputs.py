"""inputs: the config's ``inputs`` entries and its ``ingest`` limits, the two sections the readers and the partition
plan read (``lab.config`` composes them with the stages' sections and validates the whole)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from lab.fields import check

FORMATS = ("auto", "jsonl", "parquet", "text", "warc")


@dataclass(frozen=True)
class InputConfig:
    path: str  # a file, a directory, or a glob; relative paths are relative to the working directory
    format: Literal["auto", "jsonl", "parquet", "text", "warc"] = "auto"  # auto: by file extension
    text_field: str = "text"  # JSONL key / Parquet column holding the document text
    id_field: str = "id"  # JSONL key / Parquet column of the input's own id (optional in the data)
    url_field: str = "url"  # JSONL key / Parquet column of the URL (optional in the data)
    html: bool = False  # treat text as HTML and extract it (WARC responses always are)

    def __post_init__(self) -> None:
        check("path", self.path, bool(self.path), "a non-empty path")
        check("format", self.format, self.format in FORMATS, "one of " + ", ".join(FORMATS))


@dataclass(frozen=True)
class IngestConfig:
    partition_bytes: int = 64 * 2**20  # bytes of input per task at most; larger files are split by byte range or row group
    max_doc_bytes: int = 16 * 2**20  # larger records go to rejects/ instead of the stages
    files_per_partition: int = 4096  # whole files per task at most (of any format; groups average an eighth of it)
    partition_docs: int = 50_000  # records per task at most where they can be counted before reading (Parquet rows; plain JSONL lines, estimated)

    def __post_init__(self) -> None:
        check("partition_bytes", self.partition_bytes, self.partition_bytes >= 4096, ">= 4096 bytes")
        check("max_doc_bytes", self.max_doc_bytes, self.max_doc_bytes >= 1, ">= 1 byte")
        check("files_per_partition", self.files_per_partition, self.files_per_partition >= 1, ">= 1")
        check("partition_docs", self.partition_docs, self.partition_docs >= 1, ">= 1")
