"""The Mixture tab: a budget per bucket of the selection's kept documents, and what it makes of them.

Choose the dimensions (language, source, quality score), then type a budget beside each bucket — in
tokens, or as a weight of a total — and read, per bucket, the tokens before and after, the epochs
(above 1: its documents repeat; past 4 a warning), the documents written and the most copies of one
document. The mixture is the selection's (``Selection.set_mixture``): the Planner plans its tokens and
Export writes it under ``mixture:``, as ``corpus-lab run`` then applies it at materialize. The
numbers are ``lab.query.mixture_plan``'s, what ``corpus-lab mixture RUN --config FILE`` prints.
"""

from __future__ import annotations

import html
from concurrent.futures import Future

import pandas as pd
import panel as pn

from apps import format as fmt
from apps.dispatch import DETAILS, Dispatch, WhenShown
from apps.store import Selection
from apps.workarounds import HTML
from lab.errors import LabError
from lab.tokens.mixture import DIMENSIONS, MixtureConfig

KINDS = ("tokens", "weight")
COLUMNS = ("bucket", "documents", "tokens", "budget", "tokens after", "epochs", "documents written", "most copies")


def mixture_frame(buckets, mixture: MixtureConfig | None, report: list[dict] | None) -> pd.DataFrame:
    """The tab's table: each bucket with its documents and tokens, its budget in ``mixture`` (empty when it
    has none), and what the realized mixture ``report`` gives it.

    >>> import polars as pl
    >>> from lab.tokens.mixture import BucketTarget
    >>> b = pl.DataFrame({"bucket": ["en", "de"], "documents": [3, 1], "tokens": [300, 40]})
    >>> m = MixtureConfig(by=("lang",), buckets=(BucketTarget("de", tokens=80),))
    >>> r = [{"bucket": "de", "tokens_after": 80, "epochs": 2.0, "documents_after": 1, "max_repeats": 2},
    ...      {"bucket": "en", "tokens_after": 300, "epochs": 1.0, "documents_after": 3, "max_repeats": 1}]
    >>> mixture_frame(b, m, r).to_dict("records")[1]
    {'bucket': 'de', 'documents': 1, 'tokens': 40, 'budget': 80.0, 'tokens after': 80, 'epochs': 2.0, 'documents written': 1, 'most copies': 2}
    """
    budget = {b.bucket: (b.tokens if b.tokens is not None else b.weight) for b in (mixture.buckets if mixture else ())}
    done = {r["bucket"]: r for r in report or []}
    rows = []
    for name, docs, tokens in buckets.select("bucket", "documents", "tokens").iter_rows():
        r = done.get(name, {})
        rows.append({"bucket": name, "documents": int(docs), "tokens": int(tokens),
                     "budget": float(budget[name]) if name in budget else None,
                     "tokens after": r.get("tokens_after"), "epochs": r.get("epochs"),
                     "documents written": r.get("documents_after"), "most copies": r.get("max_repeats")})
    return pd.DataFrame(rows, columns=list(COLUMNS)).astype({"budget": object})  # no budget: an empty cell


def summary_html(plan_json: dict | None, warnings: list[str]) -> str:
    """The line above the table: tokens kept and in the mixture, copies written; the warnings in orange.

    >>> summary_html({"tokens_before": 1000, "tokens_after": 1500, "documents_written": 12}, ["w"])
    "<p style='margin:4px 0'><b>Mixture:</b> 1,000 tokens kept → <b>1,500</b> in the mixture (×1.5), 12 document copies written</p><p style='margin:2px 0;color:#a15c00'>⚠ w</p>"
    """
    if plan_json is None:
        return "<p style='margin:4px 0;color:#555'>No mixture: every kept document is written once.</p>"
    before, after = plan_json["tokens_before"], plan_json["tokens_after"]
    ratio = f" (×{after / before:.3g})" if before else ""
    line = (f"<p style='margin:4px 0'><b>Mixture:</b> {fmt.count(before)} tokens kept → <b>{fmt.count(after)}</b> in "
            f"the mixture{ratio}, {fmt.count(plan_json['documents_written'])} document copies written</p>")
    return line + "".join(f"<p style='margin:2px 0;color:#a15c00'>⚠ {html.escape(w)}</p>" for w in warnings)


