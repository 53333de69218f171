"""read_jsonl: plain / gzip / zstd, byte ranges, every kind of bad line, conservation of bytes."""

from __future__ import annotations

import gzip
import json
import time
import tracemalloc

import pytest
import zstandard

from lab.config import IngestConfig, InputConfig
from lab.doc import Doc, doc_id
from lab.io.partitions import Partition, plan
from lab.io.readers import Reject, read


def make_lines(n: int) -> list[bytes]:
    """n JSON lines of varying length, with an id and a url field."""
    return [json.dumps({"id": f"r{i}", "url": f"https://x.org/{i}", "text": f"doc {i} " + "é" * (i % 37)},
                       ensure_ascii=False).encode() + b"\n" for i in range(n)]


def read_all(path, *, ingest=IngestConfig(), inp=None) -> tuple[list[Partition], list[Doc | Reject]]:
    inp = inp or InputConfig(str(path))
    parts = plan([inp], ingest)
    return parts, [o for p in parts for o in read(p, inp, ingest)]


def docs(out):
    return [o for o in out if isinstance(o, Doc)]


def rejects(out):
    return [o for o in out if isinstance(o, Reject)]


def offsets(lines: list[bytes]) -> list[int]:
    out, at = [], 0
    for line in lines:
        out.append(at)
        at += len(line)
    return out


def test_plain_jsonl_fields_ids_and_bytes(tmp_path):
    lines = make_lines(5)
    (tmp_path / "a.jsonl").write_bytes(b"".join(lines))
    _, out = read_all(tmp_path / "a.jsonl")
    assert rejects(out) == []
    d = docs(out)
    assert [x.locator for x in d] == offsets(lines)
    assert [x.raw_bytes for x in d] == [len(line) for line in lines]
    assert d[3].text == "doc 3 ééé" and d[3].record_id == "r3" and d[3].url == "https://x.org/3"
    assert d[3].source == "a.jsonl" and d[3].doc_id == doc_id("a.jsonl", offsets(lines)[3])
    assert not d[3].is_html and d[3].decode_errors == 0


@pytest.mark.parametrize("suffix,compress", [
    (".gz", gzip.compress),
    (".zst", lambda b: zstandard.ZstdCompressor().compress(b)),
])
def test_compressed_equals_plain(tmp_path, suffix, compress):
    data = b"".join(make_lines(300))
    (tmp_path / "p").mkdir()
    (tmp_path / "c").mkdir()
    (tmp_path / "p" / "a.jsonl").write_bytes(data)
    (tmp_path / "c" / ("a.jsonl" + suffix)).write_bytes(compress(data))
    _, plain = read_all(tmp_path / "p" / "a.jsonl")
    _, comp = read_all(tmp_path / "c" / ("a.jsonl" + suffix))
    assert rejects(comp) == []
    assert [(d.locator, d.text, d.raw_bytes) for d in docs(comp)] == [(d.locator, d.text, d.raw_bytes) for d in plain]
    assert sum(d.raw_bytes for d in comp) == len(data)  # decompressed bytes conserved


def test_multi_member_gzip_and_multi_frame_zstd(tmp_path):
    a, b = b"".join(make_lines(10)), b"".join(make_lines(7))
    (tmp_path / "m.jsonl.gz").write_bytes(gzip.compress(a) + gzip.compress(b))
    z = zstandard.ZstdCompressor()
    (tmp_path / "m.jsonl.zst").write_bytes(z.compress(a) + z.compress(b))
    for name in ("m.jsonl.gz", "m.jsonl.zst"):
        _, out = read_all(tmp_path / name)
        assert rejects(out) == [] and len(docs(out)) == 17
        assert docs(out)[10].locator == len(a)


