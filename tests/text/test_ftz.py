"""lab.text.ftz gives fastText's own prediction, to the bit, on real and random text."""

from __future__ import annotations

import os
import random
import shutil
import struct
import sys
from pathlib import Path

import numpy as np
import pytest

from lab.text import ftz, langid

sys.path.insert(0, str(Path(__file__).parents[1] / "stages"))
import test_signals_golden as golden  # noqa: E402  (its seeded sample and random documents)

# what fastText's reader treats specially: its separators (\0 too), its end-of-line word, labels
_ODD = ["</s>", "<s>", "</s>x", "__label__en", "__label__", "__label__xx", "__labe", "\x00", "\r", "\x0b", "\x0c",
        "\t", "\xa0", "\u2028", "\u3000", "<", ">", "<>", "a", "é", "ß", "Σ", "中", "😀", "👩‍👩‍👧", "e\u0301",
        "\ud7ff", "\U0010ffff", "x" * 300, "ab" * 50, "Zürich-Straße_12", "http://example.org/a?b=c"]


def _reference():
    return langid.fasttext_model()


def _same(ours, theirs_labels, theirs_probs) -> bool:
    if ours is None:
        return len(theirs_labels) == 0
    return (ours[0], ours[1]) == (theirs_labels[0], theirs_probs[0])  # exact floats, not close ones


def _odd_texts(rng: random.Random, n: int) -> list[str]:
    out = []
    for _ in range(n):
        words = []
        for _ in range(rng.randint(1, 40)):
            r = rng.random()
            if r < 0.3:
                words.append(rng.choice(_ODD))
            else:
                words.append("".join(rng.choice("abcdeéü中ру😀\x00\r\t<>_/.-'") for _ in range(rng.randint(1, 14))))
        out.append(rng.choice([" ", "", "\t", "\x00", "  "]).join(words))
    return out


def _lines(texts) -> list[str]:
    """What the language stage gives the model: one line (fastText reads up to the first newline)."""
    return [t[: langid.MAX_CHARS].replace("\n", " ") for t in texts]


def test_the_sample_and_random_documents_get_fasttexts_label_and_probability():
    ref, ours = _reference(), ftz.Model(langid.model_path())
    texts = _lines(golden.texts().values()) + _odd_texts(random.Random(3), 1500)
    texts += [t.lower() for t in texts[:200]] + ["", " ", "\x00", "</s>", "__label__en", "a </s> b"]
    one_by_one = [ours.predict(t) for t in texts]
    fresh = ftz.Model(langid.model_path())  # every word new again, looked up 64 texts at a time
    together = [p for i in range(0, len(texts), 64) for p in fresh.predict_many(texts[i:i + 64])]
    assert one_by_one == together
    wrong = [t for t, p in zip(texts, one_by_one) if not _same(p, *ref.predict(t, k=1))]
    assert not wrong, f"{len(wrong)} of {len(texts)} differ, e.g. {wrong[0][:200]!r}"
    assert len({p[0] for p in one_by_one if p}) >= 10  # many labels, not one


def test_translated_man_pages_get_fasttexts_label_and_probability():
    """Real text in many languages and scripts: Debian's translated man pages (installed by .ci/setup --test)."""
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
    import langid as man_pages  # bench/langid.py: the translated man pages

    have = [d for d in ("de", "fr", "es", "it", "nl", "pl", "ru", "pt", "ja", "zh_CN", "uk", "cs", "tr")
            if os.path.isdir(f"/usr/share/man/{d}")]
    if len(have) < 4 or not shutil.which("groff"):
        if os.environ.get("CI"):
            pytest.fail("CI must install the manpages-* packages and groff (see .ci/setup)")
        pytest.skip("translated man pages or groff are not installed")
    docs = man_pages.build_dataset(per_lang=8, min_chars=200).docs
    assert len({d.lang for d in docs}) >= 8
    ref, ours = _reference(), ftz.Model(langid.model_path())
    texts = _lines(d.text for d in docs)
    texts += [t[i:i + 300] for t in texts[::3] for i in range(0, 3000, 300)]  # short pieces too
    got = [p for i in range(0, len(texts), 64) for p in ours.predict_many(texts[i:i + 64])]
    wrong = [t for t, p in zip(texts, got) if not _same(p, *ref.predict(t, k=1))]
    assert not wrong, f"{len(wrong)} of {len(texts)} differ, e.g. {wrong[0][:200]!r}"


def test_the_hidden_vector_adds_rows_one_after_another_in_float32():
    """fastText adds the input rows to a float32 vector in input order; numpy must not sum pairwise."""
    model = ftz.Model(langid.model_path())
    rng = np.random.default_rng(0)
    for n in (1, 7, 300, 5000):
        ids = rng.integers(0, len(model._rows), size=n).astype(np.int32)
        total = np.zeros(model._rows.shape[1], dtype=np.float32)
        for i in ids:
            total = total + model._rows[i]
        assert np.array_equal(model.hidden(ids), total * np.float32(1.0 / n))


def test_a_small_word_cache_gives_the_same_predictions(monkeypatch):
    texts = _lines(list(golden.texts().values())[:150])
    expected = ftz.Model(langid.model_path()).predict_many(texts)
    monkeypatch.setattr(ftz, "_CACHE_WORDS", 300)
    small = ftz.Model(langid.model_path())
    assert [p for i in range(0, len(texts), 16) for p in small.predict_many(texts[i:i + 16])] == expected
    assert len(small._inputs) < 300 + 16 * 1000


def test_a_newline_is_refused_as_fasttext_refuses_it():
    with pytest.raises(ValueError, match="one line"):
        ftz.Model(langid.model_path()).predict("two\nlines")


def test_models_it_cannot_compute_exactly_are_refused(tmp_path):
    data = bytearray(langid.model_path().read_bytes())
    softmax = tmp_path / "softmax.ftz"
    loss_at = 8 + 6 * 4  # after magic, version and six int32 arguments
    softmax.write_bytes(data[:loss_at] + struct.pack("<i", 3) + data[loss_at + 4:])
    with pytest.raises(ftz.UnsupportedModel, match="not hierarchical softmax"):
        ftz.Model(softmax)
    other = tmp_path / "other.bin"
    other.write_bytes(b"\x00" * 64)
    with pytest.raises(ftz.UnsupportedModel, match="not a fastText model"):
        ftz.Model(other)
    cut = tmp_path / "cut.ftz"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises((ftz.UnsupportedModel, struct.error, ValueError)):
        ftz.Model(cut)
