"""c4: the C4 heuristics (Raffel et al. 2020, §2.2), as line counts and document flags.

C4 removes lines (a word over 1,000 characters, no terminal punctuation or an ellipsis at the end,
fewer than 3 words, the word "javascript", cookie/terms/privacy-policy phrases) and drops documents (a
"lorem ipsum" or a curly brace on a kept line, fewer than 5 sentences left). Here the line checks are
stored as counts and the document checks as signals; the rules drop documents only, and the stored text
is not rewritten. The checks follow datatrove's ``C4QualityFilter`` with its defaults, in its order;
sentences are counted with spaCy's sentencizer rule (``lab.text.words.sentences``). A document with both
flags is dropped as ``lorem_ipsum`` even where datatrove names the curly brace.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pyarrow as pa

from lab.fields import check, knob
from lab.select.rules import Rule
from lab.text.words import sentences

NAME = "c4"
VERSION = 1  # bump when signals() (or what it reads: word lists, models) gives other values
SOURCE = "C4 (Raffel et al. 2020)"
MAX_WORD_LENGTH = 1000  # characters
MIN_WORDS_PER_LINE = 3
END_PUNCTUATION = (".", "?", "!", '"', "'")
POLICY_SUBSTRINGS = ("terms of use", "privacy policy", "cookie policy", "uses cookies", "use of cookies", "use cookies")
_CITATION = re.compile(r"\[\d*]|\[edit]|\[citation needed]")


@dataclass(frozen=True)
class Config:
    enabled: bool = knob(True, unit="on/off",
                         help="On: a kept document passes the C4 rules; off: this stage drops nothing.")
    min_sentences: int = knob(5, unit="sentences",
                              help="A kept document has at least this many sentences on the lines C4 keeps.")
    filter_lorem_ipsum: bool = knob(True, unit="on/off",
                                    help="On: no line C4 keeps of a kept document contains 'lorem ipsum'.")
    filter_curly_brace: bool = knob(True, unit="on/off",
                                    help="On: no line C4 keeps of a kept document contains a curly brace.")

    def __post_init__(self) -> None:
        check("min_sentences", self.min_sentences, self.min_sentences >= 0, ">= 0")


SIGNALS = {
    "c4_lines": pa.int64(),
    "c4_lines_long_word": pa.int64(),  # a word over 1,000 characters
    "c4_lines_no_terminal_punct": pa.int64(),
    "c4_lines_few_words": pa.int64(),  # fewer than 3 words
    "c4_lines_javascript": pa.int64(),
    "c4_lines_policy": pa.int64(),
    "c4_lorem_ipsum": pa.int64(),  # 1 when a kept line contains "lorem ipsum"
    "c4_curly_brace": pa.int64(),  # 1 when a kept line contains "{"
    "c4_sentences": pa.int64(),  # sentences on the kept lines
}


def signals(text: str) -> dict:
    """
    >>> s = signals("Read the privacy policy here.\\nOne. Two! Three? Four. Five.\\nMenu")
    >>> s["c4_lines"], s["c4_lines_policy"], s["c4_lines_no_terminal_punct"], s["c4_sentences"]
    (3, 1, 1, 5)
    """
    lines = text.splitlines()
    long_word = no_punct = few_words = javascript = policy = lorem = curly = n_sentences = 0
    for line in lines:
        line = line.strip()
        ws = line.split()
        if len(line) > MAX_WORD_LENGTH and max(map(len, ws)) > MAX_WORD_LENGTH:
            long_word += 1
            continue
        if "[" in line:
            line = _CITATION.sub("", line)
        if not line.endswith(END_PUNCTUATION) or line.endswith("..."):
            no_punct += 1
            continue
        if len(ws) < MIN_WORDS_PER_LINE:
            few_words += 1
            continue
        lower = line.lower()
        if "lorem ipsum" in lower:
            lorem = 1
        if "javascript" in lower:
            javascript += 1
            continue
        if "{" in line:
            curly = 1
        if any(p in lower for p in POLICY_SUBSTRINGS):
            policy += 1
            continue
        n_sentences += sentences(line)
    return {
        "c4_lines": len(lines),
        "c4_lines_long_word": long_word,
        "c4_lines_no_terminal_punct": no_punct,
        "c4_lines_few_words": few_words,
        "c4_lines_javascript": javascript,
        "c4_lines_policy": policy,
        "c4_lorem_ipsum": lorem,
        "c4_curly_brace": curly,
        "c4_sentences": n_sentences,
    }


def rules(cfg: Config) -> list[Rule]:
    out = []
    if cfg.filter_lorem_ipsum:
        out.append(Rule(NAME, "c4_lorem_ipsum", "==", 0, "lorem_ipsum"))
    if cfg.filter_curly_brace:
        out.append(Rule(NAME, "c4_curly_brace", "==", 0, "curly_brace"))
    out.append(Rule(NAME, "c4_sentences", ">=", cfg.min_sentences, "too_few_sentences"))
    return out
