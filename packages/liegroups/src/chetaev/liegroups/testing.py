"""Reusable conformance checks for groups and retractions (public, for tests).

Every ``check_*`` function takes a group (or a retraction), a ``numpy.random.Generator``, a
batch shape and a sampling mode, draws its inputs, and raises ``AssertionError`` with a
descriptive message when a property fails (NaN always fails).  Packages that add a group or a
retraction run it through these checks; ``chetaev-liegroups``' own tests parametrize them over
every group x retraction x batch shape {(), (1,), (3, 1, 2)} x sampling mode, with hypothesis
drawing the seeds.

Sampling modes (:data:`MODES`): ``"random"`` (Haar-random elements, their logarithms),
``"algebra"`` (algebra vectors of scale 0.5 and their images), ``"near_identity"`` (scale 1e-7,
exercising the small-angle series branches).

Only numpy is needed to import this module; :func:`check_exp_matches_expm` and
:func:`check_Ad_exp` use scipy (a test dependency).
"""

from __future__ import annotations

import numpy as np

from ._base import MatrixLieGroup
from ._product import ProductGroup
from ._retractions import Retraction

__all__ = [
    "BATCHES",
    "BATCH_ROUNDING_C",
    "CHECKS_GROUP",
    "CHECKS_RETRACTION",
    "MODES",
    "all_groups",
    "all_retractions",
    "assert_batch_close",
    "assert_close",
    "central_differences",
    "check_Ad_exp",
    "check_Ad_homomorphism",
    "check_batched_equals_looped",
    "check_derivative_terms",
    "check_exp_log_roundtrip",
    "check_exp_matches_expm",
    "check_group_axioms",
    "check_hat_vee",
    "check_retraction_basic",
    "check_second_derivatives",
    "check_tangent_identities",
    "check_tangents_fd",
    "sample_algebra",
    "sample_elements",
]

MODES = ("random", "algebra", "near_identity")
#: batch shapes every property is run with
BATCHES = ((), (1,), (3, 1, 2))


def all_groups() -> list[MatrixLieGroup]:
    """One instance of every group kind of the package (products included)."""
    from ._product import Product
    from ._rn import Rn
    from ._se2 import SE2
    from ._se3 import SE3
    from ._so2 import SO2
    from ._so3 import SO3

    return [SO2, SO3, SE2, SE3, Rn(3), Product(SO3, Rn(2)), Product(SE2, SO2, SE3)]


def all_retractions() -> list[Retraction]:
    """exp and Cayley on every group of :func:`all_groups`."""
    from ._retractions import retraction

    return [retraction(G, k) for G in all_groups() for k in ("exp", "cayley")]
_FD_STEP = 1e-6


# The ``measured:`` comments on the checks below (issue 14): the worst |actual − desired| of
# that check, the group/retraction where it occurred, that error in units of
# eps·max(1, |actual|, |desired|), and its ratio to the check's atol + rtol·|desired|, over
# every group/retraction of all_groups()/all_retractions() x BATCHES x MODES x seeds 0..4
# (OPENBLAS_NUM_THREADS=1) and seed 100 (unset); margin = 1/ratio. Identities hold to
# round-off (<= 38 eps·max here) and finite differences (step 1e-6) to ~1e-9, so every
# bound leaves a margin of at least 9.
def assert_close(actual, desired, atol: float, rtol: float = 0.0, what: str = "") -> None:
    """``|actual - desired| <= atol + rtol |desired|`` elementwise; fails on NaN/inf and on shape
    mismatch."""
    actual = np.asarray(actual, dtype=np.float64)
    desired = np.asarray(desired, dtype=np.float64)
    assert actual.shape == desired.shape, f"{what}: shape {actual.shape} != {desired.shape}"
    assert np.all(np.isfinite(actual)), f"{what}: non-finite values in result"
    err = np.abs(actual - desired)
    bound = atol + rtol * np.abs(desired)
    if not np.all(err <= bound):
        i = np.unravel_index(np.argmax(err - bound), err.shape)
        raise AssertionError(
            f"{what}: max violation at {i}: |{actual[i]!r} - {desired[i]!r}| = {err[i]:.3e} "
            f"> {bound[i]:.3e} (atol={atol:g}, rtol={rtol:g}); max error {err.max():.3e}"
        )


