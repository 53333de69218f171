"""The dashboard in a real browser: Debian's headless Chromium driven by Playwright.

Serves the app on 127.0.0.1, moves a slider, and checks the funnel table against
``lab.query.funnel`` for those thresholds; opens a dedup cluster; exports the config and checks it
loads and equals the chosen thresholds; reads the Fertility & packing and Planner tabs and changes a
planner input. Screenshots go to ``test-artifacts/``.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from lab import knobs, query
from lab.config import load, loads

CHROMIUM = shutil.which("chromium")
ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (bash .ci/setup --test)")


@pytest.fixture(scope="module")
def served(synthetic_run_dir):
    run_dir = synthetic_run_dir
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "lab.cli", "serve", str(run_dir), "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}/"
    deadline = time.time() + 120
    while time.time() < deadline:
        try:
            urllib.request.urlopen(url, timeout=30).read()
            break
        except OSError:
            if proc.poll() is not None:
                raise AssertionError(proc.stderr.read()) from None
            time.sleep(0.5)
    yield run_dir, url
    proc.terminate()
    proc.wait(timeout=30)


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


def _funnel_rows(page) -> dict[str, int]:
    """stage -> docs_dropped as the funnel table in the page shows it."""
    rows = page.locator(".tabulator").first.locator(".tabulator-row")
    out = {}
    for i in range(rows.count()):
        row = rows.nth(i)
        stage = row.locator('.tabulator-cell[tabulator-field="stage"]').inner_text().strip()
        out[stage] = int(row.locator('.tabulator-cell[tabulator-field="docs_dropped"]').inner_text().replace(",", ""))
    return out


def _wait_for(page, predicate, timeout=30.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        page.wait_for_timeout(200)
    return predicate()


def test_slider_moves_the_funnel_to_what_lab_query_gives(served, browser):
    run_dir, url = served
    ARTIFACTS.mkdir(exist_ok=True)
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(url, timeout=60_000)
    page.wait_for_selector("text=Kept:", timeout=60_000)
    base = load(run_dir / "config.yaml")
    expect = dict(zip(*query.funnel(run_dir, base).select("stage", "docs_dropped").to_dict(as_series=False).values()))
    assert _funnel_rows(page) == expect
    # move gopher_quality.min_words with the keyboard: each key press is a release (value_throttled);
    # the last one decides
    handle = page.locator(".bk-input-group", has=page.locator(".bk-slider-title", has_text="gopher_quality.min_words:")
                          ).locator(".noUi-handle").first
    handle.focus()
    handle.press("End")  # to the longest document's word count: a release, so one query
    for _ in range(3):
        handle.press("ArrowLeft")
    shown = page.get_by_text("gopher_quality.min_words:", exact=False).first.inner_text()
    value = int(shown.split(":")[1].strip().replace(",", ""))
    assert value > 50
    moved = knobs.apply(base, {"gopher_quality.min_words": value})
    want = dict(zip(*query.funnel(run_dir, moved).select("stage", "docs_dropped").to_dict(as_series=False).values()))
    got = _wait_for(page, lambda: _funnel_rows(page) if _funnel_rows(page) == want else None)
    page.screenshot(path=str(ARTIFACTS / "funnel_after_slider.png"), full_page=True)
    assert got == want and want["gopher_quality"] > expect["gopher_quality"]
    # export: the config the page offers is the chosen thresholds, loadable by `corpus-lab run --config`
    page.locator(".bk-tab", has_text="Export").click()
    page.get_by_role("button", name="Show the current config").click()
    with page.expect_download() as dl:
        page.get_by_text("Download config").click()
    exported = loads(Path(dl.value.path()).read_text())
    page.screenshot(path=str(ARTIFACTS / "export.png"), full_page=True)
    assert exported == moved and exported.stages.gopher_quality.min_words == value
    page.close()


def test_open_a_dedup_cluster(served, browser):
    run_dir, url = served
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(url, timeout=60_000)
    page.wait_for_selector("text=Kept:", timeout=60_000)
    page.locator(".bk-tab", has_text="Dedup clusters").click()
    n = query.cluster_count(run_dir, 0.8)
    page.wait_for_selector(f"text={n['clusters']} clusters of {n['documents']} documents", timeout=30_000)
    first = query.clusters(run_dir, 0.8, limit=1)
    page.locator('.tabulator-row .tabulator-cell[tabulator-field="size"]').first.click()
    page.wait_for_selector("text=members:", timeout=30_000)
    members = query.cluster_members(run_dir, int(first["cluster_id"][0]), 0.8)
    assert page.get_by_text(f"{len(members)} members:", exact=False).count() == 1
    assert page.locator("del, ins").count() > 0  # the two documents' differences are highlighted
    page.screenshot(path=str(ARTIFACTS / "dedup_cluster.png"), full_page=True)
    page.close()


def test_fertility_packing_and_planner_tabs(served, browser):
    """The two remaining tabs render the run's numbers; a planner input recomputes the plan."""
    from apps.state import PlannerState

    run_dir, url = served
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(url, timeout=60_000)
    page.wait_for_selector("text=Kept:", timeout=60_000)
    page.locator(".bk-tab", has_text="Fertility & packing").click()
    page.wait_for_selector("text=Packing: strategy x seq_len", timeout=30_000)
    strategies = {s for s in query.packing(run_dir)["strategy"].to_list()}
    shown = set(page.locator('.tabulator-cell[tabulator-field="strategy"]').all_inner_texts())
    assert strategies and strategies <= shown
    page.screenshot(path=str(ARTIFACTS / "fertility_packing.png"), full_page=True)

    page.locator(".bk-tab", has_text="Planner").click()
    ps = PlannerState(run_dir)
    page.wait_for_selector(f"text={ps.result()['raw_bytes'] / 1e12:,.1f} TB", timeout=30_000)
    gpus = page.locator(".bk-input-group", has_text="GPUs").locator("input")
    gpus.fill(str(ps.gpus * 2))
    gpus.press("Enter")
    ps.gpus *= 2
    per_gpu = f"{ps.result()['throughput']['per_gpu']:,.0f}"
    page.wait_for_selector(f"td:has-text('{per_gpu}')", timeout=30_000)
    page.screenshot(path=str(ARTIFACTS / "planner.png"), full_page=True)
    assert not errors
    page.close()
