"""pii: count e-mail addresses, IPv4/IPv6 addresses and phone numbers; replace them in output text.

A transform stage, not a filter: by default it drops nothing. Its signals are the counts, and
``scrub`` writes the text that ``docs/`` stores with each match replaced by a placeholder
(``<EMAIL>``, ``<IP_ADDRESS>``, ``<PHONE>``), as datatrove's and Dolma's PII formatters do.
IP candidates are validated with :mod:`ipaddress`; an IPv6 needs at least three colons so that
``std::map``-like code is left alone. ``max_pii`` optionally drops documents with too many.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

import pyarrow as pa

from lab.rules import Rule
from lab.stages.fields import check, knob

NAME = "pii"
VERSION = 1  # bump when signals() (or what it reads: word lists, models) gives other values
SOURCE = "datatrove / Dolma PII formatters (replace PII, drop nothing)"

EMAIL = re.compile(r"(?<![\w.+-])[A-Za-z0-9][A-Za-z0-9._%+-]*@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,24}\b")
IPV4 = re.compile(r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?![\w]|\.\d)")
IPV6 = re.compile(r"(?<![\w:])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?![\w:])")
PHONE = re.compile(
    r"(?<![\w+.-])(?:\+\d{1,3}[ .-]?)?(?:\(\d{2,4}\)[ .-]?|\d{2,4}[ .-])\d{3,4}[ .-]\d{3,5}(?![\w.-]?\d)"
)
PLACEHOLDERS = {"email": "<EMAIL>", "ip": "<IP_ADDRESS>", "phone": "<PHONE>"}


@dataclass(frozen=True)
class Config:
    enabled: bool = knob(True, unit="on/off",
                         help="On: a kept document has at most pii.max_pii matches (the stored text is scrubbed "
                              "either way).")
    max_pii: int = knob(-1, unit="matches per document",
                        help="A kept document has at most this many e-mail addresses, IP addresses and phone numbers "
                             "in all (-1: no limit).",
                        source="corpus-lab (-1: no limit; PII is replaced, not dropped)")

    def __post_init__(self) -> None:
        check("max_pii", self.max_pii, self.max_pii >= -1, "-1 (no limit) or a count >= 0")


SIGNALS = {"pii_emails": pa.int32(), "pii_ipv4": pa.int32(), "pii_ipv6": pa.int32(), "pii_phones": pa.int32(),
           "pii_total": pa.int32()}


def _valid_ipv4(s: str) -> bool:
    try:
        return not ipaddress.IPv4Address(s).is_unspecified
    except ValueError:
        return False


def _valid_ipv6(s: str) -> bool:
    if s.count(":") < 3:
        return False
    try:
        return not ipaddress.IPv6Address(s).is_unspecified
    except ValueError:
        return False


def _spans(text: str) -> list[tuple[int, int, str]]:
    """Non-overlapping (start, end, kind) matches, e-mails first, then IPs, then phones."""
    found: list[tuple[int, int, str]] = []
    taken = bytearray(len(text))

    def add(start: int, end: int, kind: str) -> None:
        if not any(taken[start:end]):
            taken[start:end] = b"\x01" * (end - start)
            found.append((start, end, kind))

    if "@" in text:
        for m in EMAIL.finditer(text):
            add(m.start(), m.end(), "email")
    if "." in text:
        for m in IPV4.finditer(text):
            if _valid_ipv4(m.group()):
                add(m.start(), m.end(), "ipv4")
    if "::" in text or text.count(":") >= 3:
        for m in IPV6.finditer(text):
            if _valid_ipv6(m.group()):
                add(m.start(), m.end(), "ipv6")
    for m in PHONE.finditer(text):
        add(m.start(), m.end(), "phone")
    return sorted(found)


def signals(text: str) -> dict:
    """
    >>> signals("mail bob@example.org or call +1 415-555-0100 from 8.8.8.8")
    {'pii_emails': 1, 'pii_ipv4': 1, 'pii_ipv6': 0, 'pii_phones': 1, 'pii_total': 3}
    """
    kinds = [k for _, _, k in _spans(text)]
    counts = {"pii_emails": kinds.count("email"), "pii_ipv4": kinds.count("ipv4"),
              "pii_ipv6": kinds.count("ipv6"), "pii_phones": kinds.count("phone")}
    counts["pii_total"] = len(kinds)
    return counts


def scrub(text: str) -> str:
    """
    >>> scrub("write to bob@example.org")
    'write to <EMAIL>'
    """
    spans = _spans(text)
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