def _factors(G: MatrixLieGroup):
    return G.factors if isinstance(G, ProductGroup) else (G,)


# ---------------------------------------------------------------------------- sampling
def sample_algebra(G: MatrixLieGroup, rng, batch=(), mode: str = "random") -> np.ndarray:
    """Algebra coordinates ``(*batch, G.dim)``: log of Haar-random elements (``random``; rotation
    parts have angle < pi), normal of scale 0.5 (``algebra``) or 1e-7 (``near_identity``)."""
    batch = tuple(batch)
    if mode == "random":
        parts = [f.log(f.random(rng, batch)) for f in _factors(G)]
        return np.concatenate(parts, axis=-1)
    scale = {"algebra": 0.5, "near_identity": 1e-7}[mode]
    return scale * rng.normal(size=(*batch, G.dim))


def sample_elements(G: MatrixLieGroup, rng, batch=(), mode: str = "random") -> np.ndarray:
    """Elements ``(*batch, *G.shape)``: Haar-random, exp of a scale-0.5 algebra vector, or exp of
    a scale-1e-7 one."""
    if mode == "random":
        return G.random(rng, tuple(batch))
    return G.exp(sample_algebra(G, rng, batch, mode))


def central_differences(f, xi, step: float = _FD_STEP) -> np.ndarray:
    """Central differences of ``f`` along each coordinate of ``xi`` (the last axis, length d).

    ``(f(xi + step e_k) - f(xi - step e_k)) / (2 step)`` stacked on a new last axis: shape
    ``(..., *f.shape, d)``. Truncation error O(step^2) times the third derivative, cancellation
    about eps |f| / step (about 2e-10 for O(1) values at the default step 1e-6).
    """
    d = xi.shape[-1]
    cols = []
    for k in range(d):
        e = np.zeros(d)
        e[k] = step
        cols.append((f(xi + e) - f(xi - e)) / (2.0 * step))
    return np.stack(cols, axis=-1)


def _mv(A, x):
    return np.einsum("...ij,...j->...i", A, x)


# ---------------------------------------------------------------------------- group checks
def check_hat_vee(G: MatrixLieGroup, rng, batch=(), mode="random") -> None:
    """``vee(hat(xi)) = xi``; hat is linear; ``generators()`` has shape (dim, n, n)."""
    xi = sample_algebra(G, rng, batch, mode)
    eta = sample_algebra(G, rng, batch, mode)
    X = G.hat(xi)
    assert X.shape == (*tuple(batch), G.matrix_dim, G.matrix_dim), f"{G}.hat shape {X.shape}"
    # measured: exactly 0 over the sample (exact by construction)
    assert_close(G.vee(X), xi, 1e-15, 1e-15, f"{G}: vee(hat(xi)) = xi")
    # measured: exactly 0 over the sample (exact by construction)
    assert_close(G.hat(xi + 2.0 * eta), X + 2.0 * G.hat(eta), 1e-14, 1e-14, f"{G}: hat linear")
    assert G.generators().shape == (G.dim, G.matrix_dim, G.matrix_dim)


