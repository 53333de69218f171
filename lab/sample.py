"""The embedded sample corpus: built at first use under ``data/sample/``, never committed.

- **real** (``real/packages.jsonl.zst``): text every machine with corpus-lab installed has offline:
  package descriptions, LICENSE/COPYING/NOTICE files, READMEs and module docstrings of the installed
  Python distributions. It varies with what is installed, so ``manifest.json`` records every file it
  came from with its hash, and tests assert only properties on it.
- **synthetic** (``synthetic/``): seeded, machine-independent documents of every kind a stage drops
  (duplicates, short, repetitive, code, boilerplate, other languages, PII, empty, HTML in a WARC file,
  broken input), with ground-truth labels in ``labels.jsonl`` (beside ``synthetic/``, not read as
  input). Each label names the stage expected to drop the document, so tests can assert exact funnel
  numbers.
"""

from __future__ import annotations

import ast
import gzip
import hashlib
import io
import json
import random
import sys
import zlib
from importlib import metadata
from pathlib import Path

SEED = 20261122
VERSION = 2  # bump when the generated documents change: an older data/sample/ is rebuilt
REAL_MAX_DOCS = 2500
REAL_MIN_CHARS = 400
REAL_MAX_CHARS = 60_000


def data_dir() -> Path:
    """``data/`` of the repository (or of the working directory when installed elsewhere)."""
    repo = Path(__file__).resolve().parent.parent / "data"
    return repo if repo.is_dir() else Path.cwd() / "data"


# --- real part ------------------------------------------------------------------------------------


def _real_documents() -> list[dict]:
    docs: list[dict] = []
    names_seen: set[str] = set()
    dists = sorted(metadata.distributions(), key=lambda d: (d.metadata["Name"] or "").lower())
    for dist in dists:
        name = (dist.metadata["Name"] or "").lower()
        if not name or name in names_seen:
            continue
        names_seen.add(name)
        desc = dist.metadata.get_payload() if hasattr(dist.metadata, "get_payload") else None
        desc = desc or dist.metadata.get("Description") or ""
        if REAL_MIN_CHARS <= len(desc):
            docs.append({"url": f"pkg://{name}/METADATA", "text": desc[:REAL_MAX_CHARS], "_file": None})
        files = sorted(dist.files or [], key=str)
        py_taken = 0
        for f in files:
            fname = f.name.upper()
            kind = None
            if any(fname.startswith(p) for p in ("LICENSE", "LICENCE", "COPYING", "NOTICE", "README", "AUTHORS")):
                kind = "file"
            elif fname.endswith(".PY") and py_taken < 12 and "/tests/" not in str(f) and "/test_" not in str(f):
                kind = "docstring"
            if kind is None:
                continue
            path = Path(dist.locate_file(f))
            try:
                if not path.is_file() or path.stat().st_size > 2_000_000:
                    continue
                raw = path.read_text(encoding="utf-8")
                text = raw
                if kind == "docstring":
                    text = ast.get_docstring(ast.parse(raw)) or ""
            except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
                continue
            if len(text) < REAL_MIN_CHARS:
                continue
            if kind == "docstring":
                py_taken += 1
            docs.append({"url": f"pkg://{name}/{f}", "text": text[:REAL_MAX_CHARS],
                         "_file": str(path), "_sha256": hashlib.sha256(raw.encode()).hexdigest()})
            if len(docs) >= REAL_MAX_DOCS:
                return docs
    return docs


# --- synthetic part -------------------------------------------------------------------------------

