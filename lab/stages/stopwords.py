"""stopwords: the stop words gopher_quality counts, for the language of the document.

Gopher (Rae et al. 2021, App. A) keeps a document that holds at least two of eight English stop
words: {the, be, to, of, and, that, have, with}. That list is kept as it is for English (and for
a document with no language: empty text), so English signals are the ones datatrove computes.

For another language the list is its **N = 8 most frequent stop words**, mirroring Gopher's size,
so that ``gq_stop_words`` has the same 0..8 range and one threshold (``min_stop_words``, 2) means
about the same in every language:

- the stop words come from ``stopwordsiso`` (the stopwords-iso collection, MIT licence, lists for
  58 languages in ISO 639-1 codes, the codes fastText lid.176 predicts; shipped in the wheel as
  one JSON file, nothing downloaded). ``stop-words`` (BSD) was the other candidate: 34 lists
  (none for Danish, Norwegian, Thai, Estonian, Latvian, Lithuanian...), a subset of the sources
  stopwords-iso merges;
- they are ranked by ``wordfreq`` (the word frequencies of Wikipedia, subtitles, news, web text
  and more, in 44 languages, shipped in the wheel; code Apache-2.0, data CC BY-SA 4.0): the first
  eight words of wordfreq's list for the language that are on its stop list. The stop lists
  themselves are unordered and long (100-1,300 words): counted whole, they would put every
  language on another scale than Gopher's eight.

A language with a stop list but no wordfreq ranking (Thai, Estonian, Swahili...), or with no stop
list (Serbian; lid.176 predicts 176 languages), falls back to the English list, which is what every
document got before the lists were per language (gopher_quality ``VERSION`` 1): its values do not
move, and such a document passes ``too_few_stop_words`` only if it quotes English (a run keeping
one sets a per-language ``min_stop_words`` of 0). Korean is listed but its stop words are particles
written attached to the word before them, so whole words rarely match (bench/RESULTS.md §19).

Matching is case-sensitive, as Gopher's (datatrove intersects the word set with the list):
"The" at the start of a sentence is not "the".
"""

from __future__ import annotations

import functools
from importlib import metadata

N_STOP_WORDS = 8  # per language, as Gopher's English list
# Gopher's English list (Rae et al. 2021), datatrove's STOP_WORDS
GOPHER_STOP_WORDS = frozenset({"the", "be", "to", "of", "and", "that", "have", "with"})
_WORDFREQ_CODES = {"no": "nb", "tl": "fil", "hr": "sh", "bs": "sh"}  # lid.176 label -> wordfreq's code, where they differ


@functools.lru_cache(maxsize=1)
def versions() -> dict[str, str]:
    """The packages the lists come from (part of gopher_quality's signals hash)."""
    return {p: metadata.version(p) for p in ("stopwordsiso", "wordfreq")}


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

    freq_lang = _WORDFREQ_CODES.get(lang, lang)
    if not stopwordsiso.has_lang(lang) or freq_lang not in wordfreq.available_languages("small"):
        return ()
    stop = set(stopwordsiso.stopwords(lang))
    out: list[str] = []
    for w in wordfreq.iter_wordlist(freq_lang, "small"):  # most frequent first; "small": the top 1e-6
        if w in stop:
            out.append(w)
            if len(out) == n:
                break
    return tuple(out)
