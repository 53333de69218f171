import random
import re

import pytest

from lab import annotate
from lab.config import Config, build
from lab.doc import Doc
from lab.errors import ConfigError
from lab.select.rules import first_failure
from lab.stages import pii

# not PII under the default ip_ranges (public): each string is left byte-identical and counted 0.
# The dotted quads of the section numbers and versions are valid, globally routable addresses:
# only their context tells them apart.
NOT_PII = [
    # section numbers: a heading, a numbered outline (also flattened into one line), a word before
    "15.4.1.3. Tools",
    "Contents\n   4.1.2.3.  Header Fields ........ 12\n",
    "### 15.4.1.3. Tools",
    "15.4.1.2 Syntax\n15.4.1.3 Tools\n15.4.1.4 Examples\n",
    "15.4.1.2 Syntax\n" + "The syntax of a rule is described in this paragraph. " * 12 + "\n15.4.1.3 Tools\n",
    "Contents 15.4.1 Overview 15.4.1.1 Syntax 15.4.1.2 Tools",
    "See section 15.4.1.3 for details.",
    "as subsection 2.1.3.4 says",
    "§ 15.4.1.3 and §15.4.1.4",
    "Chapter 12.3.4.5 explains it; see Art. 7.1.2.3 and Appendix 8.8.8.1 too.",
    # versions
    "Version 1.0.0.1 fixes the crash.",
    '[assembly: AssemblyVersion("1.0.0.1")]',
    "__version__ = '2.1.0.4'",
    '{"name": "app", "version": "4.8.0.1"}',
    "release 3.2.1.5 and rev. 7.1.2.3",
    "wget https://example.org/dl/libfoo-1.2.3.4.tar.gz",
    "pip install app==1.2.3.4-beta; apt install app=1.2.3.4~rc1 app=5.6.7.8+dfsg",
    "1.0.0 was followed by 1.0.0.1 and 1.0.0.2",
    # netmasks, networks in CIDR notation
    "netmask 255.255.255.0 broadcast 10.0.0.255",
    "access-list 10 permit 10.1.1.0 0.0.0.255; mask 255.255.254.0",
    "route add -net 93.184.216.0/24; allow 2a00:1450::/32",
    # loopback, unspecified, private, shared, link-local, documentation, multicast, reserved
    "listening on 127.0.0.1:8080 and [::1]:8080, bound to 0.0.0.0 and ::",
    "gateway 192.168.1.1, dns 10.0.0.2, vpn 172.16.0.5, cgnat 100.64.0.1, apipa 169.254.1.1",
    "fe80::1ff:fe23:4567:890a%eth0 and fd12:3456:789a:1::1",
    "Servers: 192.0.2.10, 198.51.100.7, 203.0.113.5 and 2001:db8:85a3::8a2e:370:7334",
    "mDNS 224.0.0.251, SSDP 239.255.255.250, all nodes ff02::1:2, class E 240.1.2.3",
    # code and prose
    "Use std::vector<int> and a::b in C++; the ratio was 3.14 in 2023, pages 10-12, item 1234567.",
    "@property\ndef name(self):\n    return self._name\n@dataclass(frozen=True)",
    "ssh user@localhost; root@localhost.localdomain; admin@printer.local; ci@runner.internal",
    "a.b@c and x@y",
    "at 12:30:45, MAC 00:1a:2b:3c:4d:5e, OID 1.3.6.1.4.1.311, not an IP: 999.1.1.1",
]

# (text, the signals' counts) of PII, each with nothing else countable in it
PII = [
    ("_bob@example.org", {"pii_emails": 1}),
    ("write to __init__dev@example.org", {"pii_emails": 1}),
    ("müller@example.de", {"pii_emails": 1}),
    ("josé.garcía@correo.es and jose\u0301@correo.es", {"pii_emails": 2}),
    ("иван.петров@почта.example.ru, Ελένη@example.gr", {"pii_emails": 2}),
    ("...see docs.Contact bob@example.org", {"pii_emails": 1}),
    ("it is the end.bob@example.org", {"pii_emails": 1}),
    ("(see above).bob@example.org", {"pii_emails": 1}),
    ("Thanks...bob@example.org", {"pii_emails": 1}),
    ("Details below ...bob@example.org", {"pii_emails": 1}),
    ("请联系bob@example.org获取", {"pii_emails": 1}),
    ("jane.doe+news@mail.example.co.uk", {"pii_emails": 1}),
    ("The DNS server is 8.8.8.8. Then restart.", {"pii_ipv4": 1}),
    ("8.8.8.8 and 8.8.4.4", {"pii_ipv4": 2}),
    ("ping -v 93.184.216.34", {"pii_ipv4": 1}),
    ("http://93.184.216.34/index.html", {"pii_ipv4": 1}),
    ("inet 93.184.216.34/24", {"pii_ipv4": 1}),
    ("served from 1.1.1.1, then 15.4.1.3", {"pii_ipv4": 2}),
    ("resolver [2606:4700:4700::1111]:53 or 2a00:1450:4001:82b::200e", {"pii_ipv6": 2}),
    ("Call +44 20 7946 0958 or (415) 555-0100.", {"pii_phones": 2}),
]


