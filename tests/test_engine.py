"""The engine end to end on real Dask workers: exact funnel on the synthetic sample, conservation,
determinism across worker counts, resume after SIGKILL, explore == batch."""

import filecmp
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from lab import engine, query, sample
from lab.config import Config, EngineConfig, IngestConfig, InputConfig, TokenizerConfig, build
from lab.io.run import RunLayout

pytestmark = pytest.mark.cluster

INPROC = engine.INPROCESS  # tests whose point is not the cluster run their tasks in this process


@pytest.fixture(scope="session")
def synthetic(synthetic_src) -> Path:
    return synthetic_src


def config(src: Path, out: Path, name: str, workers: int = 1, **kw) -> Config:
    return Config(name=name, output_dir=str(out), inputs=(InputConfig(path=str(src)),),
                  engine=EngineConfig(n_workers=workers), **kw)


def outputs(run_dir: Path) -> list[str]:
    """Every file whose bytes must not depend on workers or resume: docs, signals, rejects, merged
    stats, and near dedup's signatures, LSH band records, candidate edges and clusters."""
    lay = RunLayout(run_dir)
    files = [str(p.relative_to(run_dir)) for kind in ("docs", "signals", "rejects")
             for p in sorted(getattr(lay, kind).glob("part-*.parquet"))]
    files += [str(p.relative_to(run_dir)) for sub in ("signatures", "bands", "edges")
              for p in sorted((lay.dedup / sub).glob("*-*.*"))]
    return files + ["stats/merged.json", "dedup/clusters.parquet"]


def assert_identical(a: Path, b: Path) -> None:
    fa, fb = outputs(a), outputs(b)
    assert fa == fb and len(fa) > 3
    match, mismatch, errors = filecmp.cmpfiles(a, b, fa, shallow=False)
    assert not mismatch and not errors, (mismatch, errors)


@pytest.fixture(scope="session")
def one_worker_run(synthetic_run_dir) -> Path:
    """The session's run of the synthetic sample under the default config (conftest.py; run in this
    process, which gives a LocalCluster's bytes: tests/test_cluster.py)."""
    return synthetic_run_dir


def test_synthetic_funnel_matches_labels(synthetic, one_worker_run):
    labels = sample.labels(synthetic.parent)
    cfg = config(synthetic, one_worker_run.parent, one_worker_run.name)
    f = query.funnel(one_worker_run, cfg)
    dropped = dict(zip(f["stage"], f["docs_dropped"]))
    expect = {}
    for lab_ in labels:
        expect[lab_["expect"]] = expect.get(lab_["expect"], 0) + 1
    # broken.jsonl: 2 readable documents, 2 rejects; truncated.jsonl.gz: 4 documents, then 1 reject
    assert dropped["ingest"] == 3
    for stage in ("extract", "language", "gopher_quality", "gopher_repetition", "c4", "fineweb", "exact_dedup"):
        assert dropped[stage] == expect.get(stage, 0), stage
    assert dropped["pii"] == 0
    assert f["docs_out"][-1] == expect["kept"] + 2 + 4
    assert f["docs_in"][0] == len(labels) + 4 + 5


def test_each_synthetic_document_is_dropped_by_its_labelled_stage(synthetic, one_worker_run):
    cfg = config(synthetic, one_worker_run.parent, one_worker_run.name)
    r = query.open_run(one_worker_run)
    reasons = dict(query.drop_reasons(r, cfg).iter_rows())
    ids = dict(r.cursor().execute("SELECT record_id, doc_id FROM docs WHERE record_id <> ''").fetchall())
    labels = sample.labels(synthetic.parent)
    got = {}
    for lab_ in labels:
        if not lab_["id"].startswith("page-"):
            why = reasons[ids[lab_["id"]]]
            got[lab_["id"]] = "kept" if why is None else why.split(".")[0]
    for label, stage in (("exact_dup", "exact_dedup"), ("near_dup", "near_dedup")):
        pairs = {lab_["id"]: lab_["dup_of"] for lab_ in labels if lab_["label"] == label}
        assert len(pairs) >= 20
        for copy, original in pairs.items():
            # the lowest doc_id of each pair survives: either the original or its copy
            assert sorted([got.pop(copy), got.pop(original)]) == sorted([stage, "kept"]), (copy, original)
    expect = {lab_["id"]: lab_["expect"] for lab_ in labels}
    assert {k: v for k, v in got.items() if v != expect[k]} == {}


