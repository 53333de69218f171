"""The dashboard: its store and tab models as plain objects over a real run, the Funnel tab outside a
server, and the server answering over HTTP."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from apps.dispatch import Dispatch
from apps.store import Clusters, Planner, Selection, Viewer, curve, retention
from lab import query
from lab.config import loads
from lab.errors import ConfigError


@pytest.fixture(scope="module")
def run_dir(synthetic_run_dir):
    return synthetic_run_dir


def test_selection_follows_the_knobs(run_dir):
    s = Selection(run_dir)
    assert s.funnel().equals(query.funnel(run_dir, s.base)) and s.moved == {} and s.diff() == []
    s.set("gopher_quality.min_words", 400)
    s.set("language.keep", ("en", "de"))
    cfg = s.config
    assert cfg.stages.gopher_quality.min_words == 400 and cfg.stages.language.keep == ("en", "de")
    assert s.changed == ["language.keep"] and s.previous == {"gopher_quality.min_words": 400}
    assert s.previous_config.stages.language.keep == s.base.stages.language.keep
    assert s.funnel().equals(query.funnel(run_dir, cfg))
    assert s.funnel(by="lang").equals(query.funnel(run_dir, cfg, by="lang"))
    assert [c.name for c in s.diff()] == ["language.keep", "gopher_quality.min_words"]  # funnel order
    r = s.retention()
    f = s.funnel()
    assert r["docs"] == f["docs_out"][-1] / f["docs_in"][0] and set(r) == {"docs", "bytes", "tokens"}
    with pytest.raises(ConfigError, match="threshold=0.83"):
        s.set("near_dedup.threshold", 0.83)
    assert s.config == cfg  # a refused value changes nothing
    s.set("gopher_quality.min_words", s.base.stages.gopher_quality.min_words)  # back at the run's value: no move
    assert "gopher_quality.min_words" not in s.moved
    s.reset("language")
    assert s.moved == {} and s.config == s.base
    s.set("gopher_quality.min_words", 80)
    s.set("c4.enabled", False)
    s.reset()
    assert s.moved == {} and s.config == s.base


def test_the_change_and_the_export(run_dir):
    s = Selection(run_dir)
    s.set("gopher_quality.min_words", 300)  # the synthetic sample's kept documents have >= 252 words
    ch = s.change()
    before = query.drop_reasons(run_dir, s.base)
    after = query.drop_reasons(run_dir, s.config)
    newly = set(before.filter(before["reason"].is_null())["doc_id"]) - set(after.filter(after["reason"].is_null())["doc_id"])
    assert ch["dropped"]["docs"] == len(newly) > 0 and ch["kept"]["docs"] == 0
    exported = loads(s.export_yaml())
    assert exported.name != s.base.name and exported.name == s.run_name()
    assert exported.stages == s.config.stages and exported.inputs == s.config.inputs
    assert "--config" in s.export_command()


def test_a_link_restores_the_selection(run_dir):
    s = Selection(run_dir)
    s.set("gopher_quality.min_words", 120)
    s.set("language.keep", ("en", "fr"))
    s.set("fineweb.enabled", False)
    t = Selection(run_dir)
    t.restore(s.url())
    assert t.config == s.config and t.moved == s.moved
    with pytest.raises(ConfigError):
        t.restore("gopher_quality.min_words=lots")
    assert t.config == s.config  # a bad link changes nothing


def test_curve_and_retention(run_dir):
    s = Selection(run_dir)
    v = s.view()
    f = query.funnel(run_dir, s.config)
    assert v.funnel.equals(f) and v.config_hash == s.config.config_hash() and v.retention == retention(f)
    assert v.curve == curve(f) and v.kept["docs"] == f["docs_out"][-1]
    split = s.view("lang", config=s.base)
    assert split.funnel.equals(query.funnel(run_dir, s.base, by="lang")) and split.curve == curve(f)


def test_viewer_pages_through_a_stages_drops(run_dir):
    s = Selection(run_dir)
    v = Viewer(s, stage="gopher_quality", page_size=7)
    reasons = query.drop_reasons(run_dir, s.config)
    want = set(reasons.filter(reasons["reason"].str.starts_with("gopher_quality."))["doc_id"])
    seen = []
    total = None
    for page in range(100):
        v.page = page
        docs, total = v.documents()
        if v.page != page:  # clamped: past the last page
            break
        seen += docs["doc_id"].to_list()
    assert total == len(want) and set(seen) == want and len(seen) == len(want)
    v.page = -3
    v.documents()
    assert v.page == 0


def test_planner_follows_the_selection(run_dir):
    s = Selection(run_dir)
    p = Planner(s, token_target=2e9, days=10, gpus=8, deadline_days=2)
    r = p.result()
    f = s.funnel()
    assert abs(r["retention_product"] - f["bytes_out"][-1] / f["bytes_in"][0]) < 1e-12
    assert abs(r["throughput"]["tokens_per_s"] - 2e9 / (10 * 86400)) < 1e-6
    same = p.against_run()
    s.set("c4.enabled", False)  # on the synthetic sample, later stages drop what gopher_quality drops
    f2 = s.funnel()
    r2 = p.result()
    assert abs(r2["retention_product"] - f2["bytes_out"][-1] / f2["bytes_in"][0]) < 1e-12
    assert r2["retention_product"] > r["retention_product"]
    moved = p.against_run()
    assert moved["run"]["retention_product"] == same["selection"]["retention_product"]
    assert moved["selection"]["retention_product"] == r2["retention_product"]
    # priced: the provisioned input is the raw bytes needed times the margin; training is GPUs x days x price
    from lab.plan.throughput import Prices, preset_retentions, retention_product

    p.prices, p.margin = Prices(cpu_hour=0.1, gpu_hour=3.0, storage_tb_month=20.0), 2.5
    a = p.against_run()
    assert a["priced"]["raw_bytes_provisioned"] == pytest.approx(2.5 * a["selection"]["raw_bytes"])
    assert a["priced"]["dollars"]["training"] == pytest.approx(8 * 10 * 24 * 3.0)
    assert a["priced"]["cpu_hours"] == pytest.approx(2.5 * a["selection"]["cores"]["cpu_seconds"] / 3600)
    pre = a["preset"]["plan"]
    assert pre["retention_product"] == pytest.approx(retention_product(preset_retentions("deepseek-v3-class")))
    assert pre["raw_bytes"] > a["selection"]["raw_bytes"]  # the published funnel keeps far less than the sample's
    assert a["corpus"]["days"] == pytest.approx(a["corpus"]["raw_bytes"] * sum(
        p.inputs()["stage_cpu_seconds_per_byte"].values()) / p.cores / 86400)


def test_clusters_follow_the_funnel_threshold(run_dir):
    s = Selection(run_dir)
    c = Clusters(s, page_size=5)
    assert c.at == s.config.stages.near_dedup.threshold
    s.set("near_dedup.threshold", 0.6)
    assert c.at == 0.6
    df, n = c.clusters()
    assert n == query.cluster_count(run_dir, 0.6, config=s.config, page_size=5) and 0 < df.height <= 5
    c.page = 10**6
    c.clusters()
    assert c.page == n["pages"] - 1
    c.page = -4
    c.clusters()
    assert c.page == 0
    c.survivors_only = True  # only what near_dedup decides: two or more members alive before it
    alive, _ = c.clusters()
    assert alive.height and (alive["alive"] >= 2).all()
    c.survivors_only, c.page = False, 0
    c.open_cluster = int(df["cluster_id"][0])
    m = c.members()
    kept = query.drop_reasons(run_dir, s.config)
    kept = set(kept.filter(kept["reason"].is_null())["doc_id"])
    for doc, status in zip(m["doc_id"], m["status"]):
        assert (status == "kept") == (doc in kept)
    cmp = c.compare(m)
    assert cmp["a"] != cmp["b"] and {cmp["a"], cmp["b"]} <= set(m["doc_id"])
    c.pair = (int(m["doc_id"][-1]), int(m["doc_id"][0]))
    assert (c.compare(m)["a"], c.compare(m)["b"]) == c.pair


def test_the_near_dedup_card_and_the_dedup_tab_give_the_recall_at_the_threshold(run_dir):
    """The grid offers every threshold; the threshold's help says why some find few pairs, and the near_dedup
    card and the Dedup tab give the expected pair recall at the one chosen (lab.stages.near_dedup, the run's
    14 bands x 8 rows): a grey line at 0.8, an orange warning saying what to do at 0.6."""
    from apps.views.dedup import DedupTab
    from apps.views.funnel import FunnelTab
    from apps.views.knobs import recall_note
    from lab.select import knobs
    from lab.stages import near_dedup

    s = Selection(run_dir)
    k = next(k for k in knobs.knobs(s.base) if k.name == "near_dedup.threshold")
    assert k.options == near_dedup.GRID and "expected pair recall" in k.help and "min_threshold" in k.help
    tab, dedup = FunnelTab(s, Dispatch(None)), DedupTab(s, Dispatch(None))
    note = tab.knobs.notes["near_dedup"]
    assert note.object == ""  # nothing before the card opens
    tab.knobs.cards["near_dedup"].collapsed = False
    assert "expected pair recall 0.92 at Jaccard 0.80 (14 bands x 8 rows" in note.object and "⚠" not in note.object
    assert "At the funnel's near-dup threshold." in dedup.note.object and note.object in dedup.note.object
    assert Clusters(s).recall() == near_dedup.recall(s.base.stages.near_dedup) == pytest.approx(0.9236, abs=1e-4)
    s.set("near_dedup.threshold", 0.6)  # a move: the card's line and the Dedup tab follow
    warning = near_dedup.recall_warning(s.config.stages.near_dedup)
    assert note.object == recall_note(s.config.stages.near_dedup) and warning in note.object
    assert "⚠ near_dedup: expected pair recall 0.21 at Jaccard 0.60 is below 0.7" in note.object
    assert "min_threshold: 0.6" in note.object and warning in dedup.note.object
    dedup.threshold.value = 0.9  # browsing above the funnel's: the recall there
    assert "Browsing at 0.90" in dedup.note.object and "expected pair recall 1.00 at Jaccard 0.90" in dedup.note.object


def test_labelling_needs_a_name(run_dir, tmp_path):
    import shutil

    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    s = Selection(copy)
    doc = int(query.drop_reasons(copy, s.config)["doc_id"][0])
    with pytest.raises(ConfigError, match="name"):
        s.label(doc, "bad")
    s.user = "ada"
    s.label(doc, "bad", "boilerplate")
    got = query.labels(copy)
    assert got.select("doc_id", "label", "user", "note").rows() == [(doc, "bad", "ada", "boilerplate")]


def test_funnel_tab_follows_a_slider_release(run_dir):
    """Outside a server the tab computes inline: a release patches the table, the Kept line and the chart,
    the knob's box shows the applied value, and its histogram is the one lab.query gives."""
    import param

    from apps.views.funnel import FunnelTab, table_frame, table_html

    s = Selection(run_dir)
    tab = FunnelTab(s, Dispatch(None))
    c = tab.knobs.controls["gopher_quality.min_words"]
    with param.edit_constant(c.slider):
        c.slider.value_throttled = 300
    want = query.funnel(run_dir, s.config)
    assert s.config.stages.gopher_quality.min_words == 300 and c.box.value == 300
    assert tab.frame.equals(table_frame(want, None))
    assert tab.table.object == table_html(tab.frame) and 'data-field="dropped"' in tab.table.object
    assert s.config.config_hash() in tab.retention.object and "Kept:" in tab.retention.object
    assert tab.source.data["docs"] == curve(want)["docs"]
    h = query.histogram(run_dir, s.config, "gq_words")
    h = h.filter(h["bin_lo"].is_not_null())
    assert c.source.data["passed"] == h["passed_docs"].to_list() and c.span.location == 300
    assert "drops" in tab.change.object and "min_words" in tab.change.object
    # an exact value typed in the box is applied as typed (not snapped)
    r = tab.knobs.controls["gopher_quality.min_alpha_words_ratio"]
    r.box.value = 0.7312
    assert s.config.stages.gopher_quality.min_alpha_words_ratio == 0.7312
    # a disabled stage's card is greyed out, and its knobs disabled
    tab.knobs.controls["gopher_quality.enabled"].widget.value = False
    assert "disabled" in tab.knobs.cards["gopher_quality"].title and r.box.disabled


