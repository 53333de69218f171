"""Plan the partitions of a run: which bytes of which input files each Dask task reads.

``plan`` lists every input's files (``lab.io.listing``) and cuts them into partitions of at most
``ingest.partition_bytes``: large plain JSONL into byte ranges (a range owns the lines whose first byte
lies in it), large Parquet into row ranges of consecutive row groups (cut inside a row group of more than
``ingest.partition_docs`` rows), and every other file whole, packed with its sorted neighbours into groups
of at most ``partition_bytes`` and ``ingest.files_per_partition`` files. A group ends after a file whose
name hash falls under a threshold that grows with its size, so adding or editing a file changes its own
group, not every group after it. The plan is deterministic: a partition's ``index`` and ``key`` name the
same bytes on every machine and re-run. Nothing is read here: a corrupt Parquet footer becomes a
whole-file piece whose reader reports it to ``rejects/``.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from lab.errors import ConfigError
from lab.io import storage
from lab.io.inputs import IngestConfig, InputConfig
from lab.io.listing import (  # noqa: F401
    COMPRESSION_SUFFIXES,
    JSONL_SUFFIXES,
    PARQUET_SUFFIXES,
    TEXT_SUFFIXES,
    WARC_SUFFIXES,
    Listing,
    format_of,
    list_inputs,
    text_name,
)

GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
JSONL_PROBE = 1 << 16  # bytes at the start of a plain JSONL file that estimate its bytes per line
GROUPS_PER_CAP = 8  # whole-file groups average an eighth of either cap, so a cap rarely (e^-8) decides a boundary


@dataclass(frozen=True)
class Partition:
    """One task's share of the input: a range of one file, or whole files; see the module docstring."""

    index: int  # position in the global, deterministic partition list
    input_index: int  # which cfg.inputs entry
    format: str  # a range: jsonl | parquet; whole files: their format, "mixed" when they differ
    path: str  # a range: the absolute path of the file; whole files: the input root directory
    source: str  # a range: the file's path relative to the input root; whole files: their common directory
    start: int = 0  # jsonl: byte offset; parquet: first row
    end: int = -1  # exclusive; -1 = to the end
    files: tuple[str, ...] = ()  # whole files: their paths relative to ``path``, read in this order
    size: int = 0  # bytes of input this partition covers (for progress and planning)
    formats: tuple[str, ...] = ()  # whole files of a "mixed" partition: each file's format

    @property
    def key(self) -> str:
        """Stable short name used for ``part-XXXXX`` files.

        >>> Partition(7, 0, "jsonl", "/d/a.jsonl", "a.jsonl").key
        '00007'
        """
        return f"{self.index:05d}"

    def whole_files(self) -> Iterator[tuple[str, str]]:
        """(path relative to ``path``, format) of each whole file, in reading order."""
        return zip(self.files, self.formats or (self.format,) * len(self.files))


def codec_of(head: bytes) -> str:
    """``gzip``, ``zstd`` or ``none`` from a file's first bytes.

    >>> codec_of(b"\\x1f\\x8b\\x08\\x00"), codec_of(b'{"te')
    ('gzip', 'none')
    """
    return "gzip" if head.startswith(GZIP_MAGIC) else "zstd" if head.startswith(ZSTD_MAGIC) else "none"


def compression_of(path: str) -> str:
    """``gzip``, ``zstd`` or ``none``, from the file's first bytes (not its name)."""
    with storage.open_input(path) as f:
        return codec_of(f.read(4))


