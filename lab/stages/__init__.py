"""The stages, in funnel order.

Every stage module has the same small surface:

- ``NAME``: the stage name used in configs, drop reasons and the funnel;
- ``Config``: a frozen dataclass of its thresholds, each with a default and its unit;
  ``enabled`` switches its rules off (signals are still computed: thresholds move later);
- ``SIGNALS``: ``{column: pyarrow type}`` of the signal columns it adds to ``signals/``;
- ``signals(text) -> dict``: pure, one document, no thresholds involved;
- ``VERSION``: bumped when ``signals`` gives other values (code, word lists); with the optional
  ``signal_params(cfg) -> dict`` (config fields or model files the signals depend on) it is part of
  the run's signals hash, so a rerun recomputes the signals a change made stale;
- ``rules(cfg) -> list[Rule]``: what a kept document satisfies, as data.

Transform stages (``pii``) also have ``scrub(text) -> str``.
"""

from __future__ import annotations

from types import ModuleType

from lab.stages import (
    c4,
    exact_dedup,
    extract,
    fineweb,
    gopher_quality,
    gopher_repetition,
    language,
    near_dedup,
    pii,
)

# funnel order: a document is counted at the first of these that rejects it
STAGES: tuple[ModuleType, ...] = (
    extract,
    language,
    gopher_quality,
    gopher_repetition,
    c4,
    fineweb,
    exact_dedup,
    near_dedup,
    pii,
)
STAGE_NAMES: tuple[str, ...] = tuple(m.NAME for m in STAGES)
BY_NAME: dict[str, ModuleType] = {m.NAME: m for m in STAGES}
