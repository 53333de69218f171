"""segment: the words of a document in its language, for the filter stages that count words.

English and every language written with spaces get ``lab.text.words.words`` (datatrove's English words),
unchanged. Chinese, Japanese, Thai, Lao, Khmer and Burmese have no spaces between words, so those rules
give a clause or a line as one "word": in a document of one of them (``UNSPACED``, by its lid.176 label),
every word holding a character of those scripts is cut again by ICU's word break iterator (``BREAKER``),
whose data carries a dictionary for each script; Latin words, numbers and symbols keep the English rules,
and a punctuation mark stays a token. ``document_words`` is the one split of a document, in its own
language, that every stage counting words asks: gopher_quality, gopher_repetition, fineweb and
near_dedup (``lab.dedup.signature.shingle_text``). The last texts' words are kept
(``lab.text.words.Recent``), so the stages after the first get them free.
"""

from __future__ import annotations

import functools
import re
from importlib import metadata

from lab.text.words import Recent
from lab.text.words import words as english_words

# lid.176 labels of languages written without spaces between words
UNSPACED = frozenset({"zh", "ja", "th", "lo", "km", "my", "wuu", "yue"})
# a character of a script written without spaces: Han, kana, Thai, Lao, Khmer, Myanmar
_UNSPACED_CHAR = re.compile(
    "[\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f\U00020000-\U0003134f"
    "\u0e00-\u0e7f\u0e80-\u0eff\u1780-\u17ff\u19e0-\u19ff\u1000-\u109f\ua9e0-\ua9ff\uaa60-\uaa7f]")
_HAN_KANA = re.compile("[\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f"
                       "\U00020000-\U0003134f]")
BREAKER = "icu"  # how unspaced runs are cut: "icu" (dictionary) or "char" (one word per Han/kana character)

_RECENT = Recent()  # (text, lang, breaker) -> words, for the unspaced languages


@functools.lru_cache(maxsize=1)
def versions() -> dict[str, str]:
    """What the segmentation depends on (part of gopher_quality's signals hash)."""
    return {"segmenter": f"icu4py {metadata.version('icu4py')}"}


def signal_params() -> dict[str, str]:
    """What ``document_words`` depends on: the language model and the segmenter (part of the signals
    hash of every stage that counts words)."""
    from lab.text import langid

    return {"language_model": langid.model_version(), **versions()}


def _icu_split(token: str, lang: str) -> list[str]:
    """``token`` cut at ICU's word boundaries (whitespace-only pieces dropped).

    >>> _icu_split("これは日本語です", "ja")
    ['これ', 'は', '日本語', 'です']
    """
    from icu4py.breakers import WordBreaker

    return [w for w in WordBreaker(token, lang) if not w.isspace()]


def _char_split(token: str, lang: str = "") -> list[str]:
    """``token`` with every Han or kana character its own word (the rule that needs no dictionary).

    >>> _char_split("Linuxの中文")
    ['Linux', 'の', '中', '文']
    """
    out, start = [], 0
    for m in _HAN_KANA.finditer(token):
        if m.start() > start:
            out.append(token[start:m.start()])
        out.append(m.group())
        start = m.end()
    if start < len(token):
        out.append(token[start:])
    return out


def words(text: str, lang: str | None, *, breaker: str | None = None) -> tuple[str, ...]:
    """The words and punctuation marks of ``text`` in language ``lang`` (a lid.176 label).

    >>> words("The cat sat.", "en") == english_words("The cat sat.")
    True
    >>> len(words("我们今天去北京大学参观。", "zh")) > 3
    True
    """
    ws = english_words(text)
    if lang not in UNSPACED:
        return ws
    breaker = breaker or BREAKER
    key = (text, lang, breaker)
    hit = _RECENT.get(key)
    if hit is not None:
        return hit
    split = _icu_split if breaker == "icu" else _char_split
    out: list[str] = []
    for w in ws:
        if _UNSPACED_CHAR.search(w):
            out.extend(split(w, lang))
        else:
            out.append(w)
    result = tuple(out)
    _RECENT.put(key, result, len(text))
    return result


def document_words(text: str) -> tuple[str, ...]:
    """The words of ``text`` in its own language (``langid.detect``: the model runs once per
    document, whichever stage asks first): the one word split the stages that count words share.

    >>> document_words("The cat sat on the mat.") == english_words("The cat sat on the mat.")
    True
    """
    from lab.text import langid

    return words(text, langid.detect(text)[0])