def test_byte_ranges_read_each_line_once_with_the_same_ids(tmp_path):
    lines = make_lines(3000)
    lines[100] = b'{"text": "' + b"L" * 20000 + b'"}\n'  # a line spanning several ranges
    data = b"".join(lines)
    (tmp_path / "a.jsonl").write_bytes(data)
    _, whole = read_all(tmp_path / "a.jsonl")
    small = IngestConfig(partition_bytes=4096)
    parts, split = read_all(tmp_path / "a.jsonl", ingest=small)
    assert len(parts) > 50
    assert [(d.doc_id, d.text) for d in split] == [(d.doc_id, d.text) for d in whole]
    assert sorted(d.locator for d in split) == offsets(lines)  # every line exactly once
    # conservation per range: the lines whose first byte lies in [start, end)
    starts = offsets(lines)
    for p in parts:
        end = len(data) if p.end == -1 else p.end
        owned = sum(len(line) for s, line in zip(starts, lines) if p.start <= s < end)
        assert sum(o.raw_bytes for o in read(p, InputConfig(p.path), small)) == owned
    assert sum(o.raw_bytes for o in split) == len(data)


def test_range_boundary_exactly_at_a_line_start(tmp_path):
    line = b'{"text": "' + b"a" * (4096 - 13) + b'"}\n'  # each line is exactly 4096 bytes
    assert len(line) == 4096
    (tmp_path / "a.jsonl").write_bytes(line * 5)
    parts, out = read_all(tmp_path / "a.jsonl", ingest=IngestConfig(partition_bytes=4096))
    assert len(parts) == 5
    per = [[o.locator for o in read(p, InputConfig(p.path), IngestConfig())] for p in parts]
    assert per == [[0], [4096], [8192], [12288], [16384]]


def test_last_line_without_newline_is_a_document(tmp_path):
    data = b"".join(make_lines(3)) + b'{"text": "tail"}'
    (tmp_path / "a.jsonl").write_bytes(data)
    (tmp_path / "a.jsonl.gz").write_bytes(gzip.compress(data))
    for name in ("a.jsonl", "a.jsonl.gz"):
        _, out = read_all(tmp_path / name)
        assert rejects(out) == [] and docs(out)[-1].text == "tail"
        assert sum(o.raw_bytes for o in out) == len(data)


def test_bad_lines_are_rejected_and_reading_goes_on(tmp_path):
    good = make_lines(3)
    bad = [
        b'{"text": "unterminated\n',
        b"[1, 2, 3]\n",
        b'{"body": "x", "lang": "en"}\n',
        b'{"text": 42}\n',
        b'{"text": null}\n',
        b"\n",
    ]
    lines = [good[0], *bad, good[1], b'{"text": ""}\n', good[2]]
    data = b"".join(lines)
    (tmp_path / "a.jsonl").write_bytes(data)
    _, out = read_all(tmp_path / "a.jsonl")
    starts = offsets(lines)
    assert [type(o).__name__ for o in out] == ["Doc"] + ["Reject"] * 6 + ["Doc"] * 3
    r = rejects(out)
    assert [x.locator for x in r] == starts[1:7]
    assert [x.raw_bytes for x in r] == [len(b) for b in bad]
    assert "a.jsonl byte %d: invalid JSON" % starts[1] in r[0].reason
    assert "JSON list where an object was expected" in r[1].reason
    assert "no 'text' field; keys present: 'body', 'lang'" in r[2].reason
    assert "inputs[0].text_field" in r[2].reason
    assert "field 'text' is a int, not a string" in r[3].reason
    assert "is a NoneType" in r[4].reason
    assert "blank line" in r[5].reason
    empty = docs(out)[2]
    assert empty.text == "" and empty.raw_bytes == len(b'{"text": ""}\n')  # empty text is kept, not rejected
    assert sum(o.raw_bytes for o in out) == len(data)


def test_custom_fields(tmp_path):
    (tmp_path / "a.jsonl").write_bytes(b'{"content": "hi", "uid": 7, "link": "u"}\n')
    inp = InputConfig(str(tmp_path / "a.jsonl"), text_field="content", id_field="uid", url_field="link", html=True)
    _, out = read_all(tmp_path / "a.jsonl", inp=inp)
    (d,) = out
    assert (d.text, d.record_id, d.url, d.is_html) == ("hi", "7", "u", True)


