"""Knobs: every threshold as a control, found from the configs, applied back into a valid config."""

from __future__ import annotations

import pytest

from lab import knobs
from lab.config import Config, build, dumps, loads, to_dict
from lab.errors import ConfigError


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
