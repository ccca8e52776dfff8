"""The one place where DP noise is drawn: exact discrete samplers driven by the integer bits of a numpy Generator.

Why: continuous Laplace noise computed in floating point leaks the input through the low-order bits of the
output (Mironov 2012, "On significance of the least significant bits for differential privacy", CCS, §3: the
set of reachable doubles depends on the true value, so one output can rule a neighbour out). Here every noise
value is an integer multiple of a power-of-two step ``g``, drawn exactly from the discrete Laplace distribution
P(K = k) ∝ exp(−|k|/t) (Canonne, Kamath, Steinke 2020, "The Discrete Gaussian for Differential Privacy",
NeurIPS, Alg. 1 for Bernoulli(exp(−γ)), Alg. 2 for the discrete Laplace), with only integer arithmetic on
uniform integers from ``Generator.integers`` (an exact bounded-integer sampler). ``count + g·K`` is then exact
in float64 and has the same support g·ℤ for every dataset; for an integer query of L1 sensitivity Δ the
privacy loss is Δ/(g·t) ≤ Δ/scale = ε exactly (the "geometric mechanism", Ghosh, Roughgarden, Sundararajan
2009, on the grid g·ℤ; t is rounded UP to a dyadic rational, so the claim can only be conservative).

Seeds: there is one sampler, and it takes its bits from the Generator it is given. A release builds that
Generator with ``np.random.default_rng(spec.seed)``; ``spec.seed`` is accepted only in test mode, so a
production release draws 128 bits of OS entropy per run and test runs are reproducible with the same
algorithm. Caveat (not a floating-point one): PCG64 is a statistical, not a cryptographic, generator; the
guarantee assumes its bits are unpredictable to the adversary (OpenDP instead reads the OS CSPRNG per draw,
which no seed can reproduce).

Real-valued queries (densities, weighted counts) go through :func:`laplace_real`, which snaps the values to
the noise grid first and pays for the rounding in the scale, so the stated ε stays exact. The exponential
mechanism (:func:`exponential_mechanism`) samples by exact rejection with Bernoulli(exp(−γ)) coins on a
fixed-point γ; randomised response uses :func:`bernoulli`.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

import numpy as np

from trajpub.errors import ParameterError

CAVEAT = ("Noise is drawn by exact discrete samplers on a power-of-two grid (Canonne, Kamath, Steinke 2020), so "
          "Mironov's floating-point attack (2012) does not apply; the random bits come from numpy's PCG64 seeded "
          "with OS entropy per run, a statistical rather than a cryptographic generator.")

_STEP_BITS = 24  # noise grid: g ≤ 2^-24 · scale (and g ≤ 1, so integers lie on the grid)
_T_BITS = 40  # t = scale/g is rounded up to a dyadic rational with about 40 significant bits
_FIXED_BITS = 32  # exponential mechanism: ε/(2Δ) is rounded DOWN to a multiple of 2^-32
_MAX_INT = 2 ** 62


def step(scale: float) -> float:
    """The grid g of :func:`laplace` noise of ``scale``: the largest power of two ≤ min(1, 2⁻²⁴·scale)."""
    _check_scale(scale)
    return 2.0 ** math.floor(math.log2(min(1.0, 2.0 ** -_STEP_BITS * float(scale))))


def laplace(scale: float, shape, rng: np.random.Generator) -> np.ndarray:
    """Laplace-like noise of ``shape``: g·K with K discrete Laplace of scale ``scale``/g on the grid g =
    :func:`step` (variance 2·scale² up to a relative 2⁻³⁹, from rounding t up). Exact ε = Δ/scale when added to an integer-valued
    query of L1 sensitivity Δ (Dwork et al. 2006 calibration, sampled as in the module docstring)."""
    _check_scale(scale)  # before the cache, which would take True for 1.0
    g, t = laplace_grid(scale)
    return g * discrete_laplace(t, shape, rng)


@functools.lru_cache(maxsize=1024)
def laplace_grid(scale: float) -> tuple[float, Fraction]:
    """(g, t) of :func:`laplace` noise of ``scale``: the grid g = :func:`step` and the exact (rounded-up)
    discrete Laplace parameter t ≥ scale/g, for code that needs the noise's exact law (tail probabilities)."""
    g = step(scale)
    return g, Fraction(*_dyadic_ceil(Fraction(scale) / Fraction(g)))


