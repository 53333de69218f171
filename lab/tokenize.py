"""tokenize: one byte-level BPE per run, fitted once on a stratified sample, frozen, applied everywhere.

- **Fit** (``fit``): HuggingFace ``tokenizers`` BPE over bytes (ByteLevel pre-tokenizer and
  decoder, so every string round-trips), ``vocab_size`` including the special tokens ``EOD``
  (id 0, ends every document in packed sequences) and ``PAD`` (id 1, fills unused slots). The
  training text is a *stratified* sample of the documents the run keeps: ``lab.query``
  computes each (language, source) stratum's share of the kept bytes over the whole run and takes
  that share of ``sample_bytes`` from it, by a seeded hash order of ``doc_id`` — never per
  partition, so the sample does not depend on how the input was split. Training is
  deterministic (same sample, same ``tokenizer.json``, whatever the thread count).
- **Freeze**: ``tokenizer/tokenizer.json`` and its sha256 (``tokenizer/tokenizer.sha256``, and
  the run manifest). ``load`` refuses a file whose hash is not the expected one, so tokens
  counted, packed and loaded later all come from the same vocabulary.
- **Apply** (``tokenize_partition``, one Dask task per partition): the partition's stored text
  (``docs/``; in batch mode only the survivors of the per-document rules have any) encoded in batches with one tokenizer per worker process (loaded once, cached by
  hash); per document ``n_tokens``, whitespace ``words`` and ``continued_words`` (words cut into
  more than one token) go to ``tokenized/part-KEY.parquet`` with the token ids.
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
from lab.io.writers import atomic, write_json, write_parquet

EOD = "<|endoftext|>"
PAD = "<|pad|>"
BATCH = 256  # documents per encode_batch call
TOKENIZED_SCHEMA = pa.schema([("doc_id", pa.int64()), ("n_tokens", pa.int32()), ("words", pa.int32()),
                              ("continued_words", pa.int32()), ("ids", pa.list_(pa.uint32()))])


def fit(texts: Iterable[str], cfg: TokenizerConfig):
    """A byte-level BPE trained on ``texts`` (EOD = id 0, PAD = id 1)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=cfg.vocab_size, min_frequency=cfg.min_frequency,
                                  special_tokens=[EOD, PAD], initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    return tok


def save(tok, layout: RunLayout, fit_info: dict) -> str:
    """Write ``tokenizer/tokenizer.json``, its sha256 and how it was fitted; returns the sha256."""
    layout.tokenizer_dir.mkdir(parents=True, exist_ok=True)
    data = tok.to_str().encode()
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
    from tokenizers import Tokenizer

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
        tok = Tokenizer.from_str(data.decode())
        global loads
        loads += 1
        for name, want in ((EOD, 0), (PAD, 1)):
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
    whitespace-separated words cut into more than one token (``continued_words``)."""
    kinds = token_kinds(tok)
    ids, continued = [], np.zeros(len(texts), dtype=np.int32)
    for i in range(0, len(texts), BATCH):
        for k, enc in enumerate(tok.encode_batch_fast(texts[i:i + BATCH], add_special_tokens=False)):
            a = np.asarray(enc.ids, dtype=np.uint32)
            ids.append(a)
            continued[i + k] = continued_words(kinds[a])
    return ids, continued


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


def continued_words(k: np.ndarray) -> int:
    """Words (runs of tokens between ASCII whitespace) of more than one token, from the tokens' kinds: a
    word starts at a WORD_START token or at a CONTINUES token after whitespace (or first)."""
    if k.size == 0:
        return 0
    after_space = np.concatenate(([True], k[:-1] == SPACE))
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



def tokenize_partition(run_dir: str | Path, key: str, sha256: str, strip: dict | None = None) -> dict:
    """Encode one partition's stored text with the frozen tokenizer; writes ``tokenized/part-KEY.parquet``.

    ``strip`` (``lab.steps.strip_state``; None: the text as stored): remove each document's boilerplate
    lines first (``stages.boilerplate.remove_lines``: the lines seen in >= ``strip["min_docs"]`` documents
    of its site), the one text rewrite besides the PII scrub; what it removed is recorded in the
    partition's ``tokenized/part-KEY.json``."""
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
    write_json({"key": key, "sha256": sha256, "documents": table.num_rows,
                "tokens": int(table.column("n_tokens").to_numpy().sum()),
                **({"strip": strip, "boilerplate_removed": removed} if strip is not None else {})},
               layout.tokenized_done(key))
    return {"key": key, "documents": table.num_rows}
