"""Which HTML extractor: main-text recall, boilerplate kept and speed of each ``stages.extract.method``.

Pages with KNOWN main content (``build_pages``): translated man pages on this machine (bench/langid.py's
set, rendered by groff; several languages, sampled with a fixed seed) become the main content of a web
page, wrapped in what web pages put around it. Every page is built from seeded choices among three
layouts (HTML5 ``<header>/<nav>/<main>/<aside>/<footer>``; DocBook-style ``div.navheader`` tables and
``div.refentry``; plain ``<div id=...>`` soup).

Main content (what an extractor should keep): the page's title (``<h1>``), its section headings, its
paragraphs, a definition list (option, description), and three things main-content heuristics are
known to drop: an admonition box (one of the page's paragraphs, in one of the ``ADMONITIONS`` styles:
Sphinx, DocBook, Docusaurus, GitHub, Bootstrap ``role=alert``, ``<aside>``), a table (consecutive
option/description pairs of the page, in one of the ``TABLES`` wrappers, ``<figure>`` among them) and a
link-heavy list (the lines of one paragraph, each line one link).

Boilerplate (what it should drop), localized where sites localize it: a navigation row "Prev Up Home
Next" at the top (with the page's title repeated) and at the bottom (with the neighbours' titles), a
breadcrumb trail, the site header and its menu, a sidebar of 15-40 links to other pages, a table of
contents (the section headings again, numbered), a cookie banner and a footer.

Measured per extractor (the stage's own ``lab.stages.extract.html_to_text``, plus trafilatura's
``fast=True`` for reference), and for ``full_text`` followed by the boilerplate-line removal of
``stages.boilerplate`` (``remove_lines``): each page belongs to a site, one per layout and language
(``Page.site``: a real site has one page template and localizes it, so a crawl groups pages that way;
the site *name* in the header is drawn per page among four, as if mirrored); the lines of every page's
``full_text`` output are counted per site (``lab.linecount.count_texts``: the stage's normalization
and per-(site, line) document count) and the lines seen in >= k documents of their site are removed
(``lab.linecount.strip_counted``), for k = the stage's default ``min_docs`` and the other ``--min-docs``
values; the result is scored like the extractors' output.

- main recall: the share of main-content words (``\\w+`` tokens) in units found in the output; a unit
  (a paragraph, heading, table cell, list item, ...) counts when its whitespace-collapsed text occurs in
  the whitespace-collapsed output, so a unit cut short counts as lost; by kind of unit too;
- boilerplate kept: the found units are taken out of the output, and the words left are matched
  (as a multiset) against each kind of boilerplate in turn: the share of boilerplate words kept, by kind;
  and the share of the output's words that are boilerplate;
- pages per CPU-second in one process (thread pools capped at 1; --pin pins it to one CPU): the
  process's CPU time of the extraction calls only, median of --repeat passes (one pass for trafilatura);
  for the line removal, the median ``full_text`` extraction plus the median count pass over all pages
  plus the median removal pass, divided by the pages (the count is corpus-level: its CPU is spread
  over the pages it counted; the engine's merge of partitions' tables is not in it);
- recall of site-unique units: main recall over the units NOT found verbatim in the main content of
  >= k pages of the site (k: the first ``--min-docs``), i.e. leaving out text the site itself repeats
  (section headings, licence and translation notes), which no line count can tell from navigation;
- ``--split-sites N`` splits each site round-robin into N smaller ones (fewer pages per site, as in a
  crawl's long tail of hosts) for the line count and that recall;
- trafilatura's import time, in a fresh process.

Approximate where units repeat: a heading also in the table of contents is found once, so a dropped
heading whose table-of-contents copy was kept counts as found (and that copy not as boilerplate).

Needs groff and the manpages-* packages (.ci/setup --test installs them), and trafilatura (a dependency).
Nothing is downloaded: run it under ``unshare -n`` to prove that.
Run (main venv):  .venv/bin/python bench/extraction_choice.py --pin --per-lang 50
Writes bench/out/extraction_choice.json (figures); --dump DIR also writes the pages as HTML.
"""

from __future__ import annotations

import argparse
import collections
import html
import json
import random
import re
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from langid import build_dataset  # noqa: E402
from single_core import one_core  # noqa: E402

