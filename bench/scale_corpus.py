"""Build the scale benchmark corpus: >= 1,000,000 documents and >= 2 GB of text, as zstd JSONL.

What it measures: nothing; it writes the input of the scale benchmark (corpus-lab's whole
pipeline, and ``datatrove_pipeline.py`` on the same files), so both sides read the same bytes.

Sources, all on the machine (what exists varies with the Debian packages installed; the
summary records pool sizes and a sha256 per output file so runs can be compared):

- English paragraphs: the pool of ``make_docs.py`` (``make_docs.collect_units``: licences,
  Debian copyright files, /usr/share/doc READMEs/NEWS, stdlib docstrings, the Python manual's
  reST), 132,862 distinct paragraphs / 25 MB here. Most of it is technical (code, tables,
  copyright lines), which Gopher's alphabetic-word rule drops; so a *prose* sub-pool holds the
  paragraphs whose ``alpha_ratio`` (share of word/punctuation tokens with a letter, a proxy of
  the Gopher rule) is >= 0.82, each unwrapped to one line as web text extraction gives:
  45,996 paragraphs / 7.7 MB here.
- Non-English paragraphs: translated man pages, /usr/share/man/<lang>/man*/*.gz (25 languages
  here: de, fr, es, it, pl, ru, ja, zh_CN, ...; 139,924 paragraphs / 36 MB), roff stripped
  crudely by regular expressions (comments and layout requests dropped, font requests keep
  their text, special characters mapped, other escapes removed, the lines of a paragraph
  joined). Paragraphs left in English by the translators (Latin script, > 12% of the words
  English stop words) are dropped.

Documents, in order, one seeded ``random.Random(--seed)`` drawing everything (label, size,
paragraphs, edits). Target sizes are log-normal (e^7.34 ~1.5 KB median target, clipped to
200 B..40 KB; documents come out at median 1.7 KB, mean 2.24 KB); the label mix is:

==============  =====  ==================================================================
label           share  what
==============  =====  ==================================================================
real             80%   runs of 1-4 consecutive paragraphs of one source file from random
                       places of the pool (the prose pool for 75% of the documents, the
                       whole pool for 25%), joined by blank lines up to the size; then 1-3
                       seeded word edits (swap two neighbours, drop or repeat a word), so
                       two real documents practically never repeat
exact_dup         4%   an earlier ``real`` document, byte for byte
near_dup          4%   an earlier ``real`` document with 5-15% of its words changed in 1-3
                       contiguous spans (replaced by pool words, deleted, or inserted):
                       word-5-gram Jaccard to the original 0.70-0.92 (5th-95th
                       percentile), median 0.84, 70% >= 0.8
spam              3%   one line repeated, one paragraph repeated, keyword stuffing (a few
                       words drawn again and again), or one 2-4-word phrase repeated
boilerplate       3%   short lines: navigation bars, cookie and terms notices, "enable
                       JavaScript" lines, copyright footers, lorem ipsum
non_en            4%   like ``real`` from one language's man-page paragraphs (language
                       drawn with weight sqrt(its pool size))
pii               2%   like ``real`` with 1-6 phrases holding e-mail addresses, IPv4/IPv6
                       addresses or phone numbers inserted at word boundaries
==============  =====  ==================================================================

Labels say how a document was made, not what a filter must decide: ``real`` documents from
Debian copyright files hold e-mail addresses too, and some technical ones fail quality rules.
On the first 2,000 documents, corpus-lab's default batch funnel kept 59% of all and 70% of
``real`` (the rest: Gopher's alphabetic-word rule, C4's sentence count), dropped every
``non_en`` at language, ``boilerplate`` mostly at language (low score), ``spam`` at language,
gopher_quality and gopher_repetition.

Duplicates copy one of the last ``WINDOW`` (10,000) ``real`` documents, so generation holds
O(window) text, never the corpus; the field ``dup_of`` names the original's id (null for the
other labels). Documents are numbered ``scale-00000000``.. in order, and the corpus is the
same stream whatever ``--docs`` and ``--files`` are: the first N documents of the default
corpus are exactly the corpus of ``--docs N`` (only the split into files differs). Same
machine + seed + arguments = byte-identical files (zstd level 3, one thread).

Output (--out, default bench/out/scale/; earlier ``scale-*.jsonl.zst`` there are removed):
  scale-00000.jsonl.zst .. scale-<files-1>.jsonl.zst  --files (64) files of equal document
      counts (+-1), each line {"id", "text", "label", "dup_of"}
  summary.json  docs, text bytes (UTF-8), per-label docs and bytes, non_en docs per language,
      pool sizes, per-file docs/bytes/sha256, sha256 of the uncompressed stream, seed, args,
      generation seconds (the only field that is not deterministic)

Measured here (2 cores shared with a test suite, load ~5): the default corpus, 1,000,000
documents / 2.238 GB of text / 723 MB of zstd, in 150 s wall and 91 CPU-seconds (18 s reading
the pools, then ~7,600 documents/s, ~17 MB/s of text, on one core).

corpus-lab reads the files as they are: a compressed JSONL file is one partition, so 64
partitions. Point the input at the files, not the directory: ``.json`` counts as JSONL, so
the directory would read summary.json as documents (and reject its lines). This config
(``corpus-lab run --config scale.yaml --name scale``) was checked on a 2,000-document corpus;
the other keys keep their defaults (``corpus-lab run --dry-run`` lists them):

    name: scale
    inputs:
    - path: bench/out/scale/*.jsonl.zst
      format: jsonl
      text_field: text
      id_field: id

Run (main venv):  .venv/bin/python bench/scale_corpus.py                 # -> bench/out/scale/
                  .venv/bin/python bench/scale_corpus.py --docs 2000 --files 4 --out /tmp/scale
"""

