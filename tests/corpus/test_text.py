"""The corpus's text rules: mojibake repair, WikiText-style tokens, chunking, the match key."""

import pytest

from elmo_keras.corpus.text import chunks, match_key, repair_news, tokenize


@pytest.mark.parametrize(
    ("broken", "repaired"),
    [
        ('The Senate voted on DeVos"?nomination.', "The Senate voted on DeVos' nomination."),
        ('the EU\'s "senseless"?demands', 'the EU\'s "senseless" demands'),
        ('"It is hard," Warren said,"?Sen. Collins', '"It is hard," Warren said," Sen. Collins'),
        ('raise our voices "?and push back', "raise our voices \u2014 and push back"),
        ("Knightley won ?3,000 in damages", "Knightley won \u00a33,000 in damages"),
        ("Speaking on RT?'s News at One", "Speaking on RT\u00c9's News at One"),
        ('"You"ve been harping on that', "\"You've been harping on that"),
        ('He said, "\ufffdYou take care."', 'He said, "You take care."'),
    ],
)
def test_repair_news_undoes_the_news_mojibake(broken, repaired):
    assert repair_news(broken) == repaired


@pytest.mark.parametrize("hopeless", ["Fianna F\ufffd\ufffdil is", "ends by Bus ?ireann workers"])
def test_repair_news_drops_the_sentences_it_cannot_repair(hopeless):
    assert repair_news(hopeless) is None
    assert repair_news(f'It began. {hopeless}. It "ended."  Then?') == 'It began. It "ended." Then?'


@pytest.mark.parametrize(
    ("raw", "tokens"),
    [
        (
            "Mr. Smith's long-term plan cost $1,500 (3.5% more) - didn't it?",
            "Mr. Smith 's long @-@ term plan cost $ 1 @,@ 500 ( 3 @.@ 5 % more ) - did n't it ?",
        ),
        (
            "\u201cThe U.S. team\u2019s win,\u201d he said\u2026",
            '" The U.S. team \'s win , " he said \u2026',
        ),
        ("they're 'here' ... and ``gone''", "they 're ' here ' ... and \" gone \""),
        # WikiText's own lines come back unchanged.
        ("The game 's 1 @,@ 000 long @-@ term fans , H. americanus .", None),
    ],
)
def test_tokenize_writes_wikitext_tokens(raw, tokens):
    assert " ".join(tokenize(raw)) == (raw if tokens is None else tokens)


def test_chunks_cut_at_a_sentence_end_and_keep_a_closing_quote():
    tokens = 'a b c . " d e ! f g'.split()
    assert chunks(tokens, chunk_tokens=3) == [
        ["a", "b", "c", ".", '"'],
        ["d", "e", "!"],
        ["f", "g"],
    ]
    assert chunks(["w"] * 7, chunk_tokens=3, max_tokens=3) == [["w"] * 3, ["w"] * 3, ["w"]]


def test_match_key_ignores_case_punctuation_and_spacing():
    assert match_key("The  Bank 's long @-@ term , plan .") == match_key(
        "the bank's long-term plan"
    )
    assert match_key("the bank's plan") != match_key("the banks plan")