from lab import linecount  # noqa: E402
from lab.stages import boilerplate as bp_stage  # noqa: E402

OUT_DIR = Path(__file__).resolve().parent / "out"
LANGS = ("en", "de", "fr", "es", "ru", "pl", "ja")
MAX_BLOCKS = 40  # blocks of a man page used as main content (long pages are cut)
_WORD = re.compile(r"\w+")
_SPACE = re.compile(r"\s+")

# what sites localize: navigation row, breadcrumb root, table of contents, admonition title, cookie banner
WORDS = {
    "en": dict(nav=("Prev", "Up", "Home", "Next"), home="Home", manual="Manual", toc="Table of Contents",
               note="Note", accept="Accept", reject="Reject", rights="All rights reserved.",
               cookie="This website uses cookies to improve your experience. By continuing to browse the site "
                      "you agree to our use of cookies."),
    "de": dict(nav=("Zurück", "Nach oben", "Anfang", "Weiter"), home="Startseite", manual="Handbuch",
               toc="Inhaltsverzeichnis", note="Hinweis", accept="Akzeptieren", reject="Ablehnen",
               rights="Alle Rechte vorbehalten.",
               cookie="Diese Website verwendet Cookies, um Ihr Nutzererlebnis zu verbessern. Wenn Sie weiter "
                      "surfen, stimmen Sie der Verwendung von Cookies zu."),
    "fr": dict(nav=("Précédent", "Niveau supérieur", "Sommaire", "Suivant"), home="Accueil", manual="Manuel",
               toc="Table des matières", note="Remarque", accept="Accepter", reject="Refuser",
               rights="Tous droits réservés.",
               cookie="Ce site utilise des cookies pour améliorer votre expérience. En poursuivant votre "
                      "navigation, vous acceptez l'utilisation des cookies."),
    "es": dict(nav=("Anterior", "Arriba", "Inicio", "Siguiente"), home="Inicio", manual="Manual",
               toc="Tabla de contenidos", note="Nota", accept="Aceptar", reject="Rechazar",
               rights="Todos los derechos reservados.",
               cookie="Este sitio web utiliza cookies para mejorar su experiencia. Si continúa navegando, "
                      "acepta el uso de cookies."),
    "ru": dict(nav=("Назад", "Вверх", "Начало", "Вперёд"), home="Главная", manual="Руководство",
               toc="Содержание", note="Примечание", accept="Принять", reject="Отклонить",
               rights="Все права защищены.",
               cookie="Этот сайт использует файлы cookie для улучшения работы. Продолжая просмотр, вы "
                      "соглашаетесь с использованием файлов cookie."),
    "pl": dict(nav=("Poprzedni", "W górę", "Spis treści", "Następny"), home="Strona główna",
               manual="Podręcznik", toc="Spis treści", note="Uwaga", accept="Akceptuję", reject="Odrzuć",
               rights="Wszelkie prawa zastrzeżone.",
               cookie="Ta strona używa plików cookie, aby poprawić komfort korzystania. Kontynuując "
                      "przeglądanie, zgadzasz się na ich użycie."),
    "ja": dict(nav=("前へ", "上へ", "ホーム", "次へ"), home="ホーム", manual="マニュアル", toc="目次", note="注意",
               accept="同意する", reject="拒否する", rights="無断転載を禁じます。",
               cookie="このサイトでは利便性向上のためにクッキーを使用しています。閲覧を続けることで、クッキーの使用に"
                      "同意したものとみなされます。"),
}
# admonition boxes as documentation generators and site frameworks write them ({t}: title, {x}: text)
ADMONITIONS = {
    "sphinx": '<div class="admonition note"><p class="admonition-title">{t}</p><p>{x}</p></div>',
    "docbook": '<div class="note" style="margin-left: 0.5in; margin-right: 0.5in;"><table border="0" summary="{t}">'
               '<tr><td rowspan="2" align="center" valign="top" width="25"><img alt="[{t}]" src="note.png"></td>'
               '<th align="left">{t}</th></tr><tr><td align="left" valign="top"><p>{x}</p></td></tr></table></div>',
    "docbook_sidebar": '<div class="sidebar"><p class="title"><b>{t}</b></p><p>{x}</p></div>',
    "docusaurus": '<div class="theme-admonition theme-admonition-note alert alert--secondary"><div '
                  'class="admonitionHeading">{t}</div><div class="admonitionContent"><p>{x}</p></div></div>',
    "github": '<div class="markdown-alert markdown-alert-note"><p class="markdown-alert-title">{t}</p><p>{x}</p></div>',
    "bootstrap_alert": '<div class="alert alert-info" role="alert"><h4 class="alert-heading">{t}</h4>{x}</div>',
    "aside": '<aside class="admonition note"><p class="admonition-title">{t}</p><p>{x}</p></aside>',
}
# tables as generators and editors wrap them ({rows}: the <tr> rows)
TABLES = {
    "plain": '<table class="options">{rows}</table>',
    "sphinx": '<div class="wy-table-responsive"><table class="docutils align-default"><tbody>{rows}</tbody></table></div>',
    "docbook": '<div class="table"><div class="table-contents"><table border="1">{rows}</table></div></div>',
    "figure": '<figure class="table"><table>{rows}</table></figure>',
}
SITES = ("Linux Manual Pages Online", "OpenDocs Project", "The Unix Reference Library", "man.example.org")
MENU = ("Documentation", "Download", "Community", "Blog", "Search", "About")
FOOTER_LINKS = ("Privacy policy", "Terms of use", "Contact", "Imprint")


