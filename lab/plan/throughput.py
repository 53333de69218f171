"""throughput: the throughput planner as pure functions: tokens to train on -> raw bytes, cores, bandwidth.

It answers the dashboard's Planner tab from a run's measured funnel and costs (``from_manifest``), not
from guesses; ``from_funnel`` plans from another funnel over the same run and ``compare`` says where the
two plans differ. Bytes out of stage ``i`` are ``B_i = B_0 * prod_{j<=i} r_j`` (``funnel_bytes``), so ``N``
tokens at ``b_t`` bytes per token need ``B_0 = N * b_t / prod r`` (``raw_bytes_needed``). Then: what a
training job consumes (``throughput``), the cores a deadline needs (``cores_needed``,
``cores_for_deadline``) and when materializing pays (``materialize_pays``, ``break_even_epochs``). Units:
bytes, seconds, tokens, decimal prefixes; retentions are fractions in (0, 1].

>>> funnel_bytes(100.0, [0.5, 0.4])
[50.0, 20.0]
>>> raw_bytes_needed(10.0, [0.5, 0.4], 2.0)
100.0
>>> break_even_epochs(3.0, 1.0)
1.5
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from lab.errors import ConfigError, NotReadyError
from lab.io.run import RunLayout
from lab.io.writers import read_json

SECONDS_PER_DAY = 86_400
Retentions = Sequence[float] | Mapping[str, float]  # fraction kept per stage, in funnel order


@dataclass(frozen=True)
class Throughput:
    """What training on ``N`` tokens in ``T`` days on ``G`` GPUs consumes."""

    tokens_per_s: float  # tau = N / (T * 86400)
    per_gpu: float  # tokens/s per GPU: tau / G
    read_bytes_per_s: float  # token-shard read bandwidth: tau * bytes_per_token_on_disk


# --- validation: every message names the argument, its value and what is allowed


def _number(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise ConfigError(f"{name} must be a finite number; got {value!r}")
    return float(value)


def _positive(name: str, value: object) -> float:
    x = _number(name, value)
    if x <= 0:
        raise ConfigError(f"{name} must be > 0; got {value!r}")
    return x


def _non_negative(name: str, value: object) -> float:
    x = _number(name, value)
    if x < 0:
        raise ConfigError(f"{name} must be >= 0; got {value!r}")
    return x


def _count(name: str, value: object) -> int:
    x = _positive(name, value)
    if not x.is_integer():
        raise ConfigError(f"{name} must be a whole number >= 1; got {value!r}")
    return int(x)


def _retentions(retentions: Retentions, name: str = "retentions") -> list[tuple[str, float]]:
    """``(stage, r)`` pairs, each ``r`` in (0, 1]; a sequence's stages are named by position."""
    if isinstance(retentions, Mapping):
        items = [(str(k), v, f"{name}[{k!r}]") for k, v in retentions.items()]
    elif isinstance(retentions, Sequence) and not isinstance(retentions, str):
        items = [(f"stage_{i + 1}", v, f"{name}[{i}]") for i, v in enumerate(retentions)]
    else:
        raise ConfigError(f"{name} must be a list of fractions or a mapping stage -> fraction; "
                          f"got {type(retentions).__name__}")
    out = []
    for stage, v, where in items:
        r = _number(where, v)
        if not 0 < r <= 1:
            raise ConfigError(f"{where} must be a fraction in (0, 1] (the share of bytes the stage keeps); got {v!r}")
        out.append((stage, r))
    return out


def _costs(costs: Mapping[str, float], name: str = "stage_cpu_seconds_per_byte") -> dict[str, float]:
    if not isinstance(costs, Mapping):
        raise ConfigError(f"{name} must be a mapping stage -> CPU seconds per raw byte; got {type(costs).__name__}")
    return {str(k): _non_negative(f"{name}[{k!r}]", v) for k, v in costs.items()}


# --- funnel


def funnel_bytes(raw_bytes: float, retentions: Retentions) -> list[float]:
    """Bytes out of each stage, ``B_i = B_0 * prod_{j<=i} r_j`` for i = 1..S; the last is the kept bytes.

    >>> funnel_bytes(1000.0, [0.5, 0.5, 1.0])
    [500.0, 250.0, 250.0]
    """
    b = _positive("raw_bytes", raw_bytes)
    out = []
    for _, r in _retentions(retentions):
        b *= r
        out.append(b)
    return out


