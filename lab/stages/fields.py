"""fields: a stage config field declared together with what a person needs to move it.

``knob(default, unit=..., help=...)`` is ``dataclasses.field(default=default)`` carrying metadata:
``unit`` (what the number counts: "words", "fraction of lines", "Jaccard"), ``help`` (one plain
sentence: what a document must satisfy to be kept) and, when it is not the stage module's
``SOURCE``, ``source`` (where the default comes from: the paper or filter it is published in).
``lab.knobs`` reads it to label each control; the default itself is the published one.
"""

from __future__ import annotations

import dataclasses
from typing import Any


def knob(default: Any, *, unit: str, help: str, source: str | None = None) -> Any:
    """A dataclass field with a default and its unit, help and (optional) source as metadata.

    >>> f = knob(50, unit="words", help="A kept document has at least this many words.")
    >>> f.default, f.metadata["unit"]
    (50, 'words')
    """
    meta = {"unit": unit, "help": help}
    if source is not None:
        meta["source"] = source
    return dataclasses.field(default=default, metadata=meta)