@dataclass
class Page:
    id: str
    lang: str
    html: str
    site: str = ""  # what the line count groups pages by: one site per layout and language
    main: list[tuple[str, str]] = field(default_factory=list)  # (kind, text) units that are main content
    boilerplate: list[tuple[str, str]] = field(default_factory=list)  # (kind, text) that is not


def norm(text: str) -> str:
    """Whitespace collapsed to one space, ends stripped.

    >>> norm(" a\\n\\tb  c ")
    'a b c'
    """
    return _SPACE.sub(" ", text).strip()


def words(text: str) -> list[str]:
    return _WORD.findall(text)


def man_blocks(text: str) -> list[tuple[str, list[str]]]:
    """A rendered man page as (kind, lines) blocks: ``heading`` (an unindented short line), ``term`` (a short
    first line, the rest indented deeper: an option and its description) or ``para``; running header and
    footer lines dropped.

    >>> man_blocks("LS(1)  x  LS(1)\\n\\nNAME\\n       ls - list\\n\\n       -a\\n              all\\n\\nGNU  LS(1)")
    [('heading', ['NAME']), ('para', ['ls - list']), ('term', ['-a', 'all'])]
    """
    lines = text.splitlines()[1:-1]  # man's running header and footer
    raw: list[list[str]] = [[]]
    for line in lines:
        if line.strip():
            raw[-1].append(line.rstrip())
        elif raw[-1]:
            raw.append([])
    out = []
    for block in (b for b in raw if b):
        indent = [len(b) - len(b.lstrip()) for b in block]
        first = block[0].strip()
        if indent[0] == 0 and len(block) == 1 and len(first.split()) <= 6:
            out.append(("heading", [first]))
        elif indent[0] == 0:  # a heading glued to its first paragraph
            out.append(("heading", [first]))
            out.append(("para", [b.strip() for b in block[1:]]))
        elif len(block) >= 2 and len(first) <= 40 and min(indent[1:]) > indent[0]:
            out.append(("term", [first, " ".join(b.strip() for b in block[1:])]))
        else:
            out.append(("para", [b.strip() for b in block]))
    return [(k, ls) for k, ls in out if any(words(x) for x in ls)]


def _title(path: str) -> str:
    """``/usr/share/man/de/man1/ls.1.gz`` -> ``ls(1)``.

    >>> _title("/usr/share/man/de/man1/ls.1.gz")
    'ls(1)'
    """
    name = Path(path).name.removesuffix(".gz")
    stem, _, section = name.rpartition(".")
    return f"{stem}({section})"


