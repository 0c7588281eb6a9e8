"""Scalar coefficient functions and so(3) helpers shared by the closed forms.

Every closed form in this package (SO(3), SE(2), SE(3): exp, log, the trivialized tangents
and their derivatives) is written in terms of the entire functions

    f_n(s) = sum_{k>=0} (-1)^k s^k / (2k + n)!,      s = theta^2,

    f_0 = cos(theta),  f_1 = sin(theta)/theta,  f_2 = (1 - cos(theta))/theta^2,
    f_3 = (theta - sin(theta))/theta^3,  and  f_{n+2} = (1/n! - f_n)/s,

whose s-derivatives are again of this family (no cancellation is introduced by
differentiating):

    f_n'  = (n f_{n+2} - f_{n+1}) / 2,
    f_n'' = (n(n+2) f_{n+4} - (2n+1) f_{n+3} + f_{n+2}) / 4,
    f_n''' = (n(n+2)(n+4) f_{n+6} - 3(n^2+3n+1) f_{n+5} + 3(n+1) f_{n+4} - f_{n+3}) / 8.

Near s = 0 the closed forms cancel catastrophically (f_3 loses ~6 eps/s relative), so a
truncated power series is used instead.  The one place that decides which branch is used is
:func:`use_series`; series are summed with enough terms to be exact to rounding on their
whole region, so the switch is invisible at the 1e-16 level.
"""

from __future__ import annotations

import functools
import math

import numpy as np

__all__ = [
    "CHUNK",
    "SERIES_THETA_SQ",
    "FTable",
    "blocked",
    "cross3",
    "hat3",
    "iso_apply",
    "iso_from_coeffs",
    "iso_hess",
    "iso_jac",
    "iso_matrix",
    "iso_third",
    "series_coefficients",
    "series_rule",
    "sq3",
    "use_series",
    "vee3",
]

#: theta^2 below which f_n is summed as a power series, and the number of terms used there
#: (terms beyond the last are < 1e-19 relative on the whole region).  f_0..f_2 have half-angle
#: closed forms exact for every theta > 0: their series only replaces the 0/0 at theta = 0.
#: For n >= 3 the closed form (upward recursion f_{n+2} = (1/n! - f_n)/s) cancels like
#: (n+1)(n+2)/s per step, so the series is used up to theta = 2 (n = 3, 4) or 4 (n >= 5).
SERIES_THETA_SQ: dict[str, tuple[float, int]] = {
    "n<=2": (1e-6, 6),
    "n<=4": (4.0, 15),
    "n>=5": (16.0, 26),
}


def series_rule(n: int) -> tuple[float, int]:
    """``(threshold on θ², number of terms)`` of the power series of ``f_n``
    (:data:`SERIES_THETA_SQ`); compiled mirrors of the closed forms read it from here."""
    return SERIES_THETA_SQ["n<=2" if n <= 2 else ("n<=4" if n <= 4 else "n>=5")]


def use_series(theta_sq: np.ndarray, n: int) -> np.ndarray:
    """Boolean mask: where ``f_n(theta_sq)`` must be evaluated by its power series.

    This is the single small-angle threshold helper of the package (thresholds in
    :data:`SERIES_THETA_SQ`); every closed form with a removable singularity at theta = 0 is
    written through ``f_n`` and therefore switches here.
    """
    return theta_sq < series_rule(n)[0]


@functools.cache
def series_coefficients(n: int) -> np.ndarray:
    """Power-series coefficients ``(-1)^k / (2k + n)!`` of ``f_n`` (cached, read-only)."""
    c = np.array([(-1.0) ** k / math.factorial(2 * k + n) for k in range(series_rule(n)[1])])
    c.flags.writeable = False
    return c


#: arrays up to this many entries sum the series as one matrix product with the powers of s
#: (two numpy calls instead of one per term: the per-call overhead dominates for the few-element
#: arrays of single-trajectory integrators); larger ones use Horner's rule (cache friendly).
#: Both are exact to rounding on the series region (they differ by <= 1 ulp).
SMALL_SERIES: int = 64


def _series(n: int, s: np.ndarray) -> np.ndarray:
    coeffs = series_coefficients(n)
    if s.size <= SMALL_SERIES:
        P = np.empty((s.size, coeffs.size))
        P[:, 0] = 1.0
        P[:, 1:] = s.reshape(-1, 1)
        np.multiply.accumulate(P, axis=1, out=P)
        return (P @ coeffs).reshape(s.shape)
    out = np.full_like(s, coeffs[-1])
    for c in coeffs[-2::-1]:
        out *= s
        out += c
    return out


