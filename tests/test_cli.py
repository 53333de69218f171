"""The command line on a tiny corpus: run, funnel again under other thresholds, clear errors.

``corpus_lab`` (tests/conftest.py) runs a command in this process (``lab.cli.main``: its parsing, its
output and its exit status, as ``corpus-lab`` gives them; a process each would cost a second of start-up
and imports); the tests of what needs a process of its own (Ctrl-C, two runs at once, an unwritable
directory on a LocalCluster) start one (``process``).
"""

import json
import subprocess
import sys

import pytest

from lab import query, sample

pytestmark = pytest.mark.cluster


def process(*args) -> subprocess.CompletedProcess:
    """``corpus-lab ARGS`` as a process of its own."""
    return subprocess.run([sys.executable, "-m", "lab.cli", *args], capture_output=True, text=True)


def test_run_then_funnel_with_other_thresholds(tmp_path, corpus_lab):
    import random

    rng = random.Random(1)
    docs = [{"id": str(i), "text": sample.english_doc(rng)} for i in range(11)]
    docs.append({"id": "copy", "text": docs[0]["text"].replace(" the ", " a ", 1)})  # a near duplicate of "0"
    docs += [{"id": "short", "text": "Too short to keep."}, {"id": "pretty", "text": ["not", "a", "string"]}]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs) + "[\n")
    (tmp_path / "c.yaml").write_text(f"name: t\noutput_dir: {tmp_path}/runs\ninputs: [{{path: {tmp_path}/in.jsonl}}]\n"
                                     "engine: {n_workers: 1}\n")
    r = corpus_lab("run", "--config", str(tmp_path / "c.yaml"), "--no-progress", "--in-process")
    assert r.returncode == 0, r.stderr
    assert "13 documents, 2 rejected records" in r.stdout and "gopher_quality" in r.stdout
    # the expected pair recall at the near-dup threshold follows the funnel; 0.92 at 0.8 needs no warning
    assert "near_dedup: expected pair recall 0.92 at Jaccard 0.80 (14 bands x 8 rows" in r.stdout
    assert "expected pair recall" not in r.stderr
    reasons = sorted(query.reject_rows(tmp_path / "runs" / "t")["reason"])
    assert len(reasons) == 2
    assert any("field 'text' is a list, not a string" in x for x in reasons)
    assert any("looks like a JSON array or pretty-printed JSON" in x for x in reasons)
    strict = tmp_path / "strict.yaml"
    strict.write_text((tmp_path / "c.yaml").read_text() + "stages: {gopher_quality: {min_words: 100000}}\n")
    r2 = corpus_lab("funnel", str(tmp_path / "runs" / "t"), "--config", str(strict))
    assert r2.returncode == 0, r2.stderr
    line = next(x for x in r2.stdout.splitlines() if "gopher_quality" in x)
    assert " 13 " in line.replace("┆", " ")  # every document is now too short
    r3 = corpus_lab("funnel", str(tmp_path / "runs" / "t"), "--by", "lang")
    assert r3.returncode == 0 and "lang = en: " in r3.stdout, r3.stderr
    assert "shape:" not in r3.stdout and "…" not in r3.stdout and "docs_retention" in r3.stdout  # nothing hidden
    r4 = corpus_lab("clusters", str(tmp_path / "runs" / "t"))
    assert r4.returncode == 0 and "1 clusters of 2 documents at Jaccard >= 0.80" in r4.stdout, r4.stderr
    cid = query.clusters(tmp_path / "runs" / "t", 0.8)["cluster_id"][0]
    r6 = corpus_lab("clusters", str(tmp_path / "runs" / "t"), "--show", str(cid))
    assert r6.returncode == 0 and "2 members, 1 kept" in r6.stdout, r6.stderr
    assert "in.jsonl @ 0 · en" in r6.stdout and "  text " + " ".join(docs[0]["text"].split())[:60] in r6.stdout
    r7 = corpus_lab("clusters", str(tmp_path / "runs" / "t"), "--show", "12345")
    assert r7.returncode == 2 and "no cluster with that id" in r7.stderr
    r5 = corpus_lab("clusters", str(tmp_path / "runs" / "t"), "--threshold", "0.83")
    assert r5.returncode == 2 and "threshold=0.83 is not allowed" in r5.stderr and "0.80, 0.85" in r5.stderr
    # below 0.7 expected pair recall, the funnel and the cluster list warn and say what to do
    low = tmp_path / "low.yaml"
    low.write_text((tmp_path / "c.yaml").read_text() + "stages: {near_dedup: {threshold: 0.6}}\n")
    r8 = corpus_lab("funnel", str(tmp_path / "runs" / "t"), "--config", str(low))
    assert r8.returncode == 0 and "near_dedup: expected pair recall 0.21 at Jaccard 0.60" in r8.stdout, r8.stderr
    assert ("corpus-lab: warning: near_dedup: expected pair recall 0.21 at Jaccard 0.60 is below 0.7: 14 bands x 8 "
            "rows make only 21% of the pairs at that Jaccard candidates, the others get no edge; use a threshold "
            "of 0.75 or more, or set stages.near_dedup.min_threshold: 0.6 and run again") in r8.stderr
    r9 = corpus_lab("clusters", str(tmp_path / "runs" / "t"), "--threshold", "0.5")
    assert r9.returncode == 0 and "expected pair recall 0.05 at Jaccard 0.50" in r9.stdout, r9.stderr
    assert "corpus-lab: warning: near_dedup: expected pair recall 0.05 at Jaccard 0.50 is below 0.7" in r9.stderr


