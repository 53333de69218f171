"""The Funnel tab: the knobs, the funnel they give, what the last change cost, and the documents.

A change of the selection (a slider released, a number typed, a reset, a restored link) is answered
off the event loop in one message: the table patched, the Kept line, the chart's data, the change's
cost and the diff against the run's config; the open histograms and the document viewer follow.
"""

from __future__ import annotations

import html
from concurrent.futures import Future

import pandas as pd
import panel as pn
import polars as pl

from apps import format as fmt
from apps.dispatch import DETAILS, Dispatch
from apps.store import UNITS, FunnelView, Selection
from apps.views.knobs import KnobPanel
from apps.views.viewer import DocumentViewer
from lab.errors import LabError


def table_frame(f: pl.DataFrame, by: str | None) -> pd.DataFrame:
    """The funnel as the table shows it: per stage the documents it drops, then what is still in after it
    and the share of its input it keeps, per unit; counts short.

    >>> f = pl.DataFrame({"stage": ["a"], "docs_in": [5], "docs_dropped": [2_000_000], "docs_out": [3],
    ...                   "bytes_out": [3_400_000], "docs_retention": [0.6], "bytes_retention": [0.5]})
    >>> table_frame(f, None).to_dict("records")
    [{'stage': 'a', 'dropped': '2.0M', 'docs': '3', 'bytes': '3.4 MB', 'docs %': '60.00%', 'bytes %': '50.00%'}]
    """
    cols = {}
    if by:
        cols[by] = [str(x) for x in f[by].to_list()]
    cols["stage"] = f["stage"].to_list()
    cols["dropped"] = [fmt.count(x) for x in f["docs_dropped"].to_list()]
    for unit in UNITS:
        if f"{unit}_out" in f.columns:
            cols[unit] = [(fmt.size if unit == "bytes" else fmt.count)(x) for x in f[f"{unit}_out"].to_list()]
    for unit in UNITS:
        if f"{unit}_retention" in f.columns:
            cols[f"{unit} %"] = [fmt.share(x) for x in f[f"{unit}_retention"].to_list()]
    return pd.DataFrame(cols)


def show_table(table: pn.widgets.Tabulator, df: pd.DataFrame) -> None:
    """Show ``df``: patch the cells that changed when the rows are the same (a slider move), else replace."""
    old = table.value
    key = [c for c in df.columns if c in ("stage", "lang", "source")]
    if old is None or list(old.columns) != list(df.columns) or len(old) != len(df) \
            or any(old[c].tolist() != df[c].tolist() for c in key):
        table.value = df
        return
    patch = {}
    for c in df.columns:
        cells = [(i, b) for i, (a, b) in enumerate(zip(old[c].tolist(), df[c].tolist())) if a != b]
        if cells:
            patch[c] = cells
    if patch:
        table.patch(patch, as_index=False)


def funnel_chart(curve: dict[str, list]):
    """A Bokeh line chart of the funnel (share still in after each stage), updated in place."""
    from bokeh.models import ColumnDataSource
    from bokeh.palettes import Category10
    from bokeh.plotting import figure

    source = ColumnDataSource(curve)
    fig = figure(x_range=list(curve["stage"]), y_range=(0, 1.05), height=240, sizing_mode="stretch_width",
                 title="the funnel: what survives each stage", toolbar_location=None, tools="hover",
                 tooltips=[("stage", "@stage"), *((u, f"@{u}{{0.00%}}") for u in UNITS if u in curve)])
    for unit, color in zip((u for u in UNITS if u in curve), Category10[3]):
        fig.line("stage", unit, source=source, color=color, line_width=2, legend_label=unit)
        fig.scatter("stage", unit, source=source, color=color, size=6)
    fig.yaxis.axis_label = "share still in"
    fig.xaxis.major_label_orientation = 0.4
    fig.legend.location = "bottom_left"
    return fig, source


def kept_line(view: FunnelView) -> str:
    kept = ", ".join(f"{fmt.amount(view.kept[u], u)} ({fmt.share(view.retention[u])})" for u in view.retention)
    return (f"<p style='margin:4px 0'><b>Kept:</b> {html.escape(kept)} <span style='color:#777'>· config "
            f"<code>{view.config_hash}</code></span></p>")


def diff_line(changes: list) -> str:
    """The knobs that differ from the run's config, as one line."""
    if not changes:
        return "<p style='margin:2px 0;color:#555'>Thresholds: the run's config.</p>"
    items = "; ".join(f"<code>{html.escape(c.name)}</code> {html.escape(fmt.value(c.before))} → "
                      f"<b>{html.escape(fmt.value(c.after))}</b>" for c in changes)
    return f"<p style='margin:2px 0'><b>Changed from the run's config:</b> {items}</p>"


