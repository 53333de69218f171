"""knobs: every threshold of a config as a control the dashboard and the notebooks can move.

A *knob* is one field of one stage's config (``gopher_quality.min_words``), described well enough
to draw a widget and to trust it: its kind (``number``, ``integer``, ``switch``, ``choice``,
``languages``), its current value, its ``unit``, its published ``default`` and the ``source`` of
that default, and a one-sentence ``help`` (what a kept document satisfies). Those come from the
field's declaration (``lab.stages.fields.knob``; a stage module's ``SOURCE`` when the field names
none). Numbers also carry the range of the signal they threshold in this run (so a slider spans
what the documents hold) and a round ``step``. Which signal a field thresholds is found, not
listed: the field is nudged and the rule whose value follows it names the signal. ``apply`` turns
moved knobs back into a ``Config`` (validated like any config), so what a user exports is exactly
what ``corpus-lab run --config`` reads.

Shown = applied = exported. A slider moves in ``step`` increments (1, 2 or 5 x 10^k, 100 to about
250 of them over its span, ``lo``/``hi`` on multiples of the step): pass what it reports through
``snap`` before ``apply``, so the value applied and exported is the decimal the slider shows
(``0.7``, not ``0.7000000000000001``), and show it with ``decimals`` places. A value typed in an
exact number box goes to ``apply`` as typed (never snapped): the slider then shows it off its
grid until it is moved again. ``diff`` lists what moved against the run's config (the Export
tab), ``encode``/``decode`` carry the moved knobs in a link, ``stage_knobs``/``reset`` put one
stage (or all) back, and ``run_name`` proposes a batch run name that is not the explored run's.

Signature parameters (MinHash ngram, bands, rows, seed, ...) are not knobs: changing them means
recomputing signals, not moving a threshold.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import re
import typing
from dataclasses import dataclass
from functools import lru_cache
from typing import Any
from urllib.parse import quote, unquote

from lab.config import Config, build, to_dict
from lab.errors import ConfigError
from lab.stages import BY_NAME, STAGE_NAMES, STAGES

MIN_STEPS = 100  # a slider's span holds at least this many steps (and at most 2.5x as many, plus the alignment)
_INTEGER = re.compile(r"[-+]?\d+")
_NUMBER = re.compile(r"[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?")
_LANGUAGE = re.compile(r"[A-Za-z0-9_-]+")


@dataclass(frozen=True)
class Knob:
    stage: str
    key: str
    kind: str  # number | integer | switch | choice | languages
    value: Any
    signal: str | None = None  # the signal column the threshold applies to (numbers and integers)
    lo: float | None = None  # the signal's range in the run, widened to the value, on multiples of step
    hi: float | None = None
    options: tuple = ()  # choice / languages
    step: float | None = None  # numbers and integers: a round slider increment (1, 2 or 5 x 10^k)
    unit: str = ""  # what the value counts: "words", "fraction of lines", "Jaccard", "on/off"
    default: Any = None  # the dataclass default: the published value
    source: str = ""  # where the default comes from: "Gopher (Rae et al. 2021)", ...
    help: str = ""  # one sentence: what a kept document satisfies

    @property
    def name(self) -> str:
        return f"{self.stage}.{self.key}"

    @property
    def decimals(self) -> int:
        """Decimal places of ``step`` (0 for integers and for steps of 1 or more): how to show the value."""
        return _decimals(self.step) if self.step else 0


@dataclass(frozen=True)
class Change:
    """One knob whose value differs from the run's config."""

    name: str
    before: Any
    after: Any
    unit: str

    def __str__(self) -> str:
        """``gopher_quality.min_words: 50 -> 80 words``; switches and lists without a unit.

        >>> str(Change("c4.enabled", True, False, "on/off"))
        'c4.enabled: on -> off'
        """
        def show(v: Any) -> str:
            return ("on" if v else "off") if isinstance(v, bool) else _show(v)

        number = isinstance(self.after, (int, float)) and not isinstance(self.after, bool)
        return f"{self.name}: {show(self.before)} -> {show(self.after)}" + (f" {self.unit}" if number else "")


@dataclass(frozen=True)
class _Spec:
    """What does not depend on a config's values: a knob's field, kind, metadata and signal."""

    stage: str
    key: str
    kind: str
    unit: str
    default: Any
    source: str
    help: str
    signal: str | None
    choices: tuple = ()

    @property
    def name(self) -> str:
        return f"{self.stage}.{self.key}"


