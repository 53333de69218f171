"""Config: YAML round-trip, and errors that name the key, the value, what is allowed and the fix."""

import subprocess
import sys

import pytest

from lab import config
from lab.config import Config, InputConfig, build
from lab.errors import ConfigError


def test_yaml_round_trip_is_equal():
    cfg = config.loads("""
name: trial
inputs:
  - {path: data/x, format: jsonl, text_field: content}
stages:
  language: {keep: [en, de], min_score: 0.5}
  gopher_quality: {min_words: 30}
  c4: {enabled: false}
percentiles:
  - {stage: gopher_quality, signal: gq_mean_word_length, drop_lowest: 5}
""")
    assert cfg.stages.language.keep == ("en", "de")
    assert cfg.stages.gopher_quality.min_words == 30
    assert cfg.stages.c4.enabled is False
    assert cfg.inputs == (InputConfig(path="data/x", format="jsonl", text_field="content"),)
    again = config.loads(config.dumps(cfg))
    assert again == cfg
    assert again.config_hash() == cfg.config_hash()


def test_a_stage_version_or_signal_parameter_changes_the_signals_hash_not_the_inputs(monkeypatch):
    from lab.stages import gopher_quality, language

    a = Config(inputs=(InputConfig("x"),))
    signals, inputs = a.signals_hash(), a.inputs_hash()
    monkeypatch.setattr(gopher_quality, "VERSION", gopher_quality.VERSION + 1)
    assert a.signals_hash() != signals and a.inputs_hash() == inputs
    monkeypatch.undo()
    assert a.signals_hash() == signals
    monkeypatch.setattr(language, "signal_params", lambda cfg: {"model": "another model"})
    assert a.signals_hash() != signals and a.inputs_hash() == inputs
    monkeypatch.undo()
    bands = build(Config, {"inputs": [{"path": "x"}], "stages": {"near_dedup": {"bands": 16}}})
    assert bands.signals_hash() != signals and bands.inputs_hash() == inputs


def test_the_readers_version_or_charset_detector_changes_the_signals_hash_not_the_inputs(monkeypatch):
    # the same input bytes decoded another way are other documents: every signal is stale
    from lab.io import decoding

    a = Config(inputs=(InputConfig("x"),))
    signals, inputs = a.signals_hash(), a.inputs_hash()
    monkeypatch.setattr(decoding, "VERSION", decoding.VERSION + 1)
    assert a.signals_hash() != signals and a.inputs_hash() == inputs
    monkeypatch.undo()
    assert a.signals_hash() == signals
    monkeypatch.setattr(decoding, "_detector_version", lambda: "resiliparse 0.0.1")
    assert a.signals_hash() != signals and a.inputs_hash() == inputs


def test_threshold_change_keeps_signals_hash():
    a = Config(inputs=(InputConfig("x"),))
    b = config.loads(config.dumps(a).replace("min_words: 50", "min_words: 10"))
    assert b.stages.gopher_quality.min_words == 10
    assert a.signals_hash() == b.signals_hash() and a.config_hash() != b.config_hash()


@pytest.mark.parametrize("text, must_contain", [
    ("stages: {gopher_quality: {min_wrds: 3}}", ["'min_wrds'", "stages.gopher_quality", "min_words"]),
    ("stagez: {}", ["'stagez'", "top level", "stages"]),
    ("stages: {language: {min_score: 3}}", ["stages.language.min_score=3.0", "between 0 and 1"]),
    ("stages: {language: {min_score: high}}", ["stages.language.min_score='high'", "a number"]),
    ("mode: fast", ["mode='fast'", "explore", "batch"]),
    ("inputs: [{path: x, format: csv}]", ["inputs[0].format='csv'", "jsonl"]),
    ("inputs: {path: x}", ["inputs=", "must be a list"]),
    ("stages: {gopher_quality: {min_words: 10, max_words: 5}}", ["max_words=5", ">= min_words (10)"]),
    ("percentiles: [{stage: nope, signal: x, drop_lowest: 5}]", ["percentiles[0].stage='nope'", "gopher_quality"]),
    ("engine: {retries: -1}", ["engine.retries=-1", ">= 0"]),
    ("engine: {memory_limit: lots}", ["engine.memory_limit='lots'", "4GiB"]),
    ("engine: {scheduler: 'foo:bar'}", ["engine.scheduler='foo:bar'", "tcp://127.0.0.1:8786"]),
    ("percentiles: [{stage: c4, signal: content_hash, drop_lowest: 5}]", ["signal='content_hash'", "numeric signal"]),
])
def test_bad_config_names_key_value_and_allowed(text, must_contain):
    with pytest.raises(ConfigError) as e:
        config.loads(text)
    for s in must_contain:
        assert s in str(e.value), (s, str(e.value))


