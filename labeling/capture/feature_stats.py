"""Per-feature statistics of frames as huggingface/lerobot computes and combines them
(``lerobot/datasets/compute_stats.py``): the converter writes each episode's, the dataset
writer aggregates them. Plain numpy."""

from __future__ import annotations

from typing import Any

import numpy as np

STAT_KEYS = ("min", "max", "mean", "std", "count", "q01", "q10", "q50", "q90", "q99")
QUANTILES = (0.01, 0.10, 0.50, 0.90, 0.99)


def _histogram_quantile(hist: np.ndarray, edges: np.ndarray, target: float) -> float:
    cumsum = np.cumsum(hist)
    idx = int(np.searchsorted(cumsum, target))
    if idx == 0:
        return float(edges[0])
    if idx >= len(cumsum):
        return float(edges[-1])
    before = cumsum[idx - 1]
    in_bin = cumsum[idx] - before
    if in_bin == 0:
        return float(edges[idx])
    return float(edges[idx] + (target - before) / in_bin * (edges[idx + 1] - edges[idx]))


def feature_stats(values: np.ndarray) -> dict[str, np.ndarray]:
    """LeRobot's statistics of a feature over frames (axis 0), per dimension:
    ``get_feature_stats`` for min, max, mean, std and count; ``RunningQuantileStats`` with 5000
    histogram bins per dimension for q01…q99. ``values`` is (frames,) or (frames, dims)."""
    data = np.asarray(values)
    data = data.reshape(data.shape[0], -1)
    count = np.array([data.shape[0]])
    if data.shape[0] < 2:
        mean = np.mean(data, axis=0).astype(np.float64)
        out = {
            "min": np.min(data, axis=0).astype(np.float64),
            "max": np.max(data, axis=0).astype(np.float64),
            "mean": mean,
            "std": np.std(data, axis=0).astype(np.float64),
            "count": count,
        }
        return out | {key: mean.copy() for key in STAT_KEYS[5:]}
    data = data.astype(np.result_type(data.dtype, np.float32), copy=False)
    low, high = data.min(axis=0), data.max(axis=0)
    mean = data.mean(axis=0)
    variance = (data**2).mean(axis=0) - mean**2
    out = {
        "min": low.copy(),
        "max": high.copy(),
        "mean": mean.copy(),
        "std": np.sqrt(np.maximum(0, variance)),
        "count": count,
    }
    quantiles: dict[str, list[float]] = {key: [] for key in STAT_KEYS[5:]}
    for d in range(data.shape[1]):
        edges = np.linspace(low[d] - 1e-10, high[d] + 1e-10, 5001)
        hist, _ = np.histogram(data[:, d], bins=edges)
        for key, q in zip(STAT_KEYS[5:], QUANTILES, strict=True):
            quantiles[key].append(_histogram_quantile(hist, edges, q * data.shape[0]))
    return out | {key: np.array(v) for key, v in quantiles.items()}


def column_stats(values: np.ndarray) -> dict[str, np.ndarray]:
    """:func:`feature_stats` of a one-value-per-frame column (timestamp, indices)."""
    return feature_stats(np.asarray(values).reshape(-1, 1))


def as_lists(stats: dict[str, np.ndarray]) -> dict[str, list[Any]]:
    """Statistics as JSON lists (count as whole numbers)."""
    return {k: np.asarray(v).tolist() for k, v in stats.items()}


def column_stats_v21(values: np.ndarray) -> dict[str, np.ndarray]:
    """The v2.1 writer's statistics of a column: min, max, mean, std, count (numpy, exact)."""
    data = np.asarray(values)
    return {
        "min": np.min(data, axis=0, keepdims=True),
        "max": np.max(data, axis=0, keepdims=True),
        "mean": np.mean(data, axis=0, keepdims=True),
        "std": np.std(data, axis=0, keepdims=True),
        "count": np.array([len(data)]),
    }


def aggregate_feature_stats(stats: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Combine one feature's statistics (``aggregate_feature_stats``): count-weighted mean,
    pooled variance, min of mins, max of maxes; quantiles at or below the median take the
    smallest estimate and the others the largest (a bound, as LeRobot keeps them)."""
    means = np.stack([s["mean"] for s in stats])
    variances = np.stack([s["std"] ** 2 for s in stats])
    counts = np.stack([s["count"] for s in stats])
    total = counts.sum(axis=0)
    while counts.ndim < means.ndim:
        counts = np.expand_dims(counts, axis=-1)
    mean = (means * counts).sum(axis=0) / total
    variance = ((variances + (means - mean) ** 2) * counts).sum(axis=0) / total
    out = {
        "min": np.min(np.stack([s["min"] for s in stats]), axis=0),
        "max": np.max(np.stack([s["max"] for s in stats]), axis=0),
        "mean": mean,
        "std": np.sqrt(variance),
        "count": total,
    }
    for key in (k for k in stats[0] if k.startswith("q") and k[1:].isdigit()):
        if all(key in s for s in stats):
            values = np.stack([s[key] for s in stats])
            out[key] = np.min(values, axis=0) if int(key[1:]) <= 50 else np.max(values, axis=0)
    return out