from __future__ import annotations

import argparse
import collections
import glob
import hashlib
import json
import math
import os
import platform
import random
import re
import sys
import time
import unicodedata
from pathlib import Path

import zstandard
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_docs

OUT_DIR = Path(__file__).resolve().parent / "out" / "scale"
LABELS = {"real": 0.80, "exact_dup": 0.04, "near_dup": 0.04, "spam": 0.03,
          "boilerplate": 0.03, "non_en": 0.04, "pii": 0.02}
WINDOW = 10_000  # real documents kept as originals for duplicates
SIZE_MU, SIZE_SIGMA = 7.34, 0.75  # log-normal target bytes: median e^mu ~1.5 KB; documents average ~2.24 KB
MIN_SIZE, MAX_SIZE = 200, 40_000  # bytes; target sizes are clipped to this range
PROSE_SHARE = 0.75  # real (and pii) documents made of prose paragraphs only; the rest: any paragraph
PROSE_ALPHA = 0.82  # a prose paragraph: alpha_ratio >= this
MAX_RUN = 4  # consecutive paragraphs taken from one place of the pool
MAN_MAX_PER_FILE = 50_000  # chars taken from one man page
ZSTD_LEVEL = 3
CHUNK_DOCS = 512  # documents per write (and per progress-bar update)


# --- pools -----------------------------------------------------------------------------------------


class Pool:
    """Paragraphs in file order: ``paras[i]``, its UTF-8 size + 2 (``sizes``) and the end of its
    file's run (``file_end[i]``), so a run of consecutive paragraphs never crosses files."""

    def __init__(self) -> None:
        self.paras: list[str] = []
        self.sizes: list[int] = []
        self.file_end: list[int] = []

    def add_file(self, paragraphs: list[str]) -> None:
        end = len(self.paras) + len(paragraphs)
        self.paras += paragraphs
        self.sizes += [len(p.encode()) + 2 for p in paragraphs]
        self.file_end += [end] * len(paragraphs)


_TOKEN = re.compile(r"\w+|[^\w\s]")  # words and single punctuation marks, roughly spaCy's split
_LETTER = re.compile(r"[^\W\d_]")


def alpha_ratio(text: str) -> float:
    """Share of tokens (words, punctuation marks) holding a letter: a proxy of Gopher's alpha ratio.

    >>> alpha_ratio("x = 3, y")
    0.4
    """
    tokens = _TOKEN.findall(text)
    return sum(1 for t in tokens if _LETTER.search(t)) / len(tokens) if tokens else 0.0


def english_pools() -> tuple[Pool, Pool, dict[str, int]]:
    """make_docs.py's de-duplicated paragraphs (``full``); the prose among them (alpha ratio >=
    PROSE_ALPHA), unwrapped to one line each as web text extraction gives (``prose``); and
    paragraphs per source kind."""
    full, prose, counts = Pool(), Pool(), collections.Counter()
    for kind, _path, paragraphs in make_docs.collect_units():
        full.add_file(paragraphs)
        prose.add_file([" ".join(p.split()) for p in paragraphs if alpha_ratio(p) >= PROSE_ALPHA])
        counts[kind] += len(paragraphs)
    return full, prose, dict(sorted(counts.items()))


