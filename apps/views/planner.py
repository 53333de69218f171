"""The Planner tab: what the selection means at scale — raw input, cores, bandwidth — computed from
the session's current funnel (per-stage retention, bytes per token of the kept documents) and the
run's measured costs, and what differs from the plan of the run's own config."""

from __future__ import annotations

import html
from concurrent.futures import Future

import panel as pn

from apps import format as fmt
from apps import panes
from apps.dispatch import DETAILS, Dispatch, WhenShown
from apps.store import Planner, Selection
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


def differs_html(a: dict) -> str:
    """What the selection's plan changes against the plan of the run's own config (``lab.plan.compare``)."""
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
        self.differs = panes.HTML("", sizing_mode="stretch_width", name="differs")
        self.out = pn.pane.Markdown(name="plan", sizing_mode="stretch_width")
        self.chart = pn.pane.Matplotlib(dpi=72, height=280, tight=True)
        for w in (self.target, self.days, self.gpus, self.deadline, self.disk):
            w.param.watch(lambda e: self.refresh(), "value")
        sel.param.watch(lambda e: self.shown.run(self.refresh), ["moved", "mixture"])
        self.view = pn.Row(pn.Column(self.target, self.days, self.gpus, self.deadline, self.disk, width=290),
                           pn.Column(self.differs, self.out, self.chart, sizing_mode="stretch_width"),
                           name="Planner", sizing_mode="stretch_width")
        self.shown.run(self.refresh)

    def refresh(self) -> None:
        m = self.model
        m.token_target, m.days, m.gpus = self.target.value, self.days.value, self.gpus.value
        m.deadline_days, m.bytes_per_token_on_disk = self.deadline.value, self.disk.value
        cfg, deadline = self.sel.config, m.deadline_days

        def show(fut: Future) -> None:
            try:
                a = fut.result()
            except LabError as e:
                self.out.object = f"**{html.escape(str(e))}**"
                return
            self.out.object = plan_markdown(a["selection"], deadline)
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
