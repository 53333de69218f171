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

``signals`` sees the text only, not the signals of earlier stages. What several stages need is
computed once per document and shared: ``lab.text.words.words`` (English words), ``langid.detect``
(the document's language; gopher_quality's stop words and word segmentation depend on it) and
``lab.text.segment.words`` (words in the document's language) each keep their answers
for the last texts (more than the chunk of documents ``lab.annotate`` hands each stage at a time).

Optional: ``signals_many(texts) -> [dict, ...]``, the signals of several texts at once (the language
stage: the words its model has not seen yet are looked up once for the chunk); ``lab.annotate`` uses it
when a stage has it.

Optional: ``Collector(cfg, n_buckets, run_dir)``, made once per partition, for a stage whose signals need more
than the text or that writes files of its own: ``signals(i, text, doc)`` replaces ``signals`` for the
partition's i-th document (``doc``: the ``lab.doc.Doc``, its URL and source), then ``write(layout, key,
signals_table)`` once (near_dedup's MinHash signatures and shuffle records; the url stage reads the
document's URL and the lists its config names). A collector whose ``chunk_size`` is above 1 also has
``signals_batch([(i, text, doc), ...])``, given that many documents at once (quality_model's HuggingFace
model: batched forward passes). ``prepare(cfg, run_dir)``, when a stage has it, runs
once in the driver before any partition is annotated (decontamination builds its n-gram index;
quality_model checks that a HuggingFace model's libraries are installed). Transform stages (``pii``) also have
``scrub(text, ...) -> str``, given what their collector gives ``signals`` (pii: its config's ``ip_ranges``).

Everything else derives from this registry: the config (``stages.<name>``, ``lab.config``), the knobs
(fields declared with ``lab.fields.knob``), the signals schema, the signals hash, the config
reference, the funnel and the dashboard's cards.
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
