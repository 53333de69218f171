"""quality_model: a hand-made fastText model scored to hand-computed probabilities, a lab model trained on a
few dozen documents, the rule (and none without a model), the signals hash following the model file, bad
models refused before any work, and runs in explore and batch mode dropping the low scores."""

from __future__ import annotations

import json
import math
import random
import struct

import numpy as np
import pytest

from lab import config, engine, query

from lab.quality import model as quality
from lab.errors import ConfigError
from lab.quality.train import TrainConfig, fit, save, top_features
from lab.select.rules import first_failure
from lab.stages import quality_model as qm


def write_fasttext(path, words: dict[str, list[float]], labels: dict[str, list[float]]) -> None:
    """A supervised fastText model (format version 12; its predict adds 1e-5 to each probability) with the given input rows (words) and output rows
    (labels): no word n-grams, no subwords, softmax loss. P(label | text) = softmax(out @ mean(rows of its words))."""
    dim = len(next(iter(words.values())))
    args = struct.pack("<12id", dim, 5, 5, 1, 5, 1, 3, 3, 0, 0, 0, 100, 1e-4)  # loss 3 = softmax, model 3 = sup
    entries = [(w, 1, 0) for w in words] + [(lab, 1, 1) for lab in labels]
    d = struct.pack("<iiiqq", len(entries), len(words), len(labels), len(entries), -1)
    d += b"".join(w.encode() + b"\0" + struct.pack("<qb", c, t) for w, c, t in entries)
    inp = np.array(list(words.values()), dtype=np.float32)
    out = np.array(list(labels.values()), dtype=np.float32)
    body = struct.pack("<?", False) + struct.pack("<qq", *inp.shape) + inp.tobytes()
    body += struct.pack("<?", False) + struct.pack("<qq", *out.shape) + out.tobytes()
    path.write_bytes(struct.pack("<ii", quality.FASTTEXT_MAGIC, 12) + args + d + body)


@pytest.fixture
def ft(tmp_path):
    path = tmp_path / "tiny.bin"
    write_fasttext(path, {"good": [1.0, 0.0], "bad": [0.0, 1.0]},
                   {"__label__hq": [4.0, 0.0], "__label__lq": [0.0, 4.0]})
    return path


def _p(a: float, b: float) -> float:
    return math.exp(a) / (math.exp(a) + math.exp(b))


def test_a_fasttext_model_is_scored_to_the_hand_computed_probability(ft):
    assert quality.inspect(str(ft), "hq") == quality.ModelInfo(str(ft), "fasttext", ("hq", "lq"))
    c = qm.Collector(qm.Config(model=str(ft), positive_label="__label__hq"))
    s = c.signals(0, "good good\nGOOD unknown words")  # case matters to fastText: GOOD is an unknown word
    assert s["qm_label"] == "hq" and s["qm_score"] == pytest.approx(_p(4, 0), abs=2e-5)  # mean([1,0],[1,0]) = [1,0]
    s = c.signals(1, "good bad bad")  # mean = [1/3, 2/3]: logits 4/3 and 8/3
    assert s["qm_label"] == "lq" and s["qm_score"] == pytest.approx(_p(4 / 3, 8 / 3), abs=2e-5)
    assert qm.Collector(qm.Config(model=str(ft), positive_label="lq")).signals(0, "good bad bad")["qm_score"] == \
        pytest.approx(_p(8 / 3, 4 / 3), abs=2e-5)
    assert c.signals(2, "  \n") == {"qm_score": None, "qm_label": None}
    # only the first max_chars characters count
    c10 = qm.Collector(qm.Config(model=str(ft), max_chars=100))
    assert c10.signals(0, "good " * 20 + "bad " * 200)["qm_label"] == "hq"


def test_the_rule_keeps_scores_at_least_min_score_and_there_is_none_without_a_model(ft):
    cfg = qm.Config(model=str(ft), min_score=0.9)
    assert [(r.signal, r.op, r.value) for r in qm.rules(cfg)] == [("qm_score", ">=", 0.9)]
    c = qm.Collector(cfg)
    assert first_failure(qm.rules(cfg), c.signals(0, "good")) is None  # 0.982
    assert first_failure(qm.rules(cfg), c.signals(0, "good bad")) == "quality_model.low_score"  # 0.5
    assert qm.rules(qm.Config()) == [] and qm.signals("any text") == {"qm_score": None, "qm_label": None}
    with pytest.raises(ConfigError, match=r"min_score=1.5 .*\[0, 1\]"):
        qm.Config(min_score=1.5)