_ROFF_CHARS = {  # groff special characters \(xx / \[xx] -> text; unknown ones are dropped
    "em": "\u2014", "en": "\u2013", "lq": "\u201c", "rq": "\u201d", "oq": "\u2018", "cq": "\u2019",
    "aq": "'", "dq": '"', "bu": "\u2022", "co": "\u00a9", "Fo": "\u00ab", "Fc": "\u00bb", "fo": "\u2039",
    "fc": "\u203a", "Bq": "\u201e", "bq": "\u201a", "ha": "^", "ti": "~", "rs": "\\", "hy": "-", "mi": "-",
    "ga": "`", "aa": "\u00b4", "pl": "+", "eq": "=", "<=": "\u2264", ">=": "\u2265", "->": "\u2192",
    "<-": "\u2190", "mu": "\u00d7", "de": "\u00b0", "+-": "\u00b1", "12": "\u00bd", "at": "@", "bv": "|",
    "br": "\u2502", "sl": "/", "la": "\u27e8", "ra": "\u27e9", "dg": "\u2020", "ci": "\u25cb",
    "**": "\u2217", "pd": "\u2202", "if": "\u221e", "*b": "\u03b2", "*p": "\u03c0", "*W": "\u03a9",
    "ss": "\u00df", "ae": "\u00e6", "AE": "\u00c6", "oe": "\u0153", "OE": "\u0152", "/o": "\u00f8",
    "/O": "\u00d8", "/l": "\u0142", "/L": "\u0141", "Po": "\u00a3", "Eu": "\u20ac", "eu": "\u20ac"}
_ACCENTS = {"'": "\u0301", "`": "\u0300", "^": "\u0302", ":": "\u0308", ",": "\u0327", "~": "\u0303",
            "o": "\u030a", "v": "\u030c"}  # groff's composite names: \('e, \(`a, \(^e, \(:u, \(,c, ...
_ROFF_ESCAPE = re.compile(
    r"\\(?:\((..)|\[([^\]\n]{1,24})\]"                 # special characters \(xx \[xx]
    r"|[fFsnk*gmM](?:\(..|\[[^\]\n]{0,24}\]|[+-]?\d|.)"  # font, size, strings, registers: dropped
    r"|[hvwlLNoxDbZ]'[^']*'"                             # motions, \N'..', \w'..': dropped
    r"|(.))")                                            # one-character escapes
_ONE_CHAR = {"-": "-", "e": "\\", " ": " ", "~": " ", "0": " ", "\\": "\\", "'": "\u00b4", "`": "`",
             ".": "."}
_FONT_REQUESTS = {"B", "I", "BR", "RB", "IR", "RI", "BI", "IB", "SM", "SB", "UR", "MT", "OP"}
_BREAK_REQUESTS = {"PP", "P", "LP", "TP", "IP", "HP", "SH", "SS", "sp", "TH", "RS", "RE", "nf", "fi",
                   "EX", "EE", "TQ", "UE", "ME", "in", "ti", "bp", "ne", "TS", "TE", "de", "ig"}
_LATIN = re.compile(r"[A-Za-z]")
EN_STOP = frozenset({"the", "and", "of", "to", "is", "a", "in", "for", "that", "this", "with", "are", "be", "by",
                     "or", "it", "as", "not", "on", "from"})


def _roff_escape(m: re.Match) -> str:
    special, bracket, one = m.group(1), m.group(2), m.group(3)
    name = special if special is not None else bracket
    if name is not None:
        if name in _ROFF_CHARS:
            return _ROFF_CHARS[name]
        if len(name) == 2 and name[0] in _ACCENTS and name[1].isalpha():
            return unicodedata.normalize("NFC", name[1] + _ACCENTS[name[0]])
        if name[:1] == "u" and re.fullmatch(r"u[0-9A-F]{4,6}", name):
            return chr(int(name[1:], 16))
        return ""
    return _ONE_CHAR.get(one, "") if one is not None else ""


