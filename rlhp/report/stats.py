"""Means over seeds with Student-t 95% confidence intervals."""

from __future__ import annotations

import warnings

import numpy as np
from scipy import stats


def mean_ci(values: np.ndarray, axis: int = 0, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Mean and half-width of the ``level`` confidence interval along ``axis`` (NaNs ignored; the
    half-width is NaN with fewer than 2 values)."""
    values = np.asarray(values, dtype=float)
    n = np.sum(~np.isnan(values), axis=axis)
    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN slices: NaN is the answer
        mean = np.nanmean(values, axis=axis)
        sem = np.nanstd(values, axis=axis, ddof=1) / np.sqrt(n)
    half = np.where(n > 1, stats.t.ppf(0.5 + level / 2, np.maximum(n - 1, 1)) * sem, np.nan)
    return mean, half
