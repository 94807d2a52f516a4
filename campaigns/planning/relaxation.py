"""Upper bound on the allocation objective from a Lagrangian relaxation.

Dualise the coupling constraints (the three budgets and each site's capacity) with
multipliers ``u >= 0``. Every episode at site ``s`` then costs a price ``rho_s(u)`` and
every visit a setup price ``sigma_s(u)``, and what is left separates by cell: each cell picks
the best single batch ``y in {0} U [min_batch, upper]`` at one of its feasible sites.
Splitting a cell over several sites never helps once capacities are priced (the cheapest
site takes it all and saves a setup), so in closed form

    L(u) = sum_c max(0, max_s value_c(rho_s, sigma_s)) + sum(u).

Weak duality makes *every* ``u >= 0`` a valid bound on the integer optimum, so the
minimiser affects tightness only, never validity. The minimum equals the optimum of the
"convex hull" relaxation (continuous episodes, batches and setups convexified per cell),
at least as tight as an LP over piecewise-linear concave segments with continuous ``x``
and no min-batch integrality. ``L`` is convex and piecewise smooth; it is minimised with
L-BFGS-B on log-sum-exp smoothings (which lie above ``L``, so are bounds too) at falling
temperatures, and the exact ``L`` at the best point seen is reported.

The best batch separates into a cell factor times a site factor (see :func:`_pair_values`),
so an evaluation costs one power per feasible pair: 250,000 pairs in a few milliseconds.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import optimize

from campaigns.planning.gain import FloatArray, gain, level_from_amplitude, stationary_log_total

BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]

# Smoothing temperatures, relative to the typical positive cell value.
_TEMPERATURES = (0.1, 0.01, 0.001)


@dataclass(frozen=True)
class DualProblem:
    """The relaxation over the cells that can still take a batch somewhere.

    ``feasible[i, s]``: active cell ``i`` may open a batch at site ``s`` (each active cell
    has one). ``site_use[s, r]`` and ``site_setup[s, r]`` are the normalised uses of global
    budget ``r`` per episode and per visit (each budget row reads ``use <= 1``);
    ``site_cap_use[s]`` is ``1 / capacity`` and ``site_cap_row[s]`` that site's capacity
    row (-1: unlimited). ``upper`` bounds each cell's extra episodes; every one is finite
    and at least ``min_batch``; every ``amp`` is positive.
    """

    amp: FloatArray
    n0: FloatArray
    base: FloatArray
    upper: FloatArray
    b: float
    min_batch: float
    feasible: BoolArray
    site_use: FloatArray
    site_setup: FloatArray
    site_cap_use: FloatArray
    site_cap_row: IntArray
    n_cap_rows: int


@dataclass(frozen=True)
class DualSolution:
    """Best multipliers found and what the relaxation does at them.

    ``value`` is the exact dual value: a valid bound on the gain above the locked gain.
    ``z`` is the relaxed extra episodes per active cell there; ``site_price`` and
    ``site_setup_price`` the per-episode and per-visit prices of each site.
    """

    value: float
    multipliers: FloatArray
    z: FloatArray
    site_price: FloatArray
    site_setup_price: FloatArray
    evaluations: int


@contextlib.contextmanager
def single_threaded_blas() -> Iterator[None]:
    """Run BLAS single-threaded: L-BFGS-B's tiny products only lose to thread wake-ups.

    It also makes results independent of the machine's core count. threadpoolctl ships
    with scikit-learn; without it this is a no-op.
    """
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - scikit-learn brings it
        yield
        return
    with threadpool_limits(limits=1, user_api="blas"):
        yield


class _Dual:
    """The dual function of one problem, remembering the best exact value it has seen."""

    def __init__(self, problem: DualProblem) -> None:
        p = problem
        self.p = p
        self.n_glob = p.site_use.shape[1]
        self.dim = self.n_glob + p.n_cap_rows
        self.has_cap = p.site_cap_row >= 0
        self.n_sites = p.feasible.shape[1]
        cells, sites = np.nonzero(p.feasible)  # row-major: sorted by cell
        self.cells, self.sites = cells, sites
        self.start = np.searchsorted(cells, np.arange(len(p.amp)))
        # Per-pair copies of the cell constants of _pair_values, gathered once.
        b = p.b
        total0 = p.n0 + p.base + 1.0
        # The stationary total at price 1; at price rho it scales by rho**(-1/(b+1)).
        scale = np.exp(stationary_log_total(p.amp, p.n0, b, 1.0))
        self.scale = scale[cells]
        self.total0 = total0[cells]
        self.n_base = (p.n0 + p.base)[cells]
        # What is left above the floor once the cell holds base: the gain's level there.
        amplitude = p.amp * np.exp(b * np.log1p(p.n0))
        self.level = level_from_amplitude(amplitude, p.n0 + p.base, b)[cells]
        self.upper = p.upper[cells]
        self.evaluations = 0
        self.best_value = np.inf
        self.best_u = np.zeros(self.dim)

    def site_prices(self, u: FloatArray) -> tuple[FloatArray, FloatArray]:
        """Return each site's price per episode and per visit at multipliers ``u``."""
        p = self.p
        glob = u[: self.n_glob]
        price = p.site_use @ glob if self.n_glob else np.zeros(self.n_sites)
        setup = p.site_setup @ glob if self.n_glob else np.zeros(self.n_sites)
        if p.n_cap_rows:
            cap = np.zeros(self.n_sites)
            cap[self.has_cap] = u[self.n_glob :][p.site_cap_row[self.has_cap]]
            price = price + cap * p.site_cap_use
        return np.maximum(price, 0.0), np.maximum(setup, 0.0)

    def _pair_values(self, price: FloatArray, setup: FloatArray) -> tuple[FloatArray, FloatArray]:
        """Return per pair the best batch size and its net value.

        With ``T = n0 + base + 1`` the gain of ``y`` more is ``level * (1 - (T/(T+y))**b)``
        and its stationary point at price ``rho`` is ``T + y = scale_c * rho**(-1/(b+1))``:
        a cell factor times a site factor. Clip to ``[min_batch, upper]`` (concavity).
        """
        p = self.p
        with np.errstate(divide="ignore"):
            site_factor = np.power(np.maximum(price, 1e-300), -1.0 / (p.b + 1.0))
        y = np.clip(self.scale * site_factor[self.sites] - self.total0, p.min_batch, self.upper)
        value = gain(self.level, self.n_base, p.b, y)
        return y, value - price[self.sites] * y - setup[self.sites]

    def evaluate(self, u: FloatArray, temperature: float) -> tuple[float, FloatArray, FloatArray]:
        """Return the (smoothed if ``temperature > 0``) dual value, its gradient and ``z``."""
        p = self.p
        self.evaluations += 1
        cells, start = self.cells, self.start
        price, setup = self.site_prices(u)
        y, v = self._pair_values(price, setup)
        top = np.maximum(np.maximum.reduceat(v, start), 0.0)
        exact = float(top.sum() + u.sum())
        if exact < self.best_value:
            self.best_value, self.best_u = exact, np.array(u, dtype=np.float64)
        if temperature > 0:
            expo = np.exp((v - top[cells]) / temperature)
            total = np.add.reduceat(expo, start) + np.exp(-top / temperature)
            value = float((top + temperature * np.log(total)).sum() + u.sum())
            weight = expo / total[cells]
        else:
            value = exact
            weight = self._argmax_weights(v, top)
        flow = weight * y
        site_flow = np.bincount(self.sites, weights=flow, minlength=self.n_sites)
        site_visits = np.bincount(self.sites, weights=weight, minlength=self.n_sites)
        grad = np.ones(self.dim)
        if self.n_glob:
            grad[: self.n_glob] -= site_flow @ p.site_use + site_visits @ p.site_setup
        if p.n_cap_rows:
            grad[self.n_glob :] -= np.bincount(
                p.site_cap_row[self.has_cap],
                weights=(site_flow * p.site_cap_use)[self.has_cap],
                minlength=p.n_cap_rows,
            )
        return value, grad, np.add.reduceat(flow, start)

    def _argmax_weights(self, v: FloatArray, top: FloatArray) -> FloatArray:
        """Return 1 at each cell's first best pair when it beats no batch, else 0."""
        n = len(v)
        hit = (v >= top[self.cells]) & (top[self.cells] > 0)
        first = np.minimum.reduceat(np.where(hit, np.arange(n), n), self.start)
        weight = np.zeros(n)
        weight[first[first < n]] = 1.0
        return weight

    def typical_value(self, u: FloatArray) -> float:
        """Return the median positive best-batch value per cell at ``u`` (1 if none)."""
        _, v = self._pair_values(*self.site_prices(u))
        tops = np.maximum.reduceat(v, self.start)
        positive = tops[tops > 0]
        return float(np.median(positive)) if len(positive) else 1.0


