"""The run configuration: typed, validated, loaded from and saved to YAML.

The config is one frozen dataclass per stage (each in its stage module) plus the inputs, ingest limits,
percentile rules and engine settings. ``load`` validates all of it before any work starts: unknown keys,
wrong types and out-of-range values raise a ``ConfigError`` that names the key path, the value, what is
allowed and the fix. ``dumps`` and ``save`` write the resolved config, which ``load`` reads back to an
equal object (the exported config *is* this file).

A stage section may also hold ``by_lang: {lang: {threshold: value}}``: per-language values of its numeric
thresholds, kept in ``StagesConfig.by_lang`` (``overrides(stage)`` reads them) and written back inside the
section; ``lab.select.rules.with_by_lang`` turns them into the rules' ``by_lang``.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import re
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from lab.errors import ConfigError, IntegrityError
from lab.fields import check, knob_kind
from lab.io import decoding
from lab.io.inputs import FORMATS, IngestConfig, InputConfig  # noqa: F401 - the config's inputs and ingest sections
from lab.stages import STAGE_NAMES, STAGES
from lab.tokens import tokenizer_source
from lab.tokens.mixture import MixtureConfig

RENAMED = {"ingest.text_files_per_partition": "files_per_partition"}  # old key path -> its new name
_MEMORY = re.compile(r"auto|0?\.\d+|1(\.0*)?|\d+(\.\d+)?\s*([kKmMgGtT]i?[bB]|[bB])?")
_ADDRESS = re.compile(r"(tcp|tls|inproc|ucx|ws|wss)://[^\s:/]+(:\d{1,5})?|[^\s:/]+:\d{1,5}")


# Per-language thresholds: ((stage, ((lang, ((field, value), ...)), ...)), ...), every level sorted.
# In YAML each stage's are in its own section: stages.<name>.by_lang: {lang: {field: value}}.
ByLang = tuple[tuple[str, tuple[tuple[str, tuple[tuple[str, Any], ...]], ...]], ...]
BY_LANG = "by_lang"
FIRST_BY_LANG_STAGE = "language"  # the language is known from this stage on (batch runs decide in funnel order)


def _by_lang_of(self: Any, stage: str) -> dict[str, dict[str, Any]]:
    """lang -> {field: value}: the per-language thresholds of ``stage`` (empty: none)."""
    return {lang: dict(fields) for name, langs in self.by_lang if name == stage for lang, fields in langs}


def _check_by_lang(self: Any) -> None:
    from lab.select.rules import with_by_lang

    for name, langs in self.by_lang:  # as built from YAML (_build_by_lang), or given in Python
        if name not in STAGE_NAMES or STAGE_NAMES.index(name) < STAGE_NAMES.index(FIRST_BY_LANG_STAGE):
            raise ConfigError(f"{name}.{BY_LANG} is not allowed: per-language thresholds apply to the stages from "
                              f"{FIRST_BY_LANG_STAGE} on: {', '.join(STAGE_NAMES[STAGE_NAMES.index(FIRST_BY_LANG_STAGE):])}")
        module = STAGES[STAGE_NAMES.index(name)]
        cfg = getattr(self, name)
        over = {}
        for lang, fields in langs:
            for key, _ in fields:
                if _knob_kind(module, key) not in ("integer", "number"):
                    raise ConfigError(f"{name}.{BY_LANG}.{lang}.{key} is not allowed: not a numeric threshold of {name}")
            try:
                dataclasses.replace(cfg, **dict(fields))
            except ConfigError as e:
                raise ConfigError(f"{name}.{BY_LANG}.{lang}.{e} (for {lang!r} documents, with the section's other "
                                  "values); fix that language's value") from None
            over[lang] = dict(fields)
        with_by_lang(module, cfg, over)  # the same rules at other thresholds, or a ConfigError


# one field per registered stage, in funnel order: stages.<name> is that stage module's Config
StagesConfig = dataclasses.make_dataclass(
    "StagesConfig", [(m.NAME, m.Config, field(default_factory=m.Config)) for m in STAGES]
    + [(BY_LANG, ByLang, field(default=()))], frozen=True,
    namespace={"overrides": _by_lang_of, "__post_init__": _check_by_lang})
StagesConfig.__module__ = __name__
StagesConfig.__doc__ = ("Every stage's thresholds, one field per stage of the registry (``lab.stages.STAGES``), "
                        "and their per-language overrides (``by_lang``, written inside each stage's section).")


def _knob_kind(module: Any, name: str) -> str | None:
    hints, fields = _fields_of(module.Config)
    return knob_kind(fields[name], hints[name]) if name in fields else None


def _build_by_lang(data: dict, path: str) -> tuple[dict, ByLang]:
    """Split ``stages`` plain data into the sections without ``by_lang`` and the validated overrides."""
    if BY_LANG in data:
        raise ConfigError(f"{path}.{BY_LANG} is not a key of {path}: per-language thresholds go inside a stage's "
                          f"section, e.g. {path}.gopher_quality.{BY_LANG}: {{de: {{min_stop_words: 3}}}}")
    sections, out = {}, []
    for name, section in data.items():
        if not isinstance(section, dict) or BY_LANG not in section:
            sections[name] = section
            continue
        section = dict(section)
        raw = section.pop(BY_LANG)
        sections[name] = section
        where = f"{path}.{name}.{BY_LANG}"
        if raw is None or raw == {}:
            continue
        if not isinstance(raw, dict):
            raise ConfigError(f"{where}={raw!r} is not allowed: must be a mapping of language codes to the "
                              f"thresholds they change, e.g. {{de: {{min_stop_words: 3}}}}")
        if name in STAGE_NAMES and STAGE_NAMES.index(name) < STAGE_NAMES.index(FIRST_BY_LANG_STAGE):
            raise ConfigError(f"{where} is not allowed: the {name} stage decides before the language is known "
                              f"(per-language thresholds apply from the {FIRST_BY_LANG_STAGE} stage on); remove it")
        if name not in STAGE_NAMES:
            continue  # the unknown stage itself is reported below
        module = STAGES[STAGE_NAMES.index(name)]
        hints, fields = _fields_of(module.Config)
        langs = []
        for lang, over in raw.items():
            if not isinstance(lang, str) or not lang.strip():
                raise ConfigError(f"{where}: language code {lang!r} is not allowed: must be a non-empty string such "
                                  f"as de (YAML reads no/yes/on/off as booleans: quote them, 'no')")
            if not isinstance(over, dict) or not over:
                raise ConfigError(f"{where}.{lang}={over!r} is not allowed: must be a mapping of thresholds to "
                                  "their values for that language, e.g. {min_stop_words: 3}")
            vals = []
            for key, value in over.items():
                kind = _knob_kind(module, key)
                if kind not in ("integer", "number"):
                    numeric = [f for f in fields if _knob_kind(module, f) in ("integer", "number")]
                    what = "not a key of the stage" if key not in fields else "not a numeric threshold"
                    raise ConfigError(f"{where}.{lang}.{key} is not allowed ({what}): by_lang sets numeric "
                                      f"thresholds of {name}: {', '.join(numeric) or 'none (it has no numeric threshold)'}")
                vals.append((key, _convert(hints[key], value, f"{where}.{lang}.{key}")))
            langs.append((lang, tuple(sorted(vals))))
        out.append((name, tuple(sorted(langs))))
    return sections, tuple(sorted(out, key=lambda x: STAGE_NAMES.index(x[0])))


@dataclass(frozen=True)
class PercentileRule:
    """Drop the lowest or highest ``percent`` of documents by ``signal`` (global, merged quantile)."""

    stage: str  # the stage the rule belongs to in the funnel
    signal: str  # a numeric signal column
    drop_lowest: float = 0.0  # percent of documents, 0..100
    drop_highest: float = 0.0  # percent of documents, 0..100

    def __post_init__(self) -> None:
        from lab.io.schema import numeric_signals

        check("stage", self.stage, self.stage in STAGE_NAMES, "one of " + ", ".join(STAGE_NAMES))
        check("signal", self.signal, self.signal in numeric_signals(), "a numeric signal: " + ", ".join(numeric_signals()))
        corpus = [c for m in STAGES for c in getattr(m, "CORPUS_SIGNALS", ())]
        check("signal", self.signal, self.signal not in corpus, "a signal annotate computes (the merged quantiles "
              "are built at annotate time; " + ", ".join(corpus) + " come from a corpus-level merge): use a threshold")
        check("drop_lowest", self.drop_lowest, 0 <= self.drop_lowest < 100, "a percent in [0, 100)")
        check("drop_highest", self.drop_highest, 0 <= self.drop_highest < 100, "a percent in [0, 100)")
        check("drop_lowest", self.drop_lowest, self.drop_lowest > 0 or self.drop_highest > 0,
              "> 0, or set drop_highest > 0 (a rule that drops nothing is a mistake)")


@dataclass(frozen=True)
class EngineConfig:
    scheduler: str | None = None  # address of an existing Dask scheduler (tcp://host:8786); None starts a LocalCluster
    n_workers: int = 0  # LocalCluster worker processes (one thread each); 0 = one per core this process may use (its CPU affinity)
    memory_limit: str = "auto"  # per-worker memory limit passed to Dask ("4GiB", "auto")
    retries: int = 2  # times a failing partition task is retried before it is quarantined
    workers_timeout: float = 60.0  # seconds to wait for an existing scheduler to have a worker
    connect_timeout: float = 10.0  # seconds to reach an existing scheduler before the run fails
    inprocess_bytes: int = 16 * 2**20  # inputs up to this size run in this process (no cluster to start) unless a scheduler or n_workers is given; 0: always a cluster

    def __post_init__(self) -> None:
        check("n_workers", self.n_workers, self.n_workers >= 0, ">= 0 (0 = one per core)")
        check("workers_timeout", self.workers_timeout, self.workers_timeout > 0, "> 0 seconds")
        check("connect_timeout", self.connect_timeout, self.connect_timeout > 0, "> 0 seconds")
        check("retries", self.retries, self.retries >= 0, ">= 0")
        check("inprocess_bytes", self.inprocess_bytes, self.inprocess_bytes >= 0, ">= 0 bytes (0: always a cluster)")
        check("memory_limit", self.memory_limit, bool(_MEMORY.fullmatch(self.memory_limit.strip())),
              "'auto', a size such as 4GiB or 500MB, or a fraction of the machine such as 0.5")
        if self.scheduler is not None:
            check("scheduler", self.scheduler, bool(_ADDRESS.fullmatch(self.scheduler)),
                  "a scheduler address such as tcp://127.0.0.1:8786 (or host:port)")


@dataclass(frozen=True)
class TokenizerConfig:
    """The run's tokenizer, frozen by sha256: a byte-level BPE (or a Unigram) fitted once per run on a
    stratified sample of the kept documents, or an existing tokenizer from disk (``kind: file``)."""

    enabled: bool = True  # fit the tokenizer and count every document's tokens (n_tokens) in `corpus-lab run`
    kind: Literal["bpe", "unigram", "file"] = "bpe"  # bpe: fitted byte-level BPE; unigram: fitted Unigram LM; file: `path`
    path: str = ""  # kind file: a tokenizer.json, a directory holding one, or tiktoken:cl100k_base (no download)
    vocab_size: int = 32000  # including the special tokens
    sample_bytes: int = 64 * 2**20  # text the tokenizer is fitted on, split over (lang, source) by global share
    min_frequency: int = 2  # a merge needs a pair seen at least this often
    seed: int = 0  # which documents of each stratum are sampled

    def __post_init__(self) -> None:
        check("vocab_size", self.vocab_size, 260 <= self.vocab_size <= 2**31 - 1,
              "a vocabulary size >= 260 (256 byte tokens + specials + merges)")
        check("sample_bytes", self.sample_bytes, self.sample_bytes >= 1024, ">= 1024 bytes")
        check("min_frequency", self.min_frequency, self.min_frequency >= 1, ">= 1")
        check("kind", self.kind, self.kind in tokenizer_source.KINDS, "one of " + ", ".join(tokenizer_source.KINDS))
        if self.kind == "file":
            check("path", self.path, bool(self.path), "set with tokenizer.kind: file (a tokenizer.json, "
                  "a directory holding one, or tiktoken:cl100k_base)")
            tokenizer_source.check_source(self.path, key="path")  # load() prefixes the section: tokenizer.path
        else:
            check("path", self.path, not self.path, f"empty with tokenizer.kind: {self.kind} (it is fitted); "
                  "set tokenizer.kind: file to use the tokenizer at that path")


PACKINGS = ("pad", "concat", "best_fit")


@dataclass(frozen=True)
class PackConfig:
    """How kept documents become training sequences (materialize)."""

    strategy: Literal["pad", "concat", "best_fit"] = "best_fit"  # pad: one document per sequence; concat: split across; best_fit: whole documents packed
    seq_len: int = 2048  # tokens per training sequence
    val_fraction: float = 0.01  # documents held out for validation (by document, never split)
    test_fraction: float = 0.0  # documents held out for a test split (by document, never split; 0: no tokens/test/)
    shuffle_seed: int = 0  # the global document shuffle
    shard_sequences: int = 8192  # sequences per shard file

    def __post_init__(self) -> None:
        check("strategy", self.strategy, self.strategy in PACKINGS, "one of " + ", ".join(PACKINGS))
        check("seq_len", self.seq_len, 2 <= self.seq_len <= 2**20, "a length in 2..1048576 tokens")
        check("val_fraction", self.val_fraction, 0 <= self.val_fraction < 1, "a fraction in [0, 1)")
        check("test_fraction", self.test_fraction, 0 <= self.test_fraction < 1 - self.val_fraction,
              f"a fraction in [0, 1 - val_fraction = {1 - self.val_fraction:g})")
        check("shard_sequences", self.shard_sequences, self.shard_sequences >= 1, ">= 1")


@dataclass(frozen=True)
class Config:
    name: str = "sample"  # the run's directory name under output_dir
    output_dir: str = "runs"  # where run directories are written
    mode: Literal["explore", "batch"] = "explore"  # explore: every signal of every doc; batch: stop at the first failing stage
    inputs: tuple[InputConfig, ...] = ()  # the corpus: one entry per file, directory or glob
    ingest: IngestConfig = field(default_factory=IngestConfig)
    stages: StagesConfig = field(default_factory=StagesConfig)
    percentiles: tuple[PercentileRule, ...] = ()  # drop a share of the documents by a signal's global quantile (explore mode)
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    pack: PackConfig = field(default_factory=PackConfig)
    mixture: MixtureConfig = field(default_factory=MixtureConfig)  # token budgets per bucket of kept documents (lab.tokens.mixture)
    engine: EngineConfig = field(default_factory=EngineConfig)

    def __post_init__(self) -> None:
        check("name", self.name, bool(self.name) and "/" not in self.name and self.name not in (".", ".."),
              "a directory name without '/'")
        check("mode", self.mode, self.mode in ("explore", "batch"), "explore or batch")
        nd = getattr(self.stages, "near_dedup", None)
        if nd is not None and nd.keep == "best_signal":
            from lab.io.schema import numeric_signals

            check("stages.near_dedup.keep_signal", nd.keep_signal, nd.keep_signal in numeric_signals(),
                  "a numeric signal: " + ", ".join(numeric_signals()))

    @property
    def run_dir(self) -> Path:
        """Where the run is read and written: its directory, or for a run in object storage (``output_dir`` a
        URL) this process's working copy of it (``lab.io.mirror``)."""
        if self.run_url:
            from lab.io.mirror import local_path

            return local_path(self.run_url)
        return Path(self.output_dir) / self.name

    @property
    def run_url(self) -> str | None:
        """The run directory's URL when ``output_dir`` is in object storage (``s3://bucket/runs``), else None."""
        from lab.io.storage import is_url, join

        return join(self.output_dir, self.name) if is_url(self.output_dir) else None

    def stage(self, name: str) -> Any:
        return getattr(self.stages, name)

    def inputs_hash(self) -> str:
        """Hash of what a run directory holds a run of: inputs, ingest, mode, and in batch mode the stage
        thresholds too (a batch run skips the later stages of dropped documents). Another one needs
        another run directory (or ``--overwrite``)."""
        d = to_dict(self)
        part = {k: d[k] for k in ("inputs", "ingest", "mode")}
        if self.mode == "batch":
            part["stages"] = d["stages"]
        return hashlib.sha256(json.dumps(part, sort_keys=True).encode()).hexdigest()[:16]

    def signals_hash(self) -> str:
        """Hash of everything that changes stored signals: ``inputs_hash``, the readers' version and charset
        detector (``lab.io.decoding.signal_params``: the same bytes may decode to other text), and every
        stage's ``VERSION`` and ``signal_params`` (the MinHash signature parameters, the language model).
        A partition annotated under another one is annotated again."""
        stages = {}
        for m in STAGES:
            params = m.signal_params(getattr(self.stages, m.NAME)) if hasattr(m, "signal_params") else {}
            stages[m.NAME] = {"version": m.VERSION, **params}
        part = {"inputs": self.inputs_hash(), "read": decoding.signal_params(), "stages": stages}
        return hashlib.sha256(json.dumps(part, sort_keys=True).encode()).hexdigest()[:16]

    def config_hash(self) -> str:
        return hashlib.sha256(json.dumps(self.hashed(), sort_keys=True).encode()).hexdigest()[:16]

    def hashed(self) -> dict:
        """What ``config_hash`` hashes: the config's plain data without where it runs, and without the keys
        added since at the values that change nothing (so earlier runs keep their hash)."""
        d = to_dict(self)
        for k in ("engine", "name", "output_dir"):  # where it runs and where it is written change nothing it produces
            d.pop(k)
        if d["tokenizer"]["kind"] == "bpe" and not d["tokenizer"]["path"]:  # the default: hashes as before kinds existed
            del d["tokenizer"]["kind"], d["tokenizer"]["path"]
        if not self.mixture.active:  # no mixture writes what a config without the section wrote: hashes as before
            d.pop("mixture")
        if not d["pack"]["test_fraction"]:  # no test split: the hash of the runs made before the key existed
            d["pack"].pop("test_fraction")
        return d


