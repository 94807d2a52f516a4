"""Agreement between annotators, free of Django.

* :func:`cohen_kappa` — two raters over the same items (Cohen 1960);
* :func:`fleiss_kappa` — any fixed number of raters per item (Fleiss 1971), from an
  items × categories count table (:func:`count_table` builds one from label lists);
* :func:`job_agreement`, :func:`rater_agreement`, :func:`gold_accuracy` — the same per label
  (each condition dimension, the outcome, the failure mode) over a job's ratings.

A label value may be any hashable, ``None`` included ("not present / not recorded" is an
answer like any other). Kappa is undefined (None) when chance agreement is 1, i.e. every
rating fell in one and the same category; percent agreement is reported alongside.

Cohen's kappa is computed here from the confusion matrix with numpy; the tests check it
against ``sklearn.metrics.cohen_kappa_score`` (importing scikit-learn costs over a second,
too much for a page).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

Label = Hashable


def _codes(*sequences: Sequence[Label]) -> tuple[list[np.ndarray], int]:
    index: dict[Label, int] = {}
    out = [
        np.array([index.setdefault(v, len(index)) for v in seq], dtype=np.int64)
        for seq in sequences
    ]
    return out, len(index)


def cohen_kappa(a: Sequence[Label], b: Sequence[Label]) -> float | None:
    """Return Cohen's kappa of two raters who labelled the same items, in the same order.

    None when there are no items or chance agreement is 1 (both raters used one category).
    Raises ValueError when the sequences differ in length.
    """
    if len(a) != len(b):
        raise ValueError(f"the raters labelled {len(a)} and {len(b)} items; expected the same")
    if not a:
        return None
    (x, y), k = _codes(a, b)
    confusion = np.zeros((k, k), dtype=np.float64)
    np.add.at(confusion, (x, y), 1.0)
    n = confusion.sum()
    observed = np.trace(confusion) / n
    expected = float(confusion.sum(axis=1) @ confusion.sum(axis=0)) / (n * n)
    if expected >= 1.0 - 1e-12:
        return None
    return float((observed - expected) / (1.0 - expected))


def fleiss_kappa(table: np.ndarray) -> float | None:
    """Return Fleiss' kappa of an items × categories table of rating counts.

    Every row must sum to the same number of raters n ≥ 2. None when the table is empty or
    chance agreement is 1. Raises ValueError on rows with different or too few raters.
    """
    counts = np.asarray(table, dtype=np.float64)
    if counts.ndim != 2 or counts.shape[0] == 0:
        return None
    raters = counts.sum(axis=1)
    n = raters[0]
    if not np.allclose(raters, n):
        raise ValueError("every item needs the same number of ratings for Fleiss' kappa")
    if n < 2:
        raise ValueError("Fleiss' kappa needs at least two ratings per item")
    items = counts.shape[0]
    p_item = (np.square(counts).sum(axis=1) - n) / (n * (n - 1))
    p_bar = float(p_item.mean())
    p_cat = counts.sum(axis=0) / (items * n)
    p_expected = float(np.square(p_cat).sum())
    if p_expected >= 1.0 - 1e-12:
        return None
    return (p_bar - p_expected) / (1.0 - p_expected)


def count_table(ratings: Sequence[Sequence[Label]]) -> np.ndarray:
    """Turn per-item label lists into an items × categories table of counts."""
    flat, k = _codes(*ratings) if ratings else ([], 0)
    table = np.zeros((len(ratings), k), dtype=np.int64)
    for i, codes in enumerate(flat):
        np.add.at(table[i], codes, 1)
    return table


def percent_agreement(ratings: Sequence[Sequence[Label]]) -> float | None:
    """Share of items on which every rating is the same; None without items."""
    if not ratings:
        return None
    return sum(1 for r in ratings if len(set(r)) == 1) / len(ratings)


# --- per label over a job's ratings -------------------------------------------------------


@dataclass(frozen=True)
class Rating:
    """One annotator's labels for one item: ``labels`` maps label name → value."""

    item: int
    rater: int
    labels: Mapping[str, Label]


