"""The word split's fast forms give what its plain forms give (lab.text.words)."""

import random
import re

from lab.text import words as text

INFIX = re.compile(text._INFIX)  # spaCy's infix rule as written


def test_the_reordered_infix_pattern_finds_what_the_plain_one_finds():
    rng = random.Random(3)
    pieces = list(".…-–—~:<>=/,+*^'\"’`«»aAzZé9_ü😀©™°") + ["--", "---", "——", "...", "a.B", "1-2", "x,y", "a/b"]
    chunks = ["".join(rng.choice(pieces) for _ in range(rng.randint(1, 12))) for _ in range(50_000)]
    chunks += ["well-known", "a--b", "a---b", "a——b", "a—b", "a–b", "a~b", "3+4", "3-4", "3*-4", "e.g.", "U.S.A",
               "foo...bar", "…x", "a,b", "a:b", "a<b", "a=b", "x/y", "1/2", "😀😀"]
    found = 0
    for c in chunks:
        fast = [m.span() for m in text._INFIX_FAST.finditer(c)]
        assert fast == [m.span() for m in INFIX.finditer(c)], c
        found += len(fast)
    assert found > 10_000  # the chunks do hit every alternative's characters


def _plain_suffix_len(s: str) -> int:
    if s.endswith(".."):
        return len(s) - len(s.rstrip("."))
    m = text._SUFFIX.search(s, max(0, len(s) - 4))
    return m.end() - m.start() if m else 0


def _plain_split(s: str, specials: dict) -> list[str]:
    """``text._split`` as first written: spaCy's loop, every regex tried at every step."""
    if s in specials:
        return list(specials[s])
    prefixes, suffixes, last = [], [], 0
    while s and len(s) != last:
        if s in specials:
            break
        last = len(s)
        m = text._PREFIX.search(s)
        pre = m.end() if m else 0
        if pre and s[pre:] in specials:
            prefixes.append(s[:pre])
            s = s[pre:]
            break
        suf = _plain_suffix_len(s[pre:])
        if suf and s[:-suf] in specials:
            suffixes.append(s[-suf:])
            s = s[:-suf]
            break
        if pre and suf and pre + suf <= len(s):
            prefixes.append(s[:pre])
            suffixes.append(s[-suf:])
            s = s[pre:-suf]
        elif pre:
            prefixes.append(s[:pre])
            s = s[pre:]
        elif suf:
            suffixes.append(s[-suf:])
            s = s[:-suf]
    out = prefixes
    if s in specials:
        out.extend(specials[s])
    elif "." in s and text._URL.match(s):
        out.append(s)
    elif s:
        start = 0
        for m in INFIX.finditer(s):
            if m.start() == 0:
                continue
            if m.start() != start:
                out.append(s[start:m.start()])
            if m.end() != m.start():
                out.append(m.group())
            start = m.end()
        if start < len(s):
            out.append(s[start:])
    return out + suffixes[::-1]


def test_the_fast_chunk_split_gives_the_plain_split(synthetic_src):
    """The affix shortcuts (a chunk's last character ends no suffix; re.split for the infixes) change
    no token: random chunks over every affix, infix and special, units after digits, and the sample's."""
    rng = random.Random(5)
    pieces = list(".…-–—~:<>=/,+*^'\"’`«»()[]{}$£%§aAzZé9_ü😀©™°@#!?;²") + [
        "--", "---", "US$", "http://", "www.", ".com", "'s", "’S", "n't", "km", "mbar", "km/h", "e.g.", "U.S.", ":)",
        "d.", "can", "not", "I'm", "°F", "12", "ha", "oz", "..."]
    chunks = {"".join(rng.choice(pieces) for _ in range(rng.randint(1, 10))) for _ in range(60_000)}
    chunks |= {f"{n}{u}{p}" for n in ("3", "3.5", "x", "") for u in text._UNITS + text._CURRENCY for p in ("", ".", ",")}
    for f in synthetic_src.glob("*.jsonl"):
        chunks |= set(f.read_text(encoding="utf-8", errors="replace").split())
    diff = [c for c in chunks if text._split(c, text._SPECIALS) != _plain_split(c, text._SPECIALS)]
    assert not diff, diff[:10]
    assert sum(text._suffix_len(c) > 0 for c in chunks) > 10_000  # the shortcut is not all there is


def test_a_chunk_ending_in_no_suffix_character_has_no_suffix():
    """Every code point the classes cover, after contexts that satisfy each suffix's lookbehind (but
    whitespace: a chunk has none, and ``$`` would match before a final newline)."""
    for c in map(chr, (*range(0x10000), *range(0x1F000, 0x1FC00))):
        if text._SUFFIX_ENDS.match(c) or c in text._AFTER_DIGIT_ENDS or c.isspace():
            continue
        for before in ("", "0", "a", "AA", "°F", "%", "'", "12k"):
            assert text._SUFFIX.search(before + c) is None, (before, c)
