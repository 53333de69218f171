"""The Funnel tab: the knobs, the funnel they give, what the last change cost, and the documents.

A change of the selection (a slider released, a number typed, a reset, a restored link) is answered
off the event loop in one message: the table patched, the Kept line, the chart's data, the change's
cost and the diff against the run's config; the open histograms and the document viewer follow.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from concurrent.futures import Future

import pandas as pd
import panel as pn
import polars as pl

from apps import format as fmt
from apps.dispatch import DETAILS, Dispatch
from apps.store import UNITS, FunnelView, Selection
from apps.views.knobs import KnobPanel
from apps.views.viewer import DocumentViewer
from apps.workarounds import HTML
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
    return pd.DataFrame(cols, dtype=object)  # plain objects: a patch of an Arrow-backed column costs ~1 ms a cell


_TABLE_CSS = """
table.funnel { border-collapse: collapse; width: 100%; font-size: 12px; }
table.funnel th { position: sticky; top: 0; background: #f3f3f3; text-align: left; padding: 3px 6px;
                  border-bottom: 1px solid #ccc; }
table.funnel td { padding: 2px 6px; border-bottom: 1px solid #eee; white-space: nowrap; }
table.funnel td.n { text-align: right; font-variant-numeric: tabular-nums; }
"""


def table_html(df: pd.DataFrame) -> str:
    """The funnel table as plain HTML (read-only: a page swaps it in one go, where a grid widget measures
    and lays out every cell again), each cell tagged with its column (``data-field``).

    >>> table_html(pd.DataFrame({"stage": ["a<b"], "docs": ["3"]}))  # doctest: +NORMALIZE_WHITESPACE
    '<table class="funnel"><thead><tr><th>stage</th><th>docs</th></tr></thead><tbody><tr><td data-field="stage">a&lt;b</td><td
    data-field="docs" class="n">3</td></tr></tbody></table>'
    """
    text = ("stage", "lang", "source")

    def cell(c, v) -> str:
        kind = "" if c in text else ' class="n"'
        return f'<td data-field="{html.escape(str(c))}"{kind}>{html.escape(str(v))}</td>'

    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in df.columns)
    rows = "".join("<tr>" + "".join(cell(c, v) for c, v in zip(df.columns, row)) + "</tr>"
                   for row in df.itertuples(index=False))
    return f'<table class="funnel"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>'


def contamination_html(df: pl.DataFrame | None, min_matches: int) -> str:
    """Per evaluation set, the run's documents the decontamination threshold counts as contaminated and
    their tokens (``lab.query.contamination``), as a short list ('' without sets).

    >>> df = pl.DataFrame({"eval_set": ["mmlu", "gsm8k"], "documents": [3, 1], "tokens": [1200, None],
    ...                    "matched_ngrams": [40, 2], "longest_words": [52, 14]})
    >>> contamination_html(df, 1)  # doctest: +NORMALIZE_WHITESPACE
    "<p style='margin:2px 0'><b>Contamination</b> (documents with at least 1 matching n-gram, by evaluation
    set): <b>mmlu</b> 3 documents, 1,200 tokens, longest overlap 52 words; <b>gsm8k</b> 1 documents, tokens
    not counted, longest overlap 14 words</p>"
    """
    if df is None:
        return ""
    if df.height == 0:
        items = "none"
    else:
        items = "; ".join(
            f"<b>{html.escape(str(r['eval_set']))}</b> {fmt.count(r['documents'])} documents"
            + (", tokens not counted" if r["tokens"] is None else f", {fmt.count(r['tokens'])} tokens")
            + f", longest overlap {r['longest_words']} words" for r in df.iter_rows(named=True))
    plural = "" if min_matches == 1 else "s"
    return (f"<p style='margin:2px 0'><b>Contamination</b> (documents with at least {min_matches} matching "
            f"n-gram{plural}, by evaluation set): {items}</p>")


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
    fig.xgrid.visible = False  # each grid line costs the browser style lookups on every repaint
    fig.yaxis.ticker.desired_num_ticks = 5
    fig.yaxis.axis_label = "share still in"
    fig.xaxis.major_label_orientation = 0.4
    fig.legend.location = "bottom_left"
    return fig, source


def kept_line(view: FunnelView) -> str:
    kept = ", ".join(f"{fmt.amount(view.kept[u], u)} ({fmt.share(view.retention[u])})" for u in view.retention)
    whose = f" (<b>{html.escape(view.lang)}</b> documents)" if view.lang else ""
    return (f"<p style='margin:4px 0'><b>Kept{whose}:</b> {html.escape(kept)} <span style='color:#777'>· config "
            f"<code>{view.config_hash}</code></span></p>")


def language_options(sel: Selection) -> dict[str, str]:
    """The language selector's entries: every language, then each language of the run with its documents."""
    from apps.store import ALL_LANGUAGES

    total = sum(n for _, n in sel.languages)
    return {f"all languages ({fmt.count(total)})": ALL_LANGUAGES,
            **{f"{code} ({fmt.count(n)})": code for code, n in sel.languages}}


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
        self.with_numbers: list[Callable[[], None]] = []  # more changes for the numbers' message (the page's URL)
        self.error = pn.pane.Alert(visible=False, alert_type="danger", sizing_mode="stretch_width")
        self.knobs = KnobPanel(sel, dispatch, self.report)
        first = sel.view(lang=sel.language)
        self.retention = HTML(kept_line(first), name="retention", sizing_mode="stretch_width")
        self.change = HTML("", name="change", sizing_mode="stretch_width")
        self.diff = HTML(diff_line(sel.diff()), name="diff", sizing_mode="stretch_width")
        self.reset = pn.widgets.Button(label="Reset all", color="warning", width=100)
        self.reset.on_click(lambda _: self.sel.reset())
        self.unit = pn.widgets.RadioButtonGroup(label="unit", options=list(UNITS), value=sel.unit, width=220)
        self.by = pn.widgets.Select(label="split by", options=["(none)", "lang", "source"], value=sel.by, width=140)
        self.lang = pn.widgets.Select(label="language", options=language_options(sel), value=sel.lang, width=170,
                                      css_classes=["language-select"])
        self.table_title = HTML("<p style='margin:2px 0;color:#555'>Per stage: the documents it drops; "
                                        "then, still in after it, documents, bytes and tokens, and the share of its "
                                        "input it keeps.</p>", sizing_mode="stretch_width")
        self.frame = table_frame(first.funnel, None)  # what the table shows
        self.table = HTML(table_html(self.frame), height=330, sizing_mode="stretch_width", name="funnel",
                                  css_classes=["funnel-table"], stylesheets=[_TABLE_CSS], styles={"overflow-y": "auto"})
        self.contamination = HTML(
            contamination_html(sel.contamination(), sel.config.stages.decontamination.min_matches),
            name="contamination", sizing_mode="stretch_width")
        fig, self.source = funnel_chart(first.curve)
        self.chart = pn.pane.Bokeh(fig, height=240, sizing_mode="stretch_width", name="funnel chart")
        self.viewer = DocumentViewer(sel, dispatch, self.report, open_cluster=open_cluster)
        self.unit.param.watch(lambda e: setattr(self.sel, "unit", e.new), "value")
        self.by.param.watch(lambda e: setattr(self.sel, "by", e.new), "value")
        self.lang.param.watch(lambda e: setattr(self.sel, "lang", e.new), "value")
        sel.param.watch(self._changed, ["moved"])
        sel.param.watch(lambda e: self.refresh(numbers_only=True), ["by"])
        sel.param.watch(self._language, ["lang"])
        sel.param.watch(lambda e: self.knobs.refresh_histograms(), ["unit"])
        main = pn.Column(pn.Row(self.reset, HTML("<b>unit</b>", margin=(12, 5)), self.unit, self.by, self.lang,
                                sizing_mode="stretch_width"),
                         self.retention, self.change, self.diff, self.error, self.chart, self.table_title, self.table,
                         self.contamination,
                         self.viewer.view,
                         sizing_mode="stretch_width", margin=(0, 0, 0, 10))
        self.view = pn.Row(self.knobs.view, main, name="Funnel", sizing_mode="stretch_width")
        self.knobs.refresh_histograms()

    def report(self, message: str) -> None:
        self.error.object, self.error.visible = message, True

    def _language(self, _=None) -> None:
        """Another language chosen: its numbers, its thresholds in the knobs and its histograms."""
        if self.lang.value != self.sel.lang:
            self.lang.value = self.sel.lang
        self.refresh(numbers_only=True)
        self.knobs.set_language()
        self.viewer.follow_language()
        for also in self.with_numbers:
            also()

    def _changed(self, _=None) -> None:
        self.refresh()  # the queries start first; the controls follow while they run
        self.knobs.sync()

    def refresh(self, *, numbers_only: bool = False) -> None:
        """The numbers of the current selection (one message), the open histograms beside them; then what
        the last change newly drops and keeps, and the documents."""
        sel = self.sel
        cfg, split, names, lang = sel.config, sel.split, list(sel.changed), sel.language
        before = sel.previous_config

        def compute():
            view = sel.view(split, config=cfg, lang=lang)
            return view, table_frame(view.funnel, split), sel.diff()

        def show(fut: Future) -> None:
            for also in self.with_numbers:
                also()
            try:
                view, frame, diff = fut.result()
            except LabError as e:
                self.report(str(e))
                return
            self.error.visible = False
            if not frame.equals(self.frame):
                self.frame = frame
                self.table.object = table_html(frame)
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
        if numbers_only:
            return
        # the open cards' histograms beside the numbers, each its own message: the page draws the funnel
        # while they are computed; the change and the documents after the numbers
        self.knobs.refresh_histograms()
        self.dispatch.submit("change", lambda: sel.change(before=before, after=cfg) if names else None,
                             show_change, pool=DETAILS)
        if cfg.stages.decontamination.eval_sets:
            def show_contamination(fut: Future) -> None:
                try:
                    self.contamination.object = contamination_html(fut.result(),
                                                                   cfg.stages.decontamination.min_matches)
                except LabError as e:
                    self.report(str(e))

            self.dispatch.submit("contamination", lambda: sel.contamination(cfg), show_contamination, pool=DETAILS)
        self.viewer.refresh()


def _change_text(change: dict | None, names: list[str]) -> str:
    if change is None:
        return ""
    def amounts(d: dict) -> str:
        return ", ".join(fmt.amount(d[u], u) for u in UNITS if u in d)
    what = ", ".join(f"<code>{html.escape(n)}</code>" for n in names)
    return (f"<p style='margin:2px 0'><b>Last change</b> ({what}): drops <b>{amounts(change['dropped'])}</b> more; "
            f"keeps {amounts(change['kept'])} more.</p>")

