"""Plan the partitions of a run: which bytes of which input file each Dask task reads.

``plan`` expands every ``InputConfig`` (a file, a directory walked recursively, or a glob)
into files, resolves ``format: auto`` by file extension, and cuts the files into partitions of
about ``ingest.partition_bytes``:

- plain JSONL larger than ``partition_bytes``: byte ranges ``[start, end)``; a range owns the
  lines whose first byte lies in it, so every line is read exactly once;
- Parquet: consecutive row groups adding up to about ``partition_bytes`` (compressed);
- compressed JSONL (gzip, zstd) and WARC: one partition per file (a stream cannot be entered
  in the middle);
- plain-text files: ``ingest.text_files_per_partition`` files per partition, one document each.

The list is deterministic (inputs in config order, files sorted by relative path), so a
partition's ``index`` and ``key`` name the same bytes on every machine and every re-run. What
is planned is not read here: a corrupt Parquet footer becomes one whole-file partition whose
reader reports it to ``rejects/``. Hidden files and directories (``.name``) are skipped.
"""

from __future__ import annotations

import glob
import hashlib
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from lab.config import IngestConfig, InputConfig
from lab.errors import ConfigError

JSONL_SUFFIXES = (".jsonl", ".json", ".ndjson")
COMPRESSION_SUFFIXES = (".gz", ".zst", ".zstd")
PARQUET_SUFFIXES = (".parquet", ".pq")
WARC_SUFFIXES = (".warc", ".warc.gz")
TEXT_SUFFIXES = (".txt", ".md", ".rst", ".text", ".html", ".htm")
GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


@dataclass(frozen=True)
class Partition:
    """One task's share of the input; see the module docstring for how files are cut."""

    index: int  # position in the global, deterministic partition list
    input_index: int  # which cfg.inputs entry
    format: str  # resolved: jsonl | parquet | text | warc
    path: str  # absolute path of the file (text: the input root directory)
    source: str  # path relative to the input root (text: the files' common directory, "." for the root)
    start: int = 0  # jsonl: byte offset; parquet: first row group; text: first file index
    end: int = -1  # exclusive; -1 = to the end
    files: tuple[str, ...] = ()  # text: the relative file paths of this partition
    size: int = 0  # bytes of input this partition covers (for progress and planning)

    @property
    def key(self) -> str:
        """Stable short name used for ``part-XXXXX`` files.

        >>> Partition(7, 0, "jsonl", "/d/a.jsonl", "a.jsonl").key
        '00007'
        """
        return f"{self.index:05d}"


def format_of(name: str) -> str | None:
    """The format a file name implies, or None when the extension says nothing.

    >>> [format_of(n) for n in ("a.jsonl.zst", "b.warc.gz", "c.parquet", "d.md", "e.csv")]
    ['jsonl', 'warc', 'parquet', 'text', None]
    """
    n = name.lower()
    for c in COMPRESSION_SUFFIXES:
        if n.endswith(c) and n[: -len(c)].endswith(JSONL_SUFFIXES):
            return "jsonl"
    if n.endswith(JSONL_SUFFIXES):
        return "jsonl"
    if n.endswith(PARQUET_SUFFIXES):
        return "parquet"
    if n.endswith(WARC_SUFFIXES):
        return "warc"
    if n.endswith(TEXT_SUFFIXES):
        return "text"
    return None


def codec_of(head: bytes) -> str:
    """``gzip``, ``zstd`` or ``none`` from a file's first bytes.

    >>> codec_of(b"\\x1f\\x8b\\x08\\x00"), codec_of(b'{"te')
    ('gzip', 'none')
    """
    return "gzip" if head.startswith(GZIP_MAGIC) else "zstd" if head.startswith(ZSTD_MAGIC) else "none"


def compression_of(path: str) -> str:
    """``gzip``, ``zstd`` or ``none``, from the file's first bytes (not its name)."""
    with open(path, "rb") as f:
        return codec_of(f.read(4))


