"""The word split's fast forms give what its plain forms give (lab.stages.text)."""

import random

from lab.stages import text


def test_the_reordered_infix_pattern_finds_what_the_plain_one_finds():
    rng = random.Random(3)
    pieces = list(".…-–—~:<>=/,+*^'\"’`«»aAzZé9_ü😀©™°") + ["--", "---", "——", "...", "a.B", "1-2", "x,y", "a/b"]
    chunks = ["".join(rng.choice(pieces) for _ in range(rng.randint(1, 12))) for _ in range(50_000)]
    chunks += ["well-known", "a--b", "a---b", "a——b", "a—b", "a–b", "a~b", "3+4", "3-4", "3*-4", "e.g.", "U.S.A",
               "foo...bar", "…x", "a,b", "a:b", "a<b", "a=b", "x/y", "1/2", "😀😀"]
    found = 0
    for c in chunks:
        fast = [m.span() for m in text._INFIX_FAST.finditer(c)]
        assert fast == [m.span() for m in text._INFIX.finditer(c)], c
        found += len(fast)
    assert found > 10_000  # the chunks do hit every alternative's characters
