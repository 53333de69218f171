"""Read one partition into ``Doc`` records, and everything unreadable into ``Reject`` records.

One reader per format: ``read_jsonl`` (plain, gzip, zstd; a plain file may be a byte range),
``read_parquet`` (a range of row groups), ``read_text`` (one document per file) and ``read_warc`` (HTML
responses of a .warc / .warc.gz); ``read`` dispatches on ``Partition.format``. Every reader keeps one
contract: ids (``Doc.source``, ``Doc.locator``) do not depend on partitioning; nothing is lost silently (a
bad record, or the break of a truncated stream, is a ``Reject`` naming what and where); for uncompressed
JSONL and text the ``raw_bytes`` of a partition's Docs and Rejects add up to the bytes it owns; every
document records how it was decoded (``lab.io.decoding``), undecodable bytes replaced and counted;
records over ``ingest.max_doc_bytes`` are rejected without being held in memory; and readers stream, so
memory is bounded by the chunk size and ``max_doc_bytes``, not the file size.
"""

from __future__ import annotations

import io
import json
import os
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

from lab.doc import Doc
from lab.io import storage
from lab.io.decoding import UTF8_BOM, bom, decode_file, decode_utf8, decode_web
from lab.io.inputs import IngestConfig, InputConfig
from lab.io.listing import text_name
from lab.io.partitions import Partition, codec_of

CHUNK = 1 << 20  # bytes read from disk at a time
BINARY_PROBE = 8192  # a text file with a NUL byte in its first 8 KiB is binary
HTML_TYPES = ("text/html", "application/xhtml+xml")
HTML_SUFFIXES = (".html", ".htm", ".xhtml")


@dataclass(slots=True)
class Reject:
    """Input that could not become a document; the lead's writer stores it in ``rejects/``."""

    source: str  # the file, relative to its input root
    locator: int  # where in it (same unit as Doc.locator; for a broken stream, the offset reached)
    reason: str  # human readable: what was wrong, where, and the fix when there is one
    raw_bytes: int  # bytes of input this reject accounts for


def read(part: Partition, inp: InputConfig, ingest: IngestConfig) -> Iterator[Doc | Reject]:
    """Docs and Rejects of one partition, in input order: a range of one file, or whole files one after another."""
    if not part.files:
        return READERS[part.format](part, inp, ingest)
    return _whole_files(part, inp, ingest)


def _whole_files(part: Partition, inp: InputConfig, ingest: IngestConfig) -> Iterator[Doc | Reject]:
    """Each file of a whole-file partition by its format's reader. A file removed or made unreadable since it
    was listed is a Reject, not a failed task; any other I/O error (EIO, a stale network handle) fails the
    task, which is retried and then quarantined like any partition."""
    for rel, fmt in part.whole_files():
        full = storage.join(part.path, rel)
        try:
            size = storage.size(full)
            with storage.open_input(full):
                pass
        except (FileNotFoundError, PermissionError, IsADirectoryError) as e:
            rel = text_name(rel)
            yield Reject(rel, 0, f"{rel}: cannot be read ({e.strerror or e}); it was removed or its permissions "
                         "changed since the run listed it: restore it, or rerun to list the inputs again", 0)
            continue
        yield from READERS[fmt](Partition(part.index, part.input_index, fmt, full, text_name(rel), size=size), inp,
                                ingest)


# --- JSON escapes ----------------------------------------------------------------------------------

_SURROGATE = re.compile("[\ud800-\udfff]")


def _scrub(s: str) -> tuple[str, int]:
    """Replace lone surrogates (from JSON escapes) by U+FFFD; returns the text and how many."""
    if _SURROGATE.search(s) is None:
        return s, 0
    return _SURROGATE.subn("\ufffd", s)


# --- byte streams ----------------------------------------------------------------------------------


class _Broken(Exception):
    """A compressed stream ended in error; the message says which compression and why."""


def _codec(f: io.BufferedReader) -> str:
    """``gzip``, ``zstd`` or ``none`` from the first bytes of ``f`` (not its name); does not move ``f``."""
    return codec_of(f.peek(4)[:4])


