"""The planner (DESIGN §7): its check numbers, the materialize break-even, validation, and a run's measured inputs.

Check numbers, decimal units (TB = 1e12, PB = 1e15, MB = 1e6 bytes):
- retentions 0.50, 0.40, 0.50, 0.50, 0.50, 0.40, 0.95, 1.00: product 0.0095; 14.8e12 tokens at
  4 B/token = 59.2 TB kept -> 6.2316e15 B = 6.23 PB raw.
- N = 14.8e12, T = 54 days, G = 2048: tau = 3.172e6 tokens/s, 1,548.9 tokens/s per GPU,
  12.69e6 B/s read at 4 B/token. DESIGN §7 writes "12.7 GB/s"; tau * 4 B is 12.7 *MB*/s.
- 6 PB at 10 MB/s/core in 14 days (1,209,600 s): 496.0 cores. DESIGN §7 writes "~4,960", which
  is the count at 1 MB/s/core (tested too).
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pytest

from lab import engine, sample
from lab.config import Config, EngineConfig, IngestConfig, InputConfig, PackConfig, TokenizerConfig
from lab.errors import ConfigError
from lab.io.writers import read_json
from lab.plan import (
    SECONDS_PER_DAY,
    Throughput,
    break_even_epochs,
    cores_for_deadline,
    cores_needed,
    from_manifest,
    funnel_bytes,
    materialize_pays,
    plan,
    raw_bytes_needed,
    retention_product,
    throughput,
)

ROOT = Path(__file__).resolve().parent.parent
DEEPSEEK_V3 = [0.50, 0.40, 0.50, 0.50, 0.50, 0.40, 0.95, 1.00]
TB, PB, MB = 1e12, 1e15, 1e6


# --- DESIGN §7 check numbers


def test_funnel_of_deepseek_v3_class_retentions():
    assert retention_product(DEEPSEEK_V3) == pytest.approx(0.0095, rel=1e-12)
    raw = raw_bytes_needed(14.8e12, DEEPSEEK_V3, 4)  # 14.8e12 tokens * 4 B = 59.2 TB of survivors
    assert raw == pytest.approx(6.23 * PB, rel=0.01)
    assert raw == pytest.approx(59.2 * TB / 0.0095, rel=1e-12)  # 6.2316e15
    out = funnel_bytes(raw, DEEPSEEK_V3)
    assert len(out) == 8
    assert out[0] == pytest.approx(raw * 0.5) and out[1] == pytest.approx(raw * 0.2)
    assert out[-1] == pytest.approx(59.2 * TB, rel=1e-12)
    assert all(a >= b for a, b in itertools.pairwise(out))


def test_funnel_by_hand_and_by_stage_name():
    assert funnel_bytes(1000.0, [0.5, 0.5, 1.0]) == [500.0, 250.0, 250.0]
    assert funnel_bytes(1000.0, {"language": 0.5, "dedup": 0.5}) == [500.0, 250.0]
    assert funnel_bytes(1000.0, []) == []
    assert raw_bytes_needed(100.0, [], 3.0) == 300.0  # no filtering: raw = N * b_t


def test_throughput_contract():
    t = throughput(14.8e12, 54, 2048)
    assert isinstance(t, Throughput)
    assert t.tokens_per_s == pytest.approx(3.17e6, rel=0.01)
    assert t.tokens_per_s == pytest.approx(14.8e12 / (54 * 86400), rel=1e-12)
    assert t.per_gpu == pytest.approx(1550, rel=0.01)  # 1,548.9
    assert t.read_bytes_per_s == pytest.approx(12.7 * MB, rel=0.01)  # B/s; DESIGN's "GB/s" is a unit slip
    assert throughput(14.8e12, 54, 2048, bytes_per_token_on_disk=2).read_bytes_per_s == pytest.approx(6.34 * MB,
                                                                                                       rel=0.01)


def test_cores():
    fourteen_days = 14 * SECONDS_PER_DAY
    assert cores_needed(6 * PB, 10 * MB, fourteen_days) == pytest.approx(496.0, rel=0.01)
    # DESIGN §7's "~4,960 cores" is this count at 1 MB/s/core, not 10
    assert cores_needed(6 * PB, 1 * MB, fourteen_days) == pytest.approx(4960, rel=0.01)
    # the same plan from per-stage costs: 1e-7 CPU s/byte in total = 10 MB/s/core
    c = cores_for_deadline(6 * PB, {"language": 0.6e-7, "dedup": 0.4e-7}, fourteen_days)
    assert c["cores"] == pytest.approx(496.0, rel=0.01)
    assert c["bytes_per_s_per_core"] == pytest.approx(10 * MB)
    assert c["cpu_seconds"] == pytest.approx(6e8)
    assert c["stages"]["language"]["cores"] == pytest.approx(0.6 * c["cores"])
    assert sum(s["cores"] for s in c["stages"].values()) == pytest.approx(c["cores"])
    assert sum(s["share"] for s in c["stages"].values()) == pytest.approx(1.0)
    free = cores_for_deadline(6 * PB, {"pii": 0.0}, fourteen_days)
    assert free["cores"] == 0.0 and free["bytes_per_s_per_core"] == math.inf


# --- materialize vs recompute


@pytest.mark.parametrize("ct, cio, e_star", [(3.0, 1.0, 1.5), (4.0, 2.0, 2.0), (10.0, 9.0, 10.0), (5.0, 0.0, 1.0)])
def test_materialize_flips_at_break_even(ct, cio, e_star):
    assert break_even_epochs(ct, cio) == pytest.approx(e_star)
    assert not materialize_pays(ct, e_star * 0.99, cio)
    assert materialize_pays(ct, e_star * 1.01, cio)
    assert materialize_pays(ct, 1000, cio)
    assert not materialize_pays(ct, 1, cio)  # one epoch: nothing is reused


def test_materialize_exactly_at_break_even_does_not_pay():
    assert break_even_epochs(4.0, 2.0) == 2.0
    assert 4.0 * (1 - 1 / 2.0) == 2.0 and not materialize_pays(4.0, 2.0, 2.0)  # strict inequality


@pytest.mark.parametrize("ct, cio", [(1.0, 1.0), (1.0, 2.0), (0.0, 0.0)])
def test_materialize_never_pays_when_reading_costs_as_much_as_transforming(ct, cio):
    assert break_even_epochs(ct, cio) == math.inf
    assert not any(materialize_pays(ct, e, cio) for e in (1, 2, 10, 1e9))


# --- validation


@pytest.mark.parametrize("call, name", [
    (lambda: funnel_bytes(-1, [0.5]), "raw_bytes"),
    (lambda: funnel_bytes(0, [0.5]), "raw_bytes"),
    (lambda: funnel_bytes(1e9, [0.5, 0.0]), r"retentions\[1\].*\(0, 1\]"),
    (lambda: funnel_bytes(1e9, [1.2]), r"retentions\[0\].*\(0, 1\]"),
    (lambda: funnel_bytes(1e9, {"language": -0.1}), r"retentions\['language'\]"),
    (lambda: funnel_bytes(1e9, [float("nan")]), r"retentions\[0\].*finite"),
    (lambda: funnel_bytes(1e9, "0.5"), "retentions must be a list"),
    (lambda: funnel_bytes(1e9, 0.5), "retentions must be a list"),
    (lambda: raw_bytes_needed(0, [0.5], 4), "token_target"),
    (lambda: raw_bytes_needed(1e9, [0.5], 0), "bytes_per_token"),
    (lambda: throughput(0, 54, 2048), "tokens"),
    (lambda: throughput(True, 54, 2048), "tokens"),
    (lambda: throughput(1e12, -1, 2048), "days"),
    (lambda: throughput(1e12, 54, 0), "gpus"),
    (lambda: throughput(1e12, 54, 1.5), "gpus.*whole number"),
    (lambda: throughput(1e12, 54, 8, bytes_per_token_on_disk=0), "bytes_per_token_on_disk"),
    (lambda: cores_needed(6e15, 0, 100), "bytes_per_s_per_core"),
    (lambda: cores_needed(6e15, 1e7, float("inf")), "seconds"),
    (lambda: cores_for_deadline(6e15, {"c4": -1e-9}, 100), r"stage_cpu_seconds_per_byte\['c4'\].*>= 0"),
    (lambda: cores_for_deadline(6e15, [1e-9], 100), "stage_cpu_seconds_per_byte must be a mapping"),
    (lambda: cores_for_deadline(6e15, {}, 0), "deadline_seconds"),
    (lambda: materialize_pays(-1, 2, 1), "transform_cost"),
    (lambda: materialize_pays(1, 0, 1), "epochs"),
    (lambda: break_even_epochs(1, -1), "io_cost"),
    (lambda: plan(1e12, 54, 2048, retentions=[0.5], bytes_per_token=4, stage_cpu_seconds_per_byte={},
                  deadline_days=0), "deadline_days"),
    (lambda: plan(1e12, 54, 2048, retentions={"pii": 0}, bytes_per_token=4, stage_cpu_seconds_per_byte={},
                  deadline_days=14), r"retentions\['pii'\]"),
])
def test_bad_arguments_name_the_argument(call, name):
    with pytest.raises(ConfigError, match=name):
        call()


def test_from_manifest_without_a_run(tmp_path):
    with pytest.raises(ConfigError, match="run_dir.*no manifest.json.*corpus-lab run"):
        from_manifest(tmp_path)


# --- a real run's measured inputs


def _tokenized(run_dir: Path) -> bool:
    m = run_dir / "manifest.json"
    return m.is_file() and bool(f := read_json(m).get("funnel")) and "tokens_out" in f[-1]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """runs/sample when it exists and is tokenized; else the synthetic sample, one worker (~7 s)."""
    if _tokenized(ROOT / "runs" / "sample"):
        return ROOT / "runs" / "sample"
    syn = sample.build(root=tmp_path_factory.mktemp("data") / "sample", real=False) / "synthetic"
    cfg = Config(name="plan", output_dir=str(tmp_path_factory.mktemp("runs")), inputs=(InputConfig(path=str(syn)),),
                 ingest=IngestConfig(partition_bytes=1 << 26), tokenizer=TokenizerConfig(vocab_size=3000),
                 pack=PackConfig(seq_len=512, val_fraction=0.1, shard_sequences=64),
                 engine=EngineConfig(n_workers=1))
    engine.run(cfg, progress=False)
    return Path(cfg.run_dir)


def test_from_manifest_measures_retention_bytes_per_token_and_costs(run_dir):
    m = read_json(run_dir / "manifest.json")
    funnel = m["funnel"]
    inp = from_manifest(run_dir)
    assert inp["stages"] == [f["stage"] for f in funnel]
    assert set(inp["retention"]) == {"docs", "bytes", "tokens"}
    first, last = funnel[0], funnel[-1]
    assert inp["raw_bytes"] == first["bytes_in"] and inp["kept_bytes"] == last["bytes_out"]
    # retention product x what went in = what was kept, in every unit
    for unit in ("docs", "bytes", "tokens"):
        kept = retention_product(list(inp["retention"][unit].values())) * first[f"{unit}_in"]
        assert kept == pytest.approx(last[f"{unit}_out"], rel=1e-9), unit
    assert 0 < retention_product(inp["retention"]["bytes"]) < 1  # the sample's filters drop something
    assert inp["kept_tokens"] == last["tokens_out"] > 0
    assert inp["bytes_per_token"] == pytest.approx(last["bytes_out"] / last["tokens_out"], rel=1e-12)
    assert 1 < inp["bytes_per_token"] < 10  # a fitted BPE on mostly-English text
    # cost per raw byte x raw bytes = the stage's measured CPU seconds
    assert set(inp["stage_cpu_seconds_per_byte"]) == set(m["stage_cpu_seconds"])
    for stage, sec in m["stage_cpu_seconds"].items():
        assert inp["stage_cpu_seconds_per_byte"][stage] * inp["raw_bytes"] == pytest.approx(sec, rel=1e-9)


def test_plan_on_the_runs_own_inputs_gives_back_the_run(run_dir):
    m = read_json(run_dir / "manifest.json")
    inp = from_manifest(run_dir)
    p = plan(inp["kept_tokens"], 54, 2048, retentions=inp["retention"]["bytes"], bytes_per_token=inp["bytes_per_token"],
             stage_cpu_seconds_per_byte=inp["stage_cpu_seconds_per_byte"], deadline_days=1)
    assert p["raw_bytes"] == pytest.approx(m["funnel"][0]["bytes_in"], rel=1e-9)
    assert p["kept_bytes"] == pytest.approx(m["funnel"][-1]["bytes_out"], rel=1e-9)
    for row, f in zip(p["funnel"], m["funnel"], strict=True):
        assert row["stage"] == f["stage"]
        assert row["bytes_in"] == pytest.approx(f["bytes_in"], rel=1e-9)
        assert row["bytes_out"] == pytest.approx(f["bytes_out"], rel=1e-9)
    assert p["throughput"]["tokens_per_s"] == pytest.approx(inp["kept_tokens"] / (54 * 86400))
    # processing the run's own raw bytes costs the run's own CPU seconds
    assert p["cores"]["cpu_seconds"] == pytest.approx(sum(m["stage_cpu_seconds"].values()), rel=1e-9)
    assert p["cores"]["cores"] == pytest.approx(p["cores"]["cpu_seconds"] / SECONDS_PER_DAY)


def test_plan_scales_the_run_to_a_pretraining_target(run_dir):
    inp = from_manifest(run_dir)
    kw = {"retentions": inp["retention"]["bytes"], "bytes_per_token": inp["bytes_per_token"],
          "stage_cpu_seconds_per_byte": inp["stage_cpu_seconds_per_byte"], "deadline_days": 14}
    small, big = plan(1e9, 54, 2048, **kw), plan(14.8e12, 54, 2048, **kw)
    assert big["raw_bytes"] / small["raw_bytes"] == pytest.approx(14.8e3)  # linear in the target
    assert big["cores"]["cores"] / small["cores"]["cores"] == pytest.approx(14.8e3)
    assert big["throughput"]["per_gpu"] == pytest.approx(1550, rel=0.01)
