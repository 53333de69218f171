"""The knobs: one card per stage, each knob a control with its help, and each number its distribution.

A numeric knob is a slider stepping in round increments (``Knob.step``) beside an exact number box; the
slider, the selection and Export hold the same value. Beside it: the histogram of its signal over the
documents that reach its stage (passed and dropped stacked, the cutoff following the control as it
moves) and the cost of the knob's last change. Only open cards compute histograms: one query each per
change. A disabled stage's card is greyed out; each card resets its stage. Some cards add a note: what
the run's URL lists block (``lab.query.urls``), that decontamination or quality_model has nothing to cut
without an evaluation set or a model, and near_dedup's expected pair recall at the threshold with what
to do below 0.7 (``recall_note``).
"""

from __future__ import annotations

import html
from concurrent.futures import Future
from typing import Any, Callable

import panel as pn
import polars as pl

from apps import format as fmt
from apps.dispatch import DETAILS, Dispatch
from apps.store import Selection
from apps.workarounds import HTML, no_debounce
from lab.errors import LabError
from lab.select import knobs as lab_knobs
from lab.stages import STAGE_NAMES, near_dedup

OPEN_STAGES = ("gopher_quality",)  # cards open when the page loads
# cards with a line about the run (``stage_note``)
NOTE_STAGES = ("url", "decontamination", "quality_model", "near_dedup")
_HIST_W, _HIST_H = 330, 120
_COLORS = {"passed": "#4c78a8", "dropped": "#e45756"}
LEGEND = ("<span style='font-size:12px'>histograms: <span style='color:{passed}'>■</span> passed "
          "<span style='color:{dropped}'>■</span> dropped</span>").format(**_COLORS)


def _slider_format(step: float) -> str:
    """A numeral.js format that shows every digit a slider of ``step`` can hold.

    >>> _slider_format(1), _slider_format(0.05), _slider_format(0.001)
    ('0,0', '0,0.00', '0,0.000')
    """
    text = repr(float(step)).rstrip("0").rstrip(".")
    d = len(text.split(".")[1]) if "." in text else 0
    return "0,0" + ("." + "0" * d if d else "")


def _histogram_figure(k) -> tuple[Any, Any, Any]:
    """A small stacked histogram (passed below, dropped on top) with the cutoff drawn, updated in place."""
    from bokeh.models import ColumnDataSource, GlyphRenderer, Grid, Quad, Span
    from bokeh.plotting import figure

    source = ColumnDataSource({"left": [], "right": [], "passed": [], "top": [], "bottom0": []})
    fig = figure(width=_HIST_W, height=_HIST_H, toolbar_location=None, tools="hover", y_axis_type="linear",
                 title=None, tooltips=[("bin", "@left{0,0.[000]} – @right{0,0.[000]}"), ("passed", "@passed{0,0}"),
                                       ("dropped", "@dropped{0,0}")])
    # no legend, no grid, no title, few ticks, and the bars' renderers without the selection and mute
    # glyphs a figure adds: each model costs the page's load and the browser style lookups on every
    # repaint, and a move repaints every open histogram (the colours are named once, above the cards)
    for bottom, top, color in (("bottom0", "passed", _COLORS["passed"]), ("passed", "top", _COLORS["dropped"])):
        fig.renderers.append(GlyphRenderer(data_source=source, glyph=Quad(
            left="left", right="right", bottom=bottom, top=top, fill_color=color, line_color=color)))
    fig.center = [r for r in fig.center if not isinstance(r, Grid)]
    fig.xaxis.ticker.desired_num_ticks = 4
    fig.yaxis.ticker.desired_num_ticks = 3
    fig.xaxis.axis_label = k.signal
    fig.xaxis.axis_label_text_font_size = "8pt"
    fig.yaxis.major_label_text_font_size = fig.xaxis.major_label_text_font_size = "8pt"
    fig.min_border_left = 30
    span = Span(location=float(k.value), dimension="height", line_color="#222", line_width=2, line_dash="dashed",
                name=f"cutoff {lab_knobs.split_name(k.name)[0]}")
    source.name = f"histogram {lab_knobs.split_name(k.name)[0]}"
    fig.add_layout(span)
    return fig, source, span


