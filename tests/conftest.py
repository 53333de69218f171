import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("PYTHONPATH", str(ROOT))


import pytest  # noqa: E402


@pytest.fixture(scope="session")
def synthetic_run_dir(tmp_path_factory) -> Path:
    """A run of the synthetic sample under the default config (1 worker), built once per test session
    for the tests that only read a run (dashboard, browser, notebooks)."""
    from lab import engine, sample
    from lab.config import Config, EngineConfig, InputConfig

    syn = sample.build(root=tmp_path_factory.mktemp("data") / "sample", real=False) / "synthetic"
    cfg = Config(name="synthetic", output_dir=str(tmp_path_factory.mktemp("runs")),
                 inputs=(InputConfig(path=str(syn)),), engine=EngineConfig(n_workers=1))
    engine.run(cfg, progress=False)
    return cfg.run_dir
