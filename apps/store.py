"""The dashboard's store: one session's selection over a run, and everything derived from it.

``Selection`` (a ``param.Parameterized``) holds what the user chose: the knobs moved away from the
run's config, the selection before the last change, the unit and split the numbers are read in, the
user's name. It derives the config, the funnel, the change's cost, the diff against the run's config
and the link that restores it. Every tab reads this one object, so all tabs follow the same selection.
The tab models (``Viewer``, ``Clusters``, ``Planner``) hold only what a tab adds to it (a page, an open
cluster, a token target).

No widgets and no SQL here: every number comes from ``lab`` calls, so the store is tested as plain
objects, and notebooks can drive the same objects.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import param
import polars as pl

from lab import dedup, query
from lab.config import Config, build, dumps, load, to_dict
from lab.errors import ConfigError
from lab.plan import throughput as plan
from lab.quality import labels
from lab.select import knobs
from lab.stages import STAGE_NAMES, near_dedup
from lab.tokens.mixture import MixtureConfig

UNITS = ("docs", "bytes", "tokens")
SPLITS = ("(none)", "lang", "source")
ALL_LANGUAGES = "(all)"
LANG_PARAM = "lang"  # the link's parameter naming the chosen language
GRID = near_dedup.GRID
CLUSTER_SORTS = query.CLUSTER_SORTS  # what the cluster table can be sorted by


def curve(f: pl.DataFrame) -> dict[str, list]:
    """The funnel chart's columns: ``stage`` and, per unit, the share of the input still in after it.

    >>> f = pl.DataFrame({"stage": ["a", "b"], "docs_in": [4, 4], "docs_out": [4, 1]})
    >>> curve(f)
    {'stage': ['a', 'b'], 'docs': [1.0, 0.25]}
    """
    out = {"stage": f["stage"].to_list()}
    for unit in UNITS:
        if f"{unit}_out" in f.columns:
            n = f[f"{unit}_in"][0] if f.height else 0
            out[unit] = (f[f"{unit}_out"] / n).to_list() if n else [1.0] * f.height
    return out


def retention(f: pl.DataFrame) -> dict[str, float]:
    """Documents, bytes (and tokens) kept over all stages of an ungrouped funnel: the retention product.

    >>> retention(pl.DataFrame({"docs_in": [4, 4], "docs_out": [4, 1], "bytes_in": [8, 8], "bytes_out": [8, 2]}))
    {'docs': 0.25, 'bytes': 0.25}
    """
    first, last = f.row(0, named=True), f.row(-1, named=True)
    return {u: (last[f"{u}_out"] / first[f"{u}_in"] if first[f"{u}_in"] else 1.0)
            for u in UNITS if f"{u}_in" in f.columns}


@dataclass(frozen=True)
class FunnelView:
    """What the Funnel tab shows for one config (``Selection.view``)."""

    config_hash: str  # lab.config.Config.config_hash of the thresholds it answers for
    funnel: pl.DataFrame  # the table: split by language or source when asked
    retention: dict[str, float]  # unit -> share kept over all stages (whole run)
    curve: dict[str, list]  # the chart's columns (``curve``), whole run
    kept: dict[str, int]  # unit -> amount kept (whole run)
    lang: str | None = None  # the language whose documents these are (None: every language)


class Selection(param.Parameterized):
    """One session's thresholds over a run, and what they give."""

    moved = param.Dict(default={}, doc="knob name -> value the user set (knobs at the run's value are absent)")
    previous = param.Dict(default={}, doc="``moved`` before the last change: what 'newly dropped / kept' compare with")
    changed = param.List(default=[], doc="the knob names the last change moved")
    unit = param.Selector(objects=list(UNITS), default="docs", doc="the unit histograms and changes are read in")
    by = param.Selector(objects=list(SPLITS), default="(none)", doc="split the funnel table by language or source")
    lang = param.Selector(objects=[ALL_LANGUAGES], default=ALL_LANGUAGES,
                          doc="one language's thresholds, funnel and histograms (its documents only), or every language's")
    user = param.String(default="", doc="who labels (from --basic-auth, or typed in)")
    labels_changed = param.Event(doc="a label was stored (the precision table follows)")
    mixture = param.ClassSelector(class_=MixtureConfig, default=None, allow_None=True,
                                  doc="the mixture chosen on the Mixture tab (None: the run's config's)")

    def __init__(self, run_dir: str | Path, **params: Any) -> None:
        lang = params.pop("lang", ALL_LANGUAGES)
        super().__init__(**params)
        self.run_dir = Path(run_dir)
        self.run = query.open_run(self.run_dir, in_memory=True)
        self.base: Config = load(self.run_dir / "config.yaml")
        self._configs: dict[tuple, Config] = {}
        self.languages: list[tuple[str, int]] = query.languages(self.run)  # (code, documents), most first
        self.param.lang.objects = [ALL_LANGUAGES, *(code for code, _ in self.languages)]
        self.lang = lang

    # --- inputs -----------------------------------------------------------------------------------

    @property
    def language(self) -> str | None:
        """The language chosen (None: every language)."""
        return None if self.lang == ALL_LANGUAGES else self.lang

    def knobs(self, lang: str | None = None) -> list[knobs.Knob]:
        """The knobs of the selection; the thresholds that may differ by language are ``lang``'s (default:
        the chosen language's) — named ``stage.key@lang`` (``lab.select.knobs``)."""
        langs = tuple(code for code, _ in self.languages)
        return knobs.knobs(self.config, query.signal_ranges(self.run), langs,
                           lang=self.language if lang is None else lang)

    def values(self) -> dict[str, Any]:
        """Every knob's value in the selection, the chosen language's thresholds included (``lab.select.knobs.values``)."""
        return knobs.values(self.config, lang=self.language)

    def load_config(self, cfg: Config | str | Path) -> None:
        """Start from another config's thresholds (a calibrated config, ``corpus-lab calibrate``): its knobs,
        per-language ones included, become the moved ones. A config whose stages differ from the run's in
        more than thresholds (signature parameters, word lists) is refused: its signals would need a run."""
        if not isinstance(cfg, Config):
            cfg = load(cfg)
        moved = {c.name: c.after for c in knobs.diff(self.base, cfg)}
        got = self._config_of(moved)
        mine, theirs = to_dict(got)["stages"], to_dict(cfg)["stages"]
        other = _differences(mine, theirs, "stages")
        if other:
            raise ConfigError(f"the config differs from the run's in more than thresholds: {', '.join(other[:6])}"
                              f"{' ...' if len(other) > 6 else ''}; those change the signals: run it "
                              "(corpus-lab run --config FILE) and serve that run, or set them as the run's")
        self._commit(moved)

    def set(self, name: str, value: Any) -> None:
        """Move one knob (validated: a bad value raises ConfigError and changes nothing)."""
        self.update({name: value})

    def update(self, values: dict[str, Any]) -> None:
        """Move several knobs as one change (validated together: all or nothing). A knob set back to the
        run's value is no longer moved (a language's threshold: to the run's value for that language)."""
        moved = dict(self.moved)
        for name, value in values.items():
            moved[name] = tuple(value) if isinstance(value, list) else value
        at_run = knobs.values(self.base)
        for name in values:  # back at the run's value: not a move
            stage_key, lang = knobs.split_name(name)
            if lang is None or name in at_run:
                back = _same(knobs.value_of(self.base, name), moved[name])
            else:  # a language the run has no override for follows the stage's value while that is not moved
                back = stage_key not in moved and _same(at_run[stage_key], moved[name])
            if back:
                moved.pop(name)
        self._commit(moved)

    def _commit(self, moved: dict[str, Any]) -> None:
        """Make ``moved`` the selection (validated first: a ConfigError changes nothing)."""
        self._config_of(moved)  # raises ConfigError before anything changes
        if moved == self.moved:
            return
        changed = sorted(n for n in set(moved) | set(self.moved) if moved.get(n) != self.moved.get(n))
        with param.parameterized.batch_call_watchers(self):
            self.previous, self.changed = dict(self.moved), changed
            self.moved = moved

    def reset(self, stage: str | None = None) -> None:
        """Every knob back to the run's config, or only ``stage``'s (its per-language values too)."""
        if stage is not None and stage not in STAGE_NAMES:
            raise ConfigError(f"unknown stage {stage!r}; known: {', '.join(STAGE_NAMES)}")
        self._commit(knobs.reset(self.moved, stage=stage))

    def restore(self, link: str) -> None:
        """Apply the state of a link (``url``): the knobs it names, the others at the run's values, and its
        language (every language without one)."""
        parts = [p for p in link.removeprefix("?").split("&") if p]
        langs = [p.partition("=")[2] for p in parts if p.startswith(f"{LANG_PARAM}=")]
        lang = langs[-1] if langs else ALL_LANGUAGES
        if lang not in self.param.lang.objects:
            raise ConfigError(f"link parameter {LANG_PARAM}={lang!r} is not allowed: must be one of the run's "
                              f"languages: {', '.join(code for code, _ in self.languages)}; fix it or remove it")
        moved = knobs.decode(link, self.base, ignore=(LANG_PARAM,)) if link else {}
        self._commit(moved)
        self.lang = lang

    # --- derived ----------------------------------------------------------------------------------

    def _config_of(self, moved: dict[str, Any]) -> Config:
        key = (tuple(sorted(moved.items(), key=lambda kv: kv[0])), self.mixture)
        cfg = self._configs.get(key)
        if cfg is None:
            cfg = knobs.apply(self.base, moved)
            if self.mixture is not None:
                cfg = dataclasses.replace(cfg, mixture=self.mixture)
            if len(self._configs) > 64:
                self._configs.clear()
            self._configs[key] = cfg
        return cfg

    @property
    def config(self) -> Config:
        return self._config_of(self.moved)

    @property
    def previous_config(self) -> Config:
        return self._config_of(self.previous)

    @property
    def split(self) -> str | None:
        return None if self.by == "(none)" else self.by

    def funnel(self, by: str | None = None, *, config: Config | None = None) -> pl.DataFrame:
        """The funnel under the current thresholds (or under ``config``, a snapshot of them)."""
        return query.funnel(self.run, self.config if config is None else config, by=by)

    def contamination(self, config: Config | None = None) -> pl.DataFrame | None:
        """Per evaluation set, the run's documents with at least the selection's ``min_matches`` matching n-grams
        and their tokens (``lab.query.contamination``, what ``corpus-lab contamination`` prints; None without sets)."""
        cfg = self.config if config is None else config
        return query.contamination(self.run, cfg) if cfg.stages.decontamination.eval_sets else None

    def urls(self) -> pl.DataFrame:
        """The run's documents without a URL, with one, and per blocklist category on it (``lab.query.urls``)."""
        return query.urls(self.run)

    def view(self, by: str | None = None, *, config: Config | None = None, lang: str | None = None) -> FunnelView:
        """Everything the funnel table and chart show for the current thresholds (or ``config``); ``lang``:
        that language's documents only (the table split by source is then the whole run's)."""
        cfg = self.config if config is None else config
        if lang is not None:
            by_lang = self.funnel("lang", config=cfg)
            whole = by_lang.filter(pl.col("lang") == lang).drop("lang")
            if whole.height == 0:
                raise ConfigError(f"language {lang!r} has no documents in this run; the run's languages: "
                                  f"{', '.join(code for code, _ in self.languages)}")
            f = by_lang if by == "lang" else whole if by is None else self.funnel(by, config=cfg)
        else:
            f = self.funnel(by, config=cfg)
            whole = f if by is None else self.funnel(config=cfg)
        last = whole.row(-1, named=True)
        return FunnelView(cfg.config_hash(), f, retention(whole), curve(whole),
                          {u: last[f"{u}_out"] for u in UNITS if f"{u}_out" in whole.columns}, lang)

    def retention(self) -> dict[str, float]:
        return retention(self.funnel())

    def change(self, *, before: Config | None = None, after: Config | None = None) -> dict:
        """What the last change newly drops and newly keeps (``lab.query.change``)."""
        return query.change(self.run, self.previous_config if before is None else before,
                            self.config if after is None else after)

    def diff(self) -> list:
        """The knobs that differ from the run's config (``lab.select.knobs.diff``)."""
        return knobs.diff(self.base, self.config)

    def url(self) -> str:
        """The query string that restores this selection (``restore``): the moved knobs, then the language."""
        return "&".join(x for x in (knobs.encode(self.moved),
                                    f"lang={self.lang}" if self.language else "") if x)

    def prepare(self, signals: list[str]) -> None:
        """Make ahead what the first move of these signals' thresholds needs (``lab.query.prepare``)."""
        query.prepare(self.run, signals)

    def histogram(self, signal: str, *, config: Config | None = None, bins: int = 40) -> pl.DataFrame:
        return query.histogram(self.run, self.config if config is None else config, signal, bins=bins)

    def histograms(self, signals: list[str], *, config: Config | None = None,
                   lang: str | None = None) -> dict[str, pl.DataFrame]:
        """Several signals' histograms, one query per stage (the open card's); ``lang``: over that language's
        documents only."""
        return query.histograms(self.run, self.config if config is None else config, signals, lang=lang)

    def export_yaml(self, config: Config | None = None) -> str:
        """The chosen thresholds as the config file ``corpus-lab run --config`` reads, under a new run name
        (a batch run never lands on the explored run)."""
        cfg = self.config if config is None else config
        return dumps(dataclasses.replace(cfg, name=self.run_name(cfg)))

    def run_name(self, config: Config | None = None) -> str:
        return knobs.run_name(self.base, self.config if config is None else config)

    def export_command(self, path: str = "corpus-lab-config.yaml") -> str:
        return f"corpus-lab run --config {path} --mode batch"

    # --- the mixture ----------------------------------------------------------------------------------

    def set_mixture(self, mixture: MixtureConfig | dict | None) -> None:
        """Choose the mixture (a ``MixtureConfig`` or its plain data, as under ``mixture:`` in a config; None:
        the run's); checked against the run first: a bucket no kept document is in is a ConfigError and
        changes nothing."""
        if isinstance(mixture, dict):
            mixture = build(MixtureConfig, mixture, "mixture")
        if mixture is not None:
            query.mixture_plan(self.run, dataclasses.replace(self.config, mixture=mixture))
        self.mixture = None if mixture == self.base.mixture else mixture

    def mixture_plan(self, config: Config | None = None):
        """The selection's mixture realized over its kept documents (``lab.query.mixture_plan``)."""
        return query.mixture_plan(self.run, self.config if config is None else config)

    def mixture_buckets(self, by: tuple[str, ...], quality_edges: tuple[float, ...] = (0.5,)) -> pl.DataFrame:
        """The buckets of ``by`` over the selection's kept documents: bucket, documents, tokens (what a budget
        is set against)."""
        cfg = dataclasses.replace(self.config, mixture=MixtureConfig(by=by, quality_edges=quality_edges))
        rows = query.mixture_rows(self.run, cfg)
        return (rows.group_by("bucket").agg(documents=pl.len(), tokens=pl.col("n_tokens").sum())
                .sort("tokens", descending=True))

    # --- labels -----------------------------------------------------------------------------------

    def label(self, doc_id: int, label: str, note: str = "") -> dict:
        """Store one label by this session's user (``lab.quality.labels.add``)."""
        if not self.user.strip():
            raise ConfigError("no user name: type your name in the 'labelled by' field (or serve with --basic-auth) "
                              "before labelling")
        return labels.add(self.run_dir, doc_id, label, user=self.user.strip(), note=note)

    def precision(self, config: Config | None = None) -> pl.DataFrame:
        return query.stage_precision(self.run, self.config if config is None else config)

    def labels(self) -> pl.DataFrame:
        return query.labels(self.run)

    def label_problems(self) -> list:
        return query.label_problems(self.run)

    def labelled_drops(self, stage: str, label: str, config: Config | None = None) -> pl.DataFrame:
        """The labelled documents ``stage`` drops under the thresholds (or ``config``)."""
        return query.labelled_drops(self.run, self.config if config is None else config, stage, label=label)

    # --- the run's tokens: the same for every threshold ---------------------------------------------

    def fertility(self, by: str) -> pl.DataFrame:
        return query.fertility(self.run, by)

    def fertility_comparison(self) -> pl.DataFrame:
        return query.fertility_comparison(self.run)

    def packing(self) -> pl.DataFrame:
        return query.packing(self.run)

    def loader_telemetry(self) -> pl.DataFrame:
        return query.loader_telemetry(self.run)

    def telemetry_steps(self, name: str) -> pl.DataFrame:
        return query.telemetry_steps(self.run, name)

    def train_quality(self, **train: Any) -> dict:
        """Fit a quality classifier from the run's labels (``lab.quality.train.train``, what
        ``corpus-lab train-quality RUN`` runs); returns its report."""
        from lab.quality import train as quality_train

        return quality_train.train(self.run_dir, cfg=quality_train.TrainConfig(**train))