def plan(inputs: Sequence[InputConfig], ingest: IngestConfig, listing: Listing | None = None) -> list[Partition]:
    """The global, deterministic list of partitions for ``inputs`` (listed by ``list_inputs`` unless
    ``listing`` is given).

    Raises ConfigError when an input path does not exist or matches no file, or when two
    inputs yield the same relative source (their document ids would clash).
    """
    listing = listing if listing is not None else list_inputs(inputs)
    parts: list[Partition] = []
    sources: dict[str, int] = {}  # relative source -> input index (only needed with several inputs)
    for i, inp in enumerate(inputs):
        root, files = listing.roots[i], listing.files[i]
        if len(inputs) > 1:
            for rel, _, _ in files:
                j = sources.setdefault(rel, i)
                if j != i:
                    raise ConfigError(
                        f"inputs[{i}].path={inp.path!r} and inputs[{j}] both contain a file named {rel!r} "
                        "relative to their roots, so their document ids would clash; list their common parent "
                        "directory as one input instead, or rename one of them"
                    )
        if any(fmt == "parquet" for _, _, fmt in files):  # a wrong column name is a config mistake: stop now
            _check_text_field(i, inp, root, next(rel for rel, _, fmt in files if fmt == "parquet"))
        group: list[tuple[str, int, str]] = []
        group_bytes = 0

        def close() -> None:
            nonlocal group_bytes
            if group:
                parts.append(_group(len(parts), i, root, group))
                group.clear()
                group_bytes = 0

        for rel, size, fmt in files:
            pieces = _ranges(root, rel, size, fmt, ingest)
            if pieces is not None:  # a large file cut into ranges: partitions of their own
                close()
                for p in pieces:
                    parts.append(Partition(index=len(parts), input_index=i, **p))
                continue
            if group and (group_bytes + size > ingest.partition_bytes or len(group) >= ingest.files_per_partition):
                close()  # a cap: rare, as boundaries come about every eighth of it
            group.append((rel, size, fmt))
            group_bytes += size
            if _ends_group(rel, size, ingest):
                close()
        close()
    return parts


def _ends_group(rel: str, size: int, ingest: IngestConfig) -> bool:
    """Whether a group of whole files ends after this file: its name's hash is below a threshold that grows
    with its size, so groups average an eighth of ``partition_bytes`` or of ``files_per_partition``.

    >>> _ends_group("a.jsonl", 10**9, IngestConfig())  # a file of an eighth of the byte cap or more ends one
    True
    """
    p = GROUPS_PER_CAP * max(size / ingest.partition_bytes, 1 / ingest.files_per_partition)
    u = int.from_bytes(hashlib.blake2b(rel.encode("utf-8", "surrogateescape"), digest_size=8).digest(), "little")
    return u < p * 2**64


def _group(index: int, i: int, root: str, group: list[tuple[str, int, str]]) -> Partition:
    formats = {fmt for _, _, fmt in group}
    fmt = formats.pop() if len(formats) == 1 else "mixed"
    rels = tuple(rel for rel, _, _ in group)
    common = "/".join(os.path.commonprefix([r.split("/")[:-1] for r in rels])) or "."
    return Partition(index=index, input_index=i, format=fmt, path=root,
                     source=text_name(rels[0] if len(rels) == 1 else common),
                     files=rels, size=sum(s for _, s, _ in group),
                     formats=tuple(f for _, _, f in group) if fmt == "mixed" else ())


def _check_text_field(i: int, inp: InputConfig, root: str, rel: str) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    full = storage.join(root, rel)
    try:
        names = pq.ParquetFile(storage.source(full)).schema_arrow.names
    except (pa.ArrowException, OSError):
        return  # unreadable: its reader reports it as a reject
    if inp.text_field not in names:
        raise ConfigError(f"inputs[{i}].text_field={inp.text_field!r}: {full} has no such column; its columns are "
                          f"{', '.join(names)}. Set text_field (and id_field, url_field) to the right columns.")


def _ranges(root: str, rel: str, size: int, fmt: str, ingest: IngestConfig) -> list[dict] | None:
    """Partition fields (without index/input_index) of the ranges a large file is cut into; None for a file
    read whole (small, compressed, not Parquet or JSONL, or an unreadable footer)."""
    if fmt not in ("jsonl", "parquet"):
        return None
    full = storage.join(root, rel)
    base = dict(format=fmt, path=full, source=text_name(rel))
    if fmt == "parquet":
        return _parquet_ranges(full, size, base, ingest)
    step = _jsonl_step(full, size, ingest)
    if step is None or size <= step:
        return None
    return [dict(base, start=start, end=-1 if start + step >= size else start + step, size=min(step, size - start))
            for start in range(0, size, step)]


