"""The Labels tab: how good each filter is on this corpus, from the labels people gave its drops.

Per stage: its drops, how many of them are labelled bad and good, the filter's estimated precision
(bad among labelled drops) with its 95% Wilson interval; a click on a stage opens, in the document
viewer, the documents it drops that someone labelled good. The labels can be downloaded; a label
file that cannot be read is named here and skipped, the others still count. "Train a quality model"
fits the quality_model stage's classifier from the labels (``corpus-lab train-quality RUN``: good vs
bad, or vs a random sample of the run when nothing is labelled bad) and shows its report.
"""

from __future__ import annotations

import html
import io
from concurrent.futures import Future
from typing import Callable

import pandas as pd
import panel as pn

from apps import format as fmt
from apps.dispatch import DETAILS, Dispatch, WhenShown
from apps.store import Selection
from apps.workarounds import HTML
from lab.errors import LabError


def precision_frame(p) -> pd.DataFrame:
    rows = []
    for r in p.iter_rows(named=True):
        ci = "–" if r["ci_low"] is None else f"{fmt.share(r['ci_low'])} – {fmt.share(r['ci_high'])}"
        rows.append({"stage": r["stage"], "dropped": fmt.count(r["dropped_docs"]), "labelled": fmt.count(r["labelled"]),
                     "bad": fmt.count(r["labelled_bad"]), "good": fmt.count(r["labelled_good"]),
                     "precision": fmt.share(r["precision"]), "95% interval": ci})
    return pd.DataFrame(rows, columns=["stage", "dropped", "labelled", "bad", "good", "precision", "95% interval"])


class LabelsTab:
    def __init__(self, sel: Selection, dispatch: Dispatch, show_docs: Callable[[list[int], str], None],
                 shown: WhenShown | None = None) -> None:
        self.sel, self.dispatch, self.show_docs = sel, dispatch, show_docs
        self.shown = shown or WhenShown()  # hidden: follows the selection and new labels when opened
        self.problems = pn.pane.Alert(visible=False, alert_type="warning", sizing_mode="stretch_width")
        self.summary = HTML("", sizing_mode="stretch_width")
        self.table = pn.widgets.Tabulator(precision_frame(_empty()), disabled=True, show_index=False, selectable=1,
                                          height=360, sizing_mode="stretch_width", layout="fit_columns",
                                          name="precision")
        self.download = pn.widgets.FileDownload(callback=self._export, filename="labels.parquet",
                                                label="Download the labels (Parquet)", color="primary", width=260)
        self.train = pn.widgets.Button(label="Train a quality model from the labels", color="primary", width=300)
        self.train.on_click(lambda e: self.train_model())
        self.trained = HTML("", sizing_mode="stretch_width")
        self.table.param.watch(self._opened, "selection")
        sel.param.watch(lambda e: self.shown.run(self.refresh), ["moved", "labels_changed"])
        self.view = pn.Column(
            HTML("<p>Precision of a filter = the share of its labelled drops that are labelled <b>bad</b> "
                         "(it was right to drop them). Click a stage to read the documents it drops that were "
                         "labelled <b>good</b>. The <code>kept</code> row: the share of labelled kept documents "
                         "labelled good.</p>"),
            self.summary, self.problems, self.table, self.download, pn.Row(self.train), self.trained, name="Labels",
            sizing_mode="stretch_width")
        self.shown.run(self.refresh)

    def _export(self):
        return _parquet_bytes(self.sel.labels())

    def refresh(self) -> None:
        cfg = self.sel.config

        def compute():
            return self.sel.precision(cfg), self.sel.labels(), self.sel.label_problems()

        def show(fut: Future) -> None:
            try:
                p, labels, problems = fut.result()
            except LabError as e:
                self.problems.object, self.problems.visible = str(e), True
                return
            self.table.value = precision_frame(p)
            users = sorted(set(labels["user"].to_list())) if labels.height else []
            self.summary.object = (f"<p><b>{fmt.count(labels.height)}</b> labels on "
                                   f"<b>{fmt.count(labels['doc_id'].n_unique() if labels.height else 0)}</b> documents"
                                   + (f" by {html.escape(', '.join(users))}" if users else "") + "</p>")
            self.problems.visible = bool(problems)
            if problems:
                self.problems.object = "Label files skipped (the others still count): " + "; ".join(problems)

        self.dispatch.submit("precision", compute, show, pool=DETAILS)

    def train_model(self) -> None:
        """Fit the quality classifier from the run's labels on a worker thread; show its report."""
        from lab.quality.train import report_text

        self.train.disabled = True
        self.trained.object = "<p>training…</p>"

        def show(fut: Future) -> None:
            self.train.disabled = False
            try:
                report = fut.result()
            except LabError as e:
                self.trained.object = f"<p class='train-error'>{html.escape(str(e))}</p>"
                return
            self.trained.object = f"<pre class='train-report' style='white-space:pre-wrap'>{html.escape(report_text(report))}</pre>"

        self.dispatch.submit("train", self.sel.train_quality, show, pool=DETAILS)

    def _opened(self, event) -> None:
        if not event.new:
            return
        stage = self.table.value.iloc[event.new[0]]["stage"]
        if stage == "kept":
            return
        cfg = self.sel.config

        def compute():
            return self.sel.labelled_drops(stage, "good", cfg)

        def show(fut: Future) -> None:
            try:
                d = fut.result()
            except LabError as e:
                self.problems.object, self.problems.visible = str(e), True
                return
            self.show_docs(d["doc_id"].to_list(), f"the documents {stage} drops that are labelled good")

        self.dispatch.submit("labelled", compute, show, pool=DETAILS)


def _parquet_bytes(df) -> io.BytesIO:
    buf = io.BytesIO()
    df.write_parquet(buf)
    buf.seek(0)
    return buf


def _empty():
    import polars as pl

    return pl.DataFrame(schema={"stage": pl.Utf8, "dropped_docs": pl.Int64, "labelled": pl.Int64,
                                "labelled_bad": pl.Int64, "labelled_good": pl.Int64, "precision": pl.Float64,
                                "ci_low": pl.Float64, "ci_high": pl.Float64})