def retention_product(retentions: Retentions) -> float:
    """The fraction of raw bytes the whole funnel keeps, ``prod r``.

    >>> retention_product([0.5, 0.4])
    0.2
    """
    return math.prod(r for _, r in _retentions(retentions))


def raw_bytes_needed(token_target: float, retentions: Retentions, bytes_per_token: float) -> float:
    """Raw bytes ``B_0`` whose survivors tokenize to ``token_target`` tokens: ``N * b_t / prod r``.

    >>> raw_bytes_needed(1e6, [0.5], 4.0)
    8000000.0
    """
    n = _positive("token_target", token_target)
    bt = _positive("bytes_per_token", bytes_per_token)
    return n * bt / retention_product(retentions)


# --- throughput and cores


def throughput(tokens: float, days: float, gpus: int, *, bytes_per_token_on_disk: float = 4) -> Throughput:
    """Tokens/s overall and per GPU, and the shard read bandwidth, to train on ``tokens`` in ``days``.

    >>> throughput(86400 * 8, 1, 2, bytes_per_token_on_disk=2)
    Throughput(tokens_per_s=8.0, per_gpu=4.0, read_bytes_per_s=16.0)
    """
    n = _positive("tokens", tokens)
    t = _positive("days", days) * SECONDS_PER_DAY
    g = _count("gpus", gpus)
    tau = n / t
    return Throughput(tokens_per_s=tau, per_gpu=tau / g,
                      read_bytes_per_s=tau * _positive("bytes_per_token_on_disk", bytes_per_token_on_disk))


def cores_needed(raw_bytes: float, bytes_per_s_per_core: float, seconds: float) -> float:
    """Cores that process ``raw_bytes`` in ``seconds`` at ``bytes_per_s_per_core`` each (fractional).

    >>> cores_needed(1e9, 1e6, 100)
    10.0
    """
    return (_positive("raw_bytes", raw_bytes)
            / (_positive("bytes_per_s_per_core", bytes_per_s_per_core) * _positive("seconds", seconds)))


def cores_for_deadline(raw_bytes: float, stage_cpu_seconds_per_byte: Mapping[str, float],
                       deadline_seconds: float) -> dict:
    """Cores to push ``raw_bytes`` through every stage by the deadline, in total and per stage.

    ``stage_cpu_seconds_per_byte`` is each stage's CPU seconds per *raw* byte (``from_manifest``).
    Returns ``cores`` (fractional; round up to provision), ``cpu_seconds``, ``bytes_per_s_per_core``
    (the whole pipeline's, ``inf`` when nothing costs anything) and ``stages``: stage ->
    ``cpu_seconds_per_byte``, ``cpu_seconds``, ``cores``, ``share`` (of the total CPU time).

    >>> cores_for_deadline(1000.0, {"a": 0.3, "b": 0.1}, 100.0)["cores"]
    4.0
    """
    b = _positive("raw_bytes", raw_bytes)
    costs = _costs(stage_cpu_seconds_per_byte)
    t = _positive("deadline_seconds", deadline_seconds)
    per_byte = sum(costs.values())
    cpu = b * per_byte
    return {
        "cores": cpu / t,
        "cpu_seconds": cpu,
        "bytes_per_s_per_core": 1 / per_byte if per_byte else math.inf,
        "stages": {s: {"cpu_seconds_per_byte": c, "cpu_seconds": b * c, "cores": b * c / t,
                       "share": c / per_byte if per_byte else 0.0} for s, c in costs.items()},
    }


# --- materialize vs recompute


def materialize_pays(transform_cost: float, epochs: float, io_cost: float) -> bool:
    """Whether storing a transform's output beats recomputing it every epoch: ``C_t * (1 - 1/E) > C_io``.

    >>> materialize_pays(3.0, 2, 1.0), materialize_pays(3.0, 1.2, 1.0)
    (True, False)
    """
    ct = _non_negative("transform_cost", transform_cost)
    e = _positive("epochs", epochs)
    cio = _non_negative("io_cost", io_cost)
    return ct * (1 - 1 / e) > cio


def break_even_epochs(transform_cost: float, io_cost: float) -> float:
    """Epochs past which materializing pays, ``E* = C_t / (C_t - C_io)``; ``inf`` when ``C_t <= C_io``.

    >>> break_even_epochs(1.0, 1.0)
    inf
    """
    ct = _non_negative("transform_cost", transform_cost)
    cio = _non_negative("io_cost", io_cost)
    return ct / (ct - cio) if ct > cio else math.inf