_EN = {
    "adj": "quiet bright careful early steady narrow gentle rapid patient curious modest sturdy honest clever "
           "distant familiar fragile generous humble eager vivid silent brave calm formal rural urban ancient "
           "modern simple complex useful local global private public sudden gradual".split(),
    "noun": "river garden teacher market engine village library harbor valley student farmer painter bridge "
            "kitchen window forest station theory method letter journey machine council doctor island museum "
            "mountain engineer village signal lantern orchard compass ledger harvest carpenter meadow factory "
            "chapter courtyard glacier workshop traveler merchant observatory canal festival archive".split(),
    "verb": "describes follows repairs measures observes collects explains protects visits studies carries "
            "builds records improves watches shapes supports reviews guides prepares".split(),
    "adv": "slowly quietly carefully often rarely gladly openly briefly firmly kindly".split(),
    "conn": "However, Meanwhile, Later, In winter, By morning, After that, At first, In the end, Since then, "
            "Every year,".split(", "),
}
_TEMPLATES = [
    "The {adj} {noun} {verb} the {noun2} of the {adj2} {noun3}.",
    "{Conn}, a {adj} {noun} {adv} {verb} the {noun2} near the {noun3}.",
    "A {noun} that {verb} every {adj} {noun2} will have to be {adj2} and {adj3}.",
    "With the {noun} and the {noun2}, the {adj} {noun3} {adv} {verb} a {noun4}.",
    "Nobody expected the {noun} to be so {adj}, yet the {noun2} {verb} it with {adj2} care.",
    "{Conn}, the {noun} {verb} a {adj} {noun2} and then {verb2} the {noun3}.",
]

_FOREIGN = {
    "de": ("Der {adj} {noun} {verb} den {noun2} im {adj2} {noun3}.",
           {"adj": "ruhige helle alte junge kluge stille schnelle freundliche große kleine".split(),
            "noun": "Lehrer Garten Markt Fluss Bauer Maler Turm Hafen Wagen Brunnen Zug Wald".split(),
            "verb": "beschreibt sieht baut findet trägt besucht schützt erklärt repariert misst".split()},
           ["Außerdem ist es wichtig, dass wir nicht vergessen, was gestern geschehen ist.",
            "Die Kinder spielen jeden Nachmittag auf der Wiese hinter dem Haus."]),
    "fr": ("Le {noun} {adj} {verb} le {noun2} du {noun3} {adj2}.",
           {"adj": "calme ancien petit grand rapide discret fidèle curieux heureux patient".split(),
            "noun": "jardin marché professeur fleuve paysan peintre pont village moulin port train bois".split(),
            "verb": "décrit regarde construit trouve porte visite protège explique répare mesure".split()},
           ["Pourtant, il est important de ne pas oublier ce qui s'est passé hier soir.",
            "Les enfants jouent chaque après-midi dans le jardin derrière la maison."]),
    "es": ("El {noun} {adj} {verb} el {noun2} del {noun3} {adj2}.",
           {"adj": "tranquilo antiguo pequeño grande rápido discreto fiel curioso feliz paciente".split(),
            "noun": "jardín mercado maestro río campesino pintor puente pueblo molino puerto tren bosque".split(),
            "verb": "describe mira construye encuentra lleva visita protege explica repara mide".split()},
           ["Sin embargo, es importante no olvidar lo que ocurrió ayer por la tarde.",
            "Los niños juegan cada tarde en el jardín detrás de la casa."]),
}


def _fill(template: str, vocab: dict, rng: random.Random) -> str:
    out = template
    for slot in ("adj", "noun", "verb", "adv"):
        for suffix in ("", "2", "3", "4"):
            key = "{" + slot + suffix + "}"
            while key in out:
                out = out.replace(key, rng.choice(vocab[slot]), 1)
    if "{Conn}" in out:
        out = out.replace("{Conn}", rng.choice(_EN["conn"]))
    return out[0].upper() + out[1:]


def english_paragraph(rng: random.Random, sentences: int = 4) -> str:
    return " ".join(_fill(rng.choice(_TEMPLATES), _EN, rng) for _ in range(sentences))


def english_doc(rng: random.Random, paragraphs: int | None = None) -> str:
    n = paragraphs or rng.randint(6, 12)
    return "\n\n".join(english_paragraph(rng, rng.randint(3, 5)) for _ in range(n))


def foreign_doc(lang: str, rng: random.Random) -> str:
    template, vocab, fixed = _FOREIGN[lang]
    paras = []
    for _ in range(rng.randint(5, 8)):
        sents = [_fill(template, vocab, rng) for _ in range(rng.randint(3, 5))]
        sents.insert(rng.randint(0, len(sents)), rng.choice(fixed))
        paras.append(" ".join(sents))
    return "\n\n".join(paras)