def test_conservation_rejects_and_scrubbed_text(synthetic, one_worker_run):
    cfg = config(synthetic, one_worker_run.parent, one_worker_run.name)
    f = query.funnel(one_worker_run, cfg)
    assert f["docs_in"][0] == f["docs_out"][-1] + f["docs_dropped"].sum()
    assert f["bytes_in"][0] == f["bytes_out"][-1] + f["bytes_dropped"].sum()
    total_bytes = sum(p.stat().st_size for p in synthetic.iterdir() if p.name.endswith(".jsonl"))
    rej = query.reject_rows(one_worker_run)
    reasons = " | ".join(rej["reason"])
    assert rej.height == 3 and "JSON" in reasons and "'text'" in reasons and "gzip" in reasons
    r = query.open_run(one_worker_run)
    cur = r.cursor()
    # the plain JSONL files are fully accounted for, byte for byte
    plain = cur.execute("SELECT sum(raw_bytes) FROM signals WHERE source LIKE '%.jsonl'").fetchone()[0]
    plain += cur.execute("SELECT sum(raw_bytes) FROM rejects WHERE source LIKE '%.jsonl'").fetchone()[0]
    assert plain == total_bytes
    assert cur.execute("SELECT sum(decode_errors) FROM signals").fetchone()[0] == 2
    by_kind = cur.execute("SELECT source LIKE '%.warc.gz' AS page, encoding, encoding_source, count(*) FROM signals "
                          "GROUP BY ALL ORDER BY page").fetchall()
    assert [row[:3] for row in by_kind] == [(False, "utf-8", "default"), (True, "utf-8", "header")]
    assert by_kind[1][3] == 20  # the pages declare UTF-8 in their HTTP header; JSONL is UTF-8 by definition
    texts = [t for (t,) in cur.execute("SELECT d.text FROM docs d JOIN signals s USING (doc_id) WHERE s.pii_total > 0").fetchall()]
    assert len(texts) >= 20 and all("<EMAIL>" in t and "@example.org" not in t for t in texts)
    pages = cur.execute("SELECT count(*) FROM docs WHERE url LIKE 'https://example.org/articles/%'").fetchone()[0]
    assert pages == 20


def test_two_workers_byte_identical_to_one(synthetic, one_worker_run, tmp_path, local_cluster):
    # two worker processes (the session's LocalCluster) against one task at a time (in this process)
    cfg = config(synthetic, tmp_path, "two", workers=2, ingest=IngestConfig(partition_bytes=256 * 1024))
    one = config(synthetic, tmp_path, "one-split", workers=1, ingest=IngestConfig(partition_bytes=256 * 1024))
    engine.run(cfg, progress=False, client=local_cluster)
    engine.run(one, progress=False, client=INPROC)
    assert_identical(cfg.run_dir, one.run_dir)
    # the split run has the same documents and signals as the unsplit one
    a = query.signal_rows(cfg.run_dir)
    b = query.signal_rows(one_worker_run)
    assert a.equals(b)


def test_rerun_is_idempotent_and_reuses_partitions(synthetic, one_worker_run, tmp_path):
    run = tmp_path / one_worker_run.name
    shutil.copytree(one_worker_run, run)  # a copy of the shared run (its files keep their mtimes)
    before = {p: p.stat().st_mtime_ns for p in run.rglob("part-*.parquet")}
    m = engine.run(config(synthetic, tmp_path, one_worker_run.name), progress=False)
    assert m["last_run"]["partitions_run"] == 0 and m["last_run"]["partitions_reused"] == len(m["partitions"])
    assert m["last_run"]["steps"]["near_dedup"] == m["last_run"]["steps"]["materialize"] == "reused"
    assert before == {p: p.stat().st_mtime_ns for p in run.rglob("part-*.parquet")}


