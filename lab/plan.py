"""plan: the throughput planner (DESIGN §7) as pure functions: tokens to train on -> raw bytes, cores, bandwidth.

The questions the dashboard's Planner tab answers, fed by a run's measured funnel and costs
(``from_manifest``), not by guesses:

- **Funnel.** Stage ``i`` keeps a fraction ``r_i`` of the bytes it sees, so the bytes out of stage
  ``i`` are ``B_i = B_0 * prod_{j<=i} r_j`` (``funnel_bytes``). ``S`` stages turn ``B_0`` raw bytes into
  ``B_S`` kept bytes, which the tokenizer turns into ``N = B_S / b_t`` tokens (``b_t`` bytes per
  token). Backwards: ``B_0 = N * b_t / prod r`` (``raw_bytes_needed``). DeepSeek-V3-class
  retentions 0.50, 0.40, 0.50, 0.50, 0.50, 0.40, 0.95, 1.00 have product 0.0095; 14.8e12 tokens at
  4 bytes per token are 59.2 TB of survivors and need 59.2e12 / 0.0095 = 6.23 PB raw.
- **Throughput contract.** Training on ``N`` tokens in ``T`` days on ``G`` GPUs consumes
  ``tau = N / (T * 86400)`` tokens/s, ``tau / G`` per GPU, and reads ``tau * bytes_per_token_on_disk``
  bytes/s of token shards (``throughput``). N = 14.8e12, T = 54, G = 2048: tau = 3.17e6 tokens/s,
  1,549 tokens/s per GPU, 12.7e6 B/s = 12.7 MB/s at 4 B/token (DESIGN §7 prints "12.7 GB/s": the
  same digits, but tau * 4 B is megabytes per second).
- **Cores.** Pushing ``B_0`` bytes through the pipeline in ``t`` seconds at ``v`` bytes/s per core
  takes ``B_0 / (v * t)`` cores (``cores_needed``). 6 PB at 10 MB/s/core in 14 days is
  6e15 / (1e7 * 1,209,600) = 496 cores (DESIGN §7 prints "~4,960", which is the count at
  1 MB/s/core, or 4.96 GB/s of aggregate bandwidth read as cores). From a run, each stage's cost
  is CPU seconds per *raw* byte (its CPU seconds over the run's raw input bytes, so later stages'
  smaller inputs are already folded in), and ``cores_for_deadline`` sums them with a per-stage
  breakdown. It assumes the work parallelizes perfectly and costs grow linearly with bytes
  (DESIGN §9); it counts only the stages whose CPU time the manifest records (the annotate
  stages), not the dedup shuffle's reduce, tokenizer fitting or packing.
- **Materialize vs recompute.** A transform costing ``C_t`` per example, applied every epoch for
  ``E`` epochs, costs ``E * C_t``; materializing it once costs ``C_t`` plus ``C_io`` extra read cost
  per example per epoch. Materializing pays when ``C_t * (1 - 1/E) > C_io`` (DESIGN §7's form,
  per epoch), i.e. past the break-even ``E* = C_t / (C_t - C_io)`` epochs; never when
  ``C_t <= C_io`` (``materialize_pays``, ``break_even_epochs``).

Units: bytes, seconds, tokens; decimal prefixes (KB = 1e3, MB = 1e6, GB = 1e9, TB = 1e12,
PB = 1e15 bytes); a day is 86,400 s. Retentions are fractions in (0, 1]: a stage that keeps
nothing leaves nothing to plan for.

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

from lab.errors import ConfigError
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
    - ``raw_bytes`` (bytes into the first stage, rejected records included), ``kept_bytes``,
      ``kept_tokens`` (None before tokenization; the documents' tokens, without the EOD tokens
      packing appends), ``bytes_per_token`` (``kept_bytes / kept_tokens``, or None).
    - ``stage_cpu_seconds_per_byte``: stage -> the stage's CPU seconds over ``raw_bytes``.
    """
    path = RunLayout(Path(run_dir)).manifest
    if not path.is_file():
        raise ConfigError(f"run_dir {str(run_dir)!r} has no manifest.json; make the run first with "
                          "`corpus-lab run` (it writes runs/<name>/manifest.json)")
    m = read_json(path)
    funnel = m.get("funnel") or []
    if not funnel:
        raise ConfigError(f"run_dir {str(run_dir)!r}: the manifest's funnel is empty (the run read no documents); "
                          "nothing to measure retention on")
    units = ["docs", "bytes"] + (["tokens"] if all("tokens_out" in f for f in funnel) else [])
    retention = {u: {f["stage"]: _ratio(f[f"{u}_out"], f[f"{u}_in"]) for f in funnel} for u in units}
    raw = funnel[0]["bytes_in"]
    kept = funnel[-1]["bytes_out"]
    tokens = funnel[-1]["tokens_out"] if "tokens" in retention else None
    cpu = m.get("stage_cpu_seconds", {})
    return {
        "run": str(run_dir),
        "stages": [f["stage"] for f in funnel],
        "retention": retention,
        "raw_bytes": raw,
        "kept_bytes": kept,
        "kept_tokens": tokens,
        "bytes_per_token": kept / tokens if tokens else None,
        "stage_cpu_seconds_per_byte": {s: sec / raw for s, sec in cpu.items()} if raw else {},
    }


# --- the Planner tab


def plan(token_target: float, days: float, gpus: int, *, retentions: Retentions, bytes_per_token: float,
         stage_cpu_seconds_per_byte: Mapping[str, float], deadline_days: float,
         bytes_per_token_on_disk: float = 4) -> dict:
    """Everything the Planner tab shows for a token target, a training schedule and a curation deadline.

    ``raw_bytes`` needed, ``kept_bytes`` (= ``token_target * bytes_per_token``), the
    ``retention_product``, ``funnel`` (one row per stage: ``stage``, ``retention``, ``bytes_in``,
    ``bytes_out``), ``throughput`` (``Throughput`` as a dict) and ``cores`` (``cores_for_deadline``
    on the raw bytes, deadline in days).
    """
    raw = raw_bytes_needed(token_target, retentions, bytes_per_token)
    stages = _retentions(retentions)
    outs = funnel_bytes(raw, retentions)
    ins = [raw, *outs[:-1]]
    return {
        "token_target": float(token_target),
        "bytes_per_token": float(bytes_per_token),
        "kept_bytes": token_target * bytes_per_token,
        "raw_bytes": raw,
        "retention_product": retention_product(retentions),
        "funnel": [{"stage": s, "retention": r, "bytes_in": i, "bytes_out": o}
                   for (s, r), i, o in zip(stages, ins, outs)],
        "throughput": asdict(throughput(token_target, days, gpus, bytes_per_token_on_disk=bytes_per_token_on_disk)),
        "cores": cores_for_deadline(raw, stage_cpu_seconds_per_byte,
                                    _positive("deadline_days", deadline_days) * SECONDS_PER_DAY),
    }