def build_page(doc, others: list[str], rng: random.Random) -> Page:
    """One page: the man page's blocks as main content, wrapped in seeded boilerplate."""
    w = WORDS[doc.lang]
    esc = html.escape
    page = Page(doc.id, doc.lang, "")
    title = _title(doc.path)
    site = rng.choice(SITES)
    layout = rng.choice(("html5", "docbook", "divs"))
    page.site = f"{layout}.{doc.lang}"
    blocks = man_blocks(doc.text)[:MAX_BLOCKS]
    main, bp = page.main, page.boilerplate

    # which blocks become the admonition, the table and the link list
    paras = [i for i, (k, ls) in enumerate(blocks) if k == "para" and len(words(" ".join(ls))) >= 8]
    note_at = rng.choice(paras[1:]) if len(paras) > 1 else None
    terms = [i for i, (k, _) in enumerate(blocks) if k == "term"]
    table = set()
    if len(terms) >= 2:
        start = rng.randrange(len(terms))
        run = [terms[start]]
        while len(run) < 8 and run[-1] + 1 in terms:
            run.append(run[-1] + 1)
        table = set(run) if len(run) >= 2 else set()
    multi = [i for i in paras if len(blocks[i][1]) >= 3 and i != note_at]
    links_at = rng.choice(multi) if multi else None

    body = [f"<h1>{esc(title)}</h1>"]
    main.append(("title", title))
    headings = [ls[0] for k, ls in blocks if k == "heading"]
    if headings and rng.random() < 0.7:
        items = "".join(f'<li><a href="#s{j}">{j + 1}. {esc(h)}</a></li>' for j, h in enumerate(headings))
        body.append(f'<div class="toc"><p><b>{esc(w["toc"])}</b></p><ul>{items}</ul></div>')
        bp.append(("toc", w["toc"]))
        bp.extend(("toc", f"{j + 1}. {h}") for j, h in enumerate(headings))
    n_heading = 0
    i = 0
    while i < len(blocks):
        kind, ls = blocks[i]
        if i in table:
            rows = []
            while i in table:
                term, desc = blocks[i][1]
                rows.append(f"<tr><td><code>{esc(term)}</code></td><td>{esc(desc)}</td></tr>")
                main.extend((("table", term), ("table", desc)))
                i += 1
            style = rng.choice(sorted(TABLES))
            body.append(TABLES[style].format(rows="".join(rows)))
            main[-2 * len(rows):] = [(f"table|{style}", x) for _, x in main[-2 * len(rows):]]
            continue
        if kind == "heading":
            body.append(f'<h2 id="s{n_heading}">{esc(ls[0])}</h2>')
            main.append(("heading", ls[0]))
            n_heading += 1
        elif kind == "term":
            body.append(f"<dl><dt><code>{esc(ls[0])}</code></dt><dd>{esc(ls[1])}</dd></dl>")
            main.extend((("definition", ls[0]), ("definition", ls[1])))
        elif i == note_at:
            text = " ".join(ls)
            style = rng.choice(sorted(ADMONITIONS))
            body.append(ADMONITIONS[style].format(t=esc(w["note"]), x=esc(text)))
            main.append((f"admonition|{style}", text))
        elif i == links_at:
            items = "".join(f'<li><a href="/{doc.lang}/ref/{rng.randrange(10**6)}.html">{esc(x)}</a></li>'
                            for x in ls)
            body.append(f'<ul class="links">{items}</ul>')
            main.extend(("link_list", x) for x in ls)
        else:
            text = " ".join(ls)
            body.append(f"<p>{esc(text)}</p>")
            main.append(("paragraph", text))
        i += 1

    # boilerplate around it
    prev_t, next_t = rng.sample(others, 2)
    nav = w["nav"]
    links = "".join(f'<a href="/{x}">{esc(x)}</a> ' for x in MENU)
    header = f'<div class="site-title"><a href="/">{esc(site)}</a></div><div class="menu">{links}</div>'
    bp.append(("site_header", site))
    bp.extend(("site_header", x) for x in MENU)
    crumbs = f'<a href="/">{esc(w["home"])}</a> » <a href="/man/">{esc(w["manual"])}</a> » {esc(title)}'
    bp.extend((("breadcrumbs", w["home"]), ("breadcrumbs", w["manual"]), ("breadcrumbs", title)))
    top = (f'<table class="navheader" width="100%"><tr><th colspan="3" align="center">{esc(title)}</th></tr>'
           f'<tr><td width="20%"><a accesskey="p" href="prev.html">{esc(nav[0])}</a></td>'
           f'<td width="60%" align="center"><a accesskey="u" href="index.html">{esc(nav[1])}</a></td>'
           f'<td width="20%" align="right"><a accesskey="n" href="next.html">{esc(nav[3])}</a></td></tr></table>')
    bp.append(("nav_row", title))
    bp.extend(("nav_row", x) for x in (nav[0], nav[1], nav[3]))
    bottom = ""
    if rng.random() < 0.8:
        bottom = (f'<table class="navfooter" width="100%"><tr><td><a href="prev.html">{esc(nav[0])}</a></td>'
                  f'<td><a href="index.html">{esc(nav[1])}</a></td><td><a href="next.html">{esc(nav[3])}</a></td>'
                  f'</tr><tr><td>{esc(prev_t)}</td><td><a href="/">{esc(nav[2])}</a></td><td>{esc(next_t)}</td>'
                  f"</tr></table>")
        bp.extend(("nav_row", x) for x in (nav[0], nav[1], nav[3], prev_t, nav[2], next_t))
    side = ""
    if rng.random() < 0.8:
        picks = rng.sample(others, min(len(others), rng.randint(15, 40)))
        items = "".join(f'<li><a href="/man/{esc(x)}.html">{esc(x)}</a></li>' for x in picks)
        side = f"<h3>{esc(w['manual'])}</h3><ul>{items}</ul>"
        bp.append(("sidebar", w["manual"]))
        bp.extend(("sidebar", x) for x in picks)
    year = rng.randint(2009, 2025)
    foot = (f"<p>© {year} {esc(site)}. {esc(w['rights'])}</p><p>"
            + " | ".join(f'<a href="/{x}">{esc(x)}</a>' for x in FOOTER_LINKS) + "</p>")
    bp.append(("footer", f"© {year} {site}. {w['rights']}"))
    bp.extend(("footer", x) for x in FOOTER_LINKS)
    cookie = ""
    if rng.random() < 0.6:
        cookie = (f'<div id="cookie-consent" class="cookie-banner"><p>{esc(w["cookie"])}</p>'
                  f'<button>{esc(w["accept"])}</button> <button>{esc(w["reject"])}</button></div>')
        bp.extend((("cookie_banner", w["cookie"]), ("cookie_banner", w["accept"]), ("cookie_banner", w["reject"])))
    content = "\n".join(body)
    left = rng.random() < 0.5
    if layout == "html5":
        side = f'<aside class="sidebar"><nav>{side}</nav></aside>' if side else ""
        parts = [f"<header>{header}<nav class='breadcrumbs'>{crumbs}</nav></header>", f"<nav>{top}</nav>",
                 side if left else "", f"<main><article>{content}</article></main>", "" if left else side,
                 f"<nav>{bottom}</nav>" if bottom else "", f"<footer>{foot}</footer>"]
    elif layout == "docbook":
        side = f'<div class="sidebar">{side}</div>' if side else ""
        parts = [f'<div class="header">{header}</div>', f'<div class="breadcrumbs">{crumbs}</div>',
                 f'<div class="navheader">{top}</div>', side if left else "",
                 f'<div class="refentry">{content}</div>', "" if left else side,
                 f'<div class="navfooter"><hr>{bottom}</div>' if bottom else "", f'<div class="footer">{foot}</div>']
    else:
        side = f'<div id="menu">{side}</div>' if side else ""
        parts = [f'<div id="top">{header}</div>', f'<div id="path">{crumbs}</div>', f"<div>{top}</div>",
                 side if left else "", f'<div id="content">{content}</div>', "" if left else side,
                 f"<div>{bottom}</div>" if bottom else "", f'<div id="bottom">{foot}</div>']
    if cookie:
        parts.insert(0 if rng.random() < 0.5 else len(parts), cookie)
    page.html = (f'<!DOCTYPE html>\n<html lang="{doc.lang}"><head><meta charset="utf-8">'
                 f"<title>{esc(title)} - {esc(site)}</title></head>\n<body>\n"
                 + "\n".join(p for p in parts if p) + "\n</body></html>\n")
    return page


