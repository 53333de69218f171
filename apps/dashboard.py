"""The corpus-lab dashboard (Panel): every threshold a slider, the funnel, clusters, tokens, export.

``create(run_dir)`` builds one session's page; ``serve(run_dir, ...)`` serves it (``corpus-lab
serve``). Each browser session gets its own ``apps.state`` objects; the run's signals are loaded
once per process (``lab.query.open_run(in_memory=True)``) and every query takes its own cursor,
so sessions never share one. Sliders query on release (``value_throttled``), not on every pixel;
the query runs on a thread of the process's pool and its answer reaches the page as one patch (the
table patched, the Kept line, the chart's data), the sampled documents after it.
Nothing here reads files but through ``lab``: the server exposes no static directory.
"""

from __future__ import annotations

import html
import io
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

import panel as pn
from panel.io.state import set_curdoc

from apps.state import GRID, UNITS, ClusterState, FunnelState, FunnelView, PlannerState
from lab import query
from lab.errors import LabError


class _Pool:
    """Query threads that count their work in flight (``quiet`` is set when there is none)."""

    def __init__(self, workers: int, name: str, *, after: _Pool | None = None) -> None:
        self.executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=name)
        self.after = after  # a pool whose work goes first: wait (a while) until it is quiet
        self.lock, self.running, self.quiet = threading.Lock(), 0, threading.Event()
        self.quiet.set()

    def submit(self, fn: Callable[[], Any]) -> Future:
        with self.lock:
            self.running += 1
            self.quiet.clear()
        fut = self.executor.submit(self._run, fn)
        fut.add_done_callback(self._finished)
        return fut

    def _run(self, fn: Callable[[], Any]) -> Any:
        if self.after is not None:
            self.after.quiet.wait(timeout=AFTER_WAIT_S)
        return fn()

    def _finished(self, _: Future) -> None:
        with self.lock:
            self.running -= 1
            if not self.running:
                self.quiet.set()


# The process's query threads, shared by the sessions (DuckDB releases the GIL while it works): the
# funnels; and one thread for the sampled documents, which waits for the funnels in flight (at most
# AFTER_WAIT_S), so that the samples of one session do not delay the numbers of another.
AFTER_WAIT_S = 1.0
_FUNNELS = _Pool(4, "corpus-lab-funnel")
_SAMPLES = _Pool(1, "corpus-lab-samples", after=_FUNNELS)
_SKIPPED = object()  # a request overtaken before it started
_DIFF_CSS = ("del{background:#ffd7d5;text-decoration:none} ins{background:#ccffd8;text-decoration:none}"
             ".doc{white-space:pre-wrap;font-family:monospace;font-size:12px;max-height:480px;overflow:auto}")


def _widget(k):
    """A widget for one knob (``lab.knobs.Knob``)."""
    label = k.name
    if k.kind == "switch":
        return pn.widgets.Checkbox(label=label, value=k.value)
    if k.kind == "choice":
        return pn.widgets.Select(label=label, options=list(k.options), value=k.value)
    if k.kind == "languages":
        return pn.widgets.MultiChoice(label=label, options=list(k.options), value=list(k.value))
    if k.lo is not None and k.hi is not None and k.hi > k.lo:
        if k.kind == "integer":
            return pn.widgets.IntSlider(label=label, start=int(k.lo), end=int(max(k.hi, k.lo + 1)), value=int(k.value))
        return pn.widgets.FloatSlider(label=label, start=float(k.lo), end=float(k.hi), value=float(k.value),
                                      step=(float(k.hi) - float(k.lo)) / 200)
    return (pn.widgets.IntInput if k.kind == "integer" else pn.widgets.FloatInput)(label=label, value=k.value)