class KnobControl:
    """One knob's widgets, kept equal to the selection's value."""

    def __init__(self, k: lab_knobs.Knob, set_value: Callable[[str, Any], None]) -> None:
        self.knob, self.set_value = k, set_value
        self.syncing = False
        self.slider = self.box = self.widget = self.note = None
        self.hist = self.source = self.span = None
        self.hist_place = None  # numeric knobs with a signal: where their histogram goes
        self.view = None  # the widgets, built when its card is first opened (``build``)

    def build(self) -> pn.Column:
        """This knob's widgets (made once; a closed card's knobs have none: ~35 knobs' widgets fewer on
        each new page, about a second of the server's time per session). They start at the run's value:
        ``show`` then sets the selection's."""
        if self.view is not None:
            return self.view
        k = self.knob
        self.note = HTML("", margin=(0, 5), styles={"font-size": "12px", "color": "#555"})
        self.title = HTML(_title(k), margin=(0, 5), styles={"font-size": "13px"})
        self.label = pn.Row(self.title,
                            pn.widgets.TooltipIcon(value=f"{k.help} Default {fmt.value(k.default)} {k.unit}: "
                                                         f"{k.source}.", margin=(0, 0)),
                            margin=0)
        if k.kind == "switch":
            self.widget = pn.widgets.Checkbox(label=f"{k.name}", value=k.value, margin=(0, 5))
            self.widget.param.watch(lambda e: self._moved(e.new), "value")
            parts = [pn.Row(self.widget, self.label[1], margin=0)]
        elif k.kind == "choice":
            self.widget = pn.widgets.Select(label=k.name, options=list(k.options), value=k.value, width=140)
            self.widget.param.watch(lambda e: self._moved(e.new), "value")
            parts = [self.label, self.widget]
        elif k.kind == "languages":
            self.widget = pn.widgets.MultiChoice(label=k.name, options=list(k.options), value=list(k.value), width=330)
            self.widget.param.watch(lambda e: self._moved(tuple(e.new)), "value")
            parts = [self.label, self.widget]
        else:
            integer = k.kind == "integer"
            lo, hi, step = k.lo, k.hi, k.step
            if lo is None or hi is None or hi <= lo:
                self.slider = None
            else:
                cls = pn.widgets.IntSlider if integer else pn.widgets.FloatSlider
                kw = {} if integer else {"format": _slider_format(step)}
                self.slider = cls(label="", start=int(lo) if integer else float(lo), end=int(hi) if integer else float(hi),
                                  step=int(step) if integer else float(step), value=k.value, width=215,
                                  show_value=False, margin=(0, 5), **kw)
                no_debounce(self.slider)  # a release comes alone: no need to wait for more
                self.slider.param.watch(lambda e: self._moved(lab_knobs.snap(self.knob, e.new)), "value_throttled")
            self.box = (pn.widgets.IntInput if integer else pn.widgets.FloatInput)(
                label="", value=k.value, width=105, margin=(0, 5), css_classes=["knob-box"],
                **({} if integer else {"format": "0.[0000000000]"}))  # every digit: the box shows the value applied
            self.box.param.watch(lambda e: e.new is not None and self._moved(e.new), "value")
            row = [w for w in (self.slider, self.box) if w is not None]
            parts = [self.label, pn.Row(*row, margin=0)]
            if k.signal:  # the histogram is drawn when its card is first opened (see with_histogram)
                self.hist_place = pn.Column(margin=0)
                parts += [self.hist_place, self.note]
        self.view = pn.Column(*parts, margin=(2, 0, 8, 0), width=360,
                              css_classes=["knob", "knob-" + lab_knobs.split_name(k.name)[0].replace(".", "-")])
        return self.view

    def with_histogram(self, log: bool, value: Any) -> bool:
        """Draw this knob's histogram (once; a closed card's knobs have none: ~30 figures would cost each
        new page seconds of the server's time); True when it has one."""
        if self.hist_place is None:
            return False
        if self.hist is None:
            self.hist, self.source, self.span = _histogram_figure(self.knob)
            self.span.location = float(value)  # the selection's cutoff, which may differ from the run's
            if log:
                from bokeh.models import LogScale

                self.hist.y_scale = LogScale()
            if self.slider is not None:  # the cutoff follows the handle in the browser, before the release
                self.slider.jscallback(value="span.location = cb_obj.value", args={"span": self.span})
            self.hist_place.append(pn.pane.Bokeh(self.hist, margin=(0, 5)))
        return True

    @property
    def name(self) -> str:
        return self.knob.name

    def retarget(self, k: lab_knobs.Knob) -> None:
        """Control ``k`` from now on: the same threshold for another language (or for every language)."""
        if k.name == self.knob.name:
            return
        self.knob = k
        if self.view is not None:
            self.title.object = _title(k)

    def _moved(self, value: Any) -> None:
        if not self.syncing:
            self.set_value(self.knob.name, value)

    def show(self, value: Any, *, enabled: bool = True, moved: bool = False) -> None:
        """Show the selection's ``value`` (after a move, a reset or a restored link) without moving it again;
        ``moved``: this knob just moved (its cutoff is sent again). Nothing before ``build``."""
        if self.view is None:
            return
        self.syncing = True
        try:  # only what differs is set (a page syncs ~45 knobs on every move)
            if self.widget is not None:
                shown = list(value) if isinstance(value, tuple) else value
                if not _same(self.widget.value, shown):
                    self.widget.value = shown
            if self.box is not None and not _same(self.box.value, value):
                self.box.value = value
            if self.slider is not None:
                v = min(max(value, self.slider.start), self.slider.end)
                if not _same(self.slider.value, v):
                    self.slider.value = v
            if self.span is not None:
                loc = float(value)
                if moved and self.span.location == loc:
                    # the browser may still draw an earlier release's cutoff (its drag echoed back and
                    # then overwritten): send the value again
                    self.span.location = None
                if self.span.location != loc:
                    self.span.location = loc
            for w in (self.slider, self.box):
                if w is not None and w.disabled != (not enabled):
                    w.disabled = not enabled
        finally:
            self.syncing = False


