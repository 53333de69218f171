"""The command line on a tiny corpus: run, funnel again under other thresholds, clear errors."""

import json
import subprocess
import sys

import pytest

from lab import query, sample

pytestmark = pytest.mark.cluster


def cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "lab.cli", *args], capture_output=True, text=True, cwd=cwd)


def test_run_then_funnel_with_other_thresholds(tmp_path):
    import random

    rng = random.Random(1)
    docs = [{"id": str(i), "text": sample.english_doc(rng)} for i in range(11)]
    docs.append({"id": "copy", "text": docs[0]["text"].replace(" the ", " a ", 1)})  # a near duplicate of "0"
    docs += [{"id": "short", "text": "Too short to keep."}, {"id": "pretty", "text": ["not", "a", "string"]}]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs) + "[\n")
    (tmp_path / "c.yaml").write_text(f"name: t\noutput_dir: {tmp_path}/runs\ninputs: [{{path: {tmp_path}/in.jsonl}}]\n"
                                     "engine: {n_workers: 1}\n")
    r = cli("run", "--config", str(tmp_path / "c.yaml"), "--no-progress")
    assert r.returncode == 0, r.stderr
    assert "13 documents, 2 rejected records" in r.stdout and "gopher_quality" in r.stdout
    reasons = sorted(query.reject_rows(tmp_path / "runs" / "t")["reason"])
    assert len(reasons) == 2
    assert any("field 'text' is a list, not a string" in x for x in reasons)
    assert any("looks like a JSON array or pretty-printed JSON" in x for x in reasons)
    strict = tmp_path / "strict.yaml"
    strict.write_text((tmp_path / "c.yaml").read_text() + "stages: {gopher_quality: {min_words: 100000}}\n")
    r2 = cli("funnel", str(tmp_path / "runs" / "t"), "--config", str(strict))
    assert r2.returncode == 0, r2.stderr
    line = next(x for x in r2.stdout.splitlines() if "gopher_quality" in x)
    assert " 13 " in line.replace("┆", " ")  # every document is now too short
    r3 = cli("funnel", str(tmp_path / "runs" / "t"), "--by", "lang")
    assert r3.returncode == 0 and "en" in r3.stdout
    r4 = cli("clusters", str(tmp_path / "runs" / "t"))
    assert r4.returncode == 0 and "1 clusters of 2 documents at Jaccard >= 0.80" in r4.stdout, r4.stderr
    r5 = cli("clusters", str(tmp_path / "runs" / "t"), "--threshold", "0.83")
    assert r5.returncode == 2 and "threshold=0.83 is not allowed" in r5.stderr and "0.80, 0.85" in r5.stderr


def test_empty_input_warns(tmp_path):
    (tmp_path / "empty.jsonl").write_text("")
    (tmp_path / "c.yaml").write_text(f"name: e\noutput_dir: {tmp_path}/runs\ninputs: [{{path: {tmp_path}/empty.jsonl}}]\n"
                                     "engine: {n_workers: 1}\n")
    r = cli("run", "--config", str(tmp_path / "c.yaml"), "--no-progress")
    assert r.returncode == 0 and "no documents were read" in r.stderr


def test_unwritable_output_is_a_clean_error(tmp_path):
    (tmp_path / "in.jsonl").write_text('{"text": "x"}\n')
    (tmp_path / "file").write_text("not a directory")
    (tmp_path / "c.yaml").write_text(f"output_dir: {tmp_path}/file/runs\ninputs: [{{path: {tmp_path}/in.jsonl}}]\n")
    r = cli("run", "--config", str(tmp_path / "c.yaml"), "--no-progress")
    assert r.returncode == 2 and "corpus-lab: error" in r.stderr and "Traceback" not in r.stderr
