"""words: English words as datatrove splits them, for the filter stages.

datatrove's filters split English text with spaCy's blank English tokenizer and drop the whitespace
tokens. ``words`` re-implements that tokenizer in plain ``re``, without spaCy: split on whitespace; peel
prefixes and suffixes off each chunk; keep URLs whole; split the rest on infixes; then re-merge runs of
tokens that spell a special case (contractions, abbreviations, emoticons, as in spaCy's ``lang/en``
tables). Character classes come from Unicode categories where spaCy lists scripts by hand, so odd
scripts and binary junk may split differently. Each distinct chunk is split once and cached, and the
last texts' words are kept (``Recent``), so stages that ask again get them for free.

``sentences`` counts sentences with the rule of spaCy's ``sentencizer`` (datatrove's C4 filter).
"""

from __future__ import annotations

import re
import threading
import unicodedata
from itertools import chain, islice

import numpy as np

# Unicode sentence terminals, as datatrove's TERMINAL_PUNCTUATION (code point ranges, hex).
_TERMINAL_RANGES = (
    "21 2E 3F 589 61D-61F 6D4 700-702 7F9 837 839 83D-83E 964-965 104A-104B 1362 1367-1368 166E "
    "1735-1736 17D4-17D6 17D9-17DA 1803 1809 1944-1945 1AA8-1AAB 1B5A-1B5B 1B5E-1B5F 1B7D-1B7E "
    "1C3B-1C3C 1C7E-1C7F 203C-203D 2047-2049 2E2E 2E3C 2E53-2E54 3002 A4FF A60E-A60F A6F3 A6F7 "
    "A876-A877 A8CE-A8CF A92F A9C8-A9C9 AA5D-AA5F AAF0-AAF1 ABEB FE52 FE56-FE57 FF01 FF0E FF1F FF61 "
    "10A56-10A57 10F55-10F59 10F86-10F89 11047-11048 110BE-110C1 11141-11143 111C5-111C6 111CD "
    "111DE-111DF 11238-11239 1123B-1123C 112A9 1144B-1144C 115C2-115C3 115C9-115D7 11641-11642 "
    "1173C-1173E 11944 11946 11A42-11A43 11A9B-11A9C 11C41-11C42 11EF7-11EF8 11F43-11F44 16A6E-16A6F "
    "16AF5 16B37-16B38 16B44 16E98 1BC9F 1DA88"
)
TERMINAL_PUNCTUATION = frozenset(chr(c) for r in _TERMINAL_RANGES.split() for a, _, b in [r.partition("-")]
                                 for c in range(int(a, 16), int(b or a, 16) + 1))
# A word made only of these is a symbol, not a word (datatrove's PUNCTUATION_SET): ASCII
# punctuation, some CJK/typographic marks, control characters and the sentence terminals.
SYMBOLS = "".join(sorted(
    set(r"""!"#$%&'()*+,-./:;<=>?@[\]^_`{|}~—”％１〈、━【「」，】；“《„’∶´．（–？！：～«〉》）。…►»""")
    | {chr(c) for a, b in ((0, 9), (11, 13), (13, 32), (127, 160)) for c in range(a, b)}
    | TERMINAL_PUNCTUATION
))


def _char_classes(*groups: tuple[str, ...]) -> list[str]:
    """Bodies of regex character classes, one per group of Unicode categories (BMP and emoji)."""
    points = np.r_[np.arange(0x10000), np.arange(0x1F000, 0x1FC00)]
    cats = np.array(list(map(unicodedata.category, map(chr, points.tolist()))))
    out = []
    for group in groups:
        inside = points[np.isin(cats, group)]
        cut = np.flatnonzero(np.diff(inside) != 1) + 1  # where a run of consecutive code points ends
        starts, ends = inside[np.r_[0, cut]].tolist(), inside[np.r_[cut - 1, inside.size - 1]].tolist()
        out.append("".join(re.escape(chr(a)) + ("-" + re.escape(chr(b)) if b > a else "") for a, b in zip(starts, ends)))
    return out


