"""Knobs: every threshold as a control, found from the configs, applied back into a valid config."""

from __future__ import annotations

import dataclasses
import math

import pytest
import yaml

from lab.select import knobs
from lab.config import Config, build, dumps, loads, to_dict
from lab.errors import ConfigError
from lab.stages import STAGE_NAMES


def test_every_threshold_is_a_knob_with_its_signal():
    ks = {k.name: k for k in knobs.knobs(Config(), {"gq_words": (0.0, 9000.0)}, ("de", "en"))}
    assert ks["gopher_quality.min_words"].signal == "gq_words"
    assert (ks["gopher_quality.min_words"].lo, ks["gopher_quality.min_words"].hi) == (0.0, 9000.0)
    assert ks["gopher_quality.max_words"].hi == 100_000  # widened to include the value
    assert ks["language.min_score"].signal == "lang_score"
    assert ks["fineweb.max_short_line_ratio"].signal == "fw_short_line_ratio"
    assert ks["gopher_repetition.max_dup_10gram_char_frac"].signal == "gr_dup_10gram_char_frac"
    assert ks["language.keep"].kind == "languages" and ks["language.keep"].options == ("de", "en")
    assert ks["near_dedup.threshold"].options[0] == 0.5 and "near_dedup.bands" not in ks  # signature: not a knob
    assert all(ks[f"{s}.enabled"].kind == "switch" for s in ("extract", "c4", "near_dedup", "pii"))
    # every numeric field of a stage config that makes a rule is found
    numbers = [k for k in ks.values() if k.kind in ("number", "integer") and k.name != "pii.max_pii"]
    assert len(numbers) >= 25 and all(k.signal for k in numbers)


def test_apply_sets_knobs_and_exports_what_run_reads():
    moved = {"gopher_quality.min_words": 120, "language.keep": ("en", "de"), "near_dedup.threshold": 0.9,
             "c4.enabled": False, "fineweb.max_short_line_ratio": 0.5}
    cfg = knobs.apply(Config(), moved)
    got = knobs.values(cfg)
    assert all(got[k] == v for k, v in moved.items())
    assert loads(dumps(cfg)) == cfg  # the exported file is the config `corpus-lab run --config` reads
    assert to_dict(cfg)["stages"]["gopher_quality"]["min_words"] == 120
    hand = build(Config, {"stages": {"gopher_quality": {"min_words": 120}, "language": {"keep": ["en", "de"]},
                                     "near_dedup": {"threshold": 0.9}, "c4": {"enabled": False},
                                     "fineweb": {"max_short_line_ratio": 0.5}}})
    assert cfg == hand


def test_bad_knobs_are_clear_errors():
    with pytest.raises(ConfigError, match="knob 'gopher_quality.nope' does not exist"):
        knobs.apply(Config(), {"gopher_quality.nope": 1})
    with pytest.raises(ConfigError, match="threshold=0.81"):
        knobs.apply(Config(), {"near_dedup.threshold": 0.81})


# --- help per knob: unit, the published default and where it comes from, one sentence


def test_every_knob_says_its_unit_default_source_and_help():
    from lab.stages import BY_NAME

    ks = knobs.knobs(Config())
    assert len(ks) >= 40
    for k in ks:
        module = BY_NAME[k.stage]
        field = next(f for f in dataclasses.fields(module.Config) if f.name == k.key)
        assert field.metadata.get("unit") and field.metadata.get("help"), f"{k.name}: declare unit and help on it"
        assert k.unit and k.source and k.help, k.name
        assert k.default == field.default == getattr(module.Config(), k.key) == k.value, k.name
        # one plain sentence: capitalised, one full stop, at the end
        assert k.help[0].isupper() and k.help.endswith(".") and ". " not in k.help, k.help
        assert "kept" in k.help or k.kind == "switch" and k.help.startswith("On:"), k.help
    by = {k.name: k for k in ks}
    assert by["gopher_quality.min_words"].unit == "words"
    assert "Gopher (Rae et al. 2021)" in by["gopher_quality.min_words"].source
    assert by["gopher_repetition.max_dup_10gram_char_frac"].unit == "fraction of characters"
    assert "C4 (Raffel et al. 2020)" in by["c4.min_sentences"].source
    assert "FineWeb (Penedo et al. 2024)" in by["fineweb.max_short_line_ratio"].source
    assert "lid.176" in by["language.min_score"].source and by["language.min_score"].unit == "score 0..1"
    assert by["near_dedup.threshold"].unit == "Jaccard" and "MinHash LSH" in by["near_dedup.threshold"].source
    assert by["pii.max_pii"].source.startswith("corpus-lab")  # a field that names its own source


