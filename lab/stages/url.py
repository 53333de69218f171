"""url: rules on the document's URL: blocked domains (with their category), URL words, top-level domains.

Signals, from the URL the input gives (the ``url_field`` of JSONL/Parquet, a WARC record's target URI):
``url_present`` (a document without a URL passes every rule); ``url_domain`` (the host, lowercased, no
port, trailing dot or leading ``www.``); ``url_registered_domain`` (by the Public Suffix List that the
``publicsuffixlist`` package ships); ``url_tld`` (the public suffix); ``url_blocked`` (``LIST/CATEGORY``
of the first blocklist entry the host or a parent domain is on); ``url_word_hits`` (the URL's words on
the word list). A blocklist is a file of one domain per line (the file's name is the category) or a
UT1-style directory of category folders; each category is its own rule, so a drop reason names it
(``url.blocked_<list>_<category>``). Word lists: ``word_list`` plus ``words``. The lists' contents are part
of the signals hash: editing a list recomputes the signals of the next run.
"""

from __future__ import annotations

import hashlib
import ipaddress
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pyarrow as pa

from lab.errors import ConfigError
from lab.fields import check, knob
from lab.select.rules import Rule

NAME = "url"
VERSION = 1  # bump when the signals give other values (code, the packaged suffix list's version)
SOURCE = "URL filtering as in RefinedWeb / FineWeb (blocklist, URL words); UT1 blocklist layout"
_WORD = re.compile(r"[^\W_]+")
_DOMAIN = re.compile(r"(?=.{1,253}$)([a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9])?)(\.[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9])?)*")


@dataclass(frozen=True)
class Config:
    enabled: bool = knob(True, unit="on/off",
                         help="On: a kept document's URL (if it has one) is on no blocklist, has few enough listed "
                              "words and an allowed top-level domain; off: every document passes.")
    max_word_hits: int = knob(0, unit="listed words in the URL",
                              help="A kept document's URL has at most this many words of the word list.",
                              source="RefinedWeb / FineWeb URL filter (no banned word)")
    # a file of one domain per line (its name is the category), or a UT1-style directory of
    # category folders each holding a `domains` file; empty: no blocklist
    blocklist: str = ""
    word_list: str = ""  # a file of one word per line, matched against the URL's words; empty: none
    words: tuple[str, ...] = ()  # more URL words, besides the word list's
    allowed_tlds: tuple[str, ...] = ()  # keep only these public suffixes (com, co.uk, ...); empty: any
    blocked_tlds: tuple[str, ...] = ()  # drop these public suffixes

    def __post_init__(self) -> None:
        check("max_word_hits", self.max_word_hits, self.max_word_hits >= 0, ">= 0")
        for key in ("allowed_tlds", "blocked_tlds", "words"):
            values = getattr(self, key)
            check(key, values, all(isinstance(v, str) and v.strip() == v and v for v in values),
                  "a list of non-empty strings without spaces around them")
        if self.blocklist:
            blocklist(self.blocklist)  # a clear error now, before any work
        if self.word_list:
            word_list(self.word_list)


SIGNALS = {"url_present": pa.int8(), "url_domain": pa.string(), "url_registered_domain": pa.string(),
           "url_tld": pa.string(), "url_blocked": pa.string(), "url_word_hits": pa.int32()}


# --- the lists -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Blocklist:
    path: str
    domains: dict[str, str]  # domain -> "LIST/CATEGORY"
    categories: tuple[str, ...]  # LIST/CATEGORY, sorted
    sha256: str  # of every file read, in order


def _stamp(path: Path) -> tuple:
    files = sorted(path.rglob("*")) if path.is_dir() else [path]
    # the key of an in-process cache: ctime moves on any write, even one whose mtime was put back
    return tuple((str(f), f.stat().st_mtime_ns, f.stat().st_ctime_ns, f.stat().st_size) for f in files if f.is_file())


def blocklist(path: str) -> Blocklist:
    """The blocklist at ``path`` (read once per process while its files are unchanged)."""
    p = Path(path)
    if not p.exists():
        raise ConfigError(f"stages.url.blocklist={path!r} does not exist: give a file of one domain per line or a "
                          "UT1-style directory of category folders with a 'domains' file (or leave it empty)")
    return _blocklist(str(p.resolve()), _stamp(p))


@lru_cache(maxsize=8)
def _blocklist(path: str, stamp: tuple) -> Blocklist:
    p = Path(path)
    if p.is_dir():
        files = sorted(f for f in p.glob("*/domains") if f.is_file())
        if not files:
            raise ConfigError(f"stages.url.blocklist={path!r} is a directory without any CATEGORY/domains file "
                              "(the UT1 layout: one folder per category, each with a 'domains' file)")
        named = [(f"{p.name}/{f.parent.name}", f) for f in files]
    else:
        named = [(p.stem, p)]
    domains: dict[str, str] = {}
    digest = hashlib.sha256()
    for category, f in named:
        data = f.read_bytes()
        digest.update(category.encode() + b"\0" + data + b"\0")
        for n, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
            entry = line.split("#", 1)[0].strip().lower().rstrip(".")
            if not entry:
                continue
            entry = entry.removeprefix("*.")
            if not _DOMAIN.fullmatch(entry) and not _is_ip(entry):
                raise ConfigError(f"stages.url.blocklist: {f}:{n}: {line.strip()!r} is not a domain name; "
                                  "one domain per line (example.com, sub.example.org), '#' starts a comment")
            domains.setdefault(entry, category)
    return Blocklist(path, domains, tuple(sorted(set(domains.values()))), digest.hexdigest())


