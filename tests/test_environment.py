"""environment.yml installs what pyproject.toml's runtime dependencies name, at the same bounds: its recipe
(``conda env create`` then ``pip install -e . --no-deps``) gives an environment where ``corpus-lab run`` works."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
CONDA_NAMES = {"python-duckdb": "duckdb"}  # conda-forge's name -> PyPI's


def _spec(dep: str) -> tuple[str, str]:
    """(normalized name, version bound) of a requirement such as ``dask[distributed]>=2024.8``."""
    m = re.match(r"\s*([A-Za-z0-9_.\-]+)(\[[^\]]*\])?\s*((?:>=|==)\s*[^\s#;,]+)?", dep)
    return re.sub(r"[-_.]+", "-", m.group(1)).lower(), (m.group(3) or "").replace(" ", "")


def test_environment_yml_names_every_runtime_dependency_at_its_bound():
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = dict(_spec(d) for d in project["dependencies"])
    wanted["distributed"] = wanted["dask"]  # dask[distributed]: conda installs the two packages
    env = yaml.safe_load((ROOT / "environment.yml").read_text())["dependencies"]
    have = {}
    for d in env:
        for dep in (d["pip"] if isinstance(d, dict) else [d]):
            name, bound = _spec(dep)
            have[CONDA_NAMES.get(name, name)] = bound
    missing = {k: v for k, v in wanted.items() if k not in have}
    assert not missing, f"environment.yml lacks {missing}"
    differ = {k: (v, have[k]) for k, v in wanted.items() if have[k] != v}
    assert not differ, f"bounds differ (pyproject, environment.yml): {differ}"
