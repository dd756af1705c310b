"""The problem every solver works on: min_w J(w) = lam·Ω(w) + R(w).

A :class:`Problem` holds

* the risk R behind a :class:`CountingOracle`, the one place that counts oracle calls
  (``nfev``), passes over X (``n_passes``: a product X w or Xᵀ g each) and the seconds they
  took, whichever solver makes the calls (the approach of scipy.optimize's
  ``ScalarFunction``);
* the regularizer Ω (:mod:`bmrm.solver.regularizers`), which answers the solvers'
  questions through its own methods (its value, projection, slope along a direction,
  whether the L2 QP master applies, its final clean-up such as L1's exact zeros);
* ``lam``;
* the risk's declared :class:`Capabilities`, read once from the oracle and its loss, so
  that no solver probes optional attributes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from bmrm.solver.cut_cache import supports_cut_cache
from bmrm.solver.regularizers import Regularizer

__all__ = [
    "Capabilities",
    "CountedProducts",
    "CountingOracle",
    "Counts",
    "Problem",
    "capabilities",
]


@dataclass(frozen=True)
class Capabilities:
    """What the risk offers and promises, declared by its loss and oracle.

    Parameters
    ----------
    convex : bool
        R is convex: every cutting plane is a minorant, and a certified gap is possible.
    latent : bool
        The loss is a difference of convex functions with a latent part (``loss.latent``,
        ``convexify``): the concave-convex procedure trains it (:mod:`bmrm.solver.cccp`).
    smooth : bool
        R is differentiable (``loss.smooth``).
    on_scores : bool
        The oracle evaluates at given scores f = Xw (``scores``, ``risk_at``, ``cut_at``,
        ``last_gradient``): a line search costs one product X w and loss evaluations.
    per_query : bool
        The oracle offers per-query cuts that a cut cache can keep
        (:func:`bmrm.solver.cut_cache.supports_cut_cache`).
    exact : bool
        The loss is one of the package's own (exact, tested): the one-off probes of a
        user's subgradient are skipped.
    has_hessp : bool
        The oracle offers Hessian-vector products of the risk, ``oracle.hessp(w, v)`` and
        ``oracle.hessian(f)`` (from the loss's ``hessp`` on the scores), for second-order
        solvers.
    dtype : numpy dtype
        The precision of the oracle's products (float32 data rounds more).
    latent_reuse : bool
        For a latent risk: its evaluation at w is, value for value, the first evaluation of
        its surrogate fixed at w (``oracle.latent_call_is_surrogate_call``), which the
        concave-convex procedure then does not repeat.
    scale_invariant : bool
        R(t w) = R(w) for t > 0 (the cosine loss with the linear ranking function):
        lam·½‖w‖² + R(w) has no minimiser (:func:`bmrm.solver.choice.make_problem`).
    """

    convex: bool = True
    latent: bool = False
    smooth: bool = False
    on_scores: bool = False
    per_query: bool = False
    exact: bool = False
    has_hessp: bool = False
    dtype: np.dtype = np.dtype(np.float64)
    latent_reuse: bool = False
    scale_invariant: bool = False


def capabilities(oracle) -> Capabilities:
    """The :class:`Capabilities` of a risk oracle, read from the oracle and its loss.

    The package's :class:`~bmrm.solver.oracle.RiskOracle` and Dask oracle declare them
    through their loss; an oracle with a ``capabilities`` attribute (a :class:`Capabilities`,
    such as the risk of a non-linear ranking function) declares them itself; a plain callable
    ``oracle(w) -> (R, a)`` is a convex risk with nothing more.

    Parameters
    ----------
    oracle : callable
        The risk oracle.

    Returns
    -------
    Capabilities
        What the risk offers and promises.
    """
    declared = getattr(oracle, "capabilities", None)
    if isinstance(declared, Capabilities):
        return declared
    loss = getattr(oracle, "loss", None)
    convex_surrogate = bool(getattr(oracle, "convex_surrogate", False))
    return Capabilities(
        convex=bool(getattr(loss, "convex", True)) or convex_surrogate,
        latent=bool(getattr(loss, "latent", False)) and not convex_surrogate,
        smooth=bool(getattr(loss, "smooth", False)),
        on_scores=all(hasattr(oracle, name) for name in ("scores", "risk_at", "cut_at")),
        per_query=supports_cut_cache(oracle) is None,
        exact=loss is not None and type(loss).__module__.split(".")[0] == "losses",
        # the oracle's product needs the loss's own (loss.hessp on the scores)
        has_hessp=callable(getattr(oracle, "hessp", None))
        and (loss is None or callable(getattr(loss, "hessp", None))),
        dtype=np.dtype(getattr(oracle, "dtype", np.float64)),
        latent_reuse=bool(getattr(oracle, "latent_call_is_surrogate_call", False)),
    )


@dataclass
class Counts:
    """The bookkeeping of the oracle calls of one fit (:class:`CountingOracle`).

    Parameters
    ----------
    nfev : int
        Risk evaluations, with or without a subgradient.
    n_passes : int
        Products with X (X w or Xᵀ g).
    nhev : int
        Hessian-vector products.
    seconds : float
        Wall-clock seconds inside the oracle.
    """

    nfev: int = 0
    n_passes: int = 0
    nhev: int = 0
    seconds: float = 0.0


class CountingOracle:
    """A risk oracle with its bookkeeping: every evaluation goes through here.

    ``nfev`` counts risk evaluations (with or without a subgradient), ``n_passes`` the
    products with X (a full call ``oracle(w)`` makes two, X w and Xᵀ g; ``scores`` one;
    ``cut_at`` one; ``risk_at`` none; a Hessian-vector product one or two), ``nhev``
    Hessian-vector products and ``seconds`` the wall-clock time inside the oracle. Other
    attributes are the wrapped oracle's.

    Parameters
    ----------
    oracle : callable
        The risk oracle, ``oracle(w) -> (R, a)``.
    counts : Counts or None
        Counts shared with other oracles of the same fit (the concave-convex procedure's
        surrogates count into the latent risk's counts, :meth:`sharing`); new ones when
        None.
    """

    def __init__(self, oracle, counts: Counts | None = None):
        self.inner = oracle
        self.counts = Counts() if counts is None else counts
        self._primed = None

    def sharing(self, oracle) -> CountingOracle:
        """A counting oracle for ``oracle`` whose calls count into these counts.

        Parameters
        ----------
        oracle : callable
            Another risk oracle of the same fit.

        Returns
        -------
        CountingOracle
            The counting oracle of ``oracle``, sharing these counts.
        """
        return CountingOracle(oracle, self.counts)

    def prime(self, w: np.ndarray, R: float, a: np.ndarray) -> None:
        """Answer the next call, if it is at ``w``, with an evaluation made already.

        The same computation made by another oracle (:mod:`bmrm.solver.cccp`) is handed on
        uncounted.

        Parameters
        ----------
        w : ndarray
            The point of the evaluation.
        R : float
            The risk at ``w``.
        a : ndarray
            Its subgradient at ``w``.
        """
        self._primed = (w, R, a)

    @property
    def nfev(self) -> int:
        """Risk evaluations (:class:`Counts`)."""
        return self.counts.nfev

    @property
    def n_passes(self) -> int:
        """Products with X (:class:`Counts`)."""
        return self.counts.n_passes

    @property
    def nhev(self) -> int:
        """Hessian-vector products (:class:`Counts`)."""
        return self.counts.nhev

    @property
    def seconds(self) -> float:
        """Seconds inside the oracle (:class:`Counts`)."""
        return self.counts.seconds

    def _timed(self, function, args, nfev: int, passes: int):
        counts = self.counts
        t0 = time.perf_counter()
        try:
            return function(*args)
        finally:
            counts.seconds += time.perf_counter() - t0
            counts.nfev += nfev
            counts.n_passes += passes

    def __call__(self, w: np.ndarray):
        """``(R(w), a)``, a a subgradient of R at w."""
        primed, self._primed = self._primed, None
        if primed is not None and np.array_equal(primed[0], w):
            return primed[1], primed[2].copy()
        return self._timed(self.inner, (w,), 1, 2)

    def scores(self, w: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """The scores f = X w (one pass; not an evaluation of R).

        Parameters
        ----------
        w : ndarray
            The weights.
        out : ndarray or None
            Where to write f.

        Returns
        -------
        ndarray
            The scores f, one per row of X.
        """
        return self._timed(self.inner.scores, (w, out), 0, 1)

    def risk_at(self, f: np.ndarray):
        """The risk and g = ∂R/∂f at the scores f (no pass over X).

        Parameters
        ----------
        f : ndarray
            The scores.

        Returns
        -------
        tuple
            ``(R, g)``.
        """
        return self._timed(self.inner.risk_at, (f,), 1, 0)

    def cut_at(self, f: np.ndarray):
        """The risk and its subgradient a = Xᵀ g at the scores f of a point (one pass).

        Parameters
        ----------
        f : ndarray
            The scores.

        Returns
        -------
        tuple
            ``(R, a)``.
        """
        return self._timed(self.inner.cut_at, (f,), 1, 1)

    def query_cut(self, w: np.ndarray, P: np.ndarray):
        """The per-query cut at w (two passes; :mod:`bmrm.solver.cut_cache`).

        Parameters
        ----------
        w : ndarray
            The weights.
        P : ndarray
            Receives each query's subgradient, one row per query.

        Returns
        -------
        tuple
            ``(R, a, r)``: the risk, its subgradient and the per-query risks.
        """
        return self._timed(self.inner.query_cut, (w, P), 1, 2)

    def query_cut_at(self, f: np.ndarray, P: np.ndarray):
        """The per-query cut at the scores f of a point (one pass).

        Parameters
        ----------
        f : ndarray
            The scores.
        P : ndarray
            Receives each query's subgradient, one row per query.

        Returns
        -------
        tuple
            ``(R, a, r)``: the risk, its subgradient and the per-query risks.
        """
        return self._timed(self.inner.query_cut_at, (f, P), 1, 1)

    def hessian(self, f: np.ndarray) -> CountedProducts:
        """The Hessian-vector products at the scores f, each product counted.

        The oracle's ``hessian``, its products counted in ``nhev``, ``n_passes`` (one or two,
        as the products say) and ``seconds``; only where ``has_hessp`` is declared.

        Parameters
        ----------
        f : ndarray
            The scores.

        Returns
        -------
        CountedProducts
            The oracle's products at ``f``, counted.
        """
        return CountedProducts(self, self._timed(self.inner.hessian, (f,), 0, 0))

    def hessp(self, w: np.ndarray, v: np.ndarray) -> np.ndarray:
        """The product ∇²R(w) v: the scores X w (one pass) and one product at them.

        Parameters
        ----------
        w : ndarray
            The point.
        v : ndarray
            The vector.

        Returns
        -------
        ndarray
            The product ∇²R(w) v.
        """
        return self.hessian(self.scores(w))(v)

    def __getattr__(self, name: str):
        if name in ("inner", "counts", "_primed"):  # not set yet (a copy being made): no recursion
            raise AttributeError(name)
        return getattr(self.inner, name)


class CountedProducts:
    """Hessian-vector products whose calls a :class:`CountingOracle` counts.

    Each call of the :class:`bmrm.solver.hessian.HessianProducts` adds to ``nhev``, the
    passes over X and the seconds.

    Parameters
    ----------
    counting : CountingOracle
        The oracle whose counts the calls go to.
    products : HessianProducts
        The products.
    """

    def __init__(self, counting: CountingOracle, products):
        self.counting = counting
        self.products = products
        self.passes = products.passes

    def __call__(self, v: np.ndarray, xv: np.ndarray | None = None) -> np.ndarray:
        """Xᵀ H_R X v, with X v written into ``xv`` when given."""
        counts = self.counting.counts
        t0 = time.perf_counter()
        try:
            return self.products(v, xv)
        finally:
            counts.seconds += time.perf_counter() - t0
            counts.nhev += 1
            counts.n_passes += self.passes


@dataclass(eq=False)
class Problem:
    """The problem min_w lam·Ω(w) + R(w) over ``n_features`` weights (module docstring).

    Parameters
    ----------
    oracle : CountingOracle
        The risk R, counted.
    regularizer : Regularizer
        Ω.
    lam : float
        The regularization constant.
    n_features : int
        The length of w.
    capabilities : Capabilities
        The risk's.
    """

    oracle: CountingOracle
    regularizer: Regularizer
    lam: float
    n_features: int
    capabilities: Capabilities

    @classmethod
    def of(cls, oracle, regularizer: Regularizer, lam: float, n_features: int) -> Problem:
        """The problem of a risk oracle, its capabilities read once.

        Parameters
        ----------
        oracle : callable
            Any ``oracle(w) -> (R, a)`` (a :class:`CountingOracle` is used as it is).
        regularizer : Regularizer
            Ω.
        lam : float
            The regularization constant.
        n_features : int
            The length of w.

        Returns
        -------
        Problem
        """
        counting = oracle if isinstance(oracle, CountingOracle) else CountingOracle(oracle)
        return cls(counting, regularizer, lam, n_features, capabilities(counting.inner))

    @property
    def rounding(self) -> float:
        """How far values and planes may disagree by rounding alone, relative to 1 + |J|.

        1e-9 in float64, 100 ε for float32 products.
        """
        dtype = self.capabilities.dtype
        return max(1e-9, 100.0 * float(np.finfo(dtype).eps) if dtype.kind == "f" else 0.0)

    def objective(self, w: np.ndarray, R: float) -> float:
        """The objective J(w) = lam·Ω(w) + R, for the risk R at w.

        Parameters
        ----------
        w : ndarray
            The point.
        R : float
            The risk at w.

        Returns
        -------
        float
            J(w).
        """
        return self.lam * self.regularizer.value(w) + R