def _differences(a: Any, b: Any, path: str) -> list[str]:
    """The dotted paths where two plain-data trees differ.

    >>> _differences({"x": {"y": 1, "z": 2}}, {"x": {"y": 1, "z": 3}}, "stages")
    ['stages.x.z']
    """
    if isinstance(a, dict) and isinstance(b, dict):
        return [p for k in dict.fromkeys([*a, *b]) for p in _differences(a.get(k), b.get(k), f"{path}.{k}")]
    return [] if a == b else [path]


def _same(a: Any, b: Any) -> bool:
    """Whether two knob values are one value (lists and tuples alike; a switch is never a number).

    >>> _same(("en",), ["en"]), _same(50, 50.0), _same(True, 1)
    (True, True, False)
    """
    if isinstance(a, (list, tuple)) or isinstance(b, (list, tuple)):
        return isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and tuple(a) == tuple(b)
    return a == b and isinstance(a, bool) == isinstance(b, bool)


# --- the tab models ---------------------------------------------------------------------------------


@dataclass
class Viewer:
    """The document viewer: which documents (a view of the selection), filters, a seeded order, a page."""

    sel: Selection
    view: str = "dropped"  # one of lab.query.VIEWS
    stage: str | None = "gopher_quality"  # dropped view: only this stage's drops (None: every drop)
    reason: str | None = None
    source: str | None = None
    lang: str | None = None
    doc_ids: tuple[int, ...] | None = None  # only these (the labelled-good drops of a stage)
    seed: int = 0
    page: int = 0
    page_size: int = 20

    def _args(self, config: Config | None = None) -> dict:
        return dict(view=self.view, stage=self.stage if self.view == "dropped" else None,
                    previous=self.sel.previous_config if self.view.startswith("newly") else None,
                    reason=self.reason, source=self.source, lang=self.lang,
                    doc_ids=list(self.doc_ids) if self.doc_ids is not None else None)

    def count(self, config: Config | None = None) -> int:
        return query.document_count(self.sel.run, self.sel.config if config is None else config, **self._args())

    def pages(self, total: int) -> int:
        return max(1, math.ceil(total / self.page_size))

    def documents(self, config: Config | None = None) -> tuple[pl.DataFrame, int]:
        """The current page (its number clamped to the pages there are) and the number of documents."""
        cfg = self.sel.config if config is None else config
        total = query.document_count(self.sel.run, cfg, **self._args())
        self.page = min(max(self.page, 0), self.pages(total) - 1)
        page = query.documents(self.sel.run, cfg, **self._args(), seed=self.seed,
                               offset=self.page * self.page_size, limit=self.page_size, with_text=False)
        if page.height:  # the first document opens with the page; the others' texts when opened
            page = self.with_text(page, [page["doc_id"][0]])
        return page, total

    def with_text(self, page: pl.DataFrame, doc_ids: list[int]) -> pl.DataFrame:
        """``page`` with the texts of ``doc_ids`` filled in (read from the run's docs/)."""
        texts = query.document_texts(self.sel.run, doc_ids)
        filled = [texts.get(d, t) for d, t in zip(page["doc_id"].to_list(), page["text"].to_list())]
        return page.with_columns(pl.Series("text", filled, dtype=pl.Utf8))

    def filters(self, config: Config | None = None) -> dict[str, list]:
        a = self._args()
        return query.document_filters(self.sel.run, self.sel.config if config is None else config,
                                      view=a["view"], stage=a["stage"], previous=a["previous"])