def word_list(path: str) -> tuple[frozenset[str], str]:
    """(words, sha256) of the word list at ``path``."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"stages.url.word_list={path!r} is not a file: give a file of one word per line "
                          "(or leave it empty)")
    return _word_list(str(p.resolve()), _stamp(p))


@lru_cache(maxsize=8)
def _word_list(path: str, stamp: tuple) -> tuple[frozenset[str], str]:
    data = Path(path).read_bytes()
    words = set()
    for n, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
        w = line.split("#", 1)[0].strip().lower()
        if not w:
            continue
        if not _WORD.fullmatch(w):
            raise ConfigError(f"stages.url.word_list: {path}:{n}: {line.strip()!r} is not one word (letters and "
                              "digits only: URL words are compared whole)")
        words.add(w)
    return frozenset(words), hashlib.sha256(data).hexdigest()


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return False


@lru_cache(maxsize=1)
def _suffixes():
    from publicsuffixlist import PublicSuffixList

    return PublicSuffixList()


def _suffix_list_version() -> str:
    from importlib import metadata

    return metadata.version("publicsuffixlist")


# --- signals ---------------------------------------------------------------------------------------------


def host_of(url: str) -> str:
    """The URL's host, lowercased, without port, trailing dot or leading ``www.``.

    >>> host_of("https://WWW.Example.co.uk:8080/a?b=1"), host_of("example.com/path"), host_of("")
    ('example.co.uk', 'example.com', '')
    """
    url = url.strip()
    if not url:
        return ""
    parts = urlsplit(url if "//" in url else "//" + url)
    try:
        host = (parts.hostname or "").rstrip(".")
    except ValueError:
        host = ""
    return host.removeprefix("www.")


def url_signals(url: str, blocked: dict[str, str], words: frozenset[str]) -> dict[str, Any]:
    """The stage's signals of one URL against a blocklist (domain -> category) and a word set.

    >>> s = url_signals("https://shop.casino.example.com/free-BONUS", {"example.com": "bl/gambling"}, frozenset({"bonus"}))
    >>> s["url_domain"], s["url_registered_domain"], s["url_tld"], s["url_blocked"], s["url_word_hits"]
    ('shop.casino.example.com', 'example.com', 'com', 'bl/gambling', 1)
    """
    host = host_of(url)
    if not host:
        return {"url_present": 1 if url.strip() else 0, "url_domain": "", "url_registered_domain": "", "url_tld": "",
                "url_blocked": "", "url_word_hits": _word_hits(url, words)}
    if _is_ip(host.strip("[]")):
        registered, tld = host, ""
    else:
        psl = _suffixes()
        tld = psl.publicsuffix(host) or ""
        registered = psl.privatesuffix(host) or host
    hit = ""
    if blocked:
        labels = host.split(".")
        for i in range(len(labels)):
            hit = blocked.get(".".join(labels[i:]), "")
            if hit:
                break
    return {"url_present": 1, "url_domain": host, "url_registered_domain": registered, "url_tld": tld,
            "url_blocked": hit, "url_word_hits": _word_hits(url, words)}


def _word_hits(url: str, words: frozenset[str]) -> int:
    return sum(w in words for w in _WORD.findall(url.lower())) if words else 0


class Collector:
    """Per partition: the lists, read once per process; each document's URL through ``url_signals``."""

    def __init__(self, cfg: Config, n_buckets: int = 1, run_dir: Any = None) -> None:
        self.blocked = blocklist(cfg.blocklist).domains if cfg.blocklist else {}
        words = set(w.lower() for w in cfg.words)
        if cfg.word_list:
            words |= word_list(cfg.word_list)[0]
        self.words = frozenset(words)

    def signals(self, i: int, text: str, doc: Any) -> dict:
        return url_signals(doc.url or "", self.blocked, self.words)

    def write(self, layout: Any, key: str, signals: pa.Table) -> None:
        """No files of its own."""


def signals(text: str) -> dict:
    """Without a document there is no URL: the signals of a document without one."""
    return url_signals("", {}, frozenset())


def signal_params(cfg: Config) -> dict:
    """What the signals depend on besides ``VERSION``: the lists' contents and the packaged suffix list."""
    return {"blocklist": blocklist(cfg.blocklist).sha256 if cfg.blocklist else "",
            "word_list": word_list(cfg.word_list)[1] if cfg.word_list else "",
            "words": sorted(set(w.lower() for w in cfg.words)), "suffix_list": _suffix_list_version()}


def _reason(category: str) -> str:
    return "blocked_" + re.sub(r"[^A-Za-z0-9]+", "_", category).strip("_").lower()


def rules(cfg: Config) -> list[Rule]:
    out = []
    if cfg.blocklist:
        out += [Rule(NAME, "url_blocked", "!=", c, _reason(c)) for c in blocklist(cfg.blocklist).categories]
    out.append(Rule(NAME, "url_word_hits", "<=", cfg.max_word_hits, "url_words"))
    if cfg.allowed_tlds:
        out.append(Rule(NAME, "url_tld", "in", ("", *cfg.allowed_tlds), "tld_not_allowed"))
    out += [Rule(NAME, "url_tld", "!=", t, _reason("tld_" + t)) for t in cfg.blocked_tlds]
    return out
