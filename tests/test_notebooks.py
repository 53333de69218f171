"""The notebooks run top to bottom against a freshly built run of the synthetic sample.

Each notebook is executed by nbclient in a kernel started with this interpreter (the venv's), with
``CORPUS_LAB_RUN`` pointing at the run and the notebook's folder as working directory, as Jupyter
would; the first failing cell fails the test (``CellExecutionError``). The notebooks assert their
own invariants (funnel conservation, batch run == explore funnel, ...). About 5-15 s each.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


@pytest.fixture(scope="module")
def run_dir(synthetic_run_dir):
    return synthetic_run_dir


@pytest.fixture(scope="module")
def jupyter_path(tmp_path_factory):
    """A ``python3`` kernelspec that starts this interpreter; on JUPYTER_PATH it wins over any other."""
    root = tmp_path_factory.mktemp("jupyter")
    spec = root / "kernels" / "python3"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (corpus-lab venv)", "language": "python"}))
    return root


def test_notebooks_are_found():
    # an empty glob would parametrize nothing and pass silently
    assert {"01_explore_thresholds.ipynb", "02_fertility_and_packing.ipynb", "03_dedup_clusters.ipynb",
            "04_export_and_run.ipynb", "05_throughput_planning.ipynb"} <= {p.name for p in NOTEBOOKS}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs(path, run_dir, jupyter_path, monkeypatch):
    nb = nbformat.read(path, as_version=4)
    stored = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and (c.outputs or c.execution_count)]
    assert not stored, f"{path.name} is stored with outputs in cells {stored}: clear them before saving"

    monkeypatch.setenv("CORPUS_LAB_RUN", str(run_dir))
    monkeypatch.setenv("JUPYTER_PATH", str(jupyter_path))
    # one extra cell at the end, in memory only: which interpreter ran the notebook
    nb.cells.append(nbformat.v4.new_code_cell("import sys; print(sys.executable)"))
    client = NotebookClient(nb, kernel_name="python3", timeout=120, startup_timeout=60,
                            resources={"metadata": {"path": str(path.parent)}})
    client.execute()  # raises CellExecutionError at the first failing cell

    assert nb.cells[-1].outputs[0]["text"].strip() == sys.executable
    printed = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert str(run_dir) in printed  # the notebook read the run it was given, not runs/sample