class KnobPanel:
    """The sidebar: a card per stage with its knobs; keeps every control equal to the selection."""

    def __init__(self, sel: Selection, dispatch: Dispatch, report: Callable[[str], None]) -> None:
        self.sel, self.dispatch, self.report = sel, dispatch, report
        self.log_y = pn.widgets.Checkbox(label="log scale (histograms)", value=False)
        self.legend = HTML(LEGEND, margin=(0, 5))
        self.controls: dict[str, KnobControl] = {}
        # a line about the run under some cards (what the URL lists block; no evaluation set, no model),
        # filled when the card is first opened
        self.notes = {stage: HTML("", margin=(0, 5), name=f"{stage} note", css_classes=[f"{stage}-note"],
                                          styles={"font-size": "12px"}) for stage in NOTE_STAGES}
        self.cards: dict[str, pn.Card] = {}
        self.by_stage: dict[str, list[KnobControl]] = {}
        self.filled: set[str] = set()  # stages whose card holds its knobs (opened once)
        for k in sel.knobs():
            c = KnobControl(k, self._set)
            self.controls[lab_knobs.split_name(k.name)[0]] = c  # by stage.key: the language only retargets it
            self.by_stage.setdefault(k.stage, []).append(c)
        for stage in STAGE_NAMES:
            if stage not in self.by_stage:
                continue
            is_open = stage in OPEN_STAGES
            # a closed card holds its knobs only once opened: ~35 knobs' widgets fewer on each new page (their
            # models cost the server a second, and every style recalculation of the browser's page scales with them)
            card = pn.Card(*(self._parts(stage) if is_open else [_unopened(len(self.by_stage[stage]))]), title=stage,
                           collapsed=not is_open, width=380, margin=(4, 0), name=f"card {stage}")
            card.param.watch(lambda e, s=stage: None if e.new else self._opened(s), "collapsed")
            self.cards[stage] = card
            if is_open:
                self.filled.add(stage)
                self._reports(stage)
        self.log_y.param.watch(lambda e: self._log_scale(e.new), "value")
        self.view = pn.Column(pn.Row(self.log_y, self.legend, margin=0), *self.cards.values(), width=400, scroll=True, height=820,
                              name="knobs", css_classes=["knobs"])
        self.sync()

    def _set(self, name: str, value: Any) -> None:
        try:
            self.sel.set(name, value)
        except LabError as e:
            self.report(str(e))
            self.sync()  # the refused value goes back to the applied one

    def _parts(self, stage: str) -> list:
        """A card's contents: its reset button, its line about the run (some cards), its knobs' widgets."""
        reset = pn.widgets.Button(label=f"reset {stage}", color="light", width=150, margin=(0, 5))
        reset.on_click(lambda _, s=stage: self._reset(s))
        note = [self.notes[stage]] if stage in self.notes else []
        return [reset, *note, *(c.build() for c in self.by_stage[stage])]

    def _opened(self, stage: str) -> None:
        if stage not in self.filled:
            self.filled.add(stage)
            self.cards[stage].objects = self._parts(stage)
            self.sync()  # the new widgets show the selection's values
            self._reports(stage)
        self.refresh_histograms([stage])  # drawn now if never opened before

    def _reports(self, stage: str) -> None:
        """Once per card, off the loop: its signals made ready for their first move (``Selection.prepare``);
        its line about its run (not its thresholds): what the URL lists block (a query); that the run has
        no evaluation set or no model (its config)."""
        signals = sorted({c.knob.signal for c in self.by_stage[stage] if c.knob.signal})
        if signals:
            self.dispatch.submit(f"prepare:{stage}", lambda: self.sel.prepare(signals), _ignore, pool=DETAILS)
        if stage not in self.notes:
            return
        if stage != "url":
            self.notes[stage].object = stage_note(stage, self.sel.config)
            return
        has_list = bool(self.sel.base.stages.url.blocklist)

        def show(fut: Future) -> None:
            try:
                self.notes["url"].object = url_report_html(fut.result(), has_list)
            except LabError as e:
                self.report(str(e))

        self.dispatch.submit("urls", self.sel.urls, show, pool=DETAILS)

    def _reset(self, stage: str) -> None:
        self.sel.reset(stage)

    def set_language(self) -> None:
        """The thresholds that may differ by language become the selection's language's (or every
        language's); the controls show their values and the open histograms that language's documents."""
        for k in self.sel.knobs():
            self.controls[lab_knobs.split_name(k.name)[0]].retarget(k)
        self.sync()
        self.refresh_histograms()

    def _log_scale(self, log: bool) -> None:
        from bokeh.models import LinearScale, LogScale

        for c in self.controls.values():
            if c.hist is not None:
                c.hist.y_scale = LogScale() if log else LinearScale()
        self.refresh_histograms()

    def sync(self) -> None:
        """Every control shows the selection's value; a disabled stage's card is greyed out."""
        values = self.sel.values()
        for c in self.controls.values():
            enabled = values.get(f"{c.knob.stage}.enabled", True) or c.knob.key == "enabled"
            c.show(values[c.name], enabled=enabled, moved=c.name in self.sel.changed)
        if "near_dedup" in self.filled:  # its line follows the threshold
            self.notes["near_dedup"].object = stage_note("near_dedup", self.sel.config)
        for stage, card in self.cards.items():
            on = values.get(f"{stage}.enabled", True)
            card.header_background = "" if on else "#e6e6e6"
            card.title = stage if on else f"{stage} (disabled)"
            card.styles = {} if on else {"opacity": "0.6"}

    def open_stages(self) -> list[str]:
        return [s for s, card in self.cards.items() if not card.collapsed]

    def refresh_histograms(self, stages: list[str] | None = None) -> None:
        """Recompute the histograms of the open cards (or of ``stages``), off the loop: one query per card
        (its signals binned over one evaluation of the rules; a minimum and a maximum share a signal)."""
        for kind, compute, show in self.histogram_jobs(stages):
            self.dispatch.submit(kind, compute, show)

    def histogram_jobs(self, stages: list[str] | None = None) -> list[tuple[str, Callable, Callable]]:
        """``(kind, compute, show)`` per open card (or per stage of ``stages``) whose histograms to redraw
        for the current selection: ``compute`` off the loop, ``show(future)`` on it."""
        cfg, unit, log, lang = self.sel.config, self.sel.unit, self.log_y.value, self.sel.language
        wanted = set(stages or self.open_stages())
        values = self.sel.values()
        by_stage: dict[str, dict[str, list[KnobControl]]] = {}
        for c in self.controls.values():
            if c.knob.stage in wanted and c.with_histogram(log, values[c.name]):
                by_stage.setdefault(c.knob.stage, {}).setdefault(c.knob.signal, []).append(c)
        jobs = []
        for stage, by_signal in by_stage.items():
            def compute(sigs=list(by_signal)):
                hs = self.sel.histograms(sigs, config=cfg, lang=lang)
                return {sig: _histogram_data(hs[sig], unit, log) for sig in sigs}

            jobs.append((f"hist:{stage}", compute, lambda fut, b=by_signal: self._show_histograms(b, fut, unit)))
        return jobs

    def _show_histograms(self, by_signal: dict[str, list[KnobControl]], fut: Future, unit: str) -> None:
        try:
            data = fut.result()
        except LabError as e:
            self.report(str(e))
            return
        label = {"docs": "documents", "bytes": "bytes", "tokens": "tokens"}[unit]
        for sig, controls in by_signal.items():
            for c in controls:
                old = c.source.data
                if list(old.get("left", [])) == data[sig]["left"] and list(old.get("right", [])) == data[sig]["right"]:
                    # the same bins (a threshold move): only the counts are sent
                    c.source.data.update({k: data[sig][k] for k in ("passed", "dropped", "top", "bottom0")})
                else:
                    c.source.data = dict(data[sig])
                if c.hist.yaxis.axis_label != label:
                    c.hist.yaxis.axis_label = label
                    c.hist.yaxis.axis_label_text_font_size = "8pt"

    def show_change(self, change: dict | None, names: list[str]) -> None:
        """Under the knobs the last change moved: what it newly drops and keeps, in every unit."""
        for c in self.controls.values():
            if c.note is not None:
                c.note.object = _change_line(change) if change is not None and c.name in names else ""