# --- building dataclasses from plain data, with errors that name the key path ----------------------


def type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is Literal:
        return " | ".join(repr(a) for a in typing.get_args(tp))
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_name(a) for a in typing.get_args(tp))
    if origin is tuple:
        return f"list of {type_name(typing.get_args(tp)[0])}"
    return getattr(tp, "__name__", str(tp))


def _convert(tp: Any, value: Any, path: str) -> Any:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        errors = []
        for a in args:
            if a is type(None):
                continue
            try:
                return _convert(a, value, path)
            except ConfigError as e:
                errors.append(e)
        raise errors[0]
    if origin is Literal:
        allowed = typing.get_args(tp)
        if value not in allowed:
            raise ConfigError(f"{path}={value!r} is not allowed: must be one of {', '.join(map(str, allowed))}")
        return value
    if origin is tuple:
        if isinstance(value, str) or not isinstance(value, (list, tuple)):
            raise ConfigError(f"{path}={value!r} is not allowed: must be a list (YAML: [a, b] or '- a' lines)")
        (item_tp, *_) = typing.get_args(tp)
        return tuple(_convert(item_tp, v, f"{path}[{i}]") for i, v in enumerate(value))
    if dataclasses.is_dataclass(tp):
        return build(tp, value, path)
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{path}={value!r} is not allowed: must be a number")
        return float(value)
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{path}={value!r} is not allowed: must be a whole number")
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{path}={value!r} is not allowed: must be true or false")
        return value
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{path}={value!r} is not allowed: must be a string")
        return value
    raise TypeError(f"config type {tp!r} at {path} is not supported")