def laplace_real(values: np.ndarray, sensitivity: float, epsilon: float,
                 rng: np.random.Generator) -> np.ndarray:
    """``values`` (any real query of L1 sensitivity Δ = ``sensitivity``) released with exact ε-DP.

    The values are rounded to a grid g (a power of two with m·g ≤ 2⁻¹⁰·Δ, m = ``values.size``), which moves a
    neighbour's vector by at most Δ + m·g in L1; the noise is g·K with K discrete Laplace of scale
    (Δ + m·g)/(ε·g), hence privacy loss ≤ ε exactly (the rounding costs ≤ 0.1 % more noise, Mironov 2012 §5
    "snapping", with the exact sampler instead of a clamp). Raises ParameterError if a value is too large for
    the grid to be exact in float64."""
    values = np.asarray(values, dtype=float)
    _check_scale(sensitivity)
    _check_scale(epsilon)
    m = max(values.size, 1)
    g = 2.0 ** math.floor(math.log2(2.0 ** -10 * float(sensitivity) / m))
    snapped = np.round(values / g) * g
    if values.size and not np.all(np.abs(snapped) < 2.0 ** 50 * g):
        raise ParameterError(f"values up to {np.abs(values).max():.3g} are too large for an exact noise grid "
                             f"of {g:.3g}", "noise.laplace_real")
    scale = (Fraction(sensitivity) + m * Fraction(g)) / Fraction(epsilon)
    return snapped + g * discrete_laplace(scale / Fraction(g), values.shape, rng)


def discrete_laplace(scale: float | Fraction, shape, rng: np.random.Generator) -> np.ndarray:
    """Integers K with P(K = k) ∝ exp(−|k|/t), t = ``scale`` rounded up to ~40 significant bits
    (Canonne, Kamath, Steinke 2020, Alg. 2: a geometric magnitude and a fair sign, rejecting −0)."""
    _check_scale(scale)
    num, den = _dyadic_ceil(scale)
    n = int(np.prod(shape, dtype=np.int64))
    out = np.empty(n, dtype=np.int64)
    todo = np.arange(n)
    while todo.size:
        y = _geometric(num, den, todo.size, rng)
        negative = rng.integers(0, 2, todo.size).astype(bool)
        ok = ~(negative & (y == 0))
        out[todo[ok]] = np.where(negative, -y, y)[ok]
        todo = todo[~ok]
    return out.reshape(shape)


