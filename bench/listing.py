"""What the driver holds while it lists a large corpus: ``--files`` one-line files in directories of 1,000,
listed, cut into partitions and hashed (``lab.steps.prepare`` and ``lab.steps.fingerprints``: the driver's
work before the first task), in a process of its own whose peak RSS GNU time reports.

With ``--store`` the files are objects under one prefix of an S3-compatible server (moto's, started in this
process, the objects put straight into its backend), and the driver lists them over HTTP by URL, a page of
1,000 at a time. Moto sorts every key of the bucket for each page (a million objects: hours); here it keeps
the sorted names between pages (``_paged``), which changes its speed, not its answers.

    .venv/bin/python bench/listing.py --files 1000000 [--dir bench/out/listing] [--out bench/out/listing.json]
    .venv/bin/python bench/listing.py --store --files 1000000 --out bench/out/listing_store.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gnu_time import gnu_time  # noqa: E402

DRIVER = """
import sys, time
from lab import steps
from lab.config import Config, InputConfig
t = time.time()
cfg = Config(name="listing", output_dir=sys.argv[2], inputs=(InputConfig(path=sys.argv[1]),))
layout, parts, listing = steps.prepare(cfg, overwrite=True)
listed = time.time() - t
fps = steps.fingerprints(layout, parts, listing)
print(f"files {sum(len(f) for f in listing.files)} partitions {len(parts)} listed_s {listed:.1f} "
      f"hashed_s {time.time() - t - listed:.1f}")
"""


def make(root: Path, files: int) -> None:
    marker = root / ".made"
    if marker.exists() and marker.read_text() == str(files):
        return
    for d in range(0, files, 1000):
        sub = root / f"d{d // 1000:04d}"
        sub.mkdir(parents=True, exist_ok=True)
        for i in range(d, min(d + 1000, files)):
            with open(sub / f"{i:07d}.jsonl", "w") as f:
                f.write('{"text": "record %d"}\n' % i)
    marker.write_text(str(files))


def _paged(backend) -> None:
    """Moto's ``list_objects_v2`` for a listing without delimiter, answered from the bucket's key names sorted
    once (the same pages, tokens and truncation as moto's own)."""
    import bisect

    from moto.utilities.utils import md5_hash

    original = backend.list_objects_v2
    names: dict[tuple[str, str], list[str]] = {}

    def list_objects_v2(bucket, prefix, delimiter, continuation_token, start_after, max_keys):
        if delimiter:
            return original(bucket, prefix, delimiter, continuation_token, start_after, max_keys)
        key = (bucket.name, prefix or "")
        if key not in names or len(names[key]) > len(bucket.keys):
            names[key] = sorted(n for n in bucket.keys.keys() if n.startswith(prefix or ""))
        found = names[key]
        limit = backend._pagination_tokens.get(continuation_token) if continuation_token else start_after
        at = bisect.bisect_right(found, limit) if limit else 0
        page = found[at:at + max_keys]
        truncated = at + max_keys < len(found)
        token = None
        if truncated:
            token = md5_hash(page[-1].encode("utf-8")).hexdigest()
            backend._pagination_tokens[token] = page[-1]
        return [bucket.keys[n] for n in page], truncated, token

    backend.list_objects_v2 = list_objects_v2


def store(files: int) -> tuple[object, dict]:
    """A moto S3 server on a free port holding ``files`` one-line objects under ``s3://listing/in/``."""
    import os
    import socket

    from moto.s3.models import s3_backends
    from moto.server import ThreadedMotoServer

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    import logging

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    backend = s3_backends["123456789012"]["global"]
    _paged(backend)
    backend.create_bucket("listing", "us-east-1")
    for i in range(files):
        backend.put_object("listing", f"in/d{i // 1000:04d}/{i:07d}.jsonl", b'{"text": "record %d"}\n' % i)
    endpoint = f"http://127.0.0.1:{port}"
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
           "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": endpoint, "FSSPEC_S3_ENDPOINT_URL": endpoint}
    return server, env


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--files", type=int, default=1_000_000)
    ap.add_argument("--dir", default="bench/out/listing")
    ap.add_argument("--out", default="bench/out/listing.json")
    ap.add_argument("--store", action="store_true", help="list objects of a local S3-compatible server instead")
    args = ap.parse_args()
    root = Path(args.dir).resolve()
    started = time.time()
    server, env = None, None
    if args.store:
        server, env = store(args.files)
        where = "s3://listing/in"
    else:
        make(root / "in", args.files)
        where = str(root / "in")
    made = time.time() - started
    r, wall, rss = gnu_time([sys.executable, "-c", DRIVER, where, str(root / "runs")], env=env)
    if server is not None:
        server.stop()
    if r.returncode != 0:
        raise SystemExit(r.stderr[-3000:])
    out = {"files": args.files, "where": "s3 (moto)" if args.store else "local disk", "make_s": round(made, 1), "driver": r.stdout.strip(), "wall_s": wall,
           "max_rss_mb": rss}
    print(out)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
