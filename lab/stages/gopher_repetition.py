"""gopher_repetition: the Gopher repetition heuristics (Rae et al. 2021, Table A1).

Signals only; thresholds live in ``rules``. Defaults are the paper's (as in datatrove's
``GopherRepetitionFilter``): duplicate paragraphs <= 0.3 of paragraphs and <= 0.2 of characters;
duplicate lines <= 0.3 and <= 0.2; the most frequent 2/3/4-gram covers <= 0.20/0.18/0.16 of the
characters; duplicated 5..10-grams cover <= 0.15/0.14/0.13/0.12/0.11/0.10 of the characters.
Definitions follow datatrove's filter exactly (every fraction of characters is over ``len(text)``);
words are the document's words in its language (``lab.text.segment.document_words``). Where datatrove
builds a Python string per n-gram, n-grams here are integers handled with numpy, and only repeated
positions enter the greedy scan. An empty text has every fraction 1.0, so it fails the first rule, as
datatrove drops it as "empty".
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from lab.fields import check, knob
from lab.select.rules import Rule
from lab.text import segment

NAME = "gopher_repetition"
VERSION = 2  # bump when signals() (or what it reads: word lists, models) gives other values
# 2: words of the document's language (ICU words for unspaced scripts; 1: English words for every language)
SOURCE = "Gopher (Rae et al. 2021)"
TOP_NS = (2, 3, 4)
DUP_NS = (5, 6, 7, 8, 9, 10)
_PARAGRAPH_BREAK = re.compile(r"\n{2,}")
_LINE_BREAK = re.compile(r"\n+")
_BASE = 0x9E3779B97F4A7C15  # odd, so invertible modulo 2**64
_BASE_INV = pow(_BASE, -1, 1 << 64)


@dataclass(frozen=True)
class Config:
    enabled: bool = knob(True, unit="on/off",
                         help="On: a kept document passes every Gopher repetition rule; off: this stage drops "
                              "nothing.")
    max_dup_para_frac: float = knob(0.3, unit="fraction of paragraphs",
                                    help="At most this fraction of a kept document's paragraphs repeat an earlier "
                                         "paragraph.")
    max_dup_para_char_frac: float = knob(0.2, unit="fraction of characters",
                                         help="At most this fraction of a kept document's characters are in "
                                              "paragraphs that repeat an earlier one.")
    max_dup_line_frac: float = knob(0.3, unit="fraction of lines",
                                    help="At most this fraction of a kept document's lines repeat an earlier line.")
    max_dup_line_char_frac: float = knob(0.2, unit="fraction of characters",
                                         help="At most this fraction of a kept document's characters are in lines "
                                              "that repeat an earlier one.")
    max_top_2gram_char_frac: float = knob(0.20, unit="fraction of characters",
                                          help="The most frequent word 2-gram of a kept document covers at most this "
                                               "fraction of its characters.")
    max_top_3gram_char_frac: float = knob(0.18, unit="fraction of characters",
                                          help="The most frequent word 3-gram of a kept document covers at most this "
                                               "fraction of its characters.")
    max_top_4gram_char_frac: float = knob(0.16, unit="fraction of characters",
                                          help="The most frequent word 4-gram of a kept document covers at most this "
                                               "fraction of its characters.")
    max_dup_5gram_char_frac: float = knob(0.15, unit="fraction of characters",
                                          help="At most this fraction of a kept document's characters are in word "
                                               "5-grams that repeat an earlier one.")
    max_dup_6gram_char_frac: float = knob(0.14, unit="fraction of characters",
                                          help="At most this fraction of a kept document's characters are in word "
                                               "6-grams that repeat an earlier one.")
    max_dup_7gram_char_frac: float = knob(0.13, unit="fraction of characters",
                                          help="At most this fraction of a kept document's characters are in word "
                                               "7-grams that repeat an earlier one.")
    max_dup_8gram_char_frac: float = knob(0.12, unit="fraction of characters",
                                          help="At most this fraction of a kept document's characters are in word "
                                               "8-grams that repeat an earlier one.")
    max_dup_9gram_char_frac: float = knob(0.11, unit="fraction of characters",
                                          help="At most this fraction of a kept document's characters are in word "
                                               "9-grams that repeat an earlier one.")
    max_dup_10gram_char_frac: float = knob(0.10, unit="fraction of characters",
                                           help="At most this fraction of a kept document's characters are in word "
                                                "10-grams that repeat an earlier one.")

    def __post_init__(self) -> None:
        for f in self.__dataclass_fields__:
            if f.startswith("max_"):
                v = getattr(self, f)
                check(f, v, 0.0 <= v <= 1.0, "a fraction between 0 and 1")


SIGNALS = {
    "gr_dup_para_frac": pa.float64(),
    "gr_dup_para_char_frac": pa.float64(),
    "gr_dup_line_frac": pa.float64(),
    "gr_dup_line_char_frac": pa.float64(),
    **{f"gr_top_{n}gram_char_frac": pa.float64() for n in TOP_NS},
    **{f"gr_dup_{n}gram_char_frac": pa.float64() for n in DUP_NS},
}


def signal_params(cfg: Config) -> dict:
    """What the signals depend on besides ``VERSION``: the language model and the segmenter (the words)."""
    return segment.signal_params()


def duplicates(items: list[str]) -> tuple[int, int]:
    """(duplicate items, their characters); first occurrences are not duplicates.

    >>> duplicates(["a", "bb", "a", "bb", "a"])
    (3, 4)
    """
    unique = set(items)
    return len(items) - len(unique), sum(map(len, items)) - sum(map(len, unique))


def top_ngram_chars(ids: np.ndarray, lens: np.ndarray, ns=TOP_NS) -> dict[int, int]:
    """n -> characters of the most frequent n-gram (joined with spaces) times its count.

    ``ids`` are word ids (equal words, equal ids), ``lens`` word lengths.

    >>> top_ngram_chars(np.array([0, 1, 0, 1, 2]), np.array([1, 2, 1, 2, 3]), ns=(2, 3))
    {2: 8, 3: 6}
    """
    out = {n: 0 for n in ns}
    cum = np.concatenate(([0], np.cumsum(lens)))
    key, width = ids, int(ids.max()) + 1 if len(ids) else 1  # keys < len(ids), so key * width fits
    for n in range(2, max(ns) + 1):
        m = len(ids) - n + 1
        if m <= 0:
            break
        # the n-gram at i is the pair ((n-1)-gram at i, word i+n-1); re-densify so keys stay small
        _, first, key, counts = np.unique(key[:m] * width + ids[n - 1:], return_index=True,
                                          return_inverse=True, return_counts=True)
        if n in out:
            top = counts.max()
            i = int(first[counts == top].min())  # Counter.most_common: first inserted wins ties
            out[n] = int(cum[i + n] - cum[i] + n - 1) * int(top)
    return out


def dup_ngram_chars(ws: tuple[str, ...], lens: np.ndarray, ns=DUP_NS) -> dict[int, int]:
    """n -> characters in duplicated n-grams, by datatrove's greedy scan (``find_all_duplicate``).

    ``lens`` are the word lengths.

    >>> dup_ngram_chars(tuple("abcabcab"), np.ones(8, np.int64), ns=(2, 3))
    {2: 4, 3: 3}
    """
    out = {n: 0 for n in ns}
    if len(ws) < min(ns):
        return out
    codes = np.frombuffer("".join(ws).encode("utf-32-le", "surrogatepass"), dtype=np.uint32).astype(np.uint64)
    cum = np.concatenate(([0], np.cumsum(lens)))
    powers = np.full(len(codes) + 1, _BASE, dtype=np.uint64)
    powers[0] = 1
    inv_powers = np.full(len(codes) + 1, _BASE_INV, dtype=np.uint64)
    inv_powers[0] = 1
    with np.errstate(over="ignore"):  # arithmetic modulo 2**64 is the point
        powers = np.cumprod(powers)
        inv_powers = np.cumprod(inv_powers)
        prefix = np.concatenate((np.zeros(1, np.uint64), np.cumsum(codes * powers[:-1])))
        for n in ns:
            m = len(ws) - n + 1
            if m <= 0:
                continue
            start, end = cum[:m], cum[n:]
            # hash of the characters start..end, made position-free, mixed with the length
            keys = (prefix[end] - prefix[start]) * inv_powers[start]
            keys += (end - start).astype(np.uint64) * np.uint64(_BASE)
            _, inverse, counts = np.unique(keys, return_inverse=True, return_counts=True)
            repeated = np.flatnonzero(counts[inverse] > 1)
            if not len(repeated):
                continue
            seen: set[int] = set()
            total = skip_to = 0
            for i, k, c in zip(repeated.tolist(), keys[repeated].tolist(), (end - start)[repeated].tolist()):
                if i < skip_to:
                    continue
                if k in seen:
                    total += c
                    skip_to = i + n
                else:
                    seen.add(k)
            out[n] = total
    return out


def signals(text: str) -> dict:
    """
    >>> s = signals("spam spam spam spam\\n\\nspam spam spam spam\\n\\neggs")
    >>> s["gr_dup_para_frac"], s["gr_dup_para_char_frac"], s["gr_dup_line_frac"]
    (0.3333333333333333, 0.41304347826086957, 0.3333333333333333)
    """
    if not text:
        return {name: 1.0 for name in SIGNALS}
    paragraphs = _PARAGRAPH_BREAK.split(text.strip())
    para_dups, para_chars = duplicates(paragraphs)
    lines = _LINE_BREAK.split(text)
    line_dups, line_chars = duplicates(lines)
    ws = segment.document_words(text)
    vocab = {w: i for i, w in enumerate(dict.fromkeys(ws))}
    ids = np.fromiter(map(vocab.__getitem__, ws), np.int64, len(ws))
    lens = np.fromiter(map(len, ws), np.int64, len(ws))
    top = top_ngram_chars(ids, lens)
    dup = dup_ngram_chars(ws, lens)
    n = len(text)
    out = {
        "gr_dup_para_frac": para_dups / len(paragraphs),
        "gr_dup_para_char_frac": para_chars / n,
        "gr_dup_line_frac": line_dups / len(lines),
        "gr_dup_line_char_frac": line_chars / n,
    }
    out.update({f"gr_top_{k}gram_char_frac": v / n for k, v in top.items()})
    out.update({f"gr_dup_{k}gram_char_frac": v / n for k, v in dup.items()})
    return out


def rules(cfg: Config) -> list[Rule]:
    out = [
        Rule(NAME, "gr_dup_para_frac", "<=", cfg.max_dup_para_frac, "dup_para_frac"),
        Rule(NAME, "gr_dup_para_char_frac", "<=", cfg.max_dup_para_char_frac, "dup_para_char_frac"),
        Rule(NAME, "gr_dup_line_frac", "<=", cfg.max_dup_line_frac, "dup_line_frac"),
        Rule(NAME, "gr_dup_line_char_frac", "<=", cfg.max_dup_line_char_frac, "dup_line_char_frac"),
    ]
    out += [Rule(NAME, f"gr_top_{n}gram_char_frac", "<=", getattr(cfg, f"max_top_{n}gram_char_frac"), f"top_{n}gram")
            for n in TOP_NS]
    out += [Rule(NAME, f"gr_dup_{n}gram_char_frac", "<=", getattr(cfg, f"max_dup_{n}gram_char_frac"), f"dup_{n}gram")
            for n in DUP_NS]
    return out
