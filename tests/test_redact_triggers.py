"""The one-pass trigger check: text it lets through untouched holds no trigger word, whatever the text."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sseguard.core.redact import _ANY_TRIGGER, RULES, Redactor

TRIGGERS = sorted({t for rule in RULES for t in rule.triggers})


@settings(max_examples=400, deadline=None)
@given(trigger=st.sampled_from(TRIGGERS), before=st.text(max_size=40), after=st.text(max_size=40))
def test_every_trigger_is_found_wherever_it_sits(trigger: str, before: str, after: str) -> None:
    assert _ANY_TRIGGER.search(f"{before}{trigger}{after}".lower()) is not None


@settings(max_examples=400, deadline=None)
@given(text=st.text(alphabet=st.sampled_from(sorted(set("".join(TRIGGERS)) | set(" \"{}:,"))),
                    max_size=60))
def test_the_check_finds_a_trigger_exactly_when_one_is_there(text: str) -> None:
    # Text built from the triggers' own characters, so near misses ("aut", "sk_", "key ") abound.
    assert (_ANY_TRIGGER.search(text) is not None) == any(t in text for t in TRIGGERS)


def test_text_without_a_trigger_word_comes_back_as_the_same_object() -> None:
    text = 'data: {"choices": [{"delta": {"content": "Hello there"}}]}\n\n'
    assert Redactor().text(text) is text


def test_a_known_secret_is_removed_even_from_text_without_trigger_words() -> None:
    assert Redactor(["zzzz9999"]).text("value zzzz9999 here") == "value [REDACTED] here"


def test_every_trigger_alone_still_reaches_its_rule() -> None:
    # A bare trigger word matches no rule's whole shape: it comes back unchanged, but through the
    # exact path (the check found it).
    for trigger in TRIGGERS:
        assert _ANY_TRIGGER.search(trigger) is not None, trigger
    assert Redactor().text("Authorization: Bearer abcdef123456") == "Authorization: [REDACTED]"


@settings(max_examples=200, deadline=None)
@given(filler=st.text(max_size=400), secret=st.sampled_from(["Authorization: Bearer abcdef123456",
                                                            "sk-abcdef123456", "x=1&api_key=abc123"]),
       at=st.integers(min_value=0, max_value=400))
def test_short_and_long_text_are_scrubbed_alike(filler: str, secret: str, at: int) -> None:
    # Either side of the one-pass length limit, the result is what running every rule gives.
    text = filler[:at] + " " + secret + " " + filler[at:]
    assert Redactor().text(text) == Redactor._scrub(text)
    assert "abcdef123456" not in Redactor().text(text) and "abc123" not in Redactor().text(text)
