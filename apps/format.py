"""How the dashboard writes numbers and documents: large counts short, ids exact, text escaped."""

from __future__ import annotations

import html
import json
from typing import Any

_SUFFIXES = ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k"))
_BYTES = ((1e15, "PB"), (1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "KB"))


def count(n: float | None) -> str:
    """A count for people: exact below 10,000, then 1 decimal and a suffix.

    >>> count(7), count(9_999), count(1_234_567), count(3_400_000_000), count(None)
    ('7', '9,999', '1.2M', '3.4B', '–')
    """
    if n is None:
        return "–"
    if abs(n) < 10_000:
        return f"{n:,.0f}" if float(n).is_integer() else f"{n:,.2f}"
    for div, suffix in _SUFFIXES:
        if abs(n) >= div:
            return f"{n / div:.1f}{suffix}"
    return f"{n:,.0f}"


def size(n: float | None) -> str:
    """Bytes for people.

    >>> size(512), size(2_100_000), size(None)
    ('512 B', '2.1 MB', '–')
    """
    if n is None:
        return "–"
    for div, suffix in _BYTES:
        if abs(n) >= div:
            return f"{n / div:.1f} {suffix}"
    return f"{n:,.0f} B"


def amount(n: float | None, unit: str) -> str:
    """``n`` of ``unit`` (docs, bytes or tokens) for people.

    >>> amount(1_500_000, "tokens"), amount(3_000, "bytes")
    ('1.5M tokens', '3.0 KB')
    """
    if unit == "bytes":
        return size(n)
    return f"{count(n)} {'documents' if unit == 'docs' else unit}"


def share(x: float | None) -> str:
    """A share as a percentage with two decimals (a retention, a precision).

    >>> share(0.27272727), share(None)
    ('27.27%', '–')
    """
    return "–" if x is None else f"{x:.2%}"


def value(v: Any) -> str:
    """A threshold or signal value exactly as the config holds it: no rounding, ids and hashes as text.

    >>> value(0.7), value(7855438623749090668), value(("en", "de")), value(True)
    ('0.7', '7855438623749090668', 'en, de', 'true')
    """
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple)):
        return ", ".join(value(x) for x in v)
    if isinstance(v, float):
        return repr(v)
    return str(v)


def signal(v: Any, threshold: Any = None) -> str:
    """A signal's value, as an integer when its threshold is one (word counts come back as floats).

    >>> signal(25.0, "70"), signal(0.25, "0.3"), signal(None)
    ('25', '0.25', '–')
    """
    if v is None:
        return "–"
    if isinstance(v, float) and v.is_integer() and threshold is not None and "." not in str(threshold):
        return str(int(v))
    return value(v)


def text(s: str | None) -> str:
    """A document's text as HTML that shows it verbatim (markup is text, never rendered).

    >>> text("<script>alert(1)</script>")
    '&lt;script&gt;alert(1)&lt;/script&gt;'
    """
    return html.escape(s or "", quote=True)


def signals_table(signals_json: str | None) -> str:
    """A document's signals (``lab.query.documents``' JSON column) as a small HTML table."""
    if not signals_json:
        return ""
    rows = "".join(f"<tr><td><code>{html.escape(k)}</code></td><td style='text-align:right'>{html.escape(value(v))}</td></tr>"
                   for k, v in json.loads(signals_json).items())
    return f"<table class='signals'>{rows}</table>"
