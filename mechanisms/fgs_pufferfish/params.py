"""Parameters of an FGS-Pufferfish release (or of one of its two baselines) and the constants derived from them.

Ou, Qin, Liao, Yin, Jia, "An Optimal Pufferfish Privacy Mechanism for Temporally Correlated Trajectories",
IEEE Access 6 (2018), Alg. 1 and §VIII-A, with the choices G3, G4, G5, G7, G11, G12, G14 of
docs/design.md (FGS-Pufferfish). Every field is public: none may be chosen by looking at the data.
"""

from __future__ import annotations

from dataclasses import dataclass
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import numpy as np

from trajpub.errors import ParameterError
from trajpub.params import Params, Scope

METHODS = ("fgs", "cts", "fpa")
ALLOCATIONS = ("paper", "uniform")
RECONSTRUCTIONS = ("lowpass", "paper_literal")
ESTIMATORS = ("circular", "truncated")
MEAN_TRAJECTORY = ("publish", "withhold", "perturb")
NOISE_LEVELS = ("b_c0", "location_std_m", "epsilon")


_P = Scope("fgs_pufferfish")


@dataclass(frozen=True)
class FgsParams(Params):
    """Public parameters of one release by FGS-Pufferfish (Alg. 1) or by a baseline.

    method: "fgs" (the paper's mechanism, default), "cts" (correlated Laplace noise, the paper's experimental
        baseline, rebuilt from the CTS-DP abstract; not from the paper, docs/design.md) or "fpa" (FPA_k of Rastogi
        and Nath 2010, i.e. FGS with K fixed to ``fpa_k`` and uniform scales; not from the paper, G19).

    Preparation (ours, docs/design.md, FGS-Pufferfish; the paper gives none of it):
    n_slots: N, slots per daily series, equally spaced over the local day (paper: 32 simulated, 48 real).
    day_timezone: IANA zone whose midnights delimit the days (e.g. "Asia/Shanghai" for T-Drive).
    min_fixes_per_day: a day with fewer distinct fixes is left out.
    max_gap_minutes: a day is left out when any stretch of it without a fix (including before the first and
        after the last fix) is longer than this; shorter stretches are interpolated linearly (held at the ends).
    min_days: objects with fewer valid days are left out. With one day the per-slot mean *is* the raw day,
        which the faithful release publishes in clear, so the default is 2.

    Mechanism (Alg. 1):
    p: geometric parameter, K ~ Geo(p) kept coefficients (never stated in the paper; G4 default 0.2). FGS needs
        S = Σ_{k<K_max} (1−p)^k < 6 for Eq. 11 to have positive scales; the constructor refuses otherwise.
    w: weight of the location utility in Def. 9 (paper: 0.9).
    correlation_length: I, lags 0..I−1 of the temporal correlation (Def. 6); ``None`` means I = N (G7).
    correlation_estimator: "circular" (default; makes Eq. 4 exact) or "truncated", (1/(N−i)) Σ_{n<N−i} (G11).
    allocation: "paper" (Eq. 11, which is a stationary point, in fact the maximum of U, G5) or "uniform".
    reconstruction: "lowpass" (real low-pass signal with Hermitian doubling plus Re Σ δF_k W_{n,k}, G2) or
        "paper_literal" (Re Σ_{k<K} (F_k + δF_k) W_{n,k}, which halves the non-DC signal; fidelity runs only).
    share_k: draw one K per day for both coordinates instead of one per coordinate (G12).
    centre: subtract the per-object per-slot mean over days (Alg. 1 line 3). ``False`` is only for the
        paper's simulated variant (a), a known zero-mean process with one day per user (§VIII-A.2a).
    mean_trajectory: what happens to the per-object per-slot mean (X̄_n, Ȳ_n) (G14): "publish" in clear as
        Alg. 1 line 15 does (default, faithful; not covered by the guarantee), "withhold" (release deviations
        x'_n only) or "perturb" (add i.i.d. Laplace noise of scale ``mean_noise_m`` per slot and coordinate;
        a heuristic without a formal guarantee).
    mean_noise_m: the Laplace scale for "perturb", in metres.

    Noise level, exactly one of:
    b_c0: the paper's input, the Laplace scale of the noisy lag-0 correlation, in m² (FGS only; same value
        for x and y).
    location_std_m: σ̄_L, the standard deviation of the location noise of every slot, in metres; FGS turns it
        into b_C0 = (σ̄_L / σ̄_L(b_C0 = 1))², a data-independent calibration (σ̄_L ∝ √b_C0 by Eq. 11); CTS uses
        b = σ̄_L/√2, FPA b = σ̄_L/√(2k).
    epsilon: the paper's analytic ε for the whole release, ε_x + ε_y (sequential composition), split equally
        over x and y; b_C0 is then calibrated from the data (docs/design.md, FGS-Pufferfish), which leaks (G15).
        FGS only.
    fpa_k: number of kept coefficients of FPA_k (1 ≤ k ≤ K_max); FPA only.
    """

    scope = _P

    method: str = "fgs"
    n_slots: int = 48
    day_timezone: str = "UTC"
    min_fixes_per_day: int = 12
    max_gap_minutes: float = 120.0
    min_days: int = 2
    p: float = 0.2
    w: float = 0.9
    correlation_length: int | None = None
    correlation_estimator: str = "circular"
    allocation: str = "paper"
    reconstruction: str = "lowpass"
    share_k: bool = False
    centre: bool = True
    mean_trajectory: str = "publish"
    mean_noise_m: float | None = None
    b_c0: float | None = None
    location_std_m: float | None = None
    epsilon: float | None = None
    fpa_k: int | None = None

    def __post_init__(self) -> None:
        _P.require_choice(self.method, "method", METHODS)
        _P.require_int(self.n_slots, "n_slots", 4)
        if not isinstance(self.day_timezone, str):
            raise ParameterError(f"day_timezone must be an IANA zone name, got {self.day_timezone!r}",
                                 _P.where("day_timezone"))
        try:
            ZoneInfo(self.day_timezone)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ParameterError(f"unknown time zone {self.day_timezone!r}", _P.where("day_timezone")) from exc
        _P.require_int(self.min_fixes_per_day, "min_fixes_per_day", 2)
        _P.require_real(self.max_gap_minutes, "max_gap_minutes", 0.0, 24 * 60.0)
        _P.require_int(self.min_days, "min_days", 1)
        _P.require_real(self.p, "p", 0.0, 1.0, open_low=True)
        _P.require_real(self.w, "w", 0.0, 1.0, open_low=False)
        if self.correlation_length is not None:
            _P.require_int(self.correlation_length, "correlation_length", 1)
            if self.correlation_length > self.n_slots:
                raise ParameterError(
                    f"correlation_length must be <= n_slots = {self.n_slots}, got {self.correlation_length}",
                    _P.where("correlation_length"),
                )
        _P.require_choice(self.correlation_estimator, "correlation_estimator", ESTIMATORS)
        _P.require_choice(self.allocation, "allocation", ALLOCATIONS)
        _P.require_choice(self.reconstruction, "reconstruction", RECONSTRUCTIONS)
        for flag in ("share_k", "centre"):
            _P.require_bool(getattr(self, flag), flag)
        _P.require_choice(self.mean_trajectory, "mean_trajectory", MEAN_TRAJECTORY)
        if self.mean_trajectory == "perturb":
            if self.mean_noise_m is None:
                raise ParameterError("mean_trajectory 'perturb' needs mean_noise_m (metres)", _P.where("mean_noise_m"))
            _P.require_real(self.mean_noise_m, "mean_noise_m", 0.0)
        elif self.mean_noise_m is not None:
            raise ParameterError("mean_noise_m is only used with mean_trajectory 'perturb'", _P.where("mean_noise_m"))
        if not self.centre and self.mean_trajectory != "publish":
            raise ParameterError("without centring there is no mean trajectory to withhold or perturb",
                                 _P.where("mean_trajectory"))
        self._check_noise_level()
        if self.method == "fgs":
            self._check_fgs_feasible()

    def _check_noise_level(self) -> None:
        given = [name for name in NOISE_LEVELS if getattr(self, name) is not None]
        if len(given) != 1:
            raise ParameterError(
                f"give exactly one noise level ({', '.join(NOISE_LEVELS)}); got {', '.join(given) or 'none'}",
                _P.where(given[1] if len(given) > 1 else "location_std_m"),
            )
        [name] = given
        _P.require_real(getattr(self, name), name, 0.0)
        if name in ("b_c0", "epsilon") and self.method != "fgs":
            raise ParameterError(f"{name} calibrates the paper's mechanism only; method '{self.method}' takes "
                                 "location_std_m", _P.where(name))
        if self.method == "fpa":
            if self.fpa_k is None:
                raise ParameterError("method 'fpa' needs fpa_k, the number of kept coefficients", _P.where("fpa_k"))
            _P.require_int(self.fpa_k, "fpa_k", 1)
            if self.fpa_k > self.k_max:
                raise ParameterError(f"fpa_k must be <= K_max = {self.k_max}, got {self.fpa_k}", _P.where("fpa_k"))
        elif self.fpa_k is not None:
            raise ParameterError("fpa_k is only used with method 'fpa'", _P.where("fpa_k"))

    def _check_fgs_feasible(self) -> None:
        s = float(self.survival.sum())
        if s >= 6.0:
            raise ParameterError(
                f"Eq. 11 has no positive noise scales: S = Σ_(k<K_max) (1-p)^k = {s:.4f} >= 6 for p = {self.p:g} "
                f"and K_max = {self.k_max} (Ou et al. 2018, Eq. 11); use a larger p (about 0.17 or more)",
                _P.where("p"),
            )
        if self.allocation == "paper" and np.any(self.utility_weights <= 0):
            k = int(np.flatnonzero(self.utility_weights <= 0)[0])
            raise ParameterError(
                f"the utility weight W'_{k} = {self.utility_weights[k]:.4g} is not positive for w = {self.w:g}, "
                f"I = {self.lags}: Eq. 11 needs all W'_k > 0; raise w or use allocation 'uniform'",
                _P.where("w"),
            )

    @property
    def k_max(self) -> int:
        """K_max = ⌊N/2⌋ + 1, the number of distinct real frequencies; K is clipped there (G3)."""
        return self.n_slots // 2 + 1

    @property
    def lags(self) -> int:
        """I, the correlation length (G7: I = N unless given)."""
        return self.n_slots if self.correlation_length is None else self.correlation_length

    @property
    def survival(self) -> np.ndarray:
        """q_k = (1−p)^k = Pr(K > k), k < K_max (Def. 5; unchanged by clipping K at K_max, G3)."""
        return (1.0 - self.p) ** np.arange(self.k_max)

    @property
    def utility_weights(self) -> np.ndarray:
        """𝒲'_k = 2w + (1−w)(2/I) Σ_{i<I} cos(2πik/N), k < K_max (Def. 9, with the real part of W_{i,k}, G6)."""
        k, i = np.arange(self.k_max), np.arange(self.lags)
        correlation_weight = 2.0 / self.lags * np.cos(2 * np.pi * np.outer(i, k) / self.n_slots).sum(axis=0)
        return 2.0 * self.w + (1.0 - self.w) * correlation_weight
