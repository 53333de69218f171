"""pii: count e-mail addresses, IP addresses and phone numbers; replace them in output text.

A transform stage, not a filter: by default it drops nothing. Its signals are the counts, and ``scrub``
writes the text that ``docs/`` stores with each match replaced by a placeholder (``<EMAIL>``,
``<IP_ADDRESS>``, ``<PHONE>``), as datatrove's and Dolma's PII formatters do; ``max_pii`` optionally drops
documents with too many. An e-mail address is a dot-atom local part (accented Latin, Greek and Cyrillic
letters allowed), ``@`` and a domain with a dot; an IP address is one :mod:`ipaddress` accepts and
``ip_ranges`` counts (``public``, the default: globally routable only; ``all``); a phone number is an
optional country code, then groups of 2-4, 3-4 and 3-5 digits. Left alone: names that never resolve
(``localhost``, ``.local``, ``.test``, ...), non-public addresses under ``public``, and dotted quads whose
context shows a section number, a version, a netmask or a network (``_not_a_host``).
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from lab.fields import check, knob
from lab.select.rules import Rule
from lab.text.words import Recent

NAME = "pii"
VERSION = 2  # bump when signals() (or what it reads: word lists, models) gives other values
SOURCE = "datatrove / Dolma PII formatters (replace PII, drop nothing)"

IP_RANGES = ("public", "all")

# letters besides ASCII that may be in an address (RFC 6531): Latin-1 and Latin Extended-A/B letters
# (skipping × and ÷), combining accents, Greek, Cyrillic
_LETTERS = "\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u024f\u0300-\u036f\u0370-\u03ff\u0400-\u04ff"
_LOCAL = f"A-Za-z0-9_{_LETTERS}"  # what starts a local part
_LABEL = f"A-Za-z0-9{_LETTERS}-"  # a domain label
# a local part starts where no dot-atom goes on before it: after a space, "(", "..." or ")." (an
# address right after a period), but not at "bob" of "end.bob@" (that address is "end.bob@...")
#
# Each pattern opens with a character class and moves its opening lookbehinds after that first
# character (``(?<!X)\d`` is written ``\d(?<!X\d)``): the same language and the same matches, but
# ``re`` then skips the positions that cannot start a match in C instead of trying every one (2-3x
# faster on real text; tests/stages/test_pii.py compares them with the plain forms).
EMAIL = re.compile(rf"[{_LOCAL}](?<![{_LOCAL}%+-].)(?<![{_LOCAL}%+-]\..)[{_LOCAL}%+-]*(?:\.[{_LOCAL}%+-]+)*"
                   rf"@[{_LABEL}]+(?:\.[{_LABEL}]+)*\.[A-Za-z]{{2,24}}(?![{_LOCAL}])")
# top-level names that never resolve on the internet: no mailbox behind them
LOCAL_DOMAINS = frozenset({"localhost", "localdomain", "local", "internal", "test", "invalid"})
# (?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?![\w]|\.\d)
IPV4 = re.compile(r"\d(?<![\w.]\d)\d{0,2}\.(?:\d{1,3}\.){2}\d{1,3}(?![\w]|\.\d)")
# (?<![\w:])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?![\w:])
IPV6 = re.compile(r"[0-9A-Fa-f:](?<![\w:].)(?:(?<=:)|(?<=[0-9A-Fa-f])[0-9A-Fa-f]{0,3}:)"
                  r"(?:[0-9A-Fa-f]{0,4}:){1,6}[0-9A-Fa-f]{0,4}(?![\w:])")
# (?<![\w+.-])(?:\+\d{1,3}[ .-]?)?(?:\(\d{2,4}\)[ .-]?|\d{2,4}[ .-])\d{3,4}[ .-]\d{3,5}(?![\w.-]?\d)
PHONE = re.compile(
    r"[+(\d](?<![\w+.-].)(?:(?<=\+)\d{1,3}[ .-]?(?:\(\d{2,4}\)[ .-]?|\d{2,4}[ .-])|(?<=\()\d{2,4}\)[ .-]?"
    r"|(?<=\d)\d{1,3}[ .-])\d{3,4}[ .-]\d{3,5}(?![\w.-]?\d)"
)
# what no e-mail address holds: the text between two of these around an "@" holds all of its addresses
_NOT_IN_ADDRESS = " \n\t\r\f\v"
_SPACE = re.compile(f"[{_NOT_IN_ADDRESS}]")
PLACEHOLDERS = {"email": "<EMAIL>", "ip": "<IP_ADDRESS>", "phone": "<PHONE>"}

# words that put a number after them: document parts and versions ("version" also ends identifiers:
# AssemblyVersion, __version__), then the punctuation between the word and the number
NUMBER_WORD = re.compile(
    r"(?i)(?:\b(?:(?:sub)?(?:sections?|clauses?)|sect?|chapters?|ch|appendix|annex|parts?|paragraphs?|para"
    r"|articles?|art|figures?|fig|tables?|releases?|rel|revisions?|rev|builds?|patch|ver)|§|version)"
    r"\.?[\s:=(\[\"'#_]*$")
DOT_THEN_WORD = re.compile(r"\.[ \t]+[^\W\d_]")  # "15.4.1.3. Tools": a section heading's number
LINE_START = re.compile(r"[ \t]*(?:#{1,6}[ \t]*)?")  # indentation or Markdown heading marks
VERSION_AFTER = re.compile(r"[-~+][A-Za-z]|\.[a-z]")  # 1.2.3.4-beta, ~rc1, +dfsg, .tar.gz
PACKAGE_BEFORE = re.compile(r"[A-Za-z][\w.+]*-$")  # libfoo-1.2.3.4
WHOLE_NUMBER = re.compile(r"(?!\d|\.\d)")  # what follows the last part of a dotted number
CHILD_PART = re.compile(r"\.\d{1,2}(?!\d|\.\d)")  # the last part of 15.4.1.3.1 after 15.4.1.3
CIDR_PREFIX = re.compile(r"/(\d{1,3})(?!\d)")
LOOKBACK = 40  # characters before a dotted quad searched for a number word or a package name
OUTLINE_WINDOW = 1000  # characters on either side searched for outline neighbours (a section's first paragraphs)


@dataclass(frozen=True)
class Config:
    enabled: bool = knob(True, unit="on/off",
                         help="On: a kept document has at most pii.max_pii matches (the stored text is scrubbed "
                              "either way).")
    max_pii: int = knob(-1, unit="matches per document",
                        help="A kept document has at most this many e-mail addresses, IP addresses and phone numbers "
                             "in all (-1: no limit).",
                        source="corpus-lab (-1: no limit; PII is replaced, not dropped)")
    # which IP addresses are PII: public (globally routable ones only, as datatrove's PII formatter) or
    # all (private, loopback and documentation ones too); changing it recomputes the signals
    ip_ranges: str = "public"

    def __post_init__(self) -> None:
        check("max_pii", self.max_pii, self.max_pii >= -1, "-1 (no limit) or a count >= 0")
        check("ip_ranges", self.ip_ranges, self.ip_ranges in IP_RANGES,
              "'public' (only globally routable addresses are PII; the default) or 'all' (any address but "
              "0.0.0.0 and ::)")


def signal_params(cfg: Config) -> dict:
    """What the signals depend on besides ``VERSION``: which IP addresses count."""
    return {"ip_ranges": cfg.ip_ranges}


SIGNALS = {"pii_emails": pa.int32(), "pii_ipv4": pa.int32(), "pii_ipv6": pa.int32(), "pii_phones": pa.int32(),
           "pii_total": pa.int32()}


def _mailbox(address: str) -> bool:
    """Whether an e-mail address's domain can be on the internet (not ``.localdomain`` and the like).

    >>> _mailbox("bob@example.org"), _mailbox("root@localhost.localdomain")
    (True, False)
    """
    return address.rsplit(".", 1)[1].lower() not in LOCAL_DOMAINS


def _in_ranges(addr: ipaddress.IPv4Address | ipaddress.IPv6Address, ip_ranges: str) -> bool:
    """Whether ``ip_ranges`` counts ``addr``: public, a globally routable host; all, any but the unspecified one.

    >>> [_in_ranges(ipaddress.ip_address(a), "public") for a in ("8.8.8.8", "10.0.0.1", "224.0.0.251")]
    [True, False, False]
    >>> _in_ranges(ipaddress.ip_address("10.0.0.1"), "all"), _in_ranges(ipaddress.ip_address("0.0.0.0"), "all")
    (True, False)
    """
    if ip_ranges == "all":
        return not addr.is_unspecified
    return addr.is_global and not addr.is_multicast


def _is_mask(addr: ipaddress.IPv4Address) -> bool:
    """A netmask (ones, then zeros) or a wildcard mask (zeros, then ones): it selects bits, names no host.

    >>> [_is_mask(ipaddress.IPv4Address(a)) for a in ("255.255.255.0", "0.0.0.255", "8.8.8.8")]
    [True, True, False]
    """
    bits = int(addr)
    inverse = bits ^ 0xFFFFFFFF
    return inverse & (inverse + 1) == 0 or bits & (bits + 1) == 0


def _is_network(text: str, end: int, addr: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """The address, followed by ``/prefix`` with its host bits zero, is a network block, not one host.

    >>> t = "93.184.216.0/24 and 93.184.216.34/24"
    >>> _is_network(t, 12, ipaddress.ip_address(t[:12])), _is_network(t, 33, ipaddress.ip_address(t[20:33]))
    (True, False)
    """
    m = CIDR_PREFIX.match(text, end)
    if m is None or int(m[1]) >= addr.max_prefixlen:
        return False
    try:
        ipaddress.ip_network(f"{addr}/{m[1]}")  # strict: host bits set raise
    except ValueError:
        return False
    return True


def _after_number_word(text: str, start: int, end: int) -> bool:
    """``section 15.4.1.3``, ``§ 2.1.3.4``, ``version 1.0.0.1``, ``__version__ = '1.0.0.1'``."""
    return NUMBER_WORD.search(text, max(0, start - LOOKBACK), start) is not None


def _opens_heading(text: str, start: int, end: int) -> bool:
    """``15.4.1.3. Tools`` (RFC and manual style): first on its line, then a period, a space and a word.

    >>> _opens_heading("x\\n  15.4.1.3. Tools", 4, 12), _opens_heading("at 8.8.8.8. Then", 3, 10)
    (True, False)
    """
    line_start = text.rfind("\n", 0, start) + 1
    return LINE_START.fullmatch(text, line_start, start) is not None and DOT_THEN_WORD.match(text, end) is not None


def _in_outline(text: str, start: int, end: int) -> bool:
    """A number of a numbered outline (every part below 100): its parent (``15.4.1``), a sibling
    (``15.4.1.2``, ``15.4.1.4``) or a child (``15.4.1.3.1``) is within ``OUTLINE_WINDOW`` characters.

    >>> _in_outline("15.4.1 Tools 15.4.1.3 Syntax", 13, 21), _in_outline("8.8.8.8 and 8.8.4.4", 0, 7)
    (True, False)
    """
    quad = text[start:end]
    *head, last = quad.split(".")
    if any(len(p) > 2 for p in (*head, last)):
        return False
    parent, n = ".".join(head), int(last)
    lo, hi = max(0, start - OUTLINE_WINDOW), end + OUTLINE_WINDOW
    return (_occurs(text, parent, lo, hi, WHOLE_NUMBER)
            or any(_occurs(text, f"{parent}.{k}", lo, hi, WHOLE_NUMBER) for k in (n - 1, n + 1) if k >= 0)
            or _occurs(text, quad, lo, hi, CHILD_PART))


def _occurs(text: str, number: str, lo: int, hi: int, then: re.Pattern) -> bool:
    """Whether the dotted ``number`` is in ``text[lo:hi]``, not the end of a longer one, and followed by ``then``.

    >>> _occurs("1.2.3.4 and 11.2.3", "1.2.3", 0, 18, WHOLE_NUMBER), _occurs("v 1.2.3 ", "1.2.3", 0, 8, WHOLE_NUMBER)
    (False, True)
    """
    i = text.find(number, lo, hi)
    while i >= 0:
        if not (i and text[i - 1] in "0123456789.") and then.match(text, i + len(number)):
            return True
        i = text.find(number, i + 1, hi)
    return False


def _versioned(text: str, start: int, end: int) -> bool:
    """A version with a package name or a suffix: ``libfoo-1.2.3.4``, ``1.2.3.4-beta``, ``1.2.3.4.tar.gz``."""
    return (VERSION_AFTER.match(text, end) is not None
            or PACKAGE_BEFORE.search(text, max(0, start - LOOKBACK), start) is not None)


def _not_a_host(text: str, start: int, end: int) -> bool:
    """Whether the context shows that the dotted quad ``text[start:end]`` is a section number or a version."""
    return any(rule(text, start, end) for rule in (_after_number_word, _opens_heading, _in_outline, _versioned))


def _ip_is_pii(text: str, start: int, end: int, ip_ranges: str) -> bool:
    """Whether the IP candidate ``text[start:end]`` is a valid address of ``ip_ranges`` naming one host."""
    try:
        addr = ipaddress.ip_address(text[start:end])
    except ValueError:
        return False
    if not _in_ranges(addr, ip_ranges) or _is_network(text, end, addr):
        return False
    return addr.version == 6 or not (_is_mask(addr) or _not_a_host(text, start, end))


def _around_at_signs(text: str) -> list[tuple[int, int]]:
    """The stretches of ``text`` between two whitespace characters that hold an ``@``, in order: an
    e-mail address holds one ``@`` and no whitespace, so ``EMAIL`` finds the same addresses in them as
    in the whole text, and the rest of the text is never scanned.

    >>> _around_at_signs("mail bob@x.org or ann@y.org@z.de now @")
    [(5, 14), (18, 32), (37, 38)]
    """
    out: list[tuple[int, int]] = []
    hi = 0
    at = text.find("@")
    while at >= 0:
        lo = 1 + max(text.rfind(c, hi, at) for c in _NOT_IN_ADDRESS)  # -1 + 1 = 0 at the text's start
        space = _SPACE.search(text, at)
        hi = space.start() if space else len(text)
        out.append((lo, hi))
        at = text.find("@", hi)
    return out


# (ip_ranges, text) -> its spans, for texts with PII: the scrub, after every stage of annotate's chunk,
# reuses what the signals found
_FOUND = Recent()


def _spans(text: str, ip_ranges: str) -> list[tuple[int, int, str]]:
    """``_find`` of the text; a text with PII is remembered, so its scrub reuses what its signals found."""
    spans = _FOUND.get((ip_ranges, text))
    if spans is None:
        spans = _find(text, ip_ranges)
        if spans:
            _FOUND.put((ip_ranges, text), spans, len(text))
    return spans


def _find(text: str, ip_ranges: str) -> list[tuple[int, int, str]]:
    """Non-overlapping (start, end, kind) matches, e-mails first, then IPs, then phones."""
    found: list[tuple[int, int, str]] = []
    taken = bytearray(len(text))

    def add(start: int, end: int, kind: str) -> None:
        if not any(taken[start:end]):
            taken[start:end] = b"\x01" * (end - start)
            found.append((start, end, kind))

    for lo, hi in _around_at_signs(text):
        for m in EMAIL.finditer(text, lo, hi):
            if _mailbox(m.group()):
                add(m.start(), m.end(), "email")
    if "." in text:
        for m in IPV4.finditer(text):
            if _ip_is_pii(text, m.start(), m.end(), ip_ranges):
                add(m.start(), m.end(), "ipv4")
    if "::" in text or text.count(":") >= 3:
        for m in IPV6.finditer(text):
            if m.group().count(":") >= 3 and _ip_is_pii(text, m.start(), m.end(), ip_ranges):
                add(m.start(), m.end(), "ipv6")
    for m in PHONE.finditer(text):
        add(m.start(), m.end(), "phone")
    return sorted(found)


def signals(text: str, *, ip_ranges: str = "public") -> dict:
    """
    >>> signals("mail bob@example.org or call +1 415-555-0100 from 8.8.8.8")
    {'pii_emails': 1, 'pii_ipv4': 1, 'pii_ipv6': 0, 'pii_phones': 1, 'pii_total': 3}
    """
    kinds = [k for _, _, k in _spans(text, ip_ranges)]
    counts = {"pii_emails": kinds.count("email"), "pii_ipv4": kinds.count("ipv4"),
              "pii_ipv6": kinds.count("ipv6"), "pii_phones": kinds.count("phone")}
    counts["pii_total"] = len(kinds)
    return counts


class Collector:
    """Per partition: each document's signals under the config's ``ip_ranges`` (``signals`` alone has no config)."""

    def __init__(self, cfg: Config, n_buckets: int = 1, run_dir: Any = None) -> None:
        self.ip_ranges = cfg.ip_ranges

    def signals(self, i: int, text: str, doc: Any = None) -> dict:
        return signals(text, ip_ranges=self.ip_ranges)

    def write(self, layout: Any, key: str, signals: pa.Table) -> None:
        """No files of its own."""


def scrub(text: str, *, ip_ranges: str = "public") -> str:
    """The text with what ``signals`` counts (under the same ``ip_ranges``) replaced by placeholders.

    >>> scrub("write to bob@example.org from 10.0.0.1"), scrub("from 10.0.0.1", ip_ranges="all")
    ('write to <EMAIL> from 10.0.0.1', 'from <IP_ADDRESS>')
    """
    spans = _spans(text, ip_ranges)
    if not spans:
        return text
    out, pos = [], 0
    for start, end, kind in spans:
        out.append(text[pos:start])
        out.append(PLACEHOLDERS["ip" if kind.startswith("ip") else kind])
        pos = end
    out.append(text[pos:])
    return "".join(out)


def rules(cfg: Config) -> list[Rule]:
    return [] if cfg.max_pii < 0 else [Rule(NAME, "pii_total", "<=", cfg.max_pii, "too_much_pii")]