class MixtureTab:
    def __init__(self, sel: Selection, dispatch: Dispatch, shown: WhenShown | None = None) -> None:
        self.sel, self.dispatch = sel, dispatch
        self.shown = shown or WhenShown()
        m = sel.config.mixture
        self.by = pn.widgets.MultiChoice(label="buckets by", options=list(DIMENSIONS), value=list(m.by) or ["lang"],
                                         width=300)
        self.edges = pn.widgets.TextInput(label="quality score edges", value=", ".join(f"{e:g}" for e in m.quality_edges),
                                          width=160)
        self.kind = pn.widgets.RadioButtonGroup(options=list(KINDS), value="weight" if m.weighted else "tokens",
                                                width=180)
        self.total = pn.widgets.FloatInput(label="total tokens (weights)", value=m.total_tokens, width=180)
        self.rest = pn.widgets.Select(label="buckets without a budget", options=["keep", "drop"], value=m.rest,
                                      width=180)
        self.rehydrate = pn.widgets.Checkbox(label="rehydrate (repeat by duplicate group, capped)", value=m.rehydrate)
        self.cap = pn.widgets.IntInput(label="rehydration cap", value=m.rehydrate_cap, start=1, width=120)
        self.seed = pn.widgets.IntInput(label="seed", value=m.seed, start=0, width=90)
        self.reset = pn.widgets.Button(label="the run's mixture", width=150)
        self.error = pn.pane.Alert(visible=False, alert_type="danger", sizing_mode="stretch_width")
        self.summary = HTML("", name="mixture summary", sizing_mode="stretch_width")
        self.table = pn.widgets.Tabulator(mixture_frame(sel.mixture_buckets(tuple(self.by.value)), None, None),
                                          show_index=False, sizing_mode="stretch_width", height=420, name="mixture",
                                          editors={c: None for c in COLUMNS if c != "budget"},
                                          formatters={"budget": {"type": "plaintext"},
                                                      **{c: {"type": "money", "thousand": ",", "precision": 0}
                                                         for c in ("tokens after", "documents written")}})
        self.table.on_edit(lambda e: self._apply())
        for w in (self.kind, self.total, self.rest, self.rehydrate, self.cap, self.seed):
            w.param.watch(lambda e: self._apply(), "value")
        for w in (self.by, self.edges):
            w.param.watch(lambda e: self._regroup(), "value")
        self.reset.on_click(lambda _: self._use_run())
        sel.param.watch(lambda e: self.shown.run(self.refresh), ["moved", "mixture"])
        help_ = HTML("<p style='margin:2px 0;color:#555'>Type a budget beside a bucket (tokens, or a weight; "
                           "weights sum to 1 and buckets without one are left out). Epochs above 1 repeat the "
                           "bucket's documents; past 4 they are worth much less than new data (Muennighoff et al. "
                           "2023). Export writes the mixture; the Planner plans its tokens.</p>",
                           sizing_mode="stretch_width")
        self.view = pn.Column(pn.Row(self.by, self.edges, self.kind, self.total, self.rest),
                              pn.Row(self.rehydrate, self.cap, self.seed, self.reset), help_, self.error, self.summary,
                              self.table, name="Mixture", sizing_mode="stretch_width")
        self.shown.run(self.refresh)

    def report(self, message: str) -> None:
        self.error.object, self.error.visible = message, True

    def _config(self) -> dict:
        """The mixture the controls and the table's budgets say, as plain config data."""
        df = self.table.value
        key = "weight" if self.kind.value == "weight" else "tokens"
        buckets = [{"bucket": b, key: (float(v) if key == "weight" else int(v))}
                   for b, v in zip(df["bucket"], df["budget"]) if v is not None and not pd.isna(v)]
        edges = [float(x) for x in self.edges.value.replace(";", ",").split(",") if x.strip()]
        out = {"by": list(self.by.value), "quality_edges": edges or [0.5], "buckets": buckets, "seed": int(self.seed.value or 0),
               "rehydrate": bool(self.rehydrate.value), "rehydrate_cap": int(self.cap.value or 1)}
        if key == "weight":
            out["total_tokens"] = int(self.total.value) if self.total.value else None
        else:
            out["rest"] = self.rest.value
        return out

    def _apply(self) -> None:
        try:
            self.sel.set_mixture(self._config())
        except (LabError, ValueError) as e:
            self.report(str(e))
            return
        self.error.visible = False
        self.refresh()

    def _regroup(self) -> None:
        """Other dimensions: other buckets, no budgets yet (the run's mixture until some are typed)."""
        self.table.value = mixture_frame(self._buckets(), None, None)
        self._apply()

    def _buckets(self):
        edges = tuple(float(x) for x in self.edges.value.replace(";", ",").split(",") if x.strip()) or (0.5,)
        return self.sel.mixture_buckets(tuple(self.by.value) or ("lang",), edges)

    def _use_run(self) -> None:
        self.sel.set_mixture(None)
        m = self.sel.config.mixture
        self.by.value = list(m.by) or ["lang"]

    def refresh(self) -> None:
        cfg = self.sel.config
        by = tuple(self.by.value) or ("lang",)

        def compute():
            buckets = self._buckets()
            plan = self.sel.mixture_plan(cfg) if cfg.mixture.active and tuple(cfg.mixture.by) == by else None
            return buckets, plan

        def show(fut: Future) -> None:
            try:
                buckets, plan = fut.result()
            except LabError as e:
                self.report(str(e))
                return
            self.table.value = mixture_frame(buckets, cfg.mixture if plan is not None else None,
                                             plan.report if plan is not None else None)
            self.summary.object = summary_html(plan.to_json() if plan is not None else None,
                                               plan.warnings if plan is not None else [])

        self.dispatch.submit("mixture", compute, show, pool=DETAILS)
