import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("PYTHONPATH", str(ROOT))


import contextlib  # noqa: E402
import fcntl  # noqa: E402

import pytest  # noqa: E402

# Runs that tests only read are built once per session, in this process (``engine.run(cfg,
# client="inprocess")``: the same bytes as on a LocalCluster, tests/test_cluster.py holds them equal).
# Tests that write into a run work on a copy (shutil.copytree keeps the mtimes a rerun compares).
# With several test processes (pytest -n), "once per session" is once for all of them: ``built_once``.


@contextlib.contextmanager
def built_once(tmp_path_factory, name: str):
    """``with built_once(tmp_path_factory, name) as (path, todo):`` -- a directory ``path`` shared by the
    session's test processes; ``todo`` is true in the one process that must build it, the others wait
    (flock) until it has been built and then read it as it is."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # basetemp/popen-gwN: the parent is the run's, common to every worker
    path = base / f"shared-{name}"
    done = base / f"shared-{name}.done"
    with open(base / f"shared-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or when the process dies
        todo = not done.exists()
        if todo:
            import shutil

            shutil.rmtree(path, ignore_errors=True)  # left by a process that died while building it
            path.mkdir()
        yield path, todo
        if todo:
            done.touch()


@pytest.fixture(scope="session")
def synthetic_src(tmp_path_factory) -> Path:
    """The synthetic part of the embedded sample (``lab.sample``): its documents.jsonl, broken.jsonl,
    truncated.jsonl.gz and pages.warc.gz, built once per session."""
    from lab import sample

    with built_once(tmp_path_factory, "data") as (root, todo):
        if todo:
            sample.build(root=root / "sample", real=False)
    return root / "sample" / "synthetic"


@pytest.fixture(scope="session")
def synthetic_run_dir(synthetic_src, tmp_path_factory) -> Path:
    """A run of the synthetic sample under the default config, built once per test session for the
    tests that only read a run (engine, dashboard, browser, notebooks, query, labels, knobs)."""
    from lab import engine
    from lab.config import Config, EngineConfig, InputConfig

    with built_once(tmp_path_factory, "synthetic-run") as (out, todo):
        cfg = Config(name="synthetic", output_dir=str(out), inputs=(InputConfig(path=str(synthetic_src)),),
                     engine=EngineConfig(n_workers=1))
        if todo:
            engine.run(cfg, progress=False, client=engine.INPROCESS)
    return cfg.run_dir


def tokens_config(src: Path, out: Path, name: str, workers: int = 1, partition_bytes: int = 1 << 26):
    """The synthetic sample with a small tokenizer (3000), short sequences (512) and small shards (64
    sequences), so that tokens/ is written in a few seconds."""
    from lab.config import Config, EngineConfig, IngestConfig, InputConfig, PackConfig, TokenizerConfig

    return Config(name=name, output_dir=str(out), inputs=(InputConfig(path=str(src)),),
                  ingest=IngestConfig(partition_bytes=partition_bytes), tokenizer=TokenizerConfig(vocab_size=3000),
                  pack=PackConfig(seq_len=512, val_fraction=0.1, shard_sequences=64),
                  engine=EngineConfig(n_workers=workers))


@pytest.fixture(scope="session")
def make_tokens_config():
    """``tokens_config`` as a fixture: test modules take it from here rather than importing ``conftest``,
    a module name that each test folder's conftest claims."""
    return tokens_config


@pytest.fixture(scope="session")
def tokens_run(synthetic_src, tmp_path_factory):
    """The config of a run of the synthetic sample with ``tokens_config`` (one partition), built once per
    session for the tokens, fertility and planner tests."""
    from lab import engine

    with built_once(tmp_path_factory, "tokens-run") as (out, todo):
        cfg = tokens_config(synthetic_src, out, "tokens")
        if todo:
            engine.run(cfg, progress=False, client=engine.INPROCESS)
    return cfg


@pytest.fixture(scope="session")
def corpus_lab():
    """``corpus_lab(*args)``: ``corpus-lab ARGS`` run in this process (``lab.cli.main``: its parsing, output
    and exit status) as a ``subprocess.CompletedProcess``, for the tests where a process of its own (a
    second of start-up and imports) is not the point."""
    import io
    import subprocess

    from lab.cli import main

    def run(*args) -> subprocess.CompletedProcess:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main([str(a) for a in args])
            except SystemExit as e:  # argparse's usage errors
                code = e.code if isinstance(e.code, int) else 1
        return subprocess.CompletedProcess(list(args), code, out.getvalue(), err.getvalue())

    return run


@pytest.fixture(scope="session")
def local_cluster(tmp_path_factory):
    """A LocalCluster of 2 one-thread worker processes (``engine.client_for``: the settings of
    ``corpus-lab run``) and its client, started once per test process for the tests that need real
    workers but not a cluster of their own: ``engine.run(cfg, client=local_cluster)``."""
    from lab import engine
    from lab.config import Config, EngineConfig

    cfg = Config(name="cluster", output_dir=str(tmp_path_factory.mktemp("cluster")), engine=EngineConfig(n_workers=2))
    with engine.client_for(cfg) as client:
        yield client


@pytest.fixture(scope="session")
def mount_namespace():
    """How to run a command in a private mount namespace where it may mount a tmpfs (a full disk, a read-only
    filesystem): as root ``unshare --mount``, otherwise a user namespace mapping this user to root; None if
    neither works here."""
    import shutil
    import subprocess

    if not shutil.which("unshare"):
        return None
    probe = "d=$(mktemp -d) && mount -t tmpfs -o size=1m tmpfs $d && umount $d && rmdir $d"
    for prefix in (["unshare", "--mount"], ["unshare", "--user", "--map-root-user", "--mount"]):
        if prefix == ["unshare", "--mount"] and os.geteuid() != 0:
            continue
        try:
            if subprocess.run([*prefix, "sh", "-c", probe], capture_output=True, timeout=60, check=False).returncode == 0:
                return prefix
        except (OSError, subprocess.TimeoutExpired):
            pass
    return None


# --- several test processes (pytest -n N --dist loadfile, pyproject's addopts) ------------------------
# Each test file is one unit of work, so its module fixtures (a dashboard server, a cluster run) are
# built once; the longest files are handed out first, so that the processes finish together.
LONGEST_FIRST = ("test_cluster.py", "test_browser.py", "test_cli.py", "test_query_browse.py", "test_engine.py",
                 "test_notebooks.py", "test_docs.py", "test_near_dedup.py", "test_tokens.py", "test_labels.py")  # measured wall times


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the order within a file stays
