"""The README and docs/ say what works: every command in them runs, every link leads somewhere.

Each page's blocks run in order, as a reader types them, in a scratch directory holding a copy of a
real run at ``runs/sample`` (the session's run of the synthetic sample, renamed as ``corpus-lab run``
names the embedded sample's) and a ``.venv`` link, with the venv's ``bin/`` first on ``PATH``. Shell
blocks (bash, sh, console) run with ``bash -euo pipefail``; Python blocks run in this process, each
in a fresh namespace; a YAML block must be a config excerpt that ``lab.config`` accepts (paths it
names may be made by an earlier block of its page). ``NOT_RUN`` lists the few blocks that cannot run
in a test, each with the reason and what checks it instead.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL = ("bash", "sh", "console")
VENV_BIN = Path(sys.executable).parent  # the venv running the tests: its corpus-lab, dask, python

# (page, the block's first line) -> why it is not run as written
NOT_RUN = {
    ("README.md", "bash .ci/setup && .venv/bin/corpus-lab run"):
        "the setup command of a fresh machine (installs into ./.venv, builds data/sample/, runs the whole "
        "sample); CI runs the README's commands on a fresh clone, and the blocks here run on its run",
    ("README.md", "bash .ci/setup --test && .venv/bin/python -m pytest -q"):
        "the test command: CI runs it (.ci/run); here it would run this test again",
    ("README.md", ".venv/bin/corpus-lab serve"):
        "serves until stopped: test_the_serve_block_serves_the_dashboard starts it and reads the page",
    ("README.md", ".venv/bin/jupyter lab notebooks/"):
        "opens JupyterLab until stopped (and the test setup installs no JupyterLab); tests/test_notebooks.py "
        "executes every notebook",
    ("docs/cluster.md", "corpus-lab run --config exported.yaml --scheduler tcp://HOST:8786 --output-dir /shared/runs"):
        "needs a Dask cluster on other machines and a shared filesystem; tests/test_cluster.py runs "
        "`corpus-lab run --scheduler` against a real `dask scheduler` and `dask worker` processes",
    ("docs/cluster.md", "dask scheduler                                                     # on one machine"):
        "starts a scheduler and workers that serve until stopped; tests/test_cluster.py starts them the same way",
    ("docs/cluster.md", "corpus-lab run --config exported.yaml --scheduler tcp://HOST:8786 --output-dir s3://my-bucket/runs"):
        "needs a Dask cluster and a bucket; tests/io/test_stored_run.py runs a scheduler and two workers as "
        "processes of their own, sharing nothing but a local S3-compatible server",
    ("docs/run-layout.md", "corpus-lab run --config chosen.yaml --output-dir s3://my-bucket/runs --scheduler tcp://HOST:8786"):
        "needs a bucket and a cluster; tests/io/test_stored_run.py runs the same commands (run, check, the query "
        "package by URL) against a local S3-compatible server",
    ("docs/design.md", 'tokens = np.memmap("shard-00000.bin", dtype=np.uint16, mode="r").reshape(-1, seq_len)'):
        "a fragment of the shard format (i and seq_len come from the prose); docs/tokens.md runs the same read "
        "on a real shard",
}

# (page, the block's first line) -> a string its output holds
EXPECT = {
    ("README.md", ".venv/bin/corpus-lab funnel runs/sample"): "near_dedup",
    ("README.md", "import dataclasses"): "gopher_quality.too_short",
    ("README.md", ".venv/bin/corpus-lab run --config chosen.yaml --mode batch --workers 2"): "gopher_repetition",
    ("docs/cli.md", "corpus-lab funnel runs/sample --by source"): "source = documents.jsonl",
    ("docs/cli.md", "corpus-lab calibrate runs/sample --min-docs 5"): "lang = en",
    ("docs/stages.md", "corpus-lab funnel runs/sample | grep -E \"gopher_quality|near_dedup\""): "gopher_quality",
    ("docs/run-layout.md", "corpus-lab check runs/sample"): "every output matches what it was made from",
    ("docs/tokens.md", "corpus-lab verify-tokens runs/sample --world 2 --workers 3"): "every token delivered exactly once",
    ("docs/tokens.md", "corpus-lab trace runs/sample --shard 0 --seq 0 --pos 5 --window 6"): "source",
    ("docs/tokens.md", "corpus-lab export-megatron runs/sample --split train --out megatron"): "train_text_document.idx",
    ("docs/tokens.md", "corpus-lab mixture runs/sample --config mixed.yaml"): "documents.jsonl",
    ("docs/planner.md", "from lab.plan import throughput as plan"): "tokens/s per GPU",
    ("docs/python-api.md", "import json"): "inprocess",
}

# pages whose blocks start Dask worker processes (a LocalCluster): not run by the lower-bounds job
CLUSTER_PAGES = {"README.md"}

REGENERATE = ("sed -i '/^<!-- generated: corpus-lab reference -->$/q' docs/config.md && "
              ".venv/bin/corpus-lab reference >> docs/config.md")
MARKER = "<!-- generated: corpus-lab reference -->\n"


@dataclass(frozen=True)
class Block:
    page: str  # relative to the repository
    line: int  # of the opening fence
    lang: str
    text: str

    @property
    def key(self) -> tuple[str, str]:
        return self.page, self.text.splitlines()[0] if self.text.strip() else ""

    def where(self) -> str:
        return f"{self.page}:{self.line} ({self.lang} block)"


FENCE = re.compile(r"^```([\w+-]*)[^\n]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of a page, in order."""
    text = page.read_text()
    rel = str(page.relative_to(ROOT))
    return [Block(rel, text.count("\n", 0, m.start()) + 1, m.group(1).lower(), m.group(2)) for m in FENCE.finditer(text)]