def stage_note(stage: str, cfg) -> str:
    """Under the decontamination or quality_model card, when the config leaves its knob nothing to cut; under
    the near_dedup card, the expected pair recall at its threshold (``recall_note``).

    >>> from lab.config import Config
    >>> "No model (stages.quality_model.model)" in stage_note("quality_model", Config())
    True
    >>> "No evaluation sets" in stage_note("decontamination", Config()), stage_note("url", Config())
    (True, '')
    """
    if stage == "near_dedup":
        return recall_note(cfg.stages.near_dedup)
    if stage == "quality_model" and not cfg.stages.quality_model.model:
        text = ("No model (stages.quality_model.model): no document has a score and none is dropped. Train one on "
                "the Labels tab (or <code>corpus-lab train-quality</code>), set it and run again.")
    elif stage == "decontamination" and not cfg.stages.decontamination.eval_sets:
        text = ("No evaluation sets (stages.decontamination.eval_sets): no document matches. List them and run again; "
                "the documents and tokens each set hits show under the funnel table.")
    else:
        return ""
    return f"<p style='margin:2px 0;color:#555'>{text}</p>"


def recall_note(nd: near_dedup.Config, threshold: float | None = None) -> str:
    """The expected pair recall at ``threshold`` (default: the config's) as a line (``near_dedup.recall_line``),
    or below 0.7 its warning in orange (``near_dedup.recall_warning``): under the near_dedup card and in the
    Dedup tab.

    >>> from lab.stages.near_dedup import Config
    >>> recall_note(Config())  # doctest: +NORMALIZE_WHITESPACE
    "<p style='margin:2px 0;color:#555'>near_dedup: expected pair recall 0.92 at Jaccard 0.80 (14 bands x 8 rows;
    a pair exactly at the threshold)</p>"
    >>> "⚠ near_dedup: expected pair recall 0.05 at Jaccard 0.50 is below 0.7" in recall_note(Config(), 0.5)
    True
    """
    warning = near_dedup.recall_warning(nd, threshold)
    if warning:
        return f"<p style='margin:2px 0;color:#a15c00'>⚠ {html.escape(warning)}</p>"
    return f"<p style='margin:2px 0;color:#555'>{html.escape(near_dedup.recall_line(nd, threshold))}</p>"