class _Latest:
    """Computes a session's answer on the query threads and shows it on the server's event loop.

    A request overtaken by a later one of the same kind is dropped: its answer is not shown and,
    if it has not started yet, not computed. So the event loop only applies answers (a few ms)
    and one session's DuckDB query (which releases the GIL) does not hold up the other sessions.
    Outside a server (a notebook, a test) the computation runs inline.
    """

    def __init__(self, doc, pool: _Pool) -> None:
        self.doc, self.pool = doc, pool
        self.generation = 0

    def submit(self, compute: Callable[[], Any], show: Callable[[Future], None]) -> None:
        self.generation += 1
        gen = self.generation
        if self.doc is None or self.doc.session_context is None:
            show(_done(compute))
            return

        def run():
            return _SKIPPED if gen != self.generation else compute()

        def ready(fut: Future) -> None:
            if gen == self.generation:  # the one thread-safe way into a Bokeh document
                self.doc.add_next_tick_callback(partial(self._show, gen, fut, show))

        self.pool.submit(run).add_done_callback(ready)

    def _show(self, gen: int, fut: Future, show: Callable[[Future], None]) -> None:
        if gen == self.generation and fut.result() is not _SKIPPED:
            with set_curdoc(self.doc), pn.io.hold(self.doc):  # every change in one message
                show(fut)


def _done(compute: Callable[[], Any]) -> Future:
    fut: Future = Future()
    try:
        fut.set_result(compute())
    except Exception as e:  # noqa: BLE001 - handed to the caller through the future
        fut.set_exception(e)
    return fut


def _show_table(table: pn.widgets.Tabulator, df) -> None:
    """Show ``df`` in ``table``: patch the cells that changed when the rows and columns are the same
    (a slider move), else replace the value."""
    old = table.value
    key = [c for c in df.columns if df[c].dtype == object]  # stage and the split column: the rows' identity
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


def _funnel_chart(curve: dict[str, list]):
    """A Bokeh line chart of the funnel (share still in after each stage), updated in place through
    its ColumnDataSource: a slider move sends a few dozen numbers, not a re-rendered image."""
    from bokeh.models import ColumnDataSource
    from bokeh.palettes import Category10
    from bokeh.plotting import figure

    source = ColumnDataSource(curve)
    fig = figure(x_range=list(curve["stage"]), y_range=(0, 1.05), height=280, sizing_mode="stretch_width",
                 title="the funnel: what survives each stage", toolbar_location=None, tools="hover",
                 tooltips=[("stage", "@stage"), *((u, f"@{u}{{0.0%}}") for u in UNITS if u in curve)])
    for unit, color in zip((u for u in UNITS if u in curve), Category10[3]):
        fig.line("stage", unit, source=source, color=color, line_width=2, legend_label=unit)
        fig.scatter("stage", unit, source=source, color=color, size=6)
    fig.yaxis.axis_label = "share still in"
    fig.xaxis.major_label_orientation = 0.5
    fig.legend.location = "bottom_left"
    return fig, source


def _kept_line(view: FunnelView) -> str:
    kept = ", ".join(f"{k} {v:.1%}" for k, v in view.retention.items())
    return (f"<p><b>Kept:</b> {html.escape(kept)} <span style='color:#777'>· config "
            f"<code>{view.config_hash}</code></span></p>")