def roff_paragraphs(src: str) -> list[str]:
    """Crude plain-text paragraphs of a roff (man) source: requests dropped, font requests keep
    their text, escapes mapped or removed, the lines of a paragraph joined by spaces.

    >>> roff_paragraphs('.SH NAME\\nls \\\\- list\\n.PP\\n\\\\fBSie\\\\fP kann\\n.B sehr\\ngut.')
    ['ls - list', 'Sie kann sehr gut.']
    """
    paras: list[str] = []
    cur: list[str] = []
    skip = False  # inside .de/.ig blocks (macro definitions, ignored text) until ".."
    for line in src.split("\n"):
        if skip:
            skip = not line.startswith("..")
            continue
        if line[:1] in (".", "'"):
            request, _, arg = line[1:].strip().partition(" ")
            if request.startswith('\\"') or not request:
                continue
            if request in _FONT_REQUESTS:
                cur.append(_ROFF_ESCAPE.sub(_roff_escape, arg).replace('"', ""))
            elif request in _BREAK_REQUESTS:
                if cur:
                    paras.append(" ".join(cur))
                    cur = []
                skip = request in ("de", "ig")
            continue
        if line.startswith('\\"'):
            continue
        cur.append(_ROFF_ESCAPE.sub(_roff_escape, line))
    if cur:
        paras.append(" ".join(cur))
    return [" ".join(p.split()) for p in paras]


def _english_leftover(para: str) -> bool:
    """A Latin-script paragraph whose words are > 12% English stop words: left untranslated."""
    if not _LATIN.search(para):
        return False
    words = para.lower().split()
    return sum(w in EN_STOP for w in words) > 0.12 * len(words)


def man_pool() -> tuple[Pool, dict[str, tuple[int, int]], dict[str, int]]:
    """Translated man pages' paragraphs, grouped by language: pool, language -> [lo, hi) range
    of pool indices, and pages read per language."""
    pool, ranges, pages = Pool(), {}, {}
    seen: set[bytes] = set()
    for lang_dir in sorted(glob.glob("/usr/share/man/*/")):
        lang = os.path.basename(lang_dir.rstrip("/"))
        if lang.startswith("man") or lang.split(".")[0] in ("en", "C", "POSIX"):
            continue
        lo, n_pages = len(pool.paras), 0
        for path in sorted(glob.glob(os.path.join(lang_dir, "man*", "*"))):
            if os.path.islink(path) or not os.path.isfile(path):
                continue
            src = make_docs._read(path)  # None when not UTF-8
            if not src or src.startswith(".so "):
                continue
            fresh, taken = [], 0
            for para in roff_paragraphs(src):
                if taken >= MAN_MAX_PER_FILE:
                    break
                if len(para) < 40 or not _LETTER.search(para) or _english_leftover(para):
                    continue
                key = hashlib.blake2b(para.encode(), digest_size=16).digest()
                if key not in seen:
                    seen.add(key)
                    fresh.append(para[: make_docs.MAX_PARAGRAPH])
                    taken += len(para)
            if fresh:
                pool.add_file(fresh)
                n_pages += 1
        if len(pool.paras) > lo:
            ranges[lang], pages[lang] = (lo, len(pool.paras)), n_pages
    return pool, ranges, pages


# --- synthetic material ----------------------------------------------------------------------------

NAV = ["Home", "About", "About us", "Contact", "Contact us", "Blog", "News", "Shop", "Cart", "Login",
       "Log in", "Sign up", "Register", "Privacy Policy", "Terms of Service", "FAQ", "Careers", "Press",
       "Help", "Sitemap", "Newsletter", "Support", "Products", "Services", "Pricing", "Events",
       "Downloads", "Community", "Forum", "Search", "Menu", "Back to top", "Next", "Previous", "Share",
       "Tweet", "Follow us", "Subscribe", "My account", "Wishlist", "Checkout", "Store locator"]
COOKIE = ["We use cookies to give you the best experience on our website.",
          "This website uses cookies to ensure you get the best experience.",
          "By continuing to browse the site you are agreeing to our use of cookies.",
          "We and our partners use cookies to personalise content and ads.",
          "Accept all cookies", "Reject all", "Manage preferences", "Cookie settings", "Got it!",
          "Learn more", "Accept", "Some cookies are essential for the site to work."]
JAVASCRIPT = ["Please enable JavaScript to view this page.", "You need to enable JavaScript to run this app.",
              "JavaScript is disabled in your browser.", "This site requires JavaScript.",
              "javascript:void(0)", "Your browser does not support JavaScript!",
              "For full functionality of this site it is necessary to enable JavaScript.",
              "<noscript>Enable JavaScript</noscript>"]
TERMS = ["\u00a9 {year} {site}. All rights reserved.", "Copyright {year} {site} Inc.",
         "By using this site you agree to the Terms of Use and Privacy Policy.",
         "Terms and conditions apply.", "Powered by WordPress", "Theme by {site}",
         "All trademarks are property of their respective owners.", "Last updated: {year}-01-01",
         "Use of this site constitutes acceptance of our User Agreement.", "Do not sell my personal information"]
