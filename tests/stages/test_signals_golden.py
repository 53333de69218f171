"""Signals stay bit-identical: every text-only stage's signals, and the shared word split, of the
sample's seeded documents and of seeded random text, against the values recorded in
``signals_golden.json``.

The hot stages are rewritten for speed from time to time (issue 17); a rewrite must give the same
floats, not close ones, or the run's signals hash must change (the stage's ``VERSION``). The random
text is built to hit the corners of every rule: contractions, abbreviations, URLs, e-mail and IP
addresses, phone numbers, version and section numbers, bullets, ellipses, repeated lines and
paragraphs, many scripts, odd whitespace, empty documents.

The recorded values depend on the language model, the word segmenter and the stop-word lists as
much as on the code; when the installed ones differ from those recorded (the lower-bounds job),
the test is skipped, saying which.

Regenerate (only together with a ``VERSION`` bump of the stage that changed):
    .venv/bin/python -m tests.stages.test_signals_golden --write
"""

from __future__ import annotations

import hashlib
import json
import random
import sys
from pathlib import Path

import pytest

from lab.stages import STAGES
from lab.text import segment, stopwords
from lab.text import words as text_mod

GOLDEN = Path(__file__).with_name("signals_golden.json")
SAMPLE_DOCS = Path(__file__).parents[2] / "data" / "sample" / "synthetic" / "documents.jsonl"
N_RANDOM = 400

_WORDS = ("the of and to in a is that for it as was with be by on not he this are or his from at which but have "
          "an they you were her she there been one all we their has would when if so no will can more other "
          "corpus token filter shard language quality repetition window paragraph document threshold signal").split()
_SPECIAL = ["don't", "can't", "cannot", "it's", "I'm", "we'll", "e.g.", "i.e.", "U.S.", "Mr.", "Dr.", "etc.",
            "3.5kg", "10km", "$5", "US$10", "5%", "well-known", "a,b", "foo...", "...", "…", "--", "—", "(see)",
            ":)", ":-(", "<3", "#tag", "##", "@property", "x@self.weights", "http://example.com/a?b=c",
            "www.example.org", "bob@example.org", "josé.garcía@correo.es", "root@localhost", "a@b.test",
            "8.8.8.8", "10.0.0.1", "93.184.216.34", "93.184.216.0/24", "255.255.255.0", "2001:4860:4860::8888",
            "::1", "std::map", "fe80::1:2:3", "+1 415-555-0100", "(030) 1234-5678", "555 123 4567",
            "version 1.0.0.1", "15.4.1.3.", "§ 2.1.3.4", "foo-1.2.3.4.tar.gz", "1.2.3.4-beta", "{", "}",
            "lorem ipsum", "javascript", "°C.", "10°F.", "’s", "'S", "O'Neil", "naïve", "café", "Straße"]
_SCRIPTS = ["Größe Übung Äpfel schön", "Ελληνικά γλώσσα λέξη", "русский язык слово текст", "中文文本测试我们今天",
            "日本語のテキストです", "ภาษาไทยข้อความ", "한국어 텍스트 입니다", "العربية نص", "हिन्दी पाठ", "😀🎉👍",
            "ⅣⅫ ①② ½ ¾", "\u200b\u200d", "\ufffd"]
_SPACES = [" ", " ", " ", " ", "  ", "\t", "\xa0", "\u3000", " \u2003 "]
_BREAKS = ["\n", "\n", "\n", "\n\n", "\n\n\n", "\r\n", "\n \n"]


