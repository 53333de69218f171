"""A text pane whose updates send only its text.

Panel's HTML pane sends every property of its model when its ``object`` changes, stylesheets
included, and builds those stylesheets anew each time: every new text also ships a new stylesheet
model that the page links into the pane's shadow root and styles again. A slider release changes
about ten texts (the funnel table, the Kept line, the notes, the pager, the open document), so the
page did that about ten times per release. ``HTML`` sends the text alone; everything else about the
pane (visibility, styles, size) still follows its parameters as usual.
"""

from __future__ import annotations

import panel as pn


class HTML(pn.pane.HTML):
    """``pn.pane.HTML`` whose new ``object`` reaches the page as one ``text`` change."""

    def _update(self, ref, model) -> None:
        text = self._get_properties(model.document).get("text")
        if text is not None and text != model.text:
            model.text = text