# --- inputs measured on a run


def _ratio(out: float, into: float) -> float:
    return out / into if into else 1.0  # a stage that saw nothing dropped nothing (as query.funnel)


def from_manifest(run_dir: str | Path) -> dict:
    """The planner's inputs measured on a run, from its ``manifest.json``.

    - ``stages``: the funnel's stages, in order.
    - ``retention``: ``docs`` and ``bytes`` (and ``tokens`` when the run is tokenized): stage ->
      ``out / in``; ``retention["bytes"]`` is what ``plan`` takes as ``retentions``.
    - ``raw_bytes`` (the records' bytes as read, rejected records included), ``text_bytes`` (the
      documents' text bytes into the first stage), ``raw_per_text_byte``, ``kept_bytes`` (text),
      ``kept_tokens`` (None before tokenization; the documents' tokens, without the EOD tokens
      packing appends), ``bytes_per_token`` (``kept_bytes / kept_tokens``, or None).
    - ``stage_cpu_seconds_per_byte``: stage (and step after annotate: ``lab.plan.costs.STEPS``) -> its CPU
      seconds over ``raw_bytes``.
    """
    layout = RunLayout(Path(run_dir))
    path = layout.manifest
    if not path.is_file():
        if not layout.config.is_file():
            raise ConfigError(f"run_dir {str(run_dir)!r} is not a run directory (no config.yaml, no manifest.json); "
                              "give a run made by `corpus-lab run` (it writes runs/<name>/manifest.json)")
        raise NotReadyError(f"run_dir {str(run_dir)!r} has no manifest.json: its run has not finished; rerun "
                            f"`corpus-lab run --config {layout.config}` first (it resumes)")
    m = read_json(path)
    funnel = m.get("funnel") or []
    if not funnel:
        raise NotReadyError(f"run_dir {str(run_dir)!r}: the manifest's funnel is empty (the run read no documents); "
                            "nothing to measure retention on: run inputs that hold documents first")
    raw = funnel[0].get("raw_bytes_in", funnel[0]["bytes_in"])  # a run from before text bytes: the same
    cpu = {**m.get("stage_cpu_seconds", {}), **{step: r["cpu_s"] for step, r in m.get("step_seconds", {}).items()}}
    text = funnel[0]["bytes_in"]
    return _measured(funnel, run=str(run_dir), costs={s: sec / raw for s, sec in cpu.items()} if raw else {},
                     raw_per_text=raw / text if text and raw else 1.0)


def from_funnel(funnel: Any, measured: Mapping) -> dict:
    """The planner's inputs with the retention and bytes per token of a session's funnel.

    ``funnel`` is the ungrouped table ``lab.query.funnel(run, config)`` returns for the thresholds the
    session has chosen (or its rows as dicts); ``measured`` is ``from_manifest`` of the same run. The
    result has ``from_manifest``'s keys: ``retention`` (per stage, ``out / in`` of each unit),
    ``raw_bytes``, ``kept_bytes``, ``kept_tokens`` and ``bytes_per_token`` (of the documents the funnel
    keeps) come from the funnel; ``stage_cpu_seconds_per_byte`` stays the run's measured cost (an
    explore run computes every signal of every document, whatever the thresholds).

    >>> rows = [{"stage": "a", "docs_in": 4, "docs_out": 4, "bytes_in": 100, "bytes_out": 100},
    ...         {"stage": "b", "docs_in": 4, "docs_out": 2, "bytes_in": 100, "bytes_out": 40}]
    >>> from_funnel(rows, {"run": "r", "stage_cpu_seconds_per_byte": {}})["retention"]["bytes"]
    {'a': 1.0, 'b': 0.4}
    """
    rows = funnel.to_dicts() if hasattr(funnel, "to_dicts") else [dict(r) for r in funnel]
    if not rows:
        raise ConfigError("funnel is empty (no stages): pass the table lab.query.funnel(run, config) returns")
    grouped = sorted({"lang", "source", "group"} & set(rows[0]))
    if grouped:
        raise ConfigError(f"funnel is split by {grouped[0]!r}: pass the ungrouped funnel, "
                          "lab.query.funnel(run, config) without by=")
    missing = [c for c in ("stage", "docs_in", "docs_out", "bytes_in", "bytes_out") if c not in rows[0]]
    if missing:
        raise ConfigError(f"funnel has no column {missing[0]!r}; pass the table lab.query.funnel(run, config) returns "
                          "(stage, docs_in/out, bytes_in/out, tokens_in/out)")
    if not isinstance(measured, Mapping) or "stage_cpu_seconds_per_byte" not in measured:
        raise ConfigError("measured must be plan.from_manifest(run_dir) of the funnel's run "
                          "(a mapping with stage_cpu_seconds_per_byte)")
    ratio = float(measured.get("raw_per_text_byte", 1.0))
    if measured.get("text_bytes") == rows[0]["bytes_in"]:  # the same documents: the run's own raw bytes
        rows[0] = {**rows[0], "raw_bytes_in": measured["raw_bytes"]}
    return _measured(rows, run=measured.get("run"), costs=dict(measured["stage_cpu_seconds_per_byte"]),
                     raw_per_text=ratio)


