import pytest

from lab.rules import first_failure
from lab.stages import gopher_quality as gq
from lab.stages.text import words

RULES = gq.rules(gq.Config())


def reason(text: str) -> str | None:
    return first_failure(RULES, gq.signals(text))


def test_short_doc_values_and_reason():
    s = gq.signals("The cat sat on the mat.")
    # words: The cat sat on the mat . -> 7, of which 6 are not symbols
    assert s["gq_words"] == 6
    assert s["gq_mean_word_length"] == 17 / 6  # 3+3+3+2+3+3
    assert s["gq_alpha_words_ratio"] == 6 / 7  # "." has no letter
    assert s["gq_stop_words"] == 1  # "the" only: "The" does not count (case-sensitive)
    assert s["gq_hash_word_ratio"] == s["gq_ellipsis_word_ratio"] == 0.0
    assert s["gq_bullet_lines_ratio"] == s["gq_ellipsis_lines_ratio"] == 0.0
    assert reason("The cat sat on the mat.") == "gopher_quality.too_short"


def test_short_words():
    text = " ".join(["to be"] * 30)
    s = gq.signals(text)
    assert (s["gq_words"], s["gq_mean_word_length"], s["gq_stop_words"]) == (60, 2.0, 2)  # "to", "be": 2 chars each
    assert reason(text) == "gopher_quality.short_words"


def test_too_many_hashes():
    text = "the cat and the dog " * 10 + "######"
    s = gq.signals(text)
    # 50 words of 3 letters; "######" splits into 6 "#" symbols: 56 words in all
    assert (s["gq_words"], s["gq_mean_word_length"]) == (50, 3.0)
    assert s["gq_hash_word_ratio"] == 6 / 56  # 0.107 > 0.1
    assert s["gq_alpha_words_ratio"] == 50 / 56
    assert reason(text) == "gopher_quality.too_many_hashes"


def test_bullets_and_end_ellipses():
    bullets = "\n".join(["- the quick brown fox jumps"] * 10)
    s = gq.signals(bullets)
    # 10 lines x (5 words + the "-" symbol); mean (3+5+5+3+5)/5
    assert (s["gq_words"], s["gq_mean_word_length"], s["gq_bullet_lines_ratio"]) == (50, 4.2, 1.0)
    assert reason(bullets) == "gopher_quality.too_many_bullets"

    ellipses = "\n".join(["the cat and the dog ran to the big red barn..."] * 5)
    s = gq.signals(ellipses)
    # 5 lines x (11 words + "..."): 5 ellipses / 60 words = 0.083 <= 0.1, but 5/5 lines end with one
    assert (s["gq_words"], s["gq_mean_word_length"]) == (55, 3.0)  # 33 chars / 11 words per line
    assert s["gq_ellipsis_word_ratio"] == 5 / 60
    assert s["gq_ellipsis_lines_ratio"] == 1.0
    assert reason(ellipses) == "gopher_quality.too_many_end_ellipsis"


def test_alpha_ratio_and_stop_words():
    numbers = "and the 123 456 789 " * 12
    s = gq.signals(numbers)
    assert (s["gq_words"], s["gq_mean_word_length"]) == (60, 3.0)
    assert s["gq_alpha_words_ratio"] == 24 / 60  # "and", "the" of every 5
    assert reason(numbers) == "gopher_quality.too_few_alpha_words"

    no_stop = "The alpha beta gamma delta " * 10
    s = gq.signals(no_stop)
    assert (s["gq_words"], s["gq_mean_word_length"], s["gq_stop_words"]) == (50, 4.4, 0)  # (3+5+4+5+5)/5
    assert reason(no_stop) == "gopher_quality.too_few_stop_words"
    # distinct stop words: "the the the" is one, so two are needed
    assert gq.signals("the " * 60 + "and")["gq_stop_words"] == 2


@pytest.mark.parametrize("text", ["", "   \n\n  "])
def test_empty_doc_fails_too_short_with_zero_values(text):
    s = gq.signals(text)
    assert set(s) == set(gq.SIGNALS)
    assert all(v == 0 for v in s.values())
    assert reason(text) == "gopher_quality.too_short"


def test_realistic_paragraph_passes():
    text = (
        "The committee met on Tuesday to review the budget for the coming year. After a long discussion, "
        "the members agreed that the library should have more money for new books and for repairs to the "
        "old reading room. The chair thanked everyone for their work and closed the meeting with a short "
        "note about the schedule for the spring. Minutes will be sent to all members by the end of the week."
    )
    s = gq.signals(text)
    assert s["gq_words"] == len(text.split()) == 72  # the 4 periods and 1 comma split off as symbols
    assert len(words(text)) == 72 + 5
    assert s["gq_stop_words"] == 8  # all of them: the to that have and with be ("will be") of ("end of")
    assert s["gq_alpha_words_ratio"] == 72 / 77
    assert reason(text) is None


def test_signal_types_match_schema():
    s = gq.signals("Some text with # and ... in it.\n- a bullet")
    assert set(s) == set(gq.SIGNALS)
    assert all(isinstance(s[k], int if str(t).startswith("int") else float) for k, t in gq.SIGNALS.items())
