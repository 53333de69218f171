"""Labels: the append-only files in the run, their validation, concurrent writers and readers, bad
files, compaction, per-stage precision with Wilson intervals, the CLI export, and reruns.

Every test that writes labels works on its own copy of the shared synthetic run (funnel of the
synthetic sample: extract 5, language 30, gopher_quality 20, gopher_repetition 20, c4 20, fineweb 20,
exact_dedup 30, near_dedup 20, pii 0 documents dropped; 296 kept)."""

import dataclasses
import datetime as dt
import json
import multiprocessing as mp
import random
import shutil
import time
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lab import cli, query

from lab.quality import labels
from lab.config import load
from lab.errors import ConfigError, RunStateError
from lab.io import labels as label_io
from lab.io.run import RunLayout
from lab.stages import STAGE_NAMES
from lab.stats import wilson

T0 = dt.datetime(2025, 3, 1, 12, 0, tzinfo=dt.timezone.utc)


@pytest.fixture
def run(synthetic_run_dir, tmp_path) -> Path:
    """A private copy of the synthetic run (others read the shared one)."""
    dst = tmp_path / "run"
    shutil.copytree(synthetic_run_dir, dst)
    return dst


@pytest.fixture
def by_stage(run) -> dict[str, list[int]]:
    """stage (or "kept") -> the doc ids the run's own config gives it, by doc_id."""
    reasons = query.drop_reasons(run, load(run / "config.yaml"))
    out: dict[str, list[int]] = {}
    for doc_id, reason in reasons.iter_rows():
        out.setdefault(reason.split(".")[0] if reason else "kept", []).append(doc_id)
    return out


def at(minutes: float) -> dt.datetime:
    return T0 + dt.timedelta(minutes=minutes)


def test_round_trip_and_latest(run, by_stage):
    a, b, c = by_stage["kept"][:3]
    row = labels.add(run, a, "good", user="alice", note="fine prose", time=at(1))
    assert row == {"doc_id": a, "label": "good", "user": "alice", "time": at(1), "note": "fine prose"}
    labels.add(run, a, "bad", user="bob", time=at(5))  # a later judgement of the same document
    labels.add_many(run, [{"doc_id": str(b), "label": "bad", "time": at(3)},  # ids shown as text are accepted
                          {"doc_id": c, "label": "good", "time": at(3), "user": "carol", "note": "x"}], user=" dave ")
    labels.add(run, c, "bad", user="alice", time=at(3))  # same time as carol's: the last by user wins
    files = sorted(p.name for p in RunLayout(run).labels.iterdir())
    assert len(files) == 4 and all(f.startswith("part-") and f.endswith(".parquet") for f in files)
    assert pq.read_schema(RunLayout(run).labels / files[0]).remove_metadata() == label_io.SCHEMA

    got = query.labels(run)
    assert got.schema == pl.Schema({"doc_id": pl.Int64, "label": pl.Utf8, "user": pl.Utf8,
                                    "time": pl.Datetime("us", "UTC"), "note": pl.Utf8})
    assert got.rows() == sorted([(a, "good", "alice", at(1), "fine prose"), (a, "bad", "bob", at(5), ""),
                                 (b, "bad", "dave", at(3), ""), (c, "good", "carol", at(3), "x"),
                                 (c, "bad", "alice", at(3), "")], key=lambda r: (r[3], r[0], r[2]))
    latest = query.labels(run, latest=True)
    assert dict(zip(latest["doc_id"], zip(latest["label"], latest["user"]))) == {
        a: ("bad", "bob"), b: ("bad", "dave"), c: ("good", "carol")}
    assert latest["time"].is_sorted()
    assert query.label_problems(run) == []


def test_no_labels_yet(run):
    assert query.labels(run).height == 0
    assert query.labels(run, latest=True).columns == ["doc_id", "label", "user", "time", "note"]
    assert query.label_problems(run) == []
    sp = query.stage_precision(run, load(run / "config.yaml"))
    assert sp["labelled"].sum() == 0 and sp["precision"].null_count() == sp.height


