"""Dashboard latency in a real browser at 1M documents: slider release -> updated funnel, and N sessions.

Builds a run directory of 1M documents whose signals are resampled from ``runs/sample`` (as
bench/funnel_query.py does; 15% of rows exact copies of 5% of the others; the texts of the first
20,000 documents, for the dropped-samples panel), serves it with ``corpus-lab serve`` (a fresh
server per phase, so no phase answers from another's remembered funnels), and drives Debian's
headless Chromium with Playwright, one browser process per session.

A move is one key press on the ``gopher_quality.min_alpha_words_ratio`` slider (a press is a
release: one query), always to a threshold the server has not answered before. Its latency is
measured in the page: from the keydown event to the first animation frame in which the "Kept:"
line names the new config (``config <hash>``, so every move is measured, also one that moves no
document) and the funnel table shows its new numbers (when they changed; the table, the Kept
line and the chart go out in one message). The time the last websocket message before that
frame arrived splits it into server (+ network) and browser.

Each session models a user: it moves, waits until its funnel shows the new numbers, looks at
them for a think time (seeded, uniform in ``--think``, 1-3 s by default), and moves again;
``--think 0,0`` gives the worst case, every session pressing again as soon as its funnel shows.
Before moving, session i presses the ``gopher_quality.min_words`` slider i+1 steps (not
measured), so no two sessions ask for the same config. Phases, each on a fresh server, each
after waiting (up to ``--load-wait`` s) until the 1-minute load is below ``--max-load`` (the
load at start and end is recorded): one session with think time, one without, ``--sessions``
with think time, and ``--sessions`` without. Errors: moves whose funnel did not show within
30 s, an error alert shown, and uncaught errors in the page.

    .venv/bin/python bench/dashboard_latency.py [--rows 1000000] [--moves 30] [--sessions 8] [--think 1,3]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lab.io.run import RunLayout
from lab.io.schema import DOCS_SCHEMA, REJECTS_SCHEMA
from lab.io.writers import write_parquet

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]
CHUNK = 200_000
SLIDER = "gopher_quality.min_alpha_words_ratio"  # dense around its default: most steps move documents
OFFSET = "gopher_quality.min_words"  # moved i+1 steps by session i first: sessions never share a config
TIMEOUT_MS = 30_000

# In the page: the keydown time, the arrival time of every websocket message, and a wait that polls
# once per animation frame (Panel renders into shadow roots: found once, re-found when replaced).
INIT = """
window.__press = 0; window.__msgs = [];
addEventListener('keydown', () => { window.__press = performance.now(); window.__msgs = []; }, true);
const WS = window.WebSocket;
window.WebSocket = function (...a) {
  const s = new WS(...a);
  s.addEventListener('message', () => window.__msgs.push(performance.now()));
  return s;
};
window.WebSocket.prototype = WS.prototype;
Object.assign(window.WebSocket, {CONNECTING: 0, OPEN: 1, CLOSING: 2, CLOSED: 3});
window.__deep = (root, pred) => {
  for (const el of root.querySelectorAll('*')) {
    if (pred(el)) return el;
    if (el.shadowRoot) { const hit = window.__deep(el.shadowRoot, pred); if (hit) return hit; }
  }
  return null;
};
window.__funnel = () => {
  const find = (key, pred) => {
    const el = window[key];
    if (!el || !el.isConnected) window[key] = window.__deep(document, pred);
    return window[key] ? window[key].textContent : null;
  };
  return {kept: find('__kept', (el) => el.tagName === 'P' && el.textContent.startsWith('Kept:')),
          table: find('__table', (el) => el.classList && el.classList.contains('tabulator-table'))};
};
window.__alert = () => {
  const el = window.__deep(document, (el) => el.classList && el.classList.contains('alert-danger')
                                             && el.offsetParent !== null && el.textContent.trim());
  return el ? el.textContent : null;
};
window.__wait = (before, timeout) => new Promise((resolve) => {
  // no polling every frame (8 pages forcing frames would load the 2 cores themselves): observe the
  // shadow roots of the Kept line and the table; a slow timer re-finds replaced ones and times out
  let keptAt = null, tableAt = null, keptPaint = null, tablePaint = null, done = false;
  const roots = new Set();
  const obs = new MutationObserver(() => check());
  const watch = () => {
    for (const el of [window.__kept, window.__table]) {
      const root = el && el.isConnected ? el.getRootNode() : null;
      if (root && !roots.has(root)) {
        roots.add(root);
        obs.observe(root, {subtree: true, childList: true, characterData: true, attributes: true});
      }
    }
  };
  const finish = (r) => { done = true; obs.disconnect(); clearInterval(timer); resolve(r); };
  const check = () => {
    if (done) return;
    const now = performance.now(), f = window.__funnel();
    watch();
    if (keptAt === null && f.kept !== null && f.kept !== before.kept) {
      keptAt = now; requestAnimationFrame(() => { keptPaint = performance.now(); check(); });
    }
    if (tableAt === null && f.table !== before.table) {
      tableAt = now; requestAnimationFrame(() => { tablePaint = performance.now(); check(); });
    }
    const tableSettled = tablePaint !== null || (tableAt === null && keptAt !== null && now - keptAt > 300);
    if (keptPaint !== null && tableSettled) {
      const shown = Math.max(keptAt, tableAt ?? keptAt), painted = Math.max(keptPaint, tablePaint ?? keptPaint);
      const msg = Math.max(...window.__msgs.filter((t) => t <= shown), window.__press);
      finish({ms: painted - window.__press, server_ms: msg - window.__press, browser_ms: painted - msg,
              table_changed: tableAt !== null, alert: window.__alert()});
    } else if (now - window.__press > timeout) {
      finish({ms: null, alert: window.__alert()});
    }
  };
  const timer = setInterval(check, 50);
  check();
});
"""


def build_run(src: Path, root: Path, rows: int, seed: int = 0) -> Path:
    """A run directory of ``rows`` documents resampled from the run ``src``."""
    lay, s = RunLayout(root), RunLayout(src)
    lay.make()
    sig = pa.concat_tables(pq.read_table(p) for p in sorted(s.signals.glob("part-*.parquet")))
    docs = pa.concat_tables(pq.read_table(p) for p in sorted(s.docs.glob("part-*.parquet")))
    text_of = dict(zip(docs.column("doc_id").to_pylist(), docs.column("text").to_pylist()))
    rng = np.random.default_rng(seed)
    for i, start in enumerate(range(0, rows, CHUNK)):
        n = min(CHUNK, rows - start)
        idx = rng.integers(0, sig.num_rows, n)
        t = sig.take(idx)
        src_ids = t.column("doc_id").to_pylist()
        ids = (np.arange(start, start + n, dtype=np.int64) * 2654435761) % (2**62)
        uniq = rng.integers(0, 2**62, n)
        hashes = np.where(rng.random(n) < 0.15, uniq[rng.integers(0, max(n // 20, 1), n)], uniq)
        t = t.set_column(t.schema.get_field_index("doc_id"), "doc_id", pa.array(ids))
        t = t.set_column(t.schema.get_field_index("content_hash"), "content_hash", pa.array(hashes))
        write_parquet(t, lay.part("signals", f"{i:05d}"))
        k = max(0, min(n, 20_000 - start))
        d = {"doc_id": ids[:k].tolist(), "source": t.column("source").to_pylist()[:k], "locator": list(range(k)),
             "url": [""] * k, "record_id": [""] * k, "text": [text_of[x] for x in src_ids[:k]]}
        write_parquet(pa.table(d, schema=DOCS_SCHEMA), lay.part("docs", f"{i:05d}"))
    write_parquet(REJECTS_SCHEMA.empty_table(), lay.part("rejects", "00000"))
    for f in ("config.yaml", "manifest.json"):
        shutil.copy(src / f, root / f)
    shutil.copy(s.merged_stats, lay.merged_stats)
    return root


def _handle(page, name: str):
    return page.locator(".bk-input-group", has=page.locator(".bk-slider-title", has_text=name + ":")
                        ).locator(".noUi-handle").first


def tree_cpu(root: int) -> float:
    """CPU seconds of the live descendants of process ``root`` (a session's Chromium and driver)."""
    children: dict[int, list[int]] = {}
    stat = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                f = (d / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            children.setdefault(int(f[1]), []).append(int(d.name))
            stat[int(d.name)] = (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
    todo, total = list(children.get(root, [])), 0.0
    while todo:
        pid = todo.pop()
        total += stat.get(pid, 0.0)
        todo += children.get(pid, [])
    return total


def machine_busy() -> tuple[float, float]:
    """(busy, total) CPU time of the whole machine so far, from /proc/stat."""
    f = [float(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return sum(f) - f[3] - f[4], sum(f)  # all but idle and iowait


def session(url: str, index: int, moves: int, think: tuple[float, float], seed: int, ready, out: mp.Queue) -> None:
    """One user: offset its config, wait for the others, then move / wait for the funnel / think."""
    from playwright.sync_api import sync_playwright

    rng = random.Random(seed * 1000 + index)
    res = {"moves": [], "errors": 0, "page_errors": [], "timeouts": 0, "alerts": 0}
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=shutil.which("chromium"), args=ARGS)
        page = b.new_page(viewport={"width": 1400, "height": 1000})
        page.on("pageerror", lambda e: res["page_errors"].append(str(e)[:200]))
        page.add_init_script(INIT)
        page.goto(url, timeout=300_000)
        page.wait_for_selector("text=Kept:", timeout=300_000)

        def press(handle, key: str):
            before = page.evaluate("() => window.__funnel()")
            handle.press(key)
            return page.evaluate("([b, t]) => window.__wait(b, t)", [before, TIMEOUT_MS])

        offset = _handle(page, OFFSET)
        offset.focus()
        for _ in range(index + 1):
            press(offset, "ArrowRight")
        handle = _handle(page, SLIDER)
        handle.focus()
        ready.wait(timeout=900)
        cpu0 = tree_cpu(os.getpid())
        if think[1] > 0:
            page.wait_for_timeout(1000 * rng.uniform(0, think[1]))  # users do not start in step
        for _ in range(moves):
            r = press(handle, "ArrowRight")
            if r["ms"] is None:
                res["timeouts"] += 1
            elif r["alert"]:
                res["alerts"] += 1
            else:
                res["moves"].append(r)
            if think[1] > 0:
                page.wait_for_timeout(1000 * rng.uniform(*think))
        res["browser_cpu_s"] = tree_cpu(os.getpid()) - cpu0
        b.close()
    res["errors"] = res["timeouts"] + res["alerts"] + len(res["page_errors"])
    out.put(res)


def stats(moves: list[dict]) -> dict:
    def pct(xs: list[float], q: float) -> float | None:
        s = sorted(xs)
        return round(s[int(q * (len(s) - 1))], 1) if s else None

    lat = [m["ms"] for m in moves]
    out = {"moves_measured": len(lat), "median_ms": round(statistics.median(lat), 1) if lat else None,
           "p95_ms": pct(lat, 0.95), "max_ms": round(max(lat), 1) if lat else None,
           "table_changed": sum(m["table_changed"] for m in moves)}
    for part in ("server_ms", "browser_ms"):
        xs = [m[part] for m in moves]
        out[part.replace("_ms", "")] = {"median_ms": round(statistics.median(xs), 1) if xs else None,
                                        "p95_ms": pct(xs, 0.95)}
    return out


def load1() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def wait_for_quiet(max_load: float, wait_s: float) -> float:
    """Poll until the 1-minute load is below ``max_load`` (or ``wait_s`` has passed); the load then."""
    deadline = time.time() + wait_s
    while load1() >= max_load and time.time() < deadline:
        time.sleep(5)
    return load1()


def cpu_seconds(pid: int) -> float:
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def phase(root: Path, sessions: int, moves: int, think: tuple[float, float], seed: int, max_load: float,
          load_wait: float) -> dict:
    """A fresh server, ``sessions`` browsers moving at once; the figures of their moves."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "lab.cli", "serve", str(root), "--port", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/"
    try:
        for _ in range(600):
            try:
                urllib.request.urlopen(url, timeout=120).read()
                break
            except OSError:
                time.sleep(0.5)
        load_start = wait_for_quiet(max_load, load_wait)
        ctx = mp.get_context("fork")
        ready, q = ctx.Barrier(sessions + 1), ctx.Queue()
        procs = [ctx.Process(target=session, args=(url, i, moves, think, seed, ready, q)) for i in range(sessions)]
        for p in procs:
            p.start()
        ready.wait(timeout=900)  # every page loaded and offset: the measured moves start now
        cpu0, t0, busy0 = cpu_seconds(server.pid), time.time(), machine_busy()
        results = [q.get() for _ in procs]
        cpu, wall, busy1 = cpu_seconds(server.pid) - cpu0, time.time() - t0, machine_busy()
        for p in procs:
            p.join()
    finally:
        server.terminate()
        server.wait(timeout=60)
    moves_all = [m for r in results for m in r["moves"]]
    return {"sessions": sessions, "think_s": list(think), **stats(moves_all),
            "errors": sum(r["errors"] for r in results), "timeouts": sum(r["timeouts"] for r in results),
            "alerts": sum(r["alerts"] for r in results), "page_errors": [e for r in results for e in r["page_errors"]],
            "server_cpu_s": round(cpu, 1), "browsers_cpu_s": round(sum(r["browser_cpu_s"] for r in results), 1),
            "machine_busy": round((busy1[0] - busy0[0]) / (busy1[1] - busy0[1]), 2), "wall_s": round(wall, 1),
            "load1_start": load_start, "load1_end": load1()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--run", default="runs/sample")
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--moves", type=int, default=30, help="moves of the one session; each of N sessions makes half")
    ap.add_argument("--sessions", type=int, default=8)
    ap.add_argument("--think", default="1,3", help="think time between moves, seconds: uniform in LO,HI")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-load", type=float, default=0.7, help="start a phase when the 1-minute load is below this")
    ap.add_argument("--load-wait", type=float, default=600, help="wait at most this long (s) for that")
    ap.add_argument("--phases", default="one_think,one_nothink,many_think,many_nothink")
    ap.add_argument("--out", default="bench/out/dashboard_latency.json")
    args = ap.parse_args()
    think = tuple(float(x) for x in args.think.split(","))
    plan = {"one_think": (1, args.moves, think), "one_nothink": (1, args.moves, (0.0, 0.0)),
            "many_think": (args.sessions, args.moves // 2, think),
            "many_nothink": (args.sessions, args.moves // 2, (0.0, 0.0))}
    res = {"rows": args.rows, "cpus": os.cpu_count(), "slider": SLIDER, "max_load": args.max_load, "phases": {}}
    with tempfile.TemporaryDirectory() as tmp:
        root = build_run(Path(args.run), Path(tmp) / "big", args.rows)
        for name in args.phases.split(","):
            n, moves, th = plan[name]
            res["phases"][name] = phase(root, n, moves, th, args.seed, args.max_load, args.load_wait)
            print(name, json.dumps(res["phases"][name]), flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=1))
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