def test_an_input_rewritten_with_the_same_size_and_mtime_is_read_again(tmp_path):
    import json
    import random

    src = tmp_path / "in"
    src.mkdir()
    rng = random.Random(7)
    for k in range(3):
        (src / f"{k}.jsonl").write_text("".join(json.dumps({"id": f"{k}-{i}", "text": sample.english_doc(rng)}) + "\n"
                                                for i in range(10)))
    cfg = config(src, tmp_path / "runs", "same", ingest=IngestConfig(files_per_partition=1))  # a partition per file
    engine.run(cfg, progress=False, client=INPROC)
    f = src / "1.jsonl"
    st = f.stat()
    old = f.read_text()
    new = old.replace(" the ", " THE ", 1)  # same size, other bytes
    assert new != old and len(new) == len(old)
    f.write_text(new)
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert (f.stat().st_size, f.stat().st_mtime_ns) == (st.st_size, st.st_mtime_ns)
    m = engine.run(cfg, progress=False, client=INPROC)
    assert m["last_run"]["partitions_run"] == 1 and m["last_run"]["partitions_reused"] == 2
    texts = query.document_texts(cfg.run_dir, query.signal_rows(cfg.run_dir, ["doc_id"])["doc_id"].to_list())
    assert any(" THE " in t for t in texts.values())
    sha = {i["path"]: i["sha256"] for i in pq.read_table(cfg.run_dir / "inputs.parquet").to_pylist()}
    assert sha[str(f)] == __import__("hashlib").sha256(new.encode()).hexdigest()


def test_the_annotate_bar_moves_within_a_partition(tmp_path, capsys, local_cluster):
    # one partition of a few seconds' work: before, the bar sat at 0% until the whole partition was done
    import json
    import random
    import re

    rng = random.Random(11)
    src = tmp_path / "one.jsonl"
    src.write_text("".join(json.dumps({"id": str(i), "text": sample.english_doc(rng)}) + "\n" for i in range(1000)))
    cfg = config(src, tmp_path / "runs", "bar", tokenizer=TokenizerConfig(enabled=False))  # the annotate bar only
    engine.run(cfg, progress=True, client=local_cluster)  # the workers report their progress
    err = capsys.readouterr().err
    shown = [int(p) for p in re.findall(r"annotate:\s+(\d+)%", err)]
    assert shown and shown[-1] == 100, err[-2000:]
    assert any(0 < p < 100 for p in shown), shown  # reported while the partition was read


@pytest.mark.parametrize("module", ["lab.stages.gopher_quality", "lab.io.decoding"])
def test_a_stage_or_reader_version_bump_annotates_again(synthetic, tmp_path, monkeypatch, module):
    # a stage whose code or word list changed (its VERSION bumped), or readers that decode the same bytes
    # another way, make every stored signal stale: the rerun annotates every partition again, in the same
    # run directory, and gives the same outputs here
    import importlib

    bumped = importlib.import_module(module)
    cfg = config(synthetic, tmp_path, "bump", tokenizer=TokenizerConfig(enabled=False))  # the signals are the point
    first = engine.run(cfg, progress=False, client=INPROC)
    before = {str(p.relative_to(cfg.run_dir)): p.read_bytes() for p in Path(cfg.run_dir).glob("signals/part-*.parquet")}
    monkeypatch.setattr(bumped, "VERSION", bumped.VERSION + 1)
    m = engine.run(cfg, progress=False, client=INPROC)
    assert m["last_run"]["partitions_run"] == len(m["partitions"]) > 0 and m["signals_hash"] != first["signals_hash"]
    assert m["inputs_hash"] == first["inputs_hash"]
    after = {str(p.relative_to(cfg.run_dir)): p.read_bytes() for p in Path(cfg.run_dir).glob("signals/part-*.parquet")}
    assert after == before  # the same code under another version: the same signals
    again = engine.run(cfg, progress=False, client=INPROC)  # and now they are current
    assert again["last_run"]["partitions_run"] == 0