def test_empty_input_is_an_error(tmp_path, corpus_lab):
    (tmp_path / "empty.jsonl").write_text("")
    (tmp_path / "c.yaml").write_text(f"name: e\noutput_dir: {tmp_path}/runs\ninputs: [{{path: {tmp_path}/empty.jsonl}}]\n"
                                     "engine: {n_workers: 1}\n")
    r = corpus_lab("run", "--config", str(tmp_path / "c.yaml"), "--no-progress", "--in-process")
    assert r.returncode == 1 and "no documents were read" in r.stderr


def test_every_record_rejected_is_an_error_with_its_reasons(tmp_path, corpus_lab):
    lines = ['{"text": ["a", "list"]}', '{"text": 7}', '{"id": "no text"}', '{"text": ["b"]}', "not json"]
    (tmp_path / "bad.jsonl").write_text("\n".join(lines) + "\n")
    (tmp_path / "c.yaml").write_text(f"name: b\noutput_dir: {tmp_path}/runs\ninputs: [{{path: {tmp_path}/bad.jsonl}}]\n"
                                     "engine: {n_workers: 1}\n")
    r = corpus_lab("run", "--config", str(tmp_path / "c.yaml"), "--no-progress", "--in-process")
    assert r.returncode == 1, r.stderr
    assert "no documents were read from the inputs (5 rejected records)" in r.stderr and "Traceback" not in r.stderr
    assert "2 x " in r.stderr and "field 'text' is a list, not a string" in r.stderr  # the most frequent first
    assert f"corpus-lab rejects {tmp_path}/runs/b" in r.stderr
    r2 = corpus_lab("rejects", str(tmp_path / "runs" / "b"), "--examples", "1")
    assert r2.returncode == 0, r2.stderr
    out = r2.stdout.splitlines()
    assert "2  " in out[0] and "is a list, not a string" in out[0] and "bad.jsonl:" in out[1]
    assert sum(x.strip()[0].isdigit() for x in out) == len(query.reject_reasons(tmp_path / "runs" / "b")) >= 3
    r3 = corpus_lab("rejects", str(tmp_path / "nowhere"))
    assert r3.returncode == 2 and "is not a run directory" in r3.stderr


def test_unwritable_output_is_a_clean_error(tmp_path):
    (tmp_path / "in.jsonl").write_text('{"text": "x"}\n')
    (tmp_path / "file").write_text("not a directory")
    (tmp_path / "c.yaml").write_text(f"output_dir: {tmp_path}/file/runs\ninputs: [{{path: {tmp_path}/in.jsonl}}]\n")
    r = process("run", "--config", str(tmp_path / "c.yaml"), "--no-progress")
    assert r.returncode == 2 and "corpus-lab: error" in r.stderr and "Traceback" not in r.stderr


def test_ctrl_c_prints_one_line_and_the_rerun_resumes(tmp_path, corpus_lab):
    import signal
    import time

    docs = [{"id": str(i), "text": sample.english_doc(__import__("random").Random(i))} for i in range(400)]
    (tmp_path / "in").mkdir()
    for k in range(6):  # several partitions: an interruption lands between them
        (tmp_path / "in" / f"{k}.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs[k::6]))
    (tmp_path / "c.yaml").write_text(f"name: i\noutput_dir: {tmp_path}/runs\ninputs: [{{path: {tmp_path}/in}}]\n"
                                     "tokenizer: {enabled: false}\nengine: {n_workers: 1}\n")
    p = subprocess.Popen([sys.executable, "-m", "lab.cli", "run", "--config", str(tmp_path / "c.yaml"), "--no-progress"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stats = tmp_path / "runs" / "i" / "stats"
    deadline = time.time() + 120
    while time.time() < deadline and not list(stats.glob("part-*.json")) and p.poll() is None:
        time.sleep(0.05)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=120)
    if p.returncode == 0:  # the run finished before the signal arrived: nothing to check
        pytest.skip("the run ended before the interruption")
    assert p.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    line = next(x for x in err.splitlines() if x.startswith("corpus-lab: interrupted"))
    assert "rerun the same command to resume" in line and f"of {tmp_path}/runs/i complete" in line
    r = corpus_lab("run", "--config", str(tmp_path / "c.yaml"), "--no-progress", "--in-process")  # the resume is the engine's
    assert r.returncode == 0 and "400 documents" in r.stdout, r.stderr


def test_two_runs_on_one_directory_the_second_fails_at_once_naming_the_first(tmp_path, corpus_lab):
    import random

    rng = random.Random(3)
    (tmp_path / "in.jsonl").write_text("".join(json.dumps({"id": str(i), "text": sample.english_doc(rng)}) + "\n"
                                               for i in range(40)))
    (tmp_path / "c.yaml").write_text(f"name: two\noutput_dir: {tmp_path}/runs\ninputs: [{{path: {tmp_path}/in.jsonl}}]\n"
                                     "tokenizer: {enabled: false}\nengine: {n_workers: 1}\n")
    cmd = [sys.executable, "-m", "lab.cli", "run", "--config", str(tmp_path / "c.yaml"), "--no-progress"]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=600) for p in procs]
    codes = [p.returncode for p in procs]
    assert sorted(codes) == [0, 3], outs  # 3: the run's state (another process writes it), not bad input
    winner, loser = (0, 1) if codes[0] == 0 else (1, 0)
    err = outs[loser][1]
    assert f"is being written by another run (process {procs[winner].pid} on " in err and "Traceback" not in err, err
    assert outs[loser][0] == ""  # refused before any work: no report
    assert "40 documents" in outs[winner][0]
    assert (tmp_path / "runs" / "two" / ".lock").read_bytes() == b""
    r = corpus_lab("run", "--config", str(tmp_path / "c.yaml"), "--no-progress", "--in-process")  # free again: the rerun reuses it
    assert r.returncode == 0, r.stderr