def _kind(f: dataclasses.Field, tp: Any) -> str | None:
    """A knob field's kind; None for a field not declared with ``knob`` (a signal parameter, not a threshold)."""
    if "help" not in f.metadata:
        return None
    if "kind" in f.metadata:
        return f.metadata["kind"]
    if "choices" in f.metadata:
        return "choice"
    if tp is bool:
        return "switch"
    return {int: "integer", float: "number"}.get(tp)


def _signal_of(module, key: str) -> str | None:
    """The signal of the rule whose threshold follows ``key`` when it is nudged (from the stage's default
    config; a value that makes no rule, such as ``pii.max_pii: -1``, is compared between two nudges)."""
    cfg = dataclasses.replace(module.Config(), enabled=True)
    value = getattr(cfg, key)
    nudges = (value + 1, value + 2, value - 1) if isinstance(value, int) else (value * 0.5 + 0.25, value * 0.9)
    variants = []
    for v in (value, *nudges):
        try:
            variants.append(module.rules(dataclasses.replace(cfg, **{key: v})))
        except ConfigError:  # a nudge out of the field's range: the others will do
            continue
    for a, b in itertools.combinations(variants, 2):
        if len(a) == len(b):
            for x, y in zip(a, b):
                if x.value != y.value:
                    return x.signal
    return None


@lru_cache(maxsize=1)
def _specs() -> tuple[_Spec, ...]:
    """Every knob field of every stage config, in funnel order."""
    out = []
    for module in STAGES:
        hints = typing.get_type_hints(module.Config)
        for f in dataclasses.fields(module.Config):
            kind = _kind(f, hints[f.name])
            if kind is None:
                continue
            signal = (f.metadata.get("signal") or _signal_of(module, f.name)) if kind in ("number", "integer") else None
            out.append(_Spec(module.NAME, f.name, kind, f.metadata.get("unit", ""), f.default,
                             f.metadata.get("source") or getattr(module, "SOURCE", ""), f.metadata.get("help", ""),
                             signal, f.metadata.get("choices", ())))
    return tuple(out)


@lru_cache(maxsize=1)
def _by_name() -> dict[str, _Spec]:
    return {s.name: s for s in _specs()}


# --- round steps


def _decimals(step: float) -> int:
    """Decimal places of a round step.

    >>> _decimals(0.005), _decimals(0.1), _decimals(50)
    (3, 1, 0)
    """
    return max(0, -math.floor(math.log10(step) + 1e-9))


def round_step(span: float, *, integer: bool = False) -> float | int:
    """The largest 1, 2 or 5 x 10^k that divides ``span`` into at least ``MIN_STEPS`` steps (at least 1 for integers).

    >>> round_step(1.0), round_step(0.97), round_step(9000, integer=True), round_step(4, integer=True)
    (0.01, 0.005, 50, 1)
    """
    raw = span / MIN_STEPS if span > 0 else 1.0 / MIN_STEPS
    k = math.floor(math.log10(raw))
    step: float | int = 1
    for m in (5, 2, 1, 0.5):  # 0.5 x 10^k covers log10 landing a hair above the true exponent
        step = m * 10**k if k >= 0 else m / 10**-k
        if step <= raw * (1 + 1e-9):
            break
    if k < 0 or step != int(step):
        step = round(step, _decimals(step))
    if integer:
        return max(1, int(round(step)))
    return float(step)


def _align(lo: float, hi: float, step: float | int, integer: bool) -> tuple[float, float]:
    """``lo`` down and ``hi`` up to multiples of ``step``, rounded to its decimals."""
    d = _decimals(step)
    a = math.floor(lo / step + 1e-9) * step
    b = math.ceil(hi / step - 1e-9) * step
    if integer:
        return int(round(a)), int(round(b))
    return round(a, d), round(b, d)


def snap(knob: Knob, value: Any) -> Any:
    """A slider's ``value`` on the knob's step, rounded to the step's decimals (so it shows, applies and
    exports as the same short decimal); other kinds unchanged. Never for a typed exact value.

    >>> k = Knob("language", "min_score", "number", 0.65, "lang_score", 0.0, 1.0, step=0.1)
    >>> snap(k, 0.1 * 7), snap(k, 0.6959)
    (0.7, 0.7)
    """
    if knob.step is None or knob.kind not in ("number", "integer"):
        return value
    n = math.floor(value / knob.step + 0.5)
    if knob.kind == "integer":
        return int(n * knob.step)
    return round(n * knob.step, knob.decimals) + 0.0  # + 0.0: no -0.0