def test_batch_mode_keeps_the_same_documents(synthetic, one_worker_run, tmp_path):
    cfg = config(synthetic, tmp_path, "batch", mode="batch")
    engine.run(cfg, progress=False, client=INPROC)
    explore = dict(query.drop_reasons(one_worker_run, config(synthetic, tmp_path, "one")).iter_rows())
    batch = dict(query.drop_reasons(cfg.run_dir, cfg).iter_rows())
    assert batch == explore
    # batch stored the per-document reason and skipped the later stages' signals
    sig = query.signal_rows(cfg.run_dir, ["doc_id", "drop_reason", "content_hash"])
    stored = {d: r for d, r, _ in sig.iter_rows()}
    assert all(stored[d] == why for d, why in explore.items() if why and not why.startswith(("exact_dedup", "near_dedup")))
    assert sig.filter(sig["drop_reason"].is_not_null())["content_hash"].null_count() == sig["drop_reason"].is_not_null().sum()
    # only the survivors of the per-document rules are PII-scrubbed and tokenized: the others keep no text
    docs = pq.read_table(RunLayout(cfg.run_dir).docs, columns=["doc_id", "text"]).to_pydict()
    text = dict(zip(docs["doc_id"], docs["text"]))
    dropped = {d for d, r, _ in sig.iter_rows() if r is not None}
    assert dropped and all(text[d] is None for d in dropped)
    assert all(text[d] is not None for d in text if d not in dropped)
    tokenized = {d for f in RunLayout(cfg.run_dir).tokenized_dir.glob("part-*.parquet")
                 for d in pq.read_table(f, columns=["doc_id"])["doc_id"].to_pylist()}
    assert tokenized == set(text) - dropped
    # so the funnel does not know the tokens of the stages that dropped documents while annotating
    f = {r["stage"]: r for r in query.funnel(cfg.run_dir, cfg).iter_rows(named=True)}
    assert f["language"]["tokens_dropped"] is None and f["ingest"]["tokens_in"] is None
    kept_tokens = query.funnel(one_worker_run, config(synthetic, tmp_path, "one"))["tokens_out"][-1]
    assert f["pii"]["tokens_out"] is not None and f["exact_dedup"]["tokens_dropped"] is not None
    assert kept_tokens > 0 and f["pii"]["tokens_out"] > 0


def test_sigkill_mid_run_then_resume_is_byte_identical(synthetic, tmp_path):
    src = synthetic / "documents.jsonl"
    yaml = tmp_path / "kill.yaml"
    yaml.write_text(f"name: killed\noutput_dir: {tmp_path}\ninputs: [{{path: {src}}}]\n"
                    "ingest: {partition_bytes: 32768}\ntokenizer: {enabled: false}\nengine: {n_workers: 2}\n")
    cmd = [sys.executable, "-m", "lab.cli", "run", "--config", str(yaml), "--no-progress"]
    proc = subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    stats = tmp_path / "killed" / "stats"
    deadline = time.time() + 240
    while time.time() < deadline and len(list(stats.glob("part-*.json"))) < 10:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    done = len(list(stats.glob("part-*.json")))
    total = len(list(range(0, src.stat().st_size, 32768)))
    assert 0 < done < total, (done, total)
    r = subprocess.run([*cmd, "--in-process"], capture_output=True, text=True)  # the resume is the engine's
    assert r.returncode == 0, r.stderr
    assert f"{done} reused" in r.stdout or "reused" in r.stdout
    ref = build(Config, {"name": "ref", "output_dir": str(tmp_path), "inputs": [{"path": str(src)}],
                         "ingest": {"partition_bytes": 32768}, "tokenizer": {"enabled": False}, "engine": {"n_workers": 1}})
    engine.run(ref, progress=False, client=INPROC)
    assert_identical(tmp_path / "killed", ref.run_dir)


def test_nonexistent_input_is_a_clear_error(tmp_path):
    yaml = tmp_path / "c.yaml"
    yaml.write_text(f"inputs: [{{path: {tmp_path}/nope.jsonl}}]\noutput_dir: {tmp_path}\n")
    r = subprocess.run([sys.executable, "-m", "lab.cli", "run", "--config", str(yaml)], capture_output=True, text=True)
    assert r.returncode == 2 and "nope.jsonl" in r.stderr and "Traceback" not in r.stderr