def _near_copy(text: str, rng: random.Random, rate: float) -> str:
    words = text.split(" ")
    for i in rng.sample(range(len(words)), max(1, int(len(words) * rate))):
        if words[i].isalpha():
            words[i] = rng.choice(_EN["noun"])
    return " ".join(words)


_MENU = "Home|About us|Products|Services|Blog|Careers|Contact|Support|Pricing|Login|Sign up|Newsletter|Events|" \
        "Press|Partners|Investors|Help center|Community|Store|Gallery|Downloads|Sitemap".split("|")


def synthetic_documents(rng: random.Random) -> list[dict]:
    """Labelled documents: ``expect`` is the stage expected to drop it (``kept`` when none)."""
    docs: list[dict] = []

    def add(text: str, label: str, expect: str, **extra) -> dict:
        d = {"id": f"syn-{len(docs):05d}", "text": text, "label": label, "expect": expect, **extra}
        docs.append(d)
        return d

    clean = [add(english_doc(rng), "clean", "kept") for _ in range(240)]
    for i in range(30):  # exact copies, half of them differing only in spacing (normalization makes them equal)
        src = clean[i * 7]
        text = src["text"] if i % 2 else "  " + src["text"].replace(". ", ".  ").replace(", ", ",   ") + "\n"
        add(text, "exact_dup", "exact_dedup", dup_of=src["id"])
    for i in range(30):  # near copies: 1% of words replaced (Jaccard ~0.9), or 15% (~0.4: not near-duplicates)
        src = clean[i * 7 + 3]
        close = i % 3 != 2
        add(_near_copy(src["text"], rng, rate=0.01 if close else 0.15), "near_dup" if close else "loose_copy",
            "near_dedup" if close else "kept", dup_of=src["id"])
    for _ in range(20):
        add(english_paragraph(rng, 2), "short", "gopher_quality")
    for _ in range(20):  # a few lines repeated many times
        lines = [english_paragraph(rng, 1) for _ in range(3)]
        add("\n".join(lines[j % 3] for j in range(18)), "spam", "gopher_repetition")
    for _ in range(20):  # prose plus a line of template code
        body = english_doc(rng, 6).split("\n\n")
        body.insert(3, "To render the page, the template uses {name} and {value} placeholders in every line.")
        add("\n\n".join(body), "curly_brace", "c4")
    for _ in range(20):  # a few prose lines drowned in navigation links
        prose = [english_paragraph(rng, rng.randint(2, 3)) for _ in range(6)]
        menu = rng.sample(_MENU, 20)
        add("\n".join(menu[:10] + prose + menu[10:]), "boilerplate", "fineweb")
    for i in range(30):
        lang = ("de", "fr", "es")[i % 3]
        add(foreign_doc(lang, rng), f"non_english_{lang}", "language")
    for _ in range(20):
        paras = english_doc(rng, 7).split("\n\n")
        user = rng.choice(_EN["noun"])
        paras[2] += f" Write to {user}.{rng.randint(10, 99)}@example.org for the schedule."
        paras[4] += f" The office line is +1 415-555-{rng.randint(1000, 9999)} on weekdays."
        # a documentation address (RFC 5737): not PII under the default ip_ranges (public), so left in the text
        paras[5] += f" The mirror answers at 203.0.113.{rng.randint(1, 254)} during the night."
        add("\n\n".join(paras), "pii", "kept", pii=2)
    for _ in range(5):
        add("", "empty", "extract")
    return docs


def _html_page(title: str, body: str) -> str:
    nav = "".join(f'<li><a href="/{m.lower().replace(" ", "-")}">{m}</a></li>' for m in _MENU[:8])
    paras = "".join(f"<p>{p}</p>" for p in body.split("\n\n"))
    return (f"<!doctype html><html><head><title>{title}</title><style>p {{margin: 0}}</style></head><body>"
            f"<nav><ul>{nav}</ul></nav><main><article><h1>{title}</h1>{paras}</article></main>"
            f"<footer><p>Copyright notice and links</p></footer><script>var x = 1;</script></body></html>")