def test_train_quality_from_labels_then_a_batch_run_drops_the_low_scores(tmp_path, corpus_lab):
    import random

    import pyarrow.parquet as pq

    from lab import sample

    from lab.quality import labels
    from lab.quality.train import report_path

    rng = random.Random(3)
    prose = [sample.english_doc(rng) for _ in range(16)]
    junk = [" ".join(rng.choice(["click", "here", "buy", "now", "free", "deal", "win", "casino"]) for _ in range(150))
            for _ in range(16)]
    docs = [{"id": f"p{i}", "text": t} for i, t in enumerate(prose)] + [{"id": f"j{i}", "text": t} for i, t in enumerate(junk)]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    off = "{language: {enabled: false}, gopher_quality: {enabled: false}, gopher_repetition: {enabled: false}, " \
          "c4: {enabled: false}, fineweb: {enabled: false}"
    base = f"output_dir: {tmp_path}/runs\ninputs: [{{path: {tmp_path}/in.jsonl}}]\ntokenizer: {{enabled: false}}\n" \
           "engine: {n_workers: 1}\n"
    (tmp_path / "a.yaml").write_text(f"name: a\n{base}stages: {off}}}\n")
    assert corpus_lab("run", "--config", str(tmp_path / "a.yaml"), "--no-progress", "--in-process").returncode == 0
    run = tmp_path / "runs" / "a"
    r = corpus_lab("train-quality", str(run))
    assert r.returncode == 3 and "no positives" in r.stderr and "--positives" in r.stderr  # label first: run state
    ids = pq.read_table(run / "docs", columns=["doc_id", "record_id"]).to_pylist()
    labels.add_many(run, [{"doc_id": d["doc_id"], "label": "good" if d["record_id"].startswith("p") else "bad"}
                          for d in ids if d["record_id"][1:] not in ("14", "15")], user="tester")  # 28 labelled
    r = corpus_lab("train-quality", str(run))
    assert r.returncode == 0, r.stderr
    model = run / "models" / "quality.npz"
    report = json.loads(report_path(model).read_text())
    assert report["trained_on"]["positives"] == {"kind": "labels", "label": "good", "labelled": 14, "documents": 14}
    assert report["trained_on"]["negatives"]["kind"] == "labels" and report["held_out"]["auc"] == 1.0
    assert f"quality model {model}" in r.stdout and "held-out AUC 1.0" in r.stdout and "most negative: " in r.stdout
    assert {"click", "casino"} & {g for g, _ in report["top_features"]["negative"]}
    (tmp_path / "b.yaml").write_text(f"name: b\nmode: batch\n{base}stages: {off}, quality_model: {{model: {model}}}}}\n")
    r = corpus_lab("run", "--config", str(tmp_path / "b.yaml"), "--no-progress", "--in-process")
    assert r.returncode == 0, r.stderr
    manifest = json.loads((tmp_path / "runs" / "b" / "manifest.json").read_text())
    assert manifest["dropped"]["quality_model.low_score"][0] == 16
    assert manifest["models"]["quality_model"]["sha256"] == report["sha256"]
    ref = tmp_path / "ref.jsonl"  # a reference corpus against a random sample of the run
    ref.write_text("".join(json.dumps({"text": sample.english_doc(rng)}) + "\n" for _ in range(10)))
    r = corpus_lab("train-quality", str(run), "--positives", str(ref), "--negatives", "sample", "--out", str(tmp_path / "m.npz"))
    assert r.returncode == 0 and "documents sampled from the run (seed 0)" in r.stdout, r.stderr
