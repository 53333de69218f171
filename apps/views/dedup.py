"""The Dedup clusters tab: the near-duplicate clusters at the selection's threshold, and two members
compared.

It opens at the funnel's near-dup threshold and follows it; each member says whether the selection
keeps it, drops it as a near duplicate, or dropped it earlier (and by which stage). The user picks
the two members to compare; each pane names its document and the pair's Jaccard, and the diff
ignores whitespace and line-wrap differences. Pages are bounded and counted; sorting goes both ways.
Every grid threshold is offered; beside the clusters, the expected pair recall at the one browsed
(with the run's bands x rows), a warning below 0.7, and that point on the LSH S-curve.
"""

from __future__ import annotations

import html
from concurrent.futures import Future

import pandas as pd
import panel as pn

from apps import format as fmt
from apps.dispatch import DETAILS, Dispatch, WhenShown
from apps.store import CLUSTER_SORTS, GRID, Clusters, Selection
from apps.views.knobs import recall_note
from apps.workarounds import HTML
from lab.dedup.recall import WARN_BELOW
from lab.errors import LabError

DIFF_CSS = ("del{background:#ffd7d5;text-decoration:none} ins{background:#ccffd8;text-decoration:none}"
            ".pane{white-space:pre-wrap;font-family:monospace;font-size:12px;max-height:460px;overflow:auto;"
            "border:1px solid #ddd;padding:6px;overflow-wrap:anywhere}")


def cluster_frame(df) -> pd.DataFrame:
    rows = []
    for r in df.iter_rows(named=True):
        rows.append({"cluster_id": str(r["cluster_id"]), "size": r["size"], "alive": r.get("alive", ""),
                     "kept": "" if r.get("kept_doc_id") is None else str(r["kept_doc_id"]),
                     "min J": f"{r['min_jaccard']:.3f}" if r["min_jaccard"] is not None else "–",
                     "mean J": f"{r['mean_jaccard']:.3f}" if r["mean_jaccard"] is not None else "–",
                     "sources": ", ".join(r["sources"] or []), "languages": ", ".join(x or "–" for x in r["languages"] or [])})
    return pd.DataFrame(rows, columns=["cluster_id", "size", "alive", "kept", "min J", "mean J", "sources", "languages"])


def compare_html(c: dict, members) -> str:
    if not c:
        return "<p style='color:#777'>A cluster needs two members to compare.</p>"
    left = "".join(html.escape(t) if op == "=" else f"<del>{html.escape(t)}</del>" for op, t in c["ops"] if op != "+")
    right = "".join(html.escape(t) if op == "=" else f"<ins>{html.escape(t)}</ins>" for op, t in c["ops"] if op != "-")
    status = dict(zip(members["doc_id"].to_list(), members["status"].to_list())) if "status" in members.columns else {}
    j = c["jaccard"]
    jv = j[0] if isinstance(j, tuple) else j
    how = (" (computed from the texts)" if isinstance(j, tuple) and len(j) > 1 and not j[1] else "")
    jtxt = "–" if jv is None else f"{jv:.3f}{how}"
    head = (f"<p>Pair Jaccard <b>{jtxt}</b> · differences ignore whitespace and line wrapping</p>")

    def pane(doc, body):
        return (f"<div style='flex:1;min-width:0'><p style='margin:2px 0'><b>doc {doc}</b> · "
                f"{html.escape(status.get(doc, ''))}</p><div class='pane'>{body}</div></div>")

    return (f"<style>{DIFF_CSS}</style>{head}<div style='display:flex;gap:12px'>{pane(c['a'], left)}"
            f"{pane(c['b'], right)}</div>")