def test_the_signals_hash_follows_the_model_file(ft):
    cfg = config.build(config.Config, {"stages": {"quality_model": {"model": str(ft)}}})
    before = cfg.signals_hash()
    assert before != config.Config().signals_hash()
    assert cfg.signals_hash() == before
    write_fasttext(ft, {"good": [1.0, 0.0], "bad": [0.0, 1.0]}, {"__label__hq": [5.0, 0.0], "__label__lq": [0.0, 5.0]})
    assert cfg.signals_hash() != before
    assert qm.Collector(qm.Config(model=str(ft))).signals(0, "good")["qm_score"] == pytest.approx(_p(5, 0), abs=2e-5)


def test_bad_models_are_clear_errors_before_any_work(ft, tmp_path):
    with pytest.raises(ConfigError, match=r"positive_label='good' is not a class .*classes are hq, lq"):
        config.build(config.Config, {"stages": {"quality_model": {"model": str(ft), "positive_label": "good"}}})
    text = tmp_path / "notes.txt"
    text.write_text("just some notes\n")
    with pytest.raises(ConfigError, match=r"stages.quality_model.model=.*notes.txt.* is not a model .*fastText"):
        config.build(config.Config, {"stages": {"quality_model": {"model": str(text)}}})
    for hub in ("mlfoundations/fasttext-oh-eli5", "bert-base-uncased"):
        with pytest.raises(ConfigError, match=rf"model='{hub}' is not a local file.*Hugging Face Hub model name.*never "
                                              rf"downloads.*hf download {hub} --local-dir"):
            qm.Config(model=hub)
    with pytest.raises(ConfigError, match=r"does not exist"):
        qm.Config(model=str(tmp_path / "gone.bin"))
    other = tmp_path / "arrays.npz"
    np.savez(other, a=np.zeros(3))
    with pytest.raises(ConfigError, match=r"not a model from `corpus-lab train-quality`"):
        qm.Config(model=str(other))
    empty_dir = tmp_path / "dir"
    empty_dir.mkdir()
    with pytest.raises(ConfigError, match=r"without config.json"):
        qm.Config(model=str(empty_dir))
    hf = tmp_path / "hf"
    hf.mkdir()
    (hf / "config.json").write_text(json.dumps({"architectures": ["BertForSequenceClassification"],
                                                "id2label": {"0": "lq", "1": "hq"}}))
    with pytest.raises(ConfigError, match=r"has a config.json but no weights"):
        quality.inspect(str(hf), "hq")
    (hf / "model.safetensors").write_bytes(b"")
    with pytest.raises(ConfigError, match=r"has no tokenizer"):
        quality.inspect(str(hf), "hq")
    (hf / "tokenizer.json").write_text("{}")
    assert quality.inspect(str(hf), "hq").labels == ("lq", "hq")  # its classes are read without transformers
    try:
        import transformers  # noqa: F401
    except ImportError:  # the lower-bounds job: the run stops before any partition, naming the extra
        with pytest.raises(ConfigError, match=r"stages.quality_model.model=.*needs transformers and torch.*"
                                              r"corpus-lab\[hf\]"):
            qm.prepare(qm.Config(model=str(hf)), tmp_path)
        with pytest.raises(ConfigError, match=r"corpus-lab\[hf\]"):
            qm.Collector(qm.Config(model=str(hf)))


WORDS_GOOD = "river museum library garden history science music village harbour bridge".split()
WORDS_BAD = "click buy free winner casino cheap offer bonus deal subscribe".split()


def _docs(words, n, seed):
    rng = random.Random(seed)
    glue = "the of and in a to".split()
    return [" ".join(rng.choice(words) if i % 2 else rng.choice(glue) for i in range(rng.randint(60, 120)))
            for _ in range(n)]


