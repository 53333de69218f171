"""A run directory in object storage (``output_dir: s3://...``) on the tests' own S3-compatible server.

The sample with inputs and run in the store gives the run on disk's documents, signals, rejects,
duplicates and tokens byte for byte, and a rerun reuses every step; the query package and the
command line open it by URL. One writer at a time (a lease object written by a conditional put). The
store stopped in the middle of annotate stops the run with an error naming the endpoint, never a
quarantined partition; started again, the rerun resumes. A scheduler and two workers started as
processes of their own, each with its own working directory and ``HOME``, run it with nothing shared
but the store.
"""

from __future__ import annotations

import filecmp
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("s3fs")
pytest.importorskip("moto.server")

from lab import engine, query  # noqa: E402
from lab.cli import main as cli_main  # noqa: E402
from lab.config import Config, EngineConfig, InputConfig  # noqa: E402
from lab.errors import RunStateError, StoreUnreachableError  # noqa: E402
from lab.io.inputs import IngestConfig  # noqa: E402
from lab.io.lock import StoreLease  # noqa: E402

# what a run writes about its own making (timings, what it read, its config): the data is everything else
NOT_DATA = ("stats/", "done.json", "manifest.json", "config.yaml", "inputs.parquet", "tokenizer/fit.json",
            "tokenized/part-", ".lock")
INGEST = IngestConfig(partition_bytes=256 * 1024)  # documents.jsonl in byte ranges: several annotate tasks


def _cfg(output_dir: str, name: str, inputs: str, **engine_kw) -> Config:
    return Config(name=name, output_dir=output_dir, inputs=(InputConfig(path=inputs),), ingest=INGEST,
                  engine=EngineConfig(**engine_kw))


@pytest.fixture(scope="module")
def on_disk(synthetic_src, tmp_path_factory) -> Path:
    """The same run with inputs and run directory on local disk."""
    cfg = _cfg(str(tmp_path_factory.mktemp("disk")), "disk", str(synthetic_src), n_workers=1)
    engine.run(cfg, progress=False, client=engine.INPROCESS)
    return cfg.run_dir


def _data_files(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*")
                  if p.is_file() and not any(x in p.relative_to(root).as_posix() for x in NOT_DATA))


def _assert_same_data(s3, url: str, on_disk: Path, into: Path) -> None:
    """The stored run, fetched whole, holds the run on disk's data files byte for byte."""
    s3.invalidate_cache()
    s3.get(url.removeprefix("s3://"), str(into), recursive=True)
    files = _data_files(on_disk)
    assert len(files) > 20 and _data_files(into) == files
    assert [f for f in files if not filecmp.cmp(on_disk / f, into / f, shallow=False)] == []
    a, b = (json.loads((r / "manifest.json").read_text()) for r in (on_disk, into))
    assert a["funnel"] == b["funnel"] and a["totals"] == b["totals"]


@pytest.fixture(scope="module")
def stored(s3) -> tuple[Config, dict]:
    """The run with inputs and run directory in the store: its config and manifest."""
    cfg = _cfg("s3://runs/whole", "sample", "s3://corpus/synthetic", n_workers=1)
    return cfg, engine.run(cfg, progress=False, client=engine.INPROCESS)


def test_a_run_in_the_store_equals_the_run_on_disk(s3, stored, on_disk, tmp_path, capsys):
    cfg, first = stored
    assert first["last_run"]["partitions_run"] >= 4
    _assert_same_data(s3, "s3://runs/whole/sample", on_disk, tmp_path / "fetched")
    assert not s3.exists("runs/whole/sample/.lock")  # the lease is given back
    again = engine.run(cfg, progress=False, client=engine.INPROCESS)
    assert again["last_run"]["partitions_run"] == 0
    assert {again["last_run"]["steps"][s] for s in ("near_dedup", "boilerplate", "tokenizer", "materialize")} == {"reused"}
    # the query package and the command line open it by URL
    stored = query.funnel("s3://runs/whole/sample", cfg, raw=True)
    assert stored.equals(query.funnel(on_disk, cfg, raw=True))
    assert cli_main(["check", "s3://runs/whole/sample"]) == 0
    assert "every output matches" in capsys.readouterr().out


