"""Per-language thresholds (``lab.select.calibrate``, ``corpus-lab calibrate``) on a run whose second language is
the first one's documents with one signal scaled: the calibrated threshold must scale with it."""

import shutil

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from lab import query

from lab.select import calibrate
from lab.config import load
from lab.errors import ConfigError
from lab.io.run import RunLayout
from lab.io.schema import DOCS_SCHEMA, REJECTS_SCHEMA
from lab.select.rules import Rule

SCALE = 1.2  # a language whose documents repeat word 4-grams more than the reference's
STAGE, SIGNAL, KNOB, OP = "gopher_repetition", "gr_top_4gram_char_frac", "max_top_4gram_char_frac", "<="


@pytest.fixture(scope="module")
def two_languages(synthetic_run_dir, tmp_path_factory):
    """The synthetic run's English documents as "en", and again as "xx" with ``SIGNAL`` times ``SCALE``; every
    numeric signal jittered a little (distinct values, so a quantile is one document's)."""
    root = tmp_path_factory.mktemp("calib") / "run"
    src, lay = RunLayout(synthetic_run_dir), RunLayout(root)
    lay.make()
    t = pa.concat_tables(pq.read_table(p) for p in sorted(src.signals.glob("part-*.parquet")))
    t = t.filter(pa.compute.equal(t.column("lang"), "en"))
    rng = np.random.default_rng(0)
    parts = []
    for k, lang in enumerate(("en", "xx")):
        u = t
        for i, f in enumerate(u.schema):
            if pa.types.is_floating(f.type):
                x = u.column(i).to_numpy(zero_copy_only=False) * rng.uniform(0.999, 1.001, u.num_rows)
                if lang == "xx" and f.name == SIGNAL:
                    x = x * SCALE
                u = u.set_column(i, f.name, pa.array(x, f.type, from_pandas=True))  # nulls stay null
        u = u.set_column(u.schema.get_field_index("lang"), "lang", pa.array([lang] * u.num_rows, pa.string()))
        ids = u.column("doc_id").to_numpy() * 2 + k
        parts.append(u.set_column(u.schema.get_field_index("doc_id"), "doc_id", pa.array(ids)))
    pq.write_table(pa.concat_tables(parts), lay.part("signals", "00000"))
    for name, schema in (("docs", DOCS_SCHEMA), ("rejects", REJECTS_SCHEMA)):  # no texts: not read here
        pq.write_table(schema.empty_table(), lay.part(name, "00000"))
    shutil.copy(src.config, lay.config)
    return root


def test_a_scaled_language_gets_its_threshold_scaled(two_languages):
    cfg = load(two_languages / "config.yaml")
    cal = calibrate.calibrate(two_languages, cfg, min_docs=20)
    row = cal.report.filter(cal.report["knob"] == f"{STAGE}.{KNOB}").row(0, named=True)
    base = getattr(cfg.stage(STAGE), KNOB)
    assert row["lang"] == "xx" and row["reference_value"] == base
    # the English threshold sits at share p of English; the same share of "xx" lies below SCALE times it
    en = query.quantiles(two_languages, SIGNAL, ["en"])["en"]
    p = row["reference_fails"]
    assert 0 < p < 1, "the sample's English documents must have some past the threshold"
    assert row["value"] == pytest.approx(calibrate._quantile(en, p if OP == ">=" else 1 - p) * SCALE, rel=0.05)
    assert abs(row["fails"] - p) <= 0.05  # the same share of the language's documents fails it
    assert cal.overrides[STAGE]["xx"][KNOB] == row["value"]
    # a signal whose distribution is the reference's keeps the reference's threshold: it already cuts there
    same = cal.report.filter(cal.report["knob"] == "gopher_quality.min_words").row(0, named=True)
    assert same["reference_fails"] > 0 and same["value"] == same["reference_value"]


def test_a_target_retention_is_what_the_language_keeps(two_languages):
    cfg = load(two_languages / "config.yaml")
    cal = calibrate.calibrate(two_languages, cfg, min_docs=20, retention=0.6, stages=(STAGE,))
    ts = calibrate.thresholds(two_languages, cfg, (STAGE,), "en")
    values = [cal.overrides.get(STAGE, {}).get("xx", {}).get(t.knob.key, t.knob.value) for t in ts]
    kept = query.keep_share(two_languages, calibrate._rules_at(ts, values), "xx")
    n = dict(query.languages(two_languages))["xx"]
    assert kept >= 0.6 - 1 / n and kept <= 0.6 + 0.1, kept


def test_the_config_holds_the_overrides_by_language(two_languages, tmp_path):
    from lab.cli import main

    out = tmp_path / "cal.yaml"
    assert main(["calibrate", str(two_languages), "--min-docs", "20", "--out", str(out)]) == 0
    data = yaml.safe_load(out.read_text())
    assert KNOB in data["stages"][STAGE]["by_lang"]["xx"]
    assert "en" not in data["stages"][STAGE]["by_lang"]


