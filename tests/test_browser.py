"""The dashboard in a real browser: Debian's headless Chromium driven by Playwright, at 1440x900.

One server over a run of the synthetic sample plus a few documents whose text holds markup, a few with
an evaluation set's question planted in them, and a few whose URL is on a blocklist or holds listed
words; the run has two evaluation sets, a blocklist, URL words and a quality model (trained here on the
sample's ground truth), so the url, decontamination and quality_model stages have something to show.
Each test opens its own page (its own session) and asserts what a person sees: a dropped document's
text and why it was dropped, a histogram's cutoff following its slider (gopher_quality, quality_model,
url), the contamination per evaluation set following its threshold, what the URL lists block, a label
round trip and the precision table, a quality model trained from the labels, the Planner following a
disabled stage, the Dedup tab following the funnel's threshold, a link restoring the state, and the
exported value being the shown one. Screenshots go to ``test-artifacts/``.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import random
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polars as pl
import pytest

from apps import format as fmt
from lab import query
from lab.select import knobs
from lab.config import load, loads
from lab.stages import near_dedup

CHROMIUM = shutil.which("chromium")
ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]
VIEWPORT = {"width": 1440, "height": 900}
MARKUP = ("<script>window.__pwned = 1</script><img src=x onerror=\"window.__pwned = 2\"> "
          "Short text with markup & ampersands.")
# evaluation set items (set, text) and the documents they are planted in: qa's first question twice, its
# second once (10 matching 13-grams: the longer question), mcq's once
EVALS = {"qa": ["Which of the following statements best describes the function of mitochondria in eukaryotic "
                "cells during aerobic respiration",
                "A train leaves the station at noon travelling west at sixty miles per hour while a second train "
                "leaves two hours later"],
         "mcq": ["In the novel the narrator returns to the abandoned lighthouse every winter to read the letters "
                 "his grandmother hid beneath the floorboards"]}
PLANTED = [("qa", 0), ("qa", 1), ("qa", 0), ("mcq", 0)]
URLS = ["https://casino.example.net/poker/1", "https://www.casino.example.net/slots/2",  # on the blocklist
        "https://deals.example.com/free/3", "https://deals.example.com/free-bonus/4"]  # 1 and 2 listed words

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (bash .ci/setup --test)")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """The synthetic sample plus documents with markup in their text, planted evaluation items and listed
    URLs, with evaluation sets, a blocklist, URL words and a quality model configured; run once for this module."""
    from lab import engine, sample
    from lab.quality import train as quality_train
    from lab.config import Config, build

    root = tmp_path_factory.mktemp("browser")
    syn = sample.build(root=root / "sample", real=False) / "synthetic"
    markup = root / "markup.jsonl"
    markup.write_text("".join(json.dumps({"id": f"m{i}", "text": f"{MARKUP} ({i})", "url": f"https://example.org/{i}"})
                              + "\n" for i in range(3)))
    rng = random.Random(14)
    docs = []
    for i, (name, k) in enumerate(PLANTED):  # an eval question inside an otherwise clean document
        paras = sample.english_doc(rng, 7).split("\n\n")
        paras.insert(3, EVALS[name][k] + ".")
        docs.append({"id": f"c{i}", "text": "\n\n".join(paras), "url": f"https://news.example.com/{name}/{i}"})
    docs += [{"id": f"u{i}", "text": sample.english_doc(rng, 7), "url": url} for i, url in enumerate(URLS)]
    extra = root / "extra.jsonl"
    extra.write_text("".join(json.dumps(d) + "\n" for d in docs))
    for name, items in EVALS.items():
        (root / f"{name}.jsonl").write_text("".join(json.dumps({"question": q}) + "\n" for q in items))
    (root / "gambling.txt").write_text("casino.example.net\n")
    # a quality model from the sample's ground truth: clean documents against spam, boilerplate, code, short
    truth = [json.loads(line) for line in (root / "sample" / "labels.jsonl").read_text().splitlines()]
    texts = {d["id"]: d["text"] for d in map(json.loads, (syn / "documents.jsonl").read_text().splitlines())}
    pos = [texts[t["id"]] for t in truth if t["label"] == "clean"][:60]
    neg = [texts[t["id"]] for t in truth if t["label"] in ("spam", "boilerplate", "curly_brace", "short")]
    model = root / "models" / "quality.npz"  # not the run's models/, where the Labels tab trains
    quality_train.save(quality_train.fit(pos, neg), model, trained_on={}, cfg=quality_train.TrainConfig())
    cfg = build(Config, {
        "name": "browser", "output_dir": str(root / "runs"), "engine": {"n_workers": 1},
        "inputs": [{"path": str(syn)}, {"path": str(markup)}, {"path": str(extra)}],
        "stages": {"url": {"blocklist": str(root / "gambling.txt"), "words": ["free", "bonus"]},
                   "decontamination": {"eval_sets": [{"name": n, "path": str(root / f"{n}.jsonl"), "text_field": "question"}
                                                     for n in EVALS]},
                   "quality_model": {"model": str(model)}}})
    engine.run(cfg, progress=False, client=engine.INPROCESS)
    return cfg.run_dir


@pytest.fixture(scope="module")
def served(run_dir):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # the server's log goes to a file: a pipe no one reads fills after some sessions' lines and the
    # server then blocks on its next write
    log = tempfile.TemporaryFile(mode="w+")
    proc = subprocess.Popen([sys.executable, "-m", "lab.cli", "serve", str(run_dir), "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=log, text=True)
    url = f"http://127.0.0.1:{port}/"
    deadline = time.time() + 120
    while time.time() < deadline:
        try:  # the port accepts once the run is loaded (a GET would build a session no one opens)
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
            break
        except OSError:
            if proc.poll() is not None:
                log.seek(0)
                raise AssertionError(log.read()) from None
            time.sleep(0.5)
    yield run_dir, url
    proc.terminate()
    proc.wait(timeout=30)
    log.close()


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


def _open(browser, url):
    page = browser.new_page(viewport=VIEWPORT)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(url, timeout=60_000)
    page.wait_for_selector(r"text=/Kept( \(\w+ documents\))?:/", timeout=60_000)  # every language's, or one's
    page.wait_for_selector("text=page 1 of", timeout=60_000)  # the document viewer has its first page
    return page, errors


def _wait_for(page, predicate, timeout=30.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        page.wait_for_timeout(200)
    return predicate()


def _funnel_rows(page) -> dict[str, str]:
    """stage -> docs dropped as the funnel table in the page shows it (its cells' rendered text)."""
    return dict(page.evaluate("""() => {
        const find = (root) => {  // the first funnel table, in the page or in a shadow root (Bokeh's views)
            const t = root.querySelector("table.funnel");
            if (t !== null) return t;
            for (const el of root.querySelectorAll("*")) {
                if (el.shadowRoot) { const f = find(el.shadowRoot); if (f !== null) return f; }
            }
            return null;
        };
        const table = find(document);
        if (table === null) return [];
        return Array.from(table.querySelectorAll("tbody tr")).map(row =>
            ['stage', 'dropped'].map(f => row.querySelector(`td[data-field="${f}"]`).innerText.trim())); }"""))


@functools.lru_cache(maxsize=None)  # the answers under a config, asked again by every poll of _wait_for
def _want_rows(run_dir, cfg) -> dict[str, str]:
    f = query.funnel(run_dir, cfg)
    return {s: fmt.count(d) for s, d in zip(f["stage"].to_list(), f["docs_dropped"].to_list())}


def _select(page, label: str, value: str, within=None) -> None:
    scope = within if within is not None else page
    group = scope.locator(".bk-input-group", has=page.locator("label", has_text=re.compile(f"^{re.escape(label)}$")))
    group.locator("select").first.select_option(value)


def _box(page, knob: str):
    return page.locator(f".knob-{knob.replace('.', '-')} input.bk-input").first


def _type_box(page, knob: str, value) -> None:
    box = _box(page, knob)
    box.fill(str(value))
    box.press("Enter")


def _model(page, name: str, attr: str):
    """An attribute of the Bokeh model named ``name`` in the page (a column of a data source: ``data.COL``)."""
    return page.evaluate(f"""() => {{ const m = Bokeh.documents[0].get_model_by_name({json.dumps(name)});
        if (m === null) return null;
        const col = {json.dumps(attr[5:] if attr.startswith("data.") else None)};
        let v = col === null ? m.{attr.split(".")[0]} : (m.data instanceof Map ? m.data.get(col) : m.data[col]);
        return ArrayBuffer.isView(v) ? Array.from(v) : v; }}""")


def _open_card(page, stage: str) -> None:
    page.locator(".card-title", has_text=re.compile(f"^{re.escape(stage)}$")).first.click()


def _press(page, knob: str, key: str, times: int) -> None:
    """Key presses on a knob's slider handle: each one a release (value_throttled)."""
    handle = page.locator(f".knob-{knob.replace('.', '-')} .noUi-handle").first
    handle.focus()
    for _ in range(times):
        handle.press(key)


def _press_once(page, knob: str, key: str, want: str) -> None:
    """One key press on a knob's slider handle, until the knob's exact box shows ``want``. A press the
    page lost (the slider redrawn under it while the server was busy) left the box at its old value:
    it is pressed again (at most 3 times); one that moved it is never repeated."""
    before = _box(page, knob).input_value()
    for _ in range(3):
        _press(page, knob, key, 1)
        if _wait_for(page, lambda: _box(page, knob).input_value() != before, timeout=10):
            break
    assert _wait_for(page, lambda: _box(page, knob).input_value() == want)


@functools.lru_cache(maxsize=None)
def _dropped_bars(run_dir, cfg, signal: str) -> list[int]:
    """The dropped documents per bin of a knob's histogram, as lab.query bins them under ``cfg``."""
    h = query.histogram(run_dir, cfg, signal)
    return h.filter(h["bin_lo"].is_not_null())["dropped_docs"].to_list()


def _shows_cutoff(page, run_dir, cfg, knob: str, signal: str, value) -> bool:
    """The knob's histogram is the one lab.query gives under ``cfg`` and its cutoff is drawn at ``value``."""
    return (_model(page, f"histogram {knob}", "data.dropped") == _dropped_bars(run_dir, cfg, signal)
            and _model(page, f"cutoff {knob}", "location") == value)


def test_read_a_dropped_document_and_markup_stays_text(served, browser):
    run_dir, url = served
    ARTIFACTS.mkdir(exist_ok=True)
    page, errors = _open(browser, url)
    base = load(run_dir / "config.yaml")
    want = _want_rows(run_dir, base)
    assert _wait_for(page, lambda: _funnel_rows(page) == want), (_funnel_rows(page), want)
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")  # no horizontal scroll
    first = query.documents(run_dir, base, view="dropped", stage="gopher_quality", limit=20).row(0, named=True)
    shown = page.locator(".doc-text").first
    _wait_for(page, lambda: first["text"][:80] in shown.inner_text())
    assert shown.inner_text().strip() == first["text"].strip()  # the whole text, as stored
    why = f"{first['signal']} = {fmt.signal(first['value'], first['threshold'])}, must be {first['op']} {first['threshold']}"
    assert page.get_by_text(why, exact=False).count() >= 1
    page.screenshot(path=str(ARTIFACTS / "viewer_dropped.png"), full_page=True)
    # a document whose text holds markup: shown as text, never run
    docs = query.documents(run_dir, base, view="dropped", limit=1000)
    markup = docs.filter(docs["text"].str.contains("<script>", literal=True)).row(0, named=True)
    _select(page, "stage", "(any)")
    page.wait_for_timeout(500)
    n = dict(query.document_filters(run_dir, base, view="dropped")["source"])[markup["source"]]
    _select(page, "source", f"{markup['source']} ({fmt.count(n)})")  # each value with its documents
    _wait_for(page, lambda: "<script>" in page.locator(".doc-text").first.inner_text())
    assert "<script>window.__pwned = 1</script>" in page.locator(".doc-text").first.inner_text()
    assert page.locator(".doc-text script, .doc-text img").count() == 0
    assert page.evaluate("window.__pwned === undefined")
    page.screenshot(path=str(ARTIFACTS / "viewer_markup.png"), full_page=True)
    assert not errors
    page.close()


def test_histogram_cutoff_follows_its_slider(served, browser):
    run_dir, url = served
    page, errors = _open(browser, url)
    base = load(run_dir / "config.yaml")
    knob = "gopher_quality.min_words"
    assert _model(page, f"cutoff {knob}", "location") == base.stages.gopher_quality.min_words
    handle = page.locator(f".knob-{knob.replace('.', '-')} .noUi-handle").first
    handle.focus()
    for _ in range(4):  # each key press is a release (value_throttled): the last one decides
        handle.press("ArrowRight")
    step = next(k for k in knobs.knobs(base, query.signal_ranges(run_dir)) if k.name == knob).step
    value = base.stages.gopher_quality.min_words + 4 * step
    moved = knobs.apply(base, {knob: value})
    want = query.histogram(run_dir, moved, "gq_words")
    want = want.filter(want["bin_lo"].is_not_null())["dropped_docs"].to_list()
    # the last press's histogram and cutoff (an earlier press's bars can equal the last one's)
    _wait_for(page, lambda: _model(page, f"histogram {knob}", "data.dropped") == want
              and _model(page, f"cutoff {knob}", "location") == value)
    assert _model(page, f"histogram {knob}", "data.dropped") == want and sum(want) > 0
    assert _model(page, f"cutoff {knob}", "location") == value  # the cutoff drawn where the threshold is
    _wait_for(page, lambda: _box(page, knob).input_value() == str(value))  # the box may follow the cutoff a moment later
    assert _box(page, knob).input_value() == str(value)  # the exact box shows the applied value
    change = query.change(run_dir, base, moved)
    line = f"this change drops {fmt.amount(change['dropped']['docs'], 'docs')}"
    _wait_for(page, lambda: page.get_by_text(line, exact=False).count())
    assert page.get_by_text(line, exact=False).count() >= 1
    assert _wait_for(page, lambda: _funnel_rows(page) == _want_rows(run_dir, moved))
    page.screenshot(path=str(ARTIFACTS / "histogram_cutoff.png"), full_page=True)
    assert not errors
    page.close()


def test_quality_model_histogram_cutoff_follows_its_knob(served, browser):
    run_dir, url = served
    page, errors = _open(browser, url)
    base = load(run_dir / "config.yaml")
    knob, signal = "quality_model.min_score", "qm_score"
    _open_card(page, "quality_model")
    # the card shows the knob with its unit, and the score's histogram with the run's cutoff (0.5)
    page.wait_for_selector("text=probability 0..1", timeout=30_000)
    assert _wait_for(page, lambda: _shows_cutoff(page, run_dir, base, knob, signal, 0.5))
    assert sum(_model(page, f"histogram {knob}", "data.passed")) > 0  # the scores are drawn
    # four steps right on the slider
    k = next(k for k in knobs.knobs(base, query.signal_ranges(run_dir)) if k.name == knob)
    _press(page, knob, "ArrowRight", 4)
    value = knobs.snap(k, 0.5 + 4 * k.step)
    moved = knobs.apply(base, {knob: value})
    assert _wait_for(page, lambda: _shows_cutoff(page, run_dir, moved, knob, signal, value))
    # an exact value typed in the box: the median score of the documents that reach quality_model
    reasons = query.drop_reasons(run_dir, base).join(query.signal_rows(run_dir, ["doc_id", signal]), on="doc_id")
    later = query.STAGE_NAMES[query.STAGE_NAMES.index("quality_model"):]
    reach = reasons.filter(pl.col("reason").is_null() | pl.col("reason").str.split(".").list.first().is_in(later))
    median = round(float(reach[signal].median()), 2)
    _type_box(page, knob, median)
    moved = knobs.apply(base, {knob: median})
    assert _wait_for(page, lambda: _shows_cutoff(page, run_dir, moved, knob, signal, median))
    assert sum(_dropped_bars(run_dir, moved, signal)) > 0  # the bars the test compares are not all zero
    assert _wait_for(page, lambda: _funnel_rows(page) == _want_rows(run_dir, moved))
    page.locator(".knob-quality_model-min_score").first.scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "quality_model_cutoff.png"), full_page=True)
    assert not errors
    page.close()


