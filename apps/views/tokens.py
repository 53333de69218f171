"""The Fertility & packing tab: the run's tokenizer by language and source, the tokenizer comparison
(``corpus-lab fertility``), every packing strategy x sequence length, and the loader's waits per step
(``corpus-lab read-tokens`` or a trainer's ``write_telemetry`` into the run's telemetry/). Computed off
the loop."""

from __future__ import annotations

from concurrent.futures import Future

import panel as pn

from apps.dispatch import DETAILS, Dispatch, WhenShown
from apps.store import Selection
from lab.errors import LabError

TABLES = (("Fertility by language", lambda sel: sel.fertility("lang")),
          ("Fertility by source", lambda sel: sel.fertility("source")),
          ("Tokenizer comparison (corpus-lab fertility)", Selection.fertility_comparison),
          ("Packing: strategy x seq_len", Selection.packing),
          ("Loader telemetry (corpus-lab read-tokens, or a trainer's write_telemetry)", Selection.loader_telemetry))


def _packing_figure(sel: Selection):
    from matplotlib.figure import Figure

    p = sel.packing()
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


def _fertility_figure(sel: Selection):
    from matplotlib.figure import Figure

    f = sel.fertility("lang")
    f = f.filter(f["bytes_per_token"].is_not_null())  # documents with no tokens (empty text) have no figure
    fig = Figure(figsize=(6, 3), layout="constrained")
    ax = fig.add_subplot()
    ax.bar([str(x) for x in f["lang"].to_list()], f["bytes_per_token"].to_list())
    ax.set_ylabel("bytes per token")
    ax.set_title("the run's tokenizer, by language")
    return fig


def _telemetry_figure(sel: Selection):
    """The newest loader telemetry: each step's wait for its sample, the stall budget drawn."""
    from matplotlib.figure import Figure

    summary = sel.loader_telemetry().row(0, named=True)
    steps = sel.telemetry_steps(summary["name"])
    fig = Figure(figsize=(6, 3), layout="constrained")
    ax = fig.add_subplot()
    ax.plot(steps["step"].to_list(), steps["wait_ms"].to_list(), lw=0.8)
    ax.axhline(summary["stall_ms"], color="#e45756", ls="--", lw=1, label=f"stall budget {summary['stall_ms']:g} ms")
    ax.set_xlabel("step")
    ax.set_ylabel("wait for the sample (ms)")
    ax.set_title(f"loader: {summary['name']} — p99 {summary['p99_ms']} ms, {summary['stalls']} stalls")
    ax.legend()
    return fig


class TokensTab:
    """Computed once, when first opened (it reads every text of the run: seconds at 1M documents)."""

    def __init__(self, sel: Selection, dispatch: Dispatch, shown: WhenShown | None = None) -> None:
        self.sel, self.dispatch = sel, dispatch
        self.figures = pn.Row(sizing_mode="stretch_width")
        self.tables = pn.Column(sizing_mode="stretch_width")
        self.view = pn.Column(self.figures, self.tables, name="Fertility & packing", sizing_mode="stretch_width")
        self.shown = shown or WhenShown()
        self.shown.run(self.load)

    def load(self) -> None:
        sel, figures, tables = self.sel, self.figures, self.tables

        def compute():
            out = []
            for fig in (_fertility_figure, _packing_figure, _telemetry_figure):
                try:
                    out.append(("figure", fig(sel)))
                except LabError as e:
                    out.append(("note", str(e)))
            for title, fn in TABLES:
                try:
                    out.append((title, fn(sel).to_pandas()))
                except LabError as e:
                    out.append((title, str(e)))
            return out

        def show(fut: Future) -> None:
            for kind, x in fut.result():
                if kind == "figure":
                    figures.append(pn.pane.Matplotlib(x, dpi=72, height=240, tight=True))
                elif kind == "note":
                    figures.append(pn.pane.Alert(x, alert_type="info"))
                elif isinstance(x, str):
                    tables.extend([pn.pane.Markdown(f"### {kind}"), pn.pane.Alert(x, alert_type="info")])
                else:
                    tables.extend([pn.pane.Markdown(f"### {kind}"),
                                   pn.widgets.Tabulator(x, disabled=True, show_index=False, height=220,
                                                        sizing_mode="stretch_width", layout="fit_data_table")])

        self.dispatch.submit("tokens", compute, show, pool=DETAILS)