# --- round steps; shown = applied = exported


def _is_round(step: float) -> bool:
    m = step / 10 ** math.floor(math.log10(step) + 1e-9)
    return any(math.isclose(m, x) for x in (1, 2, 5))


def _check_slider(k: knobs.Knob, lo: float, hi: float) -> None:
    assert k.step is not None and k.step > 0 and _is_round(k.step), (k.name, k.step)
    if k.kind == "integer":
        assert isinstance(k.step, int) and k.step >= 1 and isinstance(k.lo, int) and isinstance(k.hi, int)
    for end in (k.lo, k.hi):  # on the grid of the step, and written as a short decimal
        assert math.isclose(end / k.step, round(end / k.step), abs_tol=1e-9), (k.name, end, k.step)
        assert len(repr(float(end))) <= len(f"{float(end):.{k.decimals}f}") + 2, (k.name, end)
    assert k.lo <= min(lo, k.value) and k.hi >= max(hi, k.value), k.name  # the run's range and the value
    span = max(hi, k.value) - min(lo, k.value)
    n = (k.hi - k.lo) / k.step
    if k.kind == "number" or span >= 100:
        assert 100 <= n <= 260, (k.name, n)  # 100..250 steps, plus at most one at each end from alignment
    assert k.lo > min(lo, k.value) - k.step and k.hi < max(hi, k.value) + k.step, k.name  # no wider than needed


@pytest.mark.parametrize("lo, hi", [(0.0, 1.0), (0.0, 0.97), (0.013, 0.2871), (0.0, 17.3), (0.0, 9000.0), (2.0, 3.0),
                                    (0.0, 0.0004), (-5.0, 1234567.0), (0.5, 0.5)])
def test_slider_steps_are_round_and_span_the_range(lo, hi):
    ranges = {s: (lo, hi) for s in ("gq_words", "lang_score", "gq_mean_word_length", "fw_dup_line_char_ratio",
                                    "gr_dup_para_frac", "c4_sentences", "pii_total")}
    for k in knobs.knobs(Config(), ranges):
        if k.signal in ranges:
            _check_slider(k, lo, hi)


def test_slider_steps_on_the_sample_run(synthetic_run_dir):
    from lab import query

    ranges = query.signal_ranges(synthetic_run_dir)
    numeric = [k for k in knobs.knobs(Config(), ranges) if k.kind in ("number", "integer")]
    assert len(numeric) >= 25
    # without a model the quality score is empty: no range, so no slider (the dashboard shows a number box)
    assert [k.signal for k in numeric if k.signal not in ranges] == ["qm_score"]
    for k in numeric:
        if k.signal in ranges:
            _check_slider(k, *ranges[k.signal])


def test_snap_is_the_short_decimal_the_slider_shows():
    k = knobs.Knob("language", "min_score", "number", 0.65, "lang_score", 0.0, 1.0, step=0.01)
    assert 0.1 * 7 != 0.7 and knobs.snap(k, 0.1 * 7) == 0.7 and repr(knobs.snap(k, 0.1 * 7)) == "0.7"
    assert knobs.snap(k, 0.69597288) == 0.7  # the slider bug of issue 12: what shows as 0.70 is applied as 0.7
    assert knobs.snap(k, 0.0049) == 0.0 and repr(knobs.snap(k, -0.001)) == "0.0"
    i = knobs.Knob("gopher_quality", "min_words", "integer", 50, "gq_words", 0, 9000, step=50)
    assert knobs.snap(i, 74.9) == 50 and knobs.snap(i, 75.0) == 100 and isinstance(knobs.snap(i, 80.0), int)
    c = knobs.Knob("near_dedup", "threshold", "choice", 0.8, options=(0.8, 0.9))
    assert knobs.snap(c, 0.9) == 0.9