def funnel_tab(state: FunnelState) -> pn.viewable.Viewable:
    doc = pn.state.curdoc
    first = state.view()
    table = pn.widgets.Tabulator(first.funnel.to_pandas(), disabled=True, show_index=False, height=380,
                                 label="funnel")
    retention = pn.pane.HTML(_kept_line(first), name="retention")
    error = pn.pane.Alert(visible=False, alert_type="danger")
    by = pn.widgets.Select(label="split by", options=["(none)", "lang", "source"], value="(none)")
    stage = pn.widgets.Select(label="dropped by stage", options=list(query.STAGE_NAMES), value="gopher_quality")
    samples = pn.widgets.Tabulator(disabled=True, show_index=False, height=260, label="dropped")
    fig, source = _funnel_chart(first.curve)
    chart = pn.pane.Bokeh(fig, height=280, sizing_mode="stretch_width", name="funnel chart")
    numbers, details = _Latest(doc, _FUNNELS), _Latest(doc, _SAMPLES)

    def refresh(*_):
        cfg, split = state.config, (None if by.value == "(none)" else by.value)

        def compute():
            view = state.view(split, config=cfg)
            return view, view.funnel.to_pandas()

        numbers.submit(compute, show_numbers)

    def show_numbers(fut: Future) -> None:
        try:
            view, frame = fut.result()
        except LabError as e:
            error.object, error.visible = str(e), True
            return
        error.visible = False
        _show_table(table, frame)
        retention.object = _kept_line(view)
        source.data = view.curve
        refresh_samples()  # the numbers are out; the sampled documents follow

    def refresh_samples(*_):
        cfg, name = state.config, stage.value
        details.submit(lambda: _samples_frame(state.dropped(name, config=cfg)), show_samples)

    def show_samples(fut: Future) -> None:
        try:
            samples.value = fut.result()
        except LabError as e:
            error.object, error.visible = str(e), True

    controls = []
    for k in state.knobs():
        w = _widget(k)
        param = "value_throttled" if hasattr(w.param, "value_throttled") else "value"
        # Panel waits 50 ms for more changes of a widget before handling them; a release comes alone
        w._debounce = 0

        def moved(event, name=k.name, kind=k.kind):
            value = tuple(event.new) if kind == "languages" else event.new
            try:
                state.set(name, value)
            except LabError as e:
                error.object, error.visible = str(e), True
                return
            refresh()

        w.param.watch(moved, param)
        controls.append(w)
    by.param.watch(refresh, "value")
    stage.param.watch(refresh_samples, "value")
    refresh_samples()
    sidebar = pn.Column(*controls, width=360, height=760, scroll=True)
    return pn.Row(sidebar, pn.Column(retention, error, chart, by, table, stage, samples), name="Funnel")


def _samples_frame(d):
    d = d.drop("text")
    return d.with_columns(d["doc_id"].cast(str)).to_pandas()  # 64-bit ids: exact as text


def dedup_tab(cs: ClusterState) -> pn.viewable.Viewable:
    threshold = pn.widgets.Select(label="near-duplicate threshold (Jaccard)", options=list(GRID), value=cs.threshold)
    sort = pn.widgets.Select(label="sort by", options=list(query.CLUSTER_SORTS), value=cs.sort)
    page = pn.widgets.IntInput(label="page", value=0, start=0)
    count = pn.pane.Markdown()
    table = pn.widgets.Tabulator(disabled=True, show_index=False, height=300, selectable=1, label="clusters")
    docs = pn.pane.HTML(name="members")
    curve = pn.pane.Matplotlib(_s_curve_figure(cs), dpi=80, height=260, tight=True)

    def refresh(*_):
        cs.threshold, cs.sort, cs.page = threshold.value, sort.value, page.value
        n = cs.count()
        count.object = f"**{n['clusters']}** clusters of **{n['documents']}** documents at Jaccard ≥ {cs.threshold:.2f}"
        df = cs.clusters()
        table.value = df.with_columns(df["cluster_id"].cast(str), df["representative"].cast(str)).to_pandas()

    def opened(event):
        if not event.new:
            return
        cs.open_cluster = int(table.value.iloc[event.new[0]]["cluster_id"])
        m = cs.members()
        ops = cs.diff(0, 1)
        left = "".join(html.escape(t) if op == "=" else f"<del>{html.escape(t)}</del>" for op, t in ops if op != "+")
        right = "".join(html.escape(t) if op == "=" else f"<ins>{html.escape(t)}</ins>" for op, t in ops if op != "-")
        head = " · ".join(f"doc {d} ({s}, {b} bytes)" for d, s, b in m.select("doc_id", "source", "bytes").iter_rows())
        docs.object = (f"<style>{_DIFF_CSS}</style><p>{len(m)} members: {html.escape(head)}</p>"
                       f"<div style='display:flex;gap:12px'><div class='doc' style='flex:1'>{left}</div>"
                       f"<div class='doc' style='flex:1'>{right}</div></div>")

    for w in (threshold, sort, page):
        w.param.watch(refresh, "value")
    table.param.watch(opened, "selection")
    refresh()
    return pn.Column(pn.Row(threshold, sort, page), count, table, docs, curve, name="Dedup clusters")


