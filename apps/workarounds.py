"""Where the dashboard reaches past Panel's public API: each workaround here, with why, and a test
(tests/test_workarounds.py) that fails when Panel changes what it works around, so it can go.

- ``HTML``: Panel's HTML pane sends every property of its model when its ``object`` changes,
  stylesheets included, rebuilt each time; the page then restyles the pane. A slider release changes
  about ten texts, so ten restylings per release. ``HTML`` sends the text alone.
- ``page_loaded``: Panel can drop an ``onload`` callback registered while it runs a session's others;
  ``apps.dispatch`` then asks whether the page is loaded (``pn.state._loaded``) to show its first answers.
- ``no_debounce``: a slider's ``value_throttled`` waits ``_debounce`` ms for more events; a release comes
  alone, so the wait only delays the answer.
"""

from __future__ import annotations

import panel as pn


class HTML(pn.pane.HTML):
    """``pn.pane.HTML`` whose new ``object`` reaches the page as one ``text`` change; everything else
    about the pane (visibility, styles, size) still follows its parameters as usual."""

    def _update(self, ref, model) -> None:
        text = self._get_properties(model.document).get("text")
        if text is not None and text != model.text:
            model.text = text


def page_loaded(doc) -> bool:
    """Whether Panel has marked this session's page as loaded in the browser."""
    return bool(pn.state._loaded.get(doc))


def no_debounce(slider: pn.widgets.Widget) -> pn.widgets.Widget:
    """``slider`` with its release sent as soon as it comes."""
    slider._debounce = 0
    return slider
