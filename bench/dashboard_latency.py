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

Phases ``protocol_one`` / ``protocol_think`` run the sessions through ``protocol_session`` (Bokeh's
websocket protocol, no browser: what the server answers, without rendering), and ``mixed_think`` one
browser among ``--sessions`` - 1 such sessions (the browser's latency under the others' server load).

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
SERVER_LOG = "bench/out/dashboard_server.log"

# In the page: the press time (a key or a mouse button), the arrival time of every websocket message,
# and waits that check on every message (just after it is applied) and on a 25 ms timer.
INIT = """
window.__press = 0; window.__msgs = []; window.__sent = []; window.__onmsg = null;
const __pressed = () => { window.__press = performance.now(); window.__msgs = []; window.__sent = []; };
addEventListener('keydown', __pressed, true);
addEventListener('mousedown', __pressed, true);
const WS = window.WebSocket;
window.WebSocket = function (...a) {
  const s = new WS(...a);
  const send = s.send.bind(s);
  s.send = (d) => { window.__sent.push(performance.now()); return send(d); };
  s.addEventListener('message', () => {
    window.__msgs.push(performance.now());
    if (window.__onmsg) setTimeout(window.__onmsg, 0);  // after the message is applied
  });
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
window.__find = (key, pred) => {  // found once, re-found when replaced
  const el = window[key];
  if (!el || !el.isConnected) window[key] = window.__deep(document, pred);
  return window[key];
};
window.__hasClass = (c) => (el) => el.classList && el.classList.contains(c);
window.__funnel = () => {
  const kept = window.__find('__kept', (el) => el.tagName === 'P' && el.textContent.startsWith('Kept:'));
  const host = window.__find('__host', window.__hasClass('funnel-table'));
  const table = host ? window.__deep(host.shadowRoot || host, (el) => el.tagName === 'TABLE') : null;
  const text = kept ? kept.textContent : null;
  const m = text ? text.match(/config\\s+(\\S+)/) : null;
  return {kept: text, hash: m ? m[1] : null, table: table ? table.textContent : null};
};
window.__hists = (names) => names.map((n) => Bokeh.documents[0].get_model_by_name(n));
window.__dropped = (names) => window.__hists(names).map((m) => {
  const v = m.data instanceof Map ? m.data.get('dropped') : m.data['dropped'];
  return Array.from(v || []);  // no column before the first histogram arrives
});
window.__viewer = () => {
  const pager = window.__find('__pager', (el) => el.tagName === 'DIV' && /^page \\d+ of /.test(el.textContent));
  const text = window.__find('__doc', window.__hasClass('doc-text'));
  const head = text ? text.getRootNode().textContent.match(/doc (\\d+)/) : null;
  return {pager: pager ? pager.textContent : null, doc: head ? head[1] : null, text: text ? text.textContent : null};
};
window.__alert = () => {
  const el = window.__deep(document, (el) => el.classList && el.classList.contains('alert-danger')
                                             && el.offsetParent !== null && el.textContent.trim());
  return el ? el.textContent : null;
};
// Wait until done() holds (checked after every message and every 25 ms), then for the next animation
// frame: the time from the press to that frame, and the part until the last message before it.
window.__until = (done, timeout, extra) => new Promise((resolve) => {
  let shownAt = null, fin = false;
  const finish = (r) => { fin = true; window.__onmsg = null; clearInterval(timer); resolve(r); };
  const check = () => {
    if (fin || shownAt !== null) return;
    const now = performance.now();
    if (done()) {
      shownAt = now;
      requestAnimationFrame(() => {
        const painted = performance.now();
        const msg = Math.max(...window.__msgs.filter((t) => t <= shownAt), window.__press);
        const sent = window.__sent.length ? window.__sent[0] - window.__press : null;
        finish({ms: painted - window.__press, server_ms: msg - window.__press, browser_ms: painted - msg, send_ms: sent,
                messages: window.__msgs.filter((t) => t <= shownAt).length, alert: window.__alert(), ...extra()});
      });
    } else if (now - window.__press > timeout) {
      finish({ms: null, alert: window.__alert(), ...extra()});
    }
  };
  window.__onmsg = check;
  const timer = setInterval(check, 25);
  check();
});
// A slider move: the Kept line names another config AND every open histogram's data was replaced
// (each histogram goes out in its own message, after the funnel's).
window.__waitMove = (before, names, timeout) => {
  const old = window.__hists(names).map((m) => m.data);
  let tableAt = null;
  return window.__until(() => {
    const f = window.__funnel();
    if (tableAt === null && f.table !== before.table) tableAt = performance.now();
    return f.hash !== null && f.hash !== before.hash && window.__hists(names).every((m, i) => m.data !== old[i]);
  }, timeout, () => ({hash: window.__funnel().hash, table_changed: tableAt !== null}));
};
// A page of the viewer: the pager shows page `want` AND the open document is another one, its text shown.
window.__waitPage = (before, want, timeout) => window.__until(() => {
  const v = window.__viewer();
  return v.pager !== null && v.pager.startsWith(`page ${want} of`) && v.doc !== null && v.doc !== before.doc
         && v.text !== null && v.text.length > 0;
}, timeout, () => window.__viewer());
"""


