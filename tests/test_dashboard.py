"""The dashboard: its state as plain objects over a real run, and the server answering over HTTP."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from apps.state import ClusterState, FunnelState, PlannerState, curve
from lab import query
from lab.config import load, loads
from lab.stages import STAGE_NAMES


@pytest.fixture(scope="module")
def run_dir(synthetic_run_dir):
    return synthetic_run_dir


def test_funnel_state_follows_the_knobs(run_dir):
    s = FunnelState(run_dir)
    assert s.funnel().equals(query.funnel(run_dir, s.base))
    s.set("gopher_quality.min_words", 400)
    s.set("language.keep", ("en", "de"))
    cfg = s.config
    assert cfg.stages.gopher_quality.min_words == 400 and cfg.stages.language.keep == ("en", "de")
    assert s.funnel().equals(query.funnel(run_dir, cfg))
    assert s.funnel(by="lang").equals(query.funnel(run_dir, cfg, by="lang"))
    r = s.retention()
    f = s.funnel()
    assert r["docs"] == f["docs_out"][-1] / f["docs_in"][0] and set(r) == {"docs", "bytes", "tokens"}
    # the export is the config `corpus-lab run --config` reads, with the chosen thresholds
    assert loads(s.export_yaml()) == cfg and "--config" in s.export_command()
    with pytest.raises(Exception, match="threshold=0.83"):
        s.set("near_dedup.threshold", 0.83)
    assert s.config == cfg  # a refused value changes nothing
    s.reset()
    assert s.config == s.base


def test_funnel_view_is_what_the_tab_shows(run_dir):
    s = FunnelState(run_dir)
    s.set("gopher_quality.min_words", 120)
    v = s.view()
    f = query.funnel(run_dir, s.config)
    assert v.funnel.equals(f) and v.config_hash == s.config.config_hash() and v.retention == s.retention(f)
    assert v.curve["stage"] == f["stage"].to_list()
    assert v.curve["docs"] == pytest.approx([o / f["docs_in"][0] for o in f["docs_out"]])
    assert set(v.curve) == {"stage", "docs", "bytes", "tokens"}
    split = s.view("lang", config=s.base)  # a snapshot of other thresholds: the view answers for it
    assert split.funnel.equals(query.funnel(run_dir, s.base, by="lang"))
    assert split.curve == curve(query.funnel(run_dir, s.base)) and split.config_hash == s.base.config_hash()


@pytest.mark.parametrize("windows", [query.SAMPLE_WINDOWS, (3, 40)])
def test_dropped_samples_are_the_documents_the_stage_drops(run_dir, windows, monkeypatch):
    monkeypatch.setattr(query, "SAMPLE_WINDOWS", windows)  # (3, 40): the first rows looked at are too few
    s = FunnelState(run_dir)
    s.set("gopher_quality.min_words", 120)
    reasons = query.drop_reasons(run_dir, s.config)
    for stage in STAGE_NAMES:
        want = reasons.filter(reasons["reason"].str.starts_with(stage + "."))
        got = s.dropped(stage, n=10**6)
        assert sorted(got["doc_id"].to_list()) == sorted(want["doc_id"].to_list()), stage
        assert dict(zip(got["doc_id"], got["reason"])) == dict(zip(want["doc_id"], want["reason"])), stage
        assert s.dropped(stage, n=3)["doc_id"].to_list() == got["doc_id"].to_list()[:3]  # the first n of one order
        # the in-memory table is kept in sample order (no sort); over the Parquet files the sample is sorted
        assert s.dropped(stage, n=7).equals(query.dropped_samples(run_dir, s.config, stage, n=7)), stage


def test_funnel_tab_follows_a_slider_release(run_dir):
    """Outside a server the tab computes inline: a release patches the table, the Kept line and the chart."""
    import param

    from apps.dashboard import funnel_tab

    s = FunnelState(run_dir)
    tab = funnel_tab(s)
    sidebar, main = tab[0], tab[1]
    retention, chart, table, samples = main[0], main[2], main[4], main[6]
    frame = table.value
    slider = next(w for w in sidebar if w.name == "gopher_quality.min_words")
    with param.edit_constant(slider):
        slider.value_throttled = 120
    want = query.funnel(run_dir, s.config)
    assert s.config.stages.gopher_quality.min_words == 120
    assert table.value is frame and table.value.equals(want.to_pandas())  # patched in place, not replaced
    assert s.config.config_hash() in retention.object and "Kept:" in retention.object
    assert chart.object.renderers[0].data_source.data["docs"] == curve(want)["docs"]
    assert samples.value["doc_id"].tolist() == [str(d) for d in s.dropped("gopher_quality")["doc_id"]]


def test_cluster_state_pages_and_diffs(run_dir):
    cs = ClusterState(run_dir, page_size=5)
    first = cs.clusters()
    assert 0 < len(first) <= 5 and cs.count()["clusters"] >= 20
    cs.page = 1
    assert not cs.clusters()["cluster_id"].is_in(first["cluster_id"].implode()).any()
    cs.open_cluster = int(first["cluster_id"][0])
    m = cs.members()
    assert len(m) == first["size"][0]
    ops = cs.diff(0, 1)
    assert "".join(t for op, t in ops if op != "+") == m["text"][0]
    s, p = cs.s_curve()
    assert p[0] == 0 and p[-1] == 1


def test_planner_state_uses_the_run_measurements(run_dir):
    ps = PlannerState(run_dir, token_target=2e9, days=10, gpus=8, deadline_days=2)
    r = ps.result()
    f = query.funnel(run_dir, load(run_dir / "config.yaml"))
    kept, raw = f["bytes_out"][-1], f["bytes_in"][0]
    assert abs(r["retention_product"] - kept / raw) < 1e-12
    assert abs(r["raw_bytes"] - 2e9 * ps.bytes_per_token * raw / kept) / r["raw_bytes"] < 1e-9
    assert abs(r["throughput"]["tokens_per_s"] - 2e9 / (10 * 86400)) < 1e-6


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_serve_answers_over_http(run_dir):
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "lab.cli", "serve", str(run_dir), "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        body = ""
        deadline = time.time() + 90
        while time.time() < deadline:
            try:
                body = urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=30).read().decode()
                break
            except OSError:
                if proc.poll() is not None:
                    raise AssertionError(proc.stderr.read()) from None
                time.sleep(0.5)
        assert "corpus-lab" in body and "bokeh" in body.lower()
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_serve_refuses_a_missing_run(tmp_path):
    r = subprocess.run([sys.executable, "-m", "lab.cli", "serve", str(tmp_path / "nope")], capture_output=True, text=True)
    assert r.returncode == 2 and "not a run directory" in r.stderr
