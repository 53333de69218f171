"""The corpus-lab dashboard (Panel): judge every threshold, and every tab follows the same selection.

``create(run_dir)`` builds one session's page: an ``apps.store.Selection`` (the session's store)
and one view per tab over it (``apps.views``); ``serve(run_dir, ...)`` serves it (``corpus-lab
serve``). Each browser session gets its own store and views; the run's signals are loaded once per
process (``lab.query.open_run(in_memory=True)``) and every query takes its own cursor, so sessions
never share one. Work runs on the process's query threads (``apps.dispatch``), answers reach the
page as one message each. The selection lives in the page's URL: a link restores it. Nothing here
reads files but through ``lab``: the server exposes no static directory.
"""

from __future__ import annotations

import gc
from pathlib import Path

import panel as pn

from apps.dispatch import Dispatch, WhenShown, collect_when_idle
from apps.store import Selection
from apps.views.dedup import DedupTab
from apps.views.export import ExportTab
from apps.views.funnel import FunnelTab
from apps.views.labels import LabelsTab
from apps.views.mixture import MixtureTab
from apps.views.planner import PlannerTab
from apps.views.tokens import TokensTab
from apps.workarounds import HTML
from lab import query
from lab.errors import LabError

CSS = """
.bk-panel-models-tabulator-DataTabulator, .tabulator { font-size: 12px; }
"""


class Dashboard:
    """One session's page: the store, the tabs, and the link between the selection and the URL."""

    def __init__(self, run_dir: str | Path, *, link: str = "", user: str = "", config: str | Path | None = None) -> None:
        self.sel = Selection(run_dir, user=user or "")
        self.link_error = ""
        if link:
            try:
                self.sel.restore(link)
            except LabError as e:
                self.link_error = f"The link's state could not be restored: {e}"
        elif config is not None:  # a fresh page starts at the config's thresholds (a link holds its own)
            try:
                self.sel.load_config(config)
            except LabError as e:
                self.link_error = f"The config {config} could not be loaded: {e}"
        dispatch = Dispatch()
        self.tabs = None
        self.dedup = DedupTab(self.sel, dispatch, self._when_shown("Dedup clusters"))
        self.funnel = FunnelTab(self.sel, dispatch, open_cluster=self._open_cluster)
        self.labels = LabelsTab(self.sel, dispatch, self._show_docs, self._when_shown("Labels"))
        self.planner = PlannerTab(self.sel, dispatch, self._when_shown("Planner"))
        self.export = ExportTab(self.sel, self._when_shown("Export"))
        self.tokens = TokensTab(self.sel, dispatch, self._when_shown("Fertility & packing"))
        self.mixture = MixtureTab(self.sel, dispatch, self._when_shown("Mixture"))
        self.tabs = pn.Tabs(self.funnel.view, self.labels.view, self.dedup.view, self.tokens.view,
                            self.mixture.view, self.planner.view, self.export.view, dynamic=True,
                            sizing_mode="stretch_width")
        if self.link_error:
            self.funnel.report(self.link_error)
        # the URL follows the selection in the message that shows its numbers (the browser's history
        # update and its echo of the new address come after the numbers, not before them)
        self.funnel.with_numbers.append(self._to_url)
        # the tabs behind the Funnel compute when opened, not on every slider release
        self.followers = [self.labels, self.dedup, self.tokens, self.mixture, self.planner, self.export]
        self.tabs.param.watch(self._opened, "active")
        self.view = pn.Column(HTML(f"<h2 style='margin:4px 0'>corpus-lab · <code>{self.sel.run_dir}</code></h2>"),
                              self.tabs, sizing_mode="stretch_width", stylesheets=[CSS])

    def _when_shown(self, name: str) -> WhenShown:
        """A tab's work, done only while the tab named ``name`` is the one shown."""
        return WhenShown(lambda: self.tabs is not None and self.tabs.objects[self.tabs.active].name == name)

    def _opened(self, event) -> None:
        for tab in self.followers:
            if self.tabs.objects[event.new] is tab.view:
                tab.shown.opened()

    def _open_cluster(self, cluster_id: int) -> None:
        self.tabs.active = self.tabs.objects.index(self.dedup.view)
        self.dedup.open(cluster_id)

    def _show_docs(self, doc_ids: list[int], note: str) -> None:
        self.funnel.viewer.show_ids(doc_ids, note)
        self.tabs.active = 0

    def _to_url(self, _=None) -> None:
        loc = pn.state.location
        if loc is not None:
            url = self.sel.url()
            loc.search = ("?" + url) if url else ""


def create(run_dir: str | Path, config: str | Path | None = None) -> pn.viewable.Viewable:
    """One session's dashboard for a run directory (the state of the page's URL restored; without one, the
    thresholds of ``config`` when given: a calibrated config, ``corpus-lab calibrate``)."""
    # the grid's scripts load with the page: no grid is on the first tab, and the tabs behind it render later
    pn.extension("tabulator")
    loc = pn.state.location
    link = loc.search.lstrip("?") if loc is not None and loc.search else ""
    return Dashboard(run_dir, link=link, user=pn.state.user or "", config=config).view


def serve(run_dir: str | Path, *, address: str = "127.0.0.1", port: int = 5006, basic_auth: str | None = None,
          show: bool = False, threaded: bool = False, config: str | Path | None = None):
    """Serve the dashboard (Panel/Bokeh server); ``basic_auth``: a password, or a JSON file of users;
    ``config``: pages open at its thresholds (checked now: a config that is not thresholds of this run
    is refused before serving)."""
    query.open_run(run_dir, in_memory=True)  # load once, before the first session
    if config is not None:
        Selection(run_dir).load_config(config)  # a ConfigError names what is wrong, before the server starts
    # what is loaded now lives as long as the server (the modules, the run): out of the collector's reach,
    # so a full collection scans only the sessions' objects (~35 instead of ~135 ms with one session open:
    # a pause that otherwise lands in the middle of a slider's answer)
    gc.collect()
    gc.freeze()
    collect_when_idle()  # and the sessions' garbage is collected between answers, not during one
    kwargs = {"basic_auth": basic_auth, "cookie_secret": _cookie_secret()} if basic_auth else {}
    return pn.serve({"/": lambda: create(run_dir, config)}, address=address, port=port, show=show, threaded=threaded,
                    title="corpus-lab", websocket_origin=[f"{address}:{port}", f"localhost:{port}"], **kwargs)


def _cookie_secret() -> str:
    import secrets

    return secrets.token_hex(16)