def test_malformed_utf8_is_kept_and_counted_in_decode_errors(tmp_path):
    lines = [b'{"text": "caf\xc3\xa9 \xff\xfe ok \xc3"}\n', b'{"text": "fine"}\n', b'{"text": "\\ud800 x"}\n']
    (tmp_path / "a.jsonl").write_bytes(b"".join(lines))
    _, out = read_all(tmp_path / "a.jsonl")
    assert rejects(out) == []
    a, b, c = out
    assert a.text == "café \ufffd ok \ufffd" and a.decode_errors == 3 and a.raw_bytes == len(lines[0])
    assert b.decode_errors == 0
    assert c.text == "\ufffd x" and c.decode_errors == 1  # lone surrogate escape: not writable as UTF-8
    for d in out:
        d.text.encode("utf-8")  # every text can be written


def test_giant_document_rejected_in_bounded_memory(tmp_path):
    giant = b'{"text": "' + b"a" * 50_000_000 + b'"}\n'
    lines = [b'{"text": "before"}\n', giant, b'{"text": "after"}\n']
    path = tmp_path / "a.jsonl"
    with open(path, "wb") as f:
        for line in lines:
            f.write(line)
    ingest = IngestConfig(max_doc_bytes=1_000_000)
    (p,) = plan([InputConfig(str(path))], ingest)
    t0 = time.perf_counter()
    tracemalloc.start()
    out = list(read(p, InputConfig(str(path)), ingest))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert time.perf_counter() - t0 < 5
    assert peak < 8_000_000  # the 50 MB line is never held in memory
    assert [type(o).__name__ for o in out] == ["Doc", "Reject", "Doc"]
    r = out[1]
    assert (r.locator, r.raw_bytes) == (len(lines[0]), len(giant))
    assert r.reason == (f"a.jsonl byte {len(lines[0])}: document of {len(giant)} bytes exceeds "
                        "ingest.max_doc_bytes=1000000")
    assert out[2].text == "after"
    assert sum(o.raw_bytes for o in out) == sum(map(len, lines))


def test_giant_document_in_gzip_is_streamed(tmp_path):
    giant = b'{"text": "' + b"a" * 50_000_000 + b'"}\n'
    path = tmp_path / "a.jsonl.gz"
    path.write_bytes(gzip.compress(giant + b'{"text": "after"}\n', compresslevel=1))
    ingest = IngestConfig(max_doc_bytes=1_000_000)
    (p,) = plan([InputConfig(str(path))], ingest)
    tracemalloc.start()
    out = list(read(p, InputConfig(str(path)), ingest))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 8_000_000
    assert [type(o).__name__ for o in out] == ["Reject", "Doc"] and out[0].raw_bytes == len(giant)


def truncated_case(tmp_path, name: str, compress, cut: int):
    lines = make_lines(20000)
    data = b"".join(lines)
    blob = compress(data)
    (tmp_path / name).write_bytes(blob[:len(blob) - cut])
    _, out = read_all(tmp_path / name)
    return lines, out