def _counts(**nonzero: int) -> dict:
    out = {"pii_emails": 0, "pii_ipv4": 0, "pii_ipv6": 0, "pii_phones": 0, **nonzero}
    out["pii_total"] = sum(out.values())
    return out


@pytest.mark.parametrize("text", NOT_PII)
def test_not_pii_is_left_byte_identical_and_counted_zero(text):
    assert pii.signals(text) == _counts()
    assert pii.scrub(text) == text


@pytest.mark.parametrize(("text", "nonzero"), PII)
def test_pii_is_found_and_replaced(text, nonzero):
    assert pii.signals(text) == _counts(**nonzero)
    out = pii.scrub(text)
    placeholders = out.count("<EMAIL>") + out.count("<IP_ADDRESS>") + out.count("<PHONE>")
    assert placeholders == sum(nonzero.values()) and "@" not in out


def test_scrub_replaces_only_the_address():
    assert pii.scrub("请联系bob@example.org获取") == "请联系<EMAIL>获取"
    assert pii.scrub("(see above).bob@example.org!") == "(see above).<EMAIL>!"
    assert pii.scrub("it is the end.bob@example.org") == "it is the <EMAIL>"  # one dot-atom: end.bob
    assert pii.scrub("The DNS server is 8.8.8.8. Then restart.") == "The DNS server is <IP_ADDRESS>. Then restart."
    assert pii.scrub("inet 93.184.216.34/24") == "inet <IP_ADDRESS>/24"


def test_counts_and_placeholders():
    text = ("Contact jane.doe@example.com or ops@mail.example.co.uk. Call +44 20 7946 0958 or (415) 555-0100.\n"
            "Servers: 93.184.216.34 and 2606:4700:4700::1111; not an IP: 999.1.1.1, version 1.2.3, "
            "documentation: 192.0.2.10.")
    s = pii.signals(text)
    assert s == {"pii_emails": 2, "pii_ipv4": 1, "pii_ipv6": 1, "pii_phones": 2, "pii_total": 6}
    out = pii.scrub(text)
    assert out.count("<EMAIL>") == 2 and out.count("<IP_ADDRESS>") == 2 and out.count("<PHONE>") == 2
    assert "999.1.1.1" in out and "version 1.2.3" in out and "192.0.2.10" in out and "example.com" not in out


def test_all_ip_ranges_counts_private_loopback_and_documentation_addresses():
    text = "gw 10.0.0.1, lo 127.0.0.1, doc 192.0.2.10, ll fe80::1ff:fe23:4567:890a, pub 8.8.8.8"
    assert pii.signals(text)["pii_total"] == 1
    assert pii.signals(text, ip_ranges="all") == _counts(pii_ipv4=4, pii_ipv6=1)
    assert pii.scrub(text, ip_ranges="all") == ("gw <IP_ADDRESS>, lo <IP_ADDRESS>, doc <IP_ADDRESS>, "
                                                "ll <IP_ADDRESS>, pub <IP_ADDRESS>")
    # neither range makes these addresses: unspecified, masks, networks, section numbers, versions
    still_not = "0.0.0.0 :: 255.255.255.0 0.0.0.255 10.0.0.0/8 fd00::/8\n15.4.1.3. Tools\nVersion 1.0.0.1"
    assert pii.signals(still_not, ip_ranges="all")["pii_total"] == 0
    assert pii.scrub(still_not, ip_ranges="all") == still_not


def test_ip_ranges_reaches_the_signals_and_their_hash():
    default, everything = pii.Config(), pii.Config(ip_ranges="all")
    assert pii.Collector(default).signals(0, "gw 10.0.0.1")["pii_ipv4"] == 0
    assert pii.Collector(everything).signals(0, "gw 10.0.0.1")["pii_ipv4"] == 1
    assert pii.signal_params(default) == {"ip_ranges": "public"}
    assert Config().signals_hash() != build(Config, {"stages": {"pii": {"ip_ranges": "all"}}}).signals_hash()