def test_python_rules_equal_sql_on_every_sample_document(synthetic, one_worker_run):
    from lab.select.ruleset import ruleset
    from oracle import python_funnel

    cfg = config(synthetic, one_worker_run.parent, one_worker_run.name)
    rows = query.signal_rows(one_worker_run).to_dicts()
    sql = dict(query.drop_reasons(one_worker_run, cfg).iter_rows())
    e = query.edges(one_worker_run)
    assert len(e) >= 20  # the sample's near copies at least
    assert python_funnel(ruleset(cfg), rows, (e["u"].to_numpy(), e["v"].to_numpy(), e["jaccard"].to_numpy())) == sql
    for in_memory in (False, True):
        r = query.open_run(one_worker_run, in_memory=in_memory, refresh=True)
        assert dict(query.drop_reasons(r, cfg).iter_rows()) == sql


def test_batch_mode_with_per_language_thresholds_keeps_the_same_documents(synthetic, one_worker_run, tmp_path):
    # batch decides each stage's rules as soon as its signals exist: lang is known from the language stage on
    stages = build(Config, {"stages": {
        "language": {"keep": ["en", "de", "fr"], "by_lang": {"de": {"min_score": 0.9}}},
        "gopher_quality": {"by_lang": {"en": {"min_words": 120}, "de": {"min_words": 10, "min_stop_words": 0}}}}}).stages
    cfg = config(synthetic, tmp_path, "batch_lang", mode="batch", stages=stages, tokenizer=TokenizerConfig(enabled=False))
    engine.run(cfg, progress=False, client=INPROC)
    explore = dict(query.drop_reasons(one_worker_run, config(synthetic, tmp_path, "one", stages=stages)).iter_rows())
    assert dict(query.drop_reasons(cfg.run_dir, cfg).iter_rows()) == explore
    assert explore != dict(query.drop_reasons(one_worker_run, config(synthetic, tmp_path, "one")).iter_rows())


def test_python_rules_equal_sql_with_per_language_thresholds(synthetic, one_worker_run):
    # de and en moved different ways, fr only in one stage, ja absent from the sample: Python, SQL and the
    # in-memory codes still agree on every document, and the overrides change some outcomes
    from lab.select.ruleset import ruleset
    from oracle import python_funnel

    rows = query.signal_rows(one_worker_run).to_dicts()
    langs = {r["lang"] for r in rows}
    assert {"en", "de"} <= langs and "ja" not in langs
    base = {"language": {"keep": ["en", "de", "fr"], "min_score": 0.5}}
    over = {"language": {"by_lang": {"de": {"min_score": 0.9}}},
            "gopher_quality": {"by_lang": {"en": {"min_words": 120, "min_stop_words": 4},
                                           "de": {"min_words": 10, "min_stop_words": 0}, "ja": {"min_words": 5}}},
            "gopher_repetition": {"by_lang": {"en": {"max_dup_line_frac": 0.05}, "fr": {"max_top_2gram_char_frac": 0.5}}},
            "fineweb": {"by_lang": {"de": {"min_line_punct_ratio": 0.0}}}}
    stages = {k: {**base.get(k, {}), **over.get(k, {})} for k in {*base, *over}}
    cfg = config(synthetic, one_worker_run.parent, one_worker_run.name, stages=build(Config, {"stages": stages}).stages)
    plain = config(synthetic, one_worker_run.parent, one_worker_run.name, stages=build(Config, {"stages": base}).stages)
    e = query.edges(one_worker_run)
    edges = (e["u"].to_numpy(), e["v"].to_numpy(), e["jaccard"].to_numpy())
    sql = dict(query.drop_reasons(one_worker_run, cfg).iter_rows())
    assert python_funnel(ruleset(cfg), rows, edges) == sql
    assert sql != dict(query.drop_reasons(one_worker_run, plain).iter_rows())
    for in_memory in (False, True):
        r = query.open_run(one_worker_run, in_memory=in_memory, refresh=True)
        assert dict(query.drop_reasons(r, cfg).iter_rows()) == sql


