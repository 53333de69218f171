"""One word split per document (lab.text.segment.document_words) in every stage that counts words:
gopher_repetition's n-grams, fineweb's newlines per word, near_dedup's shingles; stop words of Korean,
Serbian and Thai (lab.text.stopwords)."""

import random

import numpy as np
import pytest

from lab.dedup.compare import text_jaccard
from lab.dedup.signature import minhash, normalize, shingle_hashes, shingle_text
from lab.stages import fineweb as fw
from lab.stages import gopher_repetition as gr
from lab.stages import near_dedup
from lab.text import langid, segment, stopwords
from lab.text.words import words

ZH = ("我们今天下午去北京大学参观，然后在图书馆里看了很多有意思的书。\n晚上我们坐地铁回家，路上遇到了很多老朋友。\n"
      "第二天早上，我们又去了颐和园，那里的风景非常美丽，游客也很多。\n中午我们在附近的饭馆吃了北京烤鸭，味道好极了。\n")
JA = ("私は昨日の午後、東京の大学の図書館で日本語の本をたくさん読みました。\n"
      "とても面白かったので、今日もまた図書館に行くつもりです。\n"
      "友達と一緒に新しい喫茶店でコーヒーを飲みながら話しました。\n"
      "夜は家族と一緒に晩ご飯を食べて、テレビでニュースを見ました。\n")


def _old_jaccard(a: str, b: str) -> float:
    """near_dedup VERSION 1: shingles of the normalized text split at spaces, whatever the language."""
    x, y = (shingle_hashes(normalize(t), 5) for t in (a, b))
    inter = np.intersect1d(x, y).size
    return inter / (x.size + y.size - inter)


@pytest.mark.parametrize("text, old, new", [(ZH, "很多老朋友", "几个老朋友"), (JA, "たくさん", "少し")])
def test_cjk_near_duplicates_are_found_on_segmented_shingles(text, old, new):
    edited = text.replace(old, new)  # one phrase of one line changed
    assert langid.detect(text)[0] == langid.detect(edited)[0] in segment.UNSPACED
    threshold = near_dedup.Config().threshold  # 0.8
    assert _old_jaccard(text, edited) < 0.6  # clauses as "words": one edit spoils every shingle holding the clause
    assert text_jaccard(text, edited) >= threshold  # ICU words: the edit spoils the 5-grams around it only
    # the signatures agree in most permutations, so LSH makes the pair a candidate at 14 bands x 8 rows
    cfg = near_dedup.Config()
    sa, sb = (minhash(shingle_hashes(shingle_text(t), cfg.ngram), cfg.num_perm, cfg.seed) for t in (text, edited))
    bands = (sa == sb).reshape(cfg.bands, cfg.rows).all(axis=1)
    assert (sa == sb).mean() >= 0.7 and bands.any()
    collector = near_dedup.Collector(cfg)
    assert collector.signals(0, text)["nd_shingles"] == np.unique(shingle_hashes(shingle_text(text), 5)).size > 40


def test_unrelated_cjk_documents_stay_apart():
    assert text_jaccard(ZH, JA) == 0.0


def test_cjk_repeated_sentences_give_a_high_duplicated_ngram_fraction():
    sentence = "我们今天下午去北京大学参观，然后在图书馆里看了很多有意思的书。"
    text = sentence * 6  # one line: only the n-gram signals can see the repetition
    s = gr.signals(text)
    assert s["gr_dup_line_frac"] == 0.0
    assert s["gr_dup_5gram_char_frac"] >= 0.8 and s["gr_dup_10gram_char_frac"] >= 0.7
    assert s["gr_dup_10gram_char_frac"] > gr.Config().max_dup_10gram_char_frac  # the rule drops it
    # VERSION 1 (English words): the six sentences were two "words", no 5-gram at all
    ws = words(text)
    assert len(ws) <= 3 and gr.dup_ngram_chars(ws, np.fromiter(map(len, ws), np.int64)) == {n: 0 for n in gr.DUP_NS}
    # and a CJK text without repetition stays low
    assert gr.signals(ZH)["gr_dup_5gram_char_frac"] < 0.15


def test_fineweb_counts_cjk_words():
    s = fw.signals(ZH)
    n_words = len(segment.document_words(ZH))
    assert n_words > 50 and s["fw_newline_word_ratio"] == ZH.count("\n") / n_words
    assert ZH.count("\n") / len(words(ZH)) > fw.Config().max_newline_word_ratio  # VERSION 1 dropped it as a list


def test_spaced_languages_keep_version_1_signals_on_the_sample(monkeypatch):
    """English (and every language written with spaces): gopher_repetition, fineweb and near_dedup
    shingles are those of VERSION 1 (English words, normalize(text)) bit for bit."""
    from lab import sample

    docs = [d["text"] for d in sample.synthetic_documents(random.Random(sample.SEED))]
    new = {i: (gr.signals(t), fw.signals(t), shingle_text(t)) for i, t in enumerate(docs)}
    monkeypatch.setattr(segment, "document_words", words)  # VERSION 1's words
    checked = 0
    for i, t in enumerate(docs):
        if langid.detect(t)[0] in segment.UNSPACED:
            continue
        assert new[i] == (gr.signals(t), fw.signals(t), normalize(t)), t[:200]
        checked += 1
    assert checked >= 0.9 * len(docs)


def test_korean_particles_count_as_eojeol_endings():
    text = "이 명령은 파일의 내용을 화면에 출력하고, 사용자가 옵션을 지정하면 결과를 파일에서 읽어 표준 출력으로 보낸다."
    assert langid.detect(text)[0] == "ko"
    assert stopwords.ranked("ko") == ("이", "을", "에", "의", "가", "를", "에서", "으로")  # particles only
    ws = set(segment.document_words(text))
    assert len(stopwords.stop_words("ko") & ws) <= 1  # as whole words: only the determiner 이
    assert stopwords.count("ko", ws) == 8  # 이 (이), 을 (내용을), 에 (화면에), 의 (파일의), 가, 를, 에서, 으로


def test_serbian_counts_the_croatian_list_in_either_script():
    assert stopwords.ranked("sr") == stopwords.ranked("hr") != ()
    cyrillic = set(words("Ово је страница упутства и она се налази у директоријуму за помоћ."))
    latin = set(words("Ovo je stranica uputstva i ona se nalazi u direktorijumu za pomoć."))
    assert stopwords.count("sr", cyrillic) == stopwords.count("sr", latin) == 5  # је и се у за
    assert stopwords.count("sr", cyrillic | latin) == 5  # one stop word in two scripts counts once


def test_thai_stop_words_ranked_by_the_thai_national_corpus():
    th = stopwords.ranked("th")
    assert len(th) == stopwords.N_STOP_WORDS and th[0] == "ที่" and "และ" in th
    text = "การศึกษาเป็นสิ่งที่สำคัญมากในชีวิตของคนเรา และทุกคนมีสิทธิ์ที่จะได้รับการศึกษาที่ดี"
    assert stopwords.count("th", set(segment.words(text, "th"))) >= 5
    for lang in ("lo", "km", "my"):  # no stop list in any package considered: Gopher's English eight
        assert stopwords.ranked(lang) == () and stopwords.stop_words(lang) == stopwords.GOPHER_STOP_WORDS
