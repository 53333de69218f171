import pytest

from lab import annotate
from lab.config import Config, build
from lab.doc import Doc
from lab.errors import ConfigError
from lab.select.rules import first_failure
from lab.stages import extract

# A documentation page as sites build them: a "Prev Up Home Next" row, a sidebar of links and a footer
# around the main content, which holds an admonition box (Bootstrap's alert) and a table in a <figure>.
NAV = ("<table class='navheader' width='100%'><tr><td><a href='prev.html'>Prev</a></td>"
       "<td><a href='index.html'>Up</a></td><td><a href='/'>Home</a></td><td><a href='next.html'>Next</a></td>"
       "</tr></table>")
SIDEBAR = ("<div class='sidebar'><ul>" + "".join(f"<li><a href='/{w}.html'>{w.title()} reference</a></li>" for w in (
    "archives", "compression", "permissions", "networking", "printing", "scheduling", "logging")) + "</ul></div>")
PARAGRAPHS = (
    "The tar program stores many files together in a single archive, and can restore individual files "
    "from that archive later on, keeping their names, owners and modification times as they were.",
    "An archive may be written to a regular file, to a tape drive or to standard output, where another "
    "program such as a compressor or a network copy can read it while it is being written.",
    "When an archive is extracted, directories are created as needed, and existing files are replaced "
    "unless the keep-old-files option asks the program to leave them exactly as they are.",
)
NOTE = ("Extracting an archive from an untrusted source can overwrite files outside the current directory "
        "when its member names contain absolute paths or parent directory references.")
CELLS = ("--keep-old-files", "Never overwrite an existing file when extracting members of the archive.")
PAGE = ("<html><head><title>tar - Example Docs</title></head><body>" + NAV + SIDEBAR
        + "<div class='content'><h1>Archiving files with tar</h1>"
        + f"<p>{PARAGRAPHS[0]}</p><p>{PARAGRAPHS[1]}</p>"
        + f"<div class='alert alert-info' role='alert'><h4 class='alert-heading'>Note</h4>{NOTE}</div>"
        + f"<p>{PARAGRAPHS[2]}</p><figure class='table'><table><tr><td>{CELLS[0]}</td><td>{CELLS[1]}</td></tr>"
        + "</table></figure></div>" + NAV.replace("navheader", "navfooter")
        + "<div class='footer'>Copyright 2024 Example Docs. All rights reserved.</div></body></html>")


def test_html_main_content_without_navigation_or_scripts():
    html = ("<html><head><title>T</title><script>var secret = 1;</script></head><body>"
            "<nav><ul><li><a href='/'>Home</a></li><li><a href='/about'>About us</a></li></ul></nav>"
            "<main><article><h1>A heading</h1><p>The first paragraph of the article.</p>"
            "<p>The second paragraph, with <b>bold</b> words.</p></article></main></body></html>")
    text = extract.html_to_text(html)
    assert text == extract.html_to_text(html, "main_content")  # the default method
    assert "The first paragraph of the article." in text
    assert "The second paragraph, with bold words." in text
    assert "secret" not in text and "About us" not in text
    assert text.index("first") < text.index("second")


def _lines(text):
    return [line.strip() for line in text.splitlines() if line.strip()]


def test_main_content_drops_sidebar_footer_and_admonition_but_keeps_the_navigation_row():
    text = extract.html_to_text(PAGE, "main_content")
    assert all(p in text for p in PARAGRAPHS)
    assert "Archives reference" not in text and "All rights reserved" not in text
    assert NOTE not in text and CELLS[1] not in text  # losses the full_text method avoids
    # resiliparse's heuristics keep a navigation row made of a table (bench/RESULTS.md, "Extraction")
    assert _lines(text)[0].split() == _lines(text)[-1].split() == ["Prev", "Up", "Home", "Next"]


def test_full_text_keeps_everything_visible_navigation_included():
    text = extract.html_to_text(PAGE, "full_text")
    assert all(p in text for p in PARAGRAPHS) and NOTE in text and CELLS[1] in text
    assert "Archives reference" in text and "All rights reserved." in text
    assert sum(line.startswith("Prev") for line in _lines(text)) == 2  # the row at the top and at the bottom
    assert "<" not in text and "Example Docs</title>" not in text


def test_trafilatura_keeps_the_admonition_and_the_table_and_drops_the_navigation():
    text = extract.html_to_text(PAGE, "trafilatura")
    assert all(p in text for p in PARAGRAPHS) and NOTE in text and CELLS[1] in text
    assert "Prev" not in text and "Archives reference" not in text and "All rights reserved" not in text


def test_a_page_with_nothing_to_extract_is_empty_text_for_every_method():
    for method in extract.METHODS:
        assert extract.html_to_text("<html><body><script>x()</script></body></html>", method).strip() == ""


def test_annotate_extracts_by_the_configured_method():
    doc = Doc("a.warc", 0, PAGE, len(PAGE), is_html=True)
    chars = {}
    for method in extract.METHODS:
        cfg = build(Config, {"stages": {"extract": {"method": method}}})
        row, stored = annotate.annotate_doc(doc, cfg, None, {}, annotate.new_collectors(cfg, 1))
        assert row["chars"] == len(stored.strip()) and (NOTE in stored) == (method != "main_content")
        chars[method] = row["chars"]
    assert chars["main_content"] < chars["trafilatura"] < chars["full_text"]


def test_the_method_is_a_signal_parameter():
    default = Config()
    assert extract.signal_params(default.stage("extract")) == {"method": "main_content"}
    others = [build(Config, {"stages": {"extract": {"method": m}}}) for m in ("full_text", "trafilatura")]
    hashes = {default.signals_hash()} | {c.signals_hash() for c in others}
    assert len(hashes) == 3
    assert {c.inputs_hash() for c in others} == {default.inputs_hash()}
    assert "trafilatura" in extract.signal_params(others[1].stage("extract"))  # its version


def test_a_bad_method_names_the_key_the_value_the_choices_and_the_fix():
    with pytest.raises(ConfigError) as e:
        build(Config, {"stages": {"extract": {"method": "readability"}}})
    message = str(e.value)
    assert message.startswith("stages.extract.method='readability' is not allowed: must be one of ")
    assert all(f"'{m}'" in message for m in extract.METHODS)
    assert "Set stages.extract.method to one of these names" in message


def test_empty_rule():
    rules = extract.rules(extract.Config())
    assert first_failure(rules, extract.signals("")) == "extract.empty"
    assert first_failure(rules, extract.signals("x")) is None
