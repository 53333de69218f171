"""lab.tokens.fast_encode: tiktoken with the run's fitted byte-level BPE gives encode_batch_fast's ids, document for document."""

from __future__ import annotations

import gzip
import glob

import numpy as np
import pytest

from lab.tokens import fast_encode

from lab.tokens import tokenize
from lab.config import TokenizerConfig
from lab.errors import ConfigError, LabError

VARIED = [
    "", " ", "\n", "   \n\n\t  x  ", "a\u00a0b\u2003c\u3000d\u200be", "\r\n\r\nline\r\n",
    "It's, we'll, they've, I'm, he'd, you're, DON'T, 'tis, ''s", "1234567890 3.14159 1,000,000 ٣٤٥ ๓๔๕ ²³ Ⅻ",
    "Grüße aus Köln: Ärger über Öl", "Привет, мир! Съешь же ещё этих мягких французских булок.",
    "日本語のテキスト、漢字と仮名。中文文本：你好，世界！", "한국어 텍스트입니다.", "ภาษาไทยไม่มีช่องว่าง",
    "العربية من اليمين إلى اليسار", "עברית", "हिन्दी देवनागरी", "Ελληνικά κείμενα",
    "emoji 👩‍👩‍👧‍👦 🇫🇷 ✊🏽 😀😀😀 and ZWJ", "e\u0301 combining, \ufb01 ligature, \U0001d400 math",
    "doc one<|endoftext|>doc two", "<|endoftext|><|endoftext|>", "pad<|pad|>in text", "<|endoftext", "x <|endoftext|> y",
    "tabs\t\t\tand    spaces    ", "trailing spaces   ", "!!!???...---___***", "snake_case_name = f(x, y)  # comment",
    "https://example.org/a/b?c=d&e=f#g", "😀" * 50 + "a" * 300, "\x00\x01\x7f control", "\u2028\u2029\x85 separators",
]


def _man_pages(limit: int = 4) -> list[str]:
    """Raw man page sources in every installed language (troff text: real prose in many scripts)."""
    out = []
    for d in sorted(glob.glob("/usr/share/man/*/man1/")) + ["/usr/share/man/man1/"]:
        for f in sorted(glob.glob(d + "*.gz"))[:limit]:
            out.append(gzip.open(f).read().decode("utf-8", "replace"))
    return out


@pytest.fixture(scope="module")
def fitted():
    texts = _man_pages() + VARIED * 3
    tok = tokenize.fit(texts, TokenizerConfig(vocab_size=3000))
    return tok, texts


def test_equal_ids_on_every_document(fitted):
    tok, texts = fitted
    assert len(texts) > 100  # man pages in several languages are installed (.ci/setup: manpages-*)
    fast = fast_encode.encoder_for(tok)
    hf = tok.encode_batch_fast(texts, add_special_tokens=False)
    got = fast(texts)
    assert [a.tolist() for a in got] == [e.ids for e in hf]
    assert all(a.dtype == np.uint32 for a in got)
    assert fast_encode.differences(fast, texts) == [] and fast.fallbacks == 0  # no document needed HF
    # the special tokens inside a document are split out, as encode_batch_fast does
    assert fast(["doc one<|endoftext|>doc two"])[0].tolist().count(0) == 1
    assert fast(["pad<|pad|>"])[0][-1] == 1


def test_from_the_run_file(fitted, tmp_path):
    tok, texts = fitted
    p = tmp_path / "tokenizer.json"
    p.write_text(tok.to_str())
    assert fast_encode.equal_on(fast_encode.encoder_for(str(p)), VARIED)


def _abc_tokenizer(third):
    """A byte-level BPE by hand: merges (a,b), (b,c) and ``third`` making 'abc'."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {tokenize.EOD: 0, tokenize.PAD: 1, **{c: 2 + i for i, c in enumerate(alphabet)}, "ab": 258, "bc": 259, "abc": 260}
    tok = Tokenizer(models.BPE(vocab, [("a", "b"), ("b", "c"), third]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([tokenize.EOD, tokenize.PAD])
    return tok


def test_unsafe_token_goes_to_hf():
    # 'abc' made by (a, bc): HF merges (a,b) first and is stuck at [ab, c]; tiktoken joins ab+c into abc
    tok = _abc_tokenizer(("a", "bc"))
    fast = fast_encode.encoder_for(tok)
    assert fast.unsafe.nonzero()[0].tolist() == [260]
    texts = ["abc", "xabcx", "bc ab", "a b c"]
    c = 2 + sorted(__import__("tokenizers").pre_tokenizers.ByteLevel.alphabet()).index("c")
    assert tok.encode_batch_fast(texts, add_special_tokens=False)[0].ids == [258, c]  # HF: [ab, c]
    assert fast.encoding.encode("abc") == [260]  # tiktoken: [abc]
    assert fast_encode.differences(fast, texts) == [0, 1]  # tiktoken alone differs on "abc", "xabcx" ...
    assert fast_encode.equal_on(fast, texts) and fast.fallbacks >= 1  # ... the fallback makes it equal
    ok = fast_encode.encoder_for(_abc_tokenizer(("ab", "c")))  # made by (ab, c): tiktoken's path is HF's
    assert not ok.unsafe.any() and fast_encode.differences(ok, texts) == []


def test_refuses_other_tokenizers():
    from tokenizers import Tokenizer, models, normalizers

    tok = _abc_tokenizer(("ab", "c"))
    tok.normalizer = normalizers.NFC()
    with pytest.raises(ConfigError, match="normalizer"):
        fast_encode.encoder_for(tok)
    with pytest.raises(ConfigError, match="model.type"):
        fast_encode.encoder_for(Tokenizer(models.WordPiece({"a": 0}, unk_token="a")))


def test_lone_surrogate_refused_like_hf(fitted):
    tok, _ = fitted
    with pytest.raises(TypeError):
        tok.encode_batch_fast(["a\ud800b"], add_special_tokens=False)
    with pytest.raises(LabError, match=r"texts\[1\] is not valid Unicode"):
        fast_encode.encoder_for(tok)(["ok", "a\ud800b"])


def test_tokenize_encode_takes_the_fast_path_with_the_same_ids_and_words(fitted, monkeypatch):
    """``lab.tokens.tokenize.encode`` (what every tokenize task runs) uses the fast encoder once a call holds
    ``FAST_MIN_CHARS``: the same ids and continued-word counts as through encode_batch_fast."""
    tok, texts = fitted
    slow_ids, slow_cont = tokenize.encode(tok, texts)  # below the size: encode_batch_fast
    assert tokenize._fast.get(id(tok)) is None
    monkeypatch.setattr(tokenize, "FAST_MIN_CHARS", 1)
    fast_ids, fast_cont = tokenize.encode(tok, texts)
    assert isinstance(tokenize._fast[id(tok)][1], fast_encode.FastEncoder)
    assert [a.tolist() for a in fast_ids] == [a.tolist() for a in slow_ids] and (fast_cont == slow_cont).all()