FLAGS = {"doc_id", "content_hash", "decode_errors", "c4_lorem_ipsum", "c4_curly_brace", "bytes"}


def jitter(t: pa.Table, rng: np.random.Generator) -> pa.Table:
    """Every numeric signal (but ids, hashes and 0/1 flags) times a lognormal factor (sigma 0.15): a small
    sample resampled a million times has few distinct values, and a threshold move between two of them
    would move no document."""
    for i, f in enumerate(t.schema):
        if f.name in FLAGS or not (pa.types.is_integer(f.type) or pa.types.is_floating(f.type)):
            continue
        x = t.column(i).to_numpy(zero_copy_only=False).astype(np.float64)
        y = x * rng.lognormal(0.0, 0.15, x.size)
        if "ratio" in f.name or "frac" in f.name or f.name == "lang_score":
            y = np.clip(y, 0.0, 1.0)
        arr = pa.array(np.round(y) if pa.types.is_integer(f.type) else y, from_pandas=True).cast(f.type)
        t = t.set_column(i, f.name, arr)
    return t


def build_run(src: Path, root: Path, rows: int, seed: int = 0, texts: int | None = None) -> Path:
    """A run directory of ``rows`` documents resampled from the run ``src`` (kept when it exists).

    Signals jittered, token counts, the text of every document (``texts``: of the first that many
    only; the viewer pages through a seeded random order of all of them), and near-duplicate edges
    (chains of 2-6 nodes over 3% of the contents) with their clusters.
    """
    if (root / "config.yaml").exists():
        return root
    from lab import dedup

    lay, s = RunLayout(root), RunLayout(src)
    lay.make()
    sig = pa.concat_tables(pq.read_table(p) for p in sorted(s.signals.glob("part-*.parquet")))
    tok = pa.concat_tables(pq.read_table(p) for p in sorted(s.tokenized_dir.glob("part-*.parquet")))
    ntok = dict(zip(tok.column("doc_id").to_pylist(), tok.column("n_tokens").to_pylist()))
    docs = pa.concat_tables(pq.read_table(p) for p in sorted(s.docs.glob("part-*.parquet")))
    text_of = dict(zip(docs.column("doc_id").to_pylist(), docs.column("text").to_pylist()))
    rng = np.random.default_rng(seed)
    lay.tokenized_dir.mkdir(parents=True, exist_ok=True)
    all_ids, all_hashes = [], []
    for i, start in enumerate(range(0, rows, CHUNK)):
        n = min(CHUNK, rows - start)
        t = jitter(sig.take(rng.integers(0, sig.num_rows, n)), rng)
        src_ids = t.column("doc_id").to_pylist()
        ids = (np.arange(start, start + n, dtype=np.int64) * 2654435761) % (2**62)
        uniq = rng.integers(0, 2**62, n)
        hashes = np.where(rng.random(n) < 0.15, uniq[rng.integers(0, max(n // 20, 1), n)], uniq)
        t = t.set_column(t.schema.get_field_index("doc_id"), "doc_id", pa.array(ids))
        t = t.set_column(t.schema.get_field_index("content_hash"), "content_hash", pa.array(hashes))
        write_parquet(t, lay.part("signals", f"{i:05d}"))
        write_parquet(pa.table({"doc_id": ids, "n_tokens": pa.array([ntok.get(x) for x in src_ids], pa.int64()),
                                "words": pa.array([0] * n, pa.int64()), "continued_words": pa.array([0] * n, pa.int64())}),
                      lay.tokenized(f"{i:05d}"))
        k = n if texts is None else max(0, min(n, texts - start))
        d = {"doc_id": ids[:k].tolist(), "source": t.column("source").to_pylist()[:k],
             "locator": list(range(start, start + k)), "url": [""] * k, "record_id": [""] * k,
             "text": [text_of[x] for x in src_ids[:k]]}
        write_parquet(pa.table(d, schema=DOCS_SCHEMA), lay.part("docs", f"{i:05d}"))
        all_ids.append(ids)
        all_hashes.append(hashes)
    write_parquet(REJECTS_SCHEMA.empty_table(), lay.part("rejects", "00000"))
    ids, hashes = np.concatenate(all_ids), np.concatenate(all_hashes)
    nodes, first = np.unique(hashes, return_index=True)
    pick = rng.permutation(nodes.size)[: int(0.03 * nodes.size)]
    u, v, pos = [], [], 0
    while pos < pick.size - 1:
        chain = pick[pos:pos + int(rng.integers(2, 7))]
        u += chain[:-1].tolist()
        v += chain[1:].tolist()
        pos += chain.size
    u, v = np.array(u), np.array(v)
    jac = rng.integers(56, 113, u.size) / 112
    e = pa.table({"u": nodes[u], "v": nodes[v], "u_doc": ids[first[u]], "v_doc": ids[first[v]],
                  "matches": pa.array((jac * 112).astype(np.int16)), "jaccard_est": jac,
                  "jaccard_exact": pa.nulls(u.size, pa.float64()), "jaccard": jac}, schema=dedup.EDGE_SCHEMA)
    write_parquet(e, lay.edges(0))
    dedup.write_clusters(root, dedup.spanning_forest(dedup.Forest(nodes[u], nodes[v], ids[first[u]], ids[first[v]], jac)))
    for f in ("config.yaml", "manifest.json"):
        shutil.copy(src / f, root / f)
    shutil.copy(s.merged_stats, lay.merged_stats)
    return root


def _handle(page, name: str):
    return page.locator(f".knob-{name.replace('.', '-')} .noUi-handle").first


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


def session(url: str, index: int, moves: int, think: tuple[float, float], seed: int, ready, out: mp.Queue,
            mode: str = "move", names: tuple[str, ...] = ()) -> None:
    """One user. ``move``: offset its config, wait for the others, then move / wait until the funnel AND
    the open histograms show the new config / think. ``pages``: click "next ▶" / wait until the pager
    shows the next page and its first document / think."""
    from playwright.sync_api import sync_playwright

    rng = random.Random(seed * 1000 + index)
    res = {"index": index, "moves": [], "errors": 0, "page_errors": [], "timeouts": 0, "alerts": 0, "last": None}
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=shutil.which("chromium"), args=ARGS)
        page = b.new_page(viewport={"width": 1440, "height": 900})
        page.on("pageerror", lambda e: res["page_errors"].append(str(e)[:200]))
        page.add_init_script(INIT)
        page.goto(url, timeout=300_000)
        page.wait_for_selector("text=Kept:", timeout=300_000)
        page.wait_for_selector("text=page 1 of", timeout=300_000)  # the viewer has its first page
        page.wait_for_function("(n) => window.__dropped(n).every((d) => d.length > 0)", arg=list(names),
                               timeout=300_000)  # every open histogram drawn

        def press(handle, key: str):
            before = page.evaluate("() => window.__funnel()")
            handle.press(key)
            return page.evaluate("([b, n, t]) => window.__waitMove(b, n, t)", [before, list(names), TIMEOUT_MS])

        def next_page(button, number: int):
            before = page.evaluate("() => window.__viewer()")
            button.click()
            return page.evaluate("([b, w, t]) => window.__waitPage(b, w, t)", [before, number + 1, TIMEOUT_MS])

        if mode == "move":
            offset = _handle(page, OFFSET)
            offset.focus()
            for _ in range(index + 1):
                press(offset, "ArrowRight")
            handle = _handle(page, SLIDER)
            handle.focus()
        else:
            nxt = page.get_by_role("button", name="next ▶")
            nxt.scroll_into_view_if_needed()
        ready.wait(timeout=900)
        cpu0 = tree_cpu(os.getpid())
        if think[1] > 0:
            page.wait_for_timeout(1000 * rng.uniform(0, think[1]))  # users do not start in step
        for i in range(moves):
            r = press(handle, "ArrowLeft") if mode == "move" else next_page(nxt, i + 1)
            if r["ms"] is None:
                res["timeouts"] += 1
            elif r["alert"]:
                res["alerts"] += 1
            else:
                res["moves"].append(r)
            if think[1] > 0:
                page.wait_for_timeout(1000 * rng.uniform(*think))
        res["browser_cpu_s"] = tree_cpu(os.getpid()) - cpu0
        if mode == "move":  # what the page shows at the end, checked against lab.query by the caller
            res["last"] = {"hash": page.evaluate("() => window.__funnel().hash"),
                           "dropped": page.evaluate("(n) => window.__dropped(n)", list(names))}
        else:
            res["last"] = {**page.evaluate("() => window.__viewer()"), "page": moves + 1}
        b.close()
    res["errors"] = res["timeouts"] + res["alerts"] + len(res["page_errors"])
    out.put(res)


def protocol_session(url: str, index: int, moves: int, think: tuple[float, float], seed: int, ready, out: mp.Queue,
                     mode: str = "move", names: tuple[str, ...] = ()) -> None:
    """One user speaking Bokeh's websocket protocol, no browser: the same moves as ``session`` (a slider
    release is the ``value`` and ``value_throttled`` changes the page sends), timed from the send to
    the patch in which the Kept line names the new config and every open histogram has new data.

    The server does for it exactly what it does for a page; nothing is laid out or painted. Seven of
    these beside one browser measure the browser's latency under 8 sessions' server load on a machine
    whose 2 cores cannot also run 8 Chromiums."""
    import asyncio
    import re

    import panel.models  # noqa: F401 - the page's model types, to read its document
    import panel.models.layout  # noqa: F401
    import panel.models.markup  # noqa: F401
    import panel.models.tabulator  # noqa: F401
    import panel.models.widgets  # noqa: F401

    from bokeh.client import pull_session
    from bokeh.document.events import MessageSentEvent, ModelChangedEvent
    from bokeh.events import DocumentReady
    from bokeh.models import Slider

    rng = random.Random(seed * 1000 + index)
    res = {"index": index, "moves": [], "errors": 0, "page_errors": [], "timeouts": 0, "alerts": 0, "last": None,
           "browser_cpu_s": 0.0, "kind": "protocol"}
    session_ = pull_session(url=url)
    doc, conn = session_.document, session_._connection
    hist = {n: doc.select_one({"name": n}) for n in names}
    kept_re = re.compile(r"config\s*(?:<code>|&lt;code&gt;)([0-9a-f]+)")
    touched: set[str] = set()

    def kept_hash() -> str | None:
        for m in doc.models:
            t = getattr(m, "text", None)
            if isinstance(t, str) and "Kept:" in t:
                hit = kept_re.search(t)
                return hit.group(1) if hit else None
        return None

    def slider(name: str):
        box = next(m for m in doc.models if f"knob-{name.replace('.', '-')}" in (getattr(m, "css_classes", None) or []))
        return next(iter(box.select({"type": Slider})))

    def pump(done, seconds: float) -> None:
        """Read and apply the server's messages until ``done()`` or ``seconds`` have passed."""
        deadline = time.perf_counter() + seconds

        async def run() -> None:
            while not done():
                left = deadline - time.perf_counter()
                if left <= 0:
                    return
                try:
                    msg = await asyncio.wait_for(conn._pop_message(), left)
                except asyncio.TimeoutError:
                    return
                if msg is None:
                    return
                if msg.msgtype == "PATCH-DOC":
                    for e in msg.content.get("events", []):
                        if (e.get("model") or {}).get("id"):
                            touched.add(e["model"]["id"])
                    session_._handle_patch(msg)

        conn._loop.run_sync(run)

    # the page tells the server it has rendered (Panel sends the figures' changes only after that)
    conn._send_patch_document(session_.id, MessageSentEvent(doc, "bokeh_event", DocumentReady()))
    pump(lambda: False, 2.0)

    def release(model, value) -> dict:
        before = kept_hash()
        touched.clear()
        ids = {m.id for m in hist.values()}
        t0 = time.perf_counter()
        for attr in ("value", "value_throttled"):
            conn._send_patch_document(session_.id, ModelChangedEvent(doc, model, attr, value))
        pump(lambda: kept_hash() not in (None, before) and ids <= touched, TIMEOUT_MS / 1000)
        ms = (time.perf_counter() - t0) * 1000
        ok = kept_hash() not in (None, before) and ids <= touched
        return {"ms": ms if ok else None, "server_ms": ms, "browser_ms": 0.0, "send_ms": 0.0, "messages": 0,
                "alert": None}

    off, sl = slider(OFFSET), slider(SLIDER)
    release(off, round(off.value + (index + 1) * off.step, 10))
    value = sl.value
    ready.wait(timeout=900)
    if think[1] > 0:
        time.sleep(rng.uniform(0, think[1]))
    for _ in range(moves):
        value = round(value - sl.step, 10)
        r = release(sl, value)
        if r["ms"] is None:
            res["timeouts"] += 1
        else:
            res["moves"].append(r)
        if think[1] > 0:
            time.sleep(rng.uniform(*think))
    res["last"] = {"hash": kept_hash(), "dropped": [list(hist[n].data["dropped"]) for n in names]}
    session_.close()
    res["errors"] = res["timeouts"]
    out.put(res)


def check_last(root: Path, mode: str, index: int, moves: int, names: tuple[str, ...], last: dict) -> dict:
    """Whether a session's final page shows what ``lab.query`` gives for its final config (or page)."""
    from lab import query
    from lab.select import knobs
    from lab.config import load

    run = query.open_run(root, in_memory=True)
    base = load(root / "config.yaml")
    if mode == "pages":
        d = query.documents(run, base, view="dropped", stage="gopher_quality", offset=(last["page"] - 1) * 20,
                            limit=20).row(0, named=True)
        return {"ok": last["doc"] == str(d["doc_id"]) and last["text"].strip() == d["text"].strip(),
                "page": last["page"], "doc_id": str(d["doc_id"]), "shown_doc": last["doc"]}
    ks = {k.name: k for k in knobs.knobs(base, query.signal_ranges(run))}
    off, sl = ks[OFFSET], ks[SLIDER]
    cfg = knobs.apply(base, {OFFSET: knobs.snap(off, off.value + (index + 1) * off.step),
                             SLIDER: knobs.snap(sl, sl.value - moves * sl.step)})
    want = []
    for n in names:
        h = query.histogram(run, cfg, ks[n.removeprefix("histogram ")].signal)
        want.append(h.filter(h["bin_lo"].is_not_null())["dropped_docs"].to_list())
    return {"ok": last["hash"] == cfg.config_hash() and last["dropped"] == want, "hash": cfg.config_hash(),
            "shown_hash": last["hash"], "histograms_equal": last["dropped"] == want}


def stats(moves: list[dict]) -> dict:
    def pct(xs: list[float], q: float) -> float | None:
        s = sorted(xs)
        return round(s[int(q * (len(s) - 1))], 1) if s else None

    lat = [m["ms"] for m in moves]
    out = {"moves_measured": len(lat), "median_ms": round(statistics.median(lat), 1) if lat else None,
           "p95_ms": pct(lat, 0.95), "max_ms": round(max(lat), 1) if lat else None,
           "table_changed": sum(m.get("table_changed", False) for m in moves),
           "messages_median": statistics.median(m["messages"] for m in moves) if moves else None,
           "each_ms": [round(x) for x in lat]}
    sent = [m["send_ms"] for m in moves if m.get("send_ms") is not None]  # press -> the page's first message out
    out["send"] = {"median_ms": round(statistics.median(sent), 1) if sent else None, "p95_ms": pct(sent, 0.95)}
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
          load_wait: float, mode: str = "move", names: tuple[str, ...] = (), protocol: int = 0) -> tuple[dict, list[dict]]:
    """A fresh server, ``sessions`` users moving (or paging) at once, the last ``protocol`` of them through
    ``protocol_session`` and the others in browsers; the figures of their moves (the browsers' and the
    protocol clients' apart when both take part), and what each page showed at the end."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = open(SERVER_LOG, "a")  # the server's own messages (errors in a session's callbacks), all phases
    server = subprocess.Popen([sys.executable, "-m", "lab.cli", "serve", str(root), "--port", str(port)],
                              stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/"
    try:
        for _ in range(600):
            try:  # the port accepts once the run is loaded; a GET would build a session that no one
                # opens, and its clean-up (a full garbage collection) would land among the measured moves
                socket.create_connection(("127.0.0.1", port), timeout=5).close()
                break
            except OSError:
                time.sleep(0.5)
        load_start = wait_for_quiet(max_load, load_wait)
        ctx = mp.get_context("fork")
        ready, q = ctx.Barrier(sessions + 1), ctx.Queue()
        procs = [ctx.Process(target=protocol_session if i >= sessions - protocol else session,
                             args=(url, i, moves, think, seed, ready, q, mode, names))
                 for i in range(sessions)]
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
        log.close()
    moves_all = [m for r in results for m in r["moves"]]
    split = {}
    if 0 < protocol < sessions:
        split = {kind: stats([m for r in results if r.get("kind", "browser") == kind for m in r["moves"]])
                 for kind in ("browser", "protocol")}
    return ({"sessions": sessions, "protocol_sessions": protocol, "mode": mode, "think_s": list(think),
             **stats(moves_all), **({"by_kind": split} if split else {}),
             "errors": sum(r["errors"] for r in results), "timeouts": sum(r["timeouts"] for r in results),
             "alerts": sum(r["alerts"] for r in results), "page_errors": [e for r in results for e in r["page_errors"]],
             "server_cpu_s": round(cpu, 1), "browsers_cpu_s": round(sum(r["browser_cpu_s"] for r in results), 1),
             "machine_busy": round((busy1[0] - busy0[0]) / (busy1[1] - busy0[1]), 2), "wall_s": round(wall, 1),
             "load1_start": load_start, "load1_end": load1()},
            [(r["index"], r["last"]) for r in results])


def main() -> None:
    from lab.select import knobs
    from lab.config import load

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--run", default="runs/sample", help="the run whose signals and texts are resampled")
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--dir", default=None, help="build the big run here, or reuse it (default: a temporary directory)")
    ap.add_argument("--moves", type=int, default=30, help="moves of the one session; each of N sessions makes half")
    ap.add_argument("--pages", type=int, default=20, help="'next' clicks of the one session in the viewer phases")
    ap.add_argument("--sessions", type=int, default=8)
    ap.add_argument("--think", default="1,3", help="think time between moves, seconds: uniform in LO,HI")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-load", type=float, default=0.7, help="start a phase when the 1-minute load is below this")
    ap.add_argument("--load-wait", type=float, default=600, help="wait at most this long (s) for that")
    ap.add_argument("--phases", default="one_think,one_nothink,many_think,many_nothink,pages_one,pages_many")
    ap.add_argument("--out", default="bench/out/dashboard_latency.json")
    args = ap.parse_args()
    think = tuple(float(x) for x in args.think.split(","))
    plan = {"one_think": (1, args.moves, think, "move"), "one_nothink": (1, args.moves, (0.0, 0.0), "move"),
            "many_think": (args.sessions, args.moves // 2, think, "move"),
            "many_nothink": (args.sessions, args.moves // 2, (0.0, 0.0), "move"),
            "pages_one": (1, args.pages, think, "pages"), "pages_many": (args.sessions, args.pages // 2, think, "pages"),
            # one browser among N sessions, the others Bokeh protocol clients (no rendering); and all protocol
            "mixed_think": (args.sessions, args.moves // 2, think, "move"),
            "protocol_think": (args.sessions, args.moves // 2, think, "move"),
            "protocol_one": (1, args.moves, think, "move")}
    protocol_of = {"mixed_think": args.sessions - 1, "protocol_think": args.sessions, "protocol_one": 1}
    res = {"rows": args.rows, "cpus": os.cpu_count(), "slider": SLIDER, "max_load": args.max_load, "phases": {},
           "checked": {}}
    with tempfile.TemporaryDirectory() as tmp:
        root = build_run(Path(args.run), Path(args.dir or Path(tmp) / "big"), args.rows)
        base = load(root / "config.yaml")
        names = tuple(f"histogram {k.name}" for k in knobs.knobs(base, {})  # the open card's histograms
                      if k.stage == "gopher_quality" and k.signal)
        res["histograms"] = list(names)
        lasts = {}
        for name in args.phases.split(","):
            n, moves, th, mode = plan[name]
            res["phases"][name], lasts[name] = phase(root, n, moves, th, args.seed, args.max_load, args.load_wait,
                                                     mode, names, protocol_of.get(name, 0))
            print(name, json.dumps(res["phases"][name]), flush=True)
        for name, last in lasts.items():  # after every fork: the final pages against lab.query
            n, moves, th, mode = plan[name]
            res["checked"][name] = [check_last(root, mode, i, moves, names, x) for i, x in last if x]
            print(name, "checked", all(c["ok"] for c in res["checked"][name]), flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=1))
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
