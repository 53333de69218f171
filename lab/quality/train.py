"""train: fit the lab's quality classifier from a run's labels or a reference corpus.

The recipe is GPT-3's and DCLM's: positives are documents known to be good (labelled ``good``, or a
reference corpus: any input the readers take), negatives are documents labelled ``bad`` or, when there
are none, a seeded random sample of the run's own documents. The classifier is a logistic regression
over hashed word 1-2-grams (scikit-learn ``HashingVectorizer``), sublinear term frequency, L2-normalized
rows, balanced class weights. A seeded share of each class (``held_out``) is kept out of training, so
the held-out AUC and the precision and recall at ``cut`` describe the file written. The model is one
``.npz`` (weights, intercept and settings as JSON; no pickle), frozen by its sha256; the report beside
it (``report_text``) says what it was trained on, its held-out figures and its most telling n-grams.
"""

from __future__ import annotations

import io
import json
import math
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from lab.errors import ConfigError, NotReadyError
from lab.fields import check
from lab.io.writers import atomic, write_json
from lab.quality.model import (
    LAB_FORMAT,
    LAB_FORMAT_VERSION,
    MAX_CHARS,
    auc,
    features,
    precision_recall,
    prefix,
    vectorizers,
)

MIN_PER_CLASS = 4  # documents of each class needed: at least one held out and a few to learn from
DEFAULT_NAME = "quality.npz"  # under the run's models/
TOKEN_PATTERN = r"(?u)\b\w+\b"  # words of one character count too ("a", "I", digits)


@dataclass(frozen=True)
class TrainConfig:
    seed: int = 0  # the held-out split and the random negatives
    held_out: float = 0.2  # fraction of each class kept out of training, for the report's figures
    cut: float = 0.5  # the score the report's precision and recall are taken at (the stage's min_score)
    max_docs: int = 20_000  # documents per class at most (first ones of an input, a seeded share of labels)
    negative_ratio: float = 1.0  # random negatives per positive when negatives are sampled from the run
    max_chars: int = MAX_CHARS  # characters of each document used, as the stage scores them
    n_features: int = 2**20  # hash buckets per vectorizer
    word_ngrams: tuple[int, int] = (1, 2)  # word n-gram lengths, lowest and highest
    char_ngrams: tuple[int, ...] = ()  # (lo, hi) adds char_wb n-grams (about 4x slower to score); () = none
    c: float = 4.0  # inverse regularization strength of the logistic regression
    top_features: int = 20  # n-grams listed per class in the report

    def __post_init__(self) -> None:
        check("held_out", self.held_out, 0 < self.held_out < 1, "a fraction in (0, 1)")
        check("cut", self.cut, 0 <= self.cut <= 1, "a probability in [0, 1]")
        check("max_docs", self.max_docs, self.max_docs >= MIN_PER_CLASS, f">= {MIN_PER_CLASS}")
        check("negative_ratio", self.negative_ratio, self.negative_ratio > 0, "> 0")
        check("max_chars", self.max_chars, self.max_chars >= 100, ">= 100 characters")
        check("n_features", self.n_features, 2**10 <= self.n_features <= 2**24, "in 2^10..2^24")
        check("word_ngrams", self.word_ngrams, len(self.word_ngrams) == 2 and 1 <= self.word_ngrams[0] <= self.word_ngrams[1] <= 3,
              "(lo, hi) with 1 <= lo <= hi <= 3")
        check("char_ngrams", self.char_ngrams, self.char_ngrams == () or (
            len(self.char_ngrams) == 2 and 1 <= self.char_ngrams[0] <= self.char_ngrams[1] <= 8), "() or (lo, hi) in 1..8")
        check("c", self.c, self.c > 0, "> 0")


# --- where the examples come from ----------------------------------------------------------------------