def _s_curve_figure(cs: ClusterState):
    from matplotlib.figure import Figure

    s, p = cs.s_curve()
    fig = Figure(figsize=(5, 3), layout="constrained")
    ax = fig.add_subplot()
    ax.plot(s, p)
    ax.set_xlabel("Jaccard similarity s")
    ax.set_ylabel("P(candidate pair)")
    ax.set_title("LSH S-curve")
    ax.grid(alpha=0.3)
    return fig


def _packing_figure(run_dir: Path):
    from matplotlib.figure import Figure

    p = query.packing(run_dir)
    fig = Figure(figsize=(6, 3), layout="constrained")
    ax = fig.add_subplot()
    lens = sorted(set(p["seq_len"].to_list()))
    width = 0.8 / max(len(lens), 1)
    strategies = sorted(set(p["strategy"].to_list()))
    for i, n in enumerate(lens):
        rows = p.filter(p["seq_len"] == n).sort("strategy")
        ax.bar([k + i * width for k in range(len(strategies))], rows["utilization"].to_list(), width, label=f"{n}")
    ax.set_xticks([k + width * (len(lens) - 1) / 2 for k in range(len(strategies))], strategies)
    ax.set_ylabel("utilization")
    ax.set_title("packing: real tokens / slots")
    ax.legend(title="seq_len")
    return fig


def _fertility_figure(run_dir: Path):
    from matplotlib.figure import Figure

    f = query.fertility(run_dir, "lang")
    f = f.filter(f["bytes_per_token"].is_not_null())  # documents with no tokens (empty text) have no figure
    fig = Figure(figsize=(6, 3), layout="constrained")
    ax = fig.add_subplot()
    ax.bar([str(x) for x in f["lang"].to_list()], f["bytes_per_token"].to_list())
    ax.set_ylabel("bytes per token")
    ax.set_title("the run's tokenizer, by language")
    return fig


def tokens_tab(run_dir: Path) -> pn.viewable.Viewable:
    parts = []
    for fig in (_fertility_figure, _packing_figure):
        try:
            parts.append(pn.pane.Matplotlib(fig(run_dir), dpi=80, height=260, tight=True))
        except LabError as e:
            parts.append(pn.pane.Alert(str(e), alert_type="info"))
    for title, fn in (("Fertility by language", lambda: query.fertility(run_dir, "lang")),
                      ("Fertility by source", lambda: query.fertility(run_dir, "source")),
                      ("Tokenizer comparison (corpus-lab fertility)", lambda: query.fertility_comparison(run_dir)),
                      ("Packing: strategy x seq_len", lambda: query.packing(run_dir))):
        try:
            parts += [pn.pane.Markdown(f"### {title}"),
                      pn.widgets.Tabulator(fn().to_pandas(), disabled=True, show_index=False, height=240)]
        except LabError as e:
            parts += [pn.pane.Markdown(f"### {title}"), pn.pane.Alert(str(e), alert_type="info")]
    return pn.Column(*parts, name="Fertility & packing")