def check_group_axioms(G: MatrixLieGroup, rng, batch=(), mode="random") -> None:
    """Closure, identity, inverse, associativity; membership of every result."""
    g, h, k = (sample_elements(G, rng, batch, mode) for _ in range(3))
    e = G.identity(batch)
    assert e.shape == (*tuple(batch), *G.shape)
    tol = 1e-12
    for name, x in [("g", g), ("e", e), ("gh", G.compose(g, h)), ("g^-1", G.inverse(g))]:
        assert np.all(G.is_element(x, 1e-10)), f"{G}: {name} is not a group element"
    M = G.as_matrix
    # measured: exactly 0 over the sample (exact by construction)
    assert_close(M(G.compose(g, e)), M(g), tol, 0, f"{G}: g e = g")
    # measured: exactly 0 over the sample (exact by construction)
    assert_close(M(G.compose(e, g)), M(g), tol, 0, f"{G}: e g = g")
    # measured: worst 1.3e-15 (SE3, 6 eps·max), 0.00013 of bound: margin 7506 (round-off)
    assert_close(M(G.compose(g, G.inverse(g))), M(e), tol * 10, 0, f"{G}: g g^-1 = e")
    # measured: worst 1.1e-15 (SO3, 5 eps·max), 0.00011 of bound: margin 9007 (round-off)
    assert_close(M(G.compose(G.inverse(g), g)), M(e), tol * 10, 0, f"{G}: g^-1 g = e")
    # measured: worst 8.9e-16 (SE2, 1 eps·max), 8.9e-05 of bound: margin 11259 (round-off)
    assert_close(M(G.compose(G.compose(g, h), k)), M(G.compose(g, G.compose(h, k))), 1e-11, 0,
                 f"{G}: (gh)k = g(hk)")
    # measured: exactly 0 over the sample (exact by construction)
    assert_close(M(G.compose(g, h)), M(g) @ M(h), 1e-12, 0, f"{G}: compose = matrix product")
    # measured: worst 1.1e-15 (SO3, 5 eps·max), 1.1e-05 of bound: margin 90072 (round-off)
    assert_close(M(G.inverse(g)), np.linalg.inv(M(g)), 1e-10, 0, f"{G}: inverse = matrix inv")


def check_exp_log_roundtrip(G: MatrixLieGroup, rng, batch=(), mode="random") -> None:
    """``exp(log(g)) = g`` and ``log(exp(xi)) = xi`` (rotation angles < pi)."""
    g = sample_elements(G, rng, batch, mode)
    # measured: worst 1.1e-15 (SO3, 5 eps·max), 0.0011 of bound: margin 901 (round-off)
    assert_close(G.as_matrix(G.exp(G.log(g))), G.as_matrix(g), 1e-12, 0, f"{G}: exp(log g) = g")
    xi = sample_algebra(G, rng, batch, mode)
    # measured: worst 1.6e-15 (SE3, 2 eps·max), 0.0014 of bound: margin 707 (round-off)
    assert_close(G.log(G.exp(xi)), xi, 1e-12, 1e-12, f"{G}: log(exp xi) = xi")
    assert np.all(G.is_element(G.exp(xi))), f"{G}: exp(xi) not an element"


def check_Ad_homomorphism(G: MatrixLieGroup, rng, batch=(), mode="random") -> None:
    """``Ad(gh) = Ad(g) Ad(h)``, ``hat(Ad(g) xi) = g hat(xi) g^{-1}``, ``Ad_star = Ad^T``,
    ``ad(xi) eta = hat^{-1}[hat xi, hat eta]``, ``ad_star = ad^T``."""
    g, h = (sample_elements(G, rng, batch, mode) for _ in range(2))
    xi, eta = (sample_algebra(G, rng, batch, mode) for _ in range(2))
    # measured: worst 1.3e-15 (SE3, 2 eps·max), 0.00013 of bound: margin 7506 (round-off)
    assert_close(G.Ad(G.compose(g, h)), G.Ad(g) @ G.Ad(h), 1e-11, 0, f"{G}: Ad(gh) = Ad g Ad h")
    M = G.as_matrix(g)
    # measured: worst 2.7e-15 (SE2xSO2xSE3, 2 eps·max), 0.00012 of bound: margin 8569 (round-off)
    assert_close(G.hat(_mv(G.Ad(g), xi)), M @ G.hat(xi) @ np.linalg.inv(M), 1e-11, 1e-11,
                 f"{G}: hat(Ad(g) xi) = g hat(xi) g^-1")
    # measured: exactly 0 over the sample (exact by construction)
    assert_close(G.Ad_star(g), np.swapaxes(G.Ad(g), -1, -2), 0, 0, f"{G}: Ad_star = Ad^T")
    X, Y = G.hat(xi), G.hat(eta)
    # measured: worst 1.8e-15 (SE2xSO2xSE3, 1 eps·max), 0.021 of bound: margin 48 (round-off)
    assert_close(G.hat(_mv(G.ad(xi), eta)), X @ Y - Y @ X, 1e-14, 1e-13, f"{G}: ad = bracket")
    # measured: exactly 0 over the sample (exact by construction)
    assert_close(G.bracket(xi, eta), _mv(G.ad(xi), eta), 1e-15, 1e-14, f"{G}: bracket")
    # measured: exactly 0 over the sample (exact by construction)
    assert_close(G.ad_star(xi), np.swapaxes(G.ad(xi), -1, -2), 0, 0, f"{G}: ad_star = ad^T")


