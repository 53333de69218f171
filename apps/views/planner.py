"""The Planner tab: what the selection means at scale — raw input, cores, bandwidth — computed from
the session's current funnel (per-stage retention, bytes per token of the kept documents) and the
run's measured costs, and what differs from the plan of the run's own config."""

from __future__ import annotations

import html
from concurrent.futures import Future

import panel as pn

from apps import format as fmt
from apps.dispatch import DETAILS, Dispatch, WhenShown
from apps.store import Planner, Selection
from apps.workarounds import HTML
from lab.errors import LabError


def plan_markdown(r: dict, deadline_days: float) -> str:
    t, c = r["throughput"], r["cores"]
    mix = r.get("mixture_factor", 1.0)
    mixture = (f" The mixture makes **{mix:.3g}** tokens of each kept token (Mixture tab)." if mix != 1.0 else "")
    return (f"Retention **{fmt.share(r['retention_product'])}** of the bytes, **{r['bytes_per_token']:.2f}** bytes per "
            f"token (kept documents), **{c['bytes_per_s_per_core'] / 1e6:.2f} MB/s** per core over all stages.{mixture}\n\n"
            f"| | |\n|---|---:|\n| raw bytes needed | {r['raw_bytes'] / 1e12:,.1f} TB |\n"
            f"| kept bytes | {r['kept_bytes'] / 1e12:,.1f} TB |\n"
            f"| tokens/s overall | {t['tokens_per_s']:,.0f} |\n| tokens/s per GPU | {t['per_gpu']:,.0f} |\n"
            f"| read bandwidth | {t['read_bytes_per_s'] / 1e6:,.1f} MB/s |\n"
            f"| cores to curate in {deadline_days:g} days | {c['cores']:,.0f} |")


def priced_markdown(a: dict) -> str:
    """The dollars of the selection's plan, a corpus size's days on the cores given, and a published funnel
    for the same target beside the selection's.

    >>> a = {"priced": {"margin": 2.0, "raw_bytes_provisioned": 4e13, "cpu_hours": 1000.0, "shard_bytes": 4e12,
    ...      "dollars": {"curation": 50.0, "training": 4800.0, "storage": 1012.0, "total": 5862.0},
    ...      "prices": {"cpu_hour": 0.05, "gpu_hour": 2.5, "storage_tb_month": 23.0}},
    ...      "corpus": {"raw_bytes": 1e14, "cores": 512, "days": 2.5, "tokens": 4.4e12},
    ...      "selection": {"raw_bytes": 2e13, "retention_product": 0.25},
    ...      "preset": {"name": "deepseek-v3-class", "plan": {"raw_bytes": 4.2e14, "retention_product": 0.0095}}}
    >>> print(priced_markdown(a).splitlines()[4])
    | raw input to provision (×2) | 40.0 TB |
    """
    p, c, pre = a["priced"], a["corpus"], a["preset"]
    d = p["dollars"]
    days = f"{c['days']:,.2f} days" if c["days"] is not None else "no measured cost"
    return (f"**Cost** at ${p['prices']['cpu_hour']:g}/core-hour, ${p['prices']['gpu_hour']:g}/GPU-hour, "
            f"${p['prices']['storage_tb_month']:g}/TB-month:\n\n"
            f"| | |\n|---|---:|\n| raw input to provision (×{p['margin']:g}) | {p['raw_bytes_provisioned'] / 1e12:,.1f} TB |\n"
            f"| curation: {p['cpu_hours']:,.0f} core-hours | ${d['curation']:,.0f} |\n"
            f"| training | ${d['training']:,.0f} |\n| storage (raw input + shards) | ${d['storage']:,.0f} |\n"
            f"| **total** | **${d['total']:,.0f}** |\n\n"
            f"A corpus of **{c['raw_bytes'] / 1e12:,.0f} TB** raw takes **{days}** on {c['cores']:,} cores and gives "
            f"~{c['tokens']:,.3g} tokens under this selection.\n\n"
            f"| funnel | kept bytes of raw | raw bytes for the target |\n|---|---:|---:|\n"
            f"| this selection (measured on the run) | {fmt.share(a['selection']['retention_product'])} | "
            f"{a['selection']['raw_bytes'] / 1e12:,.1f} TB |\n"
            f"| {pre['name']} (published) | {fmt.share(pre['plan']['retention_product'])} | "
            f"{pre['plan']['raw_bytes'] / 1e12:,.1f} TB |")


def differs_html(a: dict) -> str:
    """What the selection's plan changes against the plan of the run's own config (``lab.plan.throughput.compare``)."""
    if not a["differs"]:
        return "<p style='color:#555'>The selection plans the same as the run's config.</p>"
    items = "".join(f"<li>{html.escape(str(d))}</li>" for d in a["differs"])
    return f"<div style='color:#a15c00'><b>Differs from the run's config:</b><ul style='margin:2px 0'>{items}</ul></div>"