def test_the_url_decontamination_and_quality_model_cards(run_dir):
    """Opened, each card draws its knob's histogram (lab.query's) and says what the run gives it: the URL
    lists' counts, no evaluation set, no model (the synthetic sample's run has none of them)."""
    from apps.views.funnel import FunnelTab
    from apps.views.knobs import url_report_html
    from lab.select import knobs

    s = Selection(run_dir)
    tab = FunnelTab(s, Dispatch(None))
    for stage in ("url", "decontamination", "quality_model"):
        assert tab.knobs.notes[stage].object == ""  # nothing computed for a closed card
        tab.knobs.cards[stage].collapsed = False
    urls = query.urls(run_dir)
    assert urls["what"].to_list() == ["no URL", "URL, not blocked"]  # the WARC pages have URLs, nothing is listed
    assert tab.knobs.notes["url"].object == url_report_html(urls, False)
    assert f"{urls['documents'][1]} documents with one, {urls['documents'][0]} without" in tab.knobs.notes["url"].object
    assert "No evaluation sets" in tab.knobs.notes["decontamination"].object
    assert "No model" in tab.knobs.notes["quality_model"].object and tab.contamination.object == ""
    for knob, signal in (("url.max_word_hits", "url_word_hits"), ("decontamination.min_matches", "decon_matches")):
        c = tab.knobs.controls[knob]
        h = query.histogram(run_dir, s.config, signal)
        h = h.filter(h["bin_lo"].is_not_null())
        assert c.source.data["passed"] == h["passed_docs"].to_list() and sum(h["passed_docs"]) > 0
        assert c.span.location == knobs.values(s.config)[knob] == (0 if knob.startswith("url") else 1)
    c = tab.knobs.controls["quality_model.min_score"]  # no scores: no bars, the cutoff still drawn
    assert c.source.data["left"] == [] and c.span.location == 0.5 and c.slider is None and c.box.value == 0.5


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



