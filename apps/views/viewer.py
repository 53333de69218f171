"""The document viewer: page through what the selection drops or keeps, read a document, label it.

Which documents: a stage's drops (or every drop), the kept ones, or what the last change newly
dropped or newly kept; filtered by reason, source and language; in a seeded random order, 20 a
page. A document shows its whole text (escaped: markup is text), the signal that failed against its
threshold, its other signals, source, locator and url; a near-dup drop links to its cluster and the
member that was kept. Good / Bad (and a note) store a label by the session's user in the run.
"""

from __future__ import annotations

import html
from concurrent.futures import Future
from typing import Callable

import panel as pn
import polars as pl

from apps import format as fmt
from apps.dispatch import DETAILS, Dispatch
from apps.store import Selection, Viewer
from apps.workarounds import HTML
from lab.errors import LabError
from lab.stages import STAGE_NAMES

ANY = "(any)"
LIST_CSS = "select{font-family:monospace;font-size:11px} option{padding:2px 0}"
VIEW_LABELS = {"dropped": "dropped", "kept": "kept", "newly_dropped": "newly dropped by the last change",
               "newly_kept": "newly kept by the last change"}
DOC_CSS = (".doc-text{white-space:pre-wrap;font-family:monospace;font-size:12px;max-height:420px;overflow:auto;"
           "border:1px solid #ddd;padding:6px;background:#fafafa;overflow-wrap:anywhere}"
           ".signals td{padding:0 6px;font-size:11px}.signals{border-collapse:collapse}"
           ".fail{color:#b00020;font-weight:bold}")


def list_options(page: pl.DataFrame) -> dict[str, str]:
    """The page as the list shows it: one line per document (id as text, why it is dropped: the failed
    rule and the document's value against its threshold, language, size, source) -> its row in the page.

    >>> page = pl.DataFrame({"doc_id": [7855438623749090668], "reason": ["c4.few_sentences"], "signal": ["c4_sentences"],
    ...                      "value": [1.0], "threshold": ["3"], "op": [">="], "source": ["web"], "lang": ["en"],
    ...                      "bytes": [2048]})
    >>> list(list_options(page))
    ['7855438623749090668 · c4.few_sentences 1 vs >= 3 · en · 2.0 KB · web']
    """
    out = {}
    for i, d in enumerate(page.iter_rows(named=True)):
        why = d["reason"] or "kept"
        if d.get("signal"):  # the reason names the rule; its value against the threshold
            why += f" {fmt.signal(d['value'], d['threshold'])} vs {d['op']} {d['threshold']}"
        out[" · ".join([str(d["doc_id"]), why, d["lang"] or "–", fmt.size(d["bytes"]), d["source"] or ""])] = str(i)
    return out


def document_html(d: dict) -> str:
    """One document as HTML: header, the failing signal against its threshold, text (escaped), signals."""
    head = [f"<b>doc {d['doc_id']}</b>", html.escape(d["source"] or ""), f"lang {html.escape(d['lang'] or '–')}",
            fmt.size(d["bytes"])]
    if d.get("n_tokens") is not None:
        head.append(f"{fmt.count(d['n_tokens'])} tokens")
    lines = [" · ".join(head)]
    lines.append(f"locator <code>{html.escape(str(d.get('locator') or ''))}</code>"
                 + (f" · url <code>{html.escape(d['url'])}</code>" if d.get("url") else ""))
    if d["reason"]:
        fail = f"<span class='fail'>{html.escape(d['reason'])}</span>"
        if d.get("signal"):
            fail += (f": <code>{html.escape(d['signal'])}</code> = <b>{html.escape(fmt.signal(d['value'], d['threshold']))}</b>, "
                     f"must be {html.escape(d['op'])} <b>{html.escape(str(d['threshold']))}</b>")
        lines.append(fail)
    else:
        lines.append("<span style='color:#2e7d32;font-weight:bold'>kept</span>")
    if d.get("kept_doc_id") is not None:
        lines.append(f"the member kept instead: <b>doc {d['kept_doc_id']}</b>"
                     + (f" · cluster <b>{d['cluster_id']}</b>" if d.get("cluster_id") is not None else ""))
    return (f"<style>{DOC_CSS}</style>" + "".join(f"<p style='margin:2px 0'>{x}</p>" for x in lines)
            + f"<div class='doc-text'>{fmt.text(d['text'])}</div>"
            + "<details><summary>all signals</summary>" + fmt.signals_table(d.get("signals")) + "</details>")