@functools.lru_cache(maxsize=None)
def _fields_of(cls: type) -> tuple[dict[str, Any], dict[str, dataclasses.Field]]:
    """A dataclass's resolved field types and its fields (resolving string annotations compiles each one:
    a dashboard session builds a config on every slider release)."""
    return typing.get_type_hints(cls), {f.name: f for f in dataclasses.fields(cls)}


def build(cls: type, data: Any, path: str = "") -> Any:
    """Build dataclass ``cls`` from a mapping, validating every key; errors name the key path."""
    if isinstance(data, cls):
        return data
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path or 'config'}={data!r} is not allowed: must be a mapping of keys to values")
    by_lang = None
    if cls is StagesConfig:
        data, by_lang = _build_by_lang(data, path or "stages")
    hints, fields = _fields_of(cls)
    unknown = sorted(set(data) - set(fields))
    for old in unknown:
        new = RENAMED.get(f"{path}.{old}" if path else old)
        if new:
            raise ConfigError(f"{path + '.' if path else ''}{old} was renamed to {path + '.' if path else ''}{new} "
                              f"(its meaning widened: see `corpus-lab reference`); rename the key")
    if unknown:
        where = path or "the top level"
        known = [f for f in fields if not (cls is StagesConfig and f == BY_LANG)]  # by_lang: inside a section
        raise ConfigError(
            f"unknown key {unknown[0]!r} at {where}; known keys: {', '.join(known)}. "
            "Fix the spelling or remove the key."
        )
    kwargs = {}
    for name, value in data.items():
        kwargs[name] = _convert(hints[name], value, f"{path}.{name}" if path else name)
    if by_lang:
        kwargs[BY_LANG] = by_lang
    missing = [n for n, f in fields.items() if n not in kwargs
               and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    if missing:
        raise ConfigError(f"{path or 'config'}: missing required key {missing[0]!r} ({type_name(hints[missing[0]])})")
    try:
        return cls(**kwargs)
    except (ConfigError, IntegrityError) as e:  # a value checked in __post_init__ (a file it names may be damaged)
        raise type(e)(f"{path + '.' if path else ''}{e}") from None


def to_dict(obj: Any) -> Any:
    """Plain data (dicts, lists, scalars) of a config, in field order; ``build`` inverts it."""
    if isinstance(obj, StagesConfig):  # per-language thresholds are written inside their stage's section
        out = {f.name: to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj) if f.name != BY_LANG}
        for name, langs in obj.by_lang:
            out[name][BY_LANG] = {lang: dict(fields) for lang, fields in langs}
        return out
    if dataclasses.is_dataclass(obj):
        return {f.name: to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, tuple):
        return [to_dict(v) for v in obj]
    return obj


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, except that a key given twice in one mapping is an error: PyYAML keeps the last
    value and drops the first without a word, so two ``stages:`` blocks would silently lose one."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            self.flatten_mapping(node)  # merge keys (<<) first: an explicit key may override a merged one
            seen: dict = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.get(key)
                except TypeError:  # an unhashable key: the base class reports it
                    break
                line = key_node.start_mark.line + 1
                if first is not None:
                    raise ConfigError(f"{self.name}: key {key!r} appears twice in one mapping, at line {first} and at "
                                      f"line {line}; YAML would keep only the second. Merge the two into one "
                                      f"{key!r} entry")
                seen[key] = line
        return super().construct_mapping(node, deep=deep)


def loads(text: str, source: str = "<string>") -> Config:
    try:
        loader = _UniqueKeyLoader(text)
        loader.name = source
        try:
            data = loader.get_single_data()
        finally:
            loader.dispose()
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        what = "; ".join(x for x in (getattr(e, "context", None), getattr(e, "problem", None)) if x) or str(e)
        raise ConfigError(f"{source} is not valid YAML{where}: {what}; fix the file (see "
                          "`corpus-lab run --dry-run` for every key)") from None
    return build(Config, data or {})


def load(path: str | Path) -> Config:
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"config file {str(p)!r} does not exist; pass an existing YAML file to --config")
    try:
        return loads(p.read_text(), str(p))
    except (ConfigError, IntegrityError) as e:
        raise type(e)(str(e) if str(e).startswith(str(p)) else f"{p}: {e}") from None


def dumps(cfg: Config) -> str:
    return yaml.safe_dump(to_dict(cfg), sort_keys=False, default_flow_style=False, width=100)


def save(cfg: Config, path: str | Path) -> None:
    Path(path).write_text(dumps(cfg))