def test_labels_tab_serves_past_a_corrupt_label_file(run_dir, tmp_path):
    """A label file that cannot be read is named on the Labels tab; every other label still counts."""
    import shutil

    from apps.views.labels import LabelsTab

    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    s = Selection(copy, user="ada")
    drops = query.documents(copy, s.config, view="dropped", stage="gopher_quality", limit=2)["doc_id"].to_list()
    s.label(drops[0], "bad")
    s.label(drops[1], "good")
    (copy / "labels" / "part-broken.parquet").write_bytes(b"PAR1 half a file")
    opened: list = []
    tab = LabelsTab(s, Dispatch(None), lambda ids, note: opened.append((ids, note)))
    assert tab.problems.visible and "part-broken.parquet" in tab.problems.object
    row = tab.table.value.set_index("stage").loc["gopher_quality"]
    assert (row["bad"], row["good"], row["precision"]) == ("1", "1", "50.00%")
    assert "2</b> labels on <b>2</b> documents by ada" in tab.summary.object
    # one click on the stage: the viewer is asked for the labelled-good documents it drops
    tab.table.selection = [list(tab.table.value["stage"]).index("gopher_quality")]
    assert opened and opened[0][0] == [drops[1]]


def test_hidden_tabs_follow_the_selection_when_opened(run_dir):
    # a slider release recomputes the Funnel tab only; a tab behind it catches up once, when opened
    from apps.dashboard import Dashboard

    d = Dashboard(run_dir)
    planner_text = d.planner.out.object
    d.sel.set("c4.enabled", False)
    d.sel.set("gopher_quality.min_words", 80)
    assert d.planner.out.object == planner_text  # not recomputed while hidden
    assert d.planner.shown.pending is not None and d.dedup.shown.pending is not None
    d.tabs.active = d.tabs.objects.index(d.planner.view)
    assert d.planner.shown.pending is None and d.dedup.shown.pending is not None
    assert d.planner.out.object != planner_text  # the plan of the current selection
    d.sel.set("c4.enabled", True)  # shown: follows at once
    assert d.planner.shown.pending is None
    d.tabs.active = d.tabs.objects.index(d.export.view)
    assert "min_words" in d.export.changes.object


