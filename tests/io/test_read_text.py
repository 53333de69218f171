"""read_text: one document per file, binary junk and giant files rejected, bytes conserved."""

from __future__ import annotations

from lab.config import IngestConfig, InputConfig
from lab.doc import Doc, doc_id
from lab.io.partitions import plan
from lab.io.readers import Reject, read


def test_text_directory_docs_rejects_and_conservation(tmp_path):
    files = {
        "a.txt": "plain text\n".encode(),
        "docs/b.md": "# title\n\nbody é\n".encode(),
        "docs/c.rst": b"",  # empty: a document with no text
        "bad.txt": b"caf\xc3\xa9 \xff\xfe",
        "junk.bin": b"\x7fELF\x00\x00\x01" + bytes(range(256)) * 10,
        "late_nul.txt": b"x" * 9000 + b"\x00",  # NUL after the first 8 KiB: still text
        "page.html": b"<p>hi</p>",
        "big.txt": b"y" * 20000,
    }
    for rel, data in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(data)
    ingest = IngestConfig(files_per_partition=3, max_doc_bytes=10_000)
    inp = InputConfig(str(tmp_path))
    parts = plan([inp], ingest)
    assert sorted(f for p in parts for f in p.files) == sorted(files) and all(len(p.files) <= 3 for p in parts)
    out = {o.source: o for p in parts for o in read(p, inp, ingest)}
    assert set(out) == set(files)  # one record per file, none lost
    for p in parts:  # conservation per partition
        assert sum(o.raw_bytes for o in read(p, inp, ingest)) == p.size
    a = out["a.txt"]
    assert isinstance(a, Doc) and a.text == "plain text\n" and a.locator == 0
    assert a.doc_id == doc_id("a.txt", 0) and a.raw_bytes == len(files["a.txt"])
    assert out["docs/b.md"].text == "# title\n\nbody é\n"
    assert isinstance(out["docs/c.rst"], Doc) and out["docs/c.rst"].text == ""
    assert out["bad.txt"].text == "café \ufffd" and out["bad.txt"].decode_errors == 2
    junk = out["junk.bin"]
    assert isinstance(junk, Reject) and junk.reason.startswith("junk.bin: binary file (NUL byte at offset 4)")
    assert junk.raw_bytes == len(files["junk.bin"])
    assert isinstance(out["late_nul.txt"], Doc)
    assert out["page.html"].is_html and not a.is_html
    big = out["big.txt"]
    assert isinstance(big, Reject) and "document of 20000 bytes exceeds ingest.max_doc_bytes=10000" in big.reason
    assert big.raw_bytes == 20000


def test_single_text_file_and_bom(tmp_path):
    (tmp_path / "one.txt").write_bytes(b"\xef\xbb\xbfhello")
    inp = InputConfig(str(tmp_path / "one.txt"))
    (p,) = plan([inp], IngestConfig())
    (d,) = read(p, inp, IngestConfig())
    assert (d.source, d.text, d.raw_bytes) == ("one.txt", "hello", 8)


def test_byte_order_marks_say_the_encoding_and_are_not_text(tmp_path):
    files = {
        "utf8.txt": b"\xef\xbb\xbf" + "naïve café".encode(),
        "utf16le.txt": b"\xff\xfe" + "naïve café\n".encode("utf-16-le"),  # NUL bytes, but text: not binary
        "utf16be.md": b"\xfe\xff" + "# naïve".encode("utf-16-be"),
        "plain.txt": "naïve".encode(),
        "nul.txt": b"text\x00\x00",  # NUL bytes and no BOM: binary
    }
    for rel, data in files.items():
        (tmp_path / rel).write_bytes(data)
    inp = InputConfig(str(tmp_path))
    out = {o.source: o for p in plan([inp], IngestConfig()) for o in read(p, inp, IngestConfig())}
    decoded = {k: (o.text, o.encoding, o.encoding_source, o.decode_errors) for k, o in out.items() if isinstance(o, Doc)}
    assert decoded == {
        "utf8.txt": ("naïve café", "utf-8", "bom", 0),
        "utf16le.txt": ("naïve café\n", "utf-16-le", "bom", 0),
        "utf16be.md": ("# naïve", "utf-16-be", "bom", 0),
        "plain.txt": ("naïve", "utf-8", "default", 0),
    }
    assert isinstance(out["nul.txt"], Reject) and "binary file" in out["nul.txt"].reason
    assert out["utf16le.txt"].raw_bytes == len(files["utf16le.txt"])
