"""The README's and docs/python-api.md's Python examples run as written (on a copy of a real run at
runs/sample) and do what their comments say. tests/test_docs.py runs every block of every page; these
look closer at the two that show the API."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def python_block(page: Path, needle: str) -> str:
    return next(b for b in re.findall(r"```python\n(.*?)```", page.read_text(), re.DOTALL) if needle in b)


def run_block(block: str, name: str, synthetic_run_dir, tmp_path, monkeypatch) -> dict:
    shutil.copytree(synthetic_run_dir, tmp_path / "runs" / "sample")  # the examples write labels and configs
    monkeypatch.chdir(tmp_path)
    names: dict = {}
    exec(compile(block, name, "exec"), names)  # noqa: S102 - the documented example itself
    return names


def test_the_readme_tour_block_runs(synthetic_run_dir, tmp_path, monkeypatch):
    from lab import config

    block = python_block(ROOT / "README.md", "from lab import config")
    names = run_block(block, "README.md", synthetic_run_dir, tmp_path, monkeypatch)
    assert names["cut"].height > 0 and set(names["cut"]["stage"]) == {"gopher_quality"}  # the move drops, there
    chosen = config.load(tmp_path / "chosen.yaml")
    assert chosen.stages.gopher_quality.min_words == 300
    assert chosen.name != names["cfg"].name  # the batch run lands beside the explored run, never on it


def test_the_python_api_block_runs(synthetic_run_dir, tmp_path, monkeypatch):
    from lab import query

    block = python_block(ROOT / "docs" / "python-api.md", "from lab import config")
    names = run_block(block, "docs/python-api.md", synthetic_run_dir, tmp_path, monkeypatch)
    assert names["members"].height >= 2 and names["docs"].height > 0
    assert query.labels("runs/sample")["doc_id"].to_list() == [names["doc_id"]]