def check_Ad_exp(G: MatrixLieGroup, rng, batch=(), mode="random") -> None:
    """``Ad(exp xi) = expm(ad xi)`` (scipy)."""
    from scipy.linalg import expm

    xi = sample_algebra(G, rng, batch, mode)
    # measured: worst 2.8e-14 (SE2xSO2xSE3, 38 eps·max), 0.026 of bound: margin 39 (round-off)
    assert_close(G.Ad(G.exp(xi)), expm(G.ad(xi)), 1e-12, 1e-12, f"{G}: Ad(exp xi) = expm(ad xi)")


def check_exp_matches_expm(G: MatrixLieGroup, rng, batch=(), mode="random") -> None:
    """``as_matrix(exp(xi)) = scipy.linalg.expm(hat(xi))``."""
    from scipy.linalg import expm

    xi = sample_algebra(G, rng, batch, mode)
    # measured: worst 3.6e-15 (SE3, 12 eps·max), 0.016 of bound: margin 64 (round-off)
    assert_close(G.as_matrix(G.exp(xi)), expm(G.hat(xi)), 1e-13, 1e-13, f"{G}: exp = expm(hat)")


# ---------------------------------------------------------------------------- retraction checks
def _tau_sample(tau: Retraction, rng, batch, mode):
    xi = sample_algebra(tau.group, rng, batch, mode)
    if tau.kind == "cayley" and mode == "random":
        xi = 0.6 * xi  # stay away from rotations by pi, where cay^{-1} is singular
    return xi


def check_retraction_basic(tau: Retraction, rng, batch=(), mode="random") -> None:
    """``tau(xi)`` is an element, ``tau(0) = e``, ``tau(-xi) = tau(xi)^{-1}``,
    ``tau.inv(tau(xi)) = xi``; for Cayley also the matrix formula (I - X/2)^{-1}(I + X/2)."""
    G = tau.group
    xi = _tau_sample(tau, rng, batch, mode)
    g = tau(xi)
    assert g.shape == (*tuple(batch), *G.shape), f"{tau}: output shape {g.shape}"
    assert np.all(G.is_element(g, 1e-12)), f"{tau}: tau(xi) not an element"
    M = G.as_matrix
    # measured: exactly 0 over the sample (exact by construction)
    assert_close(M(tau(np.zeros(G.dim))), M(G.identity()), 0, 0, f"{tau}: tau(0) = e")
    # measured: worst 1.4e-15 (SE3 exp, 4 eps·max), 0.013 of bound: margin 75 (round-off)
    assert_close(M(tau(-xi)), M(G.inverse(g)), 1e-13, 1e-13, f"{tau}: tau(-xi) = tau(xi)^-1")
    # measured: worst 1.3e-15 (SE3 exp, 2 eps·max), 0.00056 of bound: margin 1781 (round-off)
    assert_close(tau.inv(g), xi, 1e-12, 1e-12, f"{tau}: tau^-1(tau(xi)) = xi")
    h = sample_elements(G, rng, batch, "algebra" if mode == "random" else mode)
    # measured: worst 5.6e-16 (SE3 exp, 2 eps·max), 0.00056 of bound: margin 1801 (round-off)
    assert_close(M(tau(tau.inv(h))), M(h), 1e-12, 0, f"{tau}: tau(tau^-1(g)) = g")
    if tau.kind == "cayley":
        X = G.hat(xi)
        eye = np.eye(G.matrix_dim)
        ref = np.linalg.solve(eye - 0.5 * X, eye + 0.5 * X)
        # measured: worst 3.3e-16 (SO3xR2 cayley, 2 eps·max), 0.0026 of bound: margin 392
        assert_close(M(g), ref, 1e-13, 1e-13, f"{tau}: cay = (I - X/2)^-1 (I + X/2)")


