"""The benchmarks' one entry point: list them, or run one from the repository root.

    python bench/run.py --list             # every benchmark, what it measures, the current figures it backs
    python bench/run.py NAME [ARGS ...]    # bench/NAME.py ARGS with this interpreter, from the repository root
    python -m bench NAME [ARGS ...]        # the same

``NAME`` is run in place of this process (``os.execv``: the same interpreter, its exit status, its
signals, nothing of this script left in a timing of the command). The benchmarks' current figures, each
with its command, are in ``bench/RESULTS.md``; the measurement journal they come from is
``bench/HISTORY.md``. Only the standard library is used here, so the datatrove venv runs it too
(``bench/.venv-datatrove/bin/python bench/run.py datatrove_filters``).
"""

from __future__ import annotations

import ast
import os
import re
import signal
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
RESULTS = BENCH / "RESULTS.md"

# Modules of bench/ that are not benchmarks: imported by the benchmarks, no command of their own.
HELPERS = {
    "__init__": "makes ``python -m bench`` work",
    "__main__": "``python -m bench NAME``: this entry point",
    "run": "this entry point",
    "gnu_time": "a whole command under GNU time (/usr/bin/time -v): wall seconds and peak RSS",
    "rst_text": "reStructuredText to the text a reader sees (make_docs.py)",
    "single_core": "one-core setup: native thread pools capped at 1, optional pinning, the two clocks",
}

# Benchmarks whose figures are reached through another one, or that build the data others read:
# what they are for, where no row of RESULTS.md names them.
ROLES = {
    "make_docs": "builds bench/out/docs_en.jsonl (and docs_en_pydoc, docs_long): the real documents most figures use",
    "scale_corpus": "builds the scale corpus (bench/out/scale/, 1M documents; --docs 30000 for scale30k)",
    "neardup_corpus": "builds the near-duplicate corpus and its exact ground truth (bench/out/neardup/)",
    "datatrove_pipeline": "datatrove's side of pipeline_ratio and compare_kept",
    "datatrove_minhash": "datatrove's side of minhash_signatures",
}

# Benchmarks that run in a venv of their own, never the main one.
NEEDS = {
    "datatrove_filters": "bench/.venv-datatrove (bash bench/setup_datatrove.sh)",
    "datatrove_pipeline": "bench/.venv-datatrove (bash bench/setup_datatrove.sh)",
    "datatrove_minhash": "bench/.venv-datatrove (bash bench/setup_datatrove.sh)",
}

COMMAND = re.compile(r"bench/run\.py\s+([A-Za-z_]\w*)")


def benchmarks() -> list[str]:
    """Every bench/*.py that is a benchmark (every module but the helpers), sorted."""
    return sorted(p.stem for p in BENCH.glob("*.py") if p.stem not in HELPERS)


def description(name: str) -> str:
    """The first sentence of the module docstring's first paragraph, on one line."""
    doc = ast.get_docstring(ast.parse((BENCH / f"{name}.py").read_text(encoding="utf-8"))) or ""
    para = " ".join(doc.split("\n\n")[0].split())
    m = re.match(r"(.+?\.)(\s|$)", para)
    return m.group(1) if m else para


def table_rows(path: Path = RESULTS) -> list[tuple[str, list[str]]]:
    """(what, [benchmark named by each ``bench/run.py NAME`` of its command]) for each row of the
    table of current figures (the first table of RESULTS.md: its last column is the command)."""
    rows, in_table = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("|"):
            if in_table:
                break
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not in_table:  # the header row
            in_table = True
            continue
        if set("".join(cells)) <= set("-: "):  # the separator row
            continue
        what = re.sub(r"[`*]", "", cells[0])
        rows.append((what, COMMAND.findall(cells[-1])))
    return rows


def backs() -> dict[str, list[str]]:
    """Benchmark -> the rows of RESULTS.md whose command runs it."""
    out: dict[str, list[str]] = {}
    for what, names in table_rows():
        for name in dict.fromkeys(names):
            out.setdefault(name, []).append(what)
    return out


def list_benchmarks() -> None:
    figures = backs()
    names = benchmarks()
    width = max(map(len, names))
    for name in names:
        print(f"{name:<{width}}  {description(name)}")
        pad = " " * (width + 2)
        if name in figures:
            print(f"{pad}backs: " + "; ".join(figures[name]))
        if name in ROLES:
            print(f"{pad}role: {ROLES[name]}")
        if name in NEEDS:
            print(f"{pad}runs in: {NEEDS[name]}")


def main(argv: list[str] | None = None, prog: str = "bench/run.py") -> None:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(f"usage: {prog} --list | NAME [ARGS ...]\n\n{__doc__.split(chr(10) * 2)[0]}")
        print("\nbenchmarks: " + " ".join(benchmarks()))
        sys.exit(0 if argv else 2)
    if argv[0] == "--list":
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `--list | head` ends quietly
        list_benchmarks()
        sys.exit(0)
    name, args = argv[0].removesuffix(".py"), argv[1:]
    if name not in benchmarks():
        sys.exit(f"{prog}: no benchmark {argv[0]!r}; {prog} --list names them")
    os.chdir(ROOT)
    script = str(BENCH / f"{name}.py")
    sys.stdout.flush()
    os.execv(sys.executable, [sys.executable, script, *args])


if __name__ == "__main__":
    main()