def test_snapped_values_round_trip_through_the_exported_config():
    ranges = {"gq_words": (0.0, 9000.0), "lang_score": (0.10123, 1.0), "gq_mean_word_length": (0.0, 17.3),
              "fw_dup_line_char_ratio": (0.0, 0.4132), "gr_dup_para_frac": (0.0, 0.93), "c4_sentences": (0.0, 312.0),
              "fw_newline_word_ratio": (0.0, 5.7), "pii_total": (0.0, 40.0), "gq_hash_word_ratio": (0.0, 0.0123)}
    base = Config()
    checked = 0
    for k in knobs.knobs(base, ranges):
        if k.signal not in ranges:
            continue
        n = round((k.hi - k.lo) / k.step)
        for i in range(n + 1):
            slider = k.lo + i * k.step  # what a slider reports: float noise included
            v = knobs.snap(k, slider)
            assert v == pytest.approx(slider, abs=k.step / 2)
            assert len(repr(v)) <= len(f"{v:.{k.decimals}f}"), (k.name, v)  # repr is the short decimal shown
            assert yaml.safe_load(yaml.safe_dump(v)) == v
            if i % 9 and i < n:  # the whole config's round trip (5 ms) on every 9th position and the ends
                continue
            try:
                cfg = knobs.apply(base, {k.name: v})
            except ConfigError:  # e.g. a min above its max: the app refuses it, nothing to export
                continue
            got = knobs.values(loads(dumps(cfg)))[k.name]
            assert got == v and repr(got) == repr(v) and type(got) is type(v), (k.name, v, got)
            checked += 1
    assert checked > 150


def test_a_typed_value_is_applied_and_exported_as_typed():
    cfg = knobs.apply(Config(), {"language.min_score": 0.69597288})
    assert "min_score: 0.69597288" in dumps(cfg)
    assert knobs.values(loads(dumps(cfg)))["language.min_score"] == 0.69597288


# --- diffs and reset


def test_diff_lists_what_moved_in_funnel_order_with_units():
    base = Config()
    moved = {"near_dedup.threshold": 0.9, "gopher_quality.min_words": 80, "c4.enabled": False,
             "language.keep": ("en", "de"), "language.min_score": 0.7}
    changes = knobs.diff(base, knobs.apply(base, moved))
    assert [c.name for c in changes] == ["language.keep", "language.min_score", "gopher_quality.min_words",
                                         "c4.enabled", "near_dedup.threshold"]
    by = {c.name: c for c in changes}
    assert (by["gopher_quality.min_words"].before, by["gopher_quality.min_words"].after) == (50, 80)
    assert by["gopher_quality.min_words"].unit == "words" and by["near_dedup.threshold"].unit == "Jaccard"
    assert [str(c) for c in changes] == ["language.keep: en -> en,de", "language.min_score: 0.65 -> 0.7 score 0..1",
                                         "gopher_quality.min_words: 50 -> 80 words", "c4.enabled: on -> off",
                                         "near_dedup.threshold: 0.8 -> 0.9 Jaccard"]
    assert knobs.diff(base, base) == []
    # a value moved and moved back is no change
    assert knobs.diff(base, knobs.apply(base, {"gopher_quality.min_words": 50})) == []


def test_reset_one_stage_or_all():
    names = knobs.stage_knobs("gopher_quality")
    assert names[0] == "gopher_quality.enabled" and "gopher_quality.min_words" in names
    assert all(n.startswith("gopher_quality.") for n in names) and len(names) == 10
    assert knobs.stage_knobs("near_dedup") == ("near_dedup.enabled", "near_dedup.threshold", "near_dedup.keep")
    assert {n for s in STAGE_NAMES for n in knobs.stage_knobs(s)} == set(knobs.values(Config()))
    moved = {"gopher_quality.min_words": 80, "gopher_quality.enabled": False, "c4.min_sentences": 3}
    assert knobs.reset(moved, stage="gopher_quality") == {"c4.min_sentences": 3}
    assert knobs.reset(moved) == {} and moved["c4.min_sentences"] == 3  # the caller's dict is not changed
    with pytest.raises(ConfigError, match="unknown stage 'gopher'.*known: url, extract, language"):
        knobs.stage_knobs("gopher")


# --- the state in a link