SITES = ["example.com", "Acme Corp", "ShopNow", "NewsDaily", "TechBlog", "MyStore", "CityGuide",
         "FoodHub", "TravelPlus", "BestDeals", "HomeDecor", "AutoParts24"]
LOREM = ["lorem", "ipsum", "dolor", "sit", "amet", "consectetur", "adipiscing", "elit", "sed", "do",
         "eiusmod", "tempor", "incididunt", "ut", "labore", "et", "dolore", "magna", "aliqua", "enim", "ad",
         "minim", "veniam", "quis", "nostrud", "exercitation", "ullamco", "laboris", "nisi", "aliquip", "ex",
         "ea", "commodo", "consequat", "duis", "aute", "irure", "in", "reprehenderit", "voluptate", "velit",
         "esse", "cillum", "eu", "fugiat", "nulla", "pariatur", "excepteur", "sint", "occaecat", "cupidatat",
         "non", "proident", "sunt", "culpa", "qui", "officia", "deserunt", "mollit", "anim", "id", "est",
         "laborum"]
SPAM_WORDS = ["best", "cheap", "buy", "online", "free", "now", "top", "discount", "sale", "deal",
              "price", "offer", "click", "here", "win", "casino", "pills", "loans", "fast", "2024"]
FIRST = ["john", "maria", "wei", "fatima", "lukas", "sofia", "ahmed", "olga", "kenji", "priya", "carlos",
         "emma", "noah", "lea", "ivan", "anna", "omar", "julia", "pierre", "chloe"]
LAST = ["smith", "garcia", "wang", "khan", "mueller", "rossi", "ivanova", "tanaka", "patel", "lopez",
        "brown", "martin", "schmidt", "dubois", "novak", "kowalski", "jensen", "silva", "kim", "nguyen"]
DOMAINS = ["example.com", "example.org", "mail.example.net", "gmail.com", "yahoo.com", "web.de",
           "outlook.com", "company.co.uk", "uni-heidelberg.de", "posteo.de", "proton.me", "corp.example"]
PII_PHRASES = ["Contact {email} for details.", "Send your questions to {email}.", "(e-mail: {email})",
               "Reach {name} at {email} or {phone}.", "Call us at {phone}.", "Phone: {phone}",
               "Tel. {phone}", "The server at {ip} did not respond.", "from host {ip} port 22",
               "Client IP: {ip}", "IPv6 address {ip6} was assigned.", "reported by {email} from {ip}"]


def email(rng: random.Random) -> str:
    first, last, domain = rng.choice(FIRST), rng.choice(LAST), rng.choice(DOMAINS)
    form = rng.randrange(4)
    user = (f"{first}.{last}", f"{first[0]}{last}", f"{first}{rng.randint(1, 99)}", f"{last}_{first}")[form]
    return f"{user}@{domain}"


def phone(rng: random.Random) -> str:
    d = rng.randint
    return rng.choice((f"+1 ({d(200, 989)}) {d(200, 999)}-{d(0, 9999):04d}",
                       f"({d(200, 989)}) 555-{d(0, 9999):04d}", f"{d(200, 989)}-{d(200, 999)}-{d(0, 9999):04d}",
                       f"+44 20 {d(1000, 9999)} {d(1000, 9999)}", f"+49 30 {d(1000000, 9999999)}",
                       f"+33 1 {d(10, 99)} {d(10, 99)} {d(10, 99)} {d(10, 99)}"))


def ipv4(rng: random.Random) -> str:
    return f"{rng.randint(1, 223)}.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}"


def ipv6(rng: random.Random) -> str:
    return "2001:db8:" + ":".join(f"{rng.randrange(65536):x}" for _ in range(6))


# --- documents -------------------------------------------------------------------------------------