@functools.lru_cache(maxsize=None)
def _contamination(run_dir, min_matches: int) -> dict[str, tuple[int, int]]:
    """eval set -> (documents, tokens) with at least ``min_matches`` matching n-grams, from the signals."""
    s = query.signal_rows(run_dir, ["decon_set", "decon_matches", "n_tokens"])
    hit = s.filter(pl.col("decon_matches") >= min_matches)
    return {name: (g.height, int(g["n_tokens"].sum())) for (name,), g in hit.group_by("decon_set")}


def test_contamination_per_evaluation_set_follows_its_threshold(served, browser):
    run_dir, url = served
    page, errors = _open(browser, url)
    base = load(run_dir / "config.yaml")
    line = page.locator("p", has_text="Contamination (documents with at least")

    def shows(k: int) -> bool:
        text = line.first.inner_text() if line.count() else ""
        return f"at least {k} matching" in text and all(
            f"{name} {fmt.count(docs)} documents, {fmt.count(tokens)} tokens" in text
            for name, (docs, tokens) in _contamination(run_dir, k).items())

    # the planted items: qa's questions in three documents, mcq's in one; each set's tokens from the signals
    assert {n: d for n, (d, _) in _contamination(run_dir, 1).items()} == {"qa": 3, "mcq": 1}
    assert _wait_for(page, lambda: shows(1))
    assert all(t > 100 for _, t in _contamination(run_dir, 1).values())
    # six matching 13-grams: only the longer qa question (10) and the mcq one (10) are still hits
    _open_card(page, "decontamination")
    _type_box(page, "decontamination.min_matches", 6)
    moved = knobs.apply(base, {"decontamination.min_matches": 6})
    assert {n: d for n, (d, _) in _contamination(run_dir, 6).items()} == {"qa": 1, "mcq": 1}
    assert _wait_for(page, lambda: shows(6))
    assert _wait_for(page, lambda: _funnel_rows(page) == _want_rows(run_dir, moved))
    page.screenshot(path=str(ARTIFACTS / "contamination.png"), full_page=True)
    assert not errors
    page.close()


