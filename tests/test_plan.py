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

import polars as pl
import pytest

from lab.errors import ConfigError, NotReadyError
from lab.io.writers import read_json
from lab.plan.throughput import (
    SECONDS_PER_DAY,
    Throughput,
    break_even_epochs,
    compare,
    cores_for_deadline,
    cores_needed,
    from_funnel,
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
    with pytest.raises(ConfigError, match="run_dir.*not a run directory.*no manifest.json.*corpus-lab run"):
        from_manifest(tmp_path)
    (tmp_path / "config.yaml").write_text("name: started\n")  # a run that has not finished: run state
    with pytest.raises(NotReadyError, match="run_dir.*has no manifest.json: its run has not finished.*resumes"):
        from_manifest(tmp_path)


# --- a real run's measured inputs


def _tokenized(run_dir: Path) -> bool:
    m = run_dir / "manifest.json"
    return m.is_file() and bool(f := read_json(m).get("funnel")) and "tokens_out" in f[-1]


@pytest.fixture(scope="module")
def run_dir(request) -> Path:
    """runs/sample when it exists and is tokenized; else the session's tokenized run of the synthetic
    sample (``tokens_run`` in conftest.py)."""
    if _tokenized(ROOT / "runs" / "sample"):
        return ROOT / "runs" / "sample"
    return Path(request.getfixturevalue("tokens_run").run_dir)


def test_from_manifest_measures_retention_bytes_per_token_and_costs(run_dir):
    m = read_json(run_dir / "manifest.json")
    funnel = m["funnel"]
    inp = from_manifest(run_dir)
    assert inp["stages"] == [f["stage"] for f in funnel]
    assert set(inp["retention"]) == {"docs", "bytes", "tokens"}
    first, last = funnel[0], funnel[-1]
    assert inp["raw_bytes"] == first["raw_bytes_in"] and inp["kept_bytes"] == last["bytes_out"]
    # the funnel counts text bytes: the records as read are larger (JSON keys, markup, unreadable records)
    assert inp["text_bytes"] == first["bytes_in"] < first["raw_bytes_in"]
    assert inp["raw_per_text_byte"] == pytest.approx(first["raw_bytes_in"] / first["bytes_in"], rel=1e-12)
    # retention product x what went in = what was kept, in every unit
    for unit in ("docs", "bytes", "tokens"):
        kept = retention_product(list(inp["retention"][unit].values())) * first[f"{unit}_in"]
        assert kept == pytest.approx(last[f"{unit}_out"], rel=1e-9), unit
    assert 0 < retention_product(inp["retention"]["bytes"]) < 1  # the sample's filters drop something
    assert inp["kept_tokens"] == last["tokens_out"] > 0
    assert inp["bytes_per_token"] == pytest.approx(last["bytes_out"] / last["tokens_out"], rel=1e-12)
    assert 1 < inp["bytes_per_token"] < 10  # a fitted BPE on mostly-English text
    # cost per raw byte x raw bytes = the stage's measured CPU seconds
    # the stages, then the steps after annotate (a run made before step_seconds has none)
    every = {**m["stage_cpu_seconds"], **{s: r["cpu_s"] for s, r in m.get("step_seconds", {}).items()}}
    assert set(inp["stage_cpu_seconds_per_byte"]) == set(every)
    for stage, sec in every.items():
        assert inp["stage_cpu_seconds_per_byte"][stage] * inp["raw_bytes"] == pytest.approx(sec, rel=1e-9)


def test_plan_on_the_runs_own_inputs_gives_back_the_run(run_dir):
    m = read_json(run_dir / "manifest.json")
    inp = from_manifest(run_dir)
    p = plan(inp["kept_tokens"], 54, 2048, retentions=inp["retention"]["bytes"], bytes_per_token=inp["bytes_per_token"],
             stage_cpu_seconds_per_byte=inp["stage_cpu_seconds_per_byte"], deadline_days=1,
             raw_per_text_byte=inp["raw_per_text_byte"])
    assert p["text_bytes"] == pytest.approx(m["funnel"][0]["bytes_in"], rel=1e-9)
    assert p["raw_bytes"] == pytest.approx(m["funnel"][0]["raw_bytes_in"], rel=1e-9)
    assert p["kept_bytes"] == pytest.approx(m["funnel"][-1]["bytes_out"], rel=1e-9)
    for row, f in zip(p["funnel"], m["funnel"], strict=True):
        assert row["stage"] == f["stage"]
        assert row["bytes_in"] == pytest.approx(f["bytes_in"], rel=1e-9)
        assert row["bytes_out"] == pytest.approx(f["bytes_out"], rel=1e-9)
    assert p["throughput"]["tokens_per_s"] == pytest.approx(inp["kept_tokens"] / (54 * 86400))
    # processing the run's own raw bytes costs the run's own CPU seconds
    every = sum(m["stage_cpu_seconds"].values()) + sum(r["cpu_s"] for r in m.get("step_seconds", {}).values())
    assert p["cores"]["cpu_seconds"] == pytest.approx(every, rel=1e-9)
    assert p["cores"]["cores"] == pytest.approx(p["cores"]["cpu_seconds"] / SECONDS_PER_DAY)


def test_plan_scales_the_run_to_a_pretraining_target(run_dir):
    inp = from_manifest(run_dir)
    kw = {"retentions": inp["retention"]["bytes"], "bytes_per_token": inp["bytes_per_token"],
          "stage_cpu_seconds_per_byte": inp["stage_cpu_seconds_per_byte"], "deadline_days": 14}
    small, big = plan(1e9, 54, 2048, **kw), plan(14.8e12, 54, 2048, **kw)
    assert big["raw_bytes"] / small["raw_bytes"] == pytest.approx(14.8e3)  # linear in the target
    assert big["cores"]["cores"] / small["cores"]["cores"] == pytest.approx(14.8e3)
    assert big["throughput"]["per_gpu"] == pytest.approx(1550, rel=0.01)


# --- the Planner fed by the session's funnel (issue 12)


def _funnel(stages, bytes_out, tokens_kept=None, raw=1000, docs_per_byte=0.01):
    """A funnel table shaped like lab.query.funnel's: each stage's bytes in/out (docs follow the bytes)."""
    rows, into = [], raw
    for stage, out in zip(stages, bytes_out):
        rows.append({"stage": stage, "docs_in": int(into * docs_per_byte), "docs_out": int(out * docs_per_byte),
                     "bytes_in": into, "bytes_out": out})
        into = out
    f = pl.DataFrame(rows)
    if tokens_kept is not None:  # tokens in proportion to bytes, ending at tokens_kept
        per = tokens_kept / bytes_out[-1]
        f = f.with_columns((pl.col("bytes_in") * per).round().cast(pl.Int64).alias("tokens_in"),
                           (pl.col("bytes_out") * per).round().cast(pl.Int64).alias("tokens_out"))
    return f.with_columns(*(pl.col(f"{u}_out").truediv(pl.col(f"{u}_in")).alias(f"{u}_retention")
                            for u in ("docs", "bytes", "tokens") if f"{u}_in" in f.columns))


STAGES4 = ["ingest", "language", "gopher_quality", "c4"]
MEASURED = {"run": "runs/x", "stage_cpu_seconds_per_byte": {"language": 2e-8, "gopher_quality": 8e-8}}


def test_from_funnel_takes_retention_and_bytes_per_token_from_the_funnel():
    # by hand: 1000 B raw; language keeps 800, gopher_quality 400, c4 360; 90 tokens kept -> 4 B/token
    base = from_funnel(_funnel(STAGES4, [1000, 800, 400, 360], tokens_kept=90), MEASURED)
    assert base["stages"] == STAGES4
    assert base["retention"]["bytes"] == {"ingest": 1.0, "language": 0.8, "gopher_quality": 0.5, "c4": 0.9}
    assert base["retention"]["docs"]["gopher_quality"] == 0.5 and set(base["retention"]) == {"docs", "bytes", "tokens"}
    assert (base["raw_bytes"], base["kept_bytes"], base["kept_tokens"], base["bytes_per_token"]) == (1000, 360, 90, 4.0)
    assert base["stage_cpu_seconds_per_byte"] == MEASURED["stage_cpu_seconds_per_byte"]  # the run's measured cost
    assert base["run"] == "runs/x"
    assert set(base) == {"run", "stages", "retention", "raw_bytes", "text_bytes", "raw_per_text_byte", "kept_bytes",
                         "kept_tokens", "bytes_per_token", "stage_cpu_seconds_per_byte"}  # from_manifest's structure
    # the rows as dicts (a manifest's funnel) give the same
    assert from_funnel(_funnel(STAGES4, [1000, 800, 400, 360], tokens_kept=90).to_dicts(), MEASURED) == base
    # before tokenization: no token retention, no bytes per token
    untok = from_funnel(_funnel(STAGES4, [1000, 800, 400, 360]), MEASURED)
    assert untok["kept_tokens"] is None and untok["bytes_per_token"] is None and "tokens" not in untok["retention"]


def _plan(inputs, target=1e9):
    return plan(target, 30, 64, retentions=inputs["retention"]["bytes"], bytes_per_token=inputs["bytes_per_token"],
                stage_cpu_seconds_per_byte=inputs["stage_cpu_seconds_per_byte"], deadline_days=7)


def test_disabling_a_stage_shrinks_the_raw_bytes_needed_by_its_retention():
    run = from_funnel(_funnel(STAGES4, [1000, 800, 400, 360], tokens_kept=90), MEASURED)
    # gopher_quality unticked: it keeps everything; c4 still keeps 0.9; 720 B kept, 180 tokens (4 B/token)
    session = from_funnel(_funnel(STAGES4, [1000, 800, 800, 720], tokens_kept=180), MEASURED)
    assert session["retention"]["bytes"]["gopher_quality"] == 1.0
    a, b = _plan(run), _plan(session)
    assert a["retention_product"] == pytest.approx(0.36) and b["retention_product"] == pytest.approx(0.72)
    assert a["raw_bytes"] == pytest.approx(1e9 * 4 / 0.36) and b["raw_bytes"] == pytest.approx(1e9 * 4 / 0.72)
    assert b["raw_bytes"] / a["raw_bytes"] == pytest.approx(0.5)  # by the stage's retention, by hand
    assert b["cores"]["cores"] / a["cores"]["cores"] == pytest.approx(0.5)  # same cost per raw byte, half the bytes
    diffs = compare(b, a)  # the session's plan against the run's
    assert [d.key for d in diffs] == ["retention_product", "raw_bytes", "cores", "retention.gopher_quality"]
    by = {d.key: d for d in diffs}
    assert (by["retention.gopher_quality"].base, by["retention.gopher_quality"].current) == (0.5, 1.0)
    assert str(by["retention_product"]) == "kept bytes 36.00% -> 72.00% of raw"
    assert str(by["raw_bytes"]) == "raw bytes needed 11.1 GB -> 5.56 GB (x0.5)"
    assert str(by["retention.gopher_quality"]) == "gopher_quality keeps 50.00% -> 100.00% of its bytes"
    assert compare(_plan(run), a) == []  # the same funnel: nothing to say


def test_bytes_per_token_of_the_kept_documents_enters_the_plan():
    run = from_funnel(_funnel(STAGES4, [1000, 800, 400, 360], tokens_kept=90), MEASURED)
    # the documents gopher_quality dropped tokenize worse: 720 B kept in 200 tokens = 3.6 B/token
    session = from_funnel(_funnel(STAGES4, [1000, 800, 800, 720], tokens_kept=200), MEASURED)
    assert session["bytes_per_token"] == 3.6
    a, b = _plan(run), _plan(session)
    assert b["raw_bytes"] / a["raw_bytes"] == pytest.approx(0.5 * 3.6 / 4)  # 0.45, by hand
    by = {d.key: d for d in compare(b, a)}
    assert (by["bytes_per_token"].base, by["bytes_per_token"].current) == (4.0, 3.6)
    assert str(by["bytes_per_token"]) == "bytes per token 4 -> 3.6"


@pytest.mark.parametrize("funnel, measured, match", [
    (pl.DataFrame(), MEASURED, "funnel is empty"),
    (_funnel(STAGES4, [1000, 800, 400, 360]).with_columns(pl.lit("en").alias("lang")), MEASURED,
     "funnel is split by 'lang': pass the ungrouped funnel"),
    (_funnel(STAGES4, [1000, 800, 400, 360]).drop("bytes_out"), MEASURED, "funnel has no column 'bytes_out'"),
    (_funnel(STAGES4, [1000, 800, 400, 360]), {"run": "x"}, "measured must be plan.from_manifest"),
])
def test_from_funnel_bad_input(funnel, measured, match):
    with pytest.raises(ConfigError, match=match):
        from_funnel(funnel, measured)


def test_compare_wants_two_plans_of_the_same_run():
    a = _plan(from_funnel(_funnel(STAGES4, [1000, 800, 400, 360], tokens_kept=90), MEASURED))
    b = _plan(from_funnel(_funnel(STAGES4[:3], [1000, 800, 400], tokens_kept=90), MEASURED))
    with pytest.raises(ConfigError, match="different stages"):
        compare(b, a)
    with pytest.raises(ConfigError, match="current must be a result of plan.plan"):
        compare({"retention": {}}, a)
    with pytest.raises(ConfigError, match="base must be a result of plan.plan"):
        compare(a, {"retention": {}})


def test_a_stage_that_keeps_nothing_is_a_clear_error_in_the_plan():
    session = from_funnel(_funnel(STAGES4, [1000, 800, 0, 0], tokens_kept=None), MEASURED)
    assert session["retention"]["bytes"]["gopher_quality"] == 0.0 and session["retention"]["bytes"]["c4"] == 1.0
    with pytest.raises(ConfigError, match=r"retentions\['gopher_quality'\] must be a fraction in \(0, 1\]"):
        plan(1e9, 30, 64, retentions=session["retention"]["bytes"], bytes_per_token=4,
             stage_cpu_seconds_per_byte={}, deadline_days=7)


def test_from_funnel_of_the_runs_config_is_the_manifests_and_follows_a_disabled_stage(run_dir):
    from lab import query
    from lab.select import knobs
    from lab.config import load

    measured = from_manifest(run_dir)
    base = load(run_dir / "config.yaml")
    same = from_funnel(query.funnel(run_dir, base), measured)
    assert same["retention"] == measured["retention"] and same["bytes_per_token"] == measured["bytes_per_token"]
    assert (same["raw_bytes"], same["kept_bytes"], same["kept_tokens"]) == (
        measured["raw_bytes"], measured["kept_bytes"], measured["kept_tokens"])
    assert compare(_plan(same), _plan(measured)) == []
    # untick a stage: the Planner follows (issue 12: it stayed at the run's retention)
    for stage in ("gopher_quality", "c4"):
        f = query.funnel(run_dir, knobs.apply(base, {f"{stage}.enabled": False}))
        session = from_funnel(f, measured)
        assert measured["retention"]["bytes"][stage] < 1 and session["retention"]["bytes"][stage] == 1.0
        assert retention_product(session["retention"]["bytes"]) == pytest.approx(f["bytes_out"][-1] / f["bytes_in"][0])
        assert session["bytes_per_token"] == pytest.approx(f["bytes_out"][-1] / f["tokens_out"][-1])
        assert session["stage_cpu_seconds_per_byte"] == measured["stage_cpu_seconds_per_byte"]
        a, b = _plan(measured), _plan(session)
        keys = [d.key for d in compare(b, a)]
        assert f"retention.{stage}" in keys
        # raw bytes needed scale as bytes per token over the retention product
        assert b["raw_bytes"] / a["raw_bytes"] == pytest.approx(
            (b["bytes_per_token"] / a["bytes_per_token"]) * (a["retention_product"] / b["retention_product"]))
    # on the synthetic sample, what gopher_quality drops later stages drop too; c4's drops are its own
    assert keys[:3] == ["retention_product", "bytes_per_token", "raw_bytes"] and b["raw_bytes"] < a["raw_bytes"]


def test_every_step_is_priced_from_the_manifest(tokens_run):
    """Issue 17: the manifest's step_seconds hold every step after annotate (CPU and wall seconds, tasks and
    driver), and the planner's per-byte costs include them beside the annotate stages."""
    from lab.plan import costs
    from lab.io.writers import read_json

    m = read_json(tokens_run.run_dir / "manifest.json")
    assert set(m["step_seconds"]) == set(costs.STEPS)
    for step, r in m["step_seconds"].items():
        assert r["cpu_s"] > 0 and r["wall_s"] > 0 and r["cpu_s"] >= r["driver_cpu_s"], step
    assert m["step_seconds"]["tokenize"]["tasks"] >= 1 and m["step_seconds"]["tokenizer_fit"]["tasks"] == 0
    measured = from_manifest(tokens_run.run_dir)
    raw = measured["raw_bytes"]
    for step in costs.STEPS:
        assert measured["stage_cpu_seconds_per_byte"][step] == pytest.approx(m["step_seconds"][step]["cpu_s"] / raw)
    assert "gopher_quality" in measured["stage_cpu_seconds_per_byte"]
