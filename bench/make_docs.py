"""Build a benchmark set of real, multi-KB English documents from text found offline.

What it measures: nothing; it writes the input for `datatrove_filters.py` (and later for
corpus-lab's own quality stages), so both sides are timed on the same documents.

Sources, all on the machine (what exists varies with the Debian packages installed; the
summary records counts and a sha256 of the output so runs can be compared). Python
packages' METADATA files are deliberately not used: they change whenever a venv changes.

- ``license``      /usr/share/common-licenses/*
- ``copyright``    /usr/share/doc/*/copyright (Debian copyright files)
- ``doc``          README*/NEWS*/*.md/*.rst/*.txt[.gz] at the top of /usr/share/doc/<pkg>/
- ``docstring``    module/class/function docstrings of the standard library, read with
                   ``ast`` (nothing is imported)
- ``python_docs``  the Python manual's reST sources (/usr/share/doc/python3*/html/_sources,
                   Debian package python3-doc), markup stripped with ``rst_text.strip_rst``

Each source file is split into paragraphs (blank-line separated); paragraphs are
de-duplicated globally (licence texts repeat across copyright files) and at most 200,000
characters are taken from one file (a few NEWS files are MBs long), then the files are
shuffled with a fixed seed and their paragraphs are concatenated into documents whose
target size is drawn uniformly from [--min-bytes, --max-bytes] (default 2,000-18,000
bytes, mean ~10 KB). Same machine + same seed = byte-identical output.

Run (main venv):  .venv/bin/python bench/make_docs.py            # -> bench/out/docs_en.jsonl
                  .venv/bin/python bench/make_docs.py --n 200 --out /tmp/small.jsonl
"""

from __future__ import annotations

import argparse
import ast
import collections
import glob
import gzip
import hashlib
import json
import os
import random
import re
import sys
import sysconfig
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rst_text import strip_rst  # noqa: E402

OUT_DIR = Path(__file__).resolve().parent / "out"
MAX_PARAGRAPH = 4000  # chars; longer paragraphs are cut at line boundaries
MAX_PER_FILE = 200_000  # chars taken from one source file, so no single file dominates


def _read(path: str) -> str | None:
    """Text of a (possibly gzipped) file, or None when it is not UTF-8 text."""
    try:
        raw = gzip.open(path).read() if path.endswith(".gz") else open(path, "rb").read()
        return raw.decode("utf-8")
    except (OSError, UnicodeDecodeError, EOFError):
        return None


def _license_units():
    for path in sorted(glob.glob("/usr/share/common-licenses/*")):
        yield path, _read(path)


def _copyright_units():
    for path in sorted(glob.glob("/usr/share/doc/*/copyright")):
        yield path, _read(path)


def _doc_units():
    pattern = re.compile(r"^(README|NEWS|.*\.(md|rst|txt))(\.gz)?$", re.I)
    for pkg in sorted(glob.glob("/usr/share/doc/*/")):
        for name in sorted(os.listdir(pkg)):
            path = os.path.join(pkg, name)
            if pattern.match(name) and os.path.isfile(path) and "changelog" not in name.lower():
                yield path, _read(path)


def _docstring_units():
    stdlib = sysconfig.get_paths()["stdlib"]
    for path in sorted(glob.glob(os.path.join(stdlib, "**", "*.py"), recursive=True)):
        rel = os.path.relpath(path, stdlib)
        if rel.startswith(("test", "site-packages", "idlelib", "lib2to3/tests")):
            continue
        source = _read(path)
        try:
            tree = ast.parse(source or "")
        except (SyntaxError, ValueError):
            continue
        docs = [
            ast.get_docstring(node)
            for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        ]
        yield path, "\n\n".join(d for d in docs if d)


def _python_docs_units():
    roots = sorted({os.path.realpath(p) for p in glob.glob("/usr/share/doc/python3*/html/_sources")})
    for root in roots:
        for path in sorted(glob.glob(os.path.join(root, "**", "*.rst.txt"), recursive=True)):
            text = _read(path)
            yield path, strip_rst(text) if text else None


SOURCES = {
    "license": _license_units,
    "copyright": _copyright_units,
    "doc": _doc_units,
    "docstring": _docstring_units,
    "python_docs": _python_docs_units,
}


