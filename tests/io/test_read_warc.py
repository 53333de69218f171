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
    (record("response", "https://c.org/", http("text/html; charset=utf-8", b"<p>bad \xff byte</p>"), RESPONSE, 6),
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
    assert [d.decode_errors for d in out] == [0, 0, 1, 0, 0]  # the byte that is not UTF-8 where UTF-8 is declared
    assert [(d.encoding, d.encoding_source) for d in out] == [
        ("utf-8", "header"), ("cp1252", "header"), ("utf-8", "header"), ("utf-8", "detected"), ("utf-8", "detected")]


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


# --- charsets: pages in legacy encodings, declared in the header, in a <meta> tag or not at all ---------------

# Real text per language (detection needs real words), the codec it is written in, the label its HTTP header
# gives, the <meta> tag that declares it (each spelled another way), and the codec browsers decode it with.
PAGES = {
    "ja": ("今日は朝から雨が降っていたので、駅まで歩いて行くのをやめてバスに乗りました。図書館で新しい本を三冊"
           "借りて、午後はずっと家で読んでいました。夕方には雨も止み、近くの公園を少し散歩しました。明日は友達と"
           "一緒に山へ行く予定です。",
           "shift_jis", "Shift_JIS", '<meta charset="shift_jis">', "cp932"),
    "ko": ("오늘은 아침부터 비가 내려서 버스를 타고 학교에 갔습니다. 도서관에서 새 책을 세 권 빌렸고, 오후에는 "
           "집에서 책을 읽었습니다. 저녁에는 비가 그쳐서 공원을 조금 걸었습니다. 내일은 친구와 함께 산에 갈 "
           "예정입니다.",
           "euc_kr", "EUC-KR", '<meta http-equiv="Content-Type" content="text/html; charset=euc-kr">', "cp949"),
    "zh": ("今天早上下雨了，所以我坐公共汽车去学校。我在图书馆借了三本新书，下午一直在家里看书。傍晚雨停了，"
           "我去附近的公园散步。明天我打算和朋友一起去爬山。我的朋友名字里有一个喆字。",  # 喆: GBK, not GB2312
           "gbk", "GBK", "<META CHARSET=gb2312>", "gb18030"),
    "ru": ("Сегодня с утра шёл дождь, поэтому я поехал в школу на автобусе. В библиотеке я взял три новые книги, "
           "а после обеда читал их дома. Вечером дождь кончился, и я немного погулял в парке возле дома. Завтра мы "
           "с другом собираемся поехать за город, если погода будет хорошей.",
           "cp1251", "windows-1251", "<meta http-equiv='content-type' content='text/html;charset=windows-1251' />",
           "cp1251"),
    "fr": ("Ce matin, il pleuvait déjà quand je suis parti à l'école. À la bibliothèque, j'ai emprunté trois "
           "nouveaux livres que j'ai lus tout l'après-midi. Le soir, la pluie a cessé et je me suis promené un peu "
           "dans le parc près de chez moi. Demain, nous irons à la campagne chez mes grands-parents.",
           "latin-1", "ISO-8859-1", '<meta charset = "iso-8859-1">', "cp1252"),
}


def page(lang: str, meta: str = "") -> str:
    return (f"<!DOCTYPE html>\n<html lang={lang}><head>{meta}<title>{lang}</title></head>\n"
            f"<body><p>{PAGES[lang][0]}</p></body></html>\n")


def one_doc(tmp_path, content_type: str, body: bytes) -> Doc:
    (tmp_path / "one.warc").write_bytes(record("response", "https://x.org/", http(content_type, body), RESPONSE, 1))
    (doc,) = read_file(str(tmp_path / "one.warc"))
    assert isinstance(doc, Doc)
    return doc


@pytest.mark.parametrize("declared", ["header", "meta", "detected"])
@pytest.mark.parametrize("lang", list(PAGES))
def test_a_legacy_page_decodes_to_its_text_however_its_charset_is_given(tmp_path, lang, declared):
    _, codec, label, meta, browser = PAGES[lang]
    html = page(lang, meta if declared == "meta" else "")
    content_type = f"text/html; charset={label}" if declared == "header" else "text/html"
    doc = one_doc(tmp_path, content_type, html.encode(codec))
    assert doc.text == html
    assert (doc.encoding, doc.encoding_source, doc.decode_errors) == (browser, declared, 0)


def test_the_header_outranks_a_meta_tag_and_a_meta_tag_outranks_detection(tmp_path):
    html = page("ru", '<meta charset="koi8-r">')  # a stale tag: the server says windows-1251
    doc = one_doc(tmp_path, "text/html; charset=windows-1251", html.encode("cp1251"))
    assert (doc.text, doc.encoding_source) == (html, "header")
    agree = page("ja", '<meta charset="Shift_JIS">')
    doc = one_doc(tmp_path, 'text/html; charset="shift_jis"', agree.encode("shift_jis"))  # quoted in the header
    assert (doc.text, doc.encoding, doc.encoding_source) == (agree, "cp932", "header")


def test_an_unknown_declared_charset_is_detected_not_taken_for_utf8(tmp_path):
    html = page("ja", '<meta charset="utf-7">')  # a label browsers do not decode, in the tag as in the header
    doc = one_doc(tmp_path, "text/html; charset=klingon", html.encode("shift_jis"))
    assert (doc.text, doc.encoding, doc.encoding_source, doc.decode_errors) == (html, "cp932", "detected", 0)


def test_a_meta_tag_past_the_probe_is_not_read(tmp_path):
    from lab.io.decoding import META_PROBE

    html = page("fr").replace("<head>", "<head><!--" + " " * META_PROBE + '--><meta charset="utf-8">')
    doc = one_doc(tmp_path, "text/html", html.encode("latin-1"))
    assert (doc.text, doc.encoding, doc.encoding_source) == (html, "cp1252", "detected")


def test_a_bom_outranks_every_declaration_and_is_not_text(tmp_path):
    html = page("fr")
    doc = one_doc(tmp_path, "text/html; charset=iso-8859-1", b"\xef\xbb\xbf" + html.encode())
    assert (doc.text, doc.encoding, doc.encoding_source) == (html, "utf-8", "bom")
    doc = one_doc(tmp_path, "text/html", b"\xff\xfe" + html.encode("utf-16-le"))
    assert (doc.text, doc.encoding, doc.encoding_source) == (html, "utf-16-le", "bom")
    doc = one_doc(tmp_path, "text/plain", b"\xfe\xff" + "plain text".encode("utf-16-be"))
    assert (doc.text, doc.encoding, doc.encoding_source, doc.is_html) == ("plain text", "utf-16-be", "bom", False)


def test_a_meta_tag_is_read_in_html_only(tmp_path):
    text = '<meta charset="shift_jis"> is how a page declares Shift_JIS.'
    doc = one_doc(tmp_path, "text/plain", text.encode())
    assert (doc.text, doc.encoding, doc.encoding_source) == (text, "utf-8", "detected")


def test_bytes_the_detector_cannot_place_are_windows_1252_as_in_browsers(tmp_path):
    table = bytes(range(0x80, 0x100))  # no language to detect, and not UTF-8
    doc = one_doc(tmp_path, "text/plain", table)
    assert (doc.encoding, doc.encoding_source) == ("cp1252", "default")
    assert doc.decode_errors == 5  # 0x81, 0x8d, 0x8f, 0x90 and 0x9d are no character in windows-1252
    assert doc.text.startswith("€\ufffd‚") and doc.text.endswith("þÿ") and doc.text.count("\ufffd") == 4