@pytest.mark.parametrize("name,compress,word", [
    ("t.jsonl.gz", gzip.compress, "gzip"),
    ("t.jsonl.zst", lambda b: zstandard.ZstdCompressor().compress(b), "zstd"),
])
def test_truncated_stream_keeps_rows_before_the_break(tmp_path, name, compress, word):
    lines, out = truncated_case(tmp_path, name, compress, cut=len(compress(b"".join(make_lines(20000)))) // 3)
    d, r = docs(out), rejects(out)
    assert len(r) == 1 and out[-1] is r[0]  # exactly one Reject, at the end
    assert len(lines) // 3 < len(d) < len(lines)  # most rows before the break survive
    assert [x.locator for x in d] == offsets(lines)[:len(d)]  # a prefix, each line intact
    assert all(x.raw_bytes == len(lines[i]) for i, x in enumerate(d))
    reached = sum(x.raw_bytes for x in out)
    assert r[0].locator == reached  # the decompressed offset reached
    assert word in r[0].reason and "truncated" in r[0].reason and str(reached) in r[0].reason


def test_corrupt_gzip_data_is_a_reject_after_the_good_rows(tmp_path):
    data = b"".join(make_lines(20000))
    blob = bytearray(gzip.compress(data))
    blob[len(blob) // 2:len(blob) // 2 + 64] = b"\xff" * 64
    (tmp_path / "c.jsonl.gz").write_bytes(bytes(blob))
    _, out = read_all(tmp_path / "c.jsonl.gz")
    lines = make_lines(20000)
    intact = [d for d in docs(out) if d.locator < len(data) // 3]
    assert len(intact) > 1000 and [d.raw_bytes for d in intact] == [len(x) for x in lines[:len(intact)]]
    # the garbage may decode into a few broken lines first; the stream error ends the partition
    assert isinstance(out[-1], Reject) and "gzip data error" in out[-1].reason


def test_conservation_of_documents_over_a_directory(tmp_path):
    lines = make_lines(500)
    lines[7] = b"{broken\n"
    (tmp_path / "a.jsonl").write_bytes(b"".join(lines))
    (tmp_path / "b.jsonl.gz").write_bytes(gzip.compress(b"".join(lines[:50])))
    parts, out = read_all(tmp_path, ingest=IngestConfig(partition_bytes=4096))
    assert len(docs(out)) + len(rejects(out)) == 550  # every line is a Doc or a Reject
    assert len({d.doc_id for d in docs(out)}) == len(docs(out))  # ids unique across files


def test_document_just_over_the_limit(tmp_path):
    lines = [b'{"text": "a"}\n', b'{"text": "' + b"b" * 1000 + b'"}\n', b'{"text": "c"}\n']
    (tmp_path / "a.jsonl").write_bytes(b"".join(lines))
    _, out = read_all(tmp_path / "a.jsonl", ingest=IngestConfig(max_doc_bytes=1000))
    assert [type(o).__name__ for o in out] == ["Doc", "Reject", "Doc"]
    assert out[1].raw_bytes == 1013 and "document of 1013 bytes exceeds ingest.max_doc_bytes=1000" in out[1].reason
    _, out = read_all(tmp_path / "a.jsonl", ingest=IngestConfig(max_doc_bytes=1013))
    assert [type(o).__name__ for o in out] == ["Doc", "Doc", "Doc"]  # the limit itself is allowed


def test_lines_the_json_parser_cannot_hold_are_rejected_not_the_partition(tmp_path):
    good = make_lines(2)
    deep = b'{"text": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n"  # RecursionError in the parser
    huge = b'{"text": "x", "n": ' + b"9" * 5000 + b"}\n"  # ValueError: integer string too long
    lines = [good[0], deep, huge, good[1]]
    (tmp_path / "a.jsonl").write_bytes(b"".join(lines))
    _, out = read_all(tmp_path / "a.jsonl")
    assert [type(o).__name__ for o in out] == ["Doc", "Reject", "Reject", "Doc"]
    r = rejects(out)
    assert "unreadable JSON (RecursionError" in r[0].reason and "unreadable JSON (ValueError" in r[1].reason
    assert [x.locator for x in r] == offsets(lines)[1:3]


@pytest.mark.parametrize("name,compress", [("a.jsonl", bytes), ("a.jsonl.gz", gzip.compress)])
def test_a_byte_order_mark_costs_no_record(tmp_path, name, compress):
    # a file written by a tool that starts UTF-8 with a BOM ("Unexpected UTF-8 BOM" to a JSON parser), and the
    # same BOM again where a second such file was concatenated to it
    lines = make_lines(400)
    bom = b"\xef\xbb\xbf"
    lines[0], lines[250] = bom + lines[0], bom + lines[250]
    data = b"".join(lines)
    (tmp_path / name).write_bytes(compress(data))
    parts, out = read_all(tmp_path / name, ingest=IngestConfig(partition_bytes=4096))
    assert len(parts) > 5 or name.endswith(".gz")  # a plain file is read in byte ranges that start mid-file
    assert rejects(out) == []
    d = docs(out)
    assert [x.text for x in d] == [json.loads(line.removeprefix(bom))["text"] for line in lines]
    assert [x.locator for x in d] == offsets(lines) and sum(x.raw_bytes for x in d) == len(data)  # the BOM's bytes too
    assert [i for i, x in enumerate(d) if x.encoding_source == "bom"] == [0, 250]
    assert {(x.encoding, x.encoding_source) for x in d} == {("utf-8", "bom"), ("utf-8", "default")}
