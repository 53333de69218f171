"""bench/: one entry point lists every benchmark, each figure of bench/RESULTS.md names a benchmark that
exists, every script compiles and answers ``--help``. No benchmark is run."""

from __future__ import annotations

import ast
import importlib.util
import py_compile
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
RUN = BENCH / "run.py"
SCRIPTS = sorted(BENCH.glob("*.py"))


def _entry(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(RUN), *args], check=False, cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)


def _run_module():
    spec = importlib.util.spec_from_file_location("bench_run", RUN)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def listing() -> dict[str, str]:
    """``run.py --list``: benchmark -> its block of lines (description, backs, role, venv)."""
    r = _entry("--list")
    assert r.returncode == 0, r.stderr
    blocks: dict[str, str] = {}
    name = None
    for line in r.stdout.splitlines():
        if line and not line[0].isspace():
            name = line.split()[0]
            blocks[name] = line
        else:
            assert name is not None, r.stdout
            blocks[name] += "\n" + line
    return blocks


def _uses_argparse(path: Path) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return any(isinstance(n, ast.Import) and any(a.name == "argparse" for a in n.names) for n in ast.walk(tree))


def test_list_names_every_benchmark_but_the_helpers(listing):
    helpers = _run_module().HELPERS
    assert all((BENCH / f"{h}.py").exists() for h in helpers), "a helper named in run.py is not in bench/"
    assert sorted(listing) == sorted(p.stem for p in SCRIPTS if p.stem not in helpers)
    for name, block in listing.items():
        first = block.splitlines()[0]
        assert len(first.split(maxsplit=1)) == 2, f"{name}: no description (module docstring)"
        assert "backs: " in block or "role: " in block, f"{name} backs no figure of RESULTS.md and has no role"


def _table() -> list[list[str]]:
    """The rows (cells) of RESULTS.md's table of current figures."""
    lines = (BENCH / "RESULTS.md").read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    return rows


def test_every_figure_names_a_listed_benchmark(listing):
    rows = _table()
    assert len(rows) >= 20
    for cells in rows:
        assert len(cells) == 5, f"not what | figure | compared with | measured | command: {cells}"
        names = re.findall(r"bench/run\.py\s+([A-Za-z_]\w*)", cells[-1])
        assert names, f"no `bench/run.py NAME` in the command of {cells[0]!r}"
        for name in names:
            assert name in listing, f"{cells[0]!r} runs {name!r}, which --list does not name"


def test_sections_cited_are_in_the_journal():
    """Every "§N" that RESULTS.md, the README, the docs, lab/ or apps/ cite of the journal is a section of
    bench/HISTORY.md (the journal moved there unchanged)."""
    journal = (BENCH / "HISTORY.md").read_text(encoding="utf-8")
    sections = set(re.findall(r"^#{2,4} (\d+)[a-z]?\. ", journal, re.MULTILINE))
    assert {str(n) for n in range(1, 34)} <= sections
    results = (BENCH / "RESULTS.md").read_text(encoding="utf-8")
    cited = {(Path("bench/RESULTS.md"), n) for n in re.findall(r"§(\d+)", results)}
    files = [ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / "lab").rglob("*.py"),
             *(ROOT / "apps").rglob("*.py"), *SCRIPTS]
    pattern = re.compile(r"(?:RESULTS|HISTORY)\.md`{0,2}\)?,?\s*§\s*(\d+)")
    for f in files:
        if f.exists():
            cited |= {(f.relative_to(ROOT), n) for n in pattern.findall(f.read_text(encoding="utf-8"))}
    assert cited
    missing = sorted((str(f), n) for f, n in cited if n not in sections)
    assert not missing, f"cited sections not in bench/HISTORY.md: {missing}"


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_script_compiles(script, tmp_path):
    py_compile.compile(str(script), cfile=str(tmp_path / "out.pyc"), doraise=True)


@pytest.fixture(scope="module")
def helps(listing) -> dict[str, subprocess.CompletedProcess]:
    """``run.py NAME --help`` of every listed benchmark that parses its arguments with argparse, two at a time."""
    names = [n for n in listing if _uses_argparse(BENCH / f"{n}.py")]
    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(names, pool.map(lambda n: _entry(n, "--help", timeout=120), names)))


def test_every_listed_benchmark_parses_its_arguments(listing):
    assert [n for n in listing if not _uses_argparse(BENCH / f"{n}.py")] == []


@pytest.mark.parametrize("name", sorted(p.stem for p in SCRIPTS if p.stem not in _run_module().HELPERS))
def test_help_through_the_entry_point(helps, name):
    if name not in helps:
        pytest.skip(f"{name} does not use argparse")
    r = helps[name]
    assert r.returncode == 0, f"{name} --help: exit {r.returncode}\n{r.stderr[-3000:]}"
    assert r.stdout.startswith("usage: "), r.stdout[:500]


def test_entry_point_refuses_an_unknown_name_and_runs_as_a_module():
    assert _entry("no_such_benchmark").returncode != 0
    r = subprocess.run([sys.executable, "-m", "bench", "ftz_speed", "--help"], check=False, cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.startswith("usage: "), r.stderr[-2000:]