def _measured(funnel: Sequence[Mapping], *, run: str | None, costs: dict[str, float], raw_per_text: float = 1.0) -> dict:
    """``from_manifest``'s structure from funnel rows (``stage``, ``<unit>_in``, ``<unit>_out``)."""
    units = ["docs", "bytes"] + (["tokens"] if all(f.get("tokens_out") is not None for f in funnel) else [])
    retention = {u: {f["stage"]: _ratio(f[f"{u}_out"], f[f"{u}_in"]) for f in funnel} for u in units}
    kept = funnel[-1]["bytes_out"]
    tokens = funnel[-1].get("tokens_out")  # known in a batch run too (it tokenizes what it keeps)
    return {
        "run": run,
        "stages": [f["stage"] for f in funnel],
        "retention": retention,
        "raw_bytes": funnel[0].get("raw_bytes_in") or funnel[0]["bytes_in"] * raw_per_text,
        "text_bytes": funnel[0]["bytes_in"],
        "raw_per_text_byte": raw_per_text,
        "kept_bytes": kept,
        "kept_tokens": tokens,
        "bytes_per_token": kept / tokens if tokens else None,
        "stage_cpu_seconds_per_byte": costs,
    }


# --- the Planner tab


def plan(token_target: float, days: float, gpus: int, *, retentions: Retentions, bytes_per_token: float,
         stage_cpu_seconds_per_byte: Mapping[str, float], deadline_days: float,
         bytes_per_token_on_disk: float = 4, raw_per_text_byte: float = 1.0, mixture_factor: float = 1.0) -> dict:
    """Everything the Planner tab shows for a token target, a training schedule and a curation deadline.

    ``raw_bytes`` needed (the text bytes the funnel needs, ``text_bytes``, times ``raw_per_text_byte``),
    ``kept_bytes`` (= ``token_target / mixture_factor * bytes_per_token``), the ``retention_product``,
    ``funnel`` (one row per stage: ``stage``, ``retention``, ``bytes_in``, ``bytes_out``, in text bytes),
    ``throughput`` (``Throughput`` as a dict) and ``cores`` (``cores_for_deadline`` on the raw bytes,
    deadline in days). ``mixture_factor``: the mixture's tokens per kept token (``lab.tokens.mixture``: above 1
    when it repeats documents, below when it leaves some out); the target is the mixture's tokens.

    >>> plan(1e9, 1, 1, retentions={"c4": 0.5}, bytes_per_token=4, stage_cpu_seconds_per_byte={}, deadline_days=1,
    ...      mixture_factor=2.0)["raw_bytes"]  # half the kept tokens, each read twice
    4000000000.0
    """
    factor = _positive("mixture_factor", mixture_factor)
    text = raw_bytes_needed(token_target / factor, retentions, bytes_per_token)
    raw = text * _positive("raw_per_text_byte", raw_per_text_byte)
    stages = _retentions(retentions)
    outs = funnel_bytes(text, retentions)
    ins = [text, *outs[:-1]]
    return {
        "token_target": float(token_target),
        "bytes_per_token": float(bytes_per_token),
        "kept_bytes": token_target / factor * bytes_per_token,
        "mixture_factor": factor,
        "raw_bytes": raw,
        "text_bytes": text,
        "retention_product": retention_product(retentions),
        "funnel": [{"stage": s, "retention": r, "bytes_in": i, "bytes_out": o}
                   for (s, r), i, o in zip(stages, ins, outs)],
        "throughput": asdict(throughput(token_target, days, gpus, bytes_per_token_on_disk=bytes_per_token_on_disk)),
        "cores": cores_for_deadline(raw, stage_cpu_seconds_per_byte,
                                    _positive("deadline_days", deadline_days) * SECONDS_PER_DAY),
    }


