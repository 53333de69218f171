"""Bytes to text: which charset a record is in, where that came from, and the bytes it could not decode.

A web page (a WARC response) is decoded as browsers decode it (the WHATWG Encoding and HTML standards).
The first source that answers wins and names the ``encoding_source``: ``bom`` (a byte-order mark outranks
every declaration), ``header`` (the HTTP ``Content-Type`` charset), ``meta`` (a ``<meta>`` charset in the
first ``META_PROBE`` bytes of HTML), ``detected`` (valid UTF-8 is UTF-8; other bytes go to resiliparse's
detector) and ``default`` (windows-1252, browsers' fallback in most locales). Labels are read as the
Encoding Standard reads them, a few decoded as the larger set browsers use (``SUPERSETS``); a label it
does not know is not trusted. ``encoding`` is the Python codec used; undecodable bytes become U+FFFD and
are counted (``decode_errors``). JSON Lines and Parquet strings are UTF-8, plain-text files UTF-8 unless
a BOM says otherwise. Why each step is as it is: docs/design.md.
"""

from __future__ import annotations

import codecs
import functools
import re
from typing import NamedTuple

VERSION = 3  # bump when the readers (lab.io.readers) or this module make other documents of the same bytes
UTF8_BOM = b"\xef\xbb\xbf"
BOMS = ((UTF8_BOM, "utf-8"), (b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be"))
META_PROBE = 4096  # bytes at the start of an HTML page searched for a <meta> charset
DETECT_BYTES = 1 << 17  # bytes the detector sees at most (half from the start, half from the end)
FALLBACK = "cp1252"  # undeclared bytes that are not UTF-8 and that the detector cannot place
# the WHATWG name's codec -> the codec of the larger character set browsers decode that name with
SUPERSETS = {"shift_jis": "cp932", "euc_kr": "cp949", "gbk": "gb18030", "big5": "big5hkscs", "iso8859-11": "cp874"}

_META = re.compile(r"<meta\s[^>]*>", re.I)
_CHARSET = re.compile(r"""charset\s*=\s*["']?\s*([\w.:+-]+)""", re.I)
_ESCAPED = re.compile("[\udc80-\udcff]+")  # surrogateescape's stand-ins for undecodable bytes


class Decoded(NamedTuple):
    text: str
    errors: int  # undecodable bytes, replaced by U+FFFD
    encoding: str  # the Python codec that decoded the text
    source: str  # where the encoding came from: bom, header, meta, detected, default


# --- decoding with a known codec ---------------------------------------------------------------


def decode_utf8(data: bytes) -> tuple[str, int]:
    """Text of ``data`` and the number of undecodable bytes, each run replaced by one U+FFFD.

    >>> decode_utf8(b"caf\\xc3\\xa9 \\xff\\xfe!")
    ('café \\ufffd!', 2)
    """
    try:
        return data.decode("utf-8"), 0
    except UnicodeDecodeError:
        pass
    return _replace_escaped(data.decode("utf-8", "surrogateescape"))


def decode(data: bytes, codec: str) -> tuple[str, int]:
    """Like ``decode_utf8``, in any codec.

    >>> decode(b"caf\\xe9 \\x81!", "cp1252")  # 0x81 has no character in windows-1252
    ('café \\ufffd!', 1)
    """
    if codec == "utf-8":
        return decode_utf8(data)
    try:
        return data.decode(codec), 0
    except UnicodeDecodeError:
        pass
    try:
        return _replace_escaped(data.decode(codec, "surrogateescape"))
    except UnicodeDecodeError:  # a bad sequence that includes ASCII bytes (utf-16, ...): count the replacements
        text = data.decode(codec, "replace")
        return text, text.count("\ufffd")


def _replace_escaped(s: str) -> tuple[str, int]:
    bad = 0

    def one(m: re.Match) -> str:
        nonlocal bad
        bad += len(m.group())
        return "\ufffd"

    return _ESCAPED.sub(one, s), bad


# --- which codec -------------------------------------------------------------------------------


def bom(data: bytes) -> tuple[str, int] | None:
    """The codec a byte-order mark at the start of ``data`` stands for, and the mark's length.

    >>> bom(b"\\xef\\xbb\\xbfhi"), bom(b"\\xff\\xfeh\\x00i\\x00"), bom(b"hi")
    (('utf-8', 3), ('utf-16-le', 2), None)
    """
    for mark, codec in BOMS:
        if data.startswith(mark):
            return codec, len(mark)
    return None


@functools.lru_cache(maxsize=1024)  # a crawl repeats a few hundred labels
def web_codec(label: str) -> str | None:
    """The Python codec browsers decode a charset label with; None for a label they do not know.

    >>> [web_codec(x) for x in ("ISO-8859-1", " x-sjis ", "GB2312", "euc-kr", "UTF8", "utf-7", "klingon")]
    ['cp1252', 'cp932', 'gb18030', 'cp949', 'utf-8', None, None]
    """
    from resiliparse.parse.encoding import map_encoding_to_html5

    name = map_encoding_to_html5(label.strip().lower(), fallback_utf8=False)
    if not name:
        return None
    name = codecs.lookup(name).name
    return SUPERSETS.get(name, name)


def declared(content_type: str) -> str | None:
    """The charset label in a Content-Type value (an HTTP header's, or a ``<meta>`` tag), unquoted.

    >>> declared('text/html; Charset="Shift_JIS"'), declared("text/html")
    ('Shift_JIS', None)
    """
    m = _CHARSET.search(content_type)
    return m.group(1) if m else None


def meta_charset(body: bytes) -> str | None:
    """The charset label of the first ``<meta>`` tag in the first ``META_PROBE`` bytes that declares one.

    >>> meta_charset(b'<head><META http-equiv=Content-Type content="text/html; charset = euc-kr">')
    'euc-kr'
    >>> meta_charset(b"<head><meta name=viewport><meta charset='x-sjis'/>"), meta_charset(b"<p>charset=utf-8")
    ('x-sjis', None)
    """
    head = body[:META_PROBE].decode("latin-1")  # one character per byte: the tags are ASCII
    for tag in _META.finditer(head):
        label = declared(tag.group())
        if label:
            return label
    return None


def detect(data: bytes) -> str | None:
    """The codec of undeclared bytes that are not valid UTF-8: the detector's guess, read as a web label
    when it is one (ISO-8859-1 as windows-1252); None when it has none."""
    from resiliparse.parse.encoding import detect_encoding

    guess = detect_encoding(data, max_len=DETECT_BYTES, html5_compatible=False)
    return (web_codec(guess) or guess) if guess else None


# --- a record, decoded -------------------------------------------------------------------------


def decode_web(body: bytes, content_type: str = "", *, html: bool) -> Decoded:
    """A web page's text by its BOM, its HTTP ``content_type``'s charset, its ``<meta>`` tag (``html``
    only) or detection, in that order (the module docstring says why).

    >>> decode_web("<p>Ça va</p>".encode("latin-1"), "text/html; charset=ISO-8859-1", html=True)
    Decoded(text='<p>Ça va</p>', errors=0, encoding='cp1252', source='header')
    """
    mark = bom(body)
    if mark is not None:
        codec, size = mark
        return Decoded(*decode(body[size:], codec), codec, "bom")
    label = declared(content_type)
    codec = web_codec(label) if label else None
    if codec is not None:
        return Decoded(*decode(body, codec), codec, "header")
    label = meta_charset(body) if html else None
    codec = web_codec(label) if label else None
    if codec is not None:
        codec = "utf-8" if codec.startswith("utf-16") else codec
        return Decoded(*decode(body, codec), codec, "meta")
    try:
        return Decoded(body.decode("utf-8"), 0, "utf-8", "detected")
    except UnicodeDecodeError:
        pass
    codec = detect(body)
    if codec is None:
        return Decoded(*decode(body, FALLBACK), FALLBACK, "default")
    return Decoded(*decode(body, codec), codec, "detected")


def decode_file(data: bytes) -> Decoded:
    """A plain-text file: UTF-8, or what its BOM says (UTF-16 too); the BOM is not part of the text.

    >>> decode_file(b"\\xef\\xbb\\xbfhi")
    Decoded(text='hi', errors=0, encoding='utf-8', source='bom')
    >>> decode_file(b"\\xfe\\xff\\x00h\\x00i").encoding, decode_file(b"hi").source
    ('utf-16-be', 'default')
    """
    mark = bom(data)
    if mark is None:
        return Decoded(*decode_utf8(data), "utf-8", "default")
    codec, size = mark
    return Decoded(*decode(data[size:], codec), codec, "bom")


def signal_params() -> dict:
    """What the documents read from unchanged input depend on: ``VERSION`` and the charset detector's package
    (a new detector may decode a page differently). Part of the signals hash: a change reads every input again."""
    return {"version": VERSION, "detector": _detector_version()}


@functools.lru_cache(maxsize=1)
def _detector_version() -> str:
    from importlib import metadata

    return f"resiliparse {metadata.version('resiliparse')}"