# spaCy's character classes and affix rules (lang/char_classes.py, lang/punctuation.py)
_A = r"^\W\d_"  # letters, used as [{_A}]
_AN = r"^\W_"  # letters and digits, used as [{_AN}]
# lowercase (and uncased) letters, uppercase (and uncased) letters, symbols
_AL, _AU, _SO = _char_classes(("Ll", "Lo", "Lm"), ("Lu", "Lt", "Lo", "Lm"), ("So",))
_ICON = f"[{_SO}]"
_PUNCT = r"… …… , : ; \! \? ¿ ؟ ¡ \( \) \[ \] \{ \} < > _ # \* & 。 ？ ！ ， 、 ； ： ～ · । ، ۔ ؛ ٪".split()
_QUOTES = r"""\' " ” “ ` ‘ ´ ’ ‚ , „ » « 「 」 『 』 （ ） 〔 〕 【 】 《 》 〈 〉 〈 〉 ⟦ ⟧""".split()
_CURRENCY = r"\$ £ € ¥ ฿ US\$ C\$ A\$ ₽ ﷼ ₴ ₠ ₡ ₢ ₣ ₤ ₥ ₦ ₧ ₨ ₩ ₪ ₫ € ₭ ₮ ₯ ₰ ₱ ₲ ₳ ₴ ₵ ₶ ₷ ₸ ₹ ₺ ₻ ₼ ₽ ₾ ₿".split()
_UNITS = ("km km² km³ m m² m³ dm dm² dm³ cm cm² cm³ mm mm² mm³ ha µm nm yd in ft kg g mg µg t lb oz m/s "
          "km/h kmh mph hPa Pa mbar mb MB kb KB gb GB tb TB T G M K %").split()
_ELLIPSES = [r"\.\.+", "…"]
_Q = "".join(_QUOTES)

_PREFIX = re.compile("|".join("^" + p for p in [
    "§", "%", "=", "—", "–", r"\+(?![0-9])", *_PUNCT, *_ELLIPSES, *_QUOTES, *_CURRENCY, _ICON]))
_SUFFIX = re.compile("|".join(p + "$" for p in [
    *_PUNCT, *_ELLIPSES, *_QUOTES, _ICON, "'s", "'S", "’s", "’S", "—", "–", r"(?<=[0-9])\+",
    r"(?<=°[FfCcKk])\.", rf"(?<=[0-9])(?:{'|'.join(_CURRENCY)})", rf"(?<=[0-9])(?:{'|'.join(_UNITS)})",
    rf"(?<=[0-9{_AL}%²\-\+{'|'.join(_PUNCT)}(?:{_Q})])\.", rf"(?<=[{_AU}][{_AU}])\."]))
_INFIX = "|".join([  # spaCy's infixes as written (compiled by the tests, which compare it with the fast form)
    *_ELLIPSES, _ICON, r"(?<=[0-9])[+\-\*^](?=[0-9-])", rf"(?<=[{_AL}{_Q}])\.(?=[{_AU}{_Q}])",
    rf"(?<=[{_A}]),(?=[{_A}])", rf"(?<=[{_AN}])(?:-|–|—|--|---|——|~)(?=[{_A}])",
    rf"(?<=[{_AN}])[:<>=/](?=[{_A}])"])
# ``_INFIX`` written to open with the class of every character an infix can start with, each
# alternative then checking what it consumed by a lookbehind (``(?<=[0-9])[+\-]`` becomes
# ``[...](?<=[0-9][+\-])``), in the same order: the same matches, but ``re`` skips the characters
# that cannot start one in C instead of trying the eight alternatives at every position (1.6x faster
# on the chunks of bench/out/docs_en.jsonl; tests/text/test_words.py compares the two). One group
# around it all: ``re.split`` then keeps the infixes between the pieces.
_INFIX_FAST = re.compile(
    rf"([.…{_SO}+\-*^,–—~:<>=/](?:(?<=\.)\.+|(?<=…)|(?<=[{_SO}])|(?<=[0-9][+\-*^])(?=[0-9-])"
    rf"|(?<=[{_AL}{_Q}]\.)(?=[{_AU}{_Q}])|(?<=[{_A}],)(?=[{_A}])"
    rf"|(?<=[{_AN}][-–—~])(?:(?<=-)(?:|-|--)|(?<=—)(?:|—)|(?<=[–~]))(?=[{_A}])"
    rf"|(?<=[{_AN}][:<>=/])(?=[{_A}])))")
_URL = re.compile(
    r"^(?:[\w+\-.]{2,}://)?(?:\S+(?::\S*)?@)?"
    r"(?:(?:[A-Za-z0-9\u00a1-\uffff][A-Za-z0-9\u00a1-\uffff_-]{0,62})?[A-Za-z0-9\u00a1-\uffff]\.)+"
    rf"[{_AL}]{{2,63}}(?::\d{{2,5}})?(?:[/?#]\S*)?$")