def split_paragraphs(text: str) -> list[str]:
    """Blank-line separated paragraphs, long ones cut at line boundaries.

    >>> split_paragraphs("a b\\n\\n\\n  c\\nd  \\n")
    ['a b', '  c\\nd']
    """
    paragraphs = []
    for para in re.split(r"\n\s*\n", text.replace("\r\n", "\n")):
        para = para.strip("\n").rstrip()
        if not re.search(r"[A-Za-z]", para):
            continue
        while len(para) > MAX_PARAGRAPH:
            cut = para.rfind("\n", 0, MAX_PARAGRAPH)
            cut = cut if cut > 0 else MAX_PARAGRAPH
            paragraphs.append(para[:cut].rstrip())
            para = para[cut:].strip("\n")
        if para:
            paragraphs.append(para)
    return paragraphs


def collect_units() -> list[tuple[str, str, list[str]]]:
    """(source kind, path, new paragraphs) for every readable source file, deduplicated."""
    seen: set[bytes] = set()
    units = []
    for kind, reader in SOURCES.items():
        for path, text in reader():
            if not text:
                continue
            fresh, taken = [], 0
            for para in split_paragraphs(text):
                if taken >= MAX_PER_FILE:
                    break
                key = hashlib.blake2b(" ".join(para.split()).encode(), digest_size=16).digest()
                if key not in seen:
                    seen.add(key)
                    fresh.append(para)
                    taken += len(para)
            if fresh:
                units.append((kind, path, fresh))
    return units


def build_docs(n: int, *, seed: int = 0, min_bytes: int = 2000, max_bytes: int = 18000,
               hard_max: int = 20480) -> list[dict]:
    """Up to `n` documents {id, text, source, path}: paragraphs of shuffled source files."""
    rng = random.Random(seed)
    units = collect_units()
    rng.shuffle(units)
    docs: list[dict] = []
    parts: list[str] = []
    size, target, first = 0, rng.randint(min_bytes, max_bytes), None

    def close():
        nonlocal parts, size, target, first
        docs.append({"id": f"en-{len(docs):05d}", "text": "\n\n".join(parts),
                     "source": first[0], "path": first[1]})
        parts, size, target, first = [], 0, rng.randint(min_bytes, max_bytes), None

    for kind, path, paragraphs in units:
        for para in paragraphs:
            n_bytes = len(para.encode()) + 2
            if parts and size >= min_bytes and size + n_bytes > hard_max:
                close()
                if len(docs) == n:
                    return docs
            first = first or (kind, path)
            parts.append(para)
            size += n_bytes
            if size >= target:
                close()
                if len(docs) == n:
                    return docs
    return docs


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=2000, help="documents to write")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--min-bytes", type=int, default=2000)
    parser.add_argument("--max-bytes", type=int, default=18000)
    parser.add_argument("--out", type=Path, default=OUT_DIR / "docs_en.jsonl")
    args = parser.parse_args(argv)

    docs = build_docs(args.n, seed=args.seed, min_bytes=args.min_bytes, max_bytes=args.max_bytes)
    if len(docs) < args.n:
        print(f"warning: only {len(docs)} of {args.n} documents: not enough distinct text "
              f"installed (install python3-doc for ~9 MB more)", file=sys.stderr)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    payload = "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs).encode()
    args.out.write_bytes(payload)

    sizes = [len(d["text"].encode()) for d in docs]
    by_source = collections.Counter(d["source"] for d in docs)
    summary = {
        "out": str(args.out), "docs": len(docs), "seed": args.seed,
        "bytes_total": sum(sizes), "bytes_mean": round(sum(sizes) / max(len(sizes), 1)),
        "bytes_min": min(sizes, default=0), "bytes_max": max(sizes, default=0),
        "docs_by_first_source": dict(sorted(by_source.items())),
        "sha256": hashlib.sha256(payload).hexdigest(),
    }
    args.out.with_suffix(".summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(f"{len(docs)} docs -> {args.out}  ({summary['bytes_total'] / 1e6:.1f} MB, "
          f"mean {summary['bytes_mean']} B, min {summary['bytes_min']}, max {summary['bytes_max']})")
    print(f"{'first source':<14}{'docs':>6}")
    for kind, count in sorted(by_source.items()):
        print(f"{kind:<14}{count:>6}")
    print(f"sha256 {summary['sha256']}")


if __name__ == "__main__":
    main()
