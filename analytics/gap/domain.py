"""Train-vs-target shift on continuous features via a domain classifier.

A classifier learns to tell training rows from target rows; its cross-validated ROC AUC is
0.5 when the two are indistinguishable and approaches 1 as they separate. Features ranked
by out-of-fold permutation importance (the AUC lost when a feature is shuffled) say what
separates them: camera height, light level, and so on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

MAX_ROWS_PER_CLASS = 20_000
"""Rows kept per side (sampled deterministically) so a large inventory stays ~1 s."""


@dataclass(frozen=True)
class DomainShift:
    """Result of a domain-classifier test.

    ``auc`` is ``None`` when there were too few rows (``reason`` says why); else mean and
    standard deviation of the out-of-fold ROC AUC across ``folds``. ``features`` lists
    ``(name, importance)`` most-separating first; importance is the mean AUC drop when the
    feature is shuffled (near zero or slightly negative means it does not matter).
    """

    auc: float | None
    auc_sd: float | None
    n_train: int
    n_target: int
    folds: int
    model: str
    features: tuple[tuple[str, float], ...]
    reason: str = ""


def _matrix(x: npt.ArrayLike, name: str) -> npt.NDArray[np.float64]:
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 2-d (rows x features), got shape {arr.shape}")
    if np.any(np.isinf(arr)):
        raise ValueError(f"{name} contains infinite values")
    return arr


def _subsample(x: npt.NDArray[np.float64], cap: int, seed: int) -> npt.NDArray[np.float64]:
    if x.shape[0] <= cap:
        return x
    keep = np.sort(np.random.default_rng(seed).choice(x.shape[0], size=cap, replace=False))
    return x[keep]


def _make_model(model: str, seed: int) -> Any:
    # Imported here so importing the gap engine in a web worker does not load scikit-learn.
    if model == "boosting":
        from sklearn.ensemble import HistGradientBoostingClassifier

        return HistGradientBoostingClassifier(max_iter=50, early_stopping=False, random_state=seed)
    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return make_pipeline(SimpleImputer(strategy="median"), StandardScaler(), LogisticRegression())


def domain_classifier_auc(
    x_train: npt.ArrayLike,
    x_target: npt.ArrayLike,
    feature_names: Sequence[str],
    *,
    seed: int = 0,
    folds: int = 5,
    model: Literal["boosting", "logistic"] = "boosting",
    max_rows: int = MAX_ROWS_PER_CLASS,
) -> DomainShift:
    """Measure how well training and target rows of continuous features can be told apart.

    ``model="boosting"`` (gradient-boosted trees; default) also catches shifts in spread or
    interactions and accepts NaN; ``"logistic"`` (standardised logistic regression) is
    faster and sees only shifts in mean. Each side is capped at ``max_rows`` rows sampled
    with ``seed``; folds are stratified. Returns ``auc=None`` with a reason when either side
    has fewer than ``folds`` rows. Raises ValueError on mismatched shapes or names, or
    infinite values.
    """
    train = _matrix(x_train, "x_train")
    target = _matrix(x_target, "x_target")
    names = tuple(feature_names)
    if train.shape[1] != target.shape[1] or train.shape[1] != len(names):
        raise ValueError(
            f"x_train has {train.shape[1]} columns, x_target {target.shape[1]}, "
            f"feature_names {len(names)}; they must agree"
        )
    if folds < 2:
        raise ValueError(f"folds must be >= 2, got {folds}")
    train = _subsample(train, max_rows, seed)
    target = _subsample(target, max_rows, seed + 1)
    n_train, n_target = train.shape[0], target.shape[0]
    if min(n_train, n_target) < folds:
        return DomainShift(
            auc=None,
            auc_sd=None,
            n_train=n_train,
            n_target=n_target,
            folds=folds,
            model=model,
            features=(),
            reason=(
                f"need at least {folds} rows on each side for {folds}-fold validation; "
                f"got {n_train} training and {n_target} target rows"
            ),
        )

    from sklearn.metrics import roc_auc_score
    from sklearn.model_selection import StratifiedKFold

    x = np.vstack([train, target])
    y = np.r_[np.zeros(n_train), np.ones(n_target)]
    rng = np.random.default_rng(seed)
    aucs: list[float] = []
    drops = np.zeros(len(names))
    splitter = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
    for fit_rows, val_rows in splitter.split(x, y):
        clf = _make_model(model, seed)
        clf.fit(x[fit_rows], y[fit_rows])
        x_val, y_val = x[val_rows], y[val_rows]
        auc = float(roc_auc_score(y_val, clf.predict_proba(x_val)[:, 1]))
        aucs.append(auc)
        for j in range(len(names)):
            shuffled = x_val.copy()
            shuffled[:, j] = rng.permutation(shuffled[:, j])
            drops[j] += auc - float(roc_auc_score(y_val, clf.predict_proba(shuffled)[:, 1]))
    importance = drops / folds
    ranked = sorted(zip(names, importance.tolist(), strict=True), key=lambda item: -item[1])
    return DomainShift(
        auc=float(np.mean(aucs)),
        auc_sd=float(np.std(aucs, ddof=1)),
        n_train=n_train,
        n_target=n_target,
        folds=folds,
        model=model,
        features=tuple(ranked),
    )