_EMOTICONS = r"""
:) :-) :)) :-)) :))) :-))) (: (-: =) (= :] :-] [: [-: [= =] :o) (o: :} :-} 8) 8-) (-8 ;) ;-) (; (-; :( :-( :((
:-(( :((( :-((( ): )-: =( >:( :') :'-) :'( :'-( :/ :-/ =/ =| :| :-| ]= =[ :1 :P :-P :p :-p :O :-O :o :-o :0 :-0
:() >:o :* :-* :3 :-3 =3 :> :-> :X :-X :x :-x :D :-D ;D ;-D =D xD XD xDD XDD 8D 8-D ^_^ ^__^ ^___^ >.< >.> <.<
._. ;_; -_- -__- v.v V.V v_v V_V o_o o_O O_o O_O 0_o o_0 0_0 o.O O.o O.O o.o 0.0 o.0 0.o @_@ <3 <33 <333 </3
(^_^) (-_-) (._.) (>_<) (*_*) (¬_¬) ಠ_ಠ ಠ︵ಠ (ಠ_ಠ) ¯\(ツ)/¯ (╯°□°）╯︵┻━┻ ><(((*>"""


def _specials() -> dict[str, tuple[str, ...]]:
    """spaCy's English tokenizer exceptions: chunk -> its tokens (lang/en/tokenizer_exceptions.py)."""
    exc: dict[str, tuple[str, ...]] = {}

    def add(*parts: str) -> None:
        exc["".join(parts)] = parts

    def both(words: str, *suffix_sets: tuple[str, ...]) -> None:
        for w in words.split():
            for o in (w, w.title()):
                for parts in suffix_sets:
                    add(o, *parts)

    both("i", ("'m",), ("m",), ("'m", "a"), ("m", "a"))
    both("i you he she it we they", ("'ll",), ("ll",), ("'ll", "'ve"), ("ll", "ve"), ("'d",), ("d",),
         ("'d", "'ve"), ("d", "ve"))
    both("i you we they", ("'ve",), ("ve",))
    both("you we they", ("'re",), ("re",))
    both("he she it", ("'s",), ("s",))
    both("who what when where why how there that this", ("'s",), ("s",))
    both("who what when where why how there that this these those", ("'ll",), ("ll",), ("'ll", "'ve"),
         ("ll", "ve"), ("'d",), ("d",), ("'d", "'ve"), ("d", "ve"))
    both("who what when where why how there these those", ("'re",), ("re",), ("'ve",), ("ve",))
    both("ca could do does did had may might must need ought sha should wo would", ("n't",), ("nt",),
         ("n't", "'ve"), ("nt", "ve"))
    both("could might must should would", ("'ve",), ("ve",))
    both("ai are is was were have has dare", ("n't",), ("nt",))
    for w in "doin goin nothin nuthin ol somethin lovin havin".split():
        for o in (w, w.title()):
            add(o)
            add(o + "'")
    for w in ("'em", "em", "'ll", "ll", "'nuff", "nuff"):
        add(w)
    for h in range(1, 13):
        for p in ("a.m.", "am", "p.m.", "pm"):
            add(str(h), p)
    for o in ("y'", "y"):
        add(o, "all")
    for o in ("how", "How"):
        add(o, "'d", "'y")
    for a, b in (("not", "'ve"), ("not", "ve"), ("can", "not"), ("gon", "na"), ("got", "ta"), ("let", "'s"),
                 ("c'm", "on")):
        add(a, b)
        add(a[0].upper() + a[1:], b)
    singles = (
        "'S 's ‘S ‘s and/or w/o 're 'Cause 'cause 'cos 'Cos 'coz 'Coz 'cuz 'Cuz 'bout ma'am Ma'am o'clock O'clock "
        "Mt. Ak. Ala. Apr. Ariz. Ark. Aug. Calif. Colo. Conn. Dec. Del. Feb. Fla. Ga. Ia. Id. Ill. Ind. Jan. Jul. "
        "Jun. Kan. Kans. Ky. La. Mar. Mass. Mich. Minn. Miss. N.C. N.D. N.H. N.J. N.M. N.Y. Neb. Nebr. Nev. Nov. "
        "Oct. Okla. Ore. Pa. S.C. Sep. Sept. Tenn. Va. Wash. Wis. 'd a.m. Adm. Bros. co. Co. Corp. D.C. Dr. e.g. "
        "E.g. E.G. Gen. Gov. i.e. I.e. I.E. Inc. Jr. Ltd. Md. Messrs. Mo. Mont. Mr. Mrs. Ms. p.m. Ph.D. Prof. "
        "Rep. Rev. Sen. St. vs. v.s. ' \\\") <space> '' C++ ä. ö. ü. \\t \\n"
    ).split() + [c + "." for c in "abcdefghijklmnopqrstuvwxyz"] + _EMOTICONS.split()
    for s in singles:
        add(s)
    for u in "cfkCFK":
        add("°", u, ".")
    for s in "Ill ill Its its Hell hell Shell shell Shed shed were Were Well well Whore whore".split():
        exc.pop(s, None)
    exc.update({k.replace("'", "’"): tuple(p.replace("'", "’") for p in v) for k, v in exc.items() if "'" in k})
    return exc