def random_text(rng: random.Random) -> str:
    """One seeded random document (0 to ~12,000 characters)."""
    if rng.random() < 0.03:
        return rng.choice(["", " ", "\n", "\n\n", "...", "a"])
    lines: list[str] = []
    target = int(rng.expovariate(1 / 2500))
    size = 0
    while size < target:
        r = rng.random()
        if r < 0.08 and lines:  # a repeated line or paragraph
            line = rng.choice(lines)
        else:
            n = rng.randint(1, 30)
            toks = []
            for _ in range(n):
                s = rng.random()
                if s < 0.70:
                    toks.append(rng.choice(_WORDS).capitalize() if rng.random() < 0.1 else rng.choice(_WORDS))
                elif s < 0.85:
                    toks.append(rng.choice(_SPECIAL))
                elif s < 0.92:
                    toks.append(rng.choice(_SCRIPTS))
                else:
                    toks.append("".join(chr(rng.randint(33, 0x2FFF)) for _ in range(rng.randint(1, 8))))
                toks.append(rng.choice(_SPACES))
            line = "".join(toks).rstrip(" ")
            p = rng.random()
            if p < 0.1:
                line = rng.choice(["- ", "• ", "  - ", "* "]) + line
            elif p < 0.2:
                line += rng.choice(["...", "…", " ..."])
            elif p < 0.7:
                line += rng.choice([".", "!", "?", "。", ":", ""])
        lines.append(line)
        lines.append(rng.choice(_BREAKS))
        size += len(line) + 1
    return "".join(lines)


def texts(sample_docs: Path = SAMPLE_DOCS) -> dict[str, str]:
    """key -> text: the sample's seeded documents and the random ones."""
    out = {}
    if sample_docs.exists():
        for line in sample_docs.read_text().splitlines():
            rec = json.loads(line)
            out[f"sample/{rec['id']}"] = rec["text"]
    rng = random.Random(17)
    for i in range(N_RANDOM):
        out[f"random/{i:04d}"] = random_text(rng)
    return out


def environment() -> dict:
    """What the recorded values depend on besides the code."""
    return {**segment.signal_params(), **stopwords.versions()}


def _digest(value) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]


def signals_of(text: str) -> dict[str, object]:
    """stage (and the shared word split) -> this text's values."""
    out: dict[str, object] = {"words": list(segment.document_words(text)),
                              "english_words": list(text_mod.words(text))}
    for m in STAGES:
        if m.NAME in ("extract", "url", "quality_model", "decontamination"):
            continue  # no text-only signals worth pinning (HTML, URL lists, models, indexes)
        if hasattr(m, "signals"):
            out[m.NAME] = m.signals(text)
    lang = out.get("language") or {}
    if isinstance(lang, dict):  # the model's score is floats of fastText: pin the label only
        out["language"] = {k: v for k, v in lang.items() if not isinstance(v, float)}
    return out


def digests(sample_docs: Path = SAMPLE_DOCS) -> dict[str, dict[str, str]]:
    return {key: {name: _digest(v) for name, v in signals_of(t).items()} for key, t in texts(sample_docs).items()}


def test_signals_are_bit_identical_to_the_recorded_ones(synthetic_src):
    """The sample's seeded documents as the test session builds them (``synthetic_src``), and the random ones."""
    golden = json.loads(GOLDEN.read_text())
    if golden["environment"] != environment():
        pytest.skip(f"recorded with {golden['environment']}, installed: {environment()}")
    sample_docs = synthetic_src / "documents.jsonl"
    now = digests(sample_docs)
    assert set(now) == set(golden["digests"]), "the generated texts changed: regenerate only with a VERSION bump"
    changed = [(key, name) for key, d in golden["digests"].items() for name, h in d.items() if now[key].get(name) != h]
    if changed:
        key, name = changed[0]
        text = texts(sample_docs)[key]
        pytest.fail(f"{len(changed)} (document, stage) pairs changed, e.g. {name} of {key} "
                    f"({text[:80]!r}...): now {signals_of(text)[name]!r}")


def test_random_text_is_seeded():
    assert random_text(random.Random(5)) == random_text(random.Random(5))
    sizes = [len(random_text(random.Random(i))) for i in range(50)]
    assert min(sizes) == 0 or min(sizes) < 100
    assert max(sizes) > 5000


if __name__ == "__main__" and "--write" in sys.argv:
    GOLDEN.write_text(json.dumps({"environment": environment(), "digests": digests()}, indent=0, sort_keys=True) + "\n")
    print(f"wrote {GOLDEN}")
