"""The dashboard: its state as plain objects over a real run, and the server answering over HTTP."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from apps.state import ClusterState, FunnelState, PlannerState
from lab import query
from lab.config import load, loads


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