def solve_dual(problem: DualProblem, max_iter: int = 60) -> DualSolution:
    """Minimise the Lagrangian dual; deterministic (single-threaded, fixed schedule)."""
    dual = _Dual(problem)
    if len(problem.amp) == 0:
        zeros = np.zeros(dual.n_sites)
        return DualSolution(0.0, np.zeros(dual.dim), np.zeros(0), zeros, zeros, 0)
    with single_threaded_blas():
        u = _warm_start(dual)
        for fraction in _TEMPERATURES:
            u = _lbfgs(dual, u, fraction * dual.typical_value(u), max_iter)
        best_u = dual.best_u
        value, _, z = dual.evaluate(best_u, 0.0)
        price, setup = dual.site_prices(best_u)
    return DualSolution(value, best_u, z, price, setup, dual.evaluations)


def _lbfgs(dual: _Dual, u: FloatArray, temperature: float, max_iter: int) -> FloatArray:
    """Minimise the dual smoothed at ``temperature`` from ``u``; return the last iterate."""

    def fun(x: FloatArray) -> tuple[float, FloatArray]:
        value, grad, _ = dual.evaluate(np.maximum(x, 0.0), temperature)
        return value, grad

    result = optimize.minimize(
        fun,
        u,
        jac=True,
        method="L-BFGS-B",
        bounds=[(0.0, None)] * dual.dim,
        options={"maxiter": max_iter, "ftol": 1e-12, "gtol": 1e-12, "maxcor": 20},
    )
    return np.maximum(np.asarray(result.x, dtype=np.float64), 0.0)


def _warm_start(dual: _Dual) -> FloatArray:
    """Return ``t * ones`` minimising the exact dual along the diagonal (bisection on slope)."""
    ones = np.ones(dual.dim)

    def slope(t: float) -> float:
        return float(dual.evaluate(t * ones, 0.0)[1].sum())

    hi = 1e-6 * max(float(np.max(dual.p.amp)), 1e-12)
    while slope(hi) < 0 and hi < 1e12:
        hi *= 4.0
    lo = 0.0
    for _ in range(20):
        mid = 0.5 * (lo + hi)
        if slope(mid) < 0:
            lo = mid
        else:
            hi = mid
    return hi * ones