def url_report_html(df: pl.DataFrame, has_list: bool) -> str:
    """The url card's line: the run's documents with and without a URL, and per blocklist category the
    documents on it (``lab.query.urls``).

    >>> df = pl.DataFrame({"what": ["no URL", "URL, not blocked", "blocked: ut1/gambling"], "documents": [5, 20, 2]})
    >>> url_report_html(df, True)  # doctest: +NORMALIZE_WHITESPACE
    "<p style='margin:2px 0'>URLs: 22 documents with one, 5 without (they pass); on the blocklist:
    <b>ut1/gambling</b> 2 documents</p>"
    >>> url_report_html(df.head(2), False)[-60:]
    'without (they pass); no blocklist (stages.url.blocklist)</p>'
    """
    n = dict(df.iter_rows())
    blocked = [(w.removeprefix("blocked: "), d) for w, d in df.iter_rows() if w.startswith("blocked: ")]
    with_url = n.get("URL, not blocked", 0) + sum(d for _, d in blocked)
    if blocked:
        lists = "on the blocklist: " + "; ".join(f"<b>{html.escape(c)}</b> {fmt.count(d)} documents" for c, d in blocked)
    else:
        lists = "on the blocklist: none" if has_list else "no blocklist (stages.url.blocklist)"
    return (f"<p style='margin:2px 0'>URLs: {fmt.count(with_url)} documents with one, {fmt.count(n.get('no URL', 0))} "
            f"without (they pass); {lists}</p>")


