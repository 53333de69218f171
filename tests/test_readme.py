"""The README's Python examples run as written (on a copy of a real run at runs/sample)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_the_readme_python_api_block_runs(synthetic_run_dir, tmp_path, monkeypatch):
    block = next(b for b in re.findall(r"```python\n(.*?)```", README.read_text(), re.S) if "from lab import config" in b)
    shutil.copytree(synthetic_run_dir, tmp_path / "runs" / "sample")  # labels.add writes into the run
    monkeypatch.chdir(tmp_path)
    names: dict = {}
    exec(compile(block, "README.md", "exec"), names)  # noqa: S102 - the documented example itself
    assert names["members"].height >= 2 and names["docs"].height > 0
    from lab import query

    assert query.labels("runs/sample")["doc_id"].to_list() == [names["doc_id"]]