class PlannerTab:
    def __init__(self, sel: Selection, dispatch: Dispatch, shown: WhenShown | None = None) -> None:
        self.sel, self.dispatch = sel, dispatch
        self.shown = shown or WhenShown()  # hidden: follows the selection when opened
        self.model = Planner(sel)
        m = self.model
        self.target = pn.widgets.FloatInput(label="token target", value=m.token_target, start=1, width=260)
        self.days = pn.widgets.FloatInput(label="training days", value=m.days, start=0.01, width=260)
        self.gpus = pn.widgets.IntInput(label="GPUs", value=m.gpus, start=1, width=260)
        self.deadline = pn.widgets.FloatInput(label="days to curate the corpus", value=m.deadline_days, start=0.01,
                                              width=260)
        self.disk = pn.widgets.IntInput(label="bytes per token on disk", value=m.bytes_per_token_on_disk, start=1,
                                        width=260)
        self.cpu_price = pn.widgets.FloatInput(label="$ per core-hour", value=m.prices.cpu_hour, start=0, width=125)
        self.gpu_price = pn.widgets.FloatInput(label="$ per GPU-hour", value=m.prices.gpu_hour, start=0, width=125)
        self.storage_price = pn.widgets.FloatInput(label="$ per TB-month", value=m.prices.storage_tb_month, start=0,
                                                   width=125)
        self.months = pn.widgets.FloatInput(label="months stored", value=m.storage_months, start=0, width=125)
        self.margin = pn.widgets.FloatInput(label="raw input margin (×)", value=m.margin, start=1, width=125)
        self.corpus = pn.widgets.FloatInput(label="a corpus of (raw TB)", value=m.corpus_tb, start=0.001, width=125)
        self.cores = pn.widgets.IntInput(label="on cores", value=m.cores, start=1, width=125)
        self.differs = HTML("", sizing_mode="stretch_width", name="differs")
        self.out = pn.pane.Markdown(name="plan", sizing_mode="stretch_width")
        self.priced = pn.pane.Markdown(name="priced", sizing_mode="stretch_width")
        self.chart = pn.pane.Matplotlib(dpi=72, height=280, tight=True)
        prices = (self.cpu_price, self.gpu_price, self.storage_price, self.months, self.margin, self.corpus, self.cores)
        for w in (self.target, self.days, self.gpus, self.deadline, self.disk, *prices):
            w.param.watch(lambda e: self.refresh(), "value")
        sel.param.watch(lambda e: self.shown.run(self.refresh), ["moved", "mixture"])
        self.view = pn.Row(pn.Column(self.target, self.days, self.gpus, self.deadline, self.disk,
                                     pn.Row(self.cpu_price, self.gpu_price), pn.Row(self.storage_price, self.months),
                                     pn.Row(self.margin), pn.Row(self.corpus, self.cores), width=290),
                           pn.Column(self.differs, self.out, self.priced, self.chart, sizing_mode="stretch_width"),
                           name="Planner", sizing_mode="stretch_width")
        self.shown.run(self.refresh)

    def refresh(self) -> None:
        m = self.model
        m.token_target, m.days, m.gpus = self.target.value, self.days.value, self.gpus.value
        m.deadline_days, m.bytes_per_token_on_disk = self.deadline.value, self.disk.value
        from lab.plan.throughput import Prices

        m.prices = Prices(cpu_hour=self.cpu_price.value or 0.0, gpu_hour=self.gpu_price.value or 0.0,
                          storage_tb_month=self.storage_price.value or 0.0)
        m.storage_months, m.margin = self.months.value or 0.0, self.margin.value or 1.0
        m.corpus_tb, m.cores = self.corpus.value or 1.0, self.cores.value or 1
        cfg, deadline = self.sel.config, m.deadline_days

        def show(fut: Future) -> None:
            try:
                a = fut.result()
            except LabError as e:
                self.out.object = f"**{html.escape(str(e))}**"
                return
            self.out.object = plan_markdown(a["selection"], deadline)
            self.priced.object = priced_markdown(a)
            self.differs.object = differs_html(a)
            self.chart.object = _plan_figure(a["selection"])

        self.dispatch.submit("plan", lambda: m.against_run(cfg), show, pool=DETAILS)


def _plan_figure(r: dict):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 3.2), layout="constrained")
    ax = fig.add_subplot()
    stages = [row["stage"] for row in r["funnel"]]
    ax.bar(stages, [row["bytes_out"] / 1e12 for row in r["funnel"]])
    ax.set_ylabel("TB after the stage")
    ax.set_title("bytes through the funnel for the token target")
    ax.tick_params(axis="x", rotation=45)
    return fig
