"""The url stage: domains, registered domains and TLDs offline, blocklists with categories, URL words, TLD lists."""

from __future__ import annotations

import json
import random
import sys

import pytest

from lab import config, engine, query
from lab.doc import Doc
from lab.errors import ConfigError
from lab.select.rules import first_failure
from lab.stages import url


def _signals(cfg: url.Config, link: str) -> dict:
    return url.Collector(cfg, 1).signals(0, "some text", Doc("a.jsonl", 0, "some text", 9, url=link))


def _why(cfg: url.Config, link: str) -> str | None:
    return first_failure(url.rules(cfg), _signals(cfg, link))


def test_domain_registered_domain_and_tld_from_the_packaged_suffix_list():
    s = _signals(url.Config(), "https://WWW.news.BBC.co.uk:443/world?x=1")
    assert (s["url_domain"], s["url_registered_domain"], s["url_tld"]) == ("news.bbc.co.uk", "bbc.co.uk", "co.uk")
    s = _signals(url.Config(), "http://192.168.1.20/admin")
    assert (s["url_domain"], s["url_registered_domain"], s["url_tld"]) == ("192.168.1.20", "192.168.1.20", "")
    s = _signals(url.Config(), "example.github.io/page")  # a private suffix: each site is its own domain
    assert s["url_registered_domain"] == "example.github.io"


def test_a_document_without_a_url_passes_and_is_counted():
    cfg = url.Config(allowed_tlds=("de",), words=("casino",))
    s = _signals(cfg, "")
    assert s["url_present"] == 0 and s["url_blocked"] == "" and s["url_tld"] == ""
    assert _why(cfg, "") is None
    assert url.signals("text without a document") == s


def test_blocklist_file_blocks_domains_and_their_subdomains(tmp_path):
    bl = tmp_path / "adult.txt"
    bl.write_text("# a comment\n\nbad.example\n*.worse.org\nads.tracker.net  # trailing comment\n")
    cfg = url.Config(blocklist=str(bl))
    assert _why(cfg, "https://bad.example/x") == "url.blocked_adult"
    assert _why(cfg, "https://deep.sub.bad.example/") == "url.blocked_adult"
    assert _why(cfg, "https://worse.org") == "url.blocked_adult"
    assert _why(cfg, "https://tracker.net") is None  # the parent of a listed domain is not blocked
    assert _why(cfg, "https://notbad.example") is None  # a suffix of the name, not a parent domain
    assert _signals(cfg, "https://x.ads.tracker.net/a")["url_blocked"] == "adult"


def test_ut1_directory_records_each_category_and_names_it_in_the_reason(tmp_path):
    root = tmp_path / "ut1"
    for cat, domains in (("gambling", "casino.example\n"), ("phishing", "login-bank.example\nbad.example\n")):
        (root / cat).mkdir(parents=True)
        (root / cat / "domains").write_text(domains)
        (root / cat / "urls").write_text("ignored.example/path\n")
    cfg = url.Config(blocklist=str(root))
    assert [r.reason for r in url.rules(cfg)][:2] == ["blocked_ut1_gambling", "blocked_ut1_phishing"]
    assert _signals(cfg, "http://www.casino.example/")["url_blocked"] == "ut1/gambling"
    assert _why(cfg, "http://a.login-bank.example/") == "url.blocked_ut1_phishing"
    assert _why(cfg, "http://ignored.example/path") is None


def test_url_words_from_a_list_and_the_config(tmp_path):
    words = tmp_path / "words.txt"
    words.write_text("porn\nCasino\n")
    cfg = url.Config(word_list=str(words), words=("xxx",))
    assert _signals(cfg, "https://example.com/free-casino/XXX-videos?porn=1")["url_word_hits"] == 3
    assert _why(cfg, "https://example.com/casinos-history") is None  # whole words only
    assert _why(cfg, "https://casino.example.com/") == "url.url_words"
    assert _why(url.Config(word_list=str(words), max_word_hits=1), "https://casino.example.com/") is None