def geometric(scale: float, size: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` integers Y ≥ 0 with P(Y = y) ∝ exp(−y/t), t = ``scale`` rounded up (CKS 2020, Alg. 2 lines
    1–7): the tail of a discrete Laplace beyond a threshold, by memorylessness."""
    _check_scale(scale)
    return _geometric(*_dyadic_ceil(scale), size, rng)


def bernoulli(p: float, shape, rng: np.random.Generator) -> np.ndarray:
    """Exact Bernoulli(p') coins with p' = ⌈p·2⁵³⌉/2⁵³ ≥ p (a uniform integer below 2⁵³ compared with an integer
    threshold). For randomised response with flip probability η < 1/2 (Warner 1965; ε = ln((1 − η)/η)),
    rounding η up can only lower the privacy loss, so the stated ε holds exactly."""
    if not 0.0 <= p <= 1.0:
        raise ParameterError(f"a probability must lie in [0, 1], got {p!r}", "noise.bernoulli")
    return rng.integers(0, 2 ** 53, shape) < math.ceil(Fraction(p) * 2 ** 53)


def exponential_mechanism(scores: np.ndarray, epsilon: float, sensitivity: float,
                          rng: np.random.Generator) -> np.ndarray:
    """Index along the last axis of integer ``scores`` chosen with probability ∝ exp(c·score), c = ε/(2Δ)
    rounded down to a multiple of 2⁻³² (McSherry & Talwar 2007, Thm 6: ε-DP, exactly, with the smaller c).

    Exact rejection sampling: propose a uniform candidate r, accept with probability exp(−c·(max − score_r))
    (a CKS Alg. 1 coin on the integer γ numerator); the accepted r has exactly the mechanism's distribution.
    Expected proposals ≤ the number of candidates. Raises ParameterError on non-integer scores."""
    scores = np.asarray(scores, dtype=float)
    _check_scale(epsilon)
    _check_scale(sensitivity)
    if not np.all(np.isfinite(scores)) or np.any(scores != np.round(scores)):
        raise ParameterError("the exponential mechanism needs integer scores", "noise.exponential_mechanism")
    c = math.floor(Fraction(epsilon) / (2 * Fraction(sensitivity)) * 2 ** _FIXED_BITS)
    gap = (scores.max(axis=-1, keepdims=True) - scores).astype(np.int64)
    if scores.size and c * int(gap.max()) >= _MAX_INT:
        raise ParameterError("score range too large for the exact exponential mechanism",
                             "noise.exponential_mechanism")
    gamma = (c * gap).reshape(-1, scores.shape[-1])
    rows, n_cand = gamma.shape
    chosen = np.empty(rows, dtype=np.int64)
    todo = np.arange(rows)
    while todo.size:
        r = rng.integers(0, n_cand, todo.size)
        ok = _bernoulli_exp(gamma[todo, r], 2 ** _FIXED_BITS, rng)
        chosen[todo[ok]] = r[ok]
        todo = todo[~ok]
    return chosen.reshape(scores.shape[:-1])


def _check_scale(x) -> None:
    if isinstance(x, bool) or not isinstance(x, int | float | Fraction | np.integer | np.floating) \
            or not math.isfinite(x) or x <= 0:
        raise ParameterError(f"noise parameters must be positive and finite, got {x!r}", "noise")


@functools.lru_cache(maxsize=1024)
def _dyadic_ceil(scale: float | Fraction) -> tuple[int, int]:
    """(num, den), den a power of two, with num/den ≥ ``scale`` and about 40 significant bits. Scales below
    2⁻²⁰ (noise that is 0 except with probability ~e^(−2²⁰)) are raised to 2⁻²⁰: more noise, never less."""
    _check_scale(scale)
    s = max(Fraction(scale), Fraction(1, 2 ** 20))
    den = 2 ** max(0, _T_BITS - math.floor(math.log2(s)) - 1)
    num = math.ceil(s * den)
    if num * 64 >= _MAX_INT:
        raise ParameterError(f"noise scale {float(s):.3g} is too large", "noise")
    return num, den


def _uniform(high: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` exact uniform integers in [0, high) (numpy's unsigned bounded sampler, the fastest path)."""
    return rng.integers(0, high, size, dtype=np.uint64).astype(np.int64)


def _bernoulli_exp_fraction(a: np.ndarray, b: int, rng: np.random.Generator) -> np.ndarray:
    """Exact Bernoulli(exp(−a/b)) for integers 0 ≤ a ≤ b (CKS 2020, Alg. 1): K counts successive
    Bernoulli(γ/K) successes; the result is 1 iff the first failure comes at an odd K. All coins still
    running at round K share that K, so each round is one draw of uniform integers below b·K."""
    a = np.asarray(a, dtype=np.int64)
    k = np.ones(a.shape, dtype=np.int64)
    active = np.flatnonzero(a > 0)
    round_k = 1
    while active.size:
        if b * round_k >= _MAX_INT:
            raise ParameterError("Bernoulli(exp(-γ)) denominator overflow", "noise")
        success = _uniform(b * round_k, active.size, rng) < a[active]
        active = active[success]
        round_k += 1
        k[active] = round_k
    return k % 2 == 1


def _bernoulli_exp(numerator: np.ndarray, den: int, rng: np.random.Generator) -> np.ndarray:
    """Exact Bernoulli(exp(−n/den)) for integers n ≥ 0 (CKS 2020, Alg. 1 extended to γ > 1: ⌊γ⌋ coins of
    Bernoulli(exp(−1)) and one of Bernoulli(exp(−(γ − ⌊γ⌋))) must all be 1)."""
    numerator = np.asarray(numerator, dtype=np.int64)
    whole, frac = np.divmod(numerator, den)
    ok = _bernoulli_exp_fraction(frac, den, rng)
    left = whole.copy()
    live = np.flatnonzero(ok & (left > 0))
    while live.size:
        ok[live] = _bernoulli_exp_fraction(np.ones(live.size, np.int64), 1, rng)
        left[live] -= 1
        live = live[ok[live] & (left[live] > 0)]
    return ok


def _geometric(num: int, den: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """CKS 2020 Alg. 2 lines 1–7: U uniform on {0..num−1} accepted with exp(−U/num), V ~ Geometric(1 − e⁻¹)
    from Bernoulli(exp(−1)) coins, X = U + num·V, Y = ⌊X/den⌋: P(Y = y) ∝ exp(−y·den/num)."""
    accepted: list[np.ndarray] = []
    missing = size
    while missing > 0:  # i.i.d. proposals, the first ``size`` accepted ones kept (acceptance 1 − e⁻¹ ≈ 0.63)
        cand = _uniform(num, 2 * missing + 16, rng)
        cand = cand[_bernoulli_exp_fraction(cand, num, rng)][:missing]
        accepted.append(cand)
        missing -= cand.size
    u = np.concatenate(accepted) if accepted else np.empty(0, np.int64)
    v = np.zeros(size, dtype=np.int64)
    live = np.arange(size)
    while live.size:
        up = _bernoulli_exp_fraction(np.ones(live.size, np.int64), 1, rng)
        live = live[up]
        v[live] += 1
    return (u + num * v) // den