def test_url_card_shows_what_the_lists_block_and_its_knob(served, browser):
    run_dir, url = served
    page, errors = _open(browser, url)
    base = load(run_dir / "config.yaml")
    knob, signal = "url.max_word_hits", "url_word_hits"
    _open_card(page, "url")
    s = query.signal_rows(run_dir, ["url_present", "url_blocked"])
    blocked = s.filter(pl.col("url_blocked") != "")["url_blocked"].to_list()
    assert blocked == ["gambling", "gambling"]  # the two casino.example.net documents (the list file's name)
    with_url = int(s["url_present"].sum())
    line = (f"URLs: {fmt.count(with_url)} documents with one, {fmt.count(s.height - with_url)} without (they pass); "
            "on the blocklist: gambling 2 documents")
    report = page.get_by_text("on the blocklist:", exact=False)
    assert _wait_for(page, lambda: report.count() and line in report.first.inner_text())
    # the word-hits knob: its histogram and cutoff at 0, then one step right (a URL with 1 listed word passes)
    assert _wait_for(page, lambda: _shows_cutoff(page, run_dir, base, knob, signal, 0))
    assert sum(_dropped_bars(run_dir, base, signal)) == 4  # 2 with listed words + 2 blocked (the stage's other rules)
    assert _wait_for(page, lambda: _funnel_rows(page).get("url") == "4")  # the table may render after the card
    _press_once(page, knob, "ArrowRight", "1")
    moved = knobs.apply(base, {knob: 1})
    assert _wait_for(page, lambda: _shows_cutoff(page, run_dir, moved, knob, signal, 1))
    assert _wait_for(page, lambda: _funnel_rows(page) == _want_rows(run_dir, moved))
    assert _funnel_rows(page)["url"] == "3"  # 2 blocked + the URL with 2 listed words
    page.screenshot(path=str(ARTIFACTS / "url_card.png"), full_page=True)
    assert not errors
    page.close()


