import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("PYTHONPATH", str(ROOT))


import pytest  # noqa: E402

# Runs that tests only read are built once per session, in this process (``engine.run(cfg,
# client="inprocess")``: the same bytes as on a LocalCluster, tests/test_cluster.py holds them equal).
# Tests that write into a run work on a copy (shutil.copytree keeps the mtimes a rerun compares).


@pytest.fixture(scope="session")
def synthetic_src(tmp_path_factory) -> Path:
    """The synthetic part of the embedded sample (``lab.sample``): its documents.jsonl, broken.jsonl,
    truncated.jsonl.gz and pages.warc.gz, built once per session."""
    from lab import sample

    return sample.build(root=tmp_path_factory.mktemp("data") / "sample", real=False) / "synthetic"


@pytest.fixture(scope="session")
def synthetic_run_dir(synthetic_src, tmp_path_factory) -> Path:
    """A run of the synthetic sample under the default config, built once per test session for the
    tests that only read a run (engine, dashboard, browser, notebooks, query, labels, knobs)."""
    from lab import engine
    from lab.config import Config, EngineConfig, InputConfig

    cfg = Config(name="synthetic", output_dir=str(tmp_path_factory.mktemp("runs")),
                 inputs=(InputConfig(path=str(synthetic_src)),), engine=EngineConfig(n_workers=1))
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
def tokens_run(synthetic_src, tmp_path_factory):
    """The config of a run of the synthetic sample with ``tokens_config`` (one partition), built once per
    session for the tokens, fertility and planner tests."""
    from lab import engine

    cfg = tokens_config(synthetic_src, tmp_path_factory.mktemp("runs"), "tokens")
    engine.run(cfg, progress=False, client=engine.INPROCESS)
    return cfg