def test_allowed_and_blocked_tlds():
    assert _why(url.Config(allowed_tlds=("de", "at")), "https://example.de/") is None
    assert _why(url.Config(allowed_tlds=("de", "at")), "https://example.com/") == "url.tld_not_allowed"
    assert _why(url.Config(blocked_tlds=("xyz", "co.uk")), "https://a.b.co.uk/") == "url.blocked_tld_co_uk"
    assert _why(url.Config(blocked_tlds=("xyz",)), "https://a.b.co.uk/") is None


def test_bad_lists_are_clear_errors_before_any_work(tmp_path):
    with pytest.raises(ConfigError, match=r"blocklist='/nope' does not exist.*UT1"):
        url.Config(blocklist="/nope")
    bad = tmp_path / "bl.txt"
    bad.write_text("good.example\nnot a domain\n")
    with pytest.raises(ConfigError, match=r"bl.txt:2: 'not a domain' is not a domain name"):
        config.build(config.Config, {"stages": {"url": {"blocklist": str(bad)}}})
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="without any CATEGORY/domains file"):
        url.Config(blocklist=str(tmp_path / "empty"))
    words = tmp_path / "w.txt"
    words.write_text("fine\ntwo words\n")
    with pytest.raises(ConfigError, match=r"w.txt:2: 'two words' is not one word"):
        url.Config(word_list=str(words))
    with pytest.raises(ConfigError, match="allowed_tlds"):
        url.Config(allowed_tlds=(" com",))


def test_editing_a_list_changes_the_signals_hash(tmp_path):
    bl = tmp_path / "bl.txt"
    bl.write_text("a.example\n")
    cfg = config.build(config.Config, {"stages": {"url": {"blocklist": str(bl)}}})
    before = cfg.signals_hash()
    bl.write_text("a.example\nb.example\n")
    assert cfg.signals_hash() != before
    assert config.build(config.Config, {"stages": {"url": {"max_word_hits": 3}}}).signals_hash() == \
        config.Config().signals_hash()  # a threshold is not a signal


@pytest.mark.skipif(sys.platform != "linux", reason="a LocalCluster run")
def test_a_run_drops_by_url_in_explore_and_batch(tmp_path):
    vocab = [a + b + c for a in "abcdefgh" for b in "ijklmnop" for c in "qrstuvwx"]  # no digits: they normalize to 0
    links = ["https://good.example/a", "https://spam.bad.example/b", "https://x.example/casino-night", ""]
    src = tmp_path / "docs.jsonl"
    src.write_text("".join(json.dumps({"text": " ".join(random.Random(i).sample(vocab, 60)), "url": link}) + "\n" for i, link in enumerate(links)))
    bl = tmp_path / "bad.txt"
    bl.write_text("bad.example\n")
    off = {s: {"enabled": False} for s in ("language", "gopher_quality", "gopher_repetition", "c4", "fineweb")}
    kept = {}
    for mode in ("explore", "batch"):
        cfg = config.build(config.Config, {
            "name": mode, "output_dir": str(tmp_path / "runs"), "mode": mode, "inputs": [{"path": str(src)}],
            "stages": {**off, "url": {"blocklist": str(bl), "words": ["casino"]}},
            "tokenizer": {"enabled": False}, "engine": {"n_workers": 1}})
        engine.run(cfg, progress=False, client="inprocess")
        reasons = query.drop_reasons(cfg.run_dir, cfg)
        kept[mode] = sorted(r for r in reasons["reason"].to_list() if r)
        rows = query.signal_rows(cfg.run_dir, ["url_present", "url_domain"])
        assert sorted(rows["url_present"].to_list()) == [0, 1, 1, 1]
        assert query.urls(cfg.run_dir).rows() == [("no URL", 1), ("URL, not blocked", 2), ("blocked: bad", 1)]
        assert dict(query.top_domains(cfg.run_dir).select("domain", "documents").rows()) == {"good.example": 1, "x.example": 1, "bad.example": 1}
    assert kept["explore"] == kept["batch"] == ["url.blocked_bad", "url.url_words"]
