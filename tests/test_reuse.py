"""Reuse keyed by content, as a property: for each input format, in this process and on a LocalCluster,

- a rerun of an unchanged input reuses every step;
- one byte of one record changed (same size, modification time restored) makes ``corpus-lab check`` and
  ``verify-tokens`` say the run is stale (exit 4), and the rerun's outputs equal a fresh run's byte for byte
  (tokens, counts, tokenizer, clusters, signals, docs: every file but timings and the run's own name).
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lab import engine, sample
from lab.config import Config, EngineConfig, InputConfig, PackConfig, TokenizerConfig
from lab.io.run import RunLayout

N_DOCS = 24
TIMINGS = ("stats/costs/", "stats/timing-", "manifest.json", "config.yaml", ".lock")


def _texts() -> list[str]:
    rng = random.Random(3)
    return [sample.english_doc(rng) for _ in range(N_DOCS)]


def _page(text: str) -> str:
    return "<html><head><title>t</title></head><body>" + "".join(f"<p>{p}</p>" for p in text.split("\n\n")) + \
        "</body></html>"


def _warc(texts: list[str]) -> bytes:
    out = b""
    for n, t in enumerate(texts):
        body = _page(t).encode()
        http = b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: %d\r\n\r\n" % len(body)
        block = http + body
        out += (f"WARC/1.1\r\nWARC-Type: response\r\nWARC-Target-URI: https://site.test/{n}\r\n"
                f"WARC-Record-ID: <urn:uuid:00000000-0000-0000-0000-{n:012d}>\r\n"
                f"Content-Type: application/http; msgtype=response\r\nContent-Length: {len(block)}\r\n\r\n").encode()
        out += block + b"\r\n\r\n"
    return out


def make(fmt: str, root: Path) -> Path:
    """An input directory of ``fmt``; returns the file whose record the test edits."""
    texts = _texts()
    root.mkdir(parents=True)
    if fmt == "jsonl":
        for k in range(3):
            (root / f"{k}.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts[k::3]))
        return root / "1.jsonl"
    if fmt == "parquet":  # plain pages, no dictionary: a record's bytes are in the file as they are
        for k in range(2):
            pq.write_table(pa.table({"text": texts[k::2]}), root / f"{k}.parquet", compression="none",
                           use_dictionary=False, write_statistics=False)
        return root / "1.parquet"
    if fmt in ("text", "html"):
        for n, t in enumerate(texts):
            (root / f"{n:02d}.{'txt' if fmt == 'text' else 'html'}").write_text(t if fmt == "text" else _page(t))
        return root / ("07.txt" if fmt == "text" else "07.html")
    (root / "crawl.warc").write_bytes(_warc(texts))
    return root / "crawl.warc"


def edit_one_byte(path: Path) -> None:
    """Change one letter of one record in place: same size, the modification time put back (``touch -r``)."""
    st = path.stat()
    data = bytearray(path.read_bytes())
    at = data.find(b" the ", len(data) // 2)
    assert at > 0
    data[at + 1] = ord("T")
    path.write_bytes(bytes(data))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert (path.stat().st_size, path.stat().st_mtime_ns) == (st.st_size, st.st_mtime_ns)


def config(src: Path, out: Path, name: str) -> Config:
    return Config(name=name, output_dir=str(out), inputs=(InputConfig(path=str(src)),),
                  tokenizer=TokenizerConfig(vocab_size=600), pack=PackConfig(seq_len=256, val_fraction=0.1),
                  engine=EngineConfig(n_workers=2))


def _strip_seconds(obj):
    if isinstance(obj, dict):
        return {k: _strip_seconds(v) for k, v in obj.items() if k != "seconds"}
    if isinstance(obj, list):
        return [_strip_seconds(v) for v in obj]
    return obj


def outputs(run: Path) -> dict[str, bytes]:
    """Every file of a run but timings and the run's own name, JSON without its wall seconds."""
    out = {}
    for f in sorted(run.rglob("*")):
        rel = str(f.relative_to(run))
        if f.is_file() and not rel.startswith(TIMINGS):
            data = f.read_bytes()
            if f.suffix == ".json":
                data = json.dumps(_strip_seconds(json.loads(data)), sort_keys=True).encode()
            out[rel] = data
    return out


STEPS_REUSED = {"near_dedup": "reused", "boilerplate": "reused", "tokenizer": "reused",
                "tokenize": {"partitions_run": 0}, "materialize": "reused"}


@pytest.mark.parametrize("where", ["inprocess", "cluster"])
@pytest.mark.parametrize("fmt", ["jsonl", "parquet", "text", "html", "warc"])
def test_reuse_follows_content(fmt, where, tmp_path, corpus_lab, request):
    client = engine.INPROCESS if where == "inprocess" else request.getfixturevalue("local_cluster")
    src = tmp_path / "in"
    edited = make(fmt, src)
    cfg = config(src, tmp_path / "runs", "a")
    first = engine.run(cfg, progress=False, client=client)
    assert first["totals"]["docs"] == N_DOCS and first["tokens"]["train"]["documents"] > 0

    again = engine.run(cfg, progress=False, client=client)  # nothing changed: every step reused
    steps = again["last_run"]["steps"]
    assert again["last_run"]["partitions_run"] == 0 and {k: steps[k] for k in STEPS_REUSED} == STEPS_REUSED
    assert corpus_lab("check", cfg.run_dir).returncode == 0

    edit_one_byte(edited)
    r = corpus_lab("check", cfg.run_dir)
    assert r.returncode == 4 and "its input changed since it was annotated" in r.stdout, r.stdout + r.stderr
    assert edited.name in r.stdout
    r = corpus_lab("verify-tokens", cfg.run_dir)
    assert r.returncode == 4 and "no longer matches" in r.stderr

    rerun = engine.run(cfg, progress=False, client=client)
    assert rerun["last_run"]["partitions_run"] >= 1 and rerun["last_run"]["partitions_reused"] >= 0
    assert corpus_lab("check", cfg.run_dir).returncode == 0
    fresh = config(src, tmp_path / "runs", "fresh")
    engine.run(fresh, progress=False, client=client)
    a, b = outputs(cfg.run_dir), outputs(fresh.run_dir)
    assert sorted(a) == sorted(b)
    differ = [k for k in a if a[k] != b[k]]
    assert differ == [], differ
    assert any(k.startswith("tokens/train/shard-") for k in a) and "tokenizer/tokenizer.json" in a
    assert RunLayout(cfg.run_dir).tokens_done.exists()
