"""Per-language thresholds on real multilingual text: what each language keeps under the English-tuned
rules, and under the thresholds `corpus-lab calibrate` writes.

The translated man pages on this machine (bench/langid.py's set: Debian's manpages-* packages, up to
``--per-lang`` pages per language, rendered with groff) are run through the default pipeline with every
language kept (``language.keep``), in explore mode. Then, per language, the share of its documents the
heuristic filters (gopher_quality, gopher_repetition, c4, fineweb) keep together: under the run's
thresholds (tuned on English), and under the calibrated config (percentile mode; and ``--retention``
mode at the English share). The English row is the reference: calibration leaves it as it is.

    .venv/bin/python bench/calibration.py [--per-lang 150] [--out bench/out/calibration.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from langid import build_dataset  # noqa: E402

from lab import engine, query  # noqa: E402

from lab.select import calibrate

from lab.select import knobs
from lab.config import Config, EngineConfig, InputConfig, loads  # noqa: E402
from lab.select.ruleset import ruleset  # noqa: E402


def heuristic_keep(run: Path, cfg: Config, lang: str) -> float:
    """The share of ``lang``'s documents that pass every rule of the calibrated stages under ``cfg``."""
    rules = [x for x in ruleset(cfg) if x.stage in calibrate.STAGES and x.per_document]
    return query.keep_share(run, rules, lang)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-lang", type=int, default=150)
    ap.add_argument("--dir", default="/tmp/calibration-bench", help="where the corpus and the run go")
    ap.add_argument("--out", default="bench/out/calibration.json")
    args = ap.parse_args()
    root = Path(args.dir)
    root.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    ds = build_dataset(per_lang=args.per_lang, min_docs=60)
    corpus = root / "man.jsonl"
    corpus.write_text("".join(json.dumps({"id": d.id, "text": d.text}) + "\n" for d in ds.docs))
    langs = sorted({d.lang for d in ds.docs})
    print(f"{len(ds.docs)} pages in {len(langs)} languages ({time.time() - t0:.0f} s)", flush=True)
    base = Config(name="man", output_dir=str(root / "runs"), inputs=(InputConfig(path=str(corpus)),),
                  engine=EngineConfig(n_workers=2))
    base = knobs.apply(base, {"language.keep": tuple(langs)})
    t1 = time.time()
    engine.run(base, progress=False)
    run = base.run_dir
    print(f"annotated in {time.time() - t1:.0f} s", flush=True)
    counts = dict(query.languages(run))
    pct = calibrate.calibrate(run, base, min_docs=50)
    tuned = loads(calibrate.config_text(base, pct))
    en_keep = heuristic_keep(run, base, "en")
    ret = calibrate.calibrate(run, base, min_docs=50, retention=round(en_keep, 4))
    tuned_ret = loads(calibrate.config_text(base, ret))
    rows = []
    for lang in sorted(counts, key=lambda x: -counts[x]):
        if counts[lang] < 50:
            continue
        rows.append({"lang": lang, "documents": counts[lang], "english_rules": heuristic_keep(run, base, lang),
                     "calibrated_percentile": heuristic_keep(run, tuned, lang),
                     "calibrated_retention": heuristic_keep(run, tuned_ret, lang),
                     "thresholds_moved": sum(len(v.get(lang, {})) for v in pct.overrides.values())})
    print(f"{'lang':5} {'docs':>5} {'English rules':>14} {'percentile':>11} {'retention':>10} {'moved':>6}")
    for r in rows:
        print(f"{r['lang']:5} {r['documents']:5d} {r['english_rules']:14.3f} {r['calibrated_percentile']:11.3f} "
              f"{r['calibrated_retention']:10.3f} {r['thresholds_moved']:6d}")
    out = {"per_lang": args.per_lang, "pages": len(ds.docs), "english_keep": en_keep, "rows": rows,
           "skipped": pct.skipped, "overrides": pct.overrides, "seconds": round(time.time() - t0, 1)}
    Path(args.out).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
