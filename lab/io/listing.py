"""List the files of a run's inputs: every file found is either read or named with why it is not.

An input is a file, a directory (walked recursively) or a glob (``**`` included). The walk follows
symbolic links, as a user who links a folder into a corpus expects, and is safe against loops: a
directory is entered once, however many links lead to it. A file is identified by its device and inode,
so a file reached twice (a link, a hard link, overlapping inputs) is read once, under the first name
met; the others are listed as its duplicates. The walk is depth first in sorted order and the files come
back sorted by their path relative to the input root, so the same tree gives the same listing on every
machine. Skipped, each with its reason: hidden entries (``.name``), broken links, entries the process may
not read, things that are not regular files, directories and files reached twice, and, under an explicit
``format``, files of another kind.
"""

from __future__ import annotations

import os
import re
import stat
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field

from lab.errors import ConfigError, store_error
from lab.io import storage
from lab.io.inputs import InputConfig

JSONL_SUFFIXES = (".jsonl", ".json", ".ndjson")
COMPRESSION_SUFFIXES = (".gz", ".zst", ".zstd")
PARQUET_SUFFIXES = (".parquet", ".pq")
WARC_SUFFIXES = (".warc", ".warc.gz")
TEXT_SUFFIXES = (".txt", ".md", ".rst", ".text", ".html", ".htm")
GLOB_MAGIC = re.compile(r"[*?\[]")


