"""The engine on a real Dask cluster and under faults (DESIGN §9: real scheduler and workers).

- A ``dask scheduler`` and two ``dask worker`` processes on 127.0.0.1: ``corpus-lab run --scheduler``
  writes the same bytes as the LocalCluster run; so does the in-process executor (no cluster).
- SIGKILL of a worker (its nanny too) in the middle of annotate: Dask reschedules its tasks on the
  survivor, nothing is quarantined, the bytes are the same.
- A partition whose every attempt fails (its file gives EIO on the workers) is tried ``1 + retries``
  times, then quarantined with its reason; the rest completes and the summary names it.
- A full disk (a small tmpfs in a private mount namespace) stops the run with one clear error,
  leaves no temporary or half-written file, and the rerun on a grown disk resumes and gives the
  same bytes.

The corpus is the synthetic sample (``lab.sample``, 1 MB) cut into 20 partitions, with a small
tokenizer so that tokens/ is written too; one LocalCluster run of it is the reference.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lab import engine, query, sample
from lab.config import load
from lab.io.run import RunLayout
from lab.io.writers import read_json

pytestmark = pytest.mark.cluster

DASK = str(Path(sys.executable).with_name("dask"))
CLI = [sys.executable, "-m", "lab.cli", "run", "--no-progress"]
RETRIES = 2

# worker processes run one thread each (as the LocalCluster's do): no native thread pools
THREAD_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
              "RAYON_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
# files whose bytes depend on how and where a run ran, compared field by field in ``assert_same_run``
VOLATILE = ("config.yaml", "manifest.json", "dedup/done.json", "boilerplate/done.json", "tokenizer/fit.json")


def config_yaml(src: Path) -> str:
    """20 partitions of the synthetic sample (a file or a range each), a small tokenizer, short sequences: tokens/ in a few seconds."""
    return (f"inputs: [{{path: {src}}}]\n"
            "ingest: {partition_bytes: 65536, files_per_partition: 1}\n"
            "tokenizer: {vocab_size: 1000}\n"
            "pack: {seq_len: 512, val_fraction: 0.1, shard_sequences: 64}\n"
            f"engine: {{retries: {RETRIES}}}\n")


# --- helpers ---------------------------------------------------------------------------------------


def wait_for(condition, timeout: float, what: str, interval: float = 0.05):
    """Poll ``condition`` until it returns something true; fail naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        got = condition()
        if got:
            return got
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


def spawn(args: list[str], log: Path, env: dict | None = None) -> subprocess.Popen:
    """A process in its own session (process group), its output in ``log``."""
    with open(log, "ab") as out:
        return subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, env={**os.environ, **THREAD_ENV, **(env or {})})


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL ``proc``'s whole process group (a nanny and its worker process) and reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=60)


def run_group(args: list[str], timeout: float = 400, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run ``args`` in its own process group; on timeout the whole group is killed (no LocalCluster or
    worker is left behind) before the test fails, within pytest's own timeout."""
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, env={**os.environ, **(env or {})})
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        out, err = proc.communicate()
        pytest.fail(f"{' '.join(args)} did not finish in {timeout} s:\n{out}\n{err}")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def run_cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """``corpus-lab run --no-progress ARGS``"""
    return run_group([*CLI, *args], env=env)


def run_files(run_dir: Path) -> list[str]:
    """Every file of a run directory, relative, sorted (temporary ``.tmp-*`` files included)."""
    return sorted(str(p.relative_to(run_dir)) for p in run_dir.rglob("*") if p.is_file())


def deterministic(rel: str) -> bool:
    """Whether a run file's bytes must not depend on workers, faults or resume: all but the CPU
    timings (``stats/timing-*``, ``stats/costs/``) and the ``VOLATILE`` files (which hold times, the run's
    name and its cluster)."""
    return rel not in VOLATILE and not rel.startswith(("stats/timing-", "stats/costs/"))


def _without(obj, keys: set[str]):
    if isinstance(obj, dict):
        return {k: _without(v, keys) for k, v in obj.items() if k not in keys}
    if isinstance(obj, list):
        return [_without(v, keys) for v in obj]
    return obj


def comparable_manifest(run_dir: Path) -> dict:
    """The manifest without what names the run or its cluster, and without timings."""
    m = _without(read_json(run_dir / "manifest.json"), {"seconds", "stage_cpu_seconds", "step_seconds", "last_run", "steps"})
    m.pop("name")
    for k in ("engine", "name", "output_dir"):
        m["config"].pop(k)
    return m


