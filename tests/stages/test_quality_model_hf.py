"""quality_model with a local HuggingFace sequence classifier (the ``corpus-lab[hf]`` extra).

A tiny BERT (hidden 32, 2 layers, seeded, untrained: its scores are spread by a wide initializer) and
a word-level tokenizer trained with ``tokenizers`` on a few sentences are made in the test and saved
with ``save_pretrained``; nothing is downloaded. Checked: a run in explore and batch mode stores the
scores transformers itself gives (one text at a time, the same truncation), batched scores equal
one-by-one scores, Hub names and a missing positive class are clear errors before any work, and the
scoring runs in a network namespace with no interface but loopback.

Skipped where transformers or torch is not installed (the lower-bounds job installs neither).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from lab import config, engine, query  # noqa: E402

from lab.quality import model as quality
from lab.doc import doc_id  # noqa: E402
from lab.errors import ConfigError  # noqa: E402
from lab.stages import quality_model as qm  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
GOOD = "river museum library garden history science music village harbour bridge"
BAD = "click buy free winner casino cheap offer bonus deal subscribe"
MAX_TOKENS = 24  # the tokenizer's model_max_length: longer documents are truncated
TEXTS = [
    "river museum library",
    "click buy free winner casino",
    "the garden of the village and the harbour bridge in the music history of science",
    "cheap offer " * 40,  # 80 words: truncated to MAX_TOKENS
    "a deal",
    "science",
    "subscribe to the bonus deal and buy the free offer in the casino",
    "music village harbour " * 5,
    "unknown words only here",
    "the of and in a to",
]


def make_tiny_classifier(path: Path, seed: int = 0) -> Path:
    """A word-level tokenizer and a 2-layer BERT sequence classifier (bad, good), saved to ``path``."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import BertConfig, BertForSequenceClassification, PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator([GOOD, BAD, "the of and in a to"],
                            trainers.WordLevelTrainer(special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]"]))
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]",
                                                       special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                                   sep_token="[SEP]", model_max_length=MAX_TOKENS)
    torch.manual_seed(seed)
    cfg = BertConfig(vocab_size=tok.get_vocab_size(), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=64, initializer_range=0.2,
                     id2label={0: "bad", 1: "good"}, label2id={"bad": 0, "good": 1})
    BertForSequenceClassification(cfg).save_pretrained(path)
    fast.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    return make_tiny_classifier(tmp_path_factory.mktemp("hf") / "tiny-bert")


