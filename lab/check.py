"""check: which outputs of a run no longer match what they were made from.

Every step of a run records what it read (``lab.steps``): input files' SHA-256, the signals hash,
earlier steps' done records, the tokenizer, the config. ``check`` computes each record again from the
inputs and the run directory as they are now, and names every output whose record differs. Inputs are
compared by content, never by modification time: an edit that keeps a file's size and restores its
time is found.

A stale step makes every later step stale (they read it); the findings name the first step that
moved, and a rerun of the run's config brings everything up to date.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lab import steps
from lab.config import Config, load
from lab.errors import ConfigError
from lab.io.listing import list_inputs
from lab.io.partitions import Partition, fingerprint, plan
from lab.io.run import RunLayout
from lab.io.writers import read_marker


@dataclass(frozen=True)
class Finding:
    step: str  # annotate, near_dedup, boilerplate, tokenizer, tokenize, materialize, fertility
    output: str  # the stale output, relative to the run directory
    why: str  # what it read that moved

    def line(self) -> str:
        return f"{self.step}: {self.output}: {self.why}"


UNLISTABLE = "the inputs cannot be listed as they were"


def check(run_dir: str | Path, *, config: Config | None = None) -> list[Finding]:
    """Every output of the run at ``run_dir`` whose recorded inputs no longer match (empty: all current). Inputs
    that cannot be listed (moved, or not mounted here) are one finding, and the later steps are checked
    against the run directory alone."""
    layout = RunLayout(Path(run_dir))
    if not layout.config.is_file():
        raise ConfigError(f"{str(run_dir)!r} is not a run directory (no config.yaml); give one such as runs/sample")
    cfg = config or load(layout.config)
    try:
        parts = plan(cfg.inputs, cfg.ingest, list_inputs(cfg.inputs))
    except ConfigError as e:
        keys = steps.annotated_keys(layout)
        return [Finding("annotate", "docs/, signals/", f"{UNLISTABLE}: {e}"), *_later(cfg, layout, keys)]
    out = _annotate(cfg, layout, parts)
    out += _later(cfg, layout, parts)
    return out


def _annotate(cfg: Config, layout: RunLayout, parts: list[Partition]) -> list[Finding]:
    """Partitions whose input files changed (by content), that are missing, or that the plan no longer has."""
    import pyarrow.parquet as pq

    recorded: dict[str, str] = {}  # path -> sha256 as the last run read it
    if layout.inputs.exists():
        t = pq.read_table(layout.inputs, columns=["path", "sha256"])
        recorded = dict(zip(t["path"].to_pylist(), t["sha256"].to_pylist()))
    out: list[Finding] = []
    shash = cfg.signals_hash()
    hashes: dict = {}
    planned = {p.key for p in parts}
    for p in parts:
        done = read_marker(layout.done(p.key))
        where = f"partition {p.key} ({p.source})"
        if not done:
            out.append(Finding("annotate", f"stats/part-{p.key}.json", f"{where} was never annotated (a new input file, "
                                                                        "or the run stopped before it)"))
            continue
        changed: list[str] = []

        def compare(source: str, path: str, size: int, sha: str) -> None:
            if recorded.get(path) not in (None, sha):
                changed.append(f"{source} (SHA-256 {recorded[path][:12]}… when read, {sha[:12]}… now)")

        fp = fingerprint(p, hashes, compare)
        if done.get("fingerprint") != fp:
            why = f"{where}: its input changed since it was annotated: " + (
                ", ".join(changed[:5]) + (f" and {len(changed) - 5} more" if len(changed) > 5 else "")
                if changed else "its files, their sizes or their order differ")
            out.append(Finding("annotate", f"docs/part-{p.key}.parquet", why))
        elif done.get("signals_hash") != shash:
            out.append(Finding("annotate", f"signals/part-{p.key}.parquet",
                               f"{where} was annotated under signals hash {done.get('signals_hash')}, the config's is "
                               f"{shash} (a stage's version, signal parameters or the readers changed)"))
    for key in steps.annotated_keys(layout):
        if key not in planned:
            out.append(Finding("annotate", f"stats/part-{key}.json",
                               f"partition {key} is no longer in the plan (an input file was removed or the inputs "
                               "were cut differently)"))
    return out


def _later(cfg: Config, layout: RunLayout, parts: list[Partition] | list[str]) -> list[Finding]:
    """The steps after annotate whose recorded inputs differ from the run directory's current files (``parts``:
    the plan's partitions, or the run's partition keys when the inputs cannot be listed)."""
    out: list[Finding] = []
    if parts and isinstance(parts[0], str):
        parts = [Partition(int(k), 0, "", "", "") for k in parts]
    buckets = steps.n_buckets(cfg, parts)
    if layout.dedup_done.exists() and not steps.dedup_complete(layout, steps.dedup_state(cfg, layout, parts, buckets)):
        out.append(Finding("near_dedup", "dedup/", "made from other annotated partitions or shuffle settings"))
    if layout.boilerplate_done.exists() and not steps.boilerplate_complete(
            layout, steps.boilerplate_state(cfg, layout, parts, buckets)):
        out.append(Finding("boilerplate", "boilerplate/", "made from other annotated partitions or min_docs"))
    if not cfg.tokenizer.enabled or not layout.tokenizer_fit.exists():
        return out
    fit = read_marker(layout.tokenizer_fit)
    if not steps.tokenizer_current(cfg, layout, parts):
        out.append(Finding("tokenizer", "tokenizer/", "fitted on other annotated partitions or another tokenizer config"))
    if layout.tokenizer_json.exists():
        from lab.tokens import tokenize

        try:
            tokenize.load(layout, fit.get("sha256", ""))
        except Exception as e:  # noqa: BLE001 - any way the frozen file fails to match is a finding
            out.append(Finding("tokenizer", "tokenizer/tokenizer.json", str(e)))
    todo = steps.tokenize_todo(layout, parts, fit.get("sha256", ""), steps.strip_state(cfg, layout, parts))
    for key in todo:
        out.append(Finding("tokenize", f"tokenized/part-{key}.parquet",
                           "counted from other text, another tokenizer or another boilerplate-line removal"))
    reads = steps.materialize_reads(cfg, layout, parts)
    if layout.tokens.exists() and read_marker(layout.tokens_done).get("reads") != reads:
        out.append(Finding("materialize", "tokens/", _moved(read_marker(layout.tokens_done).get("reads"), reads)))
    if layout.packing_stats.exists() and read_marker(layout.packing_stats).get("reads") != reads:
        out.append(Finding("materialize", "stats/packing.json",
                           _moved(read_marker(layout.packing_stats).get("reads"), reads)))
    from lab.plan import fertility

    recorded = fertility.recorded_reads(layout.root)
    if recorded is not None and recorded != fertility.reads(layout.root, cfg, recorded.get("params", {})):
        out.append(Finding("fertility", "stats/fertility.parquet",
                           _moved(recorded, fertility.reads(layout.root, cfg, recorded.get("params", {})))))
    return out


def _moved(recorded: dict | None, now: dict) -> str:
    """Which of a step's recorded inputs moved.

    >>> _moved({"a": 1, "b": 2}, {"a": 1, "b": 3})
    'made from other b'
    """
    if not recorded:
        return "written before corpus-lab recorded what it read"
    keys = [k for k in now if recorded.get(k) != now[k]]
    names = {"config_hash": "thresholds or packing (config hash)", "tokenizer_sha256": "tokenizer",
             "tokenized": "token counts", "partitions": "annotated partitions", "near_dedup": "near-dedup clusters",
             "boilerplate": "boilerplate signal"}
    return "made from other " + ", ".join(names.get(k, k) for k in keys)