def test_label_round_trip_and_precision_table(served, browser):
    run_dir, url = served
    page, errors = _open(browser, url)
    base = load(run_dir / "config.yaml")
    page.locator(".bk-input-group", has=page.locator("label", has_text="labelled by")).locator("input").fill("tester")
    page.keyboard.press("Tab")
    first = query.documents(run_dir, base, view="dropped", stage="gopher_quality", limit=20)["doc_id"].to_list()
    # the viewer shows the first dropped document (the HTML pane's text is in its shadow root: get_by_text)
    assert _wait_for(page, lambda: page.get_by_text(f"doc {first[0]}", exact=True).count())
    page.get_by_role("button", name="Bad").click()
    page.wait_for_selector(f"text=labelled doc {first[0]} bad by tester", timeout=30_000)
    labels = query.labels(run_dir)
    assert (first[0], "bad", "tester") in labels.select("doc_id", "label", "user").rows()
    page.locator(".bk-tab", has_text="Labels").click()
    p = query.stage_precision(run_dir, base)
    row = p.filter(p["stage"] == "gopher_quality").row(0, named=True)
    assert row["labelled_bad"] >= 1
    cell = page.locator('.tabulator-row', has=page.locator('.tabulator-cell[tabulator-field="stage"]', has_text="gopher_quality"))
    _wait_for(page, lambda: cell.count() and fmt.share(row["precision"]) in cell.first.inner_text())
    assert fmt.share(row["precision"]) in cell.first.inner_text()
    page.screenshot(path=str(ARTIFACTS / "labels.png"), full_page=True)
    assert not errors
    page.close()