def read_texts(path: str, limit: int, *, text_field: str = "text") -> list[str]:
    """The first ``limit`` non-empty texts of an input (a file, directory or glob the readers take)."""
    from lab.config import IngestConfig, InputConfig
    from lab.io.partitions import plan
    from lab.io.readers import Reject, read

    inp = InputConfig(path=path, text_field=text_field)
    out: list[str] = []
    rejected = 0
    for part in plan([inp], IngestConfig(partition_bytes=1 << 40)):
        for item in read(part, inp, IngestConfig()):
            if isinstance(item, Reject):
                rejected += 1
            elif item.text.strip():
                out.append(item.text)
                if len(out) >= limit:
                    return out
    if not out:
        raise ConfigError(f"{path}: no text read ({rejected} unreadable records); give a JSONL/Parquet file with a "
                          f"{text_field!r} field, a text file or a directory of them")
    return out


def examples(run: str | Path, *, positives: str | None = None, negatives: str | None = None,
             cfg: TrainConfig = TrainConfig()) -> tuple[list[str], list[str], dict[str, Any]]:
    """(positive texts, negative texts, where each came from).

    ``positives``: an input path, or None for the run's documents labelled good. ``negatives``: an input
    path; ``"sample"`` for a seeded random sample of the run's documents; None for the documents labelled
    bad if there are any, else the sample.
    """
    from lab import query

    latest = query.labels(run, latest=True)
    good = [int(d) for d in latest.filter(latest["label"] == "good")["doc_id"]]
    bad = [int(d) for d in latest.filter(latest["label"] == "bad")["doc_id"]]
    rng = np.random.default_rng(cfg.seed)

    def labelled(ids: list[int]) -> list[str]:
        if len(ids) > cfg.max_docs:
            ids = sorted(rng.choice(ids, cfg.max_docs, replace=False).tolist())
        texts = query.document_texts(run, ids)
        return [texts[d] for d in ids if texts.get(d)]

    if positives:
        pos, pos_src = read_texts(positives, cfg.max_docs), {"kind": "input", "path": str(positives)}
    else:
        pos, pos_src = labelled(good), {"kind": "labels", "label": "good", "labelled": len(good)}
    if not pos:  # read_texts refuses an input without text: these are the labels
        raise NotReadyError(f"no positives: {run} has no documents labelled good with stored text; label some in the "
                            "dashboard (corpus-lab serve) first, or pass --positives INPUT (a reference corpus: JSONL, "
                            "Parquet, text files)")
    if negatives and negatives != "sample":
        neg, neg_src = read_texts(negatives, cfg.max_docs), {"kind": "input", "path": str(negatives)}
    elif bad and negatives != "sample":
        neg, neg_src = labelled(bad), {"kind": "labels", "label": "bad", "labelled": len(bad)}
    else:
        n = min(cfg.max_docs, max(MIN_PER_CLASS, round(len(pos) * cfg.negative_ratio)))
        neg = list(query.sample_texts(run, n, seed=cfg.seed, exclude=good + bad).values())
        neg_src = {"kind": "sample", "seed": cfg.seed, "requested": n}
    for name, texts in (("positives", pos), ("negatives", neg)):
        src = pos_src if name == "positives" else neg_src
        if len(texts) < MIN_PER_CLASS:  # too few labels (or run documents) is the run's state; a short file, input
            cls = ConfigError if src["kind"] == "input" else NotReadyError
            raise cls(f"only {len(texts)} {name} ({src['kind']}{': ' + src['path'] if 'path' in src else ''}): at "
                      f"least {MIN_PER_CLASS} are needed (one held out); label more documents or pass --{name} INPUT")
    return pos, neg, {"positives": {**pos_src, "documents": len(pos)}, "negatives": {**neg_src, "documents": len(neg)}}


# --- fitting ---------------------------------------------------------------------------------------------


def vectorizer_settings(cfg: TrainConfig) -> dict[str, Any]:
    return {"n_features": cfg.n_features, "word_ngrams": list(cfg.word_ngrams), "char_ngrams": list(cfg.char_ngrams),
            "token_pattern": TOKEN_PATTERN, "tf": "1+log", "norm": "l2"}


