"""What a full garbage collection costs the dashboard server, with and without ``gc.freeze()`` of what it
loaded before the first session (RESULTS §11b).

Loads a run in memory as ``corpus-lab serve`` does, optionally freezes, then builds three sessions' pages
(``apps.dashboard.create`` into Bokeh documents) and times ``gc.collect()`` after each.

    .venv/bin/python bench/server_gc.py /tmp/b1m/new           # not frozen
    .venv/bin/python bench/server_gc.py /tmp/b1m/new --freeze
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bokeh.document import Document  # noqa: E402
from panel.io.state import set_curdoc  # noqa: E402

from apps import dashboard  # noqa: E402
from lab import query  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run")
    ap.add_argument("--freeze", action="store_true")
    args = ap.parse_args()
    query.open_run(args.run, in_memory=True)
    if args.freeze:
        gc.collect()
        gc.freeze()
    docs = []
    for i in range(3):
        doc = Document()
        with set_curdoc(doc):
            doc.add_root(dashboard.create(args.run).get_root(doc))
        docs.append(doc)
        t = time.perf_counter()
        gc.collect()
        print(f"sessions {i + 1}: tracked objects {len(gc.get_objects()):,}, frozen {gc.get_freeze_count():,}, "
              f"full collection {1000 * (time.perf_counter() - t):.0f} ms")


if __name__ == "__main__":
    main()