CLUSTER_PAGE = 20


@dataclass
class Clusters:
    """The near-duplicate cluster browser over the selection: its threshold, a page, one open cluster
    and the two members compared."""

    sel: Selection
    threshold: float | None = None  # None: the selection's near_dedup threshold
    sort: str = "size"
    descending: bool = True
    survivors_only: bool = False  # only clusters with 2+ members alive before near_dedup (what it decides)
    page: int = 0
    page_size: int = CLUSTER_PAGE
    open_cluster: int | None = None
    pair: tuple[int, int] | None = None  # the two members' doc ids compared side by side

    @property
    def at(self) -> float:
        return self.sel.config.stages.near_dedup.threshold if self.threshold is None else self.threshold

    def count(self) -> dict[str, int]:
        return query.cluster_count(self.sel.run, self.at, config=self.sel.config, survivors_only=self.survivors_only,
                                   page_size=self.page_size)

    def clusters(self) -> tuple[pl.DataFrame, dict[str, int]]:
        """The current page (clamped into the pages there are) and the counts."""
        n = self.count()
        self.page = query.page_bounds(self.page, n["pages"])
        df = query.clusters(self.sel.run, self.at, config=self.sel.config, sort=self.sort, descending=self.descending,
                            survivors_only=self.survivors_only, offset=self.page * self.page_size, limit=self.page_size)
        return df, n

    def members(self) -> pl.DataFrame:
        if self.open_cluster is None:
            return pl.DataFrame()
        return query.cluster_members(self.sel.run, self.open_cluster, self.at, config=self.sel.config)

    def compare(self, members: pl.DataFrame | None = None) -> dict:
        """The two compared members (the chosen pair, else the kept one and the first other), their
        pair's Jaccard, and the word diff that ignores whitespace."""
        m = self.members() if members is None else members
        if m.height < 2:
            return {}
        ids = m["doc_id"].to_list()
        a, b = self.pair if self.pair and all(x in ids for x in self.pair) else _default_pair(m)
        ta, tb = (m.filter(pl.col("doc_id") == x)["text"][0] for x in (a, b))
        j = query.pair_jaccard(self.sel.run, a, b)
        return {"a": a, "b": b, "jaccard": j, "ops": dedup.diff(ta, tb)}

    def s_curve(self) -> tuple[Any, Any]:
        cfg = self.sel.base.stages.near_dedup
        return dedup.s_curve_points(cfg.bands, cfg.rows)

    def recall(self) -> float:
        """The expected pair recall at ``at`` with the run's bands x rows: a point of ``s_curve``."""
        return near_dedup.recall(self.sel.base.stages.near_dedup, self.at)


