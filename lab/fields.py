"""fields: a stage config field declared together with what a person needs to move it.

``knob(default, unit=..., help=...)`` is ``dataclasses.field(default=default)`` carrying metadata: the
``unit``, a one-sentence ``help`` (what a kept document satisfies) and, when it is not the stage
module's ``SOURCE``, the ``source`` of the published default. ``lab.select.knobs`` reads it to label each
control. A knob is a threshold the lab can move without recomputing anything; any other field of a
stage config (such as MinHash's ``ngram``) decides how signals are computed. ``choices`` makes a knob a
pick from a fixed list, ``kind="languages"`` a list of language codes, and ``signal`` names the signal a
threshold applies to when the default config makes no rule to find it from. ``check`` is the one
validation helper of every config class: its ``ConfigError`` names the key, the value and what is allowed.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from lab.errors import ConfigError


def check(key: str, value: Any, ok: bool, allowed: str) -> None:
    """Raise a ConfigError naming ``key`` and ``value`` unless ``ok``; used in ``__post_init__``.

    >>> check("min_words", -1, False, ">= 0")
    Traceback (most recent call last):
    lab.errors.ConfigError: min_words=-1 is not allowed: must be >= 0
    """
    if not ok:
        raise ConfigError(f"{key}={value!r} is not allowed: must be {allowed}")


def knob(default: Any, *, unit: str, help: str, source: str | None = None, choices: tuple = (),
         kind: str | None = None, signal: str | None = None) -> Any:
    """A dataclass field with a default and its unit, help and (optional) source as metadata.

    >>> f = knob(50, unit="words", help="A kept document has at least this many words.")
    >>> f.default, f.metadata["unit"]
    (50, 'words')
    """
    meta: dict[str, Any] = {"unit": unit, "help": help}
    if source is not None:
        meta["source"] = source
    if choices:
        meta["choices"] = tuple(choices)
    if kind is not None:
        meta["kind"] = kind
    if signal is not None:
        meta["signal"] = signal
    return dataclasses.field(default=default, metadata=meta)


def knob_kind(f: dataclasses.Field, tp: Any) -> str | None:
    """A knob field's kind (``integer``, ``number``, ``switch``, ``choice`` or its declared ``kind``); None for a
    field not declared with ``knob`` (a signal parameter, not a threshold).

    >>> knob_kind(dataclasses.field(default=1, metadata={"help": "x"}), int), knob_kind(dataclasses.field(default=1), int)
    ('integer', None)
    """
    if "help" not in f.metadata:
        return None
    if "kind" in f.metadata:
        return f.metadata["kind"]
    if "choices" in f.metadata:
        return "choice"
    if tp is bool:
        return "switch"
    return {int: "integer", float: "number"}.get(tp)
