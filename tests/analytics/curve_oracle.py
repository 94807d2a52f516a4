"""An independent, loop-by-loop reading of the per-cell curve model for tests.

The model (``analytics.learning``): cell ``c`` fails at ``f_inf + m_c * a * (n + 1) ** -b``
with ``log m_c ~ Normal(0, tau^2)`` on the grid, truncated so the rate at the cell's ``n``
is a probability (each grid point stands for the interval half a step either side of it and
keeps the share of it below that ceiling; the lowest point always stays), and the spread ``tau`` averaged
over its candidates with weights proportional to the marginal likelihood of every cell's
outcomes. Written with plain Python loops and ``math`` so it shares no code with the
vectorised implementation; only the grid and the candidate spreads (parameters) are shared.
"""

from __future__ import annotations

import math

from analytics.learning import LOG_MULTIPLIER_GRID, TAU_GRID

EPS = 1e-12


def _logsumexp(values: list[float]) -> float:
    top = max(values)
    if top == -math.inf:
        return -math.inf
    return top + math.log(sum(math.exp(v - top) for v in values))


def cell_posteriors(curve, n, trials, successes, taus=TAU_GRID):
    """Return each cell's posterior weights over the grid (list of lists)."""
    grid = [float(x) for x in LOG_MULTIPLIER_GRID]
    cells = len(n)
    loglik, allowed = [], []
    for c in range(cells):
        level = curve.a * (float(n[c]) + 1.0) ** -curve.b
        failures = float(trials[c]) - float(successes[c])
        step = grid[1] - grid[0]
        ceiling = math.log(1.0 - curve.f_inf) - math.log(level) if level > 0 else math.inf
        row_ll, row_ok = [], []
        for j, x in enumerate(grid):
            rate = curve.f_inf + level * math.exp(x)
            kept = 1.0 if curve.a <= 0 else min(1.0, max(0.0, (ceiling - (x - step / 2)) / step))
            row_ok.append(kept if kept > 0 or j > 0 else 1.0)
            r = min(max(rate, EPS), 1.0 - EPS)
            row_ll.append(failures * math.log(r) + float(successes[c]) * math.log1p(-r))
        loglik.append(row_ll)
        allowed.append(row_ok)
    per_tau, marginal = [], []
    for tau in taus:
        total = 0.0
        posts = []
        for c in range(cells):
            prior = [
                -0.5 * (x / tau) ** 2 + math.log(allowed[c][j]) if allowed[c][j] else -math.inf
                for j, x in enumerate(grid)
            ]
            norm = _logsumexp(prior)
            joint = [p - norm + loglik[c][j] for j, p in enumerate(prior)]
            evidence = _logsumexp(joint)
            total += evidence
            posts.append([math.exp(v - evidence) for v in joint])
        per_tau.append(posts)
        marginal.append(total)
    top = max(marginal)
    weights = [math.exp(v - top) for v in marginal]
    weights = [w / sum(weights) for w in weights]
    return [
        [sum(weights[t] * per_tau[t][c][j] for t in range(len(weights))) for j in range(len(grid))]
        for c in range(cells)
    ]


def cell_rates(curve, n, trials, successes, level=0.95):
    """Return (rate, low, high) per cell: posterior-mean amplitude and the quantile interval."""
    grid = [float(x) for x in LOG_MULTIPLIER_GRID]
    out = []
    for c, post in enumerate(cell_posteriors(curve, n, trials, successes)):
        decay = (float(n[c]) + 1.0) ** -curve.b
        mean_m = sum(w * math.exp(x) for w, x in zip(post, grid, strict=True))

        def quantile(q, post=post):
            cdf, index = 0.0, 0
            for w in post:
                cdf += w
                if cdf < q:
                    index += 1
            return math.exp(grid[min(index, len(grid) - 1)])

        def rate(m, decay=decay):
            return min(curve.f_inf + curve.a * m * decay, 1.0)

        tail = (1.0 - level) / 2.0
        out.append((rate(mean_m), rate(quantile(tail)), rate(quantile(1.0 - tail))))
    return out