class DocumentViewer:
    def __init__(self, sel: Selection, dispatch: Dispatch, report: Callable[[str], None], *,
                 open_cluster: Callable[[int], None] | None = None) -> None:
        self.sel, self.dispatch, self.report, self.open_cluster_cb = sel, dispatch, report, open_cluster
        self.model = Viewer(sel, lang=sel.language)
        self.page: pl.DataFrame | None = None
        self.opening = True  # a line chosen in the list opens its document (not when the page replaces the list)
        self.syncing = False  # the filters are being set to the model's values (not a user's choice)
        self.current: dict | None = None
        self.kind = pn.widgets.Select(label="documents", options={v: k for k, v in VIEW_LABELS.items()},
                                      value="dropped", width=230)
        self.stage = pn.widgets.Select(label="stage", options=[ANY, *STAGE_NAMES], value=self.model.stage, width=150)
        self.reason = pn.widgets.Select(label="reason", options=[ANY], value=ANY, width=200)
        self.source = pn.widgets.Select(label="source", options=[ANY], value=ANY, width=130)
        self.lang = pn.widgets.Select(label="language", options=[ANY], value=ANY, width=100)
        self.seed = pn.widgets.IntInput(label="seed", value=0, start=0, width=80)
        self.prev = pn.widgets.Button(label="◀ prev", width=70)
        self.next = pn.widgets.Button(label="next ▶", width=70)
        self.pager = HTML("", margin=(12, 5), name="pager")
        self.only = HTML("", margin=(12, 5))
        self.clear_ids = pn.widgets.Button(label="show all", width=80, visible=False)
        # a native list box: a page of 20 lines is replaced on most slider releases, and a grid widget
        # measured and laid out every cell again each time
        self.list = pn.widgets.Select(options={}, size=self.model.page_size, width=430, height=430, name="documents",
                                      css_classes=["document-list"], stylesheets=[LIST_CSS])
        self.doc = HTML("<p style='color:#777'>Click a document to read it.</p>", sizing_mode="stretch_width",
                                name="document")
        self.goto_cluster = pn.widgets.Button(label="open its cluster", visible=False, width=140)
        self.user = pn.widgets.TextInput(label="labelled by", value=sel.user, width=140)
        self.note = pn.widgets.TextInput(label="note (optional)", width=220)
        self.good = pn.widgets.Button(label="Good", color="success", width=70, disabled=True)
        self.bad = pn.widgets.Button(label="Bad", color="danger", width=70, disabled=True)
        self.label_status = HTML("", margin=(12, 5), name="label status")
        self.prev.on_click(lambda _: self._page(-1))
        self.next.on_click(lambda _: self._page(+1))
        self.good.on_click(lambda _: self._label("good"))
        self.bad.on_click(lambda _: self._label("bad"))
        self.goto_cluster.on_click(lambda _: self._open_cluster())
        self.clear_ids.on_click(lambda _: self.show_ids(None))
        self.user.param.watch(lambda e: setattr(self.sel, "user", e.new), "value")
        for w in (self.kind, self.stage, self.reason, self.source, self.lang, self.seed):
            w.param.watch(self._filters_changed, "value")
        self.list.param.watch(self._opened, "value")
        self.view = pn.Column(
            HTML("<h3 style='margin:6px 0'>Documents</h3>"),
            pn.Row(self.kind, self.stage, self.reason, self.source, self.lang, self.seed, sizing_mode="stretch_width"),
            pn.Row(self.prev, self.next, self.pager, self.only, self.clear_ids),
            pn.Row(self.list, pn.Column(pn.Row(self.user, self.note, self.good, self.bad, self.label_status),
                                        self.goto_cluster, self.doc, sizing_mode="stretch_width"),
                   sizing_mode="stretch_width"),
            sizing_mode="stretch_width", name="viewer")
        self.refresh(filters=True)

    # --- what to show --------------------------------------------------------------------------------

    def _filters_changed(self, event) -> None:
        if self.syncing:
            return
        m = self.model
        m.view = self.kind.value
        m.stage = None if self.stage.value == ANY else self.stage.value
        m.seed = int(self.seed.value or 0)
        if event.obj in (self.kind, self.stage):  # another set of documents: its own filter values
            m.reason = m.source = None
            m.lang = self.sel.language  # the language chosen above the funnel, if any
            self.refresh(filters=True)
            return
        m.reason = None if self.reason.value == ANY else self.reason.value
        m.source = None if self.source.value == ANY else self.source.value
        m.lang = None if self.lang.value == ANY else self.lang.value
        m.page = 0
        self.refresh()

    def follow_language(self) -> None:
        """The documents of the language chosen above the funnel (every language's: no filter)."""
        self.model.lang = self.sel.language
        self.model.page = 0
        self.refresh(filters=True)

    def show_ids(self, doc_ids: list[int] | None, note: str = "") -> None:
        """Show only these documents (the labelled-good drops of a stage), or every one again."""
        self.model.doc_ids = tuple(doc_ids) if doc_ids is not None else None
        self.model.page = 0
        self.only.object = f"<i>{html.escape(note)}</i>" if doc_ids is not None else ""
        self.clear_ids.visible = doc_ids is not None
        self.refresh()

    def _page(self, step: int) -> None:
        self.model.page += step
        self.refresh()

    def refresh(self, *, filters: bool = False) -> None:
        cfg = self.sel.config
        m = self.model

        def compute():
            f = m.filters(cfg) if filters else None
            page, total = m.documents(cfg)
            return f, page, total, m.page

        def show(fut: Future) -> None:
            try:
                f, page, total, number = fut.result()
            except LabError as e:
                self.report(str(e))
                return
            if f is not None:
                self.syncing = True  # the filters shown are the model's: no second query
                try:
                    for w, key in ((self.reason, "reason"), (self.source, "source"), (self.lang, "lang")):
                        opts = {ANY: ANY, **{f"{v} ({fmt.count(n)})": str(v) for v, n in f.get(key, []) if v is not None}}
                        want = getattr(m, key)
                        if want is not None and want not in opts.values():  # none of them here: still the filter
                            opts[f"{want} (0)"] = want
                        w.options = opts
                        if w.value != (ANY if want is None else want):
                            w.value = ANY if want is None else want
                finally:
                    self.syncing = False
            self.page = page
            options = list_options(page)
            self.opening = False  # the list follows the page (its first line selected), no document opened
            try:
                if options != self.list.options:  # a move often leaves the page as it was: nothing sent
                    self.list.options = options
                first = "0" if page.height else None
                if self.list.value != first:
                    self.list.value = first
            finally:
                self.opening = True
            pages = m.pages(total)
            self.pager.object = (f"page <b>{number + 1}</b> of <b>{pages}</b> · {fmt.count(total)} documents")
            self.prev.disabled, self.next.disabled = number <= 0, number >= pages - 1
            if page.height:
                self._show_doc(page.row(0, named=True))
            else:
                self.current = None
                self.doc.object = "<p style='color:#777'>No documents here.</p>"
                self.good.disabled = self.bad.disabled = True
                self.goto_cluster.visible = False

        self.dispatch.submit("documents", compute, show, pool=DETAILS)

    def _opened(self, event) -> None:
        if not self.opening or event.new is None or self.page is None or int(event.new) >= self.page.height:
            return
        i, page = int(event.new), self.page
        if page["text"][i] is not None:
            self._show_doc(page.row(i, named=True))
            return

        def compute():
            return self.model.with_text(page, [page["doc_id"][i]])

        def show(fut: Future) -> None:
            try:
                filled = fut.result()
            except LabError as e:
                self.report(str(e))
                return
            if self.page is page:  # still the page shown
                self.page = filled
                self._show_doc(filled.row(i, named=True))

        self.dispatch.submit("text", compute, show, pool=DETAILS)

    def _show_doc(self, d: dict) -> None:
        self.current = d
        self.doc.object = document_html(d)
        self.good.disabled = self.bad.disabled = False
        self.label_status.object = ""
        self.goto_cluster.visible = d.get("cluster_id") is not None and self.open_cluster_cb is not None

    def _open_cluster(self) -> None:
        if self.current is not None and self.current.get("cluster_id") is not None and self.open_cluster_cb:
            self.open_cluster_cb(int(self.current["cluster_id"]))

    # --- labels -----------------------------------------------------------------------------------

    def _label(self, label: str) -> None:
        if self.current is None:
            return
        doc_id, note = int(self.current["doc_id"]), self.note.value or ""

        def compute():
            return self.sel.label(doc_id, label, note)

        def show(fut: Future) -> None:
            try:
                fut.result()
            except LabError as e:
                self.label_status.object = f"<span style='color:#b00020'>{html.escape(str(e))}</span>"
                return
            self.note.value = ""
            self.label_status.object = (f"<span style='color:#2e7d32'>labelled doc {doc_id} <b>{label}</b> "
                                        f"by {html.escape(self.sel.user)}</span>")
            self.sel.param.trigger("labels_changed")

        self.dispatch.submit("label", compute, show, pool=DETAILS)