def test_manifest_merges_partition_metrics(synthetic, one_worker_run):
    import json

    m = json.loads((one_worker_run / "manifest.json").read_text())
    cfg = config(synthetic, one_worker_run.parent, one_worker_run.name)
    reasons = {r: (d, b) for r, d, b in query.reason_counts(one_worker_run, cfg).iter_rows()}
    assert {r: tuple(v) for r, v in m["dropped"].items()} == reasons
    summed = {}
    for p in m["partitions"]:
        for r, (d, b) in p["dropped"].items():
            summed[r] = (summed.get(r, (0, 0))[0] + d, summed.get(r, (0, 0))[1] + b)
    assert summed == reasons
    assert [row["docs_dropped"] for row in m["funnel"]] == query.funnel(one_worker_run, cfg)["docs_dropped"].to_list()
    assert m["totals"]["docs"] + m["totals"]["rejected"] == m["funnel"][0]["docs_in"]
    assert set(m["stage_cpu_seconds"]) >= {"ingest", "language", "gopher_quality", "gopher_repetition"}
    assert all(p["status"] == "complete" for p in m["partitions"])
    listing = pq.read_table(one_worker_run / "inputs.parquet").to_pylist()
    assert {i["path"].rsplit("/", 1)[-1] for i in listing} == {"documents.jsonl", "broken.jsonl",
                                                               "truncated.jsonl.gz", "pages.warc.gz"}
    assert m["inputs"]["files"] == 4 and m["inputs"]["bytes"] == sum(i["bytes"] for i in listing)
    assert m["inputs"]["skipped"] == [] and m["inputs"]["summary"] == ""


def _jsonl(path: Path, n: int, start: int = 0) -> None:
    import json

    path.write_text("".join(json.dumps({"id": f"{path.stem}-{i}", "text": sample.english_doc(
        __import__("random").Random(i))}) + "\n" for i in range(start, start + n)))


