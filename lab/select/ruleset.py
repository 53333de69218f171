"""ruleset: a config becomes the ordered list of rules every document is judged by.

``ruleset(cfg, stats)`` lists every enabled stage's rules in funnel order, with percentile rules
("drop the lowest 5% by X") resolved to fixed thresholds from the merged global quantile and
placed after their stage's own rules. ``lab.query`` evaluates the list (SQL over a run on disk,
numpy over a run in memory); the tests check both against the rules' own definition, in Python.
"""

from __future__ import annotations

from typing import Iterable, Mapping


from lab.config import Config
from lab.errors import ConfigError
from lab.select.rules import Rule, with_by_lang
from lab.stages import STAGES
from lab.stats import Summary


def _pct(p: float) -> str:
    return f"{p:g}".replace(".", "_")


def percentile_rules(cfg: Config, stats: Mapping[str, Summary] | None) -> list[Rule]:
    out = []
    for i, pr in enumerate(cfg.percentiles):
        if stats is None or pr.signal not in stats:
            known = ", ".join(sorted(stats)) if stats else "none (the run has no merged statistics yet)"
            raise ConfigError(f"percentiles[{i}].signal={pr.signal!r} is not a numeric signal of this run; known: {known}")
        s = stats[pr.signal]
        if pr.drop_lowest > 0:
            out.append(Rule(pr.stage, pr.signal, ">=", s.quantile(pr.drop_lowest / 100), f"{pr.signal}_below_p{_pct(pr.drop_lowest)}"))
        if pr.drop_highest > 0:
            q = 100 - pr.drop_highest
            out.append(Rule(pr.stage, pr.signal, "<=", s.quantile(q / 100), f"{pr.signal}_above_p{_pct(q)}"))
    return out


def ruleset(cfg: Config, stats: Mapping[str, Summary] | None = None) -> list[Rule]:
    """Every enabled rule in funnel order (stage order, then rule order, percentile rules last per stage),
    with the stages' per-language thresholds (``stages.<name>.by_lang``) in each rule's ``by_lang``."""
    extra = percentile_rules(cfg, stats) if cfg.percentiles else []
    out: list[Rule] = []
    for module in STAGES:
        stage_cfg = cfg.stage(module.NAME)
        if stage_cfg.enabled:
            out += with_by_lang(module, stage_cfg, cfg.stages.overrides(module.NAME))
        out += [r for r in extra if r.stage == module.NAME]
    return out


def stage_rules(rules: Iterable[Rule], stage: str) -> list[Rule]:
    return [r for r in rules if r.stage == stage]