def reference_scores(path: Path, texts: list[str]) -> list[tuple[str, float]]:
    """P(good) from transformers itself, one text at a time (no padding), truncated to the tokenizer's maximum."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = AutoModelForSequenceClassification.from_pretrained(path, local_files_only=True).eval()
    out = []
    with torch.no_grad():
        for t in texts:
            p = torch.softmax(model(**tok(t, truncation=True, return_tensors="pt")).logits, dim=-1)[0]
            out.append((model.config.id2label[int(p.argmax())], float(p[1])))
    return out


def test_the_directory_is_inspected_and_truncated_to_the_tokenizers_maximum(tiny):
    info = quality.inspect(str(tiny), "good")
    assert info == quality.ModelInfo(str(tiny), "hf", ("bad", "good"))
    scorer = quality.load(str(tiny), "good")
    assert (scorer.kind, scorer.batches, scorer.max_length, scorer.device) == ("hf", True, MAX_TOKENS, "cpu")
    long = scorer.tokenizer(TEXTS[3], truncation=True, max_length=scorer.max_length)["input_ids"]
    assert len(long) == MAX_TOKENS  # 80 words cut to 24 tokens with [CLS] and [SEP]


def test_batched_scores_equal_one_by_one_and_transformers_itself(tiny):
    ref = reference_scores(tiny, TEXTS)
    scores = [s for _, s in ref]
    assert max(scores) - min(scores) > 0.2  # the untrained model still tells the texts apart
    one = [qm.Collector(qm.Config(model=str(tiny), positive_label="good", batch_size=1)).signals(i, t)
           for i, t in enumerate(TEXTS)]
    c4 = qm.Collector(qm.Config(model=str(tiny), positive_label="good", batch_size=4))
    assert (c4.batch_size, c4.chunk_size) == (4, 4 * qm.WINDOW)
    batched = c4.signals_batch([(i, t, None) for i, t in enumerate(TEXTS)])  # sorted by length: 3 forward passes
    for (label, p), a, b in zip(ref, one, batched):
        assert a["qm_label"] == b["qm_label"] == label
        assert a["qm_score"] == pytest.approx(p, abs=2e-6) and b["qm_score"] == pytest.approx(p, abs=2e-6)
    # empty texts are not given to the model; the others keep their place
    mixed = c4.signals_batch([(0, TEXTS[0], None), (1, "  \n ", None), (2, TEXTS[1], None)])
    assert mixed[1] == {"qm_score": None, "qm_label": None}
    assert [m["qm_score"] for m in (mixed[0], mixed[2])] == pytest.approx([scores[0], scores[1]], abs=2e-6)
    # the device's default batch size (8 on the CPU) when batch_size is 0
    auto = qm.Collector(qm.Config(model=str(tiny), positive_label="good"))
    assert (auto.model.default_batch_size, auto.chunk_size) == (8, 8 * qm.WINDOW)
    assert [s["qm_score"] for s in auto.signals_batch([(i, t, None) for i, t in enumerate(TEXTS)])] == \
        pytest.approx(scores, abs=2e-6)
    # scoring for the other class is 1 - p
    bad = qm.Collector(qm.Config(model=str(tiny), positive_label="bad")).signals(0, TEXTS[0])
    assert bad["qm_score"] == pytest.approx(1 - scores[0], abs=2e-6)


def test_a_run_stores_the_scores_of_transformers_in_explore_and_batch(tiny, tmp_path, monkeypatch):
    calls: list[tuple[int, int]] = []  # (texts handed over, texts per forward pass)
    score_batch = quality.HFScorer.score_batch
    monkeypatch.setattr(quality.HFScorer, "score_batch", lambda self, texts, batch_size=0:
                        calls.append((len(texts), batch_size)) or score_batch(self, texts, batch_size=batch_size))
    monkeypatch.setattr(qm, "WINDOW", 2)  # 6 documents at a time: two chunks of the 10
    src = tmp_path / "docs.jsonl"
    lines = [json.dumps({"text": t}) + "\n" for t in TEXTS]
    src.write_text("".join(lines))
    offsets = [sum(len(x.encode()) for x in lines[:i]) for i in range(len(lines))]
    ids = [doc_id(src.name, o) for o in offsets]
    ref = dict(zip(ids, (p for _, p in reference_scores(tiny, TEXTS))))
    cut = sorted(ref.values())[len(ref) // 2]  # half the documents score below it
    assert all(abs(p - cut) > 1e-4 for p in ref.values() if p != cut)
    off = {s: {"enabled": False} for s in ("url", "language", "gopher_quality", "gopher_repetition", "c4", "fineweb")}
    for mode in ("explore", "batch"):
        cfg = config.build(config.Config, {
            "name": mode, "output_dir": str(tmp_path / "runs"), "mode": mode, "inputs": [{"path": str(src)}],
            "stages": {**off, "quality_model": {"model": str(tiny), "positive_label": "good", "min_score": cut,
                                                "batch_size": 3}},
            "tokenizer": {"enabled": False}})
        calls.clear()
        manifest = engine.run(cfg, progress=False, client=engine.INPROCESS)
        assert calls == [(6, 3), (4, 3)], mode  # 10 documents, batch_size 3, windows of 2 x 3
        assert manifest["models"]["quality_model"]["kind"] == "hf"
        rows = query.signal_rows(cfg.run_dir, ["doc_id", "qm_score", "qm_label"])
        assert sorted(rows["doc_id"].to_list()) == sorted(ids)
        for d, p in zip(rows["doc_id"], rows["qm_score"]):
            assert p == pytest.approx(ref[d], abs=2e-6), mode
        reasons = dict(zip(*query.drop_reasons(cfg.run_dir, cfg).to_dict(as_series=False).values()))
        assert {d for d, r in reasons.items() if r is None} == {d for d, p in ref.items() if p >= cut}, mode
        assert {r for r in reasons.values() if r} == {"quality_model.low_score"}


def test_hub_names_and_a_missing_class_are_clear_errors_before_any_work(tiny, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no local directory of those names
    for name in ("bert-base-uncased", "org/model"):
        with pytest.raises(ConfigError, match=rf"stages.quality_model.model='{name}' is not a local file or directory; "
                                              rf"it looks like a Hugging Face Hub model name.*never downloads models.*"
                                              rf"hf download {name} --local-dir models/{name.split('/')[-1]}"):
            config.build(config.Config, {"stages": {"quality_model": {"model": name}}})
    with pytest.raises(ConfigError, match=r"stages.quality_model.positive_label='hq' is not a class of the hf model "
                                          r".*its classes are bad, good; set positive_label"):
        config.build(config.Config, {"stages": {"quality_model": {"model": str(tiny)}}})  # positive_label: hq
    with pytest.raises(ConfigError, match=r"stages.quality_model.batch_size=-1 is not allowed: must be 0..4096"):
        config.build(config.Config, {"stages": {"quality_model": {"batch_size": -1}}})
    weightless = tmp_path / "weightless"
    shutil.copytree(tiny, weightless)
    (weightless / "model.safetensors").unlink()
    with pytest.raises(ConfigError, match=r"model=.*weightless.* has a config.json but no weights.*save_pretrained"):
        qm.Config(model=str(weightless), positive_label="good")


def _can_unshare() -> bool:
    if shutil.which("unshare") is None:
        return False
    return subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode == 0


@pytest.mark.skipif(not _can_unshare(), reason="unshare -n (a network namespace) is not available or not permitted")
def test_scoring_needs_no_network(tiny):
    """The model is loaded and scored in a new network namespace (only loopback, down), without HF_HUB_OFFLINE."""
    code = (
        "import json, socket, sys\n"
        "from lab.stages import quality_model as qm\n"
        "c = qm.Collector(qm.Config(model=sys.argv[1], positive_label='good', batch_size=4))\n"
        "texts = json.loads(sys.argv[2])\n"
        "print(json.dumps({'interfaces': [n for _, n in socket.if_nameindex()],\n"
        "                  'signals': c.signals_batch([(i, t, None) for i, t in enumerate(texts)])}))\n")
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith(("HF_", "TRANSFORMERS_"))}
    env["PYTHONPATH"] = str(ROOT)
    out = subprocess.run(["unshare", "-n", sys.executable, "-c", code, str(tiny), json.dumps(TEXTS)],
                         capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["interfaces"] == ["lo"]
    ref = reference_scores(tiny, TEXTS)
    assert [s["qm_label"] for s in got["signals"]] == [label for label, _ in ref]
    assert [s["qm_score"] for s in got["signals"]] == pytest.approx([p for _, p in ref], abs=2e-6)