def split(n: int, held_out: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(train, held-out) indices of ``n`` items: ``held_out`` of them (at least one) held out, seeded.

    >>> [len(a) for a in split(10, 0.2, np.random.default_rng(0))]
    [8, 2]
    """
    order = rng.permutation(n)
    k = min(max(1, round(n * held_out)), n - 1)
    return np.sort(order[k:]), np.sort(order[:k])


@dataclass
class Fitted:
    coef: np.ndarray  # float32, one weight per hashed feature
    intercept: float
    settings: dict
    figures: dict  # held-out: documents, auc, precision, recall at cut, train seconds
    top: dict  # "positive" / "negative": [[n-gram, weight], ...]


def fit(pos: list[str], neg: list[str], cfg: TrainConfig = TrainConfig()) -> Fitted:
    """A logistic regression on ``pos`` (class 1) vs ``neg`` (class 0), with held-out figures."""
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(cfg.seed)
    texts = [prefix(t, cfg.max_chars) for t in pos + neg]
    y = np.array([1] * len(pos) + [0] * len(neg), dtype=np.int8)
    tr_p, te_p = split(len(pos), cfg.held_out, rng)
    tr_n, te_n = split(len(neg), cfg.held_out, rng)
    train = np.concatenate([tr_p, tr_n + len(pos)])
    test = np.concatenate([te_p, te_n + len(pos)])
    settings = vectorizer_settings(cfg)
    vecs = vectorizers(settings)
    t0 = time.process_time()
    x = features(vecs, [texts[i] for i in train])
    clf = LogisticRegression(C=cfg.c, solver="liblinear", class_weight="balanced", max_iter=1000,
                             random_state=cfg.seed)
    clf.fit(x, y[train])
    seconds = time.process_time() - t0
    coef = clf.coef_[0].astype(np.float32)  # as saved: the figures below are the saved model's
    intercept = float(clf.intercept_[0])
    p = 1.0 / (1.0 + np.exp(-(features(vecs, [texts[i] for i in test]) @ coef.astype(np.float64) + intercept)))
    precision, recall = precision_recall(y[test], p, cfg.cut)
    figures = {"train": {"positives": int(tr_p.size), "negatives": int(tr_n.size)},
               "held_out": {"positives": int(te_p.size), "negatives": int(te_n.size)},
               "auc": _round(auc(y[test], p)), "cut": cfg.cut, "precision": _round(precision), "recall": _round(recall),
               "kept_share": _round(float((p >= cfg.cut).mean())), "train_cpu_seconds": round(seconds, 3)}
    top = top_features(vecs, [texts[i] for i in train[:4000]], coef, cfg.top_features)
    return Fitted(coef, intercept, settings, figures, top)


def _round(x: float) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else round(float(x), 4)


def top_features(vecs: list, texts: list[str], coef: np.ndarray, k: int) -> dict[str, list]:
    """The ``k`` n-grams (seen in at least two training documents) with the highest and the lowest weights.
    A hashed weight is shared by every n-gram of its bucket: the n-gram shown is the most frequent one."""
    from sklearn.utils import murmurhash3_32

    df: Counter = Counter()
    offsets = []
    for b, v in enumerate(vecs):
        analyze = v.build_analyzer()
        offsets.append(b * v.n_features)
        for t in texts:
            df.update((b, g) for g in set(analyze(t)))
    best: dict[int, tuple[int, str]] = {}
    for (b, g), n in df.items():
        if n < 2:
            continue
        h = murmurhash3_32(g, seed=0, positive=False)
        i = offsets[b] + (2**31 if h == -(2**31) else abs(h)) % vecs[b].n_features
        if n > best.get(i, (0, ""))[0]:
            best[i] = (n, g)
    idx = np.array(sorted(best), dtype=np.int64)
    if idx.size == 0:
        return {"positive": [], "negative": []}
    w = coef[idx]
    order = np.argsort(w, kind="stable")
    pick = lambda sel: [[best[int(idx[j])][1], round(float(w[j]), 4)] for j in sel]  # noqa: E731
    return {"positive": pick(order[::-1][:k]), "negative": pick(order[:k])}


# --- the artifact ----------------------------------------------------------------------------------------


def save(fitted: Fitted, path: Path, *, trained_on: dict, cfg: TrainConfig) -> str:
    """Write the model (one .npz, no pickle); returns its sha256."""
    import hashlib

    params = {"format": LAB_FORMAT, "format_version": LAB_FORMAT_VERSION, "labels": ["lq", "hq"], "positive": "hq",
              "vectorizer": fitted.settings, "max_chars": cfg.max_chars, "trained_on": trained_on,
              "held_out": fitted.figures, "train_config": asdict(cfg)}
    buf = io.BytesIO()
    np.savez_compressed(buf, coef=fitted.coef, intercept=np.array([fitted.intercept]),
                        params=np.array(json.dumps(params, sort_keys=True)))
    data = buf.getvalue()
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic(path) as tmp:
        tmp.write_bytes(data)
    return hashlib.sha256(data).hexdigest()


def report_path(model: Path) -> Path:
    return model.with_name(model.name.removesuffix(".npz") + ".report.json")


def train(run: str | Path, *, positives: str | None = None, negatives: str | None = None, out: str | Path | None = None,
          cfg: TrainConfig = TrainConfig()) -> dict[str, Any]:
    """Fit a quality classifier for ``run`` and write it (default ``RUN/models/quality.npz``) with its report
    (``quality.report.json``); returns the report. ``positives``/``negatives``: see ``examples``."""
    from lab.io.run import RunLayout

    run_dir = Path(run)
    path = Path(out) if out else RunLayout(run_dir).models / DEFAULT_NAME
    if path.suffix != ".npz":
        raise ConfigError(f"--out {str(path)!r}: a lab quality model is an .npz file; name it e.g. {path.stem}.npz")
    pos, neg, sources = examples(run_dir, positives=positives, negatives=negatives, cfg=cfg)
    fitted = fit(pos, neg, cfg)
    sha = save(fitted, path, trained_on=sources, cfg=cfg)
    report = {"model": str(path), "sha256": sha, "kind": "lab", "labels": ["lq", "hq"], "positive_label": "hq",
              "run": str(run_dir), "trained_on": sources, "held_out": fitted.figures, "top_features": fitted.top,
              "train_config": asdict(cfg)}
    write_json(report, report_path(path))
    return report


def report_text(report: dict[str, Any]) -> str:
    """The report as a person reads it (what ``corpus-lab train-quality`` prints)."""
    src = report["trained_on"]

    def where(s: dict) -> str:
        if s["kind"] == "input":
            return f"{s['documents']} documents of {s['path']}"
        if s["kind"] == "labels":
            return f"{s['documents']} documents labelled {s['label']}"
        return f"{s['documents']} documents sampled from the run (seed {s['seed']})"

    h = report["held_out"]
    lines = [f"quality model {report['model']} (sha256 {report['sha256'][:16]}…)",
             f"  positives: {where(src['positives'])}", f"  negatives: {where(src['negatives'])}",
             f"  trained on {h['train']['positives']} + {h['train']['negatives']}, held out "
             f"{h['held_out']['positives']} + {h['held_out']['negatives']} ({h['train_cpu_seconds']} s)",
             f"  held-out AUC {h['auc']}; at score >= {h['cut']}: precision {h['precision']}, recall {h['recall']} "
             f"(kept {h['kept_share']})"]
    for side in ("positive", "negative"):
        feats = report["top_features"][side][:10]
        lines.append(f"  most {side}: " + ", ".join(f"{g!r} {w:+.2f}" for g, w in feats))
    lines.append(f"  use it: stages: {{quality_model: {{model: {report['model']}, positive_label: hq}}}}")
    return "\n".join(lines)