_SPECIALS = _specials()


def _unescaped(p: str) -> str:
    return re.sub(r"\\(.)", r"\1", p)


# The last characters of the suffix patterns: a chunk ending in none of them has no suffix, and one
# ending like a unit, a currency or ``'s`` has none without a digit or an apostrophe just before.
_SUFFIX_ENDS = re.compile("[" + re.escape("".join(sorted({_unescaped(p)[-1] for p in (*_PUNCT, *_QUOTES)}
                                                        | set(".…—–+")))) + _SO + "]")
_AFTER_DIGIT_ENDS = frozenset(_unescaped(p)[-1] for p in (*_CURRENCY, *_UNITS)) | {"s", "S"}
_DIGIT_OR_APOSTROPHE = re.compile("[0-9'’]")


def _suffix_len(s: str) -> int:
    """Length of spaCy's suffix match: the leftmost suffix pattern that runs to the end."""
    if s.endswith(".."):  # the only pattern longer than 4 characters, and then the leftmost
        return len(s) - len(s.rstrip("."))
    last = s[-1:]
    if not _SUFFIX_ENDS.match(last) and (last not in _AFTER_DIGIT_ENDS or not _DIGIT_OR_APOSTROPHE.search(
            s, max(0, len(s) - 5), len(s) - 1)):  # units are at most 4 characters long
        return 0
    m = _SUFFIX.search(s, max(0, len(s) - 4))  # lookbehinds still see the whole string
    return m.end() - m.start() if m else 0


def _split(s: str, specials: dict[str, tuple[str, ...]]) -> list[str]:
    """spaCy's first pass over one chunk: peel affixes, keep specials and URLs, split infixes."""
    if s in specials:
        return list(specials[s])
    prefixes: list[str] = []
    suffixes: list[str] = []
    while s:  # each round peels a prefix, a suffix or both, until none is left or a special remains
        m = _PREFIX.match(s)  # every alternative is anchored: match, not a scan
        pre = m.end() if m else 0
        suf = _suffix_len(s[pre:])
        if not pre and not suf:
            break
        if pre and s[pre:] in specials:
            prefixes.append(s[:pre])
            s = s[pre:]
            break
        if suf and s[:-suf] in specials:
            suffixes.append(s[-suf:])
            s = s[:-suf]
            break
        if pre and suf and pre + suf <= len(s):
            prefixes.append(s[:pre])
            suffixes.append(s[-suf:])
            s = s[pre:-suf]
        elif pre:
            prefixes.append(s[:pre])
            s = s[pre:]
        else:
            suffixes.append(s[-suf:])
            s = s[:-suf]
        if s in specials:
            break
    out = prefixes
    if s in specials:
        out.extend(specials[s])
    elif "." in s and _URL.match(s):  # a URL has a dot before its top-level domain
        out.append(s)
    elif s:
        parts = _INFIX_FAST.split(s)  # text, infix, text, ...: every infix is at least one character
        if len(parts) == 1:
            out.append(s)
        else:
            if not parts[0]:  # an infix at the start does not split: it stays with the text after it
                parts[1:3] = [parts[1] + parts[2]]
            out.extend(filter(None, parts))
    out.extend(reversed(suffixes))
    return out


# spaCy's second pass: token runs that spell a special case containing affixes are re-merged
# (``):`` -> ``):``, ``d .`` -> ``d.``). Pattern = the special's affix-only split.
_MERGE = {tuple(_split(k, {})): k for k in _SPECIALS if _PREFIX.search(k) or _SUFFIX.search(k) or _INFIX_FAST.search(k)}
_MERGE_MAX = max(map(len, _MERGE))
_MERGE_FIRST = {p[0] for p in _MERGE}


def _chunk(s: str) -> tuple[str, ...]:
    """The tokens of one whitespace-free chunk.

    >>> _chunk('(cannot):')  # a special case inside affixes, and an emoticon re-merged
    ('(', 'can', 'not', '):')
    """
    if s.isalpha():
        return _SPECIALS.get(s) or (s,)
    toks = _split(s, _SPECIALS)
    if _MERGE_FIRST.isdisjoint(toks):
        return tuple(toks)
    spans = [(j - i, i, j) for i in range(len(toks)) if toks[i] in _MERGE_FIRST
             for j in range(i + 1, min(len(toks), i + _MERGE_MAX) + 1) if tuple(toks[i:j]) in _MERGE]
    if not spans:
        return tuple(toks)
    kept, seen = [], set()
    for _, i, j in sorted(spans, key=lambda s: (-s[0], s[1])):  # longest, then leftmost first (spaCy)
        if i not in seen and j - 1 not in seen:
            kept.append((i, j))
        seen.update(range(i, j))
    out, pos = [], 0
    for i, j in sorted(kept):
        out += toks[pos:i]
        out += _SPECIALS["".join(toks[i:j])]
        pos = j
    return tuple(out + toks[pos:])


