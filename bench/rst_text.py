"""Turn reStructuredText (Sphinx flavour) into the plain text a reader sees in the HTML.

Used by the benchmarks as a source of real English prose (`make_docs.py`); it was also the
reference text of the first HTML extraction benchmark (bench/HISTORY.md §3).

It is an approximation, not a docutils renderer: it drops markup, labels, comments and
hidden directives (index, toctree, module metadata, test setup), keeps the arguments of
object directives (`.. function:: dumps(obj)` -> `dumps(obj)`), turns roles into their
displayed text (`:func:`~json.dumps`` -> `dumps`, `:pep:`8`` -> `PEP 8`) and writes the
captions Sphinx adds ("Note", "New in version 3.2."). Scores are computed on lowercase
word tokens, so leftover punctuation does not matter.
"""

from __future__ import annotations

import re

# directives whose whole block (argument, options and indented body) renders nothing
# visible in the page's main text
_HIDDEN = {
    "index", "toctree", "module", "moduleauthor", "sectionauthor", "highlight",
    "include", "literalinclude", "currentmodule", "testsetup", "testcleanup",
    "tabularcolumns", "only", "image", "figure", "contents", "audit-event",
    "program", "raw", "c:namespace", "c:namespace-push", "c:namespace-pop",
    "default-role", "role", "meta", "highlightlang", "cssclass", "glossary-hidden",
}
# admonition-like directives: Sphinx prints a caption, then the indented body
_CAPTIONS = {
    "note": "Note", "warning": "Warning", "seealso": "See also", "important": "Important",
    "caution": "Caution", "tip": "Tip", "hint": "Hint", "attention": "Attention",
    "danger": "Danger", "error": "Error", "admonition": "",
    "impl-detail": "CPython implementation detail:",
    "versionadded": "New in version {arg}.", "versionchanged": "Changed in version {arg}:",
    "deprecated": "Deprecated since version {arg}:",
    "deprecated-removed": "Deprecated since version {arg}:",
    "availability": "Availability: {arg}.",
}

# directives whose body is shown verbatim, like a "::" literal block
_LITERAL_DIRECTIVES = {
    "code-block", "sourcecode", "code", "doctest", "testcode", "testoutput",
    "productionlist", "parsed-literal",
}

_DIRECTIVE = re.compile(r"^(\s*)\.\.\s+([\w:-]+)::\s*(.*)$")
_COMMENT_OR_LABEL = re.compile(r"^(\s*)\.\.(\s+|$)(?!\[)")
_ADORNMENT = re.compile(r"^\s*([=\-~^\"'`#*+<>:._])\1{3,}\s*$")
_TABLE_BORDER = re.compile(r"^\s*[+=\-| ]*[+=][+=\-| ]*$")
_OPTION = re.compile(r"^\s*:[\w-]+:(\s.*)?$")
_ROLE = re.compile(r":(?:[\w-]+:)*[\w-]+:`([^`]*)`")
_LINK = re.compile(r"`([^`<]*?)\s*<[^`>]*>`__?")
_NAMED_REF = re.compile(r"`([^`]+)`__?")
_LITERAL = re.compile(r"``(.+?)``")
_FOOTNOTE_REF = re.compile(r"\s*\[#?[\w-]*\]_")
_EMPHASIS = re.compile(r"\*\*?([^*\s][^*]*?)\*\*?")


def _role_text(match: re.Match) -> str:
    """Displayed text of one role, e.g. ``:func:`~a.b``` -> ``b``."""
    whole, content = match.group(0), match.group(1)
    role = whole[1 : whole.index(":`")]
    explicit = re.match(r"^(.*?)\s*<([^>]*)>$", content, flags=re.S)
    if explicit and explicit.group(1):
        return explicit.group(1)
    target = explicit.group(2) if explicit else content
    target = target.lstrip("!")
    if target.startswith("~"):
        target = target[1:].rsplit(".", 1)[-1]
    if role == "pep":
        return f"PEP {target}"
    if role == "rfc":
        return f"RFC {target}"
    return target


def strip_inline(line: str) -> str:
    """Remove inline reST markup from one line.

    >>> strip_inline("Use :func:`~json.dumps` or ``repr`` (see :pep:`8`).")
    'Use dumps or repr (see PEP 8).'
    >>> strip_inline("`JSON <https://json.org>`_ is *light*::")
    'JSON is light:'
    """
    line = _ROLE.sub(_role_text, line)
    line = _LINK.sub(r"\1", line)
    line = _LITERAL.sub(r"\1", line)
    line = _NAMED_REF.sub(r"\1", line)
    line = _FOOTNOTE_REF.sub("", line)
    line = _EMPHASIS.sub(r"\1", line)
    line = line.replace("\\ ", "").replace("\\", "")
    if line.rstrip().endswith("::"):
        head = line.rstrip()[:-2]
        line = head.rstrip() + ":" if head.strip() and not head.endswith(" ") else head.rstrip()
    return line


def strip_rst(text: str) -> str:
    """Plain text of a reST document: markup, labels and hidden directives removed.

    >>> print(strip_rst(".. _top:\\n\\nTitle\\n=====\\n\\n.. note::\\n   Be :term:`careful`.\\n"), end="")
    Title
    <BLANKLINE>
    Note
       Be careful.
    """
    out: list[str] = []
    skip_indent: int | None = None  # inside a hidden block: skip lines indented deeper
    options_indent: int | None = None  # right after a directive: skip its :option: lines
    literal_indent: int | None = None  # inside a literal block: keep lines verbatim
    pending_literal: int | None = None  # the last paragraph ended with "::"
    for raw in text.splitlines():
        indent = len(raw) - len(raw.lstrip())
        if pending_literal is not None and raw.strip():
            literal_indent = pending_literal if indent > pending_literal else None
            pending_literal = None
        if literal_indent is not None:
            if not raw.strip() or indent > literal_indent:
                out.append(raw)
                continue
            literal_indent = None
        if skip_indent is not None:
            if not raw.strip() or indent > skip_indent:
                continue
            skip_indent = None
        if options_indent is not None:
            if raw.strip() and indent > options_indent and _OPTION.match(raw):
                continue
            options_indent = None

        directive = _DIRECTIVE.match(raw)
        if directive:
            name, arg = directive.group(2), directive.group(3)
            if name in _HIDDEN:
                skip_indent = indent
                continue
            options_indent = indent
            if name in _LITERAL_DIRECTIVES:
                pending_literal = indent
            if name in _CAPTIONS:
                caption = _CAPTIONS[name].format(arg=arg).strip()
                if name in ("note", "warning", "seealso", "important", "caution", "tip",
                            "hint", "attention", "danger", "error", "impl-detail"):
                    caption = " ".join(filter(None, [caption, strip_inline(arg)]))
                if caption:
                    out.append(" " * indent + caption)
            elif arg:  # object descriptions, rubric, code-block language is dropped below
                if name not in _LITERAL_DIRECTIVES | {"list-table", "csv-table", "table"}:
                    out.append(" " * indent + arg)  # a signature: keep * and ** as is
            continue
        if _COMMENT_OR_LABEL.match(raw):  # `.. _label:`, `.. comment`, `..` + indented body
            skip_indent = indent
            continue
        if _ADORNMENT.match(raw) or (raw.strip() and _TABLE_BORDER.match(raw)):
            continue
        if raw.rstrip().endswith("::"):
            pending_literal = indent
        out.append(strip_inline(raw))

    text = "\n".join(line.rstrip() for line in out)
    text = _ROLE.sub(_role_text, text)  # roles that wrap across lines
    return re.sub(r"\n{3,}", "\n\n", text).strip() + "\n"