def _chunks(f: io.BufferedReader, codec: str) -> Iterator[bytes]:
    """Decompressed chunks of the rest of ``f``; a broken stream raises _Broken after its good bytes."""
    if codec == "gzip":
        return _gunzip(f)
    if codec == "zstd":
        return _unzstd(f)
    return iter(lambda: f.read(CHUNK), b"")


def _gunzip(f: io.BufferedReader) -> Iterator[bytes]:
    """Multi-member gzip; NUL padding between members is ignored, truncation and bad data raise _Broken."""
    d = None
    while chunk := f.read(CHUNK):
        data = chunk
        while True:
            if d is None:
                data = data.lstrip(b"\0")
                if not data:
                    break
                d = zlib.decompressobj(31)
            try:
                out = d.decompress(data, CHUNK)  # capped: a small chunk may inflate a lot
            except zlib.error as e:
                raise _Broken(f"gzip data error ({e})") from None
            if out:
                yield out
            if d.eof:
                data, d = d.unused_data, None
                continue
            data = d.unconsumed_tail
            if not data and len(out) < CHUNK:
                break
    if d is not None:
        try:
            out = d.flush()
        except zlib.error as e:
            raise _Broken(f"gzip data error ({e})") from None
        if out:
            yield out
        if not d.eof:
            raise _Broken("gzip stream truncated (ended before the end-of-stream marker)")


def _unzstd(f: io.BufferedReader) -> Iterator[bytes]:
    """Multi-frame zstd in bounded chunks; truncation and bad data raise _Broken.

    zstandard's stream reader ends quietly at a truncated frame, so the frame and block headers
    are walked first (a few bytes per 128 KiB block) to learn whether the file is complete.
    """
    import zstandard

    start = f.tell()
    truncated = _zstd_truncation(f)
    f.seek(start)
    reader = zstandard.ZstdDecompressor().stream_reader(f, read_across_frames=True, closefd=False)
    try:
        while chunk := reader.read(CHUNK):
            yield chunk
    except zstandard.ZstdError as e:
        raise _Broken(f"zstd data error ({e})") from None
    if truncated:
        raise _Broken(truncated)


_ZSTD_FRAME = 0xFD2FB528


def _zstd_truncation(f: io.BufferedReader) -> str:
    """Why the zstd frames from the current position do not end exactly at the end of the file, or ""."""
    pos = f.tell()
    size = f.seek(0, os.SEEK_END)
    short = f"zstd stream truncated (the file ends inside the frame that starts at compressed byte {{}}, " \
            f"{size} bytes in all)"
    while pos < size:
        frame = pos
        f.seek(pos)
        head = f.read(18)
        if len(head) < 5:
            return short.format(frame)
        magic = int.from_bytes(head[:4], "little")
        if magic & 0xFFFFFFF0 == 0x184D2A50:  # skippable frame: magic, 4-byte size, data
            pos += 8 + int.from_bytes(head[4:8], "little")
            continue
        if magic != _ZSTD_FRAME:
            return ""  # not a frame: the decompressor reports it as a data error
        fhd = head[4]
        single = (fhd >> 5) & 1
        pos += 5 + (0 if single else 1) + (0, 1, 2, 4)[fhd & 3] + ((1 if single else 0), 2, 4, 8)[fhd >> 6]
        while True:
            f.seek(pos)
            block = f.read(3)
            if len(block) < 3:
                return short.format(frame)
            v = int.from_bytes(block, "little")
            pos += 3 + (1 if (v >> 1) & 3 == 1 else v >> 3)  # RLE blocks store one byte
            if v & 1:
                break
        pos += 4 if (fhd >> 2) & 1 else 0
    return short.format(frame) if pos > size else ""