# --- knobs of a config


def knobs(cfg: Config, ranges: dict[str, tuple[float, float]] | None = None,
          languages: tuple[str, ...] = ()) -> list[Knob]:
    """Every movable threshold of ``cfg``, in funnel order. ``ranges``: signal -> (min, max) in the
    run (``lab.query.signal_ranges``); ``languages``: the languages present (for the keep list)."""
    out: list[Knob] = []
    for s in _specs():
        value = getattr(cfg.stage(s.stage), s.key)
        meta = {"unit": s.unit, "default": s.default, "source": s.source, "help": s.help}
        if s.kind == "switch":
            out.append(Knob(s.stage, s.key, s.kind, value, **meta))
        elif s.kind == "choice":
            out.append(Knob(s.stage, s.key, s.kind, value, options=s.choices, **meta))
        elif s.kind == "languages":
            out.append(Knob(s.stage, s.key, s.kind, value, options=tuple(sorted(set(languages) | set(value))), **meta))
        else:
            integer = s.kind == "integer"
            lo, hi = (ranges or {}).get(s.signal, (None, None)) if s.signal else (None, None)
            if lo is not None and hi is not None:
                lo, hi = min(lo, value), max(hi, value)
                step = round_step(hi - lo if hi > lo else abs(value), integer=integer)
                lo, hi = _align(lo, hi, step, integer)
            else:
                lo = hi = None
                step = round_step(abs(value), integer=integer)
            out.append(Knob(s.stage, s.key, s.kind, value, s.signal, lo, hi, step=step, **meta))
    return out


def values(cfg: Config) -> dict[str, Any]:
    """``stage.key`` -> value of every knob of ``cfg``."""
    return {s.name: getattr(cfg.stage(s.stage), s.key) for s in _specs()}


def _unknown(name: str, what: str = "knob") -> ConfigError:
    stage = name.partition(".")[0]
    if stage in BY_NAME:
        known = f"the knobs of {stage}: {', '.join(stage_knobs(stage))}"
    else:
        known = f"knobs are stage.key with stage one of {', '.join(STAGE_NAMES)}, e.g. gopher_quality.min_words"
    return ConfigError(f"{what} {name!r} does not exist; {known}")


def apply(cfg: Config, moved: dict[str, Any]) -> Config:
    """``cfg`` with the knobs in ``moved`` (``stage.key`` -> value) set; validated like any config."""
    d = to_dict(cfg)
    for name, value in moved.items():
        stage, _, key = name.partition(".")
        if stage not in d["stages"] or key not in d["stages"][stage]:
            raise _unknown(name)
        d["stages"][stage][key] = list(value) if isinstance(value, (tuple, list)) else value
    return build(Config, d)


# --- what moved, and putting it back


def diff(base: Config, cfg: Config) -> list[Change]:
    """Every knob whose value in ``cfg`` differs from ``base`` (the run's config), in funnel order.

    >>> from lab.config import Config
    >>> [str(c) for c in diff(Config(), apply(Config(), {"gopher_quality.min_words": 80}))]
    ['gopher_quality.min_words: 50 -> 80 words']
    """
    before, after = values(base), values(cfg)
    by = _by_name()
    return [Change(n, before[n], after[n], by[n].unit) for n in before if before[n] != after[n]]


def stage_knobs(stage: str) -> tuple[str, ...]:
    """The names of one stage's knobs, in order (what "reset this stage" puts back).

    >>> stage_knobs("c4")
    ('c4.enabled', 'c4.min_sentences', 'c4.filter_lorem_ipsum', 'c4.filter_curly_brace')
    """
    if stage not in BY_NAME:
        raise ConfigError(f"unknown stage {stage!r}; known: {', '.join(STAGE_NAMES)}")
    return tuple(s.name for s in _specs() if s.stage == stage)


def reset(moved: dict[str, Any], *, stage: str | None = None) -> dict[str, Any]:
    """``moved`` without one stage's knobs (``stage``), or without any (all back to the run's config).

    >>> reset({"c4.min_sentences": 3, "language.min_score": 0.5}, stage="c4")
    {'language.min_score': 0.5}
    """
    if stage is None:
        return {}
    names = set(stage_knobs(stage))
    return {k: v for k, v in moved.items() if k not in names}


