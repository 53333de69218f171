import pytest

from lab.text import segment
from lab.text.words import words


def test_spaced_languages_keep_the_english_rules():
    text = "Der Hund schläft. 我们 are mixed in, but the document is German."
    assert segment.words(text, "de") == words(text)
    assert segment.words(text, "en") == words(text)
    assert segment.words(text, None) == words(text)


@pytest.mark.parametrize("lang, text, expected", [
    ("ja", "これは日本語です。", ["これ", "は", "日本語", "です", "。"]),  # hand-checked: ICU's dictionary words
    ("zh", "我们今天去北京。", ["我们", "今天", "去", "北京", "。"]),
])
def test_unspaced_runs_cut_at_icu_word_boundaries(lang, text, expected):
    assert list(segment.words(text, lang)) == expected


@pytest.mark.parametrize("lang, text", [
    ("th", "เมื่อวานนี้ฉันไปตลาดกับแม่"),
    ("lo", "ຂ້ອຍໄປຕະຫຼາດມື້ວານນີ້"),
    ("km", "ខ្ញុំទៅផ្សារកាលពីម្សិលមិញ"),
    ("my", "ကျွန်တော်မနေ့ကဈေးသွားခဲ့တယ်"),
])
def test_other_unspaced_scripts_get_several_words(lang, text):
    ws = segment.words(text, lang)
    assert len(words(text)) == 1 and len(ws) >= 4 and "".join(ws) == text


def test_latin_words_in_an_unspaced_document_keep_the_english_rules():
    ws = segment.words("使用 --help 选项 (e.g. ls -l) 查看帮助。", "zh")
    assert "--help" in ws and "e.g." in ws and "ls" in ws
    assert segment.words("Linuxの中文", "ja", breaker="char") == ("Linux", "の", "中", "文")
