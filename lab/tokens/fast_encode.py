"""fast_encode: the run's fitted byte-level BPE run by tiktoken's encoder, id-for-id equal to ``encode_batch_fast``.

``lab.tokens.tokenize.fit`` makes a HuggingFace ``tokenizers`` BPE (ByteLevel pre-tokenizer with the GPT-2
regex, no normalizer, special tokens ``<|endoftext|>`` = 0 and ``<|pad|>`` = 1). The same vocabulary loads
into a ``tiktoken.Encoding`` whose ranks are the HF ids: the trainer gives the token made by merge ``m``
the id ``258 + m``, so both order the merges alike. ``encoder_for`` refuses a vocabulary where that does
not hold. Equality is checked, not assumed: ``unsafe_tokens`` lists the tokens tiktoken may reach through
a merge HF does not have, and a document whose ids hold one is re-encoded with HF; the two regex
engines' pre-tokenization is checked by ``equal_on`` (tests, bench); special tokens are split out alike
(``allowed_special="all"``).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from lab.errors import ConfigError, LabError

# the pattern ByteLevel(use_regex=True) applies, in tiktoken's spelling (r50k_base / gpt2)
GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable character map, the alphabet of ByteLevel tokens.

    >>> m = bytes_to_unicode(); m[ord("a")], m[ord(" ")], m[10], len(set(m.values()))
    ('a', 'Ġ', 'Ċ', 256)
    """
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def _spec(tokenizer) -> dict:
    """The parsed tokenizer.json of a path, a JSON string or a ``tokenizers.Tokenizer``."""
    if hasattr(tokenizer, "to_str"):
        return json.loads(tokenizer.to_str())
    p = Path(tokenizer)
    return json.loads(p.read_text() if p.exists() else str(tokenizer))


def _check(spec: dict) -> None:
    """Refuse a tokenizer.json that is not the byte-level BPE ``lab.tokens.tokenize.fit`` makes."""
    model, pre = spec.get("model") or {}, spec.get("pre_tokenizer") or {}
    want = {"model.type": (model.get("type"), "BPE"), "model.dropout": (model.get("dropout"), None),
            "model.byte_fallback": (model.get("byte_fallback"), False), "model.ignore_merges": (model.get("ignore_merges"), False),
            "model.continuing_subword_prefix": (model.get("continuing_subword_prefix"), None),
            "model.end_of_word_suffix": (model.get("end_of_word_suffix"), None),
            "normalizer": (spec.get("normalizer"), None), "pre_tokenizer.type": (pre.get("type"), "ByteLevel"),
            "pre_tokenizer.add_prefix_space": (pre.get("add_prefix_space"), False),
            "pre_tokenizer.use_regex": (pre.get("use_regex"), True)}
    for key, (have, allowed) in want.items():
        if have != allowed:
            raise ConfigError(f"tokenizer.json {key} is {have!r}, lab.tokens.fast_encode needs {allowed!r} (the byte-level BPE "
                              f"lab.tokens.tokenize.fit makes); encode this tokenizer with lab.tokens.tokenize.encode instead")
    for t in spec.get("added_tokens", []):
        if t.get("normalized") or t.get("lstrip") or t.get("rstrip") or t.get("single_word"):
            raise ConfigError(f"tokenizer.json added token {t.get('content')!r} has options {t}, lab.tokens.fast_encode allows "
                              f"none of normalized/lstrip/rstrip/single_word; encode with lab.tokens.tokenize.encode instead")


def ranks_of(spec: dict) -> tuple[dict[bytes, int], dict[str, int], list[tuple[bytes, bytes]]]:
    """tiktoken's ``mergeable_ranks`` (token bytes -> HF id), the special tokens and the merge list (as bytes).

    Raises ConfigError unless each merge makes a new token and the made ids grow with the merge
    rank (then tiktoken's order of merges is HF's)."""
    _check(spec)
    u2b = {c: b for b, c in bytes_to_unicode().items()}
    special = {t["content"]: t["id"] for t in spec.get("added_tokens", [])}
    vocab = spec["model"]["vocab"]
    ranks = {}
    for s, i in vocab.items():
        if s in special:
            continue
        try:
            ranks[bytes(u2b[c] for c in s)] = i
        except KeyError as e:
            raise ConfigError(f"tokenizer.json vocab token {s!r} (id {i}) has the character {e.args[0]!r}, outside the "
                              f"ByteLevel alphabet; lab.tokens.fast_encode handles byte-level BPEs only") from None
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in spec["model"]["merges"]]
    made = [vocab.get(a + b) for a, b in merges]
    for k, (m, i) in enumerate(zip(merges, made)):
        if i is None or (k and i <= made[k - 1]):
            raise ConfigError(f"tokenizer.json merge {k} {m!r} makes id {i}, after id {made[k - 1] if k else None}: "
                              f"lab.tokens.fast_encode needs each merge to make a new token, ids in merge order (as BpeTrainer "
                              f"does); encode this tokenizer with lab.tokens.tokenize.encode instead")
    b_merges = [(bytes(u2b[c] for c in a), bytes(u2b[c] for c in b)) for a, b in merges]
    return ranks, special, b_merges


