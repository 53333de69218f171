from lab.select.rules import first_failure
from lab.stages import c4
from lab.text.words import sentences

RULES = c4.rules(c4.Config())
GOOD = "One sentence here. Another one follows! Is this the third? Yes, four. And five."  # 5 sentences


def reason(text: str) -> str | None:
    return first_failure(RULES, c4.signals(text))


def test_each_line_counted_once_under_its_first_reason():
    text = "\n".join([
        "Home",                                          # no terminal punctuation
        "Hello there.",                                  # 2 words
        "Please enable JavaScript to continue.",         # javascript
        "Read our privacy policy for details.",          # policy
        "This is cited.[1]",                             # citation removed -> kept, 1 sentence
        "Wait for it...",                                # ends with an ellipsis
        "x" * 1001 + " is long.",                        # a word over 1,000 characters
        "One. Two! Three?",                              # kept, 3 sentences
        "{ javascript }",                                # no punctuation: removed before any flag
    ])
    s = c4.signals(text)
    assert s == {"c4_lines": 9, "c4_lines_long_word": 1, "c4_lines_no_terminal_punct": 3, "c4_lines_few_words": 1,
                 "c4_lines_javascript": 1, "c4_lines_policy": 1, "c4_lorem_ipsum": 0, "c4_curly_brace": 0,
                 "c4_sentences": 4}
    assert reason(text) == "c4.too_few_sentences"  # 4 < 5


def test_lorem_ipsum_flag():
    text = "Lorem ipsum dolor sit amet.\n" + GOOD
    s = c4.signals(text)
    assert (s["c4_lorem_ipsum"], s["c4_curly_brace"], s["c4_sentences"]) == (1, 0, 1 + 5)
    assert reason(text) == "c4.lorem_ipsum"
    # on a line removed earlier (no terminal punctuation) it does not count
    assert c4.signals("lorem ipsum dolor sit amet\n" + GOOD)["c4_lorem_ipsum"] == 0


def test_curly_brace_flag():
    text = GOOD + "\nSet the {name} field first."
    s = c4.signals(text)
    assert (s["c4_curly_brace"], s["c4_sentences"]) == (1, 6)
    assert reason(text) == "c4.curly_brace"
    # a javascript line is removed before the curly-brace check
    s = c4.signals(GOOD + "\nCall the javascript {init} hook.")
    assert (s["c4_curly_brace"], s["c4_lines_javascript"]) == (0, 1)
    assert reason(GOOD + "\nCall the javascript {init} hook.") is None


def test_sentences_follow_spacys_sentencizer():
    # abbreviations and times stay whole tokens, so their periods end no sentence
    assert sentences("Dr. Smith met Mr. Jones at 5 p.m. on Jan. 3rd. They talked.") == 2
    assert sentences("He said: \"Go.\" Then he left.") == 2  # the quote after "." is punctuation
    assert sentences("Version 3.14 is out. Get it!") == 2
    assert sentences("Wait... what?") == 1  # "..." is not a sentence terminal token
    assert sentences("One.  Two") == 2  # the extra space is a token of its own: a new sentence there
    assert sentences("") == 0


def test_empty_doc():
    s = c4.signals("")
    assert set(s) == set(c4.SIGNALS) and all(v == 0 for v in s.values())
    assert reason("") == "c4.too_few_sentences"


def test_realistic_doc_passes():
    text = (
        "Our Story\n"
        "The bakery opened in 1998 in a small shop on Main Street. Every loaf is still shaped by hand.\n"
        "We use flour from two mills in the valley, and our sourdough starter is older than the shop.\n"
        "Visitors can watch the bakers at work through the front window. Tours run on Saturdays.\n"
        "Contact us\n"
        "This site uses cookies to count visitors.\n"
    )
    s = c4.signals(text)
    # kept: lines 2-4 with 2 + 1 + 2 sentences; "Our Story"/"Contact us" lack punctuation; one cookie line
    assert (s["c4_lines"], s["c4_lines_no_terminal_punct"], s["c4_lines_policy"], s["c4_sentences"]) == (6, 2, 1, 5)
    assert reason(text) is None