@pytest.mark.parametrize("kwargs, words", [
    ({"doc_id": 12345, "label": "good", "user": "alice"}, ["12345", "not in the run"]),
    ({"doc_id": None, "label": "meh", "user": "alice"}, ["'meh'", "good, bad"]),
    ({"doc_id": None, "label": "good", "user": ""}, ["user ''", "--basic-auth"]),
    ({"doc_id": None, "label": "good", "user": "   "}, ["user '   '"]),
    ({"doc_id": 1.5, "label": "good", "user": "alice"}, ["doc_id 1.5", "64-bit integer"]),
    ({"doc_id": True, "label": "good", "user": "alice"}, ["doc_id True"]),
    ({"doc_id": None, "label": "good", "user": "alice", "time": dt.datetime(2025, 1, 1)}, ["timezone-aware"]),
])
def test_bad_input_is_a_clear_error_and_writes_nothing(run, by_stage, kwargs, words):
    kwargs = {**kwargs, "doc_id": by_stage["kept"][0] if kwargs["doc_id"] is None else kwargs["doc_id"]}
    with pytest.raises(ConfigError) as e:
        labels.add(run, kwargs.pop("doc_id"), kwargs.pop("label"), **kwargs)
    for w in words:
        assert w in str(e.value)
    assert not label_io.label_files(RunLayout(run))


def test_a_batch_with_one_bad_row_writes_nothing(run, by_stage):
    rows = [{"doc_id": d, "label": "good"} for d in by_stage["kept"][:3]] + [{"doc_id": 7, "label": "good"}]
    with pytest.raises(ConfigError, match="doc_id 7 is not in the run"):
        labels.add_many(run, rows, user="alice")
    with pytest.raises(ConfigError, match="label row 1: unknown key"):
        labels.add_many(run, [rows[0], {**rows[1], "score": 1}], user="alice")
    assert query.labels(run).height == 0


def test_unknown_doc_ids_is_an_anti_join(run, by_stage):
    known = by_stage["kept"][:2] + by_stage["language"][:1]
    assert query.unknown_doc_ids(run, [5, known[0], 5, -1, *known[1:]]) == [5, -1]
    assert query.unknown_doc_ids(query.open_run(run, in_memory=True), known) == []


# --- many writers at once -------------------------------------------------------------------------


def _label_worker(run_dir: str, i: int, ids: list[int], barrier) -> None:
    """Process i: 25 labels (doc ids overlapping other processes'), one file each; every 5th, read the
    labels back and check its own are all there exactly once and no file is reported broken."""
    from lab import query
    from lab.quality import labels

    barrier.wait()
    for k in range(25):
        labels.add(run_dir, ids[(7 * i + k) % len(ids)], "good" if (i + k) % 2 else "bad", user=f"user{i}",
                   note=f"{i}-{k}")
        if k % 5 == 4:
            mine = query.labels(run_dir).filter(pl.col("user") == f"user{i}")["note"].to_list()
            assert sorted(mine) == sorted(f"{i}-{j}" for j in range(k + 1)), (i, k, mine)
            assert query.label_problems(run_dir) == []


def test_eight_processes_labelling_at_once_lose_nothing(run, by_stage):
    """8 processes x 25 labels on 60 documents while this process reads and compacts in a loop."""
    ids = by_stage["kept"][:40] + by_stage["gopher_quality"][:20]
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(8)
    procs = [ctx.Process(target=_label_worker, args=(str(run), i, ids, barrier)) for i in range(8)]
    for p in procs:
        p.start()
    compactions, seen = 0, 0
    while any(p.is_alive() for p in procs):
        df = query.labels(run)
        assert df.height >= seen and df.select("user", "note").is_unique().all()  # never a duplicate or a loss
        seen = df.height
        assert query.label_problems(run) == []
        compactions += labels.compact(run)["merged"] > 0
        time.sleep(0.05)
    for p in procs:
        p.join()
        assert p.exitcode == 0
    df = query.labels(run)
    assert sorted(zip(df["user"], df["note"])) == sorted((f"user{i}", f"{i}-{k}") for i in range(8) for k in range(25))
    assert df["doc_id"].n_unique() == 60
    assert compactions >= 1


