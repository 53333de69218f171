"""stopwords: the stop words gopher_quality counts, for the language of the document.

Gopher (Rae et al. 2021, App. A) keeps a document holding at least two of eight English stop words
{the, be, to, of, and, that, have, with}; English (and a document with no language) keeps that list.
Another language gets its ``N_STOP_WORDS`` = 8 most frequent stop words, so ``gq_stop_words`` has the same
0..8 range and one threshold means about the same in every language: the stopwords-iso list
(``stopwordsiso``) ranked by ``wordfreq``. Korean's are particles (``KO_PARTICLES``), present when a word
ends with one; Serbian takes the Croatian list, in either script; Thai's list is ranked by the Thai
National Corpus frequencies in ``pythainlp``'s wheel (read as a file). A language with no list or no
frequencies (Lao, Khmer, Burmese, ...) falls back to the English eight. Nothing is downloaded. Matching
is case-sensitive, as Gopher's: "The" at the start of a sentence is not "the".
"""

from __future__ import annotations

import functools
from importlib import metadata

N_STOP_WORDS = 8  # per language, as Gopher's English list
# Gopher's English list (Rae et al. 2021), datatrove's STOP_WORDS
GOPHER_STOP_WORDS = frozenset({"the", "be", "to", "of", "and", "that", "have", "with"})
_WORDFREQ_CODES = {"no": "nb", "tl": "fil", "hr": "sh", "bs": "sh", "sr": "sh"}  # lid.176 label -> wordfreq's code, where they differ
_STOP_CODES = {"sr": "hr"}  # lid.176 label -> the stopwords-iso list used, where it has none of its own
# Korean case and other particles (josa), a closed class (any Korean grammar); the ones on the stop list count
KO_PARTICLES = frozenset("이 가 을 를 은 는 에 에서 의 로 으로 와 과 도 만 에게 께서 한테 보다 처럼 까지 부터 이나 나 랑 이랑 하고".split())
# Serbian Latin -> Cyrillic (the digraphs first): the two alphabets correspond letter for letter
_SR_DIGRAPHS = {"lj": "љ", "nj": "њ", "dž": "џ", "Lj": "Љ", "Nj": "Њ", "Dž": "Џ"}
_SR_CYRILLIC = str.maketrans(dict(zip("abvgdđežzijklmnoprstćufhcčšABVGDĐEŽZIJKLMNOPRSTĆUFHCČŠ",
                                      "абвгдђежзијклмнопрстћуфхцчшАБВГДЂЕЖЗИЈКЛМНОПРСТЋУФХЦЧШ")))


@functools.lru_cache(maxsize=1)
def versions() -> dict[str, str]:
    """The packages the lists come from (part of gopher_quality's signals hash)."""
    return {p: metadata.version(p) for p in ("stopwordsiso", "wordfreq", "pythainlp")}


def to_cyrillic(word: str) -> str:
    """A Serbian word in Latin letters written in Cyrillic.

    >>> to_cyrillic("njegov"), to_cyrillic("je")
    ('његов', 'је')
    """
    for latin, cyrillic in _SR_DIGRAPHS.items():
        word = word.replace(latin, cyrillic)
    return word.translate(_SR_CYRILLIC)


def count(lang: str | None, words) -> int:
    """How many distinct stop words of ``lang`` are among ``words`` (a set or dict keys of words):
    ``gq_stop_words``. Korean: a particle ends a word; Serbian: a stop word in either script.

    >>> count("en", {"the", "cat", "The", "of"})
    2
    >>> count("ko", {"사람이", "책을", "읽는다"})  # 이 and 을 attached to the nouns
    2
    >>> count("sr", {"Ово", "је", "и", "je"})  # је and je are one stop word
    2
    """
    stops = stop_words(lang)
    if lang == "ko":
        return sum(1 for p in stops if any(w.endswith(p) for w in words))
    if lang == "sr":
        return sum(1 for w in stops if w in words or to_cyrillic(w) in words)
    return len(stops & words)


@functools.lru_cache(maxsize=None)
def stop_words(lang: str | None) -> frozenset[str]:
    """The stop words counted for a document in ``lang`` (a lid.176 label; None: no language).

    >>> sorted(stop_words("en")) == sorted(GOPHER_STOP_WORDS)
    True
    >>> "und" in stop_words("de") and len(stop_words("de")) == N_STOP_WORDS
    True
    >>> stop_words("xx") == GOPHER_STOP_WORDS  # no list: the English one
    True
    """
    return frozenset(ranked(lang) or GOPHER_STOP_WORDS)


@functools.lru_cache(maxsize=None)
def ranked(lang: str | None, n: int = N_STOP_WORDS) -> tuple[str, ...]:
    """The ``n`` most frequent stop words of ``lang``, most frequent first; () when the language has
    no stop list or no frequency list (English: Gopher's, not ranked)."""
    if lang is None or lang == "en":
        return ()
    import stopwordsiso
    import wordfreq

    stop_lang = _STOP_CODES.get(lang, lang)
    if not stopwordsiso.has_lang(stop_lang):
        return ()
    stop = set(stopwordsiso.stopwords(stop_lang))
    if lang == "ko":
        stop &= KO_PARTICLES
    freq_lang = _WORDFREQ_CODES.get(lang, lang)
    if lang == "th":
        frequent = _thai_by_frequency()
    elif freq_lang in wordfreq.available_languages("small"):
        frequent = wordfreq.iter_wordlist(freq_lang, "small")  # most frequent first; "small": the top 1e-6
    else:
        return ()
    out: list[str] = []
    for w in frequent:
        if w in stop:
            out.append(w)
            if len(out) == n:
                break
    wordfreq.get_frequency_list.cache_clear()  # its whole list stays cached otherwise: ~10 MB per language
    return tuple(out)


def _thai_by_frequency() -> list[str]:
    """Thai words, most frequent first, by the Thai National Corpus counts shipped in pythainlp's wheel
    (``corpus/tnc_freq.txt``: word TAB count), read as a file without importing the package."""
    from importlib.util import find_spec
    from pathlib import Path

    spec = find_spec("pythainlp")
    if spec is None or spec.origin is None:
        raise ImportError("Thai stop words are ranked by pythainlp's Thai National Corpus frequencies; pythainlp is "
                          "not installed: pip install 'pythainlp>=5.4' (or bash .ci/setup)")
    rows = []
    for line in (Path(spec.origin).parent / "corpus" / "tnc_freq.txt").read_text(encoding="utf-8").splitlines():
        word, _, n = line.partition("\t")
        if n.strip().isdigit():
            rows.append((-int(n), word))
    return [w for _, w in sorted(rows)]