def test_the_notebooks_and_the_dashboard_open_a_stored_run(s3_server, stored, tmp_path, monkeypatch):
    import nbformat
    from nbclient import NotebookClient

    root = Path(__file__).resolve().parents[2]
    spec = tmp_path / "jupyter" / "kernels" / "python3"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({"argv": [sys.executable, "-m", "ipykernel_launcher", "-f",
                                                           "{connection_file}"], "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.setenv("CORPUS_LAB_RUN", "s3://runs/whole/sample")
    path = root / "notebooks" / "01_explore_thresholds.ipynb"
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, kernel_name="python3", timeout=120, startup_timeout=60,
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    printed = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert "corpus-lab-run-" in printed or "/runs/" in printed  # RUN: a working copy of the stored run
    import socket
    import urllib.request

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "lab.cli", "serve", "s3://runs/whole/sample", "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline, page = time.monotonic() + 120, ""
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=30) as r:
                    page = r.read().decode()
                break
            except OSError:
                time.sleep(0.5)
        assert "corpus-lab" in page, f"no dashboard for the stored run: {proc.poll()=}"
    finally:
        proc.terminate()
        out = proc.communicate(timeout=30)[0]
    assert "s3://runs/whole/sample" in out


def test_one_writer_at_a_time_by_a_lease_in_the_store(s3):
    url = "s3://runs/leased"
    with StoreLease(url):
        holder = json.loads(s3.cat("runs/leased/.lock"))
        assert holder["pid"] == os.getpid() and holder["expires"] > time.time()
        with pytest.raises(RunStateError, match=rf"s3://runs/leased is being written by another run \(process {os.getpid()}"):
            StoreLease(url).__enter__()
        with pytest.raises(RunStateError, match="being written by another run"):
            engine.run(_cfg("s3://runs", "leased", "s3://corpus/synthetic"), progress=False, client=engine.INPROCESS)
    assert not s3.exists("runs/leased/.lock")
    # a holder that died stops renewing: once its lease has run out, the next run takes it over
    s3.pipe("runs/leased/.lock", json.dumps({"pid": 1, "host": "gone", "started": 0, "expires": time.time() - 1,
                                             "token": "dead"}).encode())
    with StoreLease(url) as lease:
        assert json.loads(s3.cat("runs/leased/.lock"))["token"] == lease.token
    assert not s3.exists("runs/leased/.lock")


def test_the_store_stopped_in_annotate_stops_the_run_and_the_rerun_resumes(s3_server, s3, on_disk, tmp_path,
                                                                           monkeypatch):
    cfg = _cfg("s3://runs/fault", "sample", "s3://corpus/synthetic", n_workers=1, retries=0)
    calls = []
    real = engine.annotate_partition

    def annotate_then_stop(*args, **kw):
        calls.append(args[0].key)
        if len(calls) == 3:  # two partitions committed; the store goes away under the third
            s3_server.stop()
        return real(*args, **kw)

    monkeypatch.setattr(engine, "annotate_partition", annotate_then_stop)
    try:
        with pytest.raises(StoreUnreachableError, match=rf"cannot reach the object store at http://127\.0\.0\.1:"
                                                        rf"{s3_server.port}.*rerun the same command"):
            engine.run(cfg, progress=False, client=engine.INPROCESS)
    finally:
        s3_server.start()
    monkeypatch.setattr(engine, "annotate_partition", real)
    s3.invalidate_cache()
    committed = s3.glob("runs/fault/sample/stats/part-*.json")
    assert len(committed) == 2 and not s3.exists("runs/fault/sample/manifest.json")
    again = engine.run(cfg, progress=False, client=engine.INPROCESS)
    assert again["last_run"]["partitions_reused"] >= 2
    assert not any(p["status"] == "quarantined" for p in again["partitions"])
    _assert_same_data(s3, "s3://runs/fault/sample", on_disk, tmp_path / "fetched")


def _spawn(args: list[str], cwd: Path, env: dict) -> subprocess.Popen:
    cwd.mkdir(parents=True, exist_ok=True)
    with open(cwd / "log", "ab") as out:
        return subprocess.Popen(args, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, env=env)


def test_workers_that_share_no_disk_with_the_driver(s3_server, s3, on_disk, tmp_path):
    dask = str(Path(sys.executable).with_name("dask"))
    base = {k: v for k, v in os.environ.items() if k not in ("CORPUS_LAB_CACHE", "HOME")}
    base.update(s3_server.env, OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
    info = tmp_path / "scheduler" / "scheduler.json"
    procs = [_spawn([dask, "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard", "--scheduler-file",
                     str(info), "--idle-timeout", "600"], tmp_path / "scheduler", {**base, "HOME": str(tmp_path / "scheduler")})]
    try:
        deadline = time.monotonic() + 120
        while not (info.exists() and info.stat().st_size):
            assert time.monotonic() < deadline, "the scheduler did not start"
            time.sleep(0.1)
        address = json.loads(info.read_text())["address"]
        homes = [tmp_path / f"machine-{i}" for i in range(2)]
        for home in homes:  # each worker a machine of its own: its own working directory and HOME
            procs.append(_spawn([dask, "worker", address, "--nthreads", "1", "--nworkers", "1", "--no-dashboard",
                                 "--death-timeout", "60", "--local-directory", str(home / "dask")], home,
                                {**base, "HOME": str(home)}))
        cfg = _cfg("s3://runs/shared-nothing", "sample", "s3://corpus/synthetic", scheduler=address, workers_timeout=120)
        m = engine.run(cfg, progress=False)
        assert m["last_run"]["steps"]["executor"] == "scheduler"
        _assert_same_data(s3, "s3://runs/shared-nothing/sample", on_disk, tmp_path / "fetched")
        # the workers wrote in working copies under their own HOME, never in the driver's
        worked = [sorted((h / ".cache" / "corpus-lab" / "runs").rglob("docs/part-*.parquet")) for h in homes]
        assert all(worked), worked
        driver = str(cfg.run_dir)
        assert all(not str(p).startswith(driver) for w in worked for p in w)
    finally:
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait(timeout=60)


def test_store_errors_say_what_to_fix(s3, stored, tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("inputs: [{path: s3://corpus/synthetic}]\nname: errs\n")

    def corpus_lab(*args, env=None):
        return subprocess.run([sys.executable, "-m", "lab.cli", *args], capture_output=True, text=True, timeout=300,
                              env=env or os.environ.copy())

    r = corpus_lab("run", "--config", str(config), "--output-dir", "s3://no-such-bucket/runs", "--no-progress")
    assert r.returncode == 2 and "s3://no-such-bucket/runs/errs cannot be written" in r.stderr
    assert "create the bucket" in r.stderr and "Traceback" not in r.stderr
    bare = {k: v for k, v in os.environ.items() if k not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    bare.update(AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"), AWS_CONFIG_FILE=str(tmp_path / "none"))
    r = corpus_lab("run", "--config", str(config), "--output-dir", str(tmp_path / "runs"), "--no-progress", env=bare)
    assert r.returncode == 2 and "inputs[0].path='s3://corpus/synthetic': the object store has no valid credentials" \
        in r.stderr and "AWS_ACCESS_KEY_ID" in r.stderr and "Traceback" not in r.stderr
    r = corpus_lab("funnel", "s3://runs/whole/nothing-here")
    assert r.returncode == 2 and "'s3://runs/whole/nothing-here' is not a stored run" in r.stderr
    r = corpus_lab("funnel", "s3://runs/whole/sample")
    assert r.returncode == 0 and "near_dedup" in r.stdout