def test_labels_tab_trains_a_quality_model_from_the_labels(run_dir, tmp_path):
    """The button runs what `corpus-lab train-quality RUN` runs and shows its report (or why it cannot)."""
    import shutil

    from apps.views.labels import LabelsTab

    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    s = Selection(copy, user="ada")
    tab = LabelsTab(s, Dispatch(None), lambda ids, note: None)
    tab.train.clicks += 1  # no labels yet: the reason, not a crash
    assert "no positives" in tab.trained.object and not tab.train.disabled
    kept = query.documents(copy, s.config, view="kept", limit=12)["doc_id"].to_list()
    drops = query.documents(copy, s.config, view="dropped", stage="gopher_repetition", limit=12)["doc_id"].to_list()
    for d in kept:
        s.label(d, "good")
    for d in drops:
        s.label(d, "bad")
    tab.train.clicks += 1
    assert "held-out AUC" in tab.trained.object and "12 documents labelled good" in tab.trained.object
    assert (copy / "models" / "quality.npz").is_file() and (copy / "models" / "quality.report.json").is_file()


def test_a_language_has_its_own_thresholds_funnel_and_histograms(run_dir):
    """The language selector: the knobs that may differ by language become that language's (moving one
    writes its ``by_lang``), the Kept line and the table are its documents', the open histograms are over
    its documents, and the link carries both (outside a server the tab computes inline)."""
    import polars as pl

    from apps.views.funnel import FunnelTab

    s = Selection(run_dir)
    s.set("language.keep", ("en", "de"))
    tab = FunnelTab(s, Dispatch(None))
    assert [v for v in tab.lang.options.values()][:2] == ["(all)", s.languages[0][0]]
    tab.lang.value = "de"
    assert s.lang == "de" and "(<b>de</b> documents)" in tab.retention.object
    c = tab.knobs.controls["gopher_quality.min_stop_words"]
    assert c.name == "gopher_quality.min_stop_words@de" and "for <b>de</b> documents" in c.title.object
    c.box.value = 0
    assert s.moved["gopher_quality.min_stop_words@de"] == 0
    assert s.config.stages.overrides("gopher_quality") == {"de": {"min_stop_words": 0}}
    assert s.config.stages.gopher_quality.min_stop_words == s.base.stages.gopher_quality.min_stop_words
    want = query.funnel(run_dir, s.config, by="lang").filter(pl.col("lang") == "de").drop("lang")
    assert f"{want['docs_out'][-1]:,} documents" in tab.retention.object.replace("\u202f", ",")
    h = query.histograms(run_dir, s.config, ["gq_stop_words"], lang="de")["gq_stop_words"]
    h = h.filter(h["bin_lo"].is_not_null())
    assert c.source.data["passed"] == h["passed_docs"].to_list() and c.span.location == 0
    assert sum(c.source.data["passed"]) + sum(c.source.data["dropped"]) == want.filter(
        pl.col("stage") == "gopher_quality")["docs_in"][0]
    # back to every language: the control is the stage's own threshold again, at its own value
    tab.lang.value = "(all)"
    assert c.name == "gopher_quality.min_stop_words" and c.box.value == s.base.stages.gopher_quality.min_stop_words
    t = Selection(run_dir)
    s.lang = "de"
    t.restore(s.url())
    assert "@de=0" in s.url() and s.url().endswith("lang=de") and t.config == s.config and t.lang == "de"
    with pytest.raises(ConfigError, match="lang='xx'"):
        t.restore("lang=xx")