def assert_same_run(run: Path, ref: Path) -> None:
    """Byte-identical outputs: every deterministic file (docs, signals, rejects, stats/merged.json and
    the partitions' stats, every dedup/ output, tokenizer/, tokenized/, tokens/, stats/packing.json),
    and the same manifest and fit apart from names, timings and where the inputs live."""
    files, expected = run_files(run), run_files(ref)
    assert files == expected
    same = [f for f in files if deterministic(f)]
    for must in ("docs/", "signals/", "rejects/", "stats/part-", "stats/merged.json", "dedup/signatures/",
                 "dedup/bands/", "dedup/edges/", "dedup/clusters.parquet", "boilerplate/merged/", "boilerplate/signal/",
                 "tokenizer/tokenizer.json", "tokenized/",
                 "tokens/train/", "tokens/val/", "stats/packing.json"):
        assert any(f.startswith(must) for f in same), must
    differ = [f for f in same if (run / f).read_bytes() != (ref / f).read_bytes()]
    assert not differ, f"{len(differ)} of {len(same)} files differ from {ref}: {differ[:10]}"
    for f in ("dedup/done.json", "boilerplate/done.json", "tokenizer/fit.json"):
        assert _without(read_json(run / f), {"seconds"}) == _without(read_json(ref / f), {"seconds"}), f
    assert comparable_manifest(run) == comparable_manifest(ref)


# --- fixtures --------------------------------------------------------------------------------------


class Corpus:
    def __init__(self, root: Path):
        self.src = sample.build(root=root / "sample", real=False) / "synthetic"
        self.config = root / "config.yaml"
        self.config.write_text(config_yaml(self.src))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Corpus:
    return Corpus(tmp_path_factory.mktemp("corpus"))


@pytest.fixture(scope="module")
def reference(corpus, tmp_path_factory) -> Path:
    """The corpus run on a LocalCluster of two workers."""
    out = tmp_path_factory.mktemp("reference")
    r = run_cli("--config", str(corpus.config), "--output-dir", str(out), "--name", "local", "--workers", "2")
    assert r.returncode == 0, r.stderr
    run = out / "local"
    m = read_json(run / "manifest.json")
    assert len(m["partitions"]) == 20 and all(p["status"] == "complete" for p in m["partitions"])
    assert m["totals"]["docs"] == 461 and m["totals"]["rejected"] == 3  # the sample's (test_engine)
    return run


