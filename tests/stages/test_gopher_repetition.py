import random
from collections import Counter

import numpy as np
import pytest

from lab.select.rules import first_failure
from lab.stages import gopher_repetition as gr

RULES = gr.rules(gr.Config())
# 30 distinct 4-letter words
WORDS30 = ("able acid aged also area army away baby back ball band bank base bath bear "
           "beat been beer bell belt best bill bird blow blue boat body bomb bond bone").split()


def reason(text: str) -> str | None:
    return first_failure(RULES, gr.signals(text))


def test_duplicate_paragraphs():
    text = "a b\n\na b\n\nc d"  # 13 characters; paragraph 2 repeats paragraph 1
    s = gr.signals(text)
    assert s["gr_dup_para_frac"] == 1 / 3
    assert s["gr_dup_para_char_frac"] == 3 / 13
    assert reason(text) == "gopher_repetition.dup_para_frac"


def test_duplicate_lines():
    text = "one line\nanother\none line\nthird one\nanother"  # 43 characters, one paragraph
    s = gr.signals(text)
    assert s["gr_dup_para_frac"] == 0.0
    assert s["gr_dup_line_frac"] == 2 / 5  # "one line" and "another" again
    assert s["gr_dup_line_char_frac"] == (8 + 7) / 43
    assert reason(text) == "gopher_repetition.dup_line_frac"

    long = "a rather long line that is repeated once"  # 40 characters
    text = "\n".join([long, "x", "y", "z", "w", long])  # 40+4+40 + 5 newlines = 89
    s = gr.signals(text)
    assert s["gr_dup_line_frac"] == 1 / 6
    assert s["gr_dup_line_char_frac"] == 40 / 89
    assert reason(text) == "gopher_repetition.dup_line_char_frac"


def test_top_ngrams_count_overlapping_occurrences():
    text = "the cat the cat the cat sat"  # 27 characters
    s = gr.signals(text)
    assert s["gr_top_2gram_char_frac"] == 7 * 3 / 27  # "the cat" x3
    assert s["gr_top_3gram_char_frac"] == 11 * 2 / 27  # "the cat the" x2, first of the 2-count 3-grams
    assert s["gr_top_4gram_char_frac"] == 15 * 2 / 27  # "the cat the cat" at 0 and 2: above 1 is possible
    assert s["gr_dup_5gram_char_frac"] == 0.0  # the three 5-grams differ
    assert reason(text) == "gopher_repetition.top_2gram"


def test_repeated_passage_duplicated_ngrams():
    passage = " ".join(WORDS30)  # 30 words x 4 letters + 29 spaces = 149
    text = passage + " " + passage  # 299 characters, 60 words
    s = gr.signals(text)
    # every 2..4-gram of the passage occurs twice; the first one wins: len("able acid") = 9, ...
    assert s["gr_top_2gram_char_frac"] == 9 * 2 / 299
    assert s["gr_top_3gram_char_frac"] == 14 * 2 / 299
    assert s["gr_top_4gram_char_frac"] == 19 * 2 / 299
    # greedy scan: the second copy starts at word 30; each duplicate adds 4n characters and jumps n
    # words, while the n-gram still fits (start <= 60 - n)
    assert s["gr_dup_5gram_char_frac"] == 6 * 20 / 299  # starts 30 35 40 45 50 55
    assert s["gr_dup_6gram_char_frac"] == 5 * 24 / 299  # 30 36 42 48 54
    assert s["gr_dup_7gram_char_frac"] == 4 * 28 / 299  # 30 37 44 51
    assert s["gr_dup_8gram_char_frac"] == 3 * 32 / 299  # 30 38 46
    assert s["gr_dup_9gram_char_frac"] == 3 * 36 / 299  # 30 39 48
    assert s["gr_dup_10gram_char_frac"] == 3 * 40 / 299  # 30 40 50
    assert reason(text) == "gopher_repetition.dup_5gram"


def test_empty_doc_fails_first_rule():
    s = gr.signals("")
    assert set(s) == set(gr.SIGNALS) and all(v == 1.0 for v in s.values())
    assert reason("") == "gopher_repetition.dup_para_frac"


def test_realistic_doc_passes():
    text = (
        "Rivers carry water from high ground to the sea, shaping valleys as they go.\n\n"
        "Near their source they are fast and narrow; lower down they slow, widen and drop the sand "
        "and gravel they carried, building plains and deltas where farms and towns later grew.\n\n"
        "People have dammed, straightened and polluted many rivers, and restoring them is now a "
        "common goal of city planners."
    )
    s = gr.signals(text)
    assert s["gr_dup_para_frac"] == s["gr_dup_line_frac"] == 0.0
    assert all(s[f"gr_dup_{n}gram_char_frac"] == 0.0 for n in gr.DUP_NS)
    assert s["gr_top_2gram_char_frac"] == len("Rivers carry") / len(text)  # all 2-grams unique: the first wins
    assert reason(text) is None


# --- the numpy n-gram code against datatrove's definition, written the slow, obvious way ---

def reference_top(words: list[str], n: int) -> int:
    ngrams = [" ".join(words[i:i + n]) for i in range(len(words) - n + 1)]
    if not ngrams:
        return 0
    gram, count = Counter(ngrams).most_common(1)[0]
    return len(gram) * count


def reference_dup(words: list[str], n: int) -> int:
    seen, total, i = set(), 0, 0
    while i < len(words) - n + 1:
        gram = "".join(words[i:i + n])
        if gram in seen:
            total += len(gram)
            i += n
        else:
            seen.add(gram)
            i += 1
    return total


@pytest.mark.parametrize("seed", range(4))
def test_fast_ngrams_equal_reference(seed):
    rng = random.Random(seed)
    # tiny vocabularies force repeats; "ab"+"c" == "a"+"bc" makes joined n-grams collide as datatrove's do
    vocab = ["a", "b", "c", "ab", "bc", "abc", "ca", "x"]
    for _ in range(150):
        k = rng.randint(1, len(vocab))
        ws = [rng.choice(vocab[:k]) for _ in range(rng.randint(0, 80))]
        ws += [f"u{i}" for i in range(rng.randint(0, 3))]  # a tail of unique words
        ids_of = {w: i for i, w in enumerate(dict.fromkeys(ws))}
        ids = np.array([ids_of[w] for w in ws], dtype=np.int64)
        lens = np.array([len(w) for w in ws], dtype=np.int64)
        assert gr.top_ngram_chars(ids, lens) == {n: reference_top(ws, n) for n in gr.TOP_NS}, ws
        assert gr.dup_ngram_chars(tuple(ws), lens) == {n: reference_dup(ws, n) for n in gr.DUP_NS}, ws


def test_signals_equal_reference_on_random_text():
    rng = random.Random(42)
    vocab = "the of a cat sat mat on dog log".split()
    for _ in range(50):
        ws = [rng.choice(vocab) for _ in range(rng.randint(5, 300))]
        text = " ".join(ws)  # plain lowercase words: the word splitter returns them unchanged
        s = gr.signals(text)
        for n in gr.TOP_NS:
            assert s[f"gr_top_{n}gram_char_frac"] == reference_top(ws, n) / len(text)
        for n in gr.DUP_NS:
            assert s[f"gr_dup_{n}gram_char_frac"] == reference_dup(ws, n) / len(text)