_CACHE: dict[str, tuple[str, ...]] = {}  # chunk -> tokens, oldest first
_CACHE_SIZE = 1 << 17  # entries (about 30 MB); the older half goes when full
class Recent:
    """The answers for the last texts asked, by key: annotate hands a stage a chunk of documents,
    then the next stage the same chunk (``lab.annotate.CHUNK_DOCS``), so what the stages share
    (a document's words; the PII spans its scrub reuses) is kept for more than a chunk's worth of texts: ``size`` entries, and
    at most ``chars`` characters of their texts (the older half goes when either is reached).

    >>> r = Recent(size=2); r.put("a", 1, 1); r.put("b", 2, 1); r.put("c", 3, 1); r.get("a"), r.get("c")
    (None, 3)
    """

    def __init__(self, size: int = 256, chars: int = 1 << 25) -> None:
        self.size, self.chars = size, chars
        self._d: dict = {}
        self._chars: dict = {}
        self._total = 0
        self._lock = threading.Lock()

    def get(self, key):
        return self._d.get(key)

    def put(self, key, value, chars: int) -> None:
        with self._lock:
            if len(self._d) >= self.size or self._total + chars > self.chars:
                for k in list(islice(self._d, max(1, len(self._d) // 2))):
                    del self._d[k]
                    self._total -= self._chars.pop(k)
            if key not in self._d:
                self._total += chars
            self._chars[key] = chars
            self._d[key] = value


_RECENT = Recent()  # text -> its words: the stages that count words share them


_CACHE_LOCK = threading.Lock()  # workers of an external cluster may run several threads


def _remember(cache: dict, new: dict) -> None:
    with _CACHE_LOCK:
        if len(cache) + len(new) > _CACHE_SIZE:
            for key in list(islice(cache, len(cache) // 2)):
                del cache[key]
        cache.update(new)


def _tokens(chunks: list[str]) -> tuple[str, ...]:
    new = set(chunks).difference(_CACHE)
    if new:
        _remember(_CACHE, {c: _chunk(c) for c in new})
    try:
        return tuple(chain.from_iterable(map(_CACHE.__getitem__, chunks)))
    except KeyError:  # evicted meanwhile
        return tuple(t for c in chunks for t in _CACHE.get(c) or _chunk(c))


def words(text: str) -> tuple[str, ...]:
    """English words and punctuation marks, as datatrove's ``split_into_words(text, "en")``.

    >>> words("It's 3.5kg -- well-known, e.g. U.S. (cannot)!")
    ('It', "'s", '3.5', 'kg', '--', 'well', '-', 'known', ',', 'e.g.', 'U.S.', '(', 'can', 'not', ')', '!')
    """
    ws = _RECENT.get(text)
    if ws is None:
        ws = _tokens(text.split())
        _RECENT.put(text, ws, len(text))
    return ws


def _is_punct(token: str) -> bool:
    return all(unicodedata.category(ch)[0] == "P" for ch in token)


_WS_THEN_CHUNK = re.compile(r"(\s*)(\S+)")


def sentences(line: str) -> int:
    """Sentences in ``line`` by the rule of spaCy's sentencizer: a new one starts at the first
    token that is not punctuation after a sentence terminal token (``.``, ``!``, ``?``, ...).
    (Its terminals are ours less some 30 marks of rare scripts.)

    >>> sentences("Dr. Smith arrived at 3 p.m. today. He left! Did he (really)? Yes.")
    4
    """
    chunks = line.split(" ")
    if len(chunks) != len(line.split()):  # spaCy keeps whitespace beyond one space as a token
        chunks = []
        for m in _WS_THEN_CHUNK.finditer(line):
            ws = m.group(1)
            if ws[1:] if ws[:1] == " " else ws:
                chunks.append(" ")  # splits to no token but itself, and is not punctuation
            chunks.append(m.group(2))
    tokens = _tokens(chunks)
    n, pending = 1, False
    for t in tokens:
        if t in TERMINAL_PUNCTUATION:
            pending = True
        elif pending and not _is_punct(t):
            n, pending = n + 1, False
    return n if tokens else 0