def shell_text(block: Block) -> str:
    """A block's commands: a console block's lines after ``$ `` (the rest is output), else the block."""
    if block.lang != "console":
        return block.text
    return "\n".join(line[2:] for line in block.text.splitlines() if line.startswith("$ "))


@pytest.fixture
def workspace(synthetic_run_dir, tmp_path, monkeypatch) -> Path:
    """A directory as a reader has it after the README's first command: ``runs/sample`` and ``.venv``."""
    from lab import config
    from lab.config import EngineConfig

    ws = tmp_path / "ws"
    shutil.copytree(synthetic_run_dir, ws / "runs" / "sample")  # copytree keeps the mtimes a rerun compares
    cfg_path = ws / "runs" / "sample" / "config.yaml"
    cfg = config.load(cfg_path)  # the sample's name and output directory; engine settings are in no hash
    config.save(dataclasses.replace(cfg, name="sample", output_dir="runs", engine=EngineConfig()), cfg_path)
    (ws / ".venv").symlink_to(VENV_BIN.parent, target_is_directory=True)
    monkeypatch.chdir(ws)
    monkeypatch.setenv("PATH", f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    return ws


def run_shell(block: Block, ws: Path) -> str:
    r = subprocess.run(["bash", "-euo", "pipefail", "-c", shell_text(block)], cwd=ws, capture_output=True, text=True,
                       timeout=300, check=False)
    assert r.returncode == 0, (f"{block.where()} exited {r.returncode}:\n{block.text}\n--- stdout\n{r.stdout[-3000:]}"
                               f"\n--- stderr\n{r.stderr[-3000:]}")
    return r.stdout + r.stderr


def run_python(block: Block) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block.text, block.where(), "exec"), {"__name__": "__docs__"})  # noqa: S102 - the documented example
    return out.getvalue()


def check_yaml(block: Block) -> None:
    """A config excerpt: top-level keys of a config, accepted by ``lab.config`` (in the page's directory)."""
    from lab import config
    from lab.config import Config

    data = yaml.safe_load(block.text)
    known = {f.name for f in dataclasses.fields(Config)}
    assert isinstance(data, dict) and set(data) <= known, (
        f"{block.where()} is not a config excerpt: its top-level keys {sorted(data or [])} must be config keys "
        f"({', '.join(sorted(known))})")
    config.loads(block.text, block.where())  # raises a ConfigError naming the key


