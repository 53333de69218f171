"""Each of the dashboard's workarounds past Panel's public API (apps/workarounds.py) still does its
job, and the Panel behaviour it works around is still there: when one of these fails after a Panel
upgrade, the workaround can go (or must follow Panel's new private names)."""

from __future__ import annotations

import panel as pn
from bokeh.document import Document

from apps.workarounds import HTML, no_debounce, page_loaded


def _restyled(cls) -> tuple[int, str]:
    """How many of the pane's stylesheet models a new ``object`` replaced, and the text the model holds."""
    doc = Document()
    pane = cls("<p>a</p>", styles={"color": "red"})
    model = pane.get_root(doc)
    before = list(model.stylesheets)
    pane.object = "<p>b</p>"
    return sum(a is not b for a, b in zip(before, model.stylesheets)), model.text


def test_panels_html_pane_still_rebuilds_its_stylesheets_on_every_new_text():
    replaced, text = _restyled(pn.pane.HTML)
    assert replaced >= 1, "Panel's HTML pane now keeps its stylesheets: apps.workarounds.HTML can go"
    assert "b" in text


def test_our_html_pane_sends_the_text_alone():
    replaced, text = _restyled(HTML)
    assert replaced == 0 and "&lt;p&gt;b&lt;/p&gt;" in text
    pane = HTML("<p>x</p>", visible=True)
    model = pane.get_root(Document())
    pane.visible = False  # other parameters still reach the model
    assert model.visible is False


def test_page_loaded_reads_the_flag_panel_sets_when_a_page_loads():
    doc = Document()
    assert page_loaded(doc) is False
    pn.state._on_load(doc)  # what Panel runs when the browser reports the page loaded
    assert page_loaded(doc) is True


def test_a_slider_release_waits_for_more_events_unless_told_not_to():
    slider = pn.widgets.FloatSlider(start=0, end=1)
    assert slider._debounce > 0, "Panel no longer delays value_throttled: apps.workarounds.no_debounce can go"
    assert no_debounce(slider) is slider and slider._debounce == 0
    assert pn.widgets.FloatSlider(start=0, end=1)._debounce > 0  # the class default is untouched