class Cluster:
    """A ``dask scheduler`` and named ``dask worker`` processes (one nanny + one 1-thread worker
    process each) on 127.0.0.1, and a client of the test's own to watch them."""

    def __init__(self, tmp: Path):
        from distributed import Client

        self.tmp = tmp
        self.workers: dict[str, subprocess.Popen] = {}
        info = tmp / "scheduler.json"
        # port 0 and a scheduler file: the scheduler takes a free port itself (no race for one);
        # --idle-timeout: should this process die without its teardown, the scheduler exits by itself
        self.scheduler = spawn([DASK, "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                                "--scheduler-file", str(info), "--idle-timeout", "900"], tmp / "scheduler.log")
        self.address = wait_for(lambda: info.exists() and info.stat().st_size and json.loads(info.read_text())["address"],
                                120, "the dask scheduler to start")
        assert self.address.startswith("tcp://127.0.0.1:")
        self.client = Client(self.address, timeout="60s")
        self.ensure_workers()

    def start_worker(self, name: str) -> None:
        # --death-timeout: a worker whose scheduler is gone exits by itself (if this process dies first)
        self.workers[name] = spawn([DASK, "worker", self.address, "--name", name, "--host", "127.0.0.1",
                                    "--nthreads", "1", "--nworkers", "1", "--no-dashboard", "--death-timeout", "60",
                                    "--local-directory", str(self.tmp / name)], self.tmp / f"{name}.log")

    def ensure_workers(self, names=("w0", "w1")) -> None:
        """Both workers running and registered (one killed by an earlier test is started again)."""
        for name in names:
            if name not in self.workers or self.workers[name].poll() is not None:
                if name in self.workers:
                    kill_group(self.workers[name])  # reap what is left of its group
                self.start_worker(name)
        wait_for(lambda: sorted(w["name"] for w in self.client.scheduler_info(n_workers=-1)["workers"].values())
                 == sorted(names), 120, f"workers {', '.join(names)} to register", interval=0.2)

    def names(self) -> dict[str, str]:
        """worker address -> name"""
        return {a: w["name"] for a, w in self.client.scheduler_info(n_workers=-1)["workers"].items()}

    def close(self) -> None:
        try:
            self.client.close()
        finally:
            for proc in [*self.workers.values(), self.scheduler]:
                kill_group(proc)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("cluster"))
    try:
        yield c
    finally:
        c.close()


# --- a real scheduler and workers ------------------------------------------------------------------


def test_scheduler_and_two_workers_give_the_local_cluster_bytes(cluster, corpus, reference, tmp_path):
    cluster.ensure_workers()
    r = run_cli("--config", str(corpus.config), "--output-dir", str(tmp_path), "--name", "remote",
                "--scheduler", cluster.address)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    # both worker processes took partitions (the tasks ran there, not in the client)
    assert cluster.client.run(lambda: "lab.annotate" in sys.modules) == {a: True for a in cluster.names()}
    assert_same_run(tmp_path / "remote", reference)


def test_in_process_gives_the_local_cluster_bytes(corpus, reference, tmp_path):
    """``engine.run(client="inprocess")``: the same tasks one after another in this process, no cluster;
    every output file is the LocalCluster's, byte for byte (timings and names aside)."""
    cfg = dataclasses.replace(load(corpus.config), name="inprocess", output_dir=str(tmp_path))
    m = engine.run(cfg, progress=False, client=engine.INPROCESS)
    assert m["last_run"]["partitions_run"] == 20 and m["last_run"]["steps"]["materialize"] == "computed"
    assert_same_run(tmp_path / "inprocess", reference)
    # the tokenizer (identical above) was fitted in a child process of the cluster run's driver, with its
    # CPU recorded as the step's one task; in process it is the driver's own work
    fit = read_json(reference / "stats" / "costs" / "tokenizer_fit.json")
    assert fit["tasks"] == 1 and fit["cpu_s"] > fit["driver_cpu_s"]
    assert read_json(tmp_path / "inprocess" / "stats" / "costs" / "tokenizer_fit.json")["tasks"] == 0


def test_sigkill_of_a_worker_mid_run_changes_nothing(cluster, corpus, reference, tmp_path):
    cluster.ensure_workers()
    total = len(read_json(reference / "manifest.json")["partitions"])
    stats = tmp_path / "killed" / "stats"
    log = tmp_path / "run.log"
    run = spawn([*CLI, "--config", str(corpus.config), "--output-dir", str(tmp_path), "--name", "killed",
                 "--scheduler", cluster.address], log)
    try:
        wait_for(lambda: list(stats.glob("part-*.json")) or run.poll() is not None, 300, "a first complete partition")
        assert run.poll() is None, log.read_text()

        def busy() -> dict[str, list[str]]:  # worker name -> the annotate tasks it is running
            names = cluster.names()
            return {names[a]: ks for a, ks in cluster.client.processing().items()
                    if a in names and any(str(k).startswith("annotate-") for k in ks)}

        held = wait_for(busy, 60, "a worker running a partition", interval=0.01)
        victim = min(held)
        kill_group(cluster.workers[victim])  # the nanny too: the worker does not come back
        done = len(list(stats.glob("part-*.json")))
        assert done < total, "annotate was over before the kill; the kill tested nothing"
        assert run.wait(timeout=400) == 0, log.read_text()
    finally:
        if run.poll() is None:
            kill_group(run)
    out = log.read_text()
    assert "Traceback" not in out and "quarantined" not in out, out
    m = read_json(tmp_path / "killed" / "manifest.json")
    assert all(p["status"] == "complete" for p in m["partitions"]), (victim, held)
    # the victim is gone for good: the survivor finished the run alone
    survivor = ({"w0", "w1"} - {victim}).pop()
    wait_for(lambda: list(cluster.names().values()) == [survivor], 60, f"the scheduler to drop {victim}")
    assert_same_run(tmp_path / "killed", reference)


# --- a partition that fails on every attempt -------------------------------------------------------

# Loaded by every worker process (distributed.worker.preload): reading a file named unreadable*
# fails with EIO, as a bad sector or a stale NFS handle does on the worker's side; each attempt
# appends a line to $CORPUS_LAB_FAULT_LOG. Only the readers' ``open`` is replaced.
FAULT = '''
import builtins, errno, os
import lab.io.storage

_open = builtins.open

def _open_or_eio(file, *args, **kwargs):
    if os.path.basename(str(file)).startswith("unreadable"):
        with _open(os.environ["CORPUS_LAB_FAULT_LOG"], "a") as log:
            log.write(f"{os.getpid()} {file}\\n")
        raise OSError(errno.EIO, os.strerror(errno.EIO), str(file))
    return _open(file, *args, **kwargs)

lab.io.storage.open = _open_or_eio
'''


def test_partition_failing_every_attempt_is_retried_then_quarantined(corpus, reference, tmp_path):
    src = tmp_path / "in"
    shutil.copytree(corpus.src, src)
    lines = [json.dumps({"id": f"u{i}", "text": f"Document {i} of a file no worker can read."}) for i in range(5)]
    (src / "unreadable.jsonl").write_text("\n".join(lines) + "\n")  # sorts last: the other keys do not move
    bad_bytes = (src / "unreadable.jsonl").stat().st_size
    config = tmp_path / "config.yaml"
    config.write_text(config_yaml(src))
    (tmp_path / "fault.py").write_text(FAULT)
    faults = tmp_path / "attempts.log"
    r = run_cli("--config", str(config), "--output-dir", str(tmp_path), "--name", "q", "--workers", "2",
                env={"DASK_DISTRIBUTED__WORKER__PRELOAD": json.dumps([str(tmp_path / "fault.py")]),
                     "CORPUS_LAB_FAULT_LOG": str(faults)})
    assert r.returncode == 0, r.stderr
    run = tmp_path / "q"
    m = read_json(run / "manifest.json")
    bad = m["partitions"][-1]
    key = bad["key"]
    assert bad["source"] == "unreadable.jsonl" and bad["status"] == "quarantined"
    assert [p["status"] for p in m["partitions"][:-1]] == ["complete"] * (len(m["partitions"]) - 1)
    # the first attempt and engine.retries more, then no more
    assert len(faults.read_text().splitlines()) == 1 + RETRIES
    # a rejects/ record with the partition, its bytes and the reason
    rej = query.reject_rows(run).filter(query.reject_rows(run)["partition"] == key)
    assert rej.height == 1 and rej["source"][0] == "unreadable.jsonl" and rej["raw_bytes"][0] == bad_bytes
    reason = rej["reason"][0]
    assert f"after {RETRIES} retries" in reason and "OSError" in reason and "Input/output error" in reason
    # the rest completed: the other partitions' files are the reference's, byte for byte
    lay, ref = RunLayout(run), RunLayout(reference)
    for k in (p["key"] for p in m["partitions"][:-1]):
        for a, b in ((lay.part(kind, k), ref.part(kind, k)) for kind in ("docs", "signals", "rejects")):
            assert a.read_bytes() == b.read_bytes(), a
        assert lay.signatures(k).read_bytes() == ref.signatures(k).read_bytes()
    assert not lay.part("docs", key).exists() and not lay.part("signals", key).exists()
    assert (run / "tokens" / "train" / "manifest.json").exists()
    # in = kept + dropped + rejected, in documents and in bytes; the quarantined partition is 1 record
    f = query.funnel(run, load(run / "config.yaml"))
    assert f["docs_in"][0] == f["docs_out"][-1] + f["docs_dropped"].sum()
    assert f["bytes_in"][0] == f["bytes_out"][-1] + f["bytes_dropped"].sum()
    assert m["totals"]["rejected"] == 3 + 1 and m["totals"]["rejected_bytes"] == 819 + bad_bytes
    assert f["docs_in"][0] == m["totals"]["docs"] + m["totals"]["rejected"] == 461 + 3 + 1
    # the summary says which partition, where from and why
    assert "1 partition(s) quarantined" in r.stderr
    assert f"partition {key} (unreadable.jsonl): partition failed after {RETRIES} retries" in r.stderr
    assert "Traceback" not in r.stderr


# --- a full disk -----------------------------------------------------------------------------------


def _annotate_bytes(run: Path) -> int:
    """What the annotate step's files (every partition's) take on a tmpfs: whole 4 KiB pages."""
    lay = RunLayout(run)
    keys = [p["key"] for p in read_json(run / "manifest.json")["partitions"]]
    return sum(-(-f.stat().st_size // 4096) * 4096 for k in keys for f in lay.partition_files(k) if f.exists())


def test_full_disk_is_a_clear_error_and_the_rerun_resumes(corpus, reference, tmp_path, mount_namespace):
    ns = mount_namespace
    if ns is None:
        pytest.skip("cannot mount a size-limited tmpfs here (no unshare, or neither root nor user namespaces)")
    disk = tmp_path / "disk"
    disk.mkdir()
    small = _annotate_bytes(reference) // 2 // 4096 * 4096  # full about halfway through annotate
    big = 64 * 2**20
    run = disk / "full"  # one worker: the full disk, not the cluster, is the point (the reference ran on two)
    cmd = " ".join([*CLI, "--config", str(corpus.config), "--output-dir", str(disk), "--name", "full", "--workers", "1"])
    # one private mount namespace: nothing leaks to the host, the tmpfs is gone when the script ends
    script = f"""
        set -u
        mount -t tmpfs -o size={small} tmpfs {disk} || exit 90
        {cmd} >{tmp_path}/out1 2>{tmp_path}/err1; echo $? >{tmp_path}/rc1
        cp -a {run} {tmp_path}/after-failure
        mount -o remount,size={big} {disk} || exit 91
        {cmd} >{tmp_path}/out2 2>{tmp_path}/err2; echo $? >{tmp_path}/rc2
        cp -a {run} {tmp_path}/after-rerun
    """
    r = run_group([*ns, "sh", "-c", script], timeout=480)
    assert r.returncode == 0, r.stdout + r.stderr
    err1 = (tmp_path / "err1").read_text()
    assert (tmp_path / "rc1").read_text().strip() == "5", err1  # 5: a full disk (free space, rerun)
    # one clear line: the condition, the path, what to do; no traceback
    assert "Traceback" not in err1, err1
    lines = [line for line in err1.splitlines() if line.strip()]
    assert len(lines) == 1, err1
    assert lines[0].startswith(f"corpus-lab: error: no space left on device writing {run}/"), err1
    assert "--output-dir" in lines[0] and "resumes" in lines[0]
    # nothing half-written: no temporary file, and every file there is the reference's, byte for byte
    failed = tmp_path / "after-failure"
    left = run_files(failed)
    assert not [f for f in left if Path(f).name.startswith(".tmp-")], left
    assert not (failed / "manifest.json").exists()
    done = [f for f in left if f.startswith("stats/part-")]
    assert 0 < len(done) < len(read_json(reference / "manifest.json")["partitions"]), done
    differ = [f for f in left if deterministic(f) and (failed / f).read_bytes() != (reference / f).read_bytes()]
    assert not differ, differ
    # a complete partition has every file; the rerun runs the others and reuses these
    lay = RunLayout(failed)
    for f in done:
        key = f.split("-")[1].split(".")[0]
        assert all(p.exists() for p in lay.partition_files(key)), key
    assert (tmp_path / "rc2").read_text().strip() == "0", (tmp_path / "err2").read_text()
    rerun = tmp_path / "after-rerun"
    for f in done:  # reused as they were (cp -a keeps modification times)
        assert (rerun / f).stat().st_mtime_ns == (failed / f).stat().st_mtime_ns, f
    assert_same_run(rerun, reference)


def test_a_scheduler_without_workers_is_a_clear_error(tmp_path):
    """No workers: a one-line error naming the fix, before any work (no run directory)."""
    info = tmp_path / "scheduler.json"
    sched = spawn([DASK, "scheduler", "--host", "127.0.0.1", "--port", "0", "--scheduler-file", str(info),
                   "--no-dashboard"], tmp_path / "scheduler.log")
    try:
        address = wait_for(lambda: info.exists() and info.stat().st_size and json.loads(info.read_text())["address"],
                           120, "the dask scheduler to start")
        cfg = tmp_path / "c.yaml"
        cfg.write_text(f"inputs: [{{path: {tmp_path}}}]\nengine: {{workers_timeout: 2}}\n")
        r = run_cli("--config", str(cfg), "--output-dir", str(tmp_path / "runs"), "--scheduler", address)
        assert r.returncode == 2 and "Traceback" not in r.stderr
        assert f"engine.scheduler={address!r} has no workers after 2 s" in r.stderr and "dask worker" in r.stderr
        assert not (tmp_path / "runs").exists()
    finally:
        kill_group(sched)