def planner_tab(ps: PlannerState) -> pn.viewable.Viewable:
    target = pn.widgets.FloatInput(label="token target", value=ps.token_target, start=1)
    days = pn.widgets.FloatInput(label="training days", value=ps.days, start=0.01)
    gpus = pn.widgets.IntInput(label="GPUs", value=ps.gpus, start=1)
    deadline = pn.widgets.FloatInput(label="days to curate the corpus", value=ps.deadline_days, start=0.01)
    disk = pn.widgets.IntInput(label="bytes per token on disk", value=ps.bytes_per_token_on_disk, start=1)
    out = pn.pane.Markdown(name="plan")
    chart = pn.pane.Matplotlib(dpi=80, height=300, tight=True)

    def refresh(*_):
        ps.token_target, ps.days, ps.gpus = target.value, days.value, gpus.value
        ps.deadline_days, ps.bytes_per_token_on_disk = deadline.value, disk.value
        try:
            r = ps.result()
        except LabError as e:
            out.object = f"**{e}**"
            return
        t, c = r["throughput"], r["cores"]
        out.object = (f"Measured on this run: retention **{r['retention_product']:.2%}** of the bytes, "
                      f"**{r['bytes_per_token']:.2f}** bytes per token, **{c['bytes_per_s_per_core'] / 1e6:.2f} MB/s** "
                      f"per core over all stages.\n\n"
                      f"| | |\n|---|---:|\n| raw bytes needed | {r['raw_bytes'] / 1e12:,.1f} TB |\n"
                      f"| kept bytes | {r['kept_bytes'] / 1e12:,.1f} TB |\n"
                      f"| tokens/s overall | {t['tokens_per_s']:,.0f} |\n| tokens/s per GPU | {t['per_gpu']:,.0f} |\n"
                      f"| read bandwidth | {t['read_bytes_per_s'] / 1e6:,.1f} MB/s |\n"
                      f"| cores to curate in {ps.deadline_days:g} days | {c['cores']:,.0f} |")
        chart.object = _plan_figure(r)

    for w in (target, days, gpus, deadline, disk):
        w.param.watch(refresh, "value")
    refresh()
    return pn.Row(pn.Column(target, days, gpus, deadline, disk, width=300), pn.Column(out, chart), name="Planner")


def _plan_figure(r: dict):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 3.4), layout="constrained")
    ax = fig.add_subplot()
    stages = [row["stage"] for row in r["funnel"]]
    ax.bar(stages, [row["bytes_out"] / 1e12 for row in r["funnel"]])
    ax.set_ylabel("TB after the stage")
    ax.set_title("bytes through the funnel for the token target")
    ax.tick_params(axis="x", rotation=45)
    return fig


def export_tab(state: FunnelState) -> pn.viewable.Viewable:
    text = pn.pane.Markdown(name="config")

    def current():
        return io.StringIO(state.export_yaml())

    def show(*_):
        text.object = f"```yaml\n{state.export_yaml()}```\n\nRun it in batch:\n\n    {state.export_command()}"

    download = pn.widgets.FileDownload(callback=current, filename="corpus-lab-config.yaml",
                                       label="Download config", button_type="primary")
    refresh = pn.widgets.Button(label="Show the current config")
    refresh.on_click(show)
    show()
    return pn.Column(download, refresh, text, name="Export")


def create(run_dir: str | Path) -> pn.viewable.Viewable:
    """One session's dashboard for a run directory."""
    run_dir = Path(run_dir)
    state = FunnelState(run_dir)
    tabs = pn.Tabs(funnel_tab(state), dedup_tab(ClusterState(run_dir)), tokens_tab(run_dir),
                   planner_tab(PlannerState(run_dir)), export_tab(state), dynamic=True)
    return pn.Column(pn.pane.Markdown(f"## corpus-lab · `{run_dir}`"), tabs)


def serve(run_dir: str | Path, *, address: str = "127.0.0.1", port: int = 5006, basic_auth: str | None = None,
          show: bool = False, threaded: bool = False):
    """Serve the dashboard (Panel/Bokeh server); ``basic_auth``: a password, or a JSON file of users."""
    query.open_run(run_dir, in_memory=True)  # load once, before the first session
    kwargs = {"basic_auth": basic_auth, "cookie_secret": _cookie_secret()} if basic_auth else {}
    return pn.serve({"/": lambda: create(run_dir)}, address=address, port=port, show=show, threaded=threaded,
                    title="corpus-lab", websocket_origin=[f"{address}:{port}", f"localhost:{port}"], **kwargs)


def _cookie_secret() -> str:
    import secrets

    return secrets.token_hex(16)
