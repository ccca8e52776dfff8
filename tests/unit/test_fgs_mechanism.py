"""Algorithm 1 on one object (Ou et al. 2018, Alg. 1, Lemma 1): the geometric K, the location noise,
the mean shift of C'_0, the output tuple and the random-number discipline.

Monte-Carlo checks use R >= 1e5 and a 4-sigma tolerance with the standard error of the estimate
(exact for proportions, from the sample's fourth moment for variances).
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from mechanisms.fgs_pufferfish import (
    FgsParams,
    fourier_perturb,
    lowpass,
    noise_calibration,
    release_object,
    released_points,
)
from mechanisms.fgs_pufferfish.spectrum import dft, hermitian_weights
from trajpub.errors import InputError, ParameterError
from trajpub.grid import GridSpec

N = 32
K_MAX = N // 2 + 1
RAMPED_B = 0.5 + np.arange(K_MAX) / 16.0


def smooth_days(n_days: int, n_slots: int, seed: int) -> np.ndarray:
    """Commute-like days in metres: a daily cycle plus day-to-day random walks, (D, N, 2)."""
    rng = np.random.default_rng(seed)
    phase = 2 * np.pi * (np.arange(n_slots) + 0.5) / n_slots
    base = np.stack([3000 * np.sin(phase), 2000 * np.cos(2 * phase)], axis=-1)
    return base + rng.normal(0, 150, size=(n_days, n_slots, 2)).cumsum(axis=1)


def four_sigma_variance(samples: np.ndarray, expected: float) -> None:
    """|sample variance − expected| within 4 standard errors, SE = sqrt((m4 − s⁴)/R)."""
    r = len(samples)
    centred = samples - samples.mean()
    var, m4 = (centred**2).mean(), (centred**4).mean()
    assert abs(var - expected) < 4 * np.sqrt((m4 - var**2) / r)


def test_k_is_geometric_clipped_at_k_max():
    # Pr(K_eff > k) = (1−p)^k for k < K_max, 1 <= K_eff <= K_max.
    params = FgsParams(n_slots=N, p=0.2, b_c0=1.0, min_days=1)
    r = 100_000
    released, info = release_object(np.zeros((r, N, 2)), params, np.random.default_rng(11))
    k = released.n_kept
    assert k.min() >= 1 and k.max() <= K_MAX
    for c in range(2):
        survival = np.array([(k[:, c] > j).mean() for j in range(K_MAX)])
        q = 0.8 ** np.arange(K_MAX)
        assert np.all(np.abs(survival - q) <= 4 * np.sqrt(q * (1 - q) / r) + 1e-12)
    assert info["mean_kept_coefficients"] == pytest.approx(k.mean(axis=0).tolist())


def test_k_is_independent_across_coordinates_unless_shared():
    # G12: Pr(K_x = K_y) = Σ_k Pr(K_eff = k)² for independent draws, 1 with share_k.
    r = 100_000
    pmf = np.r_[0.2 * 0.8 ** np.arange(K_MAX - 1), 0.8 ** (K_MAX - 1)]
    expected = float(np.sum(pmf**2))
    params = FgsParams(n_slots=N, p=0.2, b_c0=1.0, min_days=1)
    k = release_object(np.zeros((r, N, 2)), params, np.random.default_rng(12))[0].n_kept
    equal = (k[:, 0] == k[:, 1]).mean()
    assert abs(equal - expected) < 4 * np.sqrt(expected * (1 - expected) / r)
    shared = FgsParams(n_slots=N, p=0.2, b_c0=1.0, min_days=1, share_k=True)
    k = release_object(np.zeros((1000, N, 2)), shared, np.random.default_rng(12))[0].n_kept
    assert np.array_equal(k[:, 0], k[:, 1])


@pytest.fixture(scope="module")
def ramped_noise():
    """R = 2e5 releases of one series with ramped scales: the residual x' − lowpass_K(x) and the K's."""
    r = 200_000
    rng = np.random.default_rng(13)
    x = np.random.default_rng(14).normal(size=N).cumsum()
    k = np.minimum(rng.geometric(0.2, size=r), K_MAX)
    released = fourier_perturb(np.broadcast_to(x, (r, N)), k, RAMPED_B, rng)
    return released - lowpass(np.broadcast_to(x, (r, N)), k)


def test_location_noise_has_zero_mean_and_the_lemma1_variance_at_every_slot(ramped_noise):
    # Var(x'_n − lowpass_K(x)_n) = Σ_{k<K_max} q_k 2 b_k² for every n, and mean 0.
    expected = float(np.sum(0.8 ** np.arange(K_MAX) * 2 * RAMPED_B**2))
    r = len(ramped_noise)
    for n in range(N):
        column = ramped_noise[:, n]
        assert abs(column.mean()) < 4 * np.sqrt(expected / r)
        four_sigma_variance(column, expected)


def test_mean_shift_of_c0(ramped_noise):
    # E[(1/N) Σ_n δx_n²] = Σ q_k 2 b_k² = δC̄_0.
    expected = float(np.sum(0.8 ** np.arange(K_MAX) * 2 * RAMPED_B**2))
    energy = (ramped_noise**2).mean(axis=1)
    assert abs(energy.mean() - expected) < 4 * energy.std() / np.sqrt(len(energy))


def test_release_noise_matches_the_scales_of_the_release():
    # Lemma 1 through release_object: per-slot noise std σ̄_L of the Eq. 11 scales, for both coordinates.
    params = FgsParams(n_slots=N, p=0.2, location_std_m=250.0, min_days=1)
    days = np.broadcast_to(smooth_days(1, N, 15)[0], (100_000, N, 2))
    released, _ = release_object(days, params, np.random.default_rng(16))
    k = released.n_kept
    for c in range(2):
        residual = released.deviation[..., c] - lowpass(days[..., c] - days[..., c].mean(axis=0), k[:, c])
        four_sigma_variance(residual[:, 5], 250.0**2)
        four_sigma_variance(residual[:, 20], 250.0**2)


def test_fpa_keeps_k_coefficients_with_uniform_scales():
    # G19: FPA_k = FGS with K ≡ k and uniform b = σ̄_L/√(2k): Var(δx_n) = 2kb² = σ̄_L².
    params = FgsParams(method="fpa", fpa_k=4, n_slots=N, location_std_m=30.0, min_days=1)
    days = np.broadcast_to(smooth_days(1, N, 17)[0], (100_000, N, 2))
    released, info = release_object(days, params, np.random.default_rng(18))
    assert np.all(released.n_kept == 4) and info["mean_kept_coefficients"] == [4.0, 4.0]
    residual = released.deviation[..., 0] - lowpass(days[..., 0] - days[..., 0].mean(axis=0), 4)
    four_sigma_variance(residual[:, 3], 30.0**2)
    # Nothing above frequency k − 1 survives.
    assert np.abs(dft(released.deviation[:50, :, 0])[:, 4 : N - 3]).max() < 1e-9


def test_expected_noisy_c0_of_one_day():
    # Eq. 14 with the exact low-pass signal: E[C'_0] = Σ_k q_k a_k |F_k|² + Σ_k q_k 2 b_k² (Parseval).
    r = 100_000
    x = np.random.default_rng(19).normal(size=N).cumsum()
    x -= x.mean()
    rng = np.random.default_rng(20)
    k = np.minimum(rng.geometric(0.2, size=r), K_MAX)
    released = fourier_perturb(np.broadcast_to(x, (r, N)), k, RAMPED_B, rng)
    c0 = (released**2).mean(axis=1)
    q = 0.8 ** np.arange(K_MAX)
    expected = np.sum(q * hermitian_weights(N) * np.abs(dft(x)[:K_MAX]) ** 2) + np.sum(q * 2 * RAMPED_B**2)
    assert abs(c0.mean() - expected) < 4 * c0.std() / np.sqrt(r)


@pytest.mark.parametrize("method", ["fgs", "cts", "fpa"])
def test_output_tuple_and_points_frame(method):
    # rows (object, day, slot, x', y', X̄, Ȳ) with X' = X̄ + x' and X̄ the raw per-slot mean.
    grid = GridSpec((116.0, 39.6, 116.8, 40.2), 1000.0)
    extra = {"fpa_k": 5} if method == "fpa" else {}
    params = FgsParams(method=method, n_slots=N, location_std_m=100.0, day_timezone="Asia/Shanghai", **extra)
    days = smooth_days(5, N, 21)
    released, info = release_object(days, params, np.random.default_rng(22))
    assert released.mean == pytest.approx(days.mean(axis=0), abs=1e-9)
    assert released.positions == pytest.approx(released.mean + released.deviation, abs=0)
    dates = np.arange("2008-02-03", "2008-02-08", dtype="datetime64[D]")
    frame = released_points("taxi 7", dates, released, grid, params.day_timezone, traj_ids=np.arange(10, 15))
    assert len(frame) == 5 * N
    assert list(frame.columns) == ["object_id", "traj_id", "day", "seq", "t", "x", "y", "lon", "lat",
                                   "dx", "dy", "mean_x", "mean_y"]
    assert frame["x"].to_numpy() == pytest.approx(frame["mean_x"] + frame["dx"], abs=1e-9)
    assert frame["mean_y"].to_numpy() == pytest.approx(np.tile(days.mean(axis=0)[:, 1], 5), abs=1e-9)
    assert frame["dx"].to_numpy() == pytest.approx(released.deviation[..., 0].reshape(-1), abs=0)
    x, y = grid.project(frame["lon"].to_numpy(), frame["lat"].to_numpy())
    assert x == pytest.approx(frame["x"].to_numpy(), abs=1e-4)
    assert y == pytest.approx(frame["y"].to_numpy(), abs=1e-4)
    assert frame["traj_id"].tolist() == np.repeat(np.arange(10, 15), N).tolist()
    assert frame["seq"].tolist() == np.tile(np.arange(N), 5).tolist()
    # Slot 0 of local day 2008-02-03 (UTC+8) is centred at 00:22:30 local = 16:22:30 UTC the day before.
    assert frame["t"].iloc[0] == pd.Timestamp("2008-02-02 16:22:30", tz="UTC")
    assert frame["t"].iloc[N] - frame["t"].iloc[0] == pd.Timedelta(days=1)
    json.dumps(info)


def test_withheld_and_perturbed_mean_trajectory():
    # G14 options.
    grid = GridSpec((116.0, 39.6, 116.8, 40.2), 1000.0)
    days = smooth_days(4, N, 23)
    dates = np.arange("2008-02-03", "2008-02-07", dtype="datetime64[D]")
    base = {"n_slots": N, "location_std_m": 100.0}
    published, _ = release_object(days, FgsParams(**base), np.random.default_rng(24))
    withheld, _ = release_object(days, FgsParams(**base, mean_trajectory="withhold"), np.random.default_rng(24))
    assert withheld.mean is None
    assert np.array_equal(withheld.deviation, published.deviation)  # same draws, same noise
    with pytest.raises(ValueError, match="withheld"):
        _ = withheld.positions
    frame = released_points(1, dates, withheld, grid, "UTC")
    assert frame[["x", "y", "lon", "lat", "mean_x", "mean_y"]].isna().all().all()
    assert frame["dx"].notna().all()
    perturbed, _ = release_object(days, FgsParams(**base, mean_trajectory="perturb", mean_noise_m=500.0),
                                  np.random.default_rng(24))
    assert np.array_equal(perturbed.deviation, published.deviation)
    noise = perturbed.mean - days.mean(axis=0)
    assert np.all(noise != 0)
    # E|Laplace(b)| = b; 64 draws, SD of the mean of |L| is b/8: 4 sigma is ±b/2.
    assert abs(np.abs(noise).mean() - 500.0) < 250.0


def test_same_seed_gives_a_bit_identical_release_and_draws_are_independent():
    # The same seed gives the same release; different objects' generators give independent draws.
    params = FgsParams(n_slots=N, location_std_m=100.0)
    days = smooth_days(6, N, 25)
    a, info_a = release_object(days, params, np.random.default_rng(26))
    b, info_b = release_object(days, params, np.random.default_rng(26))
    assert np.array_equal(a.deviation, b.deviation) and np.array_equal(a.n_kept, b.n_kept) and info_a == info_b
    first, second = np.random.default_rng(26).spawn(2)
    c, _ = release_object(days, params, first)
    d, _ = release_object(days, params, second)
    assert not np.array_equal(c.deviation, d.deviation)
    # Identical days and identical coordinates still get different noise per day and per coordinate.
    same = np.repeat(np.repeat(smooth_days(1, N, 27)[..., :1], 2, axis=-1), 3000, axis=0)
    released, _ = release_object(same, params, np.random.default_rng(28))
    noise = released.deviation - (same - same.mean(axis=0))
    assert not np.array_equal(noise[0], noise[1])
    slot = noise[:, 7, :]
    corr_xy = np.corrcoef(slot[:, 0], slot[:, 1])[0, 1]
    corr_days = np.corrcoef(slot[:-1, 0], slot[1:, 0])[0, 1]
    assert abs(corr_xy) < 4 / np.sqrt(len(slot)) and abs(corr_days) < 4 / np.sqrt(len(slot) - 1)


def test_release_refuses_bad_input():
    params = FgsParams(n_slots=N, location_std_m=100.0)
    rng = np.random.default_rng(29)
    with pytest.raises(InputError, match="shape"):
        release_object(np.zeros((3, 48, 2)), params, rng)
    with pytest.raises(InputError, match="min_days"):
        release_object(np.zeros((1, N, 2)), params, rng)
    with pytest.raises(InputError, match="non-finite"):
        release_object(np.full((3, N, 2), np.nan), params, rng)
    with pytest.raises(ParameterError, match="calibrated"):
        release_object(np.zeros((3, N, 2)), FgsParams(n_slots=N, epsilon=1.0), rng)
    with pytest.raises(ParameterError, match="contradicts"):
        release_object(np.zeros((3, N, 2)), params, rng, b_c0=(1.0, 1.0))
    with pytest.raises(ParameterError, match="finite"):
        release_object(np.zeros((3, N, 2)), FgsParams(n_slots=N, epsilon=1.0), rng, b_c0=(1.0, -1.0))
    # The result of noise_calibration can always be passed.
    release_object(np.zeros((3, N, 2)), params, rng, b_c0=noise_calibration(params))
