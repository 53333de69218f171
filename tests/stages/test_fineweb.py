import pytest

from lab.select.rules import first_failure
from lab.stages import fineweb as fw

RULES = fw.rules(fw.Config())


def reason(text: str) -> str | None:
    return first_failure(RULES, fw.signals(text))


def test_quotes_are_not_terminal_punctuation():
    text = 'He said "we are done here."\nShe answered "not yet, not today."'
    s = fw.signals(text)
    assert s["fw_line_punct_ratio"] == 0.0  # both lines end with a quote mark, not with . ! ?
    assert reason(text) == "fineweb.line_punct_ratio"


def test_short_lines():
    text = "Yes.\nNo.\nMaybe.\nThis line is certainly longer than thirty characters."
    s = fw.signals(text)
    assert s["fw_line_punct_ratio"] == 1.0
    assert s["fw_short_line_ratio"] == 3 / 4  # 4, 3 and 6 characters <= 30
    assert reason(text) == "fineweb.short_line_ratio"


def test_duplicate_line_characters_ignore_newlines_and_blank_lines():
    line = "This sentence appears twice in the document."  # 44 characters
    text = f"{line}\n\n{line}\nA third line that is different from both."  # 44+44+41 chars, 3 newlines
    s = fw.signals(text)
    assert s["fw_dup_line_char_ratio"] == 44 / (44 + 44 + 41)
    assert s["fw_short_line_ratio"] == 0.0  # the blank line is not a line
    assert reason(text) == "fineweb.char_dup_ratio"


def test_newlines_per_word():
    text = "Supercalifragilisticexpialidocious!\nPneumonoultramicroscopicsilicovolcanoconiosis.\n" \
           "Antidisestablishmentarianism rules!\n"
    s = fw.signals(text)
    assert (s["fw_line_punct_ratio"], s["fw_short_line_ratio"], s["fw_dup_line_char_ratio"]) == (1.0, 0.0, 0.0)
    assert s["fw_newline_word_ratio"] == 3 / 7  # words: 1+1 + 1+1 + 2+1 (the marks are words too)
    assert reason(text) == "fineweb.list_ratio"


@pytest.mark.parametrize("text", ["", "\n\n", "  \n\t\n"])
def test_empty_doc_fails_line_punct(text):
    s = fw.signals(text)
    assert s == {"fw_line_punct_ratio": 0.0, "fw_short_line_ratio": 0.0, "fw_dup_line_char_ratio": 0.0,
                 "fw_newline_word_ratio": 0.0}
    assert reason(text) == "fineweb.line_punct_ratio"


def test_realistic_doc_passes():
    text = (
        "How to repot a houseplant\n"
        "Spring is the best time to move a plant into a bigger pot, when it starts to grow again.\n"
        "Water it the day before, so that the root ball holds together and slides out in one piece.\n"
        "Choose a pot only a little wider than the old one; too much wet soil can rot the roots.\n"
        "Keep the plant out of direct sun for a week while it settles in."
    )
    s = fw.signals(text)
    assert s["fw_line_punct_ratio"] == 4 / 5  # the title has none
    assert s["fw_short_line_ratio"] == 1 / 5  # the title, 25 characters
    assert s["fw_dup_line_char_ratio"] == 0.0
    assert reason(text) is None