def test_labels_tab_trains_a_quality_model(served, browser):
    from lab.quality import labels

    run_dir, url = served
    base = load(run_dir / "config.yaml")
    good = query.documents(run_dir, base, view="kept", limit=5)["doc_id"].to_list()
    bad = query.documents(run_dir, base, view="dropped", stage="c4", limit=5)["doc_id"].to_list()
    labels.add_many(run_dir, [{"doc_id": d, "label": "good"} for d in good]
                    + [{"doc_id": d, "label": "bad"} for d in bad], user="trainer")
    page, errors = _open(browser, url)
    page.locator(".bk-tab", has_text="Labels").click()
    page.get_by_role("button", name="Train a quality model from the labels").click()
    report = page.locator("pre.train-report")
    assert _wait_for(page, lambda: report.count() and "held-out AUC" in report.first.inner_text(), timeout=120)
    text = report.first.inner_text()
    model = run_dir / "models" / "quality.npz"
    sha = hashlib.sha256(model.read_bytes()).hexdigest()
    latest = query.labels(run_dir, latest=True)
    n_good, n_bad = (latest.filter(pl.col("label") == x).height for x in ("good", "bad"))
    assert n_good == 5 and n_bad >= 5  # the label round trip may have added one bad
    assert f"quality model {model} (sha256 {sha[:16]}…)" in text  # the model's identity: the file written
    assert f"positives: {n_good} documents labelled good" in text and f"negatives: {n_bad} documents labelled bad" in text
    held = json.loads((run_dir / "models" / "quality.report.json").read_text())["held_out"]
    assert held["train"] == {"positives": n_good - 1, "negatives": n_bad - 1}  # one of each held out
    assert f"held-out AUC {held['auc']}" in text
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")  # the report wraps
    page.screenshot(path=str(ARTIFACTS / "train_quality_model.png"), full_page=True)
    assert not errors
    page.close()