def test_rerun_after_inputs_change_reads_exactly_the_new_inputs(tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    _jsonl(src / "b.jsonl", 10)
    _jsonl(src / "c.jsonl", 12)
    cfg = config(src, tmp_path / "runs", "changing")
    engine.run(cfg, progress=False, client=INPROC)
    _jsonl(src / "a.jsonl", 7)  # a new file sorts first: every partition index shifts
    _jsonl(src / "c.jsonl", 3, start=100)  # a file shrinks and changes
    m = engine.run(cfg, progress=False, client=INPROC)
    fresh = config(src, tmp_path / "runs", "fresh")
    engine.run(fresh, progress=False, client=INPROC)
    assert m["totals"]["docs"] == 20 and query.funnel(cfg.run_dir, cfg, refresh=True)["docs_in"][0] == 20
    assert_identical(cfg.run_dir, fresh.run_dir)


def test_batch_run_thresholds_are_part_of_its_signals(tmp_path, synthetic):
    cfg = config(synthetic, tmp_path, "batch", mode="batch")
    engine.run(cfg, progress=False, client=INPROC)
    loose = build(Config, {**__import__("lab.config", fromlist=["to_dict"]).to_dict(cfg),
                           "stages": {"gopher_quality": {"min_words": 10}}})
    assert loose.signals_hash() != cfg.signals_hash()
    with pytest.raises(Exception, match="batch run"):
        query.funnel(cfg.run_dir, loose)
    with pytest.raises(Exception, match="different inputs"):
        engine.run(loose, progress=False, client=INPROC)


def test_unreachable_scheduler_is_a_clear_error_and_writes_nothing(tmp_path):
    import socket

    with socket.socket() as s:  # a free port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (tmp_path / "in.jsonl").write_text('{"text": "x"}\n')
    yaml = tmp_path / "c.yaml"
    yaml.write_text(f"name: r\noutput_dir: {tmp_path}/runs\ninputs: [{{path: {tmp_path}/in.jsonl}}]\n"
                    "engine: {connect_timeout: 2}\n")  # the default 10 s, only shorter
    r = subprocess.run([sys.executable, "-m", "lab.cli", "run", "--config", str(yaml), "--scheduler",
                        f"tcp://127.0.0.1:{port}"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "cannot connect" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "runs").exists()


def test_mixed_formats_conserve_records_and_bytes(tmp_path, synthetic):
    import json
    import random
    import shutil as sh

    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = random.Random(5)
    src = tmp_path / "mixed"
    (src / "texts").mkdir(parents=True)
    (src / "a.jsonl").write_text("".join(json.dumps({"text": sample.english_doc(rng)}) + "\n" for _ in range(5))
                                 + '{"broken": \n')
    pq.write_table(pa.table({"text": [sample.english_doc(rng) for _ in range(4)] + [None]}), src / "b.parquet")
    for i in range(3):
        (src / "texts" / f"{i}.txt").write_text(sample.english_doc(rng))
    (src / "texts" / "blob.bin").write_bytes(bytes(range(256)) * 8)
    sh.copy(synthetic / "pages.warc.gz", src / "pages.warc.gz")
    cfg = config(src, tmp_path / "runs", "mixed")
    m = engine.run(cfg, progress=False, client=INPROC)
    f = query.funnel(cfg.run_dir, cfg)
    rej = query.reject_rows(cfg.run_dir)
    # 5 + 4 + 3 + 20 documents; rejects: the broken JSON line, the null Parquet text, the binary file
    assert m["totals"]["docs"] == 32 and rej.height == 3, rej["reason"].to_list()
    assert f["docs_in"][0] == 35 == f["docs_out"][-1] + f["docs_dropped"].sum()
    assert f["bytes_in"][0] == f["bytes_out"][-1] + f["bytes_dropped"].sum()
    text_bytes = sum(p.stat().st_size for p in (src / "texts").iterdir())
    cur = query.open_run(cfg.run_dir).cursor()
    got = cur.execute("SELECT sum(bytes) FROM signals WHERE source LIKE 'texts/%'").fetchone()[0]
    got += cur.execute("SELECT sum(raw_bytes) FROM rejects WHERE source LIKE 'texts/%'").fetchone()[0]
    assert got == text_bytes
    assert any("binary" in r for r in rej["reason"])


def test_a_small_input_runs_in_this_process_unless_workers_are_asked_for(synthetic, tmp_path):
    """Issue 17: no cluster to start for a small input (``engine.inprocess_bytes``); the same bytes as on a
    cluster (test_cluster), and a cluster as soon as n_workers (or a scheduler) is given."""
    import dataclasses

    from lab.config import EngineConfig

    cfg = dataclasses.replace(config(synthetic, tmp_path, "small"), engine=EngineConfig())
    m = engine.run(cfg, progress=False)
    assert m["last_run"]["steps"]["executor"] == "inprocess"
    assert not engine.in_process(dataclasses.replace(cfg, engine=EngineConfig(n_workers=1)), 1)
    assert not engine.in_process(dataclasses.replace(cfg, engine=EngineConfig(inprocess_bytes=0)), 1)
    assert not engine.in_process(cfg, cfg.engine.inprocess_bytes + 1)


def test_the_default_worker_count_follows_the_cpu_affinity():
    import os

    from lab import engine

    if not hasattr(os, "sched_setaffinity"):
        pytest.skip("no CPU affinity on this platform")
    before = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, {min(before)})
        assert engine.usable_cores() == 1
    finally:
        os.sched_setaffinity(0, before)
    assert engine.usable_cores() == len(before)


@pytest.mark.parametrize("mode", ["explore", "batch"])
def test_chunks_of_documents_give_what_one_document_at_a_time_gives(synthetic, mode, monkeypatch):
    """annotate hands each stage a chunk of documents; the rows and stored texts are those of one at a time."""
    import json

    from lab import annotate
    from lab.doc import Doc

    lines = (synthetic / "documents.jsonl").read_text().splitlines()[:150]
    docs = [Doc("documents.jsonl", i, json.loads(line)["text"], len(line)) for i, line in enumerate(lines)]
    cfg = build(Config, {"mode": mode})
    batch_rules = None
    if mode == "batch":
        from lab.select.ruleset import ruleset

        batch_rules = {}
        for r in ruleset(cfg):
            if r.per_document:
                batch_rules.setdefault(r.stage, []).append(r)

    def run(chunk: int) -> list:
        from lab.stages import pii
        from lab.text import langid, segment
        from lab.text import words as text

        langid._DETECTED.clear()  # nothing remembered from another run of the same texts
        pii._FOUND, text._RECENT, segment._RECENT = text.Recent(), text.Recent(), text.Recent()
        collectors = annotate.new_collectors(cfg, 2)
        out = []
        for i in range(0, len(docs), chunk):
            out += annotate.annotate_docs(docs[i:i + chunk], cfg, batch_rules, {}, collectors, i)
        return out

    one, chunked = run(1), run(annotate.CHUNK_DOCS)
    assert chunked == one
    assert sum(text is None for _, text in one) == (0 if mode == "explore" else sum(
        row["drop_reason"] is not None for row, _ in one))