# --- prices, a margin, and a published funnel beside the run's


@dataclass(frozen=True)
class Prices:
    """What an hour of a core or a GPU and a month of storage cost (the Planner's fields; set yours).
    The defaults are round example figures of public cloud list prices, not a quote."""

    cpu_hour: float = 0.05  # dollars per core-hour (curation)
    gpu_hour: float = 2.50  # dollars per GPU-hour (training)
    storage_tb_month: float = 23.0  # dollars per TB-month (object storage of the raw input and the shards)


MARGIN = 2.0  # raw input provisioned per raw byte the funnel needs: large pipelines provision 2-3x
# a published DeepSeek-V3-class funnel: 8 stages whose retentions multiply to ~0.0095
PRESETS: dict[str, tuple[float, ...]] = {"deepseek-v3-class": (0.50, 0.40, 0.50, 0.50, 0.50, 0.40, 0.95, 1.00)}


def preset_retentions(name: str) -> dict[str, float]:
    """A published funnel as ``plan``'s ``retentions`` (stages named by position).

    >>> r = preset_retentions("deepseek-v3-class"); round(retention_product(r), 4), list(r)[:2]
    (0.0095, ['stage 1', 'stage 2'])
    """
    if name not in PRESETS:
        raise ConfigError(f"preset={name!r} is not allowed: must be one of {', '.join(PRESETS)}")
    return {f"stage {i + 1}": r for i, r in enumerate(PRESETS[name])}


def priced(p: Mapping, prices: Prices = Prices(), *, margin: float = MARGIN, gpus: int = 0, days: float = 0.0,
           storage_months: float = 1.0, bytes_per_token_on_disk: float = 4) -> dict:
    """The dollars of a plan (``plan``'s result): curation (its CPU seconds on the provisioned input, at
    ``cpu_hour``), training (``gpus`` x ``days`` at ``gpu_hour``) and storage (the provisioned raw input and
    the token shards for ``storage_months`` at ``storage_tb_month``). ``margin`` multiplies the raw input
    the funnel needs (what to provision) and the curation CPU with it.

    >>> p = plan(1e12, 10, 8, retentions={"a": 0.5}, bytes_per_token=4, stage_cpu_seconds_per_byte={"a": 1e-6},
    ...          deadline_days=1)
    >>> c = priced(p, Prices(cpu_hour=0.05, gpu_hour=2.5, storage_tb_month=23.0), margin=2.0, gpus=8, days=10)
    >>> c["raw_bytes_provisioned"], c["cpu_hours"], c["dollars"]["curation"], c["dollars"]["training"]
    (16000000000000.0, 4444.444444444444, 222.22222222222223, 4800.0)
    >>> round(c["dollars"]["storage"], 2), round(c["dollars"]["total"], 2)  # (16 TB raw + 4 TB shards) x 1 month
    (460.0, 5482.22)
    """
    m = _positive("margin", margin)
    raw = float(p["raw_bytes"]) * m
    cpu_hours = float(p["cores"]["cpu_seconds"]) * m / 3600
    shards = float(p["token_target"]) * _positive("bytes_per_token_on_disk", bytes_per_token_on_disk)
    months = _non_negative("storage_months", storage_months)
    dollars = {"curation": cpu_hours * _non_negative("cpu_hour", prices.cpu_hour),
               "training": _non_negative("gpus", gpus) * _non_negative("days", days) * 24
               * _non_negative("gpu_hour", prices.gpu_hour),
               "storage": (raw + shards) / 1e12 * months * _non_negative("storage_tb_month", prices.storage_tb_month)}
    dollars["total"] = sum(dollars.values())
    return {"margin": m, "raw_bytes_provisioned": raw, "cpu_hours": cpu_hours, "shard_bytes": shards,
            "dollars": dollars, "prices": asdict(prices)}


def days_to_curate(raw_bytes: float, cores: float, stage_cpu_seconds_per_byte: Mapping[str, float]) -> float:
    """Days ``cores`` take to push ``raw_bytes`` through every stage at the measured costs.

    >>> days_to_curate(86_400e6, 10, {"a": 1e-6})  # 86,400 CPU-seconds on 10 cores
    0.1
    """
    per_byte = sum(_costs(stage_cpu_seconds_per_byte).values())
    return _positive("raw_bytes", raw_bytes) * per_byte / _positive("cores", cores) / SECONDS_PER_DAY