def _jsonl_step(full: str, size: int, ingest: IngestConfig) -> int | None:
    """Bytes per range of a plain JSONL file: ``partition_bytes``, or fewer when its first 64 KiB say that many
    bytes hold more than ``partition_docs`` lines (tiny records); None for a compressed file (read whole)."""
    if size <= min(ingest.partition_bytes, ingest.partition_docs * 16):  # too small to matter either way
        return ingest.partition_bytes
    with storage.open_input(full) as f:
        head = f.read(JSONL_PROBE)
    if codec_of(head[:4]) != "none":
        return None
    lines = head.count(b"\n")
    per_line = len(head) / lines if lines else size
    return int(min(ingest.partition_bytes, max(4096, ingest.partition_docs * per_line)))


def _parquet_ranges(full: str, size: int, base: dict, ingest: IngestConfig) -> list[dict] | None:
    """Rows ``[start, end)`` of at most ``partition_docs`` rows and about ``partition_bytes`` (compressed), cut
    at row-group boundaries for bytes and inside a row group for rows; None for a file read whole."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        meta = pq.ParquetFile(storage.source(full)).metadata
    except (pa.ArrowException, OSError):
        return None  # unreadable: read whole, its reader reports it as one reject
    cuts, acc_bytes, acc_rows, row = [0], 0, 0, 0  # the first row of each range
    for g in range(meta.num_row_groups):
        rg = meta.row_group(g)
        n, nbytes = rg.num_rows, sum(rg.column(c).total_compressed_size for c in range(meta.num_columns))
        at = row
        while acc_rows + (row + n - at) > ingest.partition_docs:  # a cut inside the row group
            at += ingest.partition_docs - acc_rows
            cuts.append(at)
            acc_rows, acc_bytes = 0, 0
        acc_rows += row + n - at
        acc_bytes += nbytes
        row += n
        if acc_bytes >= ingest.partition_bytes and g + 1 < meta.num_row_groups:
            cuts.append(row)
            acc_rows, acc_bytes = 0, 0
    cuts = sorted(set(c for c in cuts if c < row))
    if len(cuts) <= 1:
        return None
    bounds = cuts + [row]
    out, covered = [], 0
    for k in range(len(cuts)):
        last = k == len(cuts) - 1
        n = size - covered if last else size * (bounds[k + 1] - bounds[k]) // max(row, 1)  # bytes, by rows
        covered += n
        out.append(dict(base, start=bounds[k], end=-1 if last else bounds[k + 1], size=n))
    return out


def files_of(part: Partition) -> list[str]:
    """The absolute paths of the files a partition reads."""
    return [storage.join(part.path, f) for f in part.files] if part.files else [part.path]


def content_hash(path: str) -> str:
    """SHA-256 of a file's bytes, read in 1 MiB blocks (~1.2 GB/s with the CPU's SHA instructions)."""
    h = hashlib.sha256()
    with storage.open_input(path) as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def fingerprint(part: Partition, hashes: dict[str, tuple[int, str]] | None = None,
                on_file=None) -> dict:
    """What a partition covers: its place in the input, and one SHA-256 over its files' names, sizes and
    content hashes.

    A completed partition is reused only when its fingerprint is unchanged, so an input file that
    was added, removed, grown or rewritten is read again, even with the same size and modification
    time. ``hashes``: path -> (size, ``content_hash``) of the files cut into ranges, filled in, so that
    a file split into many partitions is read once; ``on_file(source, path, size, sha256)`` is called
    for each file (the run's input listing).
    """
    digest = hashlib.sha256()
    total = 0
    names = part.files if part.files else (part.source,)
    for name, full in zip(names, files_of(part)):
        known = hashes.get(full) if hashes is not None else None  # (a stored object's: its listing's tag)
        if known is None:
            known = storage.content_id(full) if storage.is_url(full) else (os.stat(full).st_size, content_hash(full))
            if hashes is not None and not part.files:
                hashes[full] = known
        size, sha = known
        total += size
        digest.update(f"{name}\0{size}\0{sha}\n".encode("utf-8", "surrogateescape"))
        if on_file is not None:
            on_file(text_name(name), text_name(full), size, sha)
    return {"format": part.format, "source": part.source, "start": part.start, "end": part.end,
            "files": len(names), "bytes": total, "sha256": digest.hexdigest()}
