from lab.rules import first_failure
from lab.stages import pii


def test_counts_and_placeholders():
    text = ("Contact jane.doe@example.com or ops@mail.example.co.uk. Call +44 20 7946 0958 or (415) 555-0100.\n"
            "Servers: 192.0.2.10 and 2001:db8:85a3::8a2e:370:7334; not an IP: 999.1.1.1, version 1.2.3.")
    s = pii.signals(text)
    assert s == {"pii_emails": 2, "pii_ipv4": 1, "pii_ipv6": 1, "pii_phones": 2, "pii_total": 6}
    out = pii.scrub(text)
    assert out.count("<EMAIL>") == 2 and out.count("<IP_ADDRESS>") == 2 and out.count("<PHONE>") == 2
    assert "999.1.1.1" in out and "version 1.2.3" in out and "example.com" not in out


def test_code_and_prose_are_left_alone():
    text = "Use std::vector<int> and a::b in C++; the ratio was 3.14 in 2023, pages 10-12, item 1234567."
    assert pii.signals(text)["pii_total"] == 0
    assert pii.scrub(text) == text


def test_rule_only_when_limit_set():
    assert pii.rules(pii.Config()) == []
    rules = pii.rules(pii.Config(max_pii=1))
    assert first_failure(rules, pii.signals("a@b.org c@d.org")) == "pii.too_much_pii"
    assert first_failure(rules, pii.signals("a@b.org")) is None
