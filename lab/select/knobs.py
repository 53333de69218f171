"""knobs: every threshold of a config as a control the dashboard and the notebooks can move.

A *knob* is one field of one stage's config (``gopher_quality.min_words``), described well enough
to draw a widget and to trust it: its kind (``number``, ``integer``, ``switch``, ``choice``,
``languages``), its current value, its ``unit``, its published ``default`` and the ``source`` of
that default, and a one-sentence ``help`` (what a kept document satisfies). Those come from the
field's declaration (``lab.fields.knob``; a stage module's ``SOURCE`` when the field names
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

Per-language thresholds (a stage section's ``by_lang``, ``lab.config``) are knobs too, named
``stage.key@lang`` (``gopher_quality.min_stop_words@de``): ``knobs(cfg, lang="de")`` gives the
numeric knobs that may differ by language under those names, valued at the language's override or,
without one, at the stage's own value; ``apply`` writes them into ``by_lang``, and ``values``,
``diff``, ``encode`` and ``decode`` carry them like any knob, so a link, the diff and the export
hold them. ``per_language`` says which knobs can differ by language (``Knob.per_language``).

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
from lab.fields import knob_kind
from lab.stages import BY_NAME, STAGE_NAMES, STAGES

MIN_STEPS = 100  # a slider's span holds at least this many steps (and at most 2.5x as many, plus the alignment)
_INTEGER = re.compile(r"[-+]?\d+")
_NUMBER = re.compile(r"[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?")
_LANGUAGE = re.compile(r"[A-Za-z0-9_-]+")
LANG_SEP = "@"  # stage.key@lang: the threshold for one language's documents


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
    lang: str | None = None  # a per-language threshold: the language it holds for (the name ends in @lang)
    per_language: bool = False  # whether this threshold can differ by language (``by_lang``)

    @property
    def name(self) -> str:
        return f"{self.stage}.{self.key}" + (f"{LANG_SEP}{self.lang}" if self.lang else "")

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
    per_language: bool = False

    @property
    def name(self) -> str:
        return f"{self.stage}.{self.key}"


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


def _per_language(module, key: str, kind: str) -> bool:
    """Whether a threshold may differ by language: a numeric field of a stage from the language stage on
    whose rules take a per-language value (``lab.select.rules.with_by_lang`` accepts a nudged override)."""
    from lab.config import FIRST_BY_LANG_STAGE
    from lab.select.rules import with_by_lang

    if kind not in ("number", "integer") or STAGE_NAMES.index(module.NAME) < STAGE_NAMES.index(FIRST_BY_LANG_STAGE):
        return False
    cfg = dataclasses.replace(module.Config(), enabled=True)
    value = getattr(cfg, key)
    for v in ((value + 1, value + 2) if isinstance(value, int) else (value * 0.5 + 0.25, value * 0.9)):
        try:
            if any(r.by_lang for r in with_by_lang(module, cfg, {"xx": {key: v}})):
                return True
        except ConfigError:
            continue
    return False


@lru_cache(maxsize=1)
def _specs() -> tuple[_Spec, ...]:
    """Every knob field of every stage config, in funnel order."""
    out = []
    for module in STAGES:
        hints = typing.get_type_hints(module.Config)
        for f in dataclasses.fields(module.Config):
            kind = knob_kind(f, hints[f.name])
            if kind is None:
                continue
            signal = (f.metadata.get("signal") or _signal_of(module, f.name)) if kind in ("number", "integer") else None
            out.append(_Spec(module.NAME, f.name, kind, f.metadata.get("unit", ""), f.default,
                             f.metadata.get("source") or getattr(module, "SOURCE", ""), f.metadata.get("help", ""),
                             signal, f.metadata.get("choices", ()), _per_language(module, f.name, kind)))
    return tuple(out)


@lru_cache(maxsize=1)
def _by_name() -> dict[str, _Spec]:
    return {s.name: s for s in _specs()}


def split_name(name: str) -> tuple[str, str | None]:
    """A knob name's ``stage.key`` and language (None: every language's threshold).

    >>> split_name("gopher_quality.min_stop_words@de"), split_name("c4.enabled")
    (('gopher_quality.min_stop_words', 'de'), ('c4.enabled', None))
    """
    base, sep, lang = name.partition(LANG_SEP)
    return base, (lang if sep else None)


def per_language() -> tuple[str, ...]:
    """The thresholds that may differ by language (``stage.key``), in funnel order.

    >>> "gopher_quality.min_stop_words" in per_language(), "near_dedup.threshold" in per_language()
    (True, False)
    """
    return tuple(s.name for s in _specs() if s.per_language)


def _spec_of(name: str, what: str = "knob") -> tuple[_Spec, str | None]:
    """The spec and language of a knob name; a ConfigError for an unknown knob, a bad language code or a
    threshold that cannot differ by language."""
    base, lang = split_name(name)
    spec = _by_name().get(base)
    if spec is None:
        raise _unknown(base, what)
    if lang is not None:
        if not _LANGUAGE.fullmatch(lang):
            raise ConfigError(f"{what} {name!r}: {lang!r} is not a language code; write stage.key@code, e.g. "
                              "gopher_quality.min_stop_words@de")
        if not spec.per_language:
            raise ConfigError(f"{what} {name!r}: {base} cannot differ by language (by_lang sets numeric thresholds "
                              f"compared one document at a time); these can: {', '.join(per_language())}")
    return spec, lang


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


def _value(cfg: Config, spec: _Spec, lang: str | None) -> Any:
    """The value ``cfg`` holds ``spec`` at for ``lang``'s documents: its override, else the stage's own."""
    own = getattr(cfg.stage(spec.stage), spec.key)
    if lang is None:
        return own
    return cfg.stages.overrides(spec.stage).get(lang, {}).get(spec.key, own)


def knobs(cfg: Config, ranges: dict[str, tuple[float, float]] | None = None,
          languages: tuple[str, ...] = (), *, lang: str | None = None) -> list[Knob]:
    """Every movable threshold of ``cfg``, in funnel order. ``ranges``: signal -> (min, max) in the
    run (``lab.query.signal_ranges``); ``languages``: the languages present (for the keep list).
    ``lang``: the thresholds that may differ by language are ``lang``'s (named ``stage.key@lang``,
    valued at its override or the stage's own value); the others are every language's."""
    out: list[Knob] = []
    for s in _specs():
        at = lang if s.per_language else None
        value = _value(cfg, s, at)
        meta = {"unit": s.unit, "default": s.default, "source": s.source, "help": s.help, "lang": at,
                "per_language": s.per_language}
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


def values(cfg: Config, *, lang: str | None = None) -> dict[str, Any]:
    """``stage.key`` -> value of every knob of ``cfg``, then ``stage.key@lang`` -> value of each
    per-language override it holds. ``lang``: also every per-language threshold for ``lang``'s documents
    (its override, else the stage's own value), as the knobs of ``knobs(cfg, lang=lang)`` are named.

    >>> from lab.config import Config
    >>> cfg = apply(Config(), {"gopher_quality.min_stop_words@de": 1})
    >>> v = values(cfg)
    >>> v["gopher_quality.min_stop_words"], v["gopher_quality.min_stop_words@de"], "c4.min_sentences@de" in v
    (2, 1, False)
    >>> values(cfg, lang="fr")["gopher_quality.min_stop_words@fr"]
    2
    """
    out = {s.name: getattr(cfg.stage(s.stage), s.key) for s in _specs()}
    for stage, langs in cfg.stages.by_lang:
        for code, fields in langs:
            for key, v in fields:
                out[f"{stage}.{key}{LANG_SEP}{code}"] = v
    if lang is not None:
        for s in _specs():
            if s.per_language:
                out.setdefault(f"{s.name}{LANG_SEP}{lang}", out[s.name])
    return dict(sorted(out.items(), key=lambda kv: _order(kv[0])))


def _order(name: str) -> tuple[int, str]:
    """Funnel order, a threshold's per-language values right after it (by language)."""
    base, lang = split_name(name)
    return _position()[base], lang or ""


@lru_cache(maxsize=1)
def _position() -> dict[str, int]:
    return {s.name: i for i, s in enumerate(_specs())}


def value_of(cfg: Config, name: str) -> Any:
    """One knob's value in ``cfg`` (``stage.key`` or ``stage.key@lang``: the override, else the stage's own).

    >>> from lab.config import Config
    >>> value_of(Config(), "gopher_quality.min_stop_words@de")
    2
    """
    spec, lang = _spec_of(name)
    return _value(cfg, spec, lang)


def _unknown(name: str, what: str = "knob") -> ConfigError:
    stage = name.partition(".")[0]
    if stage in BY_NAME:
        known = f"the knobs of {stage}: {', '.join(stage_knobs(stage))}"
    else:
        known = f"knobs are stage.key with stage one of {', '.join(STAGE_NAMES)}, e.g. gopher_quality.min_words"
    return ConfigError(f"{what} {name!r} does not exist; {known}")


def apply(cfg: Config, moved: dict[str, Any]) -> Config:
    """``cfg`` with the knobs in ``moved`` (``stage.key`` or ``stage.key@lang`` -> value) set; validated
    like any config. A ``@lang`` knob sets that language's value in the stage's ``by_lang``.

    >>> from lab.config import Config
    >>> apply(Config(), {"gopher_quality.min_stop_words@de": 1}).stages.overrides("gopher_quality")
    {'de': {'min_stop_words': 1}}
    """
    d = to_dict(cfg)
    for name, value in moved.items():
        spec, lang = _spec_of(name)
        section = d["stages"][spec.stage]
        if lang is not None:
            section = section.setdefault("by_lang", {}).setdefault(lang, {})
        section[spec.key] = list(value) if isinstance(value, (tuple, list)) else value
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
    names = sorted(set(before) | set(after), key=lambda n: _order(n))
    out = []
    for n in names:  # a language without an override is held to the stage's own value
        b = before[n] if n in before else before[split_name(n)[0]]
        a = after[n] if n in after else after[split_name(n)[0]]
        if b != a or (n in before) != (n in after):
            out.append(Change(n, b, a, by[split_name(n)[0]].unit))
    return out


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
    return {k: v for k, v in moved.items() if split_name(k)[0] not in names}


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

    >>> encode({"gopher_quality.min_words": 80, "language.keep": ("en", "de"), "gopher_quality.min_words@de": 60})
    'language.keep=en,de&gopher_quality.min_words=80&gopher_quality.min_words@de=60'
    """
    for name in moved:
        _spec_of(name)
    order = sorted(moved, key=lambda n: _order(n))
    return "&".join(f"{n}={quote(_show(moved[n]), safe=',.-_')}" for n in order)


def _parse(spec: _Spec, raw: str, name: str | None = None) -> Any:
    """One link value as the knob's type; a ConfigError names the key, the value and what is allowed."""
    def bad(allowed: str) -> ConfigError:
        return ConfigError(f"link parameter {name or spec.name}={raw!r} is not allowed: must be {allowed}; "
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
    >>> decode("?gopher_quality.min_words=80&language.keep=en,de&gopher_quality.min_words@de=60", Config())
    {'gopher_quality.min_words': 80, 'language.keep': ('en', 'de'), 'gopher_quality.min_words@de': 60}
    """
    out: dict[str, Any] = {}
    for part in filter(None, text.removeprefix("?").split("&")):
        key, eq, raw = part.partition("=")
        key, raw = unquote(key), unquote(raw)
        if key in ignore:
            continue
        if not eq:
            raise ConfigError(f"link parameter {key!r} has no value; write it as {key}=value or remove it")
        spec, _ = _spec_of(key, "link parameter")
        if key in out:
            raise ConfigError(f"link parameter {key!r} is given twice; keep one of them")
        out[key] = _parse(spec, raw, key)
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
