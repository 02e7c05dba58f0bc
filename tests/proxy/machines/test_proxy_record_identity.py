"""Which record a verdict becomes is built once per client stream (``RecordIdentity``) and derived
from there: an upstream attempt is linked to its stream and carries no healing of its own; a
continuation that replaced an attempt adds one attempt and its tokens to the stream's."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sseguard.proxy.machines.outcome import RecordIdentity


def test_an_attempt_is_linked_to_its_stream_and_heals_nothing_itself() -> None:
    stream = RecordIdentity(index=7, healed="retry", heal_attempts=2, heal_tokens=5)
    assert stream.attempt() == RecordIdentity(index=None, heal_of=7, healed=None, heal_attempts=0,
                                              heal_tokens=0)


def test_a_resumed_stream_counts_the_attempt_and_its_tokens() -> None:
    stream = RecordIdentity(index=7, healed="retry", heal_attempts=1, heal_tokens=0)
    assert stream.resumed(12) == RecordIdentity(index=7, heal_of=None, healed="resume",
                                                heal_attempts=2, heal_tokens=12)
    assert stream.resumed(12).resumed(3) == RecordIdentity(index=7, healed="resume",
                                                           heal_attempts=3, heal_tokens=15)


@settings(deadline=None)
@given(index=st.integers(min_value=0, max_value=10**6), attempts=st.integers(0, 20),
       tokens=st.lists(st.integers(0, 10**4), max_size=6))
def test_the_stream_keeps_its_index_and_every_attempt_points_at_it(index: int, attempts: int,
                                                                  tokens: list[int]) -> None:
    identity = RecordIdentity(index=index, healed="none", heal_attempts=attempts)
    for n, spent in enumerate(tokens, start=1):
        assert identity.attempt().heal_of == index and identity.attempt().index is None
        identity = identity.resumed(spent)
        assert (identity.index, identity.heal_of, identity.heal_attempts) == (index, None, attempts + n)
    assert identity.heal_tokens == sum(tokens)
