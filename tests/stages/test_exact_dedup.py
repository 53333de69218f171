from lab.select.rules import Rule
from oracle import keep_first_in_group
from lab.stages import exact_dedup


def test_hash_ignores_case_and_spacing_only():
    h = lambda t: exact_dedup.signals(t)["content_hash"]  # noqa: E731
    assert h("Hello   World\n") == h("hello world") == h(" HELLO\tWORLD ")
    assert h("hello world") != h("hello world!")
    assert h("ﬁne") == h("fine")  # NFKC folds the ligature


def test_keep_first_in_group_among_alive_rows():
    rule = exact_dedup.rules(exact_dedup.Config())[0]
    assert rule == Rule("exact_dedup", "content_hash", "first_in_group", None, "duplicate")
    rows = [{"doc_id": 5, "content_hash": 1}, {"doc_id": 2, "content_hash": 1}, {"doc_id": 9, "content_hash": 2},
            {"doc_id": 1, "content_hash": None}]
    assert keep_first_in_group(rule, rows) == {1: "exact_dedup.duplicate", 2: None, 5: "exact_dedup.duplicate", 9: None}