@pytest.mark.parametrize(("ranges", "found"), [("public", 0), ("all", 2)])
def test_annotate_stores_the_text_scrubbed_under_the_configured_ranges(ranges, found):
    text = "The office gateway answers at 10.0.0.1, the printer at 192.168.1.20."
    cfg = build(Config, {"stages": {"pii": {"ip_ranges": ranges}}})
    row, stored = annotate.annotate_doc(Doc("a.jsonl", 0, text, len(text)), cfg, None, {},
                                        annotate.new_collectors(cfg, 1))
    assert row["pii_total"] == stored.count("<IP_ADDRESS>") == found


def test_a_bad_ip_ranges_names_the_key_the_value_and_the_choices():
    with pytest.raises(ConfigError) as e:
        build(Config, {"stages": {"pii": {"ip_ranges": "private"}}})
    message = str(e.value)
    assert message.startswith("stages.pii.ip_ranges='private' is not allowed: must be ")
    assert "'public'" in message and "'all'" in message and "default" in message


def test_rule_only_when_limit_set():
    assert pii.rules(pii.Config()) == []
    rules = pii.rules(pii.Config(max_pii=1))
    assert first_failure(rules, pii.signals("a@b.org c@d.org")) == "pii.too_much_pii"
    assert first_failure(rules, pii.signals("a@b.org")) is None


# The patterns as first written (opening lookbehinds first): the stage's are the same languages
# reordered for speed, so both must find the same matches, and e-mails found in the stretches
# around "@" must be those found in the whole text.
_L, _B = pii._LOCAL, pii._LABEL
PLAIN = {
    "EMAIL": re.compile(rf"(?<![{_L}%+-])(?<![{_L}%+-]\.)[{_L}][{_L}%+-]*(?:\.[{_L}%+-]+)*"
                        rf"@[{_B}]+(?:\.[{_B}]+)*\.[A-Za-z]{{2,24}}(?![{_L}])"),
    "IPV4": re.compile(r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?![\w]|\.\d)"),
    "IPV6": re.compile(r"(?<![\w:])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?![\w:])"),
    "PHONE": re.compile(r"(?<![\w+.-])(?:\+\d{1,3}[ .-]?)?(?:\(\d{2,4}\)[ .-]?|\d{2,4}[ .-])\d{3,4}[ .-]\d{3,5}"
                        r"(?![\w.-]?\d)"),
}
_PIECES = ["1", "12", "123", "1234", "12345", ".", ":", "::", "-", " ", "+", "(", ")", "@", "a", "B", "f", "é",
           "_", "%", "\n", "\t", "x.org", "e.de", "8.8.8.8", "fe80", "ab:cd", "+49", "(030)", "555-0100", ".1"]


def _noise(seed: int) -> str:
    rng = random.Random(seed)
    return "".join(rng.choice(_PIECES) for _ in range(rng.randint(0, 120)))


@pytest.mark.parametrize("name", sorted(PLAIN))
def test_reordered_patterns_find_what_the_plain_ones_find(name):
    from tests.stages.test_signals_golden import random_text

    texts = [_noise(i) for i in range(3000)] + [random_text(random.Random(i)) for i in range(200)]
    fast, plain = getattr(pii, name), PLAIN[name]
    for t in texts:
        assert [m.span() for m in fast.finditer(t)] == [m.span() for m in plain.finditer(t)], t
    assert sum(1 for t in texts for _ in plain.finditer(t)) > 100  # the noise does hit the pattern


def test_emails_found_around_at_signs_are_those_of_the_whole_text():
    texts = [_noise(i) for i in range(3000)] + ["a@b.cd e@f.gh", "x@y.org@z.org", "@", "a@b.org"]
    for t in texts:
        around = [m.span() for lo, hi in pii._around_at_signs(t) for m in pii.EMAIL.finditer(t, lo, hi)]
        assert around == [m.span() for m in PLAIN["EMAIL"].finditer(t)], t


def test_scrub_reuses_the_spans_signals_found():
    text = "write to bob@example.org from 8.8.8.8 today"
    assert pii.signals(text)["pii_total"] == 2
    assert pii._FOUND.get(("public", text)) == pii._find(text, "public")
    assert pii.scrub(text) == "write to <EMAIL> from <IP_ADDRESS> today"
