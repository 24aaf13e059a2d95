"""The one weighted sum of noise rows the ES update needs, with the same bits on every CPU."""
from __future__ import annotations

import numpy as np


def add_weighted_rows(total: np.ndarray, weights, rows) -> None:
    """``total += sum_i weights[i] * rows[i]``, one row at a time in index order.

    Not ``weights @ rows``: a BLAS product's summation order and fused multiply-adds depend on
    the kernel it picks for the CPU (OpenBLAS chooses per CPU model), so the same run gave
    other bits on another machine. Elementwise IEEE operations in a fixed order give the same
    bits everywhere, at about the cost of the product (the noise dominates).
    """
    scaled = np.empty_like(total)
    for w, row in zip(weights, rows):
        np.multiply(row, w, out=scaled)
        total += scaled