def _title(k: lab_knobs.Knob) -> str:
    """A knob's heading: its key, unit, published default and source; a language's threshold says whose.

    >>> _title(lab_knobs.Knob("c4", "min_sentences", "integer", 3, unit="sentences", default=3, source="C4"))
    "<b>min_sentences</b> <span style='color:#666'>· sentences · default 3 (C4)</span>"
    >>> "for <b>de</b> documents" in _title(lab_knobs.Knob("c4", "min_sentences", "integer", 3, lang="de"))
    True
    """
    who = f" <span class='knob-lang' style='color:#7a3e9d'>· for <b>{html.escape(k.lang)}</b> documents</span>" \
        if k.lang else ""
    return (f"<b>{k.key}</b> <span style='color:#666'>· {k.unit} · default {fmt.value(k.default)}"
            f" ({k.source})</span>{who}")


def _ignore(fut: Future) -> None:
    """Nothing to show (work done ahead); an error shows with the query that needs it."""


def _unopened(n: int) -> pn.pane.HTML:
    return HTML(f"<span style='color:#777'>{n} knob{'s' if n != 1 else ''}</span>", margin=(0, 5))


def _same(a: Any, b: Any) -> bool:
    """Equal and of the same kind (``1 == 1.0 == True``, but a box holding 1 must be set to 1.0)."""
    return a == b and type(a) is type(b)


def _histogram_data(h: pl.DataFrame, unit: str, log: bool) -> dict[str, list]:
    """A histogram's columns as its figure draws them (passed below, dropped stacked on top).

    >>> h = pl.DataFrame({"bin_lo": [None, 0.0, 0.5], "bin_hi": [None, 0.5, 1.0], "passed_docs": [1, 0, 3],
    ...                   "dropped_docs": [0, 2, 1]})
    >>> _histogram_data(h, "docs", log=True)["top"]
    [2, 4]
    """
    # plain lists: a polars filter of a 40-row frame costs ~2 ms (its query engine), nine per slider move
    cols = [h[c].to_list() for c in ("bin_lo", "bin_hi", f"passed_{unit}", f"dropped_{unit}")]
    rows = [r for r in zip(*cols) if r[0] is not None]  # the missing-signal row has no edges
    left, right, passed, dropped = (list(c) for c in zip(*rows)) if rows else ([], [], [], [])
    floor = 0.5 if log else 0  # a log axis has no 0
    return {"left": left, "right": right, "passed": [max(p, floor) for p in passed], "dropped": dropped,
            "top": [max(p + d, floor) for p, d in zip(passed, dropped)], "bottom0": [floor] * len(left)}


def _change_line(change: dict) -> str:
    def amounts(d: dict) -> str:
        return " / ".join(fmt.amount(d[u], u) for u in ("docs", "bytes", "tokens") if u in d)

    return (f"this change drops <b>{amounts(change['dropped'])}</b> more"
            + (f", keeps {amounts(change['kept'])} more" if change["kept"]["docs"] else ""))
