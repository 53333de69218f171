"""neardup.compare: what a person looks at to judge a pair: a word diff and the exact Jaccard."""

from __future__ import annotations

import bisect
import difflib
import math
import re
from collections import Counter

import numpy as np

from lab.dedup.signature import shingle_hashes, shingle_text

DIFF_PAIR_BUDGET = 100_000  # pairs of equal words across the two sides that difflib compares in one go (measured)
IN_PLACE_RUN = 4  # repetitive text: words equal in place anchor the alignment in runs of at least this many


def diff(a: str, b: str) -> list[tuple[str, str]]:
    """A word diff of two texts that ignores whitespace: ``(op, text)`` runs with op ``=`` (words in
    both), ``-`` (only in a), ``+`` (only in b).

    Words are runs of non-whitespace, compared exactly; two texts that differ only in spaces, line
    breaks or re-wrapping give one ``=`` run. Whitespace is shown normalized, the same in both panes
    where the words are shared: a gap between two words is one space, a line break or a blank line —
    a break only where both texts break there (so a re-wrapped copy does not show its wrapping), and
    in a ``-`` or ``+`` run that side's own break. The ``=`` and ``-`` runs concatenate to ``a``'s words
    (``"".join(...).split() == a.split()``), the ``=`` and ``+`` runs to ``b``'s. Fast on long texts:
    common prefix and suffix are cut, words unique to both sides anchor the alignment (patience
    diff), and difflib aligns what lies between anchors, in chunks when that would be quadratic.

    >>> diff("the cat sat", "the dog sat")
    [('=', 'the '), ('-', 'cat'), ('+', 'dog'), ('=', ' sat')]
    >>> diff("one  two\\nthree", "one two three")
    [('=', 'one two three')]
    """
    wa, ga = _words(a)
    wb, gb = _words(b)
    blocks: list[tuple[int, int, int, int]] = []  # (i1, i2, j1, j2) of the changed blocks, in order
    _align(wa, wb, 0, len(wa), 0, len(wb), blocks)
    out: list[tuple[str, str]] = []

    def put(op: str, text: str) -> None:
        if not text:
            return
        if out and out[-1][0] == op:
            out[-1] = (op, out[-1][1] + text)
        else:
            out.append((op, text))

    def equal(i1: int, i2: int, j1: int, j2: int) -> None:  # words a[i1:i2] == b[j1:j2], gaps inside merged
        put("=", "".join((_merge(ga[i], gb[j]) if i > i1 else "") + wa[i] for i, j in zip(range(i1, i2), range(j1, j2))))

    def side(words: list[str], gaps: list[int], k1: int, k2: int) -> str:
        return "".join((_GAP[gaps[k]] if k > k1 else "") + words[k] for k in range(k1, k2))

    i = j = 0
    for i1, i2, j1, j2 in blocks:
        equal(i, i1, j, j1)
        before, after = i1 > 0 or j1 > 0, i2 < len(wa) or j2 < len(wb)  # words on either side of the block
        if i2 > i1 and j2 > j1:  # replaced: the gaps around it are shared, in the = runs
            if before:
                put("=", _merge(ga[i1], gb[j1]))
            put("-", side(wa, ga, i1, i2))
            put("+", side(wb, gb, j1, j2))
            if after:
                put("=", _merge(ga[i2] if i2 < len(wa) else 0, gb[j2] if j2 < len(wb) else 0))
        else:  # only one side has words here: the other side's single gap is shared, the extra one is this side's
            op, words, gaps, k1, k2, other, o = (("-", wa, ga, i1, i2, gb, j1) if i2 > i1 else
                                                 ("+", wb, gb, j1, j2, ga, i1))
            if after:  # "=" gets the gap before, the run its own gap after
                if before:
                    put("=", _merge(gaps[k1], other[o]))
                put(op, side(words, gaps, k1, k2) + _GAP[gaps[k2]])
            elif before:  # at the end: the run carries the gap before it
                put(op, _GAP[gaps[k1]] + side(words, gaps, k1, k2))
            else:
                put(op, side(words, gaps, k1, k2))
        i, j = i2, j2
    equal(i, len(wa), j, len(wb))
    return out


_WORD = re.compile(r"\S+")
_GAP = (" ", "\n", "\n\n")  # how a gap between two words is shown: a space, a line break, a blank line


def _words(text: str) -> tuple[list[str], list[int]]:
    """The words of a text and, per word, the kind of the gap before it (index into ``_GAP``: 0 for
    the first word)."""
    words: list[str] = []
    gaps: list[int] = []
    end = None
    for m in _WORD.finditer(text):
        if end is None:
            gaps.append(0)
        else:
            gap = text[end:m.start()]
            gaps.append(0 if gap == " " else min(len((gap + "x").splitlines()) - 1, 2))  # line breaks in it
        words.append(m.group())
        end = m.end()
    return words, gaps


def _merge(x: int, y: int) -> str:
    """A gap shared by both panes: a break only where both texts break."""
    return _GAP[min(x, y)]


def _between(wa: list[str], wb: list[str], anchors, a0: int, a1: int, b0: int, b1: int, out: list) -> None:
    """Align the spans before, between and after the anchor pairs (word x of a equals word y of b)."""
    i, j = a0, b0
    for x, y in anchors:
        _align(wa, wb, i, x, j, y, out)
        i, j = x + 1, y + 1
    _align(wa, wb, i, a1, j, b1, out)