def test_too_few_documents_of_the_reference_is_a_clear_error(two_languages):
    cfg = load(two_languages / "config.yaml")
    with pytest.raises(ConfigError, match="reference language 'de' has 0 documents.*--reference"):
        calibrate.calibrate(two_languages, cfg, reference="de")
    with pytest.raises(ConfigError, match="retention=1.5"):
        calibrate.calibrate(two_languages, cfg, retention=1.5)
    cal = calibrate.calibrate(two_languages, cfg, min_docs=20, languages=["zz"])  # a language the run lacks
    assert cal.skipped == {"zz": "0 documents (< 20)"} and cal.overrides == {}


def test_the_calibrated_config_loads_and_cuts_the_language_where_the_reference_is_cut(two_languages):
    from lab.config import loads

    from lab.select import knobs

    cfg = knobs.apply(load(two_languages / "config.yaml"), {"language.keep": ("en", "xx")})  # both kept
    cal = calibrate.calibrate(two_languages, cfg, min_docs=20, stages=(STAGE,))
    tuned = loads(calibrate.config_text(cfg, cal))
    assert tuned.stages.overrides(STAGE)["xx"] == cal.overrides[STAGE]["xx"]

    from lab.select.ruleset import ruleset

    def fails(c, lang: str) -> float:  # the share of the language's documents failing KNOB's rule under c
        rule = next(x for x in ruleset(c) if x.stage == STAGE and x.signal == SIGNAL and x.op == OP)
        return query.fail_shares(two_languages, [rule], lang)[0]

    # the base threshold fails more of "xx" (its documents repeat more) than of "en"; calibrated (its
    # by_lang value, compiled to SQL per document), "xx" fails about the share "en" fails, and "en" as before
    n = dict(query.languages(two_languages))["xx"]
    assert fails(cfg, "xx") > fails(cfg, "en") + 1 / n
    assert abs(fails(tuned, "xx") - fails(cfg, "en")) <= 1 / n
    assert fails(tuned, "en") == fails(cfg, "en")


def test_a_share_below_one_document_keeps_the_base_only_where_it_cuts_none():
    from lab.select import knobs

    k = knobs.Knob("s", "max_x", "number", 0.5, "x", step=0.01)
    t = calibrate.Threshold(k, Rule("s", "x", "<=", 0.5, "many"), 0.001)
    grid = np.linspace(0.0, 0.8, query.GRID_POINTS)
    # 100 documents: a share of 0.001 expects none past the threshold
    assert calibrate._value(t, grid, 0.001, 100, base_fail=0.0) == 0.5  # the base cuts none: it stays
    assert calibrate._value(t, grid, 0.001, 100, base_fail=0.3) == 0.8  # it cuts 30%: the sample's maximum
    assert calibrate._value(t, grid, 0.25, 100, base_fail=0.3) == 0.6  # a share to place: its quantile


def test_the_dashboard_opens_at_a_calibrated_config(two_languages, tmp_path):
    """``corpus-lab serve RUN --config calibrated.yaml``: the selection starts at the file's thresholds, its
    per-language ones as ``stage.key@lang`` knobs, and a language's funnel is the calibrated one's."""
    import polars as pl

    from apps.store import Selection
    from lab.select import knobs
    from lab.config import loads

    cfg = knobs.apply(load(two_languages / "config.yaml"), {"language.keep": ("en", "xx")})
    cal = calibrate.calibrate(two_languages, cfg, min_docs=20, stages=(STAGE,))
    path = tmp_path / "calibrated.yaml"
    path.write_text(calibrate.config_text(cfg, cal))
    s = Selection(two_languages)
    s.load_config(path)
    name = f"{STAGE}.{KNOB}@xx"
    assert s.moved[name] == cal.overrides[STAGE]["xx"][KNOB] and s.moved["language.keep"] == ("en", "xx")
    assert s.config.stages == loads(path.read_text()).stages
    s.lang = "xx"
    assert {k.name: k.value for k in s.knobs()}[name] == s.moved[name]
    want = query.funnel(two_languages, s.config, by="lang").filter(pl.col("lang") == "xx").drop("lang")
    assert s.view(lang="xx").funnel.equals(want)
    # a config that changes a signal's parameters is not a threshold to explore: refused, nothing changes
    before = dict(s.moved)
    other = tmp_path / "other.yaml"
    data = yaml.safe_load(path.read_text())
    data["stages"]["near_dedup"]["ngram"] = data["stages"]["near_dedup"].get("ngram", 5) + 1
    other.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match=r"more than thresholds: stages\.near_dedup\.ngram"):
        s.load_config(other)
    assert s.moved == before
