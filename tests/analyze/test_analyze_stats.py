"""Wilson intervals and Fisher's exact test: known values, scipy agreement, no underflow."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import fisher_exact

from sseguard.analyze.stats import Rate, fisher, fisher_log10_p, fmt_p, pct, wilson


@pytest.mark.parametrize(("k", "n", "low", "high"), [
    (0, 10, 0.0, 0.27753),  # the textbook "rule of three" case, Wilson's version
    (5, 10, 0.23659, 0.76341),
    (10, 10, 0.72247, 1.0),
    (1, 100, 0.0017674, 0.054486),
])
def test_wilson_matches_published_values(k: int, n: int, low: float, high: float) -> None:
    got = wilson(k, n)
    assert got == pytest.approx((low, high), abs=5e-5)


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 2000).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_wilson_bounds_solve_the_score_equation(kn: tuple[int, int]) -> None:
    """Each open bound p satisfies (k/n - p)^2 = z^2 p (1 - p) / n: the definition of the interval."""
    k, n = kn
    z = 1.959963984540054
    for bound in wilson(k, n):
        if 0.0 < bound < 1.0:
            assert (k / n - bound) ** 2 == pytest.approx(z * z * bound * (1 - bound) / n, rel=1e-6)


def test_wilson_without_trials_is_the_whole_unit_interval() -> None:
    assert wilson(0, 0) == (0.0, 1.0)


@pytest.mark.parametrize(("k", "n"), [(-1, 5), (6, 5), (0, -1)])
def test_wilson_rejects_impossible_counts(k: int, n: int) -> None:
    with pytest.raises(ValueError):
        wilson(k, n)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 5000).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_wilson_interval_contains_the_rate_and_stays_in_unit_interval(kn: tuple[int, int]) -> None:
    k, n = kn
    low, high = wilson(k, n)
    assert 0.0 <= low <= k / n <= high <= 1.0
    assert (low == 0.0) == (k == 0) and (high == 1.0) == (k == n)


@pytest.mark.parametrize(("table", "p", "odds"), [
    ((3, 1, 1, 3), 0.485714, 9.0),  # Fisher's lady tasting tea
    ((8, 2, 1, 5), 0.034965, 20.0),
    ((3, 0, 0, 3), 0.1, None),  # a zero cell: the odds ratio is infinite, reported as None
    ((0, 5, 0, 5), 1.0, None),  # no failures at all: undefined
])
def test_fisher_matches_known_values(table: tuple[int, int, int, int], p: float,
                                     odds: float | None) -> None:
    result = fisher(*table)
    assert result.p == pytest.approx(p, rel=1e-5)
    assert result.odds_ratio == (pytest.approx(odds) if odds is not None else None)
    assert result.log10_p == pytest.approx(math.log10(p), abs=1e-6)


@settings(max_examples=300, deadline=None)
@given(st.tuples(*[st.integers(0, 120)] * 4))
def test_log_space_fisher_agrees_with_scipy(table: tuple[int, int, int, int]) -> None:
    a, b, c, d = table
    expected = float(fisher_exact([[a, b], [c, d]]).pvalue)
    got = 10 ** fisher_log10_p(a, b, c, d)
    assert got == pytest.approx(min(1.0, expected), rel=1e-7, abs=1e-300)


def test_log_space_fisher_ranks_tables_where_scipy_underflows_to_zero() -> None:
    huge = fisher(3000, 7000, 0, 10000)
    larger = fisher(4000, 6000, 0, 10000)
    assert huge.p == 0.0 and larger.p == 0.0  # scipy's float p-value underflows
    assert -2000 < larger.log10_p < huge.log10_p < -300  # the log still orders them
    assert fmt_p(huge.p, huge.log10_p).startswith("<1e-")


def test_rate_formats_as_percentage_with_interval() -> None:
    rate = Rate.of(45, 170)
    assert str(rate) == "26.5% [20.4%–33.6%]"
    assert rate.to_dict()["failed"] == 45 and rate.value == pytest.approx(45 / 170)
    assert (pct(0.0), pct(1.0), pct(0.0004), pct(0.1234)) == ("0%", "100%", "<0.1%", "12.3%")