# --- the session's plan against the run's


@dataclass(frozen=True)
class Difference:
    """One figure that differs between two plans (``compare``): the run's config's and the session's."""

    key: str  # retention_product | bytes_per_token | raw_bytes | cores | retention.<stage>
    base: float  # in the plan of the run's own config
    current: float  # in the plan of the session's thresholds

    def __str__(self) -> str:
        """The figure as the Planner tab says it.

        >>> str(Difference("retention_product", 0.2727, 0.3333))
        'kept bytes 27.27% -> 33.33% of raw'
        >>> str(Difference("raw_bytes", 6.23e15, 5.1e15))
        'raw bytes needed 6.23 PB -> 5.1 PB (x0.819)'
        """
        if self.key == "retention_product":
            return f"kept bytes {self.base:.2%} -> {self.current:.2%} of raw"
        if self.key.startswith("retention."):
            return f"{self.key.removeprefix('retention.')} keeps {self.base:.2%} -> {self.current:.2%} of its bytes"
        if self.key == "bytes_per_token":
            return f"bytes per token {self.base:.3g} -> {self.current:.3g}"
        if self.key == "mixture_factor":
            return f"mixture tokens per kept token {self.base:.3g} -> {self.current:.3g}"
        ratio = f" (x{self.current / self.base:.3g})" if self.base else ""
        if self.key == "raw_bytes":
            return f"raw bytes needed {_bytes(self.base)} -> {_bytes(self.current)}{ratio}"
        return f"{self.key} {self.base:.3g} -> {self.current:.3g}{ratio}"


def _bytes(n: float) -> str:
    """Bytes with a decimal prefix, 3 significant digits.

    >>> _bytes(6.2316e15), _bytes(512)
    ('6.23 PB', '512 B')
    """
    for unit, size in (("EB", 1e18), ("PB", 1e15), ("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n:.3g} B"


def compare(current: Mapping, base: Mapping, *, rel: float = 1e-9) -> list[Difference]:
    """What differs in ``current``, the plan of the session's funnel (``from_funnel``), from ``base``, the
    plan of the run's own config (two ``plan`` results for the same target). Headline figures first
    (retention product, bytes per token, raw bytes needed, cores), then each stage whose retention
    moved, in funnel order; empty when they agree within ``rel``.

    >>> a = plan(1e9, 1, 1, retentions={"c4": 0.5, "pii": 1.0}, bytes_per_token=4, stage_cpu_seconds_per_byte={},
    ...          deadline_days=1)
    >>> b = plan(1e9, 1, 1, retentions={"c4": 1.0, "pii": 1.0}, bytes_per_token=4, stage_cpu_seconds_per_byte={},
    ...          deadline_days=1)
    >>> for d in compare(b, a):  # c4 unticked in the session
    ...     print(d)
    kept bytes 50.00% -> 100.00% of raw
    raw bytes needed 8 GB -> 4 GB (x0.5)
    c4 keeps 50.00% -> 100.00% of its bytes
    """
    for name, p in (("current", current), ("base", base)):
        if not isinstance(p, Mapping) or not {"retention_product", "bytes_per_token", "raw_bytes", "funnel"} <= set(p):
            raise ConfigError(f"{name} must be a result of plan.plan(...) (retention_product, bytes_per_token, "
                              f"raw_bytes, funnel); got {type(p).__name__}")
    stages_a = [r["stage"] for r in base["funnel"]]
    stages_b = [r["stage"] for r in current["funnel"]]
    if stages_a != stages_b:
        raise ConfigError(f"the plans have different stages ({', '.join(stages_a)} vs {', '.join(stages_b)}); "
                          "compare plans of the same run")
    out = []
    for key in ("retention_product", "bytes_per_token", "mixture_factor", "raw_bytes"):
        if key in base and key in current and not math.isclose(base[key], current[key], rel_tol=rel):
            out.append(Difference(key, float(base[key]), float(current[key])))
    a, b = base.get("cores", {}).get("cores"), current.get("cores", {}).get("cores")
    if a is not None and b is not None and not math.isclose(a, b, rel_tol=rel):
        out.append(Difference("cores", float(a), float(b)))
    for ra, rb in zip(base["funnel"], current["funnel"]):
        if not math.isclose(ra["retention"], rb["retention"], rel_tol=rel):
            out.append(Difference(f"retention.{ra['stage']}", float(ra["retention"]), float(rb["retention"])))
    return out