EVERY_KIND = {
    "extract.enabled": False,  # switch
    "gopher_quality.min_words": 80,  # integer
    "pii.max_pii": 3,
    "language.min_score": 0.69597288,  # number, typed exactly
    "fineweb.max_dup_line_char_ratio": 1e-05,
    "gopher_quality.max_symbol_word_ratio": 1e+20,
    "near_dedup.threshold": 0.55,  # choice of the grid
    "near_dedup.keep": "longest",  # choice of names
    "language.keep": ("en", "de", "zh"),  # languages
}


@pytest.mark.parametrize("name", sorted(EVERY_KIND))
def test_link_round_trips_each_kind(name):
    moved = {name: EVERY_KIND[name]}
    text = knobs.encode(moved)
    got = knobs.decode(text, Config())
    assert got == moved and type(got[name]) is type(moved[name])
    assert knobs.decode("?" + text, Config()) == moved


def test_link_round_trips_every_knob_moved_at_once():
    base = Config()
    text = knobs.encode(EVERY_KIND)
    assert text.startswith("extract.enabled=false&language.keep=en,de,zh&language.min_score=0.69597288&")
    assert "gopher_quality.max_symbol_word_ratio=1e%2B20" in text  # '+' would read as a space
    assert knobs.decode(text, base) == EVERY_KIND
    cfg = knobs.apply(base, knobs.decode(text, base))
    assert knobs.diff(base, cfg) and all(knobs.values(cfg)[n] == v for n, v in EVERY_KIND.items())
    every = {n: v for n, v in knobs.values(knobs.apply(base, {"c4.enabled": False})).items()}  # all 45 knobs
    assert knobs.decode(knobs.encode(every), base) == every
    assert knobs.encode({}) == "" and knobs.decode("", base) == {} and knobs.decode("?", base) == {}
    assert knobs.encode({"language.keep": ["de"]}) == "language.keep=de"  # a widget's list


def test_link_keeps_the_apps_other_parameters_out():
    got = knobs.decode("tab=planner&gopher_quality.min_words=80&page=3", Config(), ignore=("tab", "page"))
    assert got == {"gopher_quality.min_words": 80}


@pytest.mark.parametrize("link, match", [
    ("gopher_quality.min_wrds=80", r"link parameter 'gopher_quality.min_wrds' does not exist; the knobs of "
                                   r"gopher_quality: gopher_quality.enabled, gopher_quality.min_words"),
    ("tab=planner", r"link parameter 'tab' does not exist; knobs are stage.key with stage one of url, extract"),
    ("gopher_quality.min_words=eighty", r"gopher_quality.min_words='eighty' is not allowed: must be a whole number "
                                        r"\(words\); fix the value in the link or remove the parameter"),
    ("gopher_quality.min_words=80.5", r"must be a whole number"),
    ("language.min_score=nan", r"language.min_score='nan' is not allowed: must be a finite number \(score 0..1\)"),
    ("language.min_score=1_0", r"must be a finite number"),
    ("language.min_score=", r"language.min_score='' is not allowed"),
    ("c4.enabled=no", r"c4.enabled='no' is not allowed: must be true or false"),
    ("near_dedup.threshold=0.81", r"near_dedup.threshold='0.81' is not allowed: must be one of 0.5, 0.55, .*0.95"),
    ("near_dedup.keep=newest", r"must be one of lowest_id, longest, best_signal"),
    ("language.keep=en,,de", r"language.keep='en,,de' is not allowed: must be a comma-separated list"),
    ("language.keep=en;de", r"language.keep='en;de' is not allowed"),
    ("gopher_quality.min_words", r"link parameter 'gopher_quality.min_words' has no value"),
    ("c4.min_sentences=3&c4.min_sentences=4", r"'c4.min_sentences' is given twice"),
    ("language.min_score=1.5", r"min_score=1.5 is not allowed: must be between 0 and 1; fix the value in the link"),
    ("gopher_quality.min_words=200000", r"max_words=100000 is not allowed: must be >= min_words \(200000\)"),
])
def test_a_bad_link_is_a_clear_error_and_sets_nothing(link, match):
    good = "extract.min_chars=2&"  # a valid parameter before the bad one is not applied either
    state = {"c4.enabled": False}
    with pytest.raises(ConfigError, match=match):
        state = knobs.decode(good + link, Config())
    assert state == {"c4.enabled": False}