def plan(inputs: Sequence[InputConfig], ingest: IngestConfig) -> list[Partition]:
    """The global, deterministic list of partitions for ``inputs``.

    Raises ConfigError when an input path does not exist or matches no file, or when two
    inputs yield the same file or the same relative source (their document ids would clash).
    """
    parts: list[Partition] = []
    owner: dict[str, int] = {}  # absolute path -> input index
    sources: dict[str, int] = {}  # relative source -> input index
    for i, inp in enumerate(inputs):
        files = list(_expand(i, inp))
        for root, rel, _ in files:
            full = os.path.join(root, rel)
            if full in owner:
                raise ConfigError(
                    f"inputs[{i}].path={inp.path!r} and inputs[{owner[full]}] both include {full}; "
                    "remove the overlap so every file is read once"
                )
            if rel in sources and sources[rel] != i:
                raise ConfigError(
                    f"inputs[{i}].path={inp.path!r} and inputs[{sources[rel]}] both contain a file named {rel!r} "
                    "relative to their roots, so their document ids would clash; list their common parent "
                    "directory as one input instead, or rename one of them"
                )
            owner[full] = i
            sources[rel] = i
        text = [(root, rel) for root, rel, fmt in files if fmt == "text"]
        for root, rel, fmt in files:
            if fmt != "text":
                for p in _split(root, rel, fmt, ingest, inp, i):
                    parts.append(Partition(index=len(parts), input_index=i, **p))
        per = ingest.text_files_per_partition
        for k in range(0, len(text), per):
            root, group = text[k][0], [rel for _, rel in text[k:k + per]]
            size = sum(os.path.getsize(os.path.join(root, r)) for r in group)
            common = "/".join(os.path.commonprefix([r.split("/")[:-1] for r in group])) or "."
            parts.append(Partition(index=len(parts), input_index=i, format="text", path=root, source=common,
                                   start=k, end=k + len(group), files=tuple(group), size=size))
    return parts


def _expand(i: int, inp: InputConfig) -> Iterator[tuple[str, str, str]]:
    """(root, relative path, format) of every file of input ``i``, sorted by relative path."""
    path = os.path.expanduser(inp.path)
    where = f"inputs[{i}].path={inp.path!r}"
    if glob.has_magic(path):
        root = _glob_root(path)
        matches = sorted(glob.glob(path, recursive=True))
        by_rel: dict[str, str | None] = {}  # "**" matches a directory and the files in it: keep each once
        for m in matches:
            if os.path.isfile(m):  # named by the pattern itself: an explicit format applies as is
                by_rel[os.path.relpath(m, root)] = inp.format if inp.format != "auto" else (format_of(m) or "text")
        for m in matches:
            if os.path.isdir(m):
                for r in _walk(m):
                    by_rel.setdefault(os.path.relpath(os.path.join(m, r), root), _dir_format(inp.format, r))
        found = list(by_rel.items())
        if not found:
            raise ConfigError(f"{where} matches no file (glob relative to {os.getcwd()}); "
                              "fix the pattern or remove the input")
    elif os.path.isdir(path):
        root = os.path.abspath(path)
        found = [(r, _dir_format(inp.format, r)) for r in _walk(root)]
        if not found:
            raise ConfigError(f"{where} is a directory with no files; point it at a directory with input files")
    elif os.path.isfile(path):
        full = os.path.abspath(path)
        root, rel = os.path.dirname(full), os.path.basename(full)
        fmt = inp.format if inp.format != "auto" else format_of(rel)
        if fmt is None:
            raise ConfigError(
                f"{where}: cannot tell the format of {rel!r} from its extension (known: "
                f"{', '.join(JSONL_SUFFIXES + PARQUET_SUFFIXES + WARC_SUFFIXES + TEXT_SUFFIXES)}, "
                f"JSONL also with {', '.join(COMPRESSION_SUFFIXES)}); set inputs[{i}].format to "
                "jsonl, parquet, text or warc"
            )
        found = [(rel, fmt)]
    else:
        raise ConfigError(f"{where} does not exist (relative paths are resolved from {os.getcwd()}); "
                          "fix the path or remove the input")
    wanted = [(rel, fmt) for rel, fmt in found if fmt is not None]
    if not wanted:
        raise ConfigError(f"{where} contains no {inp.format} files (files ending in "
                          f"{', '.join(_suffixes(inp.format))}); set inputs[{i}].format to match the files "
                          "or point the path at them")
    root = os.path.abspath(root)
    for rel, fmt in sorted(wanted):
        yield root, rel.replace(os.sep, "/"), fmt


