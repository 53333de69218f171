"""Time the quality_model stage's HuggingFace path against the bare transformers pipeline, per core.

What it measures: documents scored per CPU-second (torch on one thread, ``torch.set_num_threads(1)``:
what one Dask worker of one thread gets), on two sets of documents from bench/out/docs_en.jsonl
(``bench/make_docs.py``): ``long``, the real ~10 KB English documents (each cut to its first 10,000
characters, ``max_chars``: all of them fill the 512 tokens, so a batch has no padding), and ``mixed``,
the same documents cut to a seeded random 200-3,000 characters (batches pad). Through

- ``stage bN``: ``quality_model.Collector.signals_batch`` given ``chunk_size`` documents at a time as
  ``lab.annotate`` gives them (prefix cut, newlines folded, sorted by length, forward passes of N,
  scores rounded); ``stage b1`` is one document per forward pass (what the stage did before it batched);
- ``pipeline bN``: ``transformers.pipeline("text-classification", top_k=None)`` on the same prefixes (cut
  outside the clock), ``batch_size=N``, truncated to the same maximum, in the documents' order.

The models are made here, seeded and untrained (nothing is downloaded): a WordPiece tokenizer
(8,000 tokens) trained with ``tokenizers`` on the first documents and BERT sequence classifiers of
``--sizes`` (hidden size x layers; default 32x2, a tiny model whose forward pass costs little, so the
figures are mostly tokenization and per-call overhead, and 256x4, where the forward pass dominates),
512 tokens at most. The largest difference between the stage's scores and the pipeline's is printed.

Run (main venv, the hf extra installed):
    .venv/bin/python bench/make_docs.py
    .venv/bin/python bench/quality_model_hf.py [--docs 256] [--json bench/out/quality_model_hf.json]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lab.quality import model as quality  # noqa: E402
from lab.stages import quality_model as qm  # noqa: E402

OUT = ROOT / "bench" / "out"
SEED = 0
MAX_TOKENS = 512


def make_model(path: Path, texts: list[str], hidden: int, layers: int) -> Path:
    """A WordPiece tokenizer trained on ``texts`` and a seeded, untrained BERT classifier (bad, good)."""
    import torch
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import BertConfig, BertForSequenceClassification, PreTrainedTokenizerFast

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.train_from_iterator(texts, trainers.WordPieceTrainer(vocab_size=8000, special_tokens=specials))
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[(t, tok.token_to_id(t)) for t in ("[CLS]", "[SEP]")])
    tok.decoder = decoders.WordPiece()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                                   sep_token="[SEP]", mask_token="[MASK]", model_max_length=MAX_TOKENS)
    torch.manual_seed(SEED)
    cfg = BertConfig(vocab_size=tok.get_vocab_size(), hidden_size=hidden, num_hidden_layers=layers,
                     num_attention_heads=max(hidden // 64, 2), intermediate_size=4 * hidden,
                     max_position_embeddings=MAX_TOKENS, id2label={0: "bad", 1: "good"},
                     label2id={"bad": 0, "good": 1})
    BertForSequenceClassification(cfg).save_pretrained(path)
    fast.save_pretrained(path)
    return path


def per_cpu_second(fn, texts: list[str], repeat: int) -> tuple[float, list]:
    """Documents per CPU-second of ``fn(texts)`` (best of ``repeat``) and its last output."""
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.process_time()
        out = fn(texts)
        best = min(best, time.process_time() - t0)
    return len(texts) / best, out


def stage(model: Path, batch_size: int):
    """The stage's path: ``chunk_size`` documents per ``signals_batch`` call, as annotate hands them."""
    c = qm.Collector(qm.Config(model=str(model), positive_label="good", batch_size=batch_size))

    def run(texts: list[str]) -> list[float]:
        out = []
        for start in range(0, len(texts), c.chunk_size):
            out += c.signals_batch([(start + k, t, None) for k, t in enumerate(texts[start:start + c.chunk_size])])
        return [s["qm_score"] for s in out]
    return run


def pipeline(model: Path, batch_size: int):
    from transformers import pipeline as hf_pipeline

    pipe = hf_pipeline("text-classification", model=str(model), tokenizer=str(model), device="cpu", top_k=None)

    def run(texts: list[str]) -> list[float]:
        out = pipe(texts, batch_size=batch_size, truncation=True, max_length=MAX_TOKENS)
        return [next(d["score"] for d in row if d["label"] == "good") for row in out]
    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--docs", type=int, default=256, help="documents timed (bench/out/docs_en.jsonl)")
    ap.add_argument("--batch-sizes", default="1,8,32", help="documents per forward pass timed (stage and pipeline)")
    ap.add_argument("--sizes", default="32x2,256x4", help="models timed: hidden size x layers, comma-separated")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--json", default=str(OUT / "quality_model_hf.json"))
    args = ap.parse_args()
    import torch
    import transformers
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    torch.set_num_threads(1)
    docs_file = OUT / "docs_en.jsonl"
    if not docs_file.exists():
        raise SystemExit("bench/out/docs_en.jsonl is missing: run .venv/bin/python bench/make_docs.py first")
    texts = [json.loads(line)["text"] for line in open(docs_file)][: args.docs]
    rng = random.Random(SEED)
    sets = {"long": texts, "mixed": [t[:rng.randint(200, 3000)] for t in texts]}
    sizes = [int(b) for b in args.batch_sizes.split(",")]
    print(f"{len(texts)} documents of {docs_file.name}; torch {torch.__version__} ({torch.get_num_threads()} "
          f"thread), transformers {transformers.__version__}")
    tmp = Path(tempfile.mkdtemp(prefix="qm-hf-bench-"))
    result: dict = {"docs": len(texts), "torch": torch.__version__, "transformers": transformers.__version__,
                    "models": {}}
    for size in args.sizes.split(","):
        hidden, layers = (int(x) for x in size.split("x"))
        model = make_model(tmp / size, texts[:200], hidden, layers)
        tokenizer = quality.load(str(model), "good").tokenizer
        for set_name, docs in sets.items():
            prefixes = [quality.prefix(t) for t in docs]  # what the stage gives the model, cut outside the clock
            ids = tokenizer(prefixes, truncation=True, max_length=MAX_TOKENS)["input_ids"]
            row: dict = {"mean_tokens": round(float(np.mean([len(x) for x in ids])), 1)}
            scores = {}
            for b in sizes:
                for name, fn, inp in ((f"stage b{b}", stage(model, b), docs),
                                      (f"pipeline b{b}", pipeline(model, b), prefixes)):
                    rate, scores[name] = per_cpu_second(fn, inp, args.repeat)
                    row[name] = round(rate, 1)
            diffs = [np.abs(np.subtract(scores[f"stage b{b}"], scores[f"pipeline b{b}"])).max() for b in sizes]
            row["max_abs_diff"] = float(max(diffs))
            result["models"].setdefault(size, {})[set_name] = row
            print(f"  BERT {size}, {set_name} ({row['mean_tokens']:.0f} tokens/doc): "
                  + "  ".join(f"{k} {v}" for k, v in row.items() if k != "mean_tokens"), flush=True)
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    print(f"written: {args.json}")


if __name__ == "__main__":
    main()
