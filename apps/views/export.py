"""The Export tab: the chosen thresholds as a config file under a new run name, what changed against
the run's config, and the command that runs it in batch."""

from __future__ import annotations

import html
import io

import panel as pn

from apps import format as fmt
from apps.dispatch import WhenShown
from apps.store import Selection
from apps.workarounds import HTML


def changes_html(changes: list) -> str:
    if not changes:
        return "<p>No threshold differs from the run's config.</p>"
    rows = "".join(f"<tr><td><code>{html.escape(c.name)}</code></td><td>{html.escape(fmt.value(c.before))}</td>"
                   f"<td><b>{html.escape(fmt.value(c.after))}</b></td><td>{html.escape(c.unit or '')}</td></tr>"
                   for c in changes)
    return ("<table class='changes'><tr><th>knob</th><th>run's config</th><th>exported</th><th>unit</th></tr>"
            f"{rows}</table>")


class ExportTab:
    def __init__(self, sel: Selection, shown: WhenShown | None = None) -> None:
        self.sel = sel
        self.shown = shown or WhenShown()  # hidden: follows the selection when opened
        self.changes = HTML(name="changes", sizing_mode="stretch_width")
        self.text = pn.pane.Markdown(name="config", sizing_mode="stretch_width")
        self.download = pn.widgets.FileDownload(callback=lambda: io.StringIO(self.sel.export_yaml()),
                                                filename="corpus-lab-config.yaml", label="Download config",
                                                color="primary", width=200)
        sel.param.watch(lambda e: self.shown.run(self.show), ["moved", "mixture"])
        self.view = pn.Column(self.download, self.changes, self.text, name="Export", sizing_mode="stretch_width")
        self.shown.run(self.show)

    def show(self) -> None:
        name = self.sel.run_name()
        self.changes.object = (f"<p>Run name: <b>{html.escape(name)}</b> (the explored run is "
                               f"<code>{html.escape(self.sel.base.name)}</code>: a batch run lands beside it)</p>"
                               + changes_html(self.sel.diff())
                               + ("<p><b>Mixture</b> changed on the Mixture tab: see <code>mixture:</code> below.</p>"
                                  if self.sel.config.mixture != self.sel.base.mixture else ""))
        self.text.object = (f"```yaml\n{self.sel.export_yaml()}```\n\nRun it in batch:\n\n"
                            f"    {self.sel.export_command()}")