def test_a_link_checks_min_against_max_as_a_whole():
    # min_words above the base's max_words is fine when the same link raises max_words
    got = knobs.decode("gopher_quality.min_words=200000&gopher_quality.max_words=300000", Config())
    assert knobs.apply(Config(), got).stages.gopher_quality.min_words == 200_000


def test_encode_refuses_an_unknown_knob():
    with pytest.raises(ConfigError, match="knob 'c4.min_words' does not exist; the knobs of c4: c4.enabled"):
        knobs.encode({"c4.min_words": 3})


# --- a name for the batch run


def test_run_name_is_never_the_explored_runs_and_is_deterministic():
    base = Config(name="sample")
    chosen = knobs.apply(base, {"gopher_quality.min_words": 80})
    name = knobs.run_name(base, chosen)
    assert name == f"sample-{chosen.config_hash()[:8]}" and name == knobs.run_name(base, chosen)
    assert knobs.run_name(base, base) != base.name  # even with nothing moved
    assert knobs.run_name(base, knobs.apply(base, {"gopher_quality.min_words": 81})) != name
    named = dataclasses.replace(chosen, name=name)
    assert named.config_hash() == chosen.config_hash() and knobs.run_name(base, named) == name  # idempotent
    # exploring an exported run and exporting again: no growing chain of suffixes, never the same name
    again = Config(name=name)
    assert knobs.run_name(again, knobs.apply(again, {"c4.min_sentences": 3})).count("-") == 1
    assert knobs.run_name(again, chosen) not in (name, "sample")
    assert Config(name=knobs.run_name(again, chosen)).name  # a valid run name


def test_per_language_knobs_round_trip_through_config_link_and_diff():
    """``stage.key@lang``: a language's threshold as a knob — applied into ``by_lang``, listed by ``values``
    and ``diff``, carried by a link, reset with its stage; a threshold that cannot differ by language, or a
    bad language code, is refused with the knob's name."""
    base = Config()
    name = "gopher_quality.min_stop_words@de"
    cfg = knobs.apply(base, {name: 0, "gopher_quality.min_words": 80})
    assert cfg.stages.overrides("gopher_quality") == {"de": {"min_stop_words": 0}}
    assert cfg.stages.gopher_quality.min_stop_words == base.stages.gopher_quality.min_stop_words
    de = {k.name: k for k in knobs.knobs(cfg, lang="de")}
    assert de[name].value == 0 and de[name].lang == "de" and de[name].per_language
    assert de["gopher_quality.min_words@de"].value == 80  # no override: the stage's own value
    assert "near_dedup.threshold" in de and "c4.enabled" in de  # not per language: every language's
    assert [str(c) for c in knobs.diff(base, cfg)] == ["gopher_quality.min_words: 50 -> 80 words",
                                                       f"{name}: 2 -> 0 distinct stop words"]
    assert knobs.diff(cfg, knobs.apply(cfg, {"gopher_quality.min_stop_words@fr": 2})) != []  # fr now explicit
    link = knobs.encode({name: 0, "gopher_quality.min_words": 80})
    assert link == f"gopher_quality.min_words=80&{name}=0"
    assert knobs.apply(base, knobs.decode(link, base)) == cfg
    assert knobs.reset({name: 0, "c4.min_sentences": 2}, stage="gopher_quality") == {"c4.min_sentences": 2}
    assert loads(dumps(cfg)) == cfg  # exported as the stage's by_lang section
    with pytest.raises(ConfigError, match=r"near_dedup.threshold@de.*cannot differ by language"):
        knobs.apply(base, {"near_dedup.threshold@de": 0.7})
    with pytest.raises(ConfigError, match=r"'d e' is not a language code"):
        knobs.decode("gopher_quality.min_words@d e=3", base)
    with pytest.raises(ConfigError, match=r"link parameter gopher_quality.min_words@de='x' is not allowed"):
        knobs.decode("gopher_quality.min_words@de=x", base)
    with pytest.raises(ConfigError, match=r"url.max_word_hits@de.*cannot differ"):  # decided before the language
        knobs.apply(base, {"url.max_word_hits@de": 3})