def test_planner_follows_a_disabled_stage(served, browser):
    run_dir, url = served
    page, errors = _open(browser, url)
    base = load(run_dir / "config.yaml")
    f0 = query.funnel(run_dir, base)
    # a stage whose switch moves the kept bytes on this run (later stages may drop what another drops)
    stage = next(s for s in ("gopher_quality", "c4", "fineweb", "gopher_repetition")
                 if query.funnel(run_dir, knobs.apply(base, {f"{s}.enabled": False}))["bytes_out"][-1] != f0["bytes_out"][-1])
    if stage != "gopher_quality":
        page.locator(".card-title", has_text=stage).first.click()  # open its card
    page.locator(f".knob-{stage}-enabled input[type=checkbox]").first.uncheck()
    moved = knobs.apply(base, {f"{stage}.enabled": False})
    f = query.funnel(run_dir, moved)
    _wait_for(page, lambda: page.get_by_text(f"{stage} (disabled)").count())
    page.locator(".bk-tab", has_text="Planner").click()
    share = fmt.share(f["bytes_out"][-1] / f["bytes_in"][0])
    page.wait_for_selector(f"text=Retention {share}", timeout=30_000)
    assert page.get_by_text("Differs from the run's config", exact=False).count() == 1
    page.screenshot(path=str(ARTIFACTS / "planner_disabled_stage.png"), full_page=True)
    assert not errors
    page.close()