def _dir_format(requested: str, name: str) -> str | None:
    """Format of a file met in a directory or glob: by extension, other files are text.

    An explicit jsonl/parquet/warc keeps only the files of that kind; explicit text keeps all.
    """
    by_ext = format_of(name)
    if requested == "auto":
        return by_ext or "text"
    if requested == "text":
        return "text"
    return requested if by_ext == requested else None


def _suffixes(fmt: str) -> tuple[str, ...]:
    return {"jsonl": JSONL_SUFFIXES, "parquet": PARQUET_SUFFIXES, "warc": WARC_SUFFIXES}.get(fmt, ("any",))


def _walk(root: str) -> list[str]:
    """Relative paths of the non-hidden files under ``root``, sorted."""
    out = []
    for d, dirs, names in os.walk(root):
        dirs[:] = [x for x in dirs if not x.startswith(".")]
        out += [os.path.relpath(os.path.join(d, n), root) for n in names
                if not n.startswith(".") and os.path.isfile(os.path.join(d, n))]
    return sorted(out)


def _glob_root(pattern: str) -> str:
    """The directory part of a glob before its first wildcard component."""
    head = []
    for part in pattern.split(os.sep):
        if glob.has_magic(part):
            break
        head.append(part)
    return os.path.abspath(os.sep.join(head) or ".")


def _split(root: str, rel: str, fmt: str, ingest: IngestConfig, inp: InputConfig, i: int) -> Iterator[dict]:
    """Partition fields (without index/input_index) for one non-text file."""
    full = os.path.join(root, rel)
    size = os.path.getsize(full)
    base = dict(format=fmt, path=full, source=rel)
    if fmt == "jsonl" and size > ingest.partition_bytes and compression_of(full) == "none":
        pb = ingest.partition_bytes
        for start in range(0, size, pb):
            last = start + pb >= size
            yield dict(base, start=start, end=-1 if last else start + pb, size=(size - start) if last else pb)
    elif fmt == "parquet":
        yield from _split_parquet(full, size, base, ingest.partition_bytes, inp.text_field, i)
    else:
        yield dict(base, size=size)


def _split_parquet(full: str, size: int, base: dict, partition_bytes: int, text_field: str, i: int) -> Iterator[dict]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(full)
        meta, names = pf.metadata, pf.schema_arrow.names
    except (pa.ArrowException, OSError):
        yield dict(base, size=size)  # unreadable: the reader reports it as one reject
        return
    if text_field not in names:  # a wrong column name is a config mistake, not bad data: stop before any work
        raise ConfigError(f"inputs[{i}].text_field={text_field!r}: {full} has no such column; its columns are "
                          f"{', '.join(names)}. Set text_field (and id_field, url_field) to the right columns.")
    rg_sizes = [sum(meta.row_group(g).column(c).total_compressed_size for c in range(meta.num_columns))
                for g in range(meta.num_row_groups)]
    groups, start, acc = [], 0, 0
    for g, s in enumerate(rg_sizes):
        acc += s
        if acc >= partition_bytes and g + 1 < len(rg_sizes):
            groups.append((start, g + 1, acc))
            start, acc = g + 1, 0
    if not groups:
        yield dict(base, size=size)
        return
    groups.append((start, -1, 0))
    covered = 0
    for s, e, n in groups:
        n = n if e != -1 else size - covered  # the last one also carries the footer
        covered += n
        yield dict(base, start=s, end=e, size=n)


def files_of(part: Partition) -> list[str]:
    """The absolute paths of the files a partition reads."""
    return [os.path.join(part.path, f) for f in part.files] if part.files else [part.path]


def content_hash(path: str) -> str:
    """SHA-256 of a file's bytes, read in 1 MiB blocks (~1.2 GB/s with the CPU's SHA instructions)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def fingerprint(part: Partition, hashes: dict[str, str] | None = None) -> dict:
    """What a partition covers: its place in the input and the size and content hash of its files.

    A completed partition is reused only when its fingerprint is unchanged, so an input file that
    was added, removed, grown or rewritten is read again, even with the same size and modification
    time. ``hashes``: path -> ``content_hash`` known so far in this run (filled in), so that a file
    split into many partitions is read once.
    """
    files = []
    for f in files_of(part):
        h = hashes.get(f) if hashes is not None else None
        if h is None:
            h = content_hash(f)
            if hashes is not None:
                hashes[f] = h
        files.append([f, os.stat(f).st_size, h])
    return {"format": part.format, "source": part.source, "start": part.start, "end": part.end, "files": files}