@dataclass
class Listing:
    """What the inputs hold: per input, its root and its files; and every entry that is not read."""

    roots: list[str] = field(default_factory=list)  # per input: the absolute directory its sources are relative to
    files: list[list[tuple[str, int, str]]] = field(default_factory=list)  # per input: (source, bytes, format), sorted
    skipped: list[dict] = field(default_factory=list)  # {"input", "path", "reason"}, in the order met
    _seen: dict[int | str, tuple[int, str]] = field(default_factory=dict, repr=False)  # identity -> (input, source)
    stored: dict[str, tuple[int, str]] = field(default_factory=dict, repr=False)  # object URL -> (size, tag) listed

    def summary(self) -> str:
        """One line for the user, "" when nothing was skipped.

        >>> Listing(skipped=[{"reason": "hidden"}, {"reason": "hidden"}, {"reason": "duplicate of a.jsonl"}]).summary()
        '3 entries under the inputs not read: 2 hidden, 1 duplicate'
        """
        if not self.skipped:
            return ""
        counts: dict[str, int] = {}
        for s in self.skipped:
            kind = s["reason"].split(" (")[0].split(" of ")[0]
            counts[kind] = counts.get(kind, 0) + 1
        what = ", ".join(f"{n} {k}" for k, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
        return f"{len(self.skipped)} entries under the inputs not read: {what}"


def text_name(name: str) -> str:
    r"""A file name as text that any writer takes: bytes that are not UTF-8 (kept by the OS as surrogate escapes)
    become ``\xNN``, so the name stays readable and distinct.

    >>> text_name(b"caf\xe9.txt".decode("utf-8", "surrogateescape")), text_name("café.txt")
    ('caf\\xe9.txt', 'café.txt')
    """
    try:
        name.encode("utf-8")
        return name
    except UnicodeEncodeError:
        return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def format_of(name: str) -> str | None:
    """The format a file name implies, or None when the extension says nothing.

    >>> [format_of(n) for n in ("a.jsonl.zst", "b.warc.gz", "c.parquet", "d.md", "e.csv")]
    ['jsonl', 'warc', 'parquet', 'text', None]
    """
    n = name.lower()
    for c in COMPRESSION_SUFFIXES:
        if n.endswith(c) and n[: -len(c)].endswith(JSONL_SUFFIXES):
            return "jsonl"
    if n.endswith(JSONL_SUFFIXES):
        return "jsonl"
    if n.endswith(PARQUET_SUFFIXES):
        return "parquet"
    if n.endswith(WARC_SUFFIXES):
        return "warc"
    if n.endswith(TEXT_SUFFIXES):
        return "text"
    return None


def _dir_format(requested: str, name: str) -> str | None:
    """Format of a file met in a directory or glob: by extension, other files are text.

    An explicit jsonl/parquet/warc keeps only the files of that kind; explicit text keeps all.
    """
    by_ext = format_of(name)
    if requested == "auto":
        return by_ext or "text"
    if requested == "text":
        return "text"
    return requested if by_ext == requested else None


def _suffixes(fmt: str) -> tuple[str, ...]:
    return {"jsonl": JSONL_SUFFIXES, "parquet": PARQUET_SUFFIXES, "warc": WARC_SUFFIXES}.get(fmt, ("any",))


def list_inputs(inputs: list[InputConfig] | tuple[InputConfig, ...]) -> Listing:
    """The files of every input, in config order, each file once over all of them (see the module docstring).

    Raises ConfigError when an input does not exist, matches no file, or holds no file of its format.
    """
    out = Listing()
    for i, inp in enumerate(inputs):
        root, files = _expand(i, inp, out)
        out.roots.append(root)
        out.files.append(files)
    return out


def _identity(st: os.stat_result) -> int:
    return (st.st_dev << 64) | st.st_ino


def _expand(i: int, inp: InputConfig, out: Listing) -> tuple[str, list[tuple[str, int, str]]]:
    if storage.is_url(inp.path):
        return _expand_url(i, inp, out)
    path = os.path.expanduser(inp.path)
    where = f"inputs[{i}].path={inp.path!r}"
    found: list[tuple[str, int, str]] = []
    skipped_before = len(out.skipped)
    if GLOB_MAGIC.search(path):
        root = _glob_root(path)
        match = _GlobMatch(os.path.abspath(path), root)
        if os.path.isdir(root):
            for rel, st, why in _walk(root, match.descend):
                if not match.wanted(rel, is_dir=st is None and why.startswith("directory")):
                    continue
                _take(i, inp, root, rel, st, why, out, found, named=match.named(rel))
        if not found and not _all_duplicates(out.skipped[skipped_before:]):
            why = f" ({out.skipped[skipped_before]['path']}: {out.skipped[skipped_before]['reason']}, ...)" \
                if len(out.skipped) > skipped_before else ""
            raise ConfigError(f"{where} matches no file that can be read (glob relative to {os.getcwd()}){why}; "
                              "fix the pattern or remove the input")
    elif os.path.isdir(path):
        root = os.path.abspath(path)
        for rel, st, why in _walk(root, lambda _: True):
            _take(i, inp, root, rel, st, why, out, found, named=False)
        if not found and not _all_duplicates(out.skipped[skipped_before:]):
            if len(out.skipped) > skipped_before:
                first = out.skipped[skipped_before]
                raise ConfigError(f"{where} holds no file to read ({len(out.skipped) - skipped_before} skipped, e.g. "
                                  f"{first['path']}: {first['reason']}); point it at a directory with input files"
                                  + (f" (files ending in {', '.join(_suffixes(inp.format))}), or set "
                                     f"inputs[{i}].format to match the files" if inp.format not in ("auto", "text")
                                     else ""))
            raise ConfigError(f"{where} is a directory with no files; point it at a directory with input files")
    elif os.path.isfile(path):
        full = os.path.abspath(path)
        root, rel = os.path.dirname(full), os.path.basename(full)
        fmt = inp.format if inp.format != "auto" else format_of(rel)
        if fmt is None:
            raise ConfigError(
                f"{where}: cannot tell the format of {rel!r} from its extension (known: "
                f"{', '.join(JSONL_SUFFIXES + PARQUET_SUFFIXES + WARC_SUFFIXES + TEXT_SUFFIXES)}, "
                f"JSONL also with {', '.join(COMPRESSION_SUFFIXES)}); set inputs[{i}].format to "
                "jsonl, parquet, text or warc"
            )
        _take(i, inp, root, rel, os.stat(full), "", out, found, named=True, fmt=fmt)
    else:
        raise ConfigError(f"{where} does not exist (relative paths are resolved from {os.getcwd()}); "
                          "fix the path or remove the input")
    found.sort()
    return root, found


def _expand_url(i: int, inp: InputConfig, out: Listing) -> tuple[str, list[tuple[str, int, str]]]:
    """An input named by URL: its objects listed through fsspec, a page at a time (a prefix is walked whole, a
    glob matched as a local one is); each object is identified by its URL, its content by the listing's tag."""
    where = f"inputs[{i}].path={inp.path!r}"
    fs, path = storage.filesystem(inp.path)
    fs.invalidate_cache()  # a listing is of the store as it is now, not as this process saw it before
    found: list[tuple[str, int, str]] = []
    glob = bool(GLOB_MAGIC.search(path))
    if glob:
        root = "/".join(p for p in path.split("/")[: next(k for k, part in enumerate(path.split("/"))
                                                          if GLOB_MAGIC.search(part))])
        match = _GlobMatch(path, root)
    else:
        root = path.rstrip("/")
    base = fs.unstrip_protocol(root)
    listed = 0

    def take(key: str, info: dict, named: bool) -> None:
        rel = key[len(root):].lstrip("/")
        full = storage.join(base, rel)
        if any(part.startswith(".") for part in rel.split("/")):
            out.skipped.append({"input": i, "path": full, "reason": "hidden"})
            return
        if named:  # named by the URL itself, or by the glob: an explicit format applies as is
            fmt = inp.format if inp.format != "auto" else format_of(rel)
            if fmt is None and not glob:
                raise ConfigError(f"{where}: cannot tell the format of {rel!r} from its extension; set "
                                  f"inputs[{i}].format to jsonl, parquet, text or warc")
            fmt = fmt or "text"
        else:
            fmt = _dir_format(inp.format, rel)
        if fmt is None:
            out.skipped.append({"input": i, "path": full, "reason": f"not a {inp.format} file (inputs[{i}].format="
                                                                    f"{inp.format}; its files end in "
                                                                    f"{', '.join(_suffixes(inp.format))})"})
            return
        first = out._seen.get(full)
        if first is not None:
            out.skipped.append({"input": i, "path": full, "reason": f"duplicate of inputs[{first[0]}] {first[1]} "
                                                                    "(the same object, read once)"})
            return
        size = int(info.get("size") or 0)
        out._seen[full] = (i, rel)
        out.stored[full] = (size, storage.tag(info))
        found.append((rel, size, fmt))

    itself = None  # the URL names one object
    try:
        for key, info in storage.objects(fs, root):
            if key.rstrip("/") == root:
                itself = info
                continue
            listed += 1
            if not glob or match.wanted(key[len(root):].lstrip("/"), is_dir=False):
                take(key, info, glob and match.named(key[len(root):].lstrip("/")))
        if not listed and not glob:
            if itself is None:
                raise ConfigError(f"{where} does not exist; fix the URL or remove the input")
            root = path.rpartition("/")[0]
            base = fs.unstrip_protocol(root)
            take(path, itself, True)
    except (OSError, PermissionError) as e:
        raise ConfigError(f"{where} cannot be listed: {e}; check the URL, the endpoint and the credentials") from None
    except Exception as e:  # noqa: BLE001 - a store's client raises errors of its own
        err = store_error(e, where)
        if err is e:
            raise
        raise err from None
    if not found and not _all_duplicates(out.skipped):
        if glob and not listed:
            raise ConfigError(f"{where} does not exist; fix the URL or remove the input")
        raise ConfigError(f"{where} holds no object to read; point it at a prefix or glob with input files")
    found.sort()
    return base, found


def _all_duplicates(skipped: list[dict]) -> bool:
    """Whether an input found files, all of them read under an earlier input (overlapping inputs: fine)."""
    return bool(skipped) and all(s["reason"].startswith("duplicate of") for s in skipped)


def _take(i: int, inp: InputConfig, root: str, rel: str, st: os.stat_result | None, why: str, out: Listing,
          found: list, *, named: bool, fmt: str | None = None) -> None:
    """Add one walked entry to ``found`` or to ``out.skipped``."""
    full = os.path.join(root, rel)
    if st is None:
        out.skipped.append({"input": i, "path": text_name(full), "reason": why})
        return
    if fmt is None:  # named by a glob itself: an explicit format applies as is
        fmt = (inp.format if inp.format != "auto" else format_of(rel) or "text") if named \
            else _dir_format(inp.format, rel)
    if fmt is None:
        out.skipped.append({"input": i, "path": text_name(full), "reason": f"not a {inp.format} file (inputs[{i}].format="
                                                                  f"{inp.format}; its files end in "
                                                                  f"{', '.join(_suffixes(inp.format))})"})
        return
    ident = _identity(st)
    first = out._seen.get(ident)
    if first is not None:
        j, src = first
        out.skipped.append({"input": i, "path": text_name(full),
                            "reason": f"duplicate of inputs[{j}] {text_name(src)} (the same file, read once)"})
        return
    out._seen[ident] = (i, rel)
    found.append((rel, st.st_size, fmt))


def _walk(root: str, descend) -> Iterator[tuple[str, os.stat_result | None, str]]:
    """(path relative to ``root``, stat or None, why not read) of the entries under ``root``, depth first in
    sorted order, following links; a directory is entered once and only when ``descend(relative path)``
    says so. Links are followed after the real tree is walked, so a file or directory reached both ways
    keeps its own name and the link is the duplicate. Skipped directories come with ``why`` starting
    "directory"."""
    try:
        seen = {_identity(os.stat(root))}
    except OSError as e:
        yield "", None, f"directory unreadable ({e.strerror})"
        return
    stack = [""]
    links: deque[str] = deque()  # entries that are symbolic links, visited once the real tree is done
    while stack or links:
        if not stack:
            rel = links.popleft()
            full = os.path.join(root, rel)
            try:
                st = os.stat(full)
            except OSError:
                yield rel, None, "broken link"
                continue
            if stat.S_ISDIR(st.st_mode):
                if descend(rel):
                    ident = _identity(st)
                    if ident in seen:
                        yield rel, None, (f"directory reached twice (link to {os.readlink(full)}: a loop or a "
                                          "second way in, read once)")
                    else:
                        seen.add(ident)
                        stack.append(rel)
            else:
                yield from _file(root, rel, st)
            continue
        rel_dir = stack.pop()
        try:
            with os.scandir(os.path.join(root, rel_dir) if rel_dir else root) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as e:
            yield rel_dir, None, f"directory unreadable ({e.strerror})"
            continue
        subdirs = []
        for e in entries:
            rel = f"{rel_dir}/{e.name}" if rel_dir else e.name
            if e.name.startswith("."):
                yield rel, None, "directory hidden" if _is_dir(e) else "hidden"
                continue
            if e.is_symlink():
                links.append(rel)
                continue
            try:
                st = e.stat()
            except OSError as err:
                yield rel, None, f"unreadable ({err.strerror})"
                continue
            if stat.S_ISDIR(st.st_mode):
                if descend(rel):
                    if _identity(st) in seen:  # a bind mount of a directory above
                        yield rel, None, "directory reached twice (a mount of a directory above it, read once)"
                        continue
                    seen.add(_identity(st))
                    subdirs.append(rel)
            else:
                yield from _file(root, rel, st)
        stack.extend(reversed(subdirs))


def _file(root: str, rel: str, st: os.stat_result) -> Iterator[tuple[str, os.stat_result | None, str]]:
    if not stat.S_ISREG(st.st_mode):
        yield rel, None, "not a regular file"
    elif not os.access(os.path.join(root, rel), os.R_OK):
        yield rel, None, "unreadable (permission denied)"
    else:
        yield rel, st, ""


def _is_dir(entry: os.DirEntry) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def _glob_root(pattern: str) -> str:
    """The directory part of a glob before its first wildcard component."""
    head = []
    for part in pattern.split(os.sep):
        if GLOB_MAGIC.search(part):
            break
        head.append(part)
    return os.path.abspath(os.sep.join(head) or ".")


class _GlobMatch:
    """Which walked entries a glob takes: files matching it, and every file under a directory matching it
    (``data/*`` takes the files of the directories it names); which directories can hold such files."""

    def __init__(self, pattern: str, root: str):
        from fsspec.utils import glob_translate

        self.parts = os.path.relpath(pattern, root).split(os.sep)
        self.full = re.compile(glob_translate("/".join(self.parts)))
        self.prefix = [re.compile(glob_translate("/".join(self.parts[:d]))) for d in range(1, len(self.parts))]
        self.deep = "**" in self.parts
        self._matched: dict[str, bool] = {}

    def _dir_matches(self, rel: str) -> bool:
        hit = self._matched.get(rel)
        if hit is None:
            parent = rel.rpartition("/")[0]
            hit = bool(self.full.match(rel)) or (bool(parent) and self._dir_matches(parent))
            self._matched[rel] = hit
        return hit

    def descend(self, rel: str) -> bool:
        if self.deep or self._dir_matches(rel):
            return True
        depth = rel.count("/") + 1
        return depth <= len(self.prefix) and bool(self.prefix[depth - 1].match(rel))

    def named(self, rel: str) -> bool:
        """Whether the pattern names this file itself (not a directory above it)."""
        return bool(self.full.match(rel))

    def wanted(self, rel: str, *, is_dir: bool) -> bool:
        parent = rel.rpartition("/")[0]
        if is_dir:
            return self.descend(rel)
        return bool(self.full.match(rel)) or (bool(parent) and self._dir_matches(parent))