class _Stream(io.RawIOBase):
    """A read-only file over decompressed chunks that stops at a break instead of raising.

    fastwarc reads ahead, so an exception from the stream would lose the complete records it
    already buffered; ending the stream lets it return them, and ``error`` keeps the reason.
    """

    def __init__(self, chunks: Iterator[bytes]):
        self._chunks = chunks
        self._buf = b""
        self._at = 0
        self.pos = 0  # decompressed bytes delivered
        self.error = ""

    def readable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def readinto(self, b) -> int:
        while self._at >= len(self._buf):
            try:
                self._buf, self._at = next(self._chunks), 0
            except StopIteration:
                return 0
            except _Broken as e:
                self.error = str(e)
                self._chunks = iter(())
                return 0
        n = min(len(b), len(self._buf) - self._at)
        b[:n] = self._buf[self._at:self._at + n]
        self._at += n
        self.pos += n
        return n


# --- JSONL -----------------------------------------------------------------------------------------


def read_jsonl(part: Partition, inp: InputConfig, ingest: IngestConfig) -> Iterator[Doc | Reject]:
    """One document per line; a plain file may be read as the byte range ``[start, end)``."""
    where = part.source
    with storage.open_input(part.path) as f:
        codec = _codec(f)
        first, stop = 0, None
        if codec == "none":  # only plain files are split into byte ranges
            first = _first_line_at(f, part.start)
            stop = None if part.end == -1 else part.end
            f.seek(first)
        for off, line, size, broken in _lines(_chunks(f, codec), first, stop, ingest.max_doc_bytes):
            if broken:
                yield Reject(part.source, off, f"{where}: {broken} at decompressed byte {off}"
                             + (f"; the incomplete line before it ({size} bytes) is dropped" if size else "")
                             + f". Re-create or re-download the {codec} file.", size)
            elif line is None:
                yield Reject(part.source, off, f"{where} byte {off}: document of {size} bytes exceeds "
                             f"ingest.max_doc_bytes={ingest.max_doc_bytes}", size)
            else:
                yield _json_doc(part, inp, off, line)


def _first_line_at(f: io.BufferedReader, start: int) -> int:
    """Offset of the first line that begins at or after ``start`` (a line begins after a newline)."""
    if start <= 0:
        return 0
    f.seek(start - 1)
    pos = start - 1
    while chunk := f.read(CHUNK):
        i = chunk.find(b"\n")
        if i >= 0:
            return pos + i + 1
        pos += len(chunk)
    return pos


def _lines(chunks: Iterator[bytes], offset: int, stop: int | None,
           limit: int) -> Iterator[tuple[int, bytes | None, int, str]]:
    """(offset, line incl. newline, size, "") per line starting before ``stop``.

    A line longer than ``limit`` comes as (offset, None, size, "") without being held in memory;
    a broken stream ends with (offset reached, None, bytes of the incomplete line, reason).
    """
    buf = bytearray()
    at = 0  # start of the current line in buf
    skipping = 0  # > 0: bytes seen so far of a line longer than limit
    try:
        for chunk in chunks:
            if skipping:
                i = chunk.find(b"\n")
                if i < 0:
                    skipping += len(chunk)
                    continue
                skipping += i + 1
                yield offset, None, skipping, ""
                offset += skipping
                skipping = 0
                chunk = chunk[i + 1:]
            if at:
                del buf[:at]
                at = 0
            buf += chunk
            while (i := buf.find(b"\n", at)) >= 0:
                if stop is not None and offset >= stop:
                    return
                line = bytes(buf[at:i + 1])
                size = len(line)
                if size > limit:
                    yield offset, None, size, ""
                else:
                    yield offset, line, size, ""
                offset += size
                at = i + 1
            if stop is not None and offset >= stop:
                return
            if len(buf) - at > limit:
                skipping = len(buf) - at
                buf.clear()
                at = 0
    except _Broken as e:
        tail = skipping or len(buf) - at
        yield offset + tail, None, tail, str(e)
        return
    if skipping:
        yield offset, None, skipping, ""
    elif len(buf) > at and (stop is None or offset < stop):
        yield offset, bytes(buf[at:]), len(buf) - at, ""  # last line without a newline