@pytest.mark.parametrize("ok", ["auto", "4GiB", "500MB", "0.5", "2 GB", "1000000"])
def test_memory_limits_and_addresses_accepted(ok):
    assert config.loads(f"engine: {{memory_limit: '{ok}', scheduler: 'tcp://10.0.0.5:8786'}}").engine.memory_limit == ok
    assert config.loads("engine: {scheduler: 'scheduler-host:8786'}").engine.scheduler == "scheduler-host:8786"


def test_missing_config_file_and_bad_yaml(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        config.load(tmp_path / "nope.yaml")
    p = tmp_path / "bad.yaml"
    p.write_text("stages: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        config.load(p)


def test_cli_dry_run_prints_resolved_config_and_rejects_bad_keys(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text(f"name: dry\ninputs: [{{path: {tmp_path}}}]\nstages: {{fineweb: {{max_short_line_ratio: 0.5}}}}\n")
    out = subprocess.run([sys.executable, "-m", "lab.cli", "run", "--config", str(p), "--dry-run"],
                         capture_output=True, text=True, check=True).stdout
    assert config.loads(out) == config.load(p)
    assert "max_short_line_ratio: 0.5  # " in out and "(default 0.67)" in out.split("max_short_line_ratio: 0.5")[1].split("\n")[0]
    assert "  max_pii: -1  # " in out and "no limit" in out.split("  max_pii: -1")[1].split("\n")[0]
    p.write_text("name: dry\nstages: {fineweb: {short_lines: 0.5}}\n")
    r = subprocess.run([sys.executable, "-m", "lab.cli", "run", "--config", str(p), "--dry-run"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "unknown key 'short_lines'" in r.stderr and "max_short_line_ratio" in r.stderr


def test_the_reference_gives_every_key_a_meaning_and_the_commented_dump_loads_back():
    from lab import reference

    es = reference.entries()
    keys = {e.key for e in es}

    def flat(d, prefix=""):
        for k, v in d.items():
            if isinstance(v, dict):
                yield from flat(v, f"{prefix}{k}.")
            else:
                yield prefix + k

    assert set(flat(config.to_dict(Config()))) <= keys  # every key of a config is in the reference
    assert {"inputs[].path", "percentiles[].signal", "stages.pii.max_pii", "engine.memory_limit",
            "stages.near_dedup.shuffle_buckets", "pack.val_fraction"} <= keys
    assert [e.key for e in es if not e.meaning] == []
    gq = next(e for e in es if e.key == "stages.gopher_quality.min_words")
    assert gq.default == 50 and "Unit: words" in gq.meaning and "Gopher" in gq.meaning
    table = reference.markdown()
    assert table.count("\n") == len(es) + 2 and "| `engine.memory_limit` | str | `auto` |" in table
    cfg = build(Config, {"name": "x", "inputs": [{"path": "a b.jsonl", "format": "jsonl"}, {"path": "c"}],
                         "percentiles": [{"stage": "fineweb", "signal": "fw_line_punct_ratio", "drop_lowest": 5}],
                         "stages": {"language": {"keep": ["en", "de"]}, "near_dedup": {"threshold": 0.7}},
                         "engine": {"scheduler": "tcp://127.0.0.1:8786"}})
    text = reference.commented(cfg)
    assert config.loads(text) == cfg  # loadable as it is
    line = next(x for x in text.splitlines() if x.strip().startswith("threshold: 0.7"))
    assert "Jaccard" in line and "(default 0.8)" in line


BY_LANG_YAML = """
stages:
  gopher_quality:
    min_stop_words: 2
    by_lang: {de: {min_stop_words: 3}, zh: {min_words: 20}}
"""


def test_per_language_thresholds_round_trip_and_enter_the_config_hash_not_the_signals_hash():
    from lab.select.rules import Rule
    from lab.select.ruleset import ruleset

    cfg = config.loads(BY_LANG_YAML)
    assert cfg.stages.overrides("gopher_quality") == {"de": {"min_stop_words": 3}, "zh": {"min_words": 20}}
    assert cfg.stages.gopher_quality == config.loads("stages: {gopher_quality: {min_stop_words: 2}}").stages.gopher_quality
    again = config.loads(config.dumps(cfg))
    assert again == cfg and again.config_hash() == cfg.config_hash()
    from lab.reference import commented
    assert config.loads(commented(cfg)) == cfg  # --dry-run's commented dump loads back too
    plain = Config()
    assert cfg.config_hash() != plain.config_hash() and cfg.signals_hash() == plain.signals_hash()
    assert cfg.inputs_hash() == plain.inputs_hash()  # explore mode: thresholds do not change what the run holds
    rules = {r.reason: r for r in ruleset(cfg)}
    assert rules["too_few_stop_words"] == Rule("gopher_quality", "gq_stop_words", ">=", 2, "too_few_stop_words",
                                               (("de", 3),))
    assert rules["too_short"].by_lang == (("zh", 20),) and rules["too_long"].by_lang == ()
    # a language's value equal to the section's is no override of that rule
    same = config.loads("stages: {gopher_quality: {by_lang: {de: {min_words: 50}}}}")
    assert all(not r.by_lang for r in ruleset(same))


@pytest.mark.parametrize("stages, match", [
    ("gopher_quality: {by_lang: {de: {min_stop_words: -1}}}",
     r"stages\.gopher_quality\.by_lang\.de\.min_stop_words=-1 is not allowed: must be >= 0"),
    ("gopher_quality: {by_lang: {de: {max_words: 10}}}",
     r"stages\.gopher_quality\.by_lang\.de\.max_words=10 is not allowed: must be >= min_words \(50\)"),
    ("gopher_quality: {by_lang: {de: {min_words: many}}}",
     r"stages\.gopher_quality\.by_lang\.de\.min_words='many' is not allowed: must be a whole number"),
    ("gopher_quality: {by_lang: {de: {enabled: false}}}",
     r"stages\.gopher_quality\.by_lang\.de\.enabled is not allowed \(not a numeric threshold\).*min_words"),
    ("gopher_quality: {by_lang: {de: {min_word: 3}}}",
     r"stages\.gopher_quality\.by_lang\.de\.min_word is not allowed \(not a key of the stage\).*min_words"),
    ("gopher_quality: {by_lang: {no: {min_words: 3}}}", r"language code False is not allowed.*quote them"),
    ("gopher_quality: {by_lang: [de]}", r"stages\.gopher_quality\.by_lang=\['de'\] is not allowed: must be a mapping"),
    ("gopher_quality: {by_lang: {de: 3}}", r"stages\.gopher_quality\.by_lang\.de=3 is not allowed: must be a mapping"),
    ("language: {by_lang: {de: {keep: [de]}}}", r"by_lang\.de\.keep is not allowed \(not a numeric threshold\)"),
    ("pii: {by_lang: {de: {max_pii: 3}}}",
     r"stages\.pii\.by_lang\.de: by_lang overrides thresholds only; max_pii changes which rules apply"),
    ("url: {by_lang: {de: {max_word_hits: 2}}}", r"stages\.url\.by_lang is not allowed: .*before the language is known"),
    ("by_lang: {de: {min_words: 3}}", r"stages\.by_lang is not a key of stages: .*inside a stage's section"),
])
def test_bad_per_language_thresholds_name_the_key_path_and_the_fix(stages, match):
    with pytest.raises(ConfigError, match=match):
        config.loads(f"stages:\n  {stages}\n")
