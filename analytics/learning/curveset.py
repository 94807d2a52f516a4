"""The fitted curves: a pooled curve and each cell's grid posterior of its multiplier, with
everything steering reads from them (rates, gains, quantiles, draws, intervals).

Part of :mod:`analytics.learning`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from analytics.curves import CurveFit, LearningCurve
from analytics.learning.rows import FloatArray
from campaigns.planning.gain import curve_rate, level_from_amplitude, power_gain


@dataclass(frozen=True, eq=False)
class CurveSet:
    """A pooled learning curve and each cell's posterior amplitude multiplier.

    ``posterior[c]`` is the grid posterior of ``log m_c`` over ``grid`` (rows sum to 1);
    ``amplitude`` is the posterior-mean amplitude ``a * E[m_c]`` and ``tau`` the
    (posterior-mean) spread of ``log m`` across cells. ``trials`` / ``failures`` are the evidence per cell.
    ``exponent`` is each cell's posterior-mean exponent when fitted with per-cell exponents
    (``posterior`` is then the shared-exponent reading at the current counts; ``None``: every
    cell has the shared ``b``). ``log_evidence`` is the log marginal likelihood of the rows
    under the fit, every cell integrated out, plus the log priors of the pooled exponent and
    floor (up to a constant that depends on the rows only, so fits of the same rows at other
    training counts compare by it); ``None`` where it was not computed.
    """

    fit: CurveFit
    grid: FloatArray
    posterior: FloatArray
    tau: float
    amplitude: FloatArray
    trials: FloatArray
    failures: FloatArray
    exponent: FloatArray | None = None
    log_evidence: float | None = None

    @property
    def pooled(self) -> LearningCurve:
        """Return the pooled curve (the gap engine's prior curve)."""
        return self.fit.curve

    @property
    def f_inf(self) -> float:
        """Return the shared floor."""
        return self.fit.curve.f_inf

    @property
    def b(self) -> float:
        """Return the shared exponent."""
        return self.fit.curve.b

    @property
    def n_cells(self) -> int:
        """Return the number of cells."""
        return int(self.amplitude.size)

    def rate(self, n: npt.ArrayLike, amplitude: npt.ArrayLike | None = None) -> FloatArray:
        """Return each cell's failure rate after ``n`` training episodes (capped at 1).

        ``amplitude`` defaults to the posterior mean; pass a quantile or a draw instead.
        """
        amp = self.amplitude if amplitude is None else np.asarray(amplitude, dtype=np.float64)
        return np.minimum(curve_rate(self.f_inf, amp, self.b, n), 1.0)

    def gain(
        self, n: npt.ArrayLike, k: npt.ArrayLike, amplitude: npt.ArrayLike | None = None
    ) -> FloatArray:
        """Return each cell's failure-rate drop from ``k`` more episodes (concave in k)."""
        amp = self.amplitude if amplitude is None else np.asarray(amplitude, dtype=np.float64)
        return power_gain(amp, n, self.b, k)

    def amplitude_quantile(self, level: float) -> FloatArray:
        """Return each cell's ``level`` posterior quantile of the amplitude ``a * m_c``.

        Raises ValueError unless ``0 < level < 1``.
        """
        if not 0 < level < 1:
            raise ValueError(f"level must be in (0, 1), got {level}")
        cdf = np.cumsum(self.posterior, axis=1)
        index = np.minimum((cdf < level).sum(axis=1), self.grid.size - 1)
        return self.pooled.a * np.exp(self.grid[index])

    def sample_amplitude(self, rng: np.random.Generator, size: int | None = None) -> FloatArray:
        """Draw amplitudes from each cell's posterior (shape ``(cells,)`` or ``(size, cells)``).

        Draws are independent across cells; the pooled curve is held fixed.
        """
        draws = 1 if size is None else int(size)
        cdf = np.cumsum(self.posterior, axis=1)
        u = rng.random((draws, self.n_cells)) * cdf[:, -1]
        index = np.empty((draws, self.n_cells), dtype=np.int64)
        for c in range(self.n_cells):
            index[:, c] = np.searchsorted(cdf[c], u[:, c], side="right")
        index = np.minimum(index, self.grid.size - 1)
        amp = self.pooled.a * np.exp(self.grid[index])
        return amp[0] if size is None else amp

    def rate_interval(self, n: npt.ArrayLike, level: float = 0.95) -> tuple[FloatArray, FloatArray]:
        """Return the equal-tailed ``level`` posterior interval of each cell's rate at ``n``.

        The rate rises with the multiplier, so the interval is the curve at the amplitude's
        quantiles (the pooled ``f_inf`` and ``b`` taken as known).
        """
        tail = (1.0 - level) / 2.0
        return (
            self.rate(n, self.amplitude_quantile(tail)),
            self.rate(n, self.amplitude_quantile(1.0 - tail)),
        )

    def rate_variance(self, n: npt.ArrayLike) -> FloatArray:
        """Return the posterior variance of each cell's rate at ``n`` (before the cap at 1)."""
        level = level_from_amplitude(self.pooled.a, n, self.b)
        m = np.exp(self.grid)
        mean = (self.posterior * m).sum(axis=1)
        second = (self.posterior * m * m).sum(axis=1)
        return np.asarray(level * level * np.maximum(second - mean * mean, 0.0), dtype=np.float64)

    def subset(self, index: npt.ArrayLike) -> CurveSet:
        """Return the curve set of the cells at ``index`` (same pooled curve and spread)."""
        at = np.asarray(index, dtype=np.int64)
        return CurveSet(
            fit=self.fit,
            grid=self.grid,
            posterior=self.posterior[at],
            tau=self.tau,
            amplitude=self.amplitude[at],
            trials=self.trials[at],
            failures=self.failures[at],
            exponent=None if self.exponent is None else self.exponent[at],
            log_evidence=None,
        )

    def multiplier_interval(self, level: float = 0.9) -> tuple[FloatArray, FloatArray]:
        """Return the equal-tailed posterior interval of each cell's multiplier ``m_c``."""
        tail = (1.0 - level) / 2.0
        a = self.pooled.a if self.pooled.a > 0 else 1.0
        return self.amplitude_quantile(tail) / a, self.amplitude_quantile(1.0 - tail) / a