def _align(wa: list[str], wb: list[str], a0: int, a1: int, b0: int, b1: int, out: list) -> None:
    """Append the changed blocks ``(i1, i2, j1, j2)`` between ``wa[a0:a1]`` and ``wb[b0:b1]`` to ``out``."""
    while a0 < a1 and b0 < b1 and wa[a0] == wb[b0]:  # common prefix and suffix
        a0, b0 = a0 + 1, b0 + 1
    while a1 > a0 and b1 > b0 and wa[a1 - 1] == wb[b1 - 1]:
        a1, b1 = a1 - 1, b1 - 1
    if a0 == a1 or b0 == b1:
        if a0 < a1 or b0 < b1:
            _add(out, a0, a1, b0, b1)
        return
    anchors = _anchors(wa, wb, a0, a1, b0, b1)
    if anchors:
        _between(wa, wb, anchors, a0, a1, b0, b1, out)
        return
    # no word occurs once on each side: difflib, unless the equal-word pairs it would compare exceed the
    # budget (very repetitive text, where its first longest match is often at the wrong offset): then
    # runs of words equal in place (counted from the start or from the end) anchor, else aligned chunks
    ca = Counter(wa[a0:a1])
    pairs = sum(n * ca[w] for w, n in Counter(wb[b0:b1]).items() if w in ca)
    if pairs > DIFF_PAIR_BUDGET:
        anchors = _in_place(wa, wb, a0, a1, b0, b1)
        if anchors:
            _between(wa, wb, anchors, a0, a1, b0, b1, out)
            return
    chunks = max(1, math.ceil(math.sqrt(pairs / DIFF_PAIR_BUDGET)))
    for c in range(chunks):
        i1, i2 = a0 + (a1 - a0) * c // chunks, a0 + (a1 - a0) * (c + 1) // chunks
        j1, j2 = b0 + (b1 - b0) * c // chunks, b0 + (b1 - b0) * (c + 1) // chunks
        for tag, x1, x2, y1, y2 in difflib.SequenceMatcher(None, wa[i1:i2], wb[j1:j2], autojunk=False).get_opcodes():
            if tag != "equal":
                _add(out, i1 + x1, i1 + x2, j1 + y1, j1 + y2)


def _in_place(wa: list[str], wb: list[str], a0: int, a1: int, b0: int, b1: int) -> list[tuple[int, int]]:
    """Positions ``(i, j)`` of the words equal at the same distance from the start of ``wa[a0:a1]`` and
    ``wb[b0:b1]`` (or from their ends, whichever matches more), in runs of at least ``IN_PLACE_RUN``."""
    best: list[tuple[int, int]] = []
    n = min(a1 - a0, b1 - b0)
    for i0, j0 in ((a0, b0), (a1 - n, b1 - n)):
        found, run = [], []
        for t in range(n):
            if wa[i0 + t] == wb[j0 + t]:
                run.append((i0 + t, j0 + t))
                continue
            if len(run) >= IN_PLACE_RUN:
                found += run
            run = []
        if len(run) >= IN_PLACE_RUN:
            found += run
        if len(found) > len(best):
            best = found
    return best


def _anchors(wa: list[str], wb: list[str], a0: int, a1: int, b0: int, b1: int) -> list[tuple[int, int]]:
    """Positions ``(i, j)`` of the words that occur exactly once in ``wa[a0:a1]`` and once in
    ``wb[b0:b1]``, the longest run of them in the same order on both sides (patience diff)."""
    ca, cb = Counter(wa[a0:a1]), Counter(wb[b0:b1])
    pos_b = {wb[j]: j for j in range(b0, b1) if cb[wb[j]] == 1 and ca.get(wb[j]) == 1}
    pairs = [(i, pos_b[wa[i]]) for i in range(a0, a1) if wa[i] in pos_b]
    if not pairs:
        return []
    # longest increasing subsequence of the b positions (in a order): patience sorting
    tails: list[int] = []  # tails[n]: the pair ending the increasing run of length n + 1 with the lowest b position
    tail_b: list[int] = []  # their b positions (increasing)
    prev = [-1] * len(pairs)
    for k, (_, y) in enumerate(pairs):
        n = bisect.bisect_left(tail_b, y)
        if n > 0:
            prev[k] = tails[n - 1]
        if n == len(tails):
            tails.append(k)
            tail_b.append(y)
        else:
            tails[n], tail_b[n] = k, y
    run, k = [], tails[-1]
    while k >= 0:
        run.append(pairs[k])
        k = prev[k]
    return run[::-1]


def _add(out: list, i1: int, i2: int, j1: int, j2: int) -> None:
    """Append a changed block, joined to the previous one when they touch."""
    if out and out[-1][1] == i1 and out[-1][3] == j1:
        out[-1] = (out[-1][0], i2, out[-1][2], j2)
    else:
        out.append((i1, i2, j1, j2))


def text_jaccard(a: str, b: str, *, ngram: int = 5) -> float | None:
    """The exact Jaccard of two texts' shingle sets as near_dedup makes them (the hashes of the word
    ``ngram``-grams of the normalized texts, ``shingle_text``); None when a text has no words.

    >>> text_jaccard("a b c d e f", "A b c d e g!")
    0.3333333333333333
    """
    x, y = (shingle_hashes(shingle_text(t), ngram) for t in (a, b))
    if not x.size or not y.size:
        return None
    inter = np.intersect1d(x, y, assume_unique=True).size
    return inter / (x.size + y.size - inter)