#: f_n computed together by FTable._small_block, and their series coefficients as columns
#: (each column holds exactly the terms of series_coefficients(n); the rest are zeros)
_BLOCK_NS = (3, 4, 5, 6, 7)


def _block_coeffs() -> np.ndarray:
    K = max(series_rule(n)[1] for n in _BLOCK_NS)
    C = np.zeros((K, len(_BLOCK_NS)))
    for j, n in enumerate(_BLOCK_NS):
        c = series_coefficients(n)
        C[: c.size, j] = c
    C.flags.writeable = False
    return C


_BLOCK_COEFFS = _block_coeffs()


class FTable:
    """Lazily evaluated table of ``f_n(s)`` and its s-derivatives for one array ``s >= 0``."""

    def __init__(self, theta_sq: np.ndarray):
        self.s = np.asarray(theta_sq, dtype=np.float64)
        self._flat = self.s.reshape(-1)
        self._f: dict[int, np.ndarray] = {}
        #: True once f_3..f_7 came from the small-array series block, i.e. every s < 4
        self.all_series: bool = False

    # -- internal: values on the flat array
    def _base(self) -> None:
        s = self._flat
        small = use_series(s, 0)
        s_safe = np.where(small, 1.0, s)
        theta = np.sqrt(s_safe)
        half = 0.5 * theta
        sh = np.sin(half)
        ch = np.cos(half)
        sh_t = sh / theta
        f2 = 2.0 * sh_t * sh_t
        f1 = 2.0 * sh_t * ch
        f0 = 1.0 - s_safe * f2
        if small.any():
            ss = s[small]
            f0[small] = _series(0, ss)
            f1[small] = _series(1, ss)
            f2[small] = _series(2, ss)
        self._f[0], self._f[1], self._f[2] = f0, f1, f2

    def _small_block(self) -> None:
        """Few-element arrays with every s in the series region of f_3..f_7 (the usual case for
        the small steps of integrators): all five series from ONE matrix product."""
        s = self._flat
        P = np.empty((s.size, _BLOCK_COEFFS.shape[0]))
        P[:, 0] = 1.0
        P[:, 1:] = s[:, None]
        np.multiply.accumulate(P, axis=1, out=P)
        V = P @ _BLOCK_COEFFS
        for j, n in enumerate(_BLOCK_NS):
            self._f[n] = V[:, j]
        self.all_series = True

    def _flat_f(self, n: int) -> np.ndarray:
        if n not in self._f:
            if n <= 2:
                self._base()
            elif (n in _BLOCK_NS and self._flat.size <= SMALL_SERIES
                  and bool(np.all(use_series(self._flat, 3)))):
                self._small_block()
            else:
                s = self._flat
                lower = self._flat_f(n - 2)
                small = use_series(s, n)
                out = np.empty_like(s)
                big = ~small
                if big.any():
                    out[big] = (1.0 / math.factorial(n - 2) - lower[big]) / s[big]
                if small.any():
                    out[small] = _series(n, s[small])
                self._f[n] = out
        return self._f[n]

    # -- public
    def f(self, n: int) -> np.ndarray:
        """``f_n(s)``, same shape as ``s``."""
        return self._flat_f(n).reshape(self.s.shape)

    def df(self, n: int) -> np.ndarray:
        """``d f_n / ds = (n f_{n+2} - f_{n+1}) / 2``."""
        return 0.5 * (n * self.f(n + 2) - self.f(n + 1))

    def d2f(self, n: int) -> np.ndarray:
        """``d^2 f_n / ds^2 = (n(n+2) f_{n+4} - (2n+1) f_{n+3} + f_{n+2}) / 4``."""
        return 0.25 * (n * (n + 2) * self.f(n + 4) - (2 * n + 1) * self.f(n + 3) + self.f(n + 2))

    def d3f(self, n: int) -> np.ndarray:
        """``d^3 f_n / ds^3 = (n(n+2)(n+4) f_{n+6} - 3(n^2+3n+1) f_{n+5} + 3(n+1) f_{n+4}
        - f_{n+3}) / 8`` (``d2f`` differentiated once more with ``f_m' = (m f_{m+2} - f_{m+1})/2``).
        """
        return 0.125 * (n * (n + 2) * (n + 4) * self.f(n + 6)
                        - 3 * (n * n + 3 * n + 1) * self.f(n + 5)
                        + 3 * (n + 1) * self.f(n + 4) - self.f(n + 3))