# --- the state in a link


def _show(value: Any) -> str:
    """A knob value as a link (and a diff) writes it: short floats, true/false, comma lists.

    >>> _show(0.7), _show(80), _show(True), _show(("en", "de"))
    ('0.7', '80', 'true', 'en,de')
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (tuple, list)):
        return ",".join(map(str, value))
    return str(value)


def encode(moved: dict[str, Any]) -> str:
    """The moved knobs as a readable query string, in funnel order (``decode`` reads it back).

    >>> encode({"gopher_quality.min_words": 80, "language.keep": ("en", "de")})
    'language.keep=en,de&gopher_quality.min_words=80'
    """
    by = _by_name()
    for name in moved:
        if name not in by:
            raise _unknown(name)
    order = [s.name for s in _specs() if s.name in moved]
    return "&".join(f"{n}={quote(_show(moved[n]), safe=',.-_')}" for n in order)


def _parse(spec: _Spec, raw: str) -> Any:
    """One link value as the knob's type; a ConfigError names the key, the value and what is allowed."""
    def bad(allowed: str) -> ConfigError:
        return ConfigError(f"link parameter {spec.name}={raw!r} is not allowed: must be {allowed}; "
                           "fix the value in the link or remove the parameter")

    if spec.kind == "switch":
        if raw not in ("true", "false"):
            raise bad("true or false")
        return raw == "true"
    if spec.kind == "integer":
        if not _INTEGER.fullmatch(raw):
            raise bad(f"a whole number ({spec.unit})")
        return int(raw)
    if spec.kind == "number":
        if not _NUMBER.fullmatch(raw) or not math.isfinite(float(raw)):
            raise bad(f"a finite number ({spec.unit})")
        return float(raw)
    if spec.kind == "choice":
        options = spec.choices
        for o in options:
            if raw == _show(o) or (isinstance(o, float) and _NUMBER.fullmatch(raw) and abs(float(raw) - o) < 1e-9):
                return o
        raise bad("one of " + ", ".join(map(_show, options)))
    codes = raw.split(",")
    if not all(_LANGUAGE.fullmatch(c) for c in codes):
        raise bad("a comma-separated list of language codes such as en,de")
    return tuple(codes)


def decode(text: str, base: Config, *, ignore: tuple[str, ...] = ()) -> dict[str, Any]:
    """The moved knobs of a link made by ``encode`` (a leading ``?`` is fine), every key and value
    validated, and the whole applied to ``base`` once: a bad link raises a ConfigError and sets nothing.
    ``ignore``: other parameters the app keeps in the same query string (``tab``, ``page``).

    >>> from lab.config import Config
    >>> decode("?gopher_quality.min_words=80&language.keep=en,de", Config())
    {'gopher_quality.min_words': 80, 'language.keep': ('en', 'de')}
    """
    by = _by_name()
    out: dict[str, Any] = {}
    for part in filter(None, text.removeprefix("?").split("&")):
        key, eq, raw = part.partition("=")
        key, raw = unquote(key), unquote(raw)
        if key in ignore:
            continue
        if not eq:
            raise ConfigError(f"link parameter {key!r} has no value; write it as {key}=value or remove it")
        if key not in by:
            raise _unknown(key, "link parameter")
        if key in out:
            raise ConfigError(f"link parameter {key!r} is given twice; keep one of them")
        out[key] = _parse(by[key], raw)
    try:
        apply(base, out)
    except ConfigError as e:
        raise ConfigError(f"the link's thresholds do not make a valid config: {e}; "
                          "fix the value in the link or remove the parameter") from None
    return out


def run_name(base: Config, cfg: Config) -> str:
    """A name for the batch run of ``cfg`` that is never the explored run's (``base.name``): the base
    name (without an earlier ``-<8 hex>`` suffix) and the first 8 characters of ``cfg.config_hash()``.

    >>> from lab.config import Config
    >>> name = run_name(Config(name="sample"), Config())
    >>> name.startswith("sample-") and len(name) == len("sample-") + 8
    True
    """
    h = cfg.config_hash()[:8]
    stem = re.sub(r"-[0-9a-f]{8}$", "", base.name) or base.name
    name = f"{stem}-{h}"
    return name if name != base.name else f"{base.name}-{h}"
