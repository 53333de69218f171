"""read_warc: text responses become documents, other responses rejects; protocol records are skipped;
broken files end in a Reject.

The WARC files are written by hand in WARC/1.1 format (headers, CRLF, block, CRLF CRLF), with
per-record gzip members for .warc.gz, the way crawlers write them.
"""

from __future__ import annotations

import gzip

import pytest

from lab.config import IngestConfig, InputConfig
from lab.doc import Doc
from lab.io.partitions import plan
from lab.io.readers import Reject, read


def record(kind: str, uri: str, block: bytes, content_type: str, n: int) -> bytes:
    head = (f"WARC/1.1\r\nWARC-Type: {kind}\r\nWARC-Record-ID: <urn:uuid:00000000-0000-0000-0000-{n:012d}>\r\n"
            f"WARC-Date: 2024-05-01T00:00:00Z\r\nWARC-Target-URI: {uri}\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {len(block)}\r\n\r\n")
    return head.encode() + block + b"\r\n\r\n"


def http(content_type: str, body: bytes, extra: str = "") -> bytes:
    return (f"HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\n{extra}"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


RESPONSE = "application/http; msgtype=response"
GZ_BODY = gzip.compress("<p>zipped ü</p>".encode())

PNG = "reject: image/png"
RECORDS = [  # (record bytes, expected doc text, None for a skipped protocol record, or PNG for a reject)
    (record("warcinfo", "", b"software: hand\r\n", "application/warc-fields", 0), None),
    (record("request", "https://a.org/", b"GET / HTTP/1.1\r\nHost: a.org\r\n\r\n",
            "application/http; msgtype=request", 1), None),
    (record("response", "https://a.org/", http("text/html; charset=utf-8", "<p>héllo</p>".encode()), RESPONSE, 2),
     "<p>héllo</p>"),
    (record("response", "https://a.org/logo.png", http("image/png", b"\x89PNG\r\n\x1a\n\x00\x00"), RESPONSE, 3), PNG),
    (record("response", "https://b.org/", http("text/html; charset=iso-8859-1", "<p>café</p>".encode("latin-1")),
            RESPONSE, 4), "<p>café</p>"),
    (record("metadata", "https://b.org/", b"fetchTimeMs: 12\r\n", "application/warc-fields", 5), None),
    (record("response", "https://c.org/", http("text/html", b"<p>bad \xff byte</p>"), RESPONSE, 6),
     "<p>bad \ufffd byte</p>"),
    (record("response", "https://d.org/", http("text/html", GZ_BODY, "Content-Encoding: gzip\r\n"), RESPONSE, 7),
     "<p>zipped ü</p>"),
    (record("response", "https://e.org/", http("application/xhtml+xml", b"<html/>"), RESPONSE, 8), "<html/>"),
]


def offsets() -> list[int]:
    out, at = [], 0
    for rec, _ in RECORDS:
        out.append(at)
        at += len(rec)
    return out


def write(tmp_path, name: str, *, gz: bool, cut: int = 0) -> str:
    blob = b"".join(gzip.compress(r) if gz else r for r, _ in RECORDS)
    path = tmp_path / name
    path.write_bytes(blob[:len(blob) - cut])
    return str(path)


def read_file(path: str, ingest=IngestConfig()):
    inp = InputConfig(path)
    (p,) = plan([inp], ingest)
    assert p.format == "warc"
    return list(read(p, inp, ingest))


def expected():
    return [(off, text) for off, (_, text) in zip(offsets(), RECORDS) if text is not None and text != PNG]


def docs_only(out):
    return [o for o in out if isinstance(o, Doc)]


@pytest.mark.parametrize("name,gz", [("crawl.warc", False), ("crawl.warc.gz", True)])
def test_html_responses_become_docs(tmp_path, name, gz):
    out = read_file(write(tmp_path, name, gz=gz))
    (png,) = [o for o in out if isinstance(o, Reject)]
    assert png.locator == offsets()[3] and "content type image/png is not a text document" in png.reason
    out = docs_only(out)
    assert [(d.locator, d.text) for d in out] == expected()  # record offset in the (decompressed) stream
    first = out[0]
    assert first.url == "https://a.org/" and first.is_html and first.source == name
    assert first.record_id == "<urn:uuid:00000000-0000-0000-0000-000000000002>"
    assert first.raw_bytes == len(http("text/html; charset=utf-8", "<p>héllo</p>".encode()))  # Content-Length
    assert [d.malformed_utf8 for d in out] == [0, 0, 1, 0, 0]


@pytest.mark.parametrize("gz", [False, True])
def test_truncated_warc_keeps_records_before_the_break(tmp_path, gz):
    name = "t.warc.gz" if gz else "t.warc"
    out = read_file(write(tmp_path, name, gz=gz, cut=40))  # inside the last (xhtml) record
    *docs, r = out
    docs = docs_only(docs)
    assert [(d.locator, d.text) for d in docs] == expected()[:-1]
    assert isinstance(r, Reject) and r.source == name
    assert "truncated" in r.reason and "the records before it were kept" in r.reason
    if gz:
        assert "gzip stream truncated" in r.reason


def test_truncated_in_the_middle_of_a_record_header(tmp_path):
    blob = b"".join(r for r, _ in RECORDS)
    cut = offsets()[6] + 30  # inside the WARC header of record 6
    (tmp_path / "h.warc").write_bytes(blob[:cut])
    *docs, r = read_file(str(tmp_path / "h.warc"))
    assert [d.text for d in docs_only(docs)] == ["<p>héllo</p>", "<p>café</p>"]
    assert isinstance(r, Reject)


def test_garbage_between_records(tmp_path):
    recs = [r for r, _ in RECORDS]
    (tmp_path / "g.warc").write_bytes(b"".join(recs[:3]) + b"this is not a WARC record\r\n\r\n" + b"".join(recs[3:]))
    *docs, r = read_file(str(tmp_path / "g.warc"))
    assert [d.text for d in docs] == ["<p>héllo</p>"]
    assert isinstance(r, Reject) and "invalid WARC data after the record at byte" in r.reason


def test_not_a_warc_at_all(tmp_path):
    (tmp_path / "n.warc").write_bytes(b"hello\n" * 100)
    (r,) = read_file(str(tmp_path / "n.warc"))
    assert isinstance(r, Reject) and "not a WARC file" in r.reason


def test_giant_responses_are_rejected(tmp_path):
    big_html = http("text/html", b"<p>" + b"x" * 100_000 + b"</p>")
    big_png = http("image/png", b"\x00" * 100_000)
    blob = (record("response", "https://big/", big_html, RESPONSE, 1)
            + record("response", "https://png/", big_png, RESPONSE, 2) + RECORDS[2][0])
    (tmp_path / "b.warc").write_bytes(blob)
    big, png, doc = read_file(str(tmp_path / "b.warc"), IngestConfig(max_doc_bytes=10_000))
    assert isinstance(big, Reject) and big.locator == 0 and big.raw_bytes == len(big_html)
    assert f"document of {len(big_html)} bytes exceeds ingest.max_doc_bytes=10000" in big.reason
    assert isinstance(png, Reject) and f"response of {len(big_png)} bytes exceeds" in png.reason
    assert isinstance(doc, Doc) and doc.text == "<p>héllo</p>"


def test_plain_text_response_is_a_plain_document(tmp_path):
    blob = record("response", "https://t.org/a.txt", http("text/plain; charset=utf-8", b"just text"), RESPONSE, 1)
    (tmp_path / "p.warc").write_bytes(blob)
    (doc,) = read_file(str(tmp_path / "p.warc"))
    assert isinstance(doc, Doc) and doc.text == "just text" and not doc.is_html