# ----------------------------------------------------------------------------- blocking
#: elements per block in :func:`blocked` (a (CHUNK, 3, 3) float64 block is 1.2 MB)
CHUNK: int = 16384


def blocked(core, x: np.ndarray, n_in: int, out_trailing: tuple[int, ...], dtype=np.float64):
    """Apply ``core`` (a vectorized map of a ``(N, *x.shape[-n_in:])`` array to a
    ``(N, *out_trailing)`` array) to ``x`` with arbitrary leading batch axes, in blocks of
    :data:`CHUNK` elements so that all temporaries stay in cache (large batches run 2-4x faster
    than one whole-array pass).  This is cache blocking, not a per-element loop."""
    if x.ndim == n_in + 1 and x.shape[0] <= CHUNK:  # already flat and small: no reshapes
        return core(x)
    batch = x.shape[: x.ndim - n_in]
    n = int(np.prod(batch, dtype=np.int64))
    flat = x.reshape((n, *x.shape[x.ndim - n_in :]))
    if n <= CHUNK:
        return core(flat).reshape((*batch, *out_trailing))
    out = np.empty((n, *out_trailing), dtype=dtype)
    for i in range(0, n, CHUNK):
        out[i : i + CHUNK] = core(flat[i : i + CHUNK])
    return out.reshape((*batch, *out_trailing))


# ----------------------------------------------------------------------------- so(3) helpers
def sq3(w: np.ndarray) -> np.ndarray:
    """|w|^2 for (..., 3) arrays."""
    x, y, z = w[..., 0], w[..., 1], w[..., 2]
    return x * x + y * y + z * z


def iso_from_coeffs(w, a, b, c) -> np.ndarray:
    """``a I + b hat(w) + c w w^T`` as (..., 3, 3).  Entry (i, j), i <= j, is
    ``(c w_i) w_j [+ a if i = j] [± b w_k]`` (the same rounding for every batch size).  Small
    batches use few whole-array operations (their count, not their size, dominates for the
    few-element arrays of single-trajectory integrators)."""
    a, b, c = np.asarray(a), np.asarray(b), np.asarray(c)
    if w.size > 3 * SMALL_SERIES:
        return _iso_from_coeffs_entrywise(w, a, b, c)
    cw = c[..., None] * w
    M = cw[..., :, None] * w[..., None, :]
    bs = w.shape[:-1]
    if a.shape not in ((), bs) or b.shape not in ((), bs):  # (no call when a, b fit w)
        bs = np.broadcast_shapes(bs, a.shape, b.shape)
    shape = (*bs, 3, 3)
    if M.shape != shape:
        M = np.array(np.broadcast_to(M, shape))
    M[..., 1, 0] = M[..., 0, 1]  # (c w_i) w_j with i < j on both sides of the diagonal
    M[..., 2, 0] = M[..., 0, 2]
    M[..., 2, 1] = M[..., 1, 2]
    diag = M.reshape((*shape[:-2], 9))[..., ::4]  # a view of the diagonal
    diag += a[..., None]
    bw = b[..., None] * w
    M[..., 0, 1] -= bw[..., 2]
    M[..., 1, 0] += bw[..., 2]
    M[..., 0, 2] += bw[..., 1]
    M[..., 2, 0] -= bw[..., 1]
    M[..., 1, 2] -= bw[..., 0]
    M[..., 2, 1] += bw[..., 0]
    return M


def _iso_from_coeffs_entrywise(w, a, b, c) -> np.ndarray:
    """:func:`iso_from_coeffs` entry by entry (bitwise the same result; faster for large
    batches, where the strided outer product of the few-call version costs more)."""
    x, y, z = w[..., 0], w[..., 1], w[..., 2]
    a, b, c = np.broadcast_arrays(a, b, c)
    M = np.empty((*np.broadcast_shapes(x.shape, a.shape), 3, 3))
    cx, cy, cz = c * x, c * y, c * z
    bx, by, bz = b * x, b * y, b * z
    M[..., 0, 0] = a + cx * x
    M[..., 1, 1] = a + cy * y
    M[..., 2, 2] = a + cz * z
    cxy, cxz, cyz = cx * y, cx * z, cy * z
    M[..., 0, 1] = cxy - bz
    M[..., 1, 0] = cxy + bz
    M[..., 0, 2] = cxz + by
    M[..., 2, 0] = cxz - by
    M[..., 1, 2] = cyz - bx
    M[..., 2, 1] = cyz + bx
    return M