def test_dedup_tab_follows_the_funnel_threshold(served, browser):
    run_dir, url = served
    page, errors = _open(browser, url)
    base = load(run_dir / "config.yaml")
    page.locator(".card-title", has_text="near_dedup").first.click()  # open its card
    _select(page, "near_dedup.threshold", "0.6")
    moved = knobs.apply(base, {"near_dedup.threshold": 0.6})
    assert _wait_for(page, lambda: _funnel_rows(page) == _want_rows(run_dir, moved))
    page.locator(".bk-tab", has_text="Dedup clusters").click()
    n = query.cluster_count(run_dir, 0.6, config=moved, page_size=20)
    page.wait_for_selector(f"text=documents at Jaccard ≥ 0.60 · page 1 of {n['pages']}", timeout=30_000)
    # the expected pair recall at 0.60 with the run's 14 bands x 8 rows is 0.21: the tab warns and says what to do
    warning = near_dedup.recall_warning(moved.stages.near_dedup)
    note = page.locator(".dedup-note p", has_text="expected pair recall")  # the paragraph, in the pane's shadow root
    assert warning and _wait_for(page, lambda: note.count() and warning in note.first.inner_text())
    first = query.clusters(run_dir, 0.6, config=moved, limit=1)
    page.locator('.tabulator-row .tabulator-cell[tabulator-field="size"]').first.click()
    members = query.cluster_members(run_dir, int(first["cluster_id"][0]), 0.6, config=moved)
    page.wait_for_selector("text=Pair Jaccard", timeout=30_000)
    for doc, status in zip(members["doc_id"].to_list(), members["status"].to_list()):
        cell = page.locator(".tabulator-row", has=page.locator('.tabulator-cell[tabulator-field="doc_id"]',
                                                                has_text=re.compile(f"^{doc}$")))
        assert status in cell.first.inner_text()
    assert page.get_by_text(f"doc {members['doc_id'][0]}", exact=False).count() >= 1
    page.screenshot(path=str(ARTIFACTS / "dedup_follows_funnel.png"), full_page=True)
    assert not errors
    page.close()


def test_a_link_restores_the_state_and_export_is_what_is_shown(served, browser):
    run_dir, url = served
    page, errors = _open(browser, url)
    base = load(run_dir / "config.yaml")
    knob = "gopher_quality.min_alpha_words_ratio"
    handle = page.locator(f".knob-{knob.replace('.', '-')} .noUi-handle").first
    handle.focus()
    for _ in range(3):
        handle.press("ArrowLeft")
    k = next(k for k in knobs.knobs(base, query.signal_ranges(run_dir)) if k.name == knob)
    shown = fmt.value(knobs.snap(k, k.value - 3 * k.step))  # three steps down, as the slider shows it
    assert _wait_for(page, lambda: _box(page, knob).input_value() == shown)
    _type_box(page, "gopher_quality.min_words", 123)
    _wait_for(page, lambda: "min_words=123" in page.url)
    link = page.url
    assert re.search(r"min_alpha_words_ratio=", link)
    moved = knobs.apply(base, {knob: float(shown), "gopher_quality.min_words": 123})
    # the exported config holds exactly the values shown
    page.locator(".bk-tab", has_text="Export").click()
    page.wait_for_selector(f"text={knobs.run_name(base, moved)}", timeout=30_000)
    with page.expect_download() as dl:
        page.get_by_text("Download config").click()
    exported = loads(Path(dl.value.path()).read_text())
    assert exported.stages == moved.stages and exported.name == knobs.run_name(base, moved) != base.name
    assert fmt.value(exported.stages.gopher_quality.min_alpha_words_ratio) == shown
    page.screenshot(path=str(ARTIFACTS / "export.png"), full_page=True)
    # a new session from the link: the same thresholds, the same funnel
    other, errors2 = _open(browser, link)
    _wait_for(other, lambda: _box(other, "gopher_quality.min_words").input_value() == "123")
    assert _box(other, "gopher_quality.min_words").input_value() == "123"
    assert _box(other, knob).input_value() == shown
    assert other.get_by_text(moved.config_hash(), exact=False).count() >= 1
    assert _wait_for(other, lambda: _funnel_rows(other) == _want_rows(run_dir, moved))
    other.screenshot(path=str(ARTIFACTS / "restored_from_link.png"), full_page=True)
    assert not errors and not errors2
    page.close()
    other.close()