@dataclass(frozen=True)
class LabelAgreement:
    label: str
    method: str  # "cohen", "fleiss" or "" (too few items)
    kappa: float | None
    items: int
    agreement: float | None  # share of items where every rating agrees


@dataclass(frozen=True)
class PairAgreement:
    """One rater against the others on the items they shared."""

    kappa: float | None
    pairs: int
    agreement: float | None


def _by_item(ratings: Sequence[Rating]) -> dict[int, list[Rating]]:
    grouped: dict[int, list[Rating]] = defaultdict(list)
    for r in ratings:
        grouped[r.item].append(r)
    return grouped


def job_agreement(
    ratings: Sequence[Rating], labels: Sequence[str], *, raters_per_item: int
) -> list[LabelAgreement]:
    """Per label: Cohen's kappa when items carry two ratings, Fleiss' kappa for more.

    Only items with exactly ``raters_per_item`` ratings count (gold episodes, rated by
    everyone, are scored for accuracy instead). For pairs, rater one is the item's first
    rating in the order given (callers pass ratings oldest first).
    """
    items = [rs for rs in _by_item(ratings).values() if len(rs) == raters_per_item]
    out: list[LabelAgreement] = []
    for name in labels:
        values = [[r.labels.get(name) for r in rs] for rs in items]
        if not values:
            out.append(LabelAgreement(name, "", None, 0, None))
            continue
        if raters_per_item == 2:
            kappa = cohen_kappa([v[0] for v in values], [v[1] for v in values])
            method = "cohen"
        else:
            kappa = fleiss_kappa(count_table(values))
            method = "fleiss"
        out.append(LabelAgreement(name, method, kappa, len(values), percent_agreement(values)))
    return out


def rater_agreement(
    ratings: Sequence[Rating], labels: Sequence[str]
) -> dict[int, dict[str, PairAgreement]]:
    """Per rater and label: Cohen's kappa of the rater against every other rating of the
    items they shared (one pair per other rating), with percent agreement."""
    pairs: dict[int, list[tuple[Rating, Rating]]] = defaultdict(list)
    for rs in _by_item(ratings).values():
        for mine in rs:
            for other in rs:
                if other.rater != mine.rater:
                    pairs[mine.rater].append((mine, other))
    out: dict[int, dict[str, PairAgreement]] = {}
    for rater, shared in pairs.items():
        out[rater] = {}
        for name in labels:
            a = [m.labels.get(name) for m, _ in shared]
            b = [o.labels.get(name) for _, o in shared]
            same = sum(1 for x, y in zip(a, b, strict=True) if x == y)
            out[rater][name] = PairAgreement(
                kappa=cohen_kappa(a, b), pairs=len(shared), agreement=same / len(shared)
            )
    return out


@dataclass(frozen=True)
class Accuracy:
    correct: int
    total: int

    @property
    def share(self) -> float | None:
        return self.correct / self.total if self.total else None


def gold_accuracy(
    ratings: Sequence[Rating], gold: Mapping[int, Mapping[str, Label]], labels: Sequence[str]
) -> dict[int, dict[str, Accuracy]]:
    """Per rater and label: how many of their ratings of gold items match the gold labels.

    The key ``"*"`` holds all labels together (every label of every gold item rated).
    """
    tallies: dict[int, dict[str, list[int]]] = defaultdict(
        lambda: {name: [0, 0] for name in (*labels, "*")}
    )
    for r in ratings:
        known = gold.get(r.item)
        if known is None:
            continue
        for name in labels:
            hit = int(r.labels.get(name) == known.get(name))
            for key in (name, "*"):
                tallies[r.rater][key][0] += hit
                tallies[r.rater][key][1] += 1
    return {
        rater: {name: Accuracy(c, t) for name, (c, t) in per.items()}
        for rater, per in tallies.items()
    }
