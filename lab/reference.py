"""The config reference: every key of a config, its type, default and meaning, from the config classes.

Nothing here is written twice: a stage threshold's meaning is its ``knob`` metadata (help, unit,
source), any other field's is the comment beside (or just above) it in its class. ``markdown()``
is the reference ``corpus-lab reference`` prints; ``commented(cfg)`` is a config as YAML with the
same meaning beside each key (``corpus-lab run --dry-run``), loadable as it is.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import typing
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import yaml

from lab.config import BY_LANG, Config, InputConfig, PercentileRule, StagesConfig, type_name

_ITEMS = {"inputs": InputConfig, "percentiles": PercentileRule}  # lists of these
BY_LANG_MEANING = ("Per-language thresholds: {lang: {threshold: value}} (a language code as the lang signal "
                   "writes it; numeric thresholds of this stage); other languages keep the section's own values.")


@dataclass(frozen=True)
class Entry:
    key: str  # dotted; list items as key[].field
    type: str
    default: Any  # dataclasses.MISSING: required
    meaning: str


@lru_cache(maxsize=None)
def _comments(cls: type) -> dict[str, str]:
    """field -> the comment beside it in the class's source, else the comment lines just above it (none for
    a class made at run time, such as ``StagesConfig``: its fields are sections, explained by their own)."""
    out: dict[str, str] = {}
    above: list[str] = []
    try:
        source = inspect.getsource(cls)
    except (OSError, TypeError):
        return out
    for line in source.splitlines():
        s = line.strip()
        if s.startswith("#"):
            above.append(s.lstrip("# ").strip())
            continue
        m = re.match(r"(\w+)\s*:[^#]*?(?:#\s*(.*))?$", s)
        if m and not s.startswith(("def ", "class ", "@", "return")):
            text = m.group(2) or " ".join(above)
            if text and m.group(1) not in out:
                out[m.group(1)] = text.strip()
        above = []
    return out


def meaning(cls: type, f: dataclasses.Field) -> str:
    """What a field means, as one line."""
    meta = f.metadata
    if "help" in meta:
        module = inspect.getmodule(cls)
        source = meta.get("source") or getattr(module, "SOURCE", "")
        return f"{meta['help']} Unit: {meta['unit']}." + (f" Default from {source}." if source else "")
    return _comments(cls).get(f.name, "")


def _default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        return f.default_factory()  # type: ignore[misc]
    return dataclasses.MISSING


def entries(cls: type = Config, prefix: str = "") -> list[Entry]:
    """Every key of ``cls`` (nested sections flattened, list items as ``key[].field``), in file order."""
    out = []
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        key = prefix + f.name
        if cls is StagesConfig and f.name == BY_LANG:  # written inside each stage's section
            continue
        if f.name in _ITEMS and cls is Config:
            out.append(Entry(key, f"list of {_ITEMS[f.name].__name__}", [], meaning(cls, f)))
            out += entries(_ITEMS[f.name], key + "[].")
        elif dataclasses.is_dataclass(hints[f.name]):
            out += entries(hints[f.name], key + ".")
            if cls is StagesConfig and hints[f.name] is not StagesConfig:
                from lab.config import FIRST_BY_LANG_STAGE
                from lab.stages import STAGE_NAMES

                if STAGE_NAMES.index(f.name) >= STAGE_NAMES.index(FIRST_BY_LANG_STAGE):
                    out.append(Entry(f"{key}.{BY_LANG}", "mapping", {}, BY_LANG_MEANING))
        else:
            out.append(Entry(key, type_name(hints[f.name]), _default(f), meaning(cls, f)))
    return out


def _scalar(v: Any) -> str:
    """A value as YAML inline text.

    >>> _scalar(0.65), _scalar(["en", "de"]), _scalar(None), _scalar("a: b"), _scalar(())
    ('0.65', '[en, de]', 'null', "'a: b'", '[]')
    """
    if isinstance(v, tuple):
        v = list(v)
    return yaml.safe_dump([v], default_flow_style=True, width=10_000).strip()[1:-1]


def markdown() -> str:
    """The reference as a Markdown table."""
    rows = ["| key | type | default | meaning |", "|---|---|---|---|"]
    for e in entries():
        default = "(required)" if e.default is dataclasses.MISSING else f"`{_scalar(e.default)}`"
        rows.append(f"| `{e.key}` | {e.type.replace('|', '∣')} | {default} | {e.meaning.replace('|', '∣')} |")
    return "\n".join(rows) + "\n"


def commented(cfg: Config) -> str:
    """``cfg`` as YAML, each key with its meaning (and its default where the value differs) beside it."""
    lines: list[str] = []

    def note(cls: type, f: dataclasses.Field, value: Any) -> str:
        text = meaning(cls, f)
        d = _default(f)
        if d is not dataclasses.MISSING and not dataclasses.is_dataclass(d) and value != d:
            text += f" (default {_scalar(d)})"
        return f"  # {text}" if text else ""

    def emit(obj: Any, indent: str) -> None:
        for f in dataclasses.fields(obj):
            if isinstance(obj, StagesConfig) and f.name == BY_LANG:  # written inside each stage's section
                continue
            v = getattr(obj, f.name)
            if dataclasses.is_dataclass(v):
                lines.append(f"{indent}{f.name}:{note(type(obj), f, v)}")
                emit(v, indent + "  ")
                over = obj.overrides(f.name) if isinstance(obj, StagesConfig) else {}
                if over:
                    lines.append(f"{indent}  {BY_LANG}:  # {BY_LANG_MEANING}")
                    for lang, fields in over.items():
                        lines.append(f"{indent}    {_scalar(lang)}: {_scalar(fields)}")
            elif isinstance(v, tuple) and v and dataclasses.is_dataclass(v[0]):
                lines.append(f"{indent}{f.name}:  # {meaning(type(obj), f)}")
                for item in v:
                    for i, g in enumerate(dataclasses.fields(item)):
                        lead = "- " if i == 0 else "  "
                        w = getattr(item, g.name)
                        lines.append(f"{indent}{lead}{g.name}: {_scalar(w)}{note(type(item), g, w)}")
            else:
                lines.append(f"{indent}{f.name}: {_scalar(v)}{note(type(obj), f, v)}")

    emit(cfg, "")
    return "\n".join(lines) + "\n"
