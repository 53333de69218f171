from lab.rules import first_failure
from lab.stages import extract


def test_html_main_content_without_navigation_or_scripts():
    html = ("<html><head><title>T</title><script>var secret = 1;</script></head><body>"
            "<nav><ul><li><a href='/'>Home</a></li><li><a href='/about'>About us</a></li></ul></nav>"
            "<main><article><h1>A heading</h1><p>The first paragraph of the article.</p>"
            "<p>The second paragraph, with <b>bold</b> words.</p></article></main></body></html>")
    text = extract.html_to_text(html)
    assert "The first paragraph of the article." in text
    assert "The second paragraph, with bold words." in text
    assert "secret" not in text and "About us" not in text
    assert text.index("first") < text.index("second")


def test_empty_rule():
    rules = extract.rules(extract.Config())
    assert first_failure(rules, extract.signals("")) == "extract.empty"
    assert first_failure(rules, extract.signals("x")) is None
