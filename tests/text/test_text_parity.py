"""``lab.text.words`` against the library it re-implements: spaCy's blank English tokenizer (datatrove's English
word split) and its sentencizer (datatrove's C4 sentence count), on real text (the README, description and
descriptions of the installed Python packages) and the sample's synthetic documents.

Why a second implementation, and what a user gains, is in ``docs/`` (libraries); this test is the parity the
rule asks for: every English document splits into the same words, every kept line into the same number of
sentences. The one known difference is in scripts spaCy lists by hand (a Thai run glued to digits splits
at other places); the test names those documents.
"""

from __future__ import annotations

import json
import re

import pytest

from lab.text import words as text

spacy = pytest.importorskip("spacy")
NON_LATIN = re.compile(r"[^\x00-\u024f\u2000-\u206f]")  # outside Latin (and general punctuation)


@pytest.fixture(scope="module")
def nlp():
    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    return nlp


@pytest.fixture(scope="module")
def documents(synthetic_src) -> list[str]:
    import sysconfig
    from importlib import metadata

    real = []  # the long descriptions of the installed packages: READMEs in Markdown and reST, changelogs
    site = [sysconfig.get_paths()["purelib"]]  # not sys.path: another test of the process may have moved it
    for dist in sorted(metadata.distributions(path=site), key=lambda d: (d.metadata["Name"] or "").lower()):
        desc = (dist.read_text("METADATA") or "").partition("\n\n")[2]  # the body after the headers
        if len(desc) >= 500:
            real.append(desc[:20_000])
    synthetic = [json.loads(line)["text"] for line in open(synthetic_src / "documents.jsonl", encoding="utf-8")]
    assert len(real) >= 40 and len(synthetic) >= 300, (len(real), len(synthetic))  # a minimal install has fewer
    return real + synthetic


def test_words_are_spacys_blank_english_tokens(nlp, documents):
    differ = []
    for doc in documents:
        ours = list(text.words(doc))
        theirs = [t.text for t in nlp.tokenizer(doc) if not t.is_space]
        if ours != theirs:
            differ.append((ours, theirs))
    # where they differ, only tokens of scripts outside Latin do
    for ours, theirs in differ:
        extra = set(ours) ^ set(theirs)
        assert all(NON_LATIN.search(t) for t in extra), sorted(extra)[:10]
    assert len(differ) <= len(documents) // 500, len(differ)


def test_sentences_are_spacys_sentencizer_on_the_lines_c4_counts(nlp, documents):
    lines = [line.strip() for doc in documents for line in doc.splitlines() if line.strip()][:20_000]
    differ = [(line, text.sentences(line), len(list(nlp(line).sents))) for line in lines
              if text.sentences(line) != len(list(nlp(line).sents))]
    assert len(lines) == 20_000 and differ == []
