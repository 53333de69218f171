"""The corpora real teams have, run end to end through ``corpus-lab run``: every record on disk is a document
(kept or dropped by one stage) or a reject with its reason, in records and in bytes; every file under an input
is read or named with why not; the exit status and the one line a user reads are what they should be.

Each case is built here from nothing (no Debian package, no network). The first test runs one directory that
holds most of the record-level cases at once (each file its own case, asserted by its source); the others
need a run of their own (a layout, a config, a signal, a full disk).
"""

from __future__ import annotations

import gzip
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lab import query, sample
from lab.io.writers import read_json

CLI = [sys.executable, "-m", "lab.cli"]


def english(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [sample.english_doc(rng) for _ in range(n)]


def jsonl(texts: list[str], **extra) -> bytes:
    return b"".join(json.dumps({"text": t, **extra}).encode() + b"\n" for t in texts)


def write_config(tmp: Path, name: str, body: str) -> Path:
    path = tmp / f"{name}.yaml"
    path.write_text(f"name: {name}\noutput_dir: {tmp}/runs\n{body}tokenizer: {{enabled: false}}\n"
                    "engine: {n_workers: 1}\n")
    return path


def totals(run: Path) -> tuple[int, int, int, int]:
    """(documents, their raw bytes, rejects, their raw bytes) of a finished run."""
    t = read_json(run / "manifest.json")["totals"]
    return t["docs"], t["bytes"], t["rejected"], t["rejected_bytes"]


def assert_funnel_conserved(run: Path) -> None:
    """in = kept + dropped per stage (+ rejected at ingest), in documents and in text bytes."""
    from lab.config import load

    f = query.funnel(run, load(run / "config.yaml"))
    assert f["docs_in"][0] == f["docs_out"][-1] + f["docs_dropped"].sum()
    assert f["bytes_in"][0] == f["bytes_out"][-1] + f["bytes_dropped"].sum()
    d, _, r, _ = totals(run)
    assert f["docs_in"][0] == d + r


# --- one directory, many hostile files -----------------------------------------------------------------

SJIS_PAGE = ('<html><head><meta http-equiv="Content-Type" content="text/html; charset=Shift_JIS"><title>案内</title>'
             '</head><body><p>' + "この文書は日本語で書かれています。" * 40 + "</p></body></html>")
LATIN1_PAGE = "<html><body><p>" + "Le garçon mangeait une crème brûlée à côté de la fenêtre, déçu. " * 30 + \
    "</p></body></html>"


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """A directory of hostile files and the run of it; returns (tmp, run dir, the CLI's result, expectations)."""
    tmp = tmp_path_factory.mktemp("hostile")
    src = tmp / "in"
    other = tmp / "elsewhere"
    src.mkdir()
    other.mkdir()
    texts = english(12)
    expect: dict[str, tuple[int, int, int]] = {}  # source -> (documents, rejects, raw bytes of both)

    def put(rel: str, data: bytes, docs: int, rejects: int, raw: int | None = None) -> None:
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_bytes(data)
        expect[rel] = (docs, rejects, len(data) if raw is None else raw)

    good = jsonl(texts[:3])
    put("good.jsonl", good, 3, 0)
    whole = jsonl(texts[3:6])
    cut = gzip.compress(whole)[:-30]  # truncated gzip: the complete lines before the cut, then one reject
    put("truncated.jsonl.gz", cut, 2, 1, raw=None)
    put("zero.jsonl.gz", b"", 0, 0)  # a zero-byte compressed file holds no record
    put("zero.jsonl", b"", 0, 0)
    put("gzipped-but-named.jsonl", gzip.compress(jsonl(texts[6:7])), 1, 0, raw=len(jsonl(texts[6:7])))
    put("plain-but-named.jsonl.gz", jsonl(texts[7:8]), 1, 0)
    put("bom.jsonl", b"\xef\xbb\xbf" + jsonl(texts[8:9]), 1, 0)
    put("crlf.jsonl", jsonl(texts[9:10]).replace(b"\n", b"\r\n") * 2, 2, 0)
    put("invalid-utf8.jsonl", b'{"text": "caf\xc3\xa9 \xff\xfe ' + texts[10][:200].encode() + b'"}\n', 1, 0)
    put("surrogates.jsonl", b'{"text": "lone \\ud800 half ' + texts[11][:200].encode() + b'"}\n', 1, 0)
    put("array.jsonl", b'[{"text": "a"}, {"text": "b"}]\n' + jsonl(texts[:1]), 1, 1)
    put("dup-ids.jsonl", jsonl(texts[:2], id="same"), 2, 0)  # ids are the input's: two documents all the same
    big = b'{"text": "' + b"w " * (15 * 2**20) + b'"}\n'  # a 30 MB line: over ingest.max_doc_bytes (16 MiB)
    put("big-line.jsonl", big + jsonl(texts[:1]), 1, 1)
    pq.write_table(pa.table({"text": list(range(7))}), src / "wrong-type.parquet")  # a text column of int64
    expect["wrong-type.parquet"] = (0, 7, 7 * 8)
    put(os.fsdecode(b"caf\xe9-latin1-name.jsonl"), jsonl(texts[:1]), 1, 0)  # a file name that is not UTF-8
    expect["caf\\xe9-latin1-name.jsonl"] = expect.pop(os.fsdecode(b"caf\xe9-latin1-name.jsonl"))  # named so
    put("pages/sjis.html", SJIS_PAGE.encode("shift_jis"), 1, 0)
    put("pages/latin1.html", LATIN1_PAGE.encode("latin-1"), 1, 0)
    # a directory linked into the input (its 2 records must be read), a loop, a hidden file, a hard link
    (other / "linked.jsonl").write_bytes(jsonl(texts[:2]))
    (src / "linked").symlink_to(other, target_is_directory=True)
    expect["linked/linked.jsonl"] = (2, 0, len(jsonl(texts[:2])))
    (src / "selfloop").symlink_to(".", target_is_directory=True)
    (src / ".hidden.jsonl").write_bytes(jsonl(texts[:1]))
    os.link(src / "good.jsonl", src / "hardlink-of-good.jsonl")
    cfg = write_config(tmp, "hostile", f"inputs: [{{path: {src}}}]\n")
    r = subprocess.run([*CLI, "run", "--config", str(cfg), "--no-progress"], capture_output=True, text=True)
    return tmp, tmp / "runs" / "hostile", r, expect


def test_every_record_is_a_document_or_a_reject_in_records_and_bytes(hostile):
    _, run, r, expect = hostile
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    docs = query.signal_rows(run, ["source", "raw_bytes"])
    rej = query.reject_rows(run)
    for source, (n_docs, n_rej, raw) in expect.items():
        d = docs.filter(docs["source"] == source)
        j = rej.filter(rej["source"] == source)
        assert (d.height, j.height) == (n_docs, n_rej), (source, d.height, j.height, j["reason"].to_list())
        if source not in ("truncated.jsonl.gz",):  # a broken stream's lost tail has no size
            assert d["raw_bytes"].sum() + j["raw_bytes"].sum() == raw, source
    assert docs.height + rej.height == sum(e[0] + e[1] for e in expect.values())  # nothing else was read
    assert totals(run)[0] == docs.height and totals(run)[2] == rej.height
    assert_funnel_conserved(run)


def test_each_reject_says_what_was_wrong_and_where(hostile):
    _, run, _, _ = hostile
    rej = {(s, loc): reason for s, loc, reason in query.reject_rows(run).select("source", "locator", "reason").iter_rows()}
    assert "gzip stream truncated" in rej[next(k for k in rej if k[0] == "truncated.jsonl.gz")]
    assert rej[("array.jsonl", 0)].startswith("array.jsonl byte 0: JSON list where an object was expected; the line "
                                              "is a JSON array: JSONL needs one object per line")
    assert "exceeds ingest.max_doc_bytes=16777216" in rej[("big-line.jsonl", 0)]
    assert rej[("wrong-type.parquet", 3)] == ("wrong-type.parquet row 3: 'text' is a int64 value (3), not a string; "
                                              "set inputs[0].text_field to the column that holds the text (the file "
                                              "has no string column)")


def test_bytes_as_read_are_decoded_as_declared(hostile):
    _, run, _, _ = hostile
    s = query.signal_rows(run, ["source", "encoding", "encoding_source", "decode_errors", "lang"])
    row = {r["source"]: r for r in s.iter_rows(named=True)}
    assert (row["pages/sjis.html"]["encoding"], row["pages/sjis.html"]["encoding_source"]) == ("cp932", "meta")
    assert row["pages/sjis.html"]["decode_errors"] == 0 and row["pages/sjis.html"]["lang"] == "ja"
    assert row["pages/latin1.html"]["decode_errors"] == 0 and row["pages/latin1.html"]["lang"] == "fr"
    assert row["pages/latin1.html"]["encoding"] in ("cp1252", "iso8859-1")
    assert row["bom.jsonl"]["encoding_source"] == "bom"
    assert row["invalid-utf8.jsonl"]["decode_errors"] == 2 and row["surrogates.jsonl"]["decode_errors"] == 1
    text = query.document_texts(run, query.signal_rows(run, ["doc_id", "source"]).filter(
        query.signal_rows(run, ["doc_id", "source"])["source"] == "crlf.jsonl")["doc_id"].to_list())
    assert all("\r" not in t for t in text.values())


def test_what_was_not_read_is_listed_with_why_and_summed_up_in_one_line(hostile):
    _, run, r, _ = hostile
    m = read_json(run / "manifest.json")
    why = {Path(s["path"]).name: s["reason"] for s in m["inputs"]["skipped"]}
    assert why[".hidden.jsonl"] == "hidden"
    assert why["selfloop"].startswith("directory reached twice (link to .")
    assert why["hardlink-of-good.jsonl"] == "duplicate of inputs[0] good.jsonl (the same file, read once)"
    assert m["inputs"]["skipped_count"] == 3
    listing = pq.read_table(run / "inputs.parquet").to_pylist()
    assert {x["source"] for x in listing if x["skipped"] is None} >= {"linked/linked.jsonl", "good.jsonl"}
    notes = [x for x in r.stderr.splitlines() if x.startswith("corpus-lab: note:")]
    assert notes == [f"corpus-lab: note: 3 entries under the inputs not read: 1 directory reached twice, 1 duplicate, "
                     f"1 hidden (each with why: manifest.json inputs.skipped, {run}/inputs.parquet)"]


# --- layouts -------------------------------------------------------------------------------------------


def test_a_glob_through_a_self_loop_reads_each_file_once(tmp_path, corpus_lab):
    src = tmp_path / "d"
    (src / "sub").mkdir(parents=True)
    texts = english(5, seed=1)
    for k, t in enumerate(texts):
        (src / ("sub" if k % 2 else ".") / f"{k}.jsonl").write_bytes(jsonl([t]))
    (src / "selfloop").symlink_to(".", target_is_directory=True)
    cfg = write_config(tmp_path, "glob", f"inputs: [{{path: '{src}/**/*.jsonl'}}]\n")
    r = corpus_lab("run", "--config", cfg, "--no-progress", "--in-process")
    assert r.returncode == 0, r.stderr
    assert "run " in r.stdout and ": 5 documents, 0 rejected records" in r.stdout  # not 203 under 40 names
    assert "1 directory reached twice" in r.stderr


def test_many_small_files_are_packed_into_few_partitions(tmp_path, corpus_lab):
    src = tmp_path / "many"
    src.mkdir()
    texts = english(40, seed=2)
    n = 3000
    for i in range(n):
        (src / f"{i:05d}.jsonl").write_bytes(jsonl([texts[i % 40]], id=i))
    cfg = write_config(tmp_path, "many", f"inputs: [{{path: {src}}}]\n")
    r = corpus_lab("run", "--config", cfg, "--no-progress", "--in-process")
    assert r.returncode == 0, r.stderr
    m = read_json(tmp_path / "runs" / "many" / "manifest.json")
    assert m["totals"]["docs"] == n and m["inputs"]["files"] == n
    assert len(m["partitions"]) <= n / 100  # whole files grouped (about 512 per partition), not one task each
    assert sum(p["bytes"] for p in m["partitions"]) == sum(f.stat().st_size for f in src.iterdir())


def test_a_duplicate_config_key_names_both_lines(tmp_path, corpus_lab):
    cfg = tmp_path / "dup.yaml"
    cfg.write_text("name: x\nstages:\n  language: {min_score: 0.5}\ninputs: [{path: nowhere}]\nstages:\n  c4: {}\n")
    r = corpus_lab("run", "--config", cfg)
    assert r.returncode == 2
    assert r.stderr.strip() == (f"corpus-lab: error: {cfg}: key 'stages' appears twice in one mapping, at line 2 "
                                "and at line 5; YAML would keep only the second. Merge the two into one 'stages' "
                                "entry")
    cfg.write_text("stages:\n  language:\n    min_score: 0.5\n    langs: [en]\n    min_score: 0.7\n")
    r = corpus_lab("run", "--config", cfg)
    assert r.returncode == 2 and "key 'min_score' appears twice in one mapping, at line 3 and at line 5" in r.stderr


def test_parquet_rows_are_read_in_bounded_batches(tmp_path):
    """The reader's memory does not grow with the rows of a row group (tiny texts: the worst case). Measured in a
    process of its own: another test's threads in this one would allocate meanwhile."""
    code = """
import json, sys, tracemalloc
from pathlib import Path
import pyarrow as pa, pyarrow.parquet as pq
from lab.io.inputs import IngestConfig, InputConfig
from lab.io.partitions import plan
from lab.io.readers import read
out = {}
for rows in (20_000, 100_000):
    path = Path(sys.argv[1]) / f"{rows}.parquet"
    pq.write_table(pa.table({"text": [f"tiny text {i}" for i in range(rows)]}), path, row_group_size=rows)
    inp = InputConfig(str(path))
    parts = plan([inp], IngestConfig())  # a task holds at most ingest.partition_docs rows, even in one group
    tracemalloc.start()
    n = sum(1 for p in parts for _ in read(p, inp, IngestConfig()))
    out[rows] = {"peak": tracemalloc.get_traced_memory()[1], "rows": n, "ranges": [(p.start, p.end) for p in parts]}
    tracemalloc.stop()
print(json.dumps(out))
"""
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    got = {int(k): v for k, v in json.loads(r.stdout).items()}
    assert got[20_000]["ranges"] == [[0, -1]] and got[100_000]["ranges"] == [[0, 50_000], [50_000, -1]]
    assert got[20_000]["rows"] == 20_000 and got[100_000]["rows"] == 100_000
    peaks = {rows: v["peak"] for rows, v in got.items()}
    assert peaks[100_000] < 1.5 * peaks[20_000] and peaks[100_000] < 8 * 2**20, peaks


# --- edits, interruptions, the disk --------------------------------------------------------------------


def test_an_edit_that_keeps_size_and_time_is_found_and_the_tokens_follow(tmp_path, corpus_lab):
    src = tmp_path / "in"
    src.mkdir()
    (src / "a.jsonl").write_bytes(jsonl(english(30, seed=4)))
    cfg = tmp_path / "t.yaml"
    cfg.write_text(f"name: t\noutput_dir: {tmp_path}/runs\ninputs: [{{path: {src}}}]\n"
                   "tokenizer: {vocab_size: 600}\npack: {seq_len: 256}\nengine: {n_workers: 1}\n")
    assert corpus_lab("run", "--config", cfg, "--no-progress").returncode == 0
    run = tmp_path / "runs" / "t"
    f, st = src / "a.jsonl", (src / "a.jsonl").stat()
    f.write_bytes(f.read_bytes().replace(b" the ", b" THE ", 1))
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    r = corpus_lab("verify-tokens", run)
    assert r.returncode == 4 and "tokens no longer matches what it would be made of now" in r.stderr
    r = corpus_lab("check", run)
    assert r.returncode == 4 and r.stdout.startswith("stale: annotate: docs/part-00000.parquet: partition 00000 "
                                                     "(a.jsonl): its input changed since it was annotated: a.jsonl")
    r = corpus_lab("run", "--config", cfg, "--no-progress")
    assert r.returncode == 0 and "materialize computed" in r.stdout
    assert corpus_lab("check", run).returncode == 0 and corpus_lab("verify-tokens", run).returncode == 0
    r = corpus_lab("run", "--config", cfg, "--no-progress")
    assert "0 partitions run" in r.stdout and "near dedup reused; tokenizer reused; tokenize 0 partitions; " \
                                              "materialize reused" in r.stdout


def test_a_read_only_output_is_one_line(tmp_path, mount_namespace):
    (tmp_path / "a.jsonl").write_bytes(jsonl(english(2)))
    out = tmp_path / "ro"
    out.mkdir()
    cfg = write_config(tmp_path, "ro", f"inputs: [{{path: {tmp_path}/a.jsonl}}]\n").read_text()
    (tmp_path / "ro.yaml").write_text(cfg.replace(f"{tmp_path}/runs", str(out)))
    cmd = " ".join([*CLI, "run", "--config", str(tmp_path / "ro.yaml"), "--no-progress"])
    if os.geteuid() == 0:  # root writes through permissions: a read-only filesystem instead
        ns = mount_namespace
        if ns is None:
            pytest.skip("root, and no mount namespace for a read-only filesystem")
        script = f"mount -t tmpfs tmpfs {out} && mount -o remount,ro {out} && {cmd}"
        r = subprocess.run([*ns, "sh", "-c", script], capture_output=True, text=True, timeout=300)
    else:
        out.chmod(0o555)
        r = subprocess.run(cmd.split(), capture_output=True, text=True, timeout=300)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith("corpus-lab: error:"), r.stderr
    assert "Traceback" not in r.stderr and "write the run elsewhere (--output-dir)" in lines[0], lines


def test_a_read_only_output_file_in_the_way_is_one_line(tmp_path):
    (tmp_path / "a.jsonl").write_bytes(jsonl(english(2)))
    (tmp_path / "file").write_text("not a directory")
    cfg = write_config(tmp_path, "ro", f"inputs: [{{path: {tmp_path}/a.jsonl}}]\n").read_text()
    (tmp_path / "ro.yaml").write_text(cfg.replace(f"{tmp_path}/runs", f"{tmp_path}/file/runs"))
    r = subprocess.run([*CLI, "run", "--config", str(tmp_path / "ro.yaml"), "--no-progress"], capture_output=True,
                       text=True)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith("corpus-lab: error:"), r.stderr
    assert "a file is in the way" in lines[0]


def _many_partitions(tmp_path: Path, name: str, files: int = 8) -> Path:
    src = tmp_path / "in"
    src.mkdir()
    texts = english(16 * files, seed=5)
    for k in range(files):
        (src / f"{k}.jsonl").write_bytes(jsonl(texts[k::files]))
    return write_config(tmp_path, name, f"inputs: [{{path: {src}}}]\ningest: {{files_per_partition: 1}}\n")


def _wait_for_partitions(stats: Path, proc: subprocess.Popen, n: int = 1) -> None:
    deadline = time.time() + 120
    while time.time() < deadline and len(list(stats.glob("part-*.json"))) < n and proc.poll() is None:
        time.sleep(0.02)


def test_kill_9_then_the_rerun_resumes_and_gives_the_same_bytes(tmp_path, corpus_lab):
    cfg = _many_partitions(tmp_path, "k")
    run = tmp_path / "runs" / "k"
    p = subprocess.Popen([*CLI, "run", "--config", str(cfg), "--no-progress", "--in-process"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait_for_partitions(run / "stats", p, 2)
    p.kill()
    p.wait()
    done = len(list((run / "stats").glob("part-*.json")))
    r = corpus_lab("run", "--config", cfg, "--no-progress", "--in-process")
    assert r.returncode == 0 and f"{8 - done} partitions run, {done} reused" in r.stdout, r.stdout
    ref = cfg.read_text().replace("name: k", "name: ref")
    (tmp_path / "ref.yaml").write_text(ref)
    assert corpus_lab("run", "--config", tmp_path / "ref.yaml", "--no-progress", "--in-process").returncode == 0
    for kind in ("docs", "signals", "rejects"):
        for f in sorted((run / kind).glob("part-*.parquet")):
            assert f.read_bytes() == (tmp_path / "runs" / "ref" / kind / f.name).read_bytes(), f


def test_the_run_lock_refuses_a_second_writer_in_one_line(tmp_path):
    cfg = _many_partitions(tmp_path, "l")
    first = subprocess.Popen([*CLI, "run", "--config", str(cfg), "--no-progress", "--in-process"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait_for_partitions(tmp_path / "runs" / "l" / "stats", first)
    second = subprocess.run([*CLI, "run", "--config", str(cfg), "--no-progress"], capture_output=True, text=True)
    first.wait(timeout=300)
    if second.returncode == 0:
        pytest.skip("the first run ended before the second started")
    assert second.returncode == 3 and f"is being written by another run (process {first.pid} on" in second.stderr
    assert len(second.stderr.strip().splitlines()) == 1


def test_ctrl_c_in_process_is_one_line_and_exit_130(tmp_path):
    cfg = _many_partitions(tmp_path, "c")
    p = subprocess.Popen([*CLI, "run", "--config", str(cfg), "--no-progress", "--in-process"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait_for_partitions(tmp_path / "runs" / "c" / "stats", p)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=120)
    if p.returncode == 0:
        pytest.skip("the run ended before the interruption")
    assert p.returncode == 130 and "Traceback" not in err
    assert [x for x in err.splitlines() if x.strip()][-1].startswith("corpus-lab: interrupted")


def test_a_full_disk_exits_5_in_one_line_and_the_rerun_gives_the_same_bytes(tmp_path, corpus_lab, mount_namespace):
    ns = mount_namespace
    if ns is None:
        pytest.skip("cannot mount a size-limited tmpfs here (no unshare, or neither root nor user namespaces)")
    cfg = _many_partitions(tmp_path, "full")
    disk = tmp_path / "disk"
    disk.mkdir()
    (tmp_path / "full.yaml").write_text(cfg.read_text().replace(f"{tmp_path}/runs", str(disk)))
    cmd = " ".join([*CLI, "run", "--config", str(tmp_path / "full.yaml"), "--no-progress", "--in-process"])
    script = f"""
        set -u
        mount -t tmpfs -o size=160k tmpfs {disk} || exit 90
        {cmd} >{tmp_path}/out1 2>{tmp_path}/err1; echo $? >{tmp_path}/rc1
        mount -o remount,size=64m {disk} || exit 91
        {cmd} >{tmp_path}/out2 2>{tmp_path}/err2; echo $? >{tmp_path}/rc2
        cp -a {disk}/full {tmp_path}/after
    """
    r = subprocess.run([*ns, "sh", "-c", script], capture_output=True, text=True, env={**os.environ,
                       "PYTHONPATH": os.environ.get("PYTHONPATH", "")}, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    err1 = [x for x in (tmp_path / "err1").read_text().splitlines() if x.strip()]
    assert (tmp_path / "rc1").read_text().strip() == "5", err1
    assert len(err1) == 1 and err1[0].startswith("corpus-lab: error: no space left on device writing"), err1
    assert (tmp_path / "rc2").read_text().strip() == "0", (tmp_path / "err2").read_text()
    (tmp_path / "ref.yaml").write_text(cfg.read_text().replace("name: full", "name: ref"))
    assert corpus_lab("run", "--config", tmp_path / "ref.yaml", "--no-progress", "--in-process").returncode == 0
    for kind in ("docs", "signals", "rejects"):
        for f in sorted((tmp_path / "runs" / "ref" / kind).glob("part-*.parquet")):
            assert f.read_bytes() == (tmp_path / "after" / kind / f.name).read_bytes(), f