def _json_doc(part: Partition, inp: InputConfig, off: int, line: bytes) -> Doc | Reject:
    where = f"{part.source} byte {off}"
    size = len(line)  # a BOM included: it is part of the file's bytes
    source = "default"
    if line.startswith(UTF8_BOM):  # a file's first line, or the first of a file concatenated to another
        line, source = line[len(UTF8_BOM):], "bom"
    s, bad = decode_utf8(line)
    try:
        obj = json.loads(s)
    except json.JSONDecodeError as e:
        if not s.strip():
            return Reject(part.source, off, f"{where}: blank line, expected a JSON object", size)
        msg = e.msg.removesuffix(" at")  # "Invalid control character at"
        hint = ""
        if s.lstrip()[:1] in ("[", "]", "}") or (s.strip() == "{"):
            hint = "; the file looks like a JSON array or pretty-printed JSON: JSONL needs one object per line"
        return Reject(part.source, off, f"{where}: invalid JSON ({msg} at column {e.colno}){hint}", size)
    except (ValueError, RecursionError) as e:  # nesting too deep, an integer of thousands of digits
        return Reject(part.source, off, f"{where}: unreadable JSON ({type(e).__name__}: {str(e)[:120]})", size)
    if not isinstance(obj, dict):
        hint = "; the line is a JSON array: JSONL needs one object per line (`jq -c '.[]'` splits an array)" \
            if isinstance(obj, list) else ""
        return Reject(part.source, off, f"{where}: JSON {type(obj).__name__} where an object was expected{hint}", size)
    if inp.text_field not in obj:
        keys = ", ".join(map(repr, list(obj)[:20])) or "none"
        return Reject(part.source, off, f"{where}: no {inp.text_field!r} field; keys present: {keys}. "
                      f"Set inputs[{part.input_index}].text_field to the key that holds the text", size)
    text = obj[inp.text_field]
    if not isinstance(text, str):
        return Reject(part.source, off, f"{where}: field {inp.text_field!r} is a {type(text).__name__}, "
                      "not a string", size)
    rid = obj.get(inp.id_field)
    rid = "" if rid is None else str(rid)
    url = obj.get(inp.url_field)
    url = url if isinstance(url, str) else ""
    lone = 0
    if b"\\ud" in line or b"\\uD" in line:  # only a \uD800-\uDFFF escape can leave a lone surrogate
        text, lone = _scrub(text)
        rid, url = _scrub(rid)[0], _scrub(url)[0]
    return Doc(source=part.source, locator=off, text=text, raw_bytes=size, url=url, record_id=rid,
               decode_errors=bad + lone, encoding_source=source, is_html=inp.html)


# --- Parquet ---------------------------------------------------------------------------------------