def check_tangents_fd(tau: Retraction, rng, batch=(), mode="random") -> None:
    """dL, dR against central differences of tau (h = 1e-6, tolerance 1e-8):
    ``d/deps tau(xi + eps d) = tau(xi) hat(dL d) = hat(dR d) tau(xi)``."""
    G = tau.group
    xi = _tau_sample(tau, rng, batch, mode)
    M = G.as_matrix(tau(xi))
    Mi = np.linalg.inv(M)
    dM = central_differences(lambda x: G.as_matrix(tau(x)), xi)  # (..., n, n, d)
    dM = np.moveaxis(dM, -1, -3)  # (..., d, n, n)
    dL_fd = np.swapaxes(G.vee(Mi[..., None, :, :] @ dM), -1, -2)
    dR_fd = np.swapaxes(G.vee(dM @ Mi[..., None, :, :]), -1, -2)
    # measured: worst 5.9e-10 (SE3 exp, 2142090 eps·max), 0.04 of bound: margin 25 (FD)
    assert_close(tau.dL(xi), dL_fd, 1e-8, 1e-8, f"{tau}: dL vs finite differences")
    # measured: worst 7.9e-10 (SE2xSO2xSE3 exp, 2453200 eps·max), 0.075 of bound: margin 13 (FD)
    assert_close(tau.dR(xi), dR_fd, 1e-8, 1e-8, f"{tau}: dR vs finite differences")


def check_tangent_identities(tau: Retraction, rng, batch=(), mode="random") -> None:
    """``dR = Ad(tau(xi)) dL``, ``dR(xi) = dL(-xi)``, ``dL_inv dL = I``, ``dR_inv dR = I``,
    ``dL_inv(-xi) = dL_inv(xi) Ad(tau(xi))^{-1}``; exp: dL = sum_k (-ad xi)^k/(k+1)!
    (reference summed to convergence)."""
    G = tau.group
    xi = _tau_sample(tau, rng, batch, mode)
    g = tau(xi)
    I = np.broadcast_to(np.eye(G.dim), (*tuple(batch), G.dim, G.dim))
    dL, dR = tau.dL(xi), tau.dR(xi)
    # measured: worst 1.3e-15 (SE3 exp, 5 eps·max), 0.0098 of bound: margin 102 (round-off)
    assert_close(dR, G.Ad(g) @ dL, 1e-13, 1e-13, f"{tau}: dR = Ad(tau) dL")
    # measured: exactly 0 over the sample (exact by construction)
    assert_close(dR, tau.dL(-xi), 1e-14, 1e-14, f"{tau}: dR(xi) = dL(-xi)")
    # measured: worst 6.4e-16 (SE3 exp, 3 eps·max), 0.0064 of bound: margin 156 (round-off)
    assert_close(tau.dL_inv(xi) @ dL, I, 1e-13, 0, f"{tau}: dL_inv dL = I")
    # measured: worst 6.0e-16 (SE3 exp, 3 eps·max), 0.006 of bound: margin 168 (round-off)
    assert_close(dL @ tau.dL_inv(xi), I, 1e-13, 0, f"{tau}: dL dL_inv = I")
    # measured: worst 6.2e-16 (SE3 exp, 3 eps·max), 0.0062 of bound: margin 160 (round-off)
    assert_close(tau.dR_inv(xi) @ dR, I, 1e-13, 0, f"{tau}: dR_inv dR = I")
    # measured: worst 3.6e-15 (SE2xSO2xSE3 exp, 8 eps·max), 0.0012 of bound: margin 843 (round-off)
    assert_close(tau.dL_inv(-xi), tau.dL_inv(xi) @ np.linalg.inv(G.Ad(g)), 1e-12, 1e-12,
                 f"{tau}: dL_inv(-xi) = dL_inv(xi) Ad(tau(xi))^-1")
    if tau.kind == "exp":
        A = -G.ad(xi)
        term = I.copy()
        ref = I.copy()
        for k in range(1, 80):
            term = term @ A / (k + 1)
            ref = ref + term
        # measured: worst 8.9e-16 (SE3 exp, 3 eps·max), 0.004 of bound: margin 250
        assert_close(dL, ref, 1e-13, 1e-13, f"{tau}: dL = sum (-ad)^k/(k+1)!")