def build_pages(*, per_lang: int, langs: tuple[str, ...], seed: int) -> list[Page]:
    dataset = build_dataset(per_lang=per_lang, langs=langs, seed=seed)
    titles = collections.defaultdict(list)
    for d in dataset.docs:
        titles[d.lang].append(_title(d.path))
    rng = random.Random(seed)
    pages = []
    for d in dataset.docs:
        others = [t for t in titles[d.lang] if t != _title(d.path)] or ["intro(1)", "man(1)"]
        pages.append(build_page(d, others * (1 + 40 // len(others)), rng))
    return pages


def score(page: Page, text: str, repeated: frozenset[str] = frozenset()) -> dict:
    """Main-content words found and boilerplate words kept, by kind, for one page's extracted text;
    ``repeated``: the page's main-content units (normalized) that its site repeats (not in ``unique_*``)."""
    rest = norm(text)
    found: collections.Counter = collections.Counter()
    total: collections.Counter = collections.Counter()
    unique = [0, 0]  # words of the units not in ``repeated``: total, found
    for kind, unit in sorted(page.main, key=lambda u: -len(u[1])):
        n, u = len(words(unit)), norm(unit)
        total[kind] += n
        unique[0] += 0 if u in repeated else n
        at = rest.find(u)
        if at >= 0:
            found[kind] += n
            unique[1] += 0 if u in repeated else n
            rest = rest[:at] + " \n " + rest[at + len(u):]
    left = collections.Counter(words(rest))
    kept: collections.Counter = collections.Counter()
    bp_total: collections.Counter = collections.Counter()
    for kind, unit in page.boilerplate:
        for word in words(unit):
            bp_total[kind] += 1
            if left[word] > 0:
                left[word] -= 1
                kept[kind] += 1
    return {"main_total": dict(total), "main_found": dict(found), "bp_total": dict(bp_total),
            "bp_kept": dict(kept), "out_words": len(words(text)), "unique_total": unique[0],
            "unique_found": unique[1]}


def site_repeated(pages: list[Page], sites: list[str], k: int) -> list[frozenset[str]]:
    """Per page, its main-content units (normalized) found in the main content of >= ``k`` pages of its site:
    text the site repeats (section headings, licence and translation notes), which a line count cannot
    tell from navigation."""
    seen: collections.Counter = collections.Counter()
    for p, s in zip(pages, sites):
        seen.update((s, u) for u in {norm(x) for _, x in p.main})
    return [frozenset(u for u in {norm(x) for _, x in p.main} if seen[(s, u)] >= k) for p, s in zip(pages, sites)]


def extractors() -> dict:
    import trafilatura

    from lab.stages import extract

    out = {m: (lambda h, m=m: extract.html_to_text(h, m)) for m in extract.METHODS}
    fast = {**extract.TRAFILATURA_OPTIONS, "fast": True}
    out["trafilatura (fast=True)"] = lambda h: trafilatura.extract(h, **fast) or ""
    return out


def import_seconds(module: str) -> float:
    """Wall seconds to import ``module`` in a fresh interpreter (best of 3)."""
    code = f"import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
    return min(float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                    check=True).stdout) for _ in range(3))


def summarize(rows: list[dict]) -> dict:
    def add(key):
        c: collections.Counter = collections.Counter()
        for r in rows:
            c.update(r[key])
        return c

    mt, mf, bt, bk = add("main_total"), add("main_found"), add("bp_total"), add("bp_kept")
    by_style = {k: mf[k] / mt[k] for k in sorted(mt) if "|" in k}
    for c in (mt, mf):  # "admonition|aside" -> "admonition"
        for k in [k for k in c if "|" in k]:
            c[k.split("|")[0]] += c.pop(k)
    out_words = sum(r["out_words"] for r in rows)
    return {
        "main_recall": sum(mf.values()) / sum(mt.values()),
        "main_recall_site_unique": sum(r["unique_found"] for r in rows) / max(sum(r["unique_total"] for r in rows), 1),
        "main_words_site_repeated": 1 - sum(r["unique_total"] for r in rows) / sum(mt.values()),
        "main_recall_by_kind": {k: mf[k] / mt[k] for k in sorted(mt)},
        "main_recall_by_style": by_style,
        "boilerplate_kept": sum(bk.values()) / sum(bt.values()),
        "boilerplate_kept_by_kind": {k: bk[k] / bt[k] for k in sorted(bt)},
        "boilerplate_share_of_output": sum(bk.values()) / max(out_words, 1),
        "pages_recall_ge_0.95": sum(sum(r["main_found"].values()) >= 0.95 * sum(r["main_total"].values())
                                    for r in rows) / len(rows),
        "empty_pages": sum(r["out_words"] == 0 for r in rows),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-lang", type=int, default=40, help="man pages per language")
    parser.add_argument("--langs", default=",".join(LANGS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=3, help="timed passes of the resiliparse methods")
    parser.add_argument("--pin", action="store_true", help="pin the process to one CPU")
    parser.add_argument("--min-docs", default=f"{bp_stage.Config().min_docs},2,5",
                        help="k values of the line removal after full_text (comma-separated; first: the stage's default)")
    parser.add_argument("--split-sites", type=int, default=1,
                        help="split each site's pages round-robin into this many sites (smaller sites, fewer repeats)")
    parser.add_argument("--dump", type=Path, help="also write the pages as HTML into this directory")
    parser.add_argument("--out", type=Path, default=OUT_DIR / "extraction_choice.json")
    args = parser.parse_args(argv)
    pinned = one_core(args.pin)

    t0 = time.process_time()
    pages = build_pages(per_lang=args.per_lang, langs=tuple(args.langs.split(",")), seed=args.seed)
    build_cpu = time.process_time() - t0
    if not pages:
        sys.exit("no man pages found: install groff-base and manpages-* (bash .ci/setup --test)")
    if args.dump:
        args.dump.mkdir(parents=True, exist_ok=True)
        for p in pages:
            (args.dump / f"{p.id}.html").write_text(p.html, encoding="utf-8")
    html_bytes = sum(len(p.html.encode()) for p in pages)
    report = {
        "pages": len(pages), "by_lang": dict(collections.Counter(p.lang for p in pages)),
        "html_bytes": html_bytes, "build_cpu_seconds": build_cpu, "pinned_cpu": pinned, "seed": args.seed,
        "versions": {p: version(p) for p in ("resiliparse", "trafilatura", "lxml")},
        "import_seconds": {m: import_seconds(m) for m in ("resiliparse.extract.html2text", "trafilatura")},
        "extractors": {},
        "sites": dict(sorted(collections.Counter(p.site for p in pages).items())),
    }
    outputs = {}
    ks = [int(x) for x in args.min_docs.split(",")]
    sites, seen = [], collections.Counter()  # the line count's sites: Page.site, or split round-robin
    for p in pages:
        sites.append(p.site if args.split_sites == 1 else f"{p.site}/{seen[p.site] % args.split_sites}")
        seen[p.site] += 1
    repeated = site_repeated(pages, sites, ks[0])
    for name, fn in extractors().items():
        fn(pages[0].html)  # warm-up: imports, lazy initialisation
        passes = 1 if name.startswith("trafilatura") else args.repeat
        cpu, texts = [], []
        for _ in range(passes):
            texts = []
            start = time.process_time()
            for p in pages:
                texts.append(fn(p.html))
            cpu.append(time.process_time() - start)
        outputs[name] = texts
        rows = [score(p, t, r) for p, t, r in zip(pages, texts, repeated)]
        seconds = statistics.median(cpu)
        by_lang = {lang: summarize([r for r, p in zip(rows, pages) if p.lang == lang])["main_recall"]
                   for lang in report["by_lang"]}
        report["extractors"][name] = {"cpu_seconds": seconds, "passes": cpu,
                                      "pages_per_cpu_s": len(pages) / seconds,
                                      "mb_per_cpu_s": html_bytes / 1e6 / seconds,
                                      **summarize(rows), "main_recall_by_lang": by_lang}

    # full_text, then the site-repeated lines removed: count once over all pages, remove per k
    full = outputs["full_text"]
    report["line_sites"] = {"split": args.split_sites, "sites": len(set(sites)),
                            "pages_per_site": dict(sorted(collections.Counter(collections.Counter(sites).values()).items()))}
    count_cpu = []
    for _ in range(args.repeat):
        start = time.process_time()
        counts = linecount.count_texts(full, sites)
        count_cpu.append(time.process_time() - start)
    extract_s = report["extractors"]["full_text"]["cpu_seconds"]
    for k in ks:
        strip_cpu = []
        for _ in range(args.repeat):
            start = time.process_time()
            texts = linecount.strip_counted(full, sites, counts, k)
            strip_cpu.append(time.process_time() - start)
        rows = [score(p, t, r) for p, t, r in zip(pages, texts, repeated)]
        parts = {"extract": extract_s, "count": statistics.median(count_cpu), "remove": statistics.median(strip_cpu)}
        seconds = sum(parts.values())
        by_lang = {lang: summarize([r for r, p in zip(rows, pages) if p.lang == lang])["main_recall"]
                   for lang in report["by_lang"]}
        report["extractors"][f"full_text + boilerplate lines (k={k})"] = {
            "cpu_seconds": seconds, "cpu_seconds_parts": parts, "count_passes": count_cpu, "remove_passes": strip_cpu,
            "pages_per_cpu_s": len(pages) / seconds, "mb_per_cpu_s": html_bytes / 1e6 / seconds,
            "boilerplate_site_lines": int((counts.column("docs").to_numpy() >= k).sum()),
            "distinct_site_lines": counts.num_rows,
            **summarize(rows), "main_recall_by_lang": by_lang}

    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    print(f"{len(pages)} pages ({', '.join(f'{k} {v}' for k, v in report['by_lang'].items())}), "
          f"{html_bytes / 1e6:.2f} MB HTML; built in {build_cpu:.1f} CPU-s; pinned CPU: {pinned}")
    print("import seconds:", {k: round(v, 3) for k, v in report["import_seconds"].items()})
    print(f"sites (layout.lang): {len(report['sites'])}, {min(report['sites'].values())}-"
          f"{max(report['sites'].values())} pages each; line count over {report['line_sites']['sites']} sites "
          f"(--split-sites {args.split_sites})")
    for name, e in report["extractors"].items():
        if "cpu_seconds_parts" in e:
            print(f"{name}: CPU-s {', '.join(f'{k} {v:.3f}' for k, v in e['cpu_seconds_parts'].items())}; "
                  f"{e['boilerplate_site_lines']} of {e['distinct_site_lines']} (site, line) pairs removed")
    print(f"main-content words in units repeated in >= {ks[0]} pages of their site: "
          f"{report['extractors']['full_text']['main_words_site_repeated']:.1%}")
    print("\n| extractor | pages per CPU-s | MB per CPU-s | main recall | pages recall >= 0.95 | boilerplate kept "
          "| boilerplate share of output | recall of site-unique units |")
    print("|---" * 8 + "|")
    for name, e in report["extractors"].items():
        print(f"| {name} | {e['pages_per_cpu_s']:,.0f} | {e['mb_per_cpu_s']:.2f} | {e['main_recall']:.3f} | "
              f"{e['pages_recall_ge_0.95']:.1%} | {e['boilerplate_kept']:.1%} | {e['boilerplate_share_of_output']:.1%} "
              f"| {e['main_recall_site_unique']:.3f} |")
    print()
    e0 = next(iter(report["extractors"].values()))
    kinds, bkinds = list(e0["main_recall_by_kind"]), list(e0["boilerplate_kept_by_kind"])
    print("| extractor | pages per CPU-s | main recall | " + " | ".join(kinds)
          + " | boilerplate kept | " + " | ".join(bkinds) + " | boilerplate share of output |")
    print("|---" * (5 + len(kinds) + len(bkinds)) + "|")
    for name, e in report["extractors"].items():
        print(f"| {name} | {e['pages_per_cpu_s']:.1f} | {e['main_recall']:.3f} | "
              + " | ".join(f"{e['main_recall_by_kind'][k]:.2f}" for k in kinds)
              + f" | {e['boilerplate_kept']:.3f} | "
              + " | ".join(f"{e['boilerplate_kept_by_kind'][k]:.2f}" for k in bkinds)
              + f" | {e['boilerplate_share_of_output']:.3f} |")
    styles = list(e0["main_recall_by_style"])
    print("\n| extractor | " + " | ".join(styles) + " |")
    print("|---" * (1 + len(styles)) + "|")
    for name, e in report["extractors"].items():
        print(f"| {name} | " + " | ".join(f"{e['main_recall_by_style'].get(k, 0):.2f}" for k in styles) + " |")
    print(f"-> {args.out}")


if __name__ == "__main__":
    main()
