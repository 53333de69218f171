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

``signals`` sees the text only, not the signals of earlier stages. What several stages need is computed
once per document and shared: ``lab.text.words.words`` (English words), ``lab.text.langid.detect`` (the
document's language) and ``lab.text.segment.words`` (words in that language) each keep their answers for
the last texts (more than the chunk of documents ``lab.annotate`` hands each stage at a time).

Optional: ``signals_many(texts) -> [dict, ...]``, several texts at once (the language stage).
``Collector(cfg, n_buckets, run_dir)``, made once per partition, for a stage whose signals need more than
the text or that writes files of its own: ``signals(i, text, doc)`` replaces ``signals`` for the
partition's i-th document (``doc``: the ``lab.doc.Doc``), then ``write(layout, key, signals_table)`` runs
once (near_dedup's signatures and shuffle records; the url stage's lists). A collector whose
``chunk_size`` is above 1 also has ``signals_batch([(i, text, doc), ...])`` (quality_model's HuggingFace
model). ``prepare(cfg, run_dir)`` runs once in the driver before any partition is annotated
(decontamination's n-gram index). Transform stages (``pii``) also have ``scrub(text, ...) -> str``, given
what their collector gives ``signals``.

Everything else derives from this registry: the config (``stages.<name>``, ``lab.config``), the knobs
(fields declared with ``lab.fields.knob``), the signals schema, the signals hash, the config reference,
the funnel and the dashboard's cards.
"""

from __future__ import annotations

import importlib
from types import ModuleType

# The registry, in funnel order (a document is counted at the first of these that rejects it):
# adding a stage is its module here in lab/stages/ and its name on one line of this tuple.
REGISTRY: tuple[str, ...] = (
    "url",
    "extract",
    "language",
    "gopher_quality",
    "gopher_repetition",
    "c4",
    "fineweb",
    "boilerplate",
    "decontamination",
    "quality_model",
    "exact_dedup",
    "near_dedup",
    "pii",
)
STAGES: tuple[ModuleType, ...] = tuple(importlib.import_module(f"lab.stages.{name}") for name in REGISTRY)
STAGE_NAMES: tuple[str, ...] = tuple(m.NAME for m in STAGES)
BY_NAME: dict[str, ModuleType] = {m.NAME: m for m in STAGES}