_DERIV_NAMES = ("dL", "dR", "dL_inv", "dR_inv")


def check_derivative_terms(tau: Retraction, rng, batch=(), mode="random") -> None:
    """``X_deriv(xi, eta)`` for X in dL, dR, dL_inv, dR_inv against central differences of
    ``xi -> X(xi) eta`` (tolerance 1e-8); the covector form ``X_deriv(xi, eta, mu) = J^T mu``;
    ``ddL = dL_inv dL_deriv`` and ``ddL_star = ddL^T pi``."""
    G = tau.group
    xi = _tau_sample(tau, rng, batch, mode)
    eta = rng.normal(size=xi.shape)
    mu = rng.normal(size=xi.shape)
    for name in _DERIV_NAMES:
        D = getattr(tau, name)
        J = getattr(tau, name + "_deriv")(xi, eta)
        J_fd = central_differences(lambda x, D=D: _mv(D(x), eta), xi)
        # measured: worst 1.3e-09 (SE2xSO2xSE3 exp, 4255549 eps·max), 0.11 of bound: margin 9 (FD)
        assert_close(J, J_fd, 1e-8, 1e-8, f"{tau}: {name}_deriv vs finite differences")
        v = getattr(tau, name + "_deriv")(xi, eta, mu)
        # measured: exactly 0 over the sample (exact by construction)
        assert_close(v, np.einsum("...ij,...i->...j", J, mu), 1e-14, 1e-13,
                     f"{tau}: {name}_deriv(xi, eta, mu) = J^T mu")
    ddL = tau.ddL(xi, eta)
    # measured: worst 8.9e-16 (SE3 exp, 3 eps·max), 0.0024 of bound: margin 413 (round-off)
    assert_close(_mv(tau.dL(xi), _mv(ddL, mu)), _mv(tau.dL_deriv(xi, eta), mu), 1e-13, 1e-12,
                 f"{tau}: dL ddL = dL_deriv")
    # measured: exactly 0 over the sample (exact by construction)
    assert_close(tau.ddL_star(xi, eta, mu), np.einsum("...ij,...i->...j", ddL, mu), 1e-14,
                 1e-13, f"{tau}: ddL_star = ddL^T pi")
    if tau.kind == "cayley":  # closed form of paper §6: ddL(eta, d) = ½ (eta A^-1 d - d B^-1 eta)
        X = G.hat(xi)
        eye = np.eye(G.matrix_dim)
        Ai, Bi = np.linalg.inv(eye - 0.5 * X), np.linalg.inv(eye + 0.5 * X)
        H, D = G.hat(eta), G.hat(mu)
        ref = G.vee(0.5 * (H @ Ai @ D - D @ Bi @ H))
        # measured: worst 1.1e-15 (SE2xSO2xSE3 cayley, 3 eps·max), 0.0031 of bound: margin 326
        assert_close(_mv(ddL, mu), ref, 1e-13, 1e-12, f"{tau}: ddL closed form (Cayley)")


def check_second_derivatives(tau: Retraction, rng, batch=(), mode="random") -> None:
    """``X_hess(xi, eta, u)`` for X in dL, dR, dL_inv, dR_inv against central differences of
    ``xi -> X_deriv(xi, eta) u`` (tolerance 1e-7), and the symmetry of the second derivative,
    ``X_hess(xi, eta, u) v = X_hess(xi, eta, v) u`` (tolerance 1e-11)."""
    xi = _tau_sample(tau, rng, batch, mode)
    eta, u, v = (rng.normal(size=xi.shape) for _ in range(3))
    for name in _DERIV_NAMES:
        deriv = getattr(tau, name + "_deriv")
        hess = getattr(tau, name + "_hess")
        H = hess(xi, eta, u)
        H_fd = central_differences(lambda x, deriv=deriv: _mv(deriv(x, eta), u), xi, step=1e-5)
        # measured: worst 7.5e-10 (SE3 exp, 2632612 eps·max), 0.004 of bound: margin 248 (FD)
        assert_close(H, H_fd, 1e-7, 1e-7, f"{tau}: {name}_hess vs finite differences")
        Hv, Hu = _mv(H, v), _mv(hess(xi, eta, v), u)
        # measured: worst 4.0e-15 (SE2xSO2xSE3 exp, 8 eps·max), 0.00027 of bound: margin 3676
        assert_close(Hv, Hu, 1e-11, 1e-11, f"{tau}: {name}_hess symmetric in its two directions")


