"""Fisher's test on tables of millions (a 10M-record split) sums only the tails that matter: the
same answer as scipy's own test, where scipy's p does not underflow."""

from __future__ import annotations

import math

from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy.stats import fisher_exact

from sseguard.analyze.stats import fisher_log10_p


def _scipy_log10(a: int, b: int, c: int, d: int) -> float:
    return math.log10(float(fisher_exact([[a, b], [c, d]]).pvalue))


def test_a_wide_table_gives_scipys_p() -> None:
    # Support 0..20150, wider than the whole-support path takes.
    a, b, c, d = 10000, 40000, 10150, 39850
    assert abs(fisher_log10_p(a, b, c, d) - _scipy_log10(a, b, c, d)) < 1e-9


def test_a_split_of_millions_underflowing_scipy_stays_finite_and_ordered() -> None:
    strong = fisher_log10_p(300_000, 700_000, 100_000, 8_900_000)
    weaker = fisher_log10_p(300_000, 700_000, 250_000, 8_750_000)
    assert math.isfinite(strong) and strong < weaker < -300


@settings(max_examples=40, deadline=None)
@given(st.integers(60_000, 400_000), st.integers(60_000, 400_000), st.floats(0.2, 0.5),
       st.floats(0.99, 1.01))
def test_wide_tables_agree_with_scipy(n1: int, n2: int, rate: float, ratio: float) -> None:
    a = int(n1 * rate)
    c = min(n2, int(n2 * rate * ratio))
    assert a + c > 20_000  # wider than the whole-support path takes
    expected = _scipy_log10(a, n1 - a, c, n2 - c)
    assume(expected > -290)  # scipy's p near underflow: nothing to compare with
    # scipy sums tens of thousands of terms in its own order: the two agree to ~1e-9, not bit for bit
    # (a p near 0.1 once differed by 1.2e-9 in log10); 1e-8 still catches any missed tail term.
    assert abs(fisher_log10_p(a, n1 - a, c, n2 - c) - expected) < 1e-8 * max(1.0, abs(expected))