def _tiktoken_merge(piece: bytes, ranks: dict[bytes, int], merge_set: set) -> tuple[list[bytes], bool]:
    """tiktoken's BPE on one piece (lowest rank of the joined bytes first, leftmost on ties) and
    whether every merge it made is in ``merge_set`` (an HF merge).

    >>> r = {b"a": 0, b"b": 1, b"c": 2, b"ab": 3, b"bc": 4, b"abc": 5}
    >>> _tiktoken_merge(b"abc", r, {(b"a", b"b"), (b"ab", b"c")})
    ([b'abc'], True)
    >>> _tiktoken_merge(b"abc", {**r, b"ab": 4, b"bc": 3}, {(b"a", b"b"), (b"ab", b"c")})
    ([b'abc'], False)
    """
    parts, ok = [piece[i:i + 1] for i in range(len(piece))], True
    while len(parts) > 1:
        best, at = None, -1
        for i in range(len(parts) - 1):
            r = ranks.get(parts[i] + parts[i + 1])
            if r is not None and (best is None or r < best):
                best, at = r, i
        if best is None:
            break
        ok = ok and (parts[at], parts[at + 1]) in merge_set
        parts[at:at + 2] = [parts[at] + parts[at + 1]]
    return parts, ok


def unsafe_tokens(ranks: dict[bytes, int], merges: list[tuple[bytes, bytes]], n_vocab: int) -> np.ndarray:
    """Per id: True where a tiktoken output token may not be HF's — tiktoken's BPE on the token's
    bytes does not rebuild it through HF merges only. Base bytes and special tokens are safe.

    >>> r = {b"a": 2, b"b": 3, b"c": 4, b"ab": 5, b"bc": 6, b"abc": 7}
    >>> unsafe_tokens(r, [(b"a", b"b"), (b"b", b"c"), (b"ab", b"c")], 8).nonzero()[0].tolist()
    []
    >>> unsafe_tokens(r, [(b"a", b"b"), (b"b", b"c"), (b"a", b"bc")], 8).nonzero()[0].tolist()
    [7]
    """
    merge_set = set(merges)
    out = np.zeros(n_vocab, dtype=bool)
    for tok, i in ranks.items():
        if len(tok) > 1:
            parts, ok = _tiktoken_merge(tok, ranks, merge_set)
            out[i] = not (ok and parts == [tok])
    return out


class FastEncoder:
    """``encoder(texts) -> [uint32 array of HF ids]``, equal to ``encode_batch_fast(texts,
    add_special_tokens=False)``: tiktoken, one thread, HF for the documents an unsafe token marks."""

    def __init__(self, tokenizer, hf=None):
        import tiktoken

        spec = _spec(tokenizer)
        ranks, special, merges = ranks_of(spec)
        n = max(max(ranks.values()), max(special.values(), default=0)) + 1
        self.encoding = tiktoken.Encoding("corpus-lab-bpe", pat_str=GPT2_PATTERN, mergeable_ranks=ranks,
                                          special_tokens=special)
        self.unsafe = unsafe_tokens(ranks, merges, n)
        self._hf = hf if hasattr(hf, "encode_batch_fast") else None
        self._hf_spec = json.dumps(spec)
        self.fallbacks = 0  # documents re-encoded with HF

    def hf(self):
        if self._hf is None:
            from tokenizers import Tokenizer

            self._hf = Tokenizer.from_str(self._hf_spec)
        return self._hf

    def __call__(self, texts: list[str]) -> list[np.ndarray]:
        enc, unsafe = self.encoding, self.unsafe
        for k, t in enumerate(texts):  # tiktoken would replace a lone surrogate, encode_batch_fast refuses the text
            try:
                t.encode("utf-8")
            except UnicodeEncodeError as e:
                raise LabError(f"texts[{k}] is not valid Unicode (a lone surrogate {t[e.start]!r} at {e.start}); "
                               f"encode_batch_fast refuses it too; decode the source with errors='replace'") from None
        out = [np.asarray(enc.encode(t, allowed_special="all"), dtype=np.uint32) for t in texts]
        redo = [k for k, a in enumerate(out) if unsafe[a].any()] if unsafe.any() else []
        if redo:
            self.fallbacks += len(redo)
            for k, e in zip(redo, self.hf().encode_batch_fast([texts[k] for k in redo], add_special_tokens=False)):
                out[k] = np.asarray(e.ids, dtype=np.uint32)
        return out


def encoder_for(tokenizer) -> FastEncoder:
    """The fast encoder of a fitted byte-level BPE: a tokenizer.json path, its text, or a ``tokenizers.Tokenizer``."""
    return FastEncoder(tokenizer, hf=tokenizer)


def differences(tokenizer, texts: list[str]) -> list[int]:
    """Indexes of the texts whose ids differ between tiktoken (without the HF fallback) and
    ``encode_batch_fast``: what the fallback and the regex assumption have to cover."""
    fast = tokenizer if isinstance(tokenizer, FastEncoder) else encoder_for(tokenizer)
    hf = fast.hf().encode_batch_fast(texts, add_special_tokens=False)
    return [k for k, (t, e) in enumerate(zip(texts, hf))
            if fast.encoding.encode(t, allowed_special="all") != e.ids]


def equal_on(tokenizer, texts: list[str]) -> bool:
    """Whether the fast encoder (with its fallback) gives ``encode_batch_fast``'s ids on every text."""
    fast = tokenizer if isinstance(tokenizer, FastEncoder) else encoder_for(tokenizer)
    hf = fast.hf().encode_batch_fast(texts, add_special_tokens=False)
    return all(a.tolist() == e.ids for a, e in zip(fast(texts), hf))