#: Constant of the rounding bound of batched vs looped evaluation: the two differ only by the
#: order of floating-point operations, so |batched − looped| <= c·n·eps·max(|batched|,
#: |looped|) over the entries of one element, n the algebra dimension (Higham, *Accuracy and
#: Stability of Numerical Algorithms*, §3.1: the γ_n bound of an inner product). Norm-wise,
#: so entries that are small by cancellation are covered (an elementwise rtol is not a bound
#: there). Measured: the largest ratio |batched − looped| / (n·eps·max|·|) over every
#: retraction, map and sampling mode, seeds 0..99 (OPENBLAS_NUM_THREADS unset) and 0..29,
#: 100..159 (= 1), is 3.3 (SE(3) exp, dL_inv_deriv); c = 16 leaves a margin of about 5.
BATCH_ROUNDING_C = 16.0


def assert_batch_close(full, looped, n: int, what: str = "") -> None:
    """Assert ``|full − looped| <= BATCH_ROUNDING_C · n · eps · max(|full|, |looped|)``."""
    a, b = np.asarray(full, dtype=float), np.asarray(looped, dtype=float)
    assert a.shape == b.shape, f"{what}: shape {a.shape} != {b.shape}"
    assert np.all(np.isfinite(a)) and np.all(np.isfinite(b)), f"{what}: non-finite values"
    scale = max(np.abs(a).max(initial=0.0), np.abs(b).max(initial=0.0))
    bound = BATCH_ROUNDING_C * n * np.finfo(float).eps * scale
    err = np.abs(a - b).max(initial=0.0)
    assert err <= bound, f"{what}: |batched - looped| = {err:.3e} > {bound:.3e}"


def check_batched_equals_looped(tau: Retraction, rng, batch=(3, 1, 2), mode="random") -> None:
    """Every map on a batch equals the same map applied element by element, to rounding
    (:func:`assert_batch_close`)."""
    G = tau.group
    xi = _tau_sample(tau, rng, batch, mode)
    eta = rng.normal(size=xi.shape)
    g = G.exp(xi)
    funcs = {
        "tau": lambda x, e: tau(x),
        "dL": lambda x, e: tau.dL(x),
        "dR_inv": lambda x, e: tau.dR_inv(x),
        "dL_inv_deriv": lambda x, e: tau.dL_inv_deriv(x, e),
        "dL_deriv": lambda x, e: tau.dL_deriv(x, e),
        "exp": lambda x, e: G.exp(x),
        "ad": lambda x, e: G.ad(x),
    }
    for name, f in funcs.items():
        full = f(xi, eta)
        for idx in np.ndindex(*batch):
            assert_batch_close(full[idx], f(xi[idx], eta[idx]), G.dim,
                               f"{tau}: batched {name} != looped at {idx}")
    full = G.log(g)
    for idx in np.ndindex(*batch):
        assert_batch_close(full[idx], G.log(g[idx]), G.dim, f"{G}: batched log != looped")
    full = G.Ad(g)
    for idx in np.ndindex(*batch):
        assert_batch_close(full[idx], G.Ad(g[idx]), G.dim, f"{G}: batched Ad != looped")


CHECKS_GROUP = (
    check_hat_vee,
    check_group_axioms,
    check_exp_log_roundtrip,
    check_Ad_homomorphism,
    check_Ad_exp,
    check_exp_matches_expm,
)
CHECKS_RETRACTION = (
    check_retraction_basic,
    check_tangents_fd,
    check_tangent_identities,
    check_derivative_terms,
    check_second_derivatives,
)