@pytest.mark.parametrize("page", [pytest.param(p, id=str(p.relative_to(ROOT)),
                                               marks=[pytest.mark.cluster] if p.name in CLUSTER_PAGES else [])
                                  for p in PAGES])
def test_every_block_of_the_page_runs(page, workspace):
    for block in blocks(page):
        if block.key in NOT_RUN:
            continue
        if block.lang in SHELL:
            out = run_shell(block, workspace)
        elif block.lang == "python":
            out = run_python(block)
        elif block.lang == "yaml":
            check_yaml(block)
            out = ""
        else:
            continue  # text: a listing, not something to run
        want = EXPECT.get(block.key)
        assert want is None or want in out, f"{block.where()}: expected {want!r} in its output:\n{out[-3000:]}"


def test_expectations_and_excuses_name_real_blocks():
    keys = [b.key for p in PAGES for b in blocks(p)]
    for key in [*NOT_RUN, *EXPECT]:
        assert keys.count(key) == 1, f"{key}: names {keys.count(key)} blocks (NOT_RUN and EXPECT name one each)"


def test_every_fenced_block_has_a_language_the_tests_know():
    for page in PAGES:
        for b in blocks(page):
            assert b.lang in (*SHELL, "python", "yaml", "text"), f"{b.where()}: unknown block language {b.lang!r}"


def test_yaml_blocks_parse():
    found = [b for p in PAGES for b in blocks(p) if b.lang == "yaml"]
    assert found
    for b in found:
        assert isinstance(yaml.safe_load(b.text), dict), f"{b.where()} is not a YAML mapping"


def test_the_serve_block_serves_the_dashboard(workspace):
    (block,) = [b for b in blocks(ROOT / "README.md") if b.key[1].endswith("corpus-lab serve")]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(["bash", "-c", f"exec {block.text.strip()} --port {port}"], cwd=workspace,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline, page = time.monotonic() + 120, ""
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=30) as r:
                    assert r.status == 200
                    page = r.read().decode()
                break
            except OSError:
                time.sleep(0.5)
        assert "corpus-lab" in page, f"no dashboard on port {port}: {proc.poll()=}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_config_md_is_the_current_reference():
    from lab import reference

    text = (ROOT / "docs" / "config.md").read_text()
    assert MARKER in text and REGENERATE in text.split(MARKER)[0], "docs/config.md lost its header or its recipe"
    assert text.split(MARKER, 1)[1] == reference.markdown(), (
        f"docs/config.md is not the output of `corpus-lab reference` (a config field changed); regenerate it: {REGENERATE}")


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lowercased, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_relative_link_leads_to_a_file():
    link = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
    for page in PAGES:
        text = FENCE.sub("", page.read_text())
        for target in link.findall(text):
            if re.match(r"[a-z]+:", target):
                continue  # https:, mailto:
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            assert dest.exists(), f"{page.relative_to(ROOT)}: link {target!r} leads nowhere"
            if anchor and dest.suffix == ".md":
                anchors = {_slug(h) for h in re.findall(r"^#+ (.*)$", FENCE.sub("", dest.read_text()), re.MULTILINE)}
                assert anchor in anchors, f"{page.relative_to(ROOT)}: link {target!r}: no such heading in {dest.name}"


def test_the_readme_is_a_page_with_the_two_commands_and_links_every_doc():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    shell = [b.text.strip() for b in blocks(ROOT / "README.md") if b.lang in SHELL]
    setup = [c for c in shell if c.startswith("bash .ci/setup")]
    assert setup == ["bash .ci/setup && .venv/bin/corpus-lab run",
                     "bash .ci/setup --test && .venv/bin/python -m pytest -q"]
    assert setup[1] in (ROOT / ".ci" / "run").read_text(), "CI runs the README's test command (.ci/run)"
    for doc in sorted((ROOT / "docs").glob("*.md")):
        assert f"(docs/{doc.name})" in readme, f"README.md does not link docs/{doc.name}"
