"""A stage is one module plus one registry line: an example stage added to a copy of the package
shows up in the config, the knobs, the schema, the signals hash, the reference and a run's funnel."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import lab
from lab import config
from lab.stages import REGISTRY, STAGE_NAMES, STAGES

EXAMPLE = '''\
"""shouting: the share of a document's letters that are capitals (an example stage)."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from lab.select.rules import Rule
from lab.fields import check, knob

NAME = "shouting"
VERSION = 1
SOURCE = "an example stage"


@dataclass(frozen=True)
class Config:
    enabled: bool = knob(True, unit="on/off", help="On: a kept document is not mostly capitals.")
    max_upper: float = knob(0.5, unit="fraction of letters",
                            help="A kept document has at most this share of its letters in capitals.")

    def __post_init__(self) -> None:
        check("max_upper", self.max_upper, 0 <= self.max_upper <= 1, "a fraction in [0, 1]")


SIGNALS = {"sh_upper": pa.float64()}


def signals(text: str) -> dict:
    letters = [c for c in text if c.isalpha()]
    return {"sh_upper": sum(c.isupper() for c in letters) / len(letters) if letters else None}


def rules(cfg: Config) -> list[Rule]:
    return [Rule(NAME, "sh_upper", "<=", cfg.max_upper, "shouting")]
'''

PROBE = '''\
import json
import sys

from lab import config, engine, query, reference

from lab.select import knobs
from lab.io.schema import signals_schema
from lab.errors import ConfigError
from lab.stages import shouting

if __name__ == "__main__":  # Dask's worker processes import this file again
    cfg = config.load(sys.argv[1])
    out = {"stages": list(config.to_dict(cfg)["stages"])}
    out["knobs"] = [k.name + ":" + str(k.signal) for k in knobs.knobs(cfg) if k.stage == "shouting"]
    out["schema"] = "sh_upper" in signals_schema().names
    out["reference"] = "stages.shouting.max_upper" in reference.markdown()
    try:
        config.build(config.Config, {"stages": {"shouting": {"max_upper": 2.0}}})
    except ConfigError as e:
        out["error"] = str(e)
    engine.run(cfg, progress=False, client="inprocess")
    f = query.funnel(cfg.run_dir, cfg)
    out["funnel"] = dict(zip(f["stage"].to_list(), f["docs_dropped"].to_list()))
    before = cfg.signals_hash()
    shouting.VERSION += 1
    out["hash_follows_version"] = cfg.signals_hash() != before
    print(json.dumps(out))
'''


def _copy_with_stage(tmp: Path) -> Path:
    """A copy of the lab package with the example stage's module and its one registry line."""
    root = tmp / "pkg"
    shutil.copytree(Path(lab.__file__).parent, root / "lab", ignore=shutil.ignore_patterns("__pycache__"))
    (root / "lab" / "stages" / "shouting.py").write_text(EXAMPLE)
    registry = root / "lab" / "stages" / "__init__.py"
    text = registry.read_text()
    assert text.count('    "fineweb",\n') == 1
    registry.write_text(text.replace('    "fineweb",\n', '    "fineweb",\n    "shouting",\n'))
    return root


def test_registry_is_every_stage_in_funnel_order():
    assert STAGE_NAMES == REGISTRY
    fields = [f for f in config.to_dict(config.Config())["stages"]]
    assert fields == list(REGISTRY)
    assert all(hasattr(m, "VERSION") and hasattr(m, "SIGNALS") and hasattr(m, "rules") for m in STAGES)


def test_an_example_stage_is_one_module_and_one_registry_line(tmp_path):
    root = _copy_with_stage(tmp_path)
    docs = tmp_path / "in.jsonl"
    texts = ["A calm sentence about rivers and the hills beyond them, written in the usual way."] * 3
    texts += ["THIS IS ALL CAPITALS AND IT KEEPS SHOUTING AT THE READER ABOUT NOTHING AT ALL."] * 2
    texts = [t.replace("calm", f"calm {i}").replace("NOTHING", f"NOTHING {i}") for i, t in enumerate(texts)]
    docs.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    cfg = tmp_path / "c.yaml"
    cfg.write_text(textwrap.dedent(f"""\
        name: ex
        output_dir: {tmp_path / "runs"}
        inputs: [{{path: {docs}}}]
        stages:
          language: {{enabled: false}}
          gopher_quality: {{enabled: false}}
          gopher_repetition: {{enabled: false}}
          c4: {{enabled: false}}
          fineweb: {{enabled: false}}
          shouting: {{max_upper: 0.3}}
        tokenizer: {{enabled: false}}
        engine: {{n_workers: 1}}
        """))
    (tmp_path / "probe.py").write_text(PROBE)
    env = {**os.environ, "PYTHONPATH": str(root)}
    p = subprocess.run([sys.executable, str(tmp_path / "probe.py"), str(cfg)], capture_output=True, text=True,
                       env=env, cwd=tmp_path, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["stages"].index("shouting") == out["stages"].index("fineweb") + 1
    assert out["knobs"] == ["shouting.enabled:None", "shouting.max_upper:sh_upper"]
    assert out["schema"] and out["reference"] and out["hash_follows_version"]
    assert "shouting.max_upper=2.0" in out["error"] and "a fraction in [0, 1]" in out["error"]
    assert out["funnel"]["shouting"] == 2  # the two shouting documents, dropped by the new stage
    assert out["funnel"]["fineweb"] == 0