def read_parquet(part: Partition, inp: InputConfig, ingest: IngestConfig) -> Iterator[Doc | Reject]:
    """One document per row of rows ``[start, end)`` (-1: to the end), read 1,024 at a time from the row groups
    that hold them; locator = row index in the file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    fix = "re-create the file or remove it from the inputs"
    try:
        pf = pq.ParquetFile(storage.source(part.path))
        meta = pf.metadata
        names = pf.schema_arrow.names
    except (pa.ArrowException, OSError) as e:
        yield Reject(part.source, 0, f"{part.source}: not a readable Parquet file ({e}); {fix}", part.size)
        return
    start, end = part.start, meta.num_rows if part.end == -1 else part.end
    if inp.text_field not in names:
        yield Reject(part.source, start, f"{part.source}: no column {inp.text_field!r}; columns present: "
                     f"{', '.join(names)}. Set inputs[{part.input_index}].text_field to the text column",
                     part.size)
        return
    text_type = pf.schema_arrow.field(inp.text_field).type
    if pa.types.is_dictionary(text_type):
        text_type = text_type.value_type
    binary = pa.types.is_binary(text_type) or pa.types.is_large_binary(text_type)
    if not (binary or pa.types.is_string(text_type) or pa.types.is_large_string(text_type)):
        for row, batch in _row_batches(pf, [inp.text_field], start, end):
            yield from _wrong_type_rows(part, inp, pf, text_type, row, batch.column(0))
        return
    # bytes of unknown charset: an HTML page is decoded as a browser would (its <meta>, detection); strings are UTF-8
    web = binary and inp.html
    columns = list(dict.fromkeys(c for c in (inp.text_field, inp.id_field, inp.url_field) if c in names))
    try:
        for row, batch in _row_batches(pf, columns, start, end):
            col = batch.column(inp.text_field)
            if pa.types.is_dictionary(col.type):
                col = col.dictionary_decode()
            texts = col.cast(pa.large_binary()).to_pylist()  # bytes: malformed UTF-8 is counted, not fatal
            ids = _strings(batch, inp.id_field)
            urls = _strings(batch, inp.url_field)
            for k, raw in enumerate(texts):
                yield _row_doc(part, inp, ingest, row + k, raw, ids[k], urls[k], web)
    except _BadGroup as e:
        g, first = e.args
        left = sum(_rg_bytes(meta, h) for h in range(g, meta.num_row_groups) if _group_rows(meta, h)[0] < end)
        yield Reject(part.source, first, f"{part.source}: row group {g} (rows from {first}) cannot be read "
                     f"({e.__cause__}); rows {first}.. of this partition are skipped. {fix}", left)


class _BadGroup(Exception):
    """A row group that cannot be read: (its index, the first row of the partition it holds)."""


def _group_rows(meta, g: int) -> tuple[int, int]:
    """[first, end) rows of row group ``g`` in the file."""
    first = sum(meta.row_group(h).num_rows for h in range(g))
    return first, first + meta.row_group(g).num_rows


def _row_batches(pf, columns: list[str], start: int, end: int) -> Iterator[tuple[int, object]]:
    """(first row, batch) of rows ``[start, end)``: the row groups holding them, 1,024 rows at a time, sliced to
    the range (a partition may begin or end inside a row group)."""
    import pyarrow as pa

    meta, first = pf.metadata, 0
    for g in range(meta.num_row_groups):
        n = meta.row_group(g).num_rows
        lo, hi = max(start, first), min(end, first + n)
        if lo < hi:
            row = first
            try:
                for batch in pf.iter_batches(batch_size=1024, row_groups=[g], columns=columns, use_threads=False):
                    a, b = max(lo - row, 0), min(hi - row, batch.num_rows)
                    if a < b:
                        yield row + a, batch.slice(a, b - a)
                    row += batch.num_rows
                    if row >= hi:
                        break
            except (pa.ArrowException, OSError) as e:
                raise _BadGroup(g, max(row, lo)) from e
        first += n
        if first >= end:
            break


def _rg_bytes(meta, g: int) -> int:
    rg = meta.row_group(g)
    return sum(rg.column(c).total_compressed_size for c in range(rg.num_columns))


def _strings(batch, name: str) -> list[str]:
    if name not in batch.schema.names:
        return [""] * batch.num_rows
    return ["" if v is None else _scrub(str(v))[0] for v in batch.column(name).to_pylist()]


def _row_doc(part: Partition, inp: InputConfig, ingest: IngestConfig, row: int, raw: bytes | None,
             rid: str, url: str, web: bool = False) -> Doc | Reject:
    where = f"{part.source} row {row}"
    if raw is None:
        return Reject(part.source, row, f"{where}: {inp.text_field!r} is null, not a string", 0)
    if len(raw) > ingest.max_doc_bytes:
        return Reject(part.source, row, f"{where}: document of {len(raw)} bytes exceeds "
                      f"ingest.max_doc_bytes={ingest.max_doc_bytes}", len(raw))
    if web:
        text, bad, encoding, source = decode_web(raw, html=True)
        return Doc(source=part.source, locator=row, text=text, raw_bytes=len(raw), url=url, record_id=rid,
                   decode_errors=bad, encoding=encoding, encoding_source=source, is_html=True)
    text, bad = decode_utf8(raw)
    return Doc(source=part.source, locator=row, text=text, raw_bytes=len(raw), url=url, record_id=rid,
               decode_errors=bad, is_html=inp.html)


def _wrong_type_rows(part: Partition, inp: InputConfig, pf, text_type, row: int, col) -> Iterator[Reject]:
    """One Reject per row of a text column that holds no text (numbers, lists, ...), each naming the row, the
    value and the fix."""
    import pyarrow as pa

    strings = [f.name for f in pf.schema_arrow if pa.types.is_string(f.type) or pa.types.is_large_string(f.type)
               or (pa.types.is_dictionary(f.type) and pa.types.is_string(f.type.value_type))]
    fix = (f"set inputs[{part.input_index}].text_field to the column that holds the text"
           + (f" (string columns: {', '.join(strings)})" if strings else " (the file has no string column)"))
    sizes = _value_sizes(col)
    for k, v in enumerate(col.to_pylist()):
        yield Reject(part.source, row + k, f"{part.source} row {row + k}: {inp.text_field!r} is a {text_type} "
                     f"value ({str(v)[:40]}), not a string; {fix}", sizes[k])


def _value_sizes(col) -> list[int]:
    """Bytes each value of a column stands for (its width, or its text's length for variable-size values)."""
    import pyarrow as pa

    if pa.types.is_primitive(col.type) and not pa.types.is_boolean(col.type):
        return [0 if v is None else col.type.bit_width // 8 for v in col.to_pylist()]
    return [0 if v is None else len(str(v).encode("utf-8", "surrogatepass")) for v in col.to_pylist()]


# --- plain text ------------------------------------------------------------------------------------


def read_text(part: Partition, inp: InputConfig, ingest: IngestConfig) -> Iterator[Doc | Reject]:
    """One document from the file ``part.path``: UTF-8, or UTF-16 with its BOM; an HTML page (``.html``,
    ``.htm``, or ``html: true``) decoded as a browser decodes it (``decode_web``: BOM, ``<meta>``, detection),
    like a WARC response. source = the file's relative path, locator 0. A file with a NUL byte in its first
    ``BINARY_PROBE`` bytes (and no UTF-16 BOM) is binary: a Reject."""
    rel = part.source
    size = storage.size(part.path)
    if size > ingest.max_doc_bytes:
        yield Reject(rel, 0, f"{rel}: document of {size} bytes exceeds ingest.max_doc_bytes={ingest.max_doc_bytes}",
                     size)
        return
    with storage.open_input(part.path) as f:
        data = f.read(ingest.max_doc_bytes + 1)
    mark = bom(data)
    nul = data.find(b"\0", 0, BINARY_PROBE) if mark is None or mark[0] == "utf-8" else -1  # UTF-16 text has NULs
    if nul >= 0:
        yield Reject(rel, 0, f"{rel}: binary file (NUL byte at offset {nul}); remove it from the "
                     "inputs or give the directory a narrower glob", len(data))
        return
    html = inp.html or rel.lower().endswith(HTML_SUFFIXES)
    # a page saved to disk is decoded as a browser (and the WARC reader) would: BOM, <meta>, detection
    text, bad, encoding, source = decode_web(data, html=True) if html else decode_file(data)
    yield Doc(source=rel, locator=0, text=text, raw_bytes=len(data), decode_errors=bad, encoding=encoding,
              encoding_source=source, is_html=html)


# --- WARC ------------------------------------------------------------------------------------------


def read_warc(part: Partition, inp: InputConfig, ingest: IngestConfig) -> Iterator[Doc | Reject]:
    """Response records of a .warc or .warc.gz; locator = record offset in the decompressed stream.

    HTML responses become documents to extract, other ``text/*`` responses plain-text documents, their
    bodies decoded as browsers decode them (``lab.io.decoding.decode_web``: BOM, header, <meta>, detection);
    responses of any other content type (images, PDFs, ...) are rejects that name the type. Records
    that carry no response (warcinfo, request, metadata, revisit) are protocol records, not input
    documents, and are skipped; every record is read to its end so that a truncated one is
    reported rather than lost. The Reject at
    a break has ``raw_bytes=0``: how much of the file is lost after it cannot be known.
    """
    from fastwarc.warc import ArchiveIterator, WarcRecordType

    with storage.open_input(part.path) as f:
        codec = _codec(f)
        stream = _Stream(_chunks(f, codec))
        last = -1  # offset of the last record read whole
        failure = ""
        try:
            for rec in ArchiveIterator(stream, parse_http=False):
                pos = rec.stream_pos
                length = rec.headers.get("Content-Length") or ""
                if not length.isdigit():
                    failure = f"record at byte {pos} has no valid Content-Length ({length!r})"
                    break
                length = int(length)
                url = rec.headers.get("WARC-Target-URI") or ""
                if rec.record_type == WarcRecordType.response and length <= ingest.max_doc_bytes:
                    block = rec.reader.read()
                    if len(block) < length:
                        failure = f"record at byte {pos} truncated ({len(block)} of {length} bytes)"
                        break
                    out = _warc_doc(part, rec, block, pos, url, length)
                    if out is not None:
                        yield out
                elif rec.record_type == WarcRecordType.response:
                    rec.parse_http(quirks_mode=True)
                    html = (rec.http_content_type or "").lower() in HTML_TYPES
                    want = rec.content_length
                    if _drain(rec) < want:
                        failure = f"record at byte {pos} truncated"
                        break
                    yield Reject(part.source, pos, f"{part.source} byte {pos} ({url}): {'document' if html else 'response'} "
                                 f"of {length} bytes exceeds ingest.max_doc_bytes={ingest.max_doc_bytes}", length)
                elif _drain(rec) < length:
                    failure = f"record at byte {pos} truncated"
                    break
                last = pos
        except (OSError, ValueError) as e:
            failure = f"invalid WARC data after the record at byte {last} ({e})" if last >= 0 \
                else f"not a WARC file ({e})"
        if stream.error or failure:
            reason = "; ".join(x for x in (stream.error, failure) if x)
            unit = "byte" if codec == "none" else "decompressed byte"
            yield Reject(part.source, stream.pos, f"{part.source}: {reason}; reading stopped at {unit} {stream.pos}, "
                         "the records before it were kept. Re-create or re-download the file.", 0)


READERS = {"jsonl": read_jsonl, "parquet": read_parquet, "text": read_text, "warc": read_warc}


def _drain(rec) -> int:
    """Read the rest of a record's block in chunks; returns the bytes read."""
    n = 0
    while data := rec.reader.read(CHUNK):
        n += len(data)
    return n


def _warc_doc(part: Partition, rec, block: bytes, pos: int, url: str, length: int) -> Doc | Reject | None:
    """The Doc of a text response block; a Reject for other content or a broken HTTP head."""
    from fastwarc.warc import WarcRecord

    head = (b"WARC/1.1\r\nWARC-Type: response\r\nContent-Type: application/http; msgtype=response\r\n"
            b"Content-Length: %d\r\n\r\n" % len(block))
    try:
        http = WarcRecord.from_bytes(head + block + b"\r\n\r\n")
        http.parse_http(auto_decode="all", quirks_mode=True)
        body = http.reader.read()
    except (OSError, ValueError) as e:
        return Reject(part.source, pos, f"{part.source} byte {pos} ({url}): HTTP message cannot be parsed "
                      f"({e})", length)
    if http.http_headers is None or http.http_headers.status_code is None:
        return Reject(part.source, pos, f"{part.source} byte {pos} ({url}): response record without a valid "
                      "HTTP status line", length)
    ctype = (http.http_content_type or "").lower()
    if ctype not in HTML_TYPES and not ctype.startswith("text/"):
        return Reject(part.source, pos, f"{part.source} byte {pos} ({url}): response of content type "
                      f"{ctype or 'none'} is not a text document", length)
    html = ctype in HTML_TYPES
    text, bad, encoding, source = decode_web(body, http.http_headers.get("Content-Type") or "", html=html)
    return Doc(source=part.source, locator=pos, text=text, raw_bytes=length, url=url,
               record_id=rec.headers.get("WARC-Record-ID") or "", decode_errors=bad, encoding=encoding,
               encoding_source=source, is_html=html)