def _default_pair(m: pl.DataFrame) -> tuple[int, int]:
    ids = m["doc_id"].to_list()
    kept = [d for d, s in zip(ids, m["status"].to_list()) if s == "kept"] if "status" in m.columns else []
    a = kept[0] if kept else ids[0]
    return a, next(d for d in ids if d != a)


@dataclass
class Planner:
    """The throughput planner over the selection's funnel (retention per stage, bytes per token of the
    kept documents) and the run's measured costs."""

    sel: Selection
    token_target: float = 1e12
    days: float = 30.0
    gpus: int = 256
    deadline_days: float = 7.0
    bytes_per_token_on_disk: int = 4
    prices: plan.Prices = field(default_factory=plan.Prices)
    margin: float = plan.MARGIN  # raw input provisioned per raw byte the funnel needs
    storage_months: float = 1.0
    corpus_tb: float = 100.0  # a corpus size (raw TB) to price ...
    cores: int = 512  # ... on this many cores
    preset: str = "deepseek-v3-class"
    measured: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.measured = plan.from_manifest(self.sel.run_dir)

    def inputs(self, config: Config | None = None) -> dict:
        """What the plan is computed from: the run's measurements with the funnel of ``config`` (default:
        the selection's)."""
        cfg = self.sel.config if config is None else config
        return plan.from_funnel(self.sel.funnel(config=cfg), self.measured)

    def result(self, config: Config | None = None) -> dict:
        cfg = self.sel.config if config is None else config
        m = self.inputs(cfg)
        return plan.plan(self.token_target, self.days, self.gpus, retentions=m["retention"]["bytes"],
                         bytes_per_token=m["bytes_per_token"] or 4.0,
                         stage_cpu_seconds_per_byte=m["stage_cpu_seconds_per_byte"],
                         deadline_days=self.deadline_days, bytes_per_token_on_disk=self.bytes_per_token_on_disk,
                         raw_per_text_byte=m.get("raw_per_text_byte", 1.0), mixture_factor=self.mixture_factor(cfg))

    def mixture_factor(self, config: Config) -> float:
        """The mixture's tokens per kept token (1 without a mixture, or with nothing kept)."""
        if not config.mixture.active:
            return 1.0
        j = self.sel.mixture_plan(config).to_json()
        return j["tokens_after"] / j["tokens_before"] if j["tokens_before"] and j["tokens_after"] else 1.0

    def against_run(self, config: Config | None = None) -> dict:
        """The plan of the selection beside the plan of the run's own config, and what differs; the
        selection's priced (``lab.plan.throughput.priced``), a corpus size's days on ``cores``, and the published
        funnel ``preset`` for the same target beside it."""
        mine, theirs = self.result(config), self.result(self.sel.base)
        m = self.inputs(config)
        costs = m["stage_cpu_seconds_per_byte"]
        preset = plan.plan(self.token_target, self.days, self.gpus, retentions=plan.preset_retentions(self.preset),
                           bytes_per_token=mine["bytes_per_token"], stage_cpu_seconds_per_byte={},
                           deadline_days=self.deadline_days, bytes_per_token_on_disk=self.bytes_per_token_on_disk,
                           raw_per_text_byte=m.get("raw_per_text_byte", 1.0), mixture_factor=mine["mixture_factor"])
        corpus = self.corpus_tb * 1e12
        return {"selection": mine, "run": theirs, "differs": plan.compare(mine, theirs),
                "priced": plan.priced(mine, self.prices, margin=self.margin, gpus=self.gpus, days=self.days,
                                      storage_months=self.storage_months,
                                      bytes_per_token_on_disk=self.bytes_per_token_on_disk),
                "corpus": {"raw_bytes": corpus, "cores": self.cores,
                           "days": plan.days_to_curate(corpus, self.cores, costs) if costs else None,
                           "tokens": corpus / mine["raw_bytes"] * self.token_target},
                "preset": {"name": self.preset, "plan": preset}}