# --- bad files --------------------------------------------------------------------------------------


def test_corrupt_and_half_written_files_are_skipped_and_named(run, by_stage):
    kept = by_stage["kept"]
    labels.add(run, kept[0], "good", user="alice", time=at(1))
    labels.add_many(run, [{"doc_id": d, "label": "bad", "time": at(2)} for d in kept[1:4]], user="bob")
    d = RunLayout(run).labels
    real = max(d.iterdir()).read_bytes()  # the 3-label file
    (d / "part-truncated.parquet").write_bytes(real[: len(real) // 2])
    (d / "part-garbage.parquet").write_bytes(b"this is not parquet at all \x00\xff" * 10)
    pq.write_table(pa.table({"doc_id": [1.5], "label": ["good"]}), d / "part-wrong-schema.parquet")
    rows = pa.table({"doc_id": [kept[4], kept[5], None], "label": ["good", "maybe", "bad"], "user": ["eve"] * 3,
                     "time": pa.array([at(3)] * 3, pa.timestamp("us", tz="UTC")), "note": [None, "", ""]})
    pq.write_table(rows, d / "part-some-bad-rows.parquet")
    (d / ".tmp-0123-part-x.parquet").write_bytes(real[:10])  # a writer still at work: not a label file yet

    got = query.labels(run)
    assert sorted(got["doc_id"]) == sorted(kept[:5])  # every good label, and the good row of the mixed file
    assert got.filter(pl.col("user") == "eve")["note"].to_list() == [""]
    problems = query.label_problems(run)
    assert len(problems) == 4
    why = {p.split(":")[0]: p for p in problems}
    assert set(why) == {f"labels/part-{n}.parquet" for n in ("truncated", "garbage", "wrong-schema", "some-bad-rows")}
    assert "not a readable Parquet file" in why["labels/part-garbage.parquet"]
    assert "not a readable Parquet file" in why["labels/part-truncated.parquet"]
    assert "wrong schema: doc_id double, label string" in why["labels/part-wrong-schema.parquet"]
    assert "2 of 3 rows skipped" in why["labels/part-some-bad-rows.parquet"]
    assert query.stage_precision(run, load(run / "config.yaml")).filter(pl.col("stage") == "kept")["labelled"][0] == 5

    # a problem file copied in again complete is read again
    (d / "part-truncated.parquet").write_bytes(real)
    assert query.labels(run).height == got.height + 3
    assert len(query.label_problems(run)) == 3


def test_compact_merges_readable_files_only_and_keeps_every_label(run, by_stage, monkeypatch):
    kept = by_stage["kept"]
    for i, doc in enumerate(kept[:12]):
        labels.add(run, doc, "good", user="alice", time=at(i))
    d = RunLayout(run).labels
    originals = label_io.label_files(RunLayout(run))
    (d / "part-garbage.parquet").write_bytes(b"garbage")
    before = query.labels(run)
    out = labels.compact(run)
    assert out["merged"] == 12 and out["labels"] == 12
    assert label_io.label_files(RunLayout(run)) == sorted([out["file"], "part-garbage.parquet"])
    assert label_io.merged_from(d / out["file"]) == originals
    assert query.labels(run).equals(before)
    problems = query.label_problems(run)
    assert len(problems) == 1 and problems[0].startswith("labels/part-garbage.parquet: not a readable Parquet file")
    assert labels.compact(run)["merged"] == 0  # one readable file: nothing to merge

    # a merged file whose sources are still there (a compaction that died before removing them)
    src = d / "part-leftover.parquet"
    label_io.write_labels(RunLayout(run), pa.table({"doc_id": [kept[20]], "label": ["bad"], "user": ["zed"],
                                                     "time": pa.array([at(30)], pa.timestamp("us", tz="UTC")),
                                                     "note": [""]})).rename(src)
    merged = label_io.write_merged(RunLayout(run), pq.read_table(src), [src.name])
    assert query.labels(run).height == 13  # counted once
    labels.compact(run)
    assert not src.exists() and query.labels(run).height == 13
    assert not merged.exists()  # merged again with the first merged file

    with label_io.compaction_lock(RunLayout(run)) as taken:
        assert taken
        with pytest.raises(RunStateError, match="another process is compacting"):  # busy, not bad input
            labels.compact(run)

    monkeypatch.setattr(labels, "COMPACT_AT", 6)  # add() compacts once enough files pile up
    for i, doc in enumerate(kept[30:36]):
        labels.add(run, doc, "bad", user="bob", time=at(40 + i))
    # the 4th add found 6 files and merged 5 (not the garbage); then 2 more: 4 files
    assert len(label_io.label_files(RunLayout(run))) == 4
    assert query.labels(run).height == 19 and len(query.label_problems(run)) == 1


# --- precision ----------------------------------------------------------------------------------------


def test_stage_precision_by_hand(run, by_stage):
    cfg = load(run / "config.yaml")
    gq, c4, ex, kept = by_stage["gopher_quality"], by_stage["c4"], by_stage["exact_dedup"], by_stage["kept"]
    labels.add(run, gq[0], "good", user="alice", time=at(1))
    labels.add(run, gq[0], "bad", user="bob", time=at(2))  # changed: counts as bad
    labels.add_many(run, [{"doc_id": gq[1], "label": "bad"}, {"doc_id": gq[2], "label": "bad"},
                          {"doc_id": gq[3], "label": "good", "note": "a short poem"},
                          {"doc_id": c4[0], "label": "good"}, {"doc_id": ex[0], "label": "bad"},
                          {"doc_id": kept[0], "label": "good"}, {"doc_id": kept[1], "label": "good"},
                          {"doc_id": kept[2], "label": "bad"}], user="alice")
    # a label of a document that is not in this run (left from another run): not counted
    label_io.write_labels(RunLayout(run), pa.table({"doc_id": [42], "label": ["bad"], "user": ["old"],
                                                     "time": pa.array([at(0)], pa.timestamp("us", tz="UTC")),
                                                     "note": [""]}))
    sp = query.stage_precision(run, cfg)
    assert sp["stage"].to_list() == [*STAGE_NAMES, "kept"]
    assert dict(zip(sp["stage"], sp["dropped_docs"])) == {
        "url": 0, "extract": 5, "language": 30, "gopher_quality": 20, "gopher_repetition": 20, "c4": 20, "fineweb": 20,
        "boilerplate": 0, "decontamination": 0, "quality_model": 0, "exact_dedup": 30, "near_dedup": 20, "pii": 0,
        "kept": 296}
    rows = {r["stage"]: r for r in sp.iter_rows(named=True)}
    g = rows["gopher_quality"]
    assert (g["labelled"], g["labelled_bad"], g["labelled_good"], g["precision"]) == (4, 3, 1, 0.75)
    # Wilson 95% for 3 of 4, by hand: centre (0.75 + 0.4802) / 1.9604 = 0.62753,
    # half 1.96 * sqrt(0.046875 + 0.060025) / 1.9604 = 0.32689
    assert g["ci_low"] == pytest.approx(0.30064, abs=1e-4) and g["ci_high"] == pytest.approx(0.95442, abs=1e-4)
    c = rows["c4"]
    assert (c["labelled"], c["labelled_bad"], c["precision"]) == (1, 0, 0.0)
    assert (c["ci_low"], c["ci_high"]) == (0.0, pytest.approx(3.8416 / 4.8416))  # 0 of 1: z^2 / (1 + z^2)
    assert (rows["exact_dedup"]["precision"], rows["exact_dedup"]["ci_high"]) == (1.0, 1.0)
    k = rows["kept"]  # 2 of 3 kept documents labelled good
    assert (k["labelled"], k["labelled_good"], k["precision"]) == (3, 2, pytest.approx(2 / 3))
    assert k["ci_low"] == pytest.approx(0.20765, abs=1e-4) and k["ci_high"] == pytest.approx(0.93851, abs=1e-4)
    for stage in ("language", "near_dedup", "pii"):
        assert rows[stage]["labelled"] == 0 and rows[stage]["precision"] is None and rows[stage]["ci_low"] is None
    assert (g["ci_low"], g["ci_high"]) == pytest.approx(wilson(3, 4))

    # under other thresholds the same labels move: gopher_quality off -> its drops go to later stages or kept
    off = dataclasses.replace(cfg, stages=dataclasses.replace(
        cfg.stages, gopher_quality=dataclasses.replace(cfg.stages.gopher_quality, enabled=False)))
    sp_off = query.stage_precision(run, off)
    assert sp_off.filter(pl.col("stage") == "gopher_quality")["labelled"][0] == 0
    assert sp_off["labelled"].sum() == sp["labelled"].sum() == 9


def test_labelled_drops(run, by_stage):
    cfg = load(run / "config.yaml")
    gq, kept = by_stage["gopher_quality"], by_stage["kept"]
    labels.add(run, gq[0], "good", user="alice", note="a short poem", time=at(2))
    labels.add(run, gq[1], "good", user="alice", time=at(1))
    labels.add(run, gq[1], "bad", user="bob", time=at(3))  # no longer labelled good
    labels.add(run, gq[2], "bad", user="bob", time=at(4))
    labels.add(run, kept[0], "bad", user="carol", time=at(5))
    good = query.labelled_drops(run, cfg, "gopher_quality")
    assert good.columns == ["doc_id", "reason", "label", "user", "time", "note"]
    reason = dict(query.drop_reasons(run, cfg).iter_rows())[gq[0]]
    assert reason.startswith("gopher_quality.")
    assert good.rows() == [(gq[0], reason, "good", "alice", at(2), "a short poem")]
    assert query.labelled_drops(run, cfg, "gopher_quality", label="bad")["doc_id"].to_list() == [gq[1], gq[2]]
    assert query.labelled_drops(run, cfg, "kept", label="bad").select("doc_id", "reason").rows() == [(kept[0], None)]
    assert query.labelled_drops(run, cfg, "c4").height == 0
    with pytest.raises(ConfigError, match="unknown stage 'gopher'"):
        query.labelled_drops(run, cfg, "gopher")
    with pytest.raises(ConfigError, match="label='ok' is not allowed"):
        query.labelled_drops(run, cfg, "c4", label="ok")


@pytest.mark.parametrize("in_memory", [False, True])
def test_precision_equals_the_full_evaluation(run, by_stage, in_memory):
    """Only the labelled documents (and their exact-duplicate groups) are evaluated: the stage of each
    must equal the one every document's evaluation gives, also with exact dedup off (near dedup then
    takes the exact copies)."""
    rng = random.Random(7)
    all_ids = [d for ids in by_stage.values() for d in ids]
    labels.add_many(run, [{"doc_id": d, "label": rng.choice(["good", "bad"])} for d in rng.sample(all_ids, 200)],
                    user="alice")
    cfg = load(run / "config.yaml")
    no_exact = dataclasses.replace(cfg, stages=dataclasses.replace(
        cfg.stages, exact_dedup=dataclasses.replace(cfg.stages.exact_dedup, enabled=False)))
    r = query.open_run(run, in_memory=in_memory)
    latest = query.labels(r, latest=True)
    for c in (cfg, no_exact):
        full = (query.drop_reasons(r, c).join(latest, on="doc_id")
                .with_columns(stage=pl.col("reason").str.split(".").list.first().fill_null("kept"))
                .group_by("stage").agg(bad=(pl.col("label") == "bad").sum(), good=(pl.col("label") == "good").sum()))
        expect = {s: (b, g) for s, b, g in full.iter_rows()}
        got = {s: (b, g) for s, b, g in query.stage_precision(r, c).select("stage", "labelled_bad", "labelled_good")
               .iter_rows() if b or g}
        assert got == expect
        assert "exact_dedup" in expect or c is no_exact


# --- the command line ---------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".parquet", ".csv", ".jsonl"])
def test_cli_prints_precision_and_exports(run, by_stage, tmp_path, capsys, suffix):
    gq = by_stage["gopher_quality"]
    labels.add(run, gq[0], "bad", user="alice", note='has, "quotes"\nand a newline', time=at(1))
    labels.add(run, gq[1], "good", user="bob", time=at(2))
    out = tmp_path / f"labels{suffix}"
    assert cli.main(["labels", str(run), "--export", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"wrote 2 labels to {out}" in printed
    line = next(x for x in printed.splitlines() if "gopher_quality" in x)
    assert " 0.500 " in line and " 0.095 " in line and " 0.905 " in line  # 1 of 2: Wilson 0.0945 .. 0.9055
    back = label_io.read_export(out)
    assert back.equals(query.labels(run))


def test_cli_rejects_an_unknown_export_format_and_says_when_there_are_no_labels(run, tmp_path, capsys):
    assert cli.main(["labels", str(run), "--export", str(tmp_path / "labels.xlsx")]) == 2
    err = capsys.readouterr().err
    assert "'.xlsx' is not one of .parquet, .csv, .jsonl" in err
    assert not (tmp_path / "labels.xlsx").exists()
    assert cli.main(["labels", str(run)]) == 0
    assert "no labels in" in capsys.readouterr().out


# --- reruns ---------------------------------------------------------------------------------------------


def test_clear_run_keeps_labels(tmp_path):
    lay = RunLayout(tmp_path / "r")
    for p in (lay.signals / "part-0.parquet", lay.labels / "part-1.parquet", lay.manifest):
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("x")
    label_io.clear_run(lay)
    assert [p.name for p in lay.root.iterdir()] == ["labels"] and (lay.labels / "part-1.parquet").exists()


def test_labels_survive_reruns(tmp_path):
    """A run, labels, the same run again, then --overwrite with other signals (mode: batch): the
    labels stay, byte for byte, and still name the run's documents."""
    from lab import engine, sample
    from lab.config import Config, EngineConfig, InputConfig

    rng = random.Random(3)
    docs = [{"id": str(i), "text": sample.english_doc(rng)} for i in range(8)] + [{"id": "s", "text": "Too short."}]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    cfg = Config(name="t", output_dir=str(tmp_path / "runs"), inputs=(InputConfig(path=str(tmp_path / "in.jsonl")),),
                 engine=EngineConfig(n_workers=1))
    engine.run(cfg, progress=False, client=engine.INPROCESS)
    ids = query.drop_reasons(cfg.run_dir, cfg)["doc_id"].to_list()
    labels.add(cfg.run_dir, ids[0], "good", user="alice", time=at(1))
    labels.add(cfg.run_dir, ids[-1], "bad", user="bob", note="short", time=at(2))
    files = {p.name: p.read_bytes() for p in RunLayout(cfg.run_dir).labels.iterdir()}
    before = query.labels(cfg.run_dir)

    engine.run(cfg, progress=False, client=engine.INPROCESS)  # the same run again: reused
    batch = dataclasses.replace(cfg, mode="batch")
    with pytest.raises(ConfigError, match="pass --overwrite"):
        engine.run(batch, progress=False, client=engine.INPROCESS)
    engine.run(batch, progress=False, overwrite=True, client=engine.INPROCESS)  # other signals: the run is rebuilt
    assert {p.name: p.read_bytes() for p in RunLayout(cfg.run_dir).labels.iterdir()} == files
    assert query.labels(cfg.run_dir).equals(before)
    assert query.unknown_doc_ids(cfg.run_dir, ids) == []
    sp = query.stage_precision(query.open_run(cfg.run_dir, refresh=True), batch)
    assert sp["labelled"].sum() == 2