def hat3(w: np.ndarray) -> np.ndarray:
    """so(3) hat: (..., 3) -> (..., 3, 3) with hat(w) v = w x v."""
    w = np.asarray(w)
    out = np.zeros((*w.shape[:-1], 3, 3), dtype=np.result_type(w, np.float64))
    x, y, z = w[..., 0], w[..., 1], w[..., 2]
    out[..., 0, 1] = -z
    out[..., 0, 2] = y
    out[..., 1, 0] = z
    out[..., 1, 2] = -x
    out[..., 2, 0] = -y
    out[..., 2, 1] = x
    return out


def vee3(X: np.ndarray) -> np.ndarray:
    """so(3) vee: (..., 3, 3) -> (..., 3); reads the skew part ½(X - Xᵀ)."""
    return 0.5 * np.stack(
        [X[..., 2, 1] - X[..., 1, 2], X[..., 0, 2] - X[..., 2, 0], X[..., 1, 0] - X[..., 0, 1]],
        axis=-1,
    )


def cross3(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a × b`` for (..., 3) arrays (broadcasting); the same products and differences as
    ``np.cross`` without its axis bookkeeping (which dominates for few-element arrays)."""
    a0, a1, a2 = a[..., 0], a[..., 1], a[..., 2]
    b0, b1, b2 = b[..., 0], b[..., 1], b[..., 2]
    out = np.empty((*np.broadcast_shapes(a0.shape, b0.shape), 3))
    out[..., 0] = a1 * b2 - a2 * b1
    out[..., 1] = a2 * b0 - a0 * b2
    out[..., 2] = a0 * b1 - a1 * b0
    return out


def _e(x):
    return np.asarray(x)[..., None]


def _outer(a, b):
    return a[..., :, None] * b[..., None, :]


def iso_matrix(w, r, p, q) -> np.ndarray:
    """``r I + p hat(w) + q hat(w)^2`` as (..., 3, 3); r, p, q broadcast against w[..., 0].
    (hat(w)^2 = w w^T - |w|^2 I.)"""
    return iso_from_coeffs(w, r - q * sq3(w), p, q)


def iso_apply(w, eta, r, p, q) -> np.ndarray:
    """``(r I + p hat(w) + q hat(w)^2) eta``, shape (..., 3)."""
    we = cross3(w, eta)
    return _e(r) * eta + _e(p) * we + _e(q) * cross3(w, we)


def iso_jac(w, eta, r, p, q, r1, p1, q1) -> np.ndarray:
    """Jacobian in w of ``D(w) eta = r eta + p w×eta + q w×(w×eta)`` with r, p, q functions of
    s = |w|^2 and r1, p1, q1 their s-derivatives.  Shape (..., 3, 3)."""
    we = cross3(w, eta)
    wwe = cross3(w, we)
    u = _e(r1) * eta + _e(p1) * we + _e(q1) * wwe
    J = 2.0 * _outer(u, w)
    J -= _e(_e(p)) * hat3(eta)
    weta = np.einsum("...i,...i->...", w, eta)
    Q = _outer(w, eta) - 2.0 * _outer(eta, w)
    Q[..., 0, 0] += weta
    Q[..., 1, 1] += weta
    Q[..., 2, 2] += weta
    J += _e(_e(q)) * Q
    return J


def iso_hess(w, eta, v, r, p, q, r1, p1, q1, r2, p2, q2) -> np.ndarray:
    """Jacobian in w of ``iso_jac(w, eta, ...) @ v``, shape (..., 3, 3) (second derivative of
    ``D(w) eta`` contracted with v in its first slot)."""
    we = cross3(w, eta)
    wwe = cross3(w, we)
    wv = np.einsum("...i,...i->...", w, v)
    weta = np.einsum("...i,...i->...", w, eta)
    ev = np.einsum("...i,...i->...", eta, v)
    u = _e(r1) * eta + _e(p1) * we + _e(q1) * wwe
    u2 = _e(r2) * eta + _e(p2) * we + _e(q2) * wwe
    # d/dw [ 2 (w.v) u ]
    du = 2.0 * _outer(u2, w) - _e(_e(p1)) * hat3(eta)
    Q = _outer(w, eta) - 2.0 * _outer(eta, w)
    Q[..., 0, 0] += weta
    Q[..., 1, 1] += weta
    Q[..., 2, 2] += weta
    du += _e(_e(q1)) * Q
    H = 2.0 * _outer(u, v) + 2.0 * _e(_e(wv)) * du
    # d/dw [ -p eta×v ]
    H -= 2.0 * _e(_e(p1)) * _outer(cross3(eta, v), w)
    # d/dw [ q ((w.eta) v + w (eta.v) - 2 eta (w.v)) ]
    t = _e(weta) * v + w * _e(ev) - 2.0 * eta * _e(wv)
    H += 2.0 * _e(_e(q1)) * _outer(t, w)
    P = _outer(v, eta) - 2.0 * _outer(eta, v)
    P[..., 0, 0] += ev
    P[..., 1, 1] += ev
    P[..., 2, 2] += ev
    H += _e(_e(q)) * P
    return H


def iso_third(w, eta, x, y, r1, p1, q1, r2, p2, q2, r3, p3, q3) -> np.ndarray:
    """Jacobian in w of ``iso_hess(w, eta, x, ...) @ y``, shape (..., 3, 3): the third
    derivative of ``D(w) eta = r eta + p w×eta + q w×(w×eta)`` contracted with x and y (fully
    symmetric in x, y and the direction z it acts on).  r1..q3 are the first three
    s-derivatives of r, p, q (the values themselves do not enter: D is quadratic in w at fixed
    coefficients).

    With D(w) eta = c0 eta + c1 w×eta + c2 w (w·eta), c0 = r - s q, c1 = p, c2 = q, every
    coefficient g(s) obeys (s = |w|^2, ds[x] = 2 w·x, d²s[x, y] = 2 x·y, d³s = 0)

        d³g[x, y, z] = 8 g''' (w·x)(w·y)(w·z) + 4 g'' ((x·y)(w·z) + (w·y)(x·z) + (w·x)(y·z)),

    and the product rule with the linear map w×eta and the quadratic map w (w·eta) gives the
    sum of outer products assembled below (one term per right-hand vector w, x, y, eta, plus
    multiples of I and hat(eta))."""
    s = sq3(w)
    # s-derivatives of c0 = r - s q (Leibniz: (s q)^(k) = s q^(k) + k q^(k-1))
    a2 = r2 - 2.0 * q1 - s * q2
    a3 = r3 - 3.0 * q2 - s * q3
    wx = np.einsum("...i,...i->...", w, x)
    wy = np.einsum("...i,...i->...", w, y)
    we = np.einsum("...i,...i->...", w, eta)
    xy = np.einsum("...i,...i->...", x, y)
    xe = np.einsum("...i,...i->...", x, eta)
    ye = np.einsum("...i,...i->...", y, eta)
    w_e = cross3(w, eta)
    x_e = cross3(x, eta)
    y_e = cross3(y, eta)
    # the vector c0^(k) eta + c1^(k) w×eta + c2^(k) w (w·eta) for k = 2, 3
    vec2 = _e(a2) * eta + _e(p2) * w_e + _e(q2 * we) * w
    vec3 = _e(a3) * eta + _e(p3) * w_e + _e(q3 * we) * w
    dqx = x * _e(we) + w * _e(xe)  # d/dw [w (w·eta)] along x
    dqy = y * _e(we) + w * _e(ye)
    kw = (_e(8.0 * wx * wy) * vec3 + _e(4.0 * xy) * vec2
          + _e(4.0 * p2) * (_e(wx) * y_e + _e(wy) * x_e)
          + _e(4.0 * q2) * (_e(wx) * dqy + _e(wy) * dqx)
          + _e(2.0 * q1) * (x * _e(ye) + y * _e(xe)))
    kx = _e(4.0 * wy) * vec2 + _e(2.0 * p1) * y_e + _e(2.0 * q1) * dqy
    ky = _e(4.0 * wx) * vec2 + _e(2.0 * p1) * x_e + _e(2.0 * q1) * dqx
    kxy = 4.0 * q2 * wx * wy + 2.0 * q1 * xy
    ke = _e(kxy) * w + _e(2.0 * q1) * (_e(wx) * y + _e(wy) * x)
    T = _outer(kw, w) + _outer(kx, x) + _outer(ky, y) + _outer(ke, eta)
    diag = kxy * we + 2.0 * q1 * (wx * ye + wy * xe)
    T[..., 0, 0] += diag
    T[..., 1, 1] += diag
    T[..., 2, 2] += diag
    T -= _e(_e(4.0 * p2 * wx * wy + 2.0 * p1 * xy)) * hat3(eta)
    return T
