"""The two statistics the analyzer reports: Wilson intervals for rates, Fisher's exact test for tables.

Failure rates in a probe run are often near 0 % with a few hundred requests, where the textbook normal
interval collapses to zero width or leaves [0, 1]; Wilson's interval stays honest there. Failing
streams are few, so 2×2 tables have small cells and a chi-square approximation would mislead; Fisher's
exact test does not. The reported p-values come from ``scipy.stats.fisher_exact``. The attribute search
tries hundreds of splits and ranks them on p-values far below the smallest float, so it uses
``fisher_log10_p``: the same two-sided test (sum of the hypergeometric probabilities of all tables no
more likely than the observed one) computed in log space, vectorised, without underflow.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from sseguard.analyze.rates import Z95, Rate, pct, wilson

__all__ = ["Z95", "FisherResult", "Rate", "cmh_log10_p", "fisher", "fisher_log10_p", "fmt_p", "pct",
           "ranked", "wilson"]

_LN10 = math.log(10.0)
# Tables whose probability equals the observed one up to rounding count as "as extreme" (scipy's rule).
_TIE = 1e-7
#: Tables with a wider support than this sum their tails only (see ``_tails``).
_WHOLE_SUPPORT = 20_000
_CHUNK = 4096
_NEGLIGIBLE = 60.0


@dataclass(frozen=True, slots=True)
class FisherResult:
    """A two-sided Fisher exact test on ``[[a, b], [c, d]]``.

    ``odds_ratio`` is None where it is infinite or undefined (a zero cell), which JSON cannot carry;
    ``log10_p`` stays finite and exact where ``p`` underflows to 0.
    """

    odds_ratio: float | None
    p: float
    log10_p: float


def fisher(a: int, b: int, c: int, d: int) -> FisherResult:
    """Fisher's exact test (two-sided) on the table ``[[a, b], [c, d]]`` via scipy."""
    from scipy.stats import fisher_exact  # scipy loads on the first test, not on import

    result = fisher_exact([[a, b], [c, d]], alternative="two-sided")
    odds = float(result.statistic)
    p = float(result.pvalue)
    log10_p = math.log10(p) if p > 1e-300 else fisher_log10_p(a, b, c, d)
    return FisherResult(odds if math.isfinite(odds) else None, min(1.0, p), min(0.0, log10_p))


def fisher_log10_p(a: int, b: int, c: int, d: int) -> float:
    """log10 of the two-sided Fisher exact p-value of ``[[a, b], [c, d]]``, never -inf."""
    if min(a, b, c, d) < 0:
        raise ValueError(f"table cells must be >= 0, got {[a, b, c, d]}")
    row1, row2, col1 = a + b, c + d, a + c
    total = row1 + row2
    low, high = max(0, col1 - row2), min(col1, row1)
    if low == high:
        return 0.0
    from scipy.special import logsumexp

    if high - low > _WHOLE_SUPPORT:
        return min(0.0, float(logsumexp(_tails(a, row1, row2, col1, low, high))) / _LN10)
    x = np.arange(low, high + 1, dtype=np.float64)
    log_pmf = (_log_choose(row1, x) + _log_choose(row2, col1 - x)) - float(_log_choose(total, col1))
    observed = log_pmf[a - low]
    as_extreme = log_pmf[log_pmf <= observed + _TIE]
    return min(0.0, float(logsumexp(as_extreme)) / _LN10)


def _tails(a: int, row1: int, row2: int, col1: int, low: int, high: int) -> np.ndarray:
    """The log-probabilities of the tables as extreme as ``a`` that matter, for a wide support.

    Summing every table of a 10-million-record split costs a vector of millions per test (10 s of a
    10M analysis). The hypergeometric log-pmf rises up to its mode and falls after it, so the tables
    as extreme as the observed one are a prefix ``[low, x1]`` and a suffix ``[x2, high]`` (found by
    bisection); each is summed from its inner end outwards, a chunk at a time, until a chunk lies
    ``_NEGLIGIBLE`` below the largest term (e**-60: far below the 1e-9 the results are held to).
    """
    norm = float(_log_choose(row1 + row2, col1))

    def lp(x: np.ndarray | int) -> np.ndarray:
        k = np.asarray(x, dtype=np.float64)
        return np.asarray((_log_choose(row1, k) + _log_choose(row2, col1 - k)) - norm)

    limit = float(lp(a)) + _TIE
    mode = min(high, max(low, (col1 + 1) * (row1 + 1) // (row1 + row2 + 2)))
    lo, hi = low - 1, mode  # the last x in [low, mode] with lp(x) <= limit (low - 1: none)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if float(lp(mid)) <= limit else (lo, mid - 1)
    x1 = lo
    lo, hi = mode + 1, high + 1  # the first x in [mode + 1, high] with lp(x) <= limit (high + 1: none)
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if float(lp(mid)) <= limit else (mid + 1, hi)
    parts: list[np.ndarray] = []
    top = -math.inf
    for start, step in ((x1, -1), (lo, 1)):
        edge = start
        while low <= edge <= high:
            far = min(high, max(low, edge + step * (_CHUNK - 1)))
            chunk = lp(np.arange(min(edge, far), max(edge, far) + 1))
            largest = float(chunk.max())
            top = max(top, largest)
            parts.append(chunk)
            if largest < top - _NEGLIGIBLE:
                break
            edge = far + step
    return np.concatenate(parts)


def cmh_log10_p(tables: list[tuple[int, int, int, int]]) -> float:
    """log10 of the one-sided Cochran–Mantel–Haenszel p-value for excess ``a`` across 2×2 strata.

    Asks whether rows still differ once the strata are held fixed: is a time window still worse than
    the rest *within* each concurrency level? Continuity-corrected normal approximation; strata with
    fewer than two records or a constant margin carry no information and are skipped.
    """
    excess = variance = 0.0
    for a, b, c, d in tables:
        n = a + b + c + d
        if n < 2:
            continue
        row, col = a + b, a + c
        excess += a - row * col / n
        variance += row * (c + d) * col * (b + d) / (n * n * (n - 1))
    if variance <= 0.0:
        return 0.0
    from scipy.stats import norm

    z = (excess - 0.5) / math.sqrt(variance)
    return min(0.0, float(norm.logsf(z)) / _LN10)


def _log_choose(n: int, k: np.ndarray | int) -> np.ndarray:
    from scipy.special import gammaln

    return np.asarray(gammaln(n + 1) - gammaln(np.asarray(k) + 1) - gammaln(n - np.asarray(k) + 1))


def ranked(counts: Mapping[str, int]) -> dict[str, int]:
    """Counts largest first, ties by name: the same order however the records were counted."""
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def fmt_p(p: float, log10_p: float | None = None) -> str:
    """A p-value for people: two significant digits, ``p < 1e-300`` style when it underflows."""
    if p >= 0.001:
        return f"{p:.3f}"
    if p > 0.0:
        return f"{p:.1e}"
    if log10_p is not None and math.isfinite(log10_p):
        return f"<1e{math.ceil(log10_p)}"
    return "<1e-300"