@pytest.fixture
def lab_model(tmp_path):
    cfg = TrainConfig(held_out=0.25, n_features=2**12)
    fitted = fit(_docs(WORDS_GOOD, 24, 1), _docs(WORDS_BAD, 24, 2), cfg)
    path = tmp_path / "quality.npz"
    sha = save(fitted, path, trained_on={"test": True}, cfg=cfg)
    return path, sha, fitted


def test_a_lab_model_trained_on_a_few_dozen_documents(lab_model):
    path, sha, fitted = lab_model
    assert fitted.figures["held_out"] == {"positives": 6, "negatives": 6} and fitted.figures["auc"] == 1.0
    assert fitted.figures["precision"] == 1.0 and fitted.figures["recall"] == 1.0
    tops = [g for g, _ in fitted.top["positive"]]
    assert set(tops[:5]) <= set(WORDS_GOOD) | {f"{a} {b}" for a in "the of and in a to".split() for b in WORDS_GOOD} | \
        {f"{b} {a}" for a in "the of and in a to".split() for b in WORDS_GOOD}
    assert quality.model_sha256(str(path)) == sha
    assert quality.inspect(str(path), "hq") == quality.ModelInfo(str(path), "lab", ("lq", "hq"))
    c = qm.Collector(qm.Config(model=str(path)))
    good, bad = c.signals(0, " ".join(WORDS_GOOD)), c.signals(1, " ".join(WORDS_BAD))
    assert good["qm_label"] == "hq" and good["qm_score"] > 0.7 and bad["qm_label"] == "lq" and bad["qm_score"] < 0.3
    flipped = qm.Collector(qm.Config(model=str(path), positive_label="lq")).signals(1, " ".join(WORDS_BAD))
    assert flipped["qm_score"] == pytest.approx(1 - bad["qm_score"], abs=2e-5)
    with np.load(path, allow_pickle=False) as z:  # no pickle: plain arrays and JSON
        assert json.loads(str(z["params"][()]))["vectorizer"]["n_features"] == 2**12


def test_top_features_name_the_hashed_ngrams():
    from lab.quality.model import vectorizers
    from lab.quality.train import vectorizer_settings

    vecs = vectorizers(vectorizer_settings(TrainConfig(n_features=2**16, word_ngrams=(1, 1))))
    texts = ["alpha beta", "alpha gamma", "beta gamma"]
    x = vecs[0].transform(["alpha"])
    coef = np.zeros(2**16, dtype=np.float32)
    coef[x.indices[0]] = 2.0  # the weight of alpha's bucket
    assert top_features(vecs, texts, coef, 1) == {"positive": [["alpha", 2.0]], "negative": [["beta", 0.0]]}


def test_a_run_drops_low_scores_in_explore_and_batch(ft, tmp_path, local_cluster):
    texts = ["good good good bad", "bad bad bad good", "good " * 50, "bad " * 50, "good bad"]
    src = tmp_path / "docs.jsonl"
    src.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    off = {s: {"enabled": False} for s in ("language", "gopher_quality", "gopher_repetition", "c4", "fineweb")}
    for mode in ("explore", "batch"):
        cfg = config.build(config.Config, {
            "name": mode, "output_dir": str(tmp_path / "runs"), "mode": mode, "inputs": [{"path": str(src)}],
            "stages": {**off, "quality_model": {"model": str(ft), "min_score": 0.6}},
            "tokenizer": {"enabled": False}, "engine": {"n_workers": 1}})
        manifest = engine.run(cfg, progress=False, client=local_cluster)  # the workers load the model
        reasons = query.drop_reasons(cfg.run_dir, cfg)["reason"].to_list()
        assert sorted(r for r in reasons if r) == ["quality_model.low_score"] * 3, mode  # 0.5 and two below
        assert manifest["models"]["quality_model"]["sha256"] == quality.model_sha256(str(ft))
        if mode == "explore":  # every document scored: (good - bad) words of 4 give logits 4g and 4b
            scores = sorted(query.signal_rows(cfg.run_dir, ["qm_score"])["qm_score"].to_list())
            assert scores == pytest.approx([_p(0, 4), _p(1, 3), 0.5, _p(3, 1), _p(4, 0)], abs=2e-5)
