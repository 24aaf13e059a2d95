"""Arithmetic with the same bits on every x86-64 CPU, for everything a worker's return depends on.

NumPy's ``exp``, ``tanh`` and ``power`` pick a SIMD implementation for the CPU they run on
(float64 ``exp`` has its own AVX-512 code; float32 ``tanh`` and ``exp`` change below AVX2), and
``matmul`` calls OpenBLAS, whose kernel, and so its summation order and fused multiply-adds,
depends on the CPU model. Each gave other last bits on another PC; in continuous control or a
softmax a last bit becomes another return, so an honest worker on an older PC looked like a liar.

Used instead: IEEE's basic operations (``+ - * /``, ``rint``, each correctly rounded, one
ufunc call at a time, so no compiler fuses a multiply into an add; powers of two built from
their bits) in a fixed order, and ``np.einsum`` without ``optimize`` (NumPy's own loop,
compiled for the x86-64 baseline, not BLAS). The course repository's
``tests/core/test_exact.py`` runs them in fresh processes under several OpenBLAS kernels and
NumPy SIMD levels and finds one set of bits.
"""
from __future__ import annotations

import decimal

import numpy as np

# exp(x) = 2^m 2^(j/32) exp(r): k = rint(32 x / ln2) = 32 m + j, r = x - k ln2/32, |r| <= ln2/64.
# ln2/32 split in two (Cody and Waite): _LN2_32_HI has 21 trailing zero bits, so k * _LN2_32_HI
# is exact for |k| < 2^16 and x - k * _LN2_32_HI loses nothing.
_SCALE = 32
_INV = _SCALE / 0.6931471805599453
_LN2_32_HI = 6.93147180369123816490e-01 / _SCALE
_LN2_32_LO = 1.90821492927058770002e-10 / _SCALE
with decimal.localcontext() as _ctx:          # 2^(j/32), correctly rounded (decimal: in software)
    _ctx.prec = 40
    _TABLE = np.array([float(decimal.Decimal(2) ** (decimal.Decimal(j) / _SCALE)) for j in range(_SCALE)])
# exp(r) on |r| <= 0.0109: Taylor to r^6 (the next term is below 4e-18, a 30th of an ulp of 1)
_TAYLOR = (1 / 720, 1 / 120, 1 / 24, 1 / 6, 0.5, 1.0, 1.0)
_EXP_MAX, _EXP_MIN = 709.782712893384, -745.1332191019412   # exp overflows above, is 0 below
_K_MAX, _K_MIN = (_EXP_MAX + 1) * _INV, (_EXP_MIN - 1) * _INV


def exp(x) -> np.ndarray:
    """``exp(x)`` in float64, within 2 ulp of the true value; the same bits on every CPU."""
    x = np.asarray(x, dtype=np.float64)
    shape, x = x.shape, x.reshape(-1)
    k = x * _INV
    np.fmin(k, _K_MAX, out=k)        # fmin and fmax also turn a nan into a number (its p stays nan)
    np.fmax(k, _K_MIN, out=k)
    np.rint(k, out=k)
    r = k * _LN2_32_HI
    np.subtract(x, r, out=r)
    r -= k * _LN2_32_LO
    p = r * _TAYLOR[0]
    for c in _TAYLOR[1:-1]:          # Horner, one rounding per operation
        p += c
        p *= r
    p += _TAYLOR[-1]
    k = k.astype(np.int64)
    p *= np.take(_TABLE, k & (_SCALE - 1))
    # times 2^m as two exact powers of two built from their bits (2^m alone leaves float64's
    # range for m = 1024 or a subnormal result; the second product rounds once there)
    m = k >> 5
    half = m >> 1
    m -= half
    with np.errstate(over="ignore"):
        for e in (half, m):
            e += 1023
            e <<= 52
            p *= e.view(np.float64)
    np.copyto(p, np.inf, where=x > _EXP_MAX)
    np.copyto(p, 0.0, where=x < _EXP_MIN)
    return p.reshape(shape)


# tanh: Eigen's float32 rational x P(x^2) / Q(x^2) (Eigen/src/Core/MathFunctionsImpl.h, as XLA
# uses it), within 6 float32 ulp of the true value, evaluated in float32 without fused
# multiply-adds: at the clamp it gives exactly +-1, and below 4e-4 it is x.
_P = tuple(np.float32(v) for v in (-2.76076847742355e-16, 2.00018790482477e-13, -8.60467152213735e-11,
                                   5.12229709037114e-08, 1.48572235717979e-05, 6.37261928875436e-04,
                                   4.89352455891786e-03))
_Q = tuple(np.float32(v) for v in (1.19825839466702e-06, 1.18534705686654e-04, 2.26843463243900e-03,
                                   4.89352518554385e-03))
_CLAMP, _TINY = np.float32(7.90531110763549805), np.float32(4e-4)


def tanh(x) -> np.ndarray:
    """``tanh(x)`` in float32; the same bits on every CPU."""
    x = np.asarray(x, dtype=np.float32)
    shape, x = x.shape, x.reshape(-1)
    c = np.minimum(x, _CLAMP)
    np.maximum(c, -_CLAMP, out=c)
    x2 = c * c
    p = x2 * _P[0]
    for a in _P[1:-1]:
        p += a
        p *= x2
    p += _P[-1]
    p *= c
    q = x2 * _Q[0]
    for b in _Q[1:-1]:
        q += b
        q *= x2
    q += _Q[-1]
    p /= q
    np.copyto(p, x, where=np.abs(x) < _TINY)
    return p.reshape(shape)


def rows_times_matrices(h: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``out[r] = h[r] @ w[r]`` for ``h (rows, in)``, ``w (rows, in, out)``: einsum's loop, whose
    bits depend neither on the CPU nor on the other rows (a row's actions never depend on its
    batch)."""
    return np.einsum("ri,rio->ro", h, w)


def fourth_power(x) -> np.ndarray:
    """``x**4`` as two squares (``**`` with 4 calls the CPU's own ``pow``)."""
    s = np.square(x)
    return np.square(s, out=s)