class FunnelTab:
    def __init__(self, sel: Selection, dispatch: Dispatch, *, open_cluster=None) -> None:
        self.sel, self.dispatch = sel, dispatch
        self.error = pn.pane.Alert(visible=False, alert_type="danger", sizing_mode="stretch_width")
        self.knobs = KnobPanel(sel, dispatch, self.report)
        first = sel.view()
        self.retention = pn.pane.HTML(kept_line(first), name="retention", sizing_mode="stretch_width")
        self.change = pn.pane.HTML("", name="change", sizing_mode="stretch_width")
        self.diff = pn.pane.HTML(diff_line(sel.diff()), name="diff", sizing_mode="stretch_width")
        self.reset = pn.widgets.Button(label="Reset all", color="warning", width=100)
        self.reset.on_click(lambda _: self.sel.reset())
        self.unit = pn.widgets.RadioButtonGroup(label="unit", options=list(UNITS), value=sel.unit, width=220)
        self.by = pn.widgets.Select(label="split by", options=["(none)", "lang", "source"], value=sel.by, width=140)
        self.table_title = pn.pane.HTML("<p style='margin:2px 0;color:#555'>Per stage: the documents it drops; "
                                        "then, still in after it, documents, bytes and tokens, and the share of its "
                                        "input it keeps.</p>", sizing_mode="stretch_width")
        self.table = pn.widgets.Tabulator(table_frame(first.funnel, None), disabled=True, show_index=False,
                                          height=330, sizing_mode="stretch_width", layout="fit_columns",
                                          name="funnel", css_classes=["funnel-table"])
        fig, self.source = funnel_chart(first.curve)
        self.chart = pn.pane.Bokeh(fig, height=240, sizing_mode="stretch_width", name="funnel chart")
        self.viewer = DocumentViewer(sel, dispatch, self.report, open_cluster=open_cluster)
        self.unit.param.watch(lambda e: setattr(self.sel, "unit", e.new), "value")
        self.by.param.watch(lambda e: setattr(self.sel, "by", e.new), "value")
        sel.param.watch(self._changed, ["moved"])
        sel.param.watch(lambda e: self.refresh(numbers_only=True), ["by"])
        sel.param.watch(lambda e: self.knobs.refresh_histograms(), ["unit"])
        main = pn.Column(pn.Row(self.reset, pn.pane.HTML("<b>unit</b>", margin=(12, 5)), self.unit, self.by,
                                sizing_mode="stretch_width"),
                         self.retention, self.change, self.diff, self.error, self.chart, self.table_title, self.table,
                         self.viewer.view,
                         sizing_mode="stretch_width", margin=(0, 0, 0, 10))
        self.view = pn.Row(self.knobs.view, main, name="Funnel", sizing_mode="stretch_width")
        self.knobs.refresh_histograms()

    def report(self, message: str) -> None:
        self.error.object, self.error.visible = message, True

    def _changed(self, _=None) -> None:
        self.knobs.sync()
        self.refresh()

    def refresh(self, *, numbers_only: bool = False) -> None:
        """The numbers of the current selection (one message), the open histograms beside them; then what
        the last change newly drops and keeps, and the documents."""
        sel = self.sel
        cfg, split, names = sel.config, sel.split, list(sel.changed)
        before = sel.previous_config
        first = not numbers_only

        def compute():
            view = sel.view(split, config=cfg)
            return view, table_frame(view.funnel, split), sel.diff()

        def show(fut: Future) -> None:
            try:
                view, frame, diff = fut.result()
            except LabError as e:
                self.report(str(e))
                return
            self.error.visible = False
            show_table(self.table, frame)
            self.retention.object = kept_line(view)
            self.source.data = view.curve
            self.diff.object = diff_line(diff)

        def show_change(fut: Future) -> None:
            try:
                change = fut.result()
            except LabError as e:
                self.report(str(e))
                return
            self.change.object = _change_text(change, names)
            self.knobs.show_change(change, names)

        self.dispatch.submit("funnel", compute, show)
        if first:  # the histograms beside the funnel; the change and the documents after the numbers
            self.knobs.refresh_histograms()
            self.dispatch.submit("change", lambda: sel.change(before=before, after=cfg) if names else None,
                                 show_change, pool=DETAILS)
            self.viewer.refresh()


def _change_text(change: dict | None, names: list[str]) -> str:
    if change is None:
        return ""
    def amounts(d: dict) -> str:
        return ", ".join(fmt.amount(d[u], u) for u in UNITS if u in d)
    what = ", ".join(f"<code>{html.escape(n)}</code>" for n in names)
    return (f"<p style='margin:2px 0'><b>Last change</b> ({what}): drops <b>{amounts(change['dropped'])}</b> more; "
            f"keeps {amounts(change['kept'])} more.</p>")