class DedupTab:
    def __init__(self, sel: Selection, dispatch: Dispatch, shown: WhenShown | None = None) -> None:
        self.sel, self.dispatch = sel, dispatch
        self.shown = shown or WhenShown()  # hidden: follows the selection when opened
        self.model = Clusters(sel)
        self.following = True  # the threshold follows the funnel's until the user picks another here
        self.threshold = pn.widgets.Select(label="near-duplicate threshold (Jaccard)", options=list(GRID),
                                           value=self.model.at, width=220)
        self.sort = pn.widgets.Select(label="sort by", options=list(CLUSTER_SORTS), value="size", width=150)
        self.order = pn.widgets.RadioButtonGroup(label="order", options=["descending", "ascending"], value="descending",
                                                 width=200, margin=(25, 5))
        self.prev = pn.widgets.Button(label="◀ prev", width=70, margin=(25, 5))
        self.next = pn.widgets.Button(label="next ▶", width=70, margin=(25, 5))
        self.count = HTML("", name="cluster count", margin=(25, 5))
        self.survivors = pn.widgets.Checkbox(label="only clusters near_dedup decides (2+ members alive before it)",
                                             value=False)
        self.note = HTML("", sizing_mode="stretch_width", css_classes=["dedup-note"])
        self.table = pn.widgets.Tabulator(cluster_frame(_no_clusters()), disabled=True, show_index=False, selectable=1,
                                          height=300, sizing_mode="stretch_width", layout="fit_columns",
                                          widths={"cluster_id": 190, "kept": 190, "size": 60, "alive": 60},
                                          name="clusters")
        self.members = pn.widgets.Tabulator(pd.DataFrame(columns=["doc_id", "status", "source", "lang", "size"]),
                                            disabled=True, show_index=False, height=200, sizing_mode="stretch_width",
                                            layout="fit_columns", name="members")
        self.left = pn.widgets.Select(label="left", options=[], width=220)
        self.right = pn.widgets.Select(label="right", options=[], width=220)
        self.diff = HTML("", sizing_mode="stretch_width", name="compare")
        self.curve = pn.pane.Matplotlib(_s_curve_figure(self.model), dpi=72, height=230, tight=True)
        self._members = None
        self._curve_at = self.model.at
        self.threshold.param.watch(self._picked_threshold, "value")
        self.sort.param.watch(self._resort, "value")
        self.survivors.param.watch(self._resort, "value")
        self.order.param.watch(self._resort, "value")
        self.prev.on_click(lambda _: self._page(-1))
        self.next.on_click(lambda _: self._page(+1))
        self.table.param.watch(self._opened, "selection")
        for w in (self.left, self.right):
            w.param.watch(self._pair, "value")
        sel.param.watch(lambda e: self.shown.run(self._selection_changed), ["moved"])
        self.view = pn.Column(pn.Row(self.threshold, self.sort, self.order, self.prev, self.next, self.count),
                              pn.Row(self.survivors, self.note), self.table, HTML("<h3 style='margin:4px 0'>Members</h3>"),
                              self.members, pn.Row(self.left, self.right), self.diff, self.curve,
                              name="Dedup clusters", sizing_mode="stretch_width")
        self.shown.run(self.refresh)

    def _selection_changed(self, _=None) -> None:
        if self.following and self.threshold.value != self.model.at:
            self.threshold.value = self.model.at  # -> _picked_threshold refreshes
        else:
            self.refresh()

    def _picked_threshold(self, event) -> None:
        funnel = self.sel.config.stages.near_dedup.threshold
        self.following = abs(event.new - funnel) < 1e-9
        self.model.threshold = None if self.following else event.new
        self.model.page = 0
        self.refresh()

    def _resort(self, _=None) -> None:
        self.model.sort, self.model.descending = self.sort.value, self.order.value == "descending"
        self.model.survivors_only = self.survivors.value
        self.model.page = 0
        self.refresh()

    def _page(self, step: int) -> None:
        self.model.page += step
        self.refresh()

    def open(self, cluster_id: int) -> None:
        """Open one cluster (from the document viewer's "open its cluster")."""
        self.model.open_cluster, self.model.pair = cluster_id, None
        self._load_members()

    def refresh(self) -> None:
        m = self.model

        def compute():
            df, n = m.clusters()
            return df, n, m.page, m.at

        def show(fut: Future) -> None:
            try:
                df, n, page, at = fut.result()
            except LabError as e:
                self.note.object = f"<p style='color:#b00020'>{html.escape(str(e))}</p>"
                return
            self.table.value = cluster_frame(df)
            self.count.object = (f"<b>{fmt.count(n['clusters'])}</b> clusters of <b>{fmt.count(n['documents'])}</b> "
                                 f"documents at Jaccard ≥ {at:.2f} · page <b>{page + 1}</b> of <b>{n['pages']}</b>")
            nd = self.sel.config.stages.near_dedup
            self.note.object = ("<p style='margin:2px 0;color:#555'>At the funnel's near-dup threshold.</p>"
                                if abs(at - nd.threshold) < 1e-9 else
                                f"<p style='margin:2px 0;color:#a15c00'>Browsing at {at:.2f}; the funnel uses "
                                f"{nd.threshold:.2f}.</p>") + recall_note(nd, at)
            self.prev.disabled, self.next.disabled = page <= 0, page >= n["pages"] - 1
            if at != self._curve_at:
                self._curve_at, self.curve.object = at, _s_curve_figure(self.model)
            if m.open_cluster is not None:
                self._load_members()

        self.dispatch.submit("clusters", compute, show, pool=DETAILS)

    def _opened(self, event) -> None:
        if not event.new:
            return
        self.open(int(self.table.value.iloc[event.new[0]]["cluster_id"]))

    def _load_members(self) -> None:
        m = self.model

        def compute():
            members = m.members()
            return members, m.compare(members)

        def show(fut: Future) -> None:
            try:
                members, c = fut.result()
            except LabError as e:
                self.note.object = f"<p style='color:#b00020'>{html.escape(str(e))}</p>"
                return
            self._members = members
            self.members.value = pd.DataFrame({
                "doc_id": [str(d) for d in members["doc_id"].to_list()], "status": members["status"].to_list(),
                "source": members["source"].to_list(), "lang": [x or "" for x in members["lang"].to_list()],
                "size": [fmt.size(b) for b in members["bytes"].to_list()]})
            opts = {f"doc {d} · {s}": str(d) for d, s in zip(members["doc_id"].to_list(), members["status"].to_list())}
            self._syncing = True
            try:
                self.left.options, self.right.options = opts, opts
                if c:
                    self.left.value, self.right.value = str(c["a"]), str(c["b"])
            finally:
                self._syncing = False
            self.diff.object = compare_html(c, members)

        self.dispatch.submit("members", compute, show, pool=DETAILS)

    def _pair(self, _=None) -> None:
        if getattr(self, "_syncing", False) or not self.left.value or not self.right.value:
            return
        a, b = int(self.left.value), int(self.right.value)
        if a == b:
            self.diff.object = "<p style='color:#777'>Pick two different members.</p>"
            return
        self.model.pair = (a, b)
        members = self._members

        def compute():
            return self.model.compare(members)

        def show(fut: Future) -> None:
            try:
                self.diff.object = compare_html(fut.result(), members)
            except LabError as e:
                self.note.object = f"<p style='color:#b00020'>{html.escape(str(e))}</p>"

        self.dispatch.submit("pair", compute, show, pool=DETAILS)


def _no_clusters():
    import polars as pl

    return pl.DataFrame(schema={"cluster_id": pl.Int64, "size": pl.Int64, "min_jaccard": pl.Float64,
                                "mean_jaccard": pl.Float64, "sources": pl.List(pl.Utf8),
                                "languages": pl.List(pl.Utf8)})


def _s_curve_figure(model: Clusters):
    from matplotlib.figure import Figure

    s, p = model.s_curve()
    recall = model.recall()
    fig = Figure(figsize=(5, 2.6), layout="constrained")
    ax = fig.add_subplot()
    ax.plot(s, p)
    ax.axvline(model.at, color="#999", linestyle="--")
    ax.plot([model.at], [recall], "o", color="#a15c00" if recall < WARN_BELOW else "#222")
    ax.set_xlabel("Jaccard similarity s")
    ax.set_ylabel("P(candidate pair)")
    ax.set_title(f"LSH S-curve of the run's bands x rows: recall {recall:.2f} at {model.at:.2f}")
    ax.grid(alpha=0.3)
    return fig