class Corpus:
    """The document stream: ``next()`` returns (text, label, dup_of) of the next document."""

    def __init__(self, english: Pool, prose: Pool, man: Pool, man_ranges: dict[str, tuple[int, int]],
                 seed: int) -> None:
        self.en, self.prose, self.man = english, prose, man
        self.rng = random.Random(seed)
        self.labels = list(LABELS)
        self.cum = [sum(list(LABELS.values())[: k + 1]) for k in range(len(LABELS))]
        self.langs = list(man_ranges)
        self.lang_ranges = [man_ranges[lang] for lang in self.langs]
        self.lang_cum = []
        total = 0.0
        for lo, hi in self.lang_ranges:
            total += math.sqrt(sum(man.sizes[lo:hi]))
            self.lang_cum.append(total)
        self.lang_counts: collections.Counter = collections.Counter()
        vocab_rng = random.Random(seed + 1)  # words for edits and spam, from 3,000 pool paragraphs
        words = set()
        for i in sorted(vocab_rng.sample(range(len(english.paras)), min(3000, len(english.paras)))):
            words.update(w for w in english.paras[i].split() if w.isalpha() and 2 <= len(w) <= 12)
        self.vocab = sorted(words)
        self.window_text: list[str] = []
        self.window_id: list[int] = []
        self.n_real = 0
        self.index = 0

    def next(self) -> tuple[str, str, int | None]:
        rng = self.rng
        u = rng.random()
        label = next((lab for lab, c in zip(self.labels, self.cum) if u < c), "real")
        if label in ("exact_dup", "near_dup") and not self.window_text:
            label = "real"  # nothing to copy yet
        size = min(MAX_SIZE, max(MIN_SIZE, int(rng.lognormvariate(SIZE_MU, SIZE_SIGMA))))
        dup_of = None
        if label == "real":
            text = self.vary(self.compose_english(size))
            slot = self.n_real % WINDOW
            if slot == len(self.window_text):
                self.window_text.append(text)
                self.window_id.append(self.index)
            else:
                self.window_text[slot], self.window_id[slot] = text, self.index
            self.n_real += 1
        elif label in ("exact_dup", "near_dup"):
            k = rng.randrange(len(self.window_text))
            text, dup_of = self.window_text[k], self.window_id[k]
            if label == "near_dup":
                text = self.near(text)
        elif label == "non_en":
            x = rng.random() * self.lang_cum[-1]
            j = next(j for j, c in enumerate(self.lang_cum) if x < c)
            self.lang_counts[self.langs[j]] += 1
            text = self.vary(self.compose(self.man, *self.lang_ranges[j], size))
        elif label == "pii":
            text = self.pii(self.compose_english(size))
        elif label == "spam":
            text = self.spam(size)
        else:
            text = self.boilerplate(size)
        self.index += 1
        return text, label, dup_of

    def compose_english(self, size: int) -> str:
        """PROSE_SHARE of the time from prose paragraphs, else from any."""
        pool = self.prose if self.rng.random() < PROSE_SHARE else self.en
        return self.compose(pool, 0, len(pool.paras), size)

    def compose(self, pool: Pool, lo: int, hi: int, size: int) -> str:
        """Runs of 1..MAX_RUN consecutive paragraphs (one file) from random places of pool[lo:hi],
        until ``size`` bytes are reached."""
        rng, paras, sizes, file_end = self.rng, pool.paras, pool.sizes, pool.file_end
        parts: list[str] = []
        total = 0
        while total < size:
            p = rng.randrange(lo, hi)
            for q in range(p, min(p + rng.randint(1, MAX_RUN), file_end[p], hi)):
                parts.append(paras[q])
                total += sizes[q]
                if total >= size:
                    break
        return "\n\n".join(parts)

    def vary(self, text: str) -> str:
        """1-3 word edits: swap two neighbours, drop a word or repeat it."""
        rng = self.rng
        words = text.split(" ")
        if len(words) < 3:
            return text
        for _ in range(rng.randint(1, 3)):
            j, op = rng.randrange(len(words) - 1), rng.randrange(3)
            if op == 0:
                words[j], words[j + 1] = words[j + 1], words[j]
            elif op == 1:
                del words[j]
            else:
                words.insert(j, words[j])
        return " ".join(words)

    def near(self, text: str) -> str:
        """5-15% of the words changed in 1-3 contiguous spans: replaced, deleted or inserted."""
        rng = self.rng
        words = text.split(" ")
        budget = max(1, round(rng.uniform(0.05, 0.15) * len(words)))
        spans = rng.randint(1, 3)
        for s in range(spans):
            n = budget // spans + (s < budget % spans)
            if not n:
                continue
            j, op = rng.randrange(len(words)), rng.randrange(3)
            if op == 0:
                words[j:j + n] = rng.choices(self.vocab, k=n)
            elif op == 1 and len(words) > n + 1:
                del words[j:j + n]
            else:
                words[j:j] = rng.choices(self.vocab, k=n)
        return " ".join(words)

    def pii(self, text: str) -> str:
        """1-6 phrases with e-mail addresses, IPs or phone numbers inserted at word boundaries."""
        rng = self.rng
        words = text.split(" ")
        for _ in range(rng.randint(1, 6)):
            phrase = rng.choice(PII_PHRASES).format(
                email=email(rng), phone=phone(rng), ip=ipv4(rng), ip6=ipv6(rng),
                name=f"{rng.choice(FIRST).title()} {rng.choice(LAST).title()}")
            words.insert(rng.randrange(len(words) + 1), phrase)
        return " ".join(words)

    def spam(self, size: int) -> str:
        """Repetition: one line, one paragraph, keyword stuffing, or one short phrase."""
        rng = self.rng
        kind = rng.randrange(4)
        if kind == 0:  # one line repeated
            line = self.en.paras[rng.randrange(len(self.en.paras))].split("\n")[0][:120]
            return "\n".join([line] * max(3, size // (len(line) + 1)))
        if kind == 1:  # one paragraph repeated
            para = self.en.paras[rng.randrange(len(self.en.paras))]
            return "\n\n".join([para] * max(3, size // (len(para) + 2)))
        if kind == 2:  # keyword stuffing: a few words drawn again and again, in lines of 6-14 words
            keywords = rng.sample(self.vocab, rng.randint(2, 5)) + rng.sample(SPAM_WORDS, rng.randint(3, 6))
            words = rng.choices(keywords, k=max(20, size // 7))
            lines, j = [], 0
            while j < len(words):
                step = rng.randint(6, 14)
                lines.append(" ".join(words[j:j + step]))
                j += step
            return "\n".join(lines)
        phrase = " ".join(rng.sample(self.vocab, rng.randint(2, 4)))  # one short phrase repeated
        n = max(10, size // (len(phrase) + 1))
        per_line = rng.randint(3, 12)
        return "\n".join(" ".join([phrase] * min(per_line, n - j)) for j in range(0, n, per_line))

    def boilerplate(self, size: int) -> str:
        """Short web-page chrome lines: navigation, cookies, JavaScript, terms, lorem ipsum."""
        rng = self.rng
        site, year = rng.choice(SITES), rng.randint(2005, 2024)
        lines: list[str] = []
        total = 0
        while total < size:
            x = rng.random()
            if x < 0.25:
                line = rng.choice((" | ", " \u00b7 ", "  ", " / ")).join(rng.sample(NAV, rng.randint(3, 8)))
            elif x < 0.40:
                line = rng.choice(COOKIE)
            elif x < 0.52:
                line = rng.choice(JAVASCRIPT)
            elif x < 0.66:
                line = rng.choice(TERMS).format(site=site, year=year)
            elif x < 0.82:
                head = "Lorem ipsum dolor sit amet, " if rng.random() < 0.5 else ""
                line = head + " ".join(rng.choices(LOREM, k=rng.randint(6, 40))).capitalize() + "."
            else:
                line = rng.choice(NAV)
            lines.append(line)
            total += len(line) + 1
        return "\n".join(lines)


# --- output ----------------------------------------------------------------------------------------


def file_bounds(docs: int, files: int) -> list[int]:
    """Document index where each file starts, plus the end: equal counts, the first ones +1.

    >>> file_bounds(10, 4)
    [0, 3, 6, 8, 10]
    """
    base, extra = divmod(docs, files)
    bounds = [0]
    for k in range(files):
        bounds.append(bounds[-1] + base + (k < extra))
    return bounds


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            h.update(chunk)
    return h.hexdigest()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=1_000_000, help="documents to write")
    parser.add_argument("--files", type=int, default=64, help="output files (equal document counts)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=OUT_DIR)
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    if args.docs < 1 or not 1 <= args.files <= args.docs:
        parser.error(f"--docs {args.docs} / --files {args.files}: need docs >= 1 and 1 <= files <= docs")

    t0 = time.perf_counter()
    english, prose, kinds = english_pools()
    man, man_ranges, man_pages = man_pool()
    if not man.paras:
        print("warning: no translated man pages under /usr/share/man/<lang>/: non_en documents "
              "fall back to English text (install manpages-de, manpages-fr, ...)", file=sys.stderr)
        man, man_ranges, man_pages = english, {"en": (0, len(english.paras))}, {}
    t_pools = time.perf_counter() - t0
    print(f"pools: {len(english.paras)} English paragraphs ({sum(english.sizes) / 1e6:.1f} MB; "
          f"{len(prose.paras)} prose, {sum(prose.sizes) / 1e6:.1f} MB), "
          f"{len(man.paras)} man-page paragraphs in {len(man_ranges)} languages "
          f"({sum(man.sizes) / 1e6:.1f} MB), {t_pools:.1f} s", file=sys.stderr)

    args.out.mkdir(parents=True, exist_ok=True)
    for stale in args.out.glob("scale-*.jsonl.zst*"):
        stale.unlink()
    corpus = Corpus(english, prose, man, man_ranges, args.seed)
    bounds = file_bounds(args.docs, args.files)
    label_docs: collections.Counter = collections.Counter()
    label_bytes: collections.Counter = collections.Counter()
    stream_hash = hashlib.sha256()
    files, text_bytes = [], 0
    dumps = json.dumps
    bar = tqdm(total=args.docs, unit="doc", unit_scale=True, disable=args.no_progress, file=sys.stderr)
    for k in range(args.files):
        path = args.out / f"scale-{k:05d}.jsonl.zst"
        tmp = path.with_suffix(".zst.tmp")
        file_text = 0
        with open(tmp, "wb") as fh, zstandard.ZstdCompressor(level=ZSTD_LEVEL).stream_writer(fh) as zw:
            for start in range(bounds[k], bounds[k + 1], CHUNK_DOCS):
                lines = []
                for i in range(start, min(start + CHUNK_DOCS, bounds[k + 1])):
                    text, label, dup_of = corpus.next()
                    n = len(text.encode())
                    file_text += n
                    label_docs[label] += 1
                    label_bytes[label] += n
                    lines.append(dumps({"id": f"scale-{i:08d}", "text": text, "label": label,
                                        "dup_of": None if dup_of is None else f"scale-{dup_of:08d}"},
                                       ensure_ascii=False))
                payload = ("\n".join(lines) + "\n").encode()
                stream_hash.update(payload)
                zw.write(payload)
                bar.update(len(lines))
            bar.set_postfix_str(f"{(text_bytes + file_text) / 1e9:.2f} GB text")
        os.replace(tmp, path)
        text_bytes += file_text
        files.append({"name": path.name, "docs": bounds[k + 1] - bounds[k], "text_bytes": file_text,
                      "bytes": path.stat().st_size, "sha256": sha256_file(path)})
    bar.close()
    seconds = time.perf_counter() - t0

    summary = {
        "out": str(args.out), "docs": args.docs, "text_bytes": text_bytes,
        "text_bytes_mean": round(text_bytes / args.docs),
        "compressed_bytes": sum(f["bytes"] for f in files),
        "label_docs": {lab: label_docs[lab] for lab in LABELS},
        "label_text_bytes": {lab: label_bytes[lab] for lab in LABELS},
        "non_en_docs_by_lang": dict(sorted(corpus.lang_counts.items())),
        "seed": args.seed, "args": {"docs": args.docs, "files": args.files, "seed": args.seed},
        "mix": LABELS, "prose_share": PROSE_SHARE, "prose_alpha": PROSE_ALPHA, "window": WINDOW, "size_lognormal": {"mu": SIZE_MU, "sigma": SIZE_SIGMA,
                                                            "min": MIN_SIZE, "max": MAX_SIZE},
        "pool": {"english_paragraphs": len(english.paras), "english_bytes": sum(english.sizes),
                 "english_paragraphs_by_source": kinds, "prose_paragraphs": len(prose.paras),
                 "prose_bytes": sum(prose.sizes), "man_paragraphs": len(man.paras),
                 "man_bytes": sum(man.sizes),
                 "man_paragraphs_by_lang": {lang: hi - lo for lang, (lo, hi) in man_ranges.items()},
                 "man_pages_by_lang": man_pages},
        "stream_sha256": stream_hash.hexdigest(),
        "files": files,
        "versions": {"python": platform.python_version(), "zstandard": zstandard.__version__,
                     "zstd_level": ZSTD_LEVEL},
        "seconds": {"pools": round(t_pools, 1), "total": round(seconds, 1)},
    }
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    gb = text_bytes / 1e9
    print(f"{args.docs} docs, {gb:.3f} GB of text ({summary['compressed_bytes'] / 1e6:.0f} MB zstd) in "
          f"{args.files} files -> {args.out}  ({seconds:.0f} s, {args.docs / seconds:.0f} docs/s)")
    for lab in LABELS:
        print(f"  {lab:<12}{label_docs[lab]:>10}{label_bytes[lab] / 1e6:>10.1f} MB")
    if args.docs >= 1_000_000 and text_bytes < 2e9:
        print(f"warning: only {gb:.2f} GB of text: less than the 2 GB the scale benchmark wants",
              file=sys.stderr)


if __name__ == "__main__":
    main()