def _warc_record(uri: str, html: str, n: int) -> bytes:
    body = html.encode()
    http = b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: " + \
        str(len(body)).encode() + b"\r\n\r\n" + body
    head = (f"WARC/1.1\r\nWARC-Type: response\r\nWARC-Target-URI: {uri}\r\n"
            f"WARC-Date: 2026-01-01T00:00:00Z\r\nWARC-Record-ID: <urn:uuid:00000000-0000-0000-0000-{n:012d}>\r\n"
            f"Content-Type: application/http; msgtype=response\r\nContent-Length: {len(http)}\r\n\r\n").encode()
    return head + http + b"\r\n\r\n"


def build(force: bool = False, *, real: bool = True, root: Path | None = None) -> Path:
    """Build ``data/sample/`` (or ``root``) once; ``force`` rebuilds. Returns its path."""
    root = Path(root) if root is not None else data_dir() / "sample"
    marker = root / "manifest.json"
    if marker.exists() and not force and json.loads(marker.read_text()).get("version") == VERSION:
        return root
    rng = random.Random(SEED)
    syn = root / "synthetic"
    syn.mkdir(parents=True, exist_ok=True)

    docs = synthetic_documents(rng)
    with open(root / "labels.jsonl", "w") as f:
        for d in docs:
            f.write(json.dumps({k: v for k, v in d.items() if k != "text"}, sort_keys=True) + "\n")
    with open(syn / "documents.jsonl", "w") as f:
        for d in docs:
            f.write(json.dumps({"id": d["id"], "text": d["text"]}, ensure_ascii=False) + "\n")

    pages = []
    with gzip.GzipFile(syn / "pages.warc.gz", "wb", mtime=0) as f:
        for i in range(20):
            body = english_doc(rng, 6)
            pages.append({"id": f"page-{i:03d}", "label": "html", "expect": "kept"})
            f.write(_warc_record(f"https://example.org/articles/{i}", _html_page(f"Article {i}", body), i))
    with open(root / "labels.jsonl", "a") as f:
        for p in pages:
            f.write(json.dumps(p, sort_keys=True) + "\n")

    # broken input: every line of it must end up in rejects/ or, for malformed UTF-8, kept and counted
    bad = io.BytesIO()
    good_line = json.dumps({"id": "bad-ok", "text": english_doc(rng)}).encode() + b"\n"
    bad.write(good_line)
    bad.write(b'{"id": "bad-json", "text": "unterminated\n')
    bad.write(json.dumps({"id": "bad-field", "body": "no text field here"}).encode() + b"\n")
    utf = json.dumps({"id": "bad-utf8", "text": english_doc(rng)}).encode()
    utf = utf.replace(b"The ", b"The \xff\xfe ", 1)
    bad.write(utf + b"\n")
    (syn / "broken.jsonl").write_bytes(bad.getvalue())
    # four whole lines behind a full flush, then a fifth line whose compressed bytes are cut in half:
    # exactly four documents are readable, then one break, whatever the zlib version
    lines = [json.dumps({"id": f"gz-{i}", "text": english_doc(rng)}).encode() + b"\n" for i in range(5)]
    z = zlib.compressobj(6, zlib.DEFLATED, 31)
    head = z.compress(b"".join(lines[:4])) + z.flush(zlib.Z_FULL_FLUSH)
    rest = z.compress(lines[4]) + z.flush()
    (syn / "truncated.jsonl.gz").write_bytes(head + rest[: len(rest) // 2])

    files = []
    if real:
        real_docs = _real_documents()
        import zstandard

        (root / "real").mkdir(exist_ok=True)
        with open(root / "real" / "packages.jsonl.zst", "wb") as raw:
            with zstandard.ZstdCompressor(level=3).stream_writer(raw) as f:
                for d in real_docs:
                    f.write((json.dumps({"url": d["url"], "text": d["text"]}, ensure_ascii=False) + "\n").encode())
        files = [{"url": d["url"], "path": d["_file"], "sha256": d.get("_sha256")} for d in real_docs]
    manifest = {"version": VERSION, "seed": SEED, "python": sys.version.split()[0], "synthetic_docs": len(docs) + len(pages),
                "real_docs": len(files), "real_sources": files}
    marker.write_text(json.dumps(manifest, indent=1) + "\n")
    return root


def labels(root: Path | None = None) -> list[dict]:
    root = root or data_dir() / "sample"
    return [json.loads(line) for line in open(root / "labels.jsonl")]