def test_the_document_viewer_follows_the_language(run_dir):
    """Choosing a language above the funnel filters the document viewer to its documents; back to every
    language, no filter."""
    from apps.views.funnel import FunnelTab

    s = Selection(run_dir)
    s.set("language.keep", ("en", "de"))
    tab = FunnelTab(s, Dispatch(None))
    v = tab.viewer
    v.kind.value = "kept"
    tab.lang.value = "de"
    assert v.model.lang == "de" and v.lang.value == "de" and v.page.height > 0
    assert set(v.page["lang"].to_list()) == {"de"}
    tab.lang.value = "(all)"
    de = Viewer(s, view="kept", lang="de").count()
    assert v.model.lang is None and v.lang.value == "(any)" and v.model.count() > de > 0


def test_the_mixture_tab_plans_what_materialize_writes(tokens_run):
    """Budgets typed beside the buckets become the selection's mixture: the table's tokens after and epochs
    are lab.query.mixture_plan's, the Planner plans the mixture's tokens, Export writes it; a bad budget
    is shown and changes nothing."""
    import dataclasses

    from apps.store import Planner
    from apps.views.mixture import MixtureTab
    from lab.tokens.mixture import MixtureConfig

    s = Selection(tokens_run.run_dir)
    tab = MixtureTab(s, Dispatch(None))
    df = tab.table.value.copy()
    assert df["bucket"].tolist()[0] == "en" and df["budget"].isna().all()  # the run has no mixture
    en = int(df.loc[df["bucket"] == "en", "tokens"].iloc[0])
    df.loc[df["bucket"] == "en", "budget"] = 2 * en
    tab.table.value = df
    tab._apply()
    assert s.config.mixture == MixtureConfig(by=("lang",), buckets=(
        __import__("lab.tokens.mixture").tokens.mixture.BucketTarget("en", tokens=2 * en),))
    plan = query.mixture_plan(tokens_run.run_dir, s.config)
    row = tab.table.value.set_index("bucket").loc["en"]
    want = next(r for r in plan.report if r["bucket"] == "en")
    assert row["tokens after"] == want["tokens_after"] and row["epochs"] == want["epochs"] == pytest.approx(2, abs=0.05)
    assert "in the mixture" in tab.summary.object and "2.0" in tab.summary.object  # its epochs warning
    p = Planner(s)
    assert p.result()["mixture_factor"] == pytest.approx(plan.tokens / sum(r["tokens_before"] for r in plan.report))
    assert loads(s.export_yaml()).mixture == s.config.mixture
    before = s.config
    tab.kind.value = "weight"  # budgets of thousands read as weights: refused, shown, nothing changes
    assert tab.error.visible and "weight" in tab.error.object and s.config == before
    s.set_mixture(None)
    assert s.config.mixture == s.base.mixture == dataclasses.replace(MixtureConfig())
