"""storage: where an input lives, a local path or a URL (``s3://``, ``gs://``, ``az://``, ``file://``, any
filesystem fsspec knows), and the few things the readers need of it: open, size, join, and a tag that
changes when the content does.

Local paths keep the plain ``open`` and ``os`` calls. A URL goes through fsspec; its protocol's package
(``s3fs``, ``gcsfs``, ``adlfs``: ``pip install corpus-lab[s3]`` and so on) reads credentials from the
library's usual environment variables and files: nothing secret is written to the config or the run.

>>> is_url("s3://bucket/a.jsonl"), is_url("/data/a.jsonl"), is_url("C:/data")
(True, False, False)
>>> join("s3://bucket/corpus", "de/a.jsonl"), join("/data", "a.jsonl")
('s3://bucket/corpus/de/a.jsonl', '/data/a.jsonl')
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from typing import IO, Any

from lab.errors import ConfigError

_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]+://")
EXTRAS = {"s3": "s3", "s3a": "s3", "gs": "gcs", "gcs": "gcs", "az": "azure", "abfs": "azure", "abfss": "azure"}


def is_url(path: str) -> bool:
    """Whether ``path`` names a place through a protocol (two or more letters, so a Windows drive is not one)."""
    return bool(_SCHEME.match(path))


def join(root: str, rel: str) -> str:
    return root.rstrip("/") + "/" + rel if is_url(root) else os.path.join(root, rel)


def filesystem(url: str) -> tuple[Any, str]:
    """(fsspec filesystem, path within it) of a URL; a clear error when its protocol's package is missing."""
    import fsspec

    try:
        return fsspec.core.url_to_fs(url)
    except ImportError as e:
        proto = url.split("://", 1)[0]
        extra = EXTRAS.get(proto)
        fix = f"pip install 'corpus-lab[{extra}]'" if extra else f"install the fsspec package for {proto}://"
        raise ConfigError(f"{url!r}: reading {proto}:// needs a package that is not installed ({e}); {fix}") from None


def open_input(path: str) -> IO[bytes]:
    """The file's bytes, seekable and buffered as ``open(path, "rb")`` is (fsspec reads a URL by ranges as the
    reader seeks)."""
    if not is_url(path):
        return open(path, "rb")
    import io

    fs, p = filesystem(path)
    return io.BufferedReader(fs.open(p, "rb"), buffer_size=1 << 20)


def size(path: str) -> int:
    if not is_url(path):
        return os.path.getsize(path)
    fs, p = filesystem(path)
    return int(fs.size(p))


def objects(fs: Any, root: str) -> Iterator[tuple[str, dict]]:
    """(path, info) of every object under the prefix ``root``, a page of the store's listing at a time on S3
    (a million objects are never held at once); through ``fs.find`` on other filesystems."""
    if getattr(fs, "protocol", None) and "s3" in fs.protocol and hasattr(fs, "call_s3"):
        bucket, _, prefix = root.strip("/").partition("/")
        kw = {"Bucket": bucket, "Prefix": prefix}
        while True:
            page = fs.call_s3("list_objects_v2", **kw)
            for c in page.get("Contents", []):
                if not prefix or c["Key"] == prefix or c["Key"].startswith(prefix + "/"):  # the object, or under it
                    yield f"{bucket}/{c['Key']}", {"size": c["Size"], "ETag": c.get("ETag"), "type": "file"}
            if not page.get("IsTruncated"):
                return
            kw["ContinuationToken"] = page["NextContinuationToken"]
    try:
        listed = fs.find(root, detail=True)
    except FileNotFoundError:
        return
    for path, info in listed.items():
        if info.get("type", "file") == "file":
            yield path, info


def tag(info: dict) -> str:
    """What identifies an object's content in a listing: its ETag (or version, or checksum) and size."""
    for key in ("ETag", "etag", "VersionId", "version_id", "md5Hash", "crc32c", "content_md5"):
        if info.get(key):
            return f"{key}:{str(info[key]).strip(chr(34))}:{info.get('size')}"
    return ""


def content_id(url: str) -> tuple[int, str]:
    """(size, what identifies the content) of an object: the store's tag, or the SHA-256 of its bytes where the
    store gives none."""
    import hashlib

    fs, p = filesystem(url)
    info = fs.info(p)
    found = tag(info)
    if not found:
        h = hashlib.sha256()
        with fs.open(p, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        found = "sha256:" + h.hexdigest()
    return int(info.get("size") or 0), found


def source(path: str) -> str | IO[bytes]:
    """What pyarrow reads: a local path as it is (pyarrow opens it), a URL's file opened through fsspec."""
    return open_input(path) if is_url(path) else path