def test_a_language_has_its_thresholds_funnel_and_link(served, browser):
    """The language selector (issue 15 §1): a link opens the page on de; the Kept line, the funnel table and
    a knob are de's; a value typed for de is that language's threshold in the link; back to every language
    the knob is the stage's own."""
    run_dir, url = served
    base = load(run_dir / "config.yaml")
    page, errors = _open(browser, url + "?language.keep=en,de&lang=de")
    knob = "gopher_quality.min_stop_words"
    assert _wait_for(page, lambda: page.get_by_text("de documents").count() >= 2)  # the Kept line and the knobs
    page.locator(f".knob-{knob.replace('.', '-')}", has_text="for de documents").first.wait_for(timeout=30_000)
    _type_box(page, knob, 0)
    assert _wait_for(page, lambda: f"{knob}@de=0" in page.url and "lang=de" in page.url)
    moved = knobs.apply(base, {"language.keep": ("en", "de"), f"{knob}@de": 0})
    f = query.funnel(run_dir, moved, by="lang").filter(pl.col("lang") == "de")
    want = {s: fmt.count(d) for s, d in zip(f["stage"].to_list(), f["docs_dropped"].to_list())}
    assert _wait_for(page, lambda: _funnel_rows(page) == want)
    kept = fmt.amount(f["docs_out"][-1], "docs")
    assert _wait_for(page, lambda: page.get_by_text(re.compile(rf"Kept \(de documents\):\s*{re.escape(kept)}")).count() == 1)
    page.screenshot(path=str(ARTIFACTS / "language_de.png"), full_page=True)
    from apps.views.funnel import language_options
    from apps.store import Selection

    everyone = next(label for label, v in language_options(Selection(run_dir)).items() if v == "(all)")
    _select(page, "language", everyone)
    assert _wait_for(page, lambda: "lang=de" not in page.url and page.get_by_text("de documents").count() == 0)
    assert _box(page, knob).input_value() == str(base.stages.gopher_quality.min_stop_words)
    assert _wait_for(page, lambda: _funnel_rows(page) == _want_rows(run_dir, moved))
    assert not errors
    page.close()


def test_mixture_tab_budget_gives_the_planned_tokens(served, browser):
    """Issue 16 §7: a budget typed beside a bucket on the Mixture tab shows the bucket's tokens after and its
    epochs as lab.query.mixture_plan realizes them, and the warning of a repeated bucket."""
    from lab.tokens.mixture import BucketTarget, MixtureConfig

    run_dir, url = served
    page, errors = _open(browser, url)
    page.locator(".bk-tab", has_text="Mixture").click()
    row = page.locator(".tabulator-row", has=page.locator('.tabulator-cell[tabulator-field="bucket"]',
                                                          has_text=re.compile("^en$"))).first
    cell = row.locator('.tabulator-cell[tabulator-field="budget"]')
    cell.wait_for(timeout=30_000)
    base = load(run_dir / "config.yaml")
    en = query.mixture_rows(run_dir, base).filter(pl.col("bucket") == "all")["n_tokens"].sum()
    target = 3 * en
    cell.click()
    cell.locator("input").fill(str(target))
    cell.locator("input").press("Enter")
    cfg = dataclasses.replace(base, mixture=MixtureConfig(by=("lang",), buckets=(BucketTarget("en", tokens=target),)))
    want = next(r for r in query.mixture_plan(run_dir, cfg).report if r["bucket"] == "en")
    after = row.locator('.tabulator-cell[tabulator-field="tokens after"]')
    assert _wait_for(page, lambda: after.inner_text().replace(",", "") == str(want["tokens_after"]))
    assert _wait_for(page, lambda: page.get_by_text(re.compile(r"'en': its budget is more than .* 3\.00 epochs")).count() == 1)
    page.screenshot(path=str(ARTIFACTS / "mixture.png"), full_page=True)
    assert not errors
    page.close()
