r"""Scorers: ranking functions f = h_θ(X) with their vector-Jacobian products.

A loss sees only the scores ``f`` (see :mod:`losses._base`); a scorer maps the data and its
parameters θ to those scores and maps ∂l/∂f back to ∂l/∂θ, so every loss works with every
scorer. A scorer has

``n_params(n_features) -> int``
    The length of the flat parameter vector θ.
``scores(X, theta) -> f``
    The scores used for ranking (float64, one per row).
``linearize(X, theta) -> (f, vjp)``
    The scores the training objective sees and ``vjp(g) = (∂f/∂θ)ᵀ g``, the map from
    ∂l/∂f to ∂l/∂θ at θ.

The built-in scorers also have a ``name``, ``get_params()`` and a class attribute
``version``: model files store the three (:mod:`bmrm.io.model_files`), and ``version`` goes
up whenever a change would give saved parameters other scores, so that a file is never
read with another definition than the one it was trained with.

:class:`LinearScorer` is f = Xw; :class:`ExpectedGainScorer` is the expected gain under a
multiclass logistic model of the relevance level (Yang, Ravikumar & Lease).
"""

from __future__ import annotations

import copy
import numbers

import numpy as np
import scipy.sparse as sp

from bmrm.solver import products as _products
from bmrm.solver import scorer_products as _eg
from losses.validation import check_graded_labels

# Most levels of the expected-gain scorer: its gains 2^j − 1 and their squares (in the
# gradient) stay within float64 for j <= 511.
MAX_LEVELS = 512

__all__ = ["ExpectedGainScorer", "LinearScorer", "get_scorer"]


def _own_products(X) -> bool:
    """Whether X goes through the oracle's numba products (dense, C-ordered, float)."""
    return (
        not sp.issparse(X)
        and X.ndim == 2
        and X.dtype in (np.float32, np.float64)
        and X.flags.c_contiguous
    )


def _matvec(X, w: np.ndarray) -> np.ndarray:
    """X w in float64, with the risk oracle's products for dense C-ordered X."""
    if _own_products(X):
        f = np.empty(X.shape[0])
        _products.matvec(X, np.ascontiguousarray(w, dtype=np.float64), f)
        return f
    return np.asarray(X @ w.astype(X.dtype, copy=False), dtype=np.float64).ravel()


def _rmatvec(X, g: np.ndarray) -> np.ndarray:
    """Xᵀ g in float64, with the risk oracle's products for dense C-ordered X."""
    if _own_products(X):
        out = np.empty(X.shape[1])
        _products.rmatvec(X, np.ascontiguousarray(g, dtype=np.float64), out)
        return out
    if sp.issparse(X):
        return np.asarray(X.T @ g.astype(X.dtype, copy=False), dtype=np.float64).ravel()
    return np.asarray(g.astype(X.dtype, copy=False) @ X, dtype=np.float64)


class LinearScorer:
    """The linear ranking function f = X w; its VJP is Xᵀ g, and θ = w.

    θ has one entry per feature. It uses the same products as
    :class:`bmrm.solver.oracle.RiskOracle` (numba kernels for dense C-ordered X, scipy for CSR),
    so it costs what the linear oracle costs.
    """

    name = "linear"
    version = 1

    def n_params(self, n_features: int) -> int:
        """The length of the flat parameter vector θ.

        Parameters
        ----------
        n_features : int
            The columns of X.

        Returns
        -------
        int
            The length of θ, ``n_features``.
        """
        return int(n_features)

    def scores(self, X, theta) -> np.ndarray:
        """The scores f = X w.

        Parameters
        ----------
        X : ndarray or CSR matrix of shape (n_samples, n_features)
            The data.
        theta : ndarray
            The parameters θ.

        Returns
        -------
        ndarray
            The scores, one per row of X.
        """
        return _matvec(X, np.asarray(theta, dtype=np.float64))

    def linearize(self, X, theta):
        """The scores the training objective sees and their vector-Jacobian product at θ.

        Parameters
        ----------
        X : ndarray or CSR matrix of shape (n_samples, n_features)
            The data.
        theta : ndarray
            The parameters θ.

        Returns
        -------
        tuple
            ``(f, vjp)``, ``vjp(g) = (∂f/∂θ)ᵀ g``.
        """
        f = self.scores(X, theta)
        return f, lambda g: _rmatvec(X, np.asarray(g, dtype=np.float64))

    def get_params(self, deep: bool = True) -> dict:
        """The parameters, as scikit-learn's ``get_params``.

        Parameters
        ----------
        deep : bool
            Unused (no nested parameters).

        Returns
        -------
        dict
            An empty dict.
        """
        return {}

    def set_params(self, **params) -> LinearScorer:
        """Refuse any parameter: the linear scorer has none.

        Parameters
        ----------
        **params
            Must be empty.

        Returns
        -------
        LinearScorer
            The scorer itself.
        """
        if params:
            raise ValueError(f"LinearScorer has no parameters; got {sorted(params)}")
        return self

    def __repr__(self) -> str:
        return "LinearScorer()"


class ExpectedGainScorer:
    r"""Expected gain under a multiclass logistic model of the relevance level.

    For K relevance levels 0..K−1 with gains G(j) and parameters W (K × d, θ its rows
    flattened), a document x scores

        h_W(x) = Σ_j G(j) P_W(r = j | x),   P_W(r = j | x) = exp(w_jᵀx) / Σ_l exp(w_lᵀx),

    the conditional expected gain that Proposition 1 of Yang, Ravikumar & Lease shows to
    be Bayes optimal for DCG-like measures, with P_W their multiclass logistic model
    (eq. (12)) and G(j) = 2^j − 1 the DCG gain (levels counted from 0, as LETOR labels are).

    Vector-Jacobian product: with z = W x and p = softmax(z), ∂h/∂z_j = p_j (G(j) − h), so

        ∂l/∂W = Bᵀ X,   B_ij = g_i p_ij (G(j) − h_i)

    for g = ∂l/∂f: O(n·K·d) for the scores and again for the VJP (serial numba loops for
    dense C-ordered X, see :mod:`bmrm.solver.scorer_products`; numpy/scipy otherwise).

    Clipping (the seed's ε, §6.2): when ``eps`` is set and a document's largest level
    probability exceeds ε, that probability is set to 1 and the others to 0, so the score is
    exactly G(j). :meth:`scores` (prediction) clips. Training by default does *not*: the
    objective then stays smooth and ``linearize`` returns its exact gradient. With
    ``clip_training=True`` training clips too, as the seed's gradient descent does: a
    clipped document's score is then constant in W, its VJP row is zero (the derivative of
    the clipped function wherever it is differentiable), and the objective jumps where a
    probability crosses ε, which quasi-Newton line searches do not expect. ε must lie in
    [0.5, 1] so that at most one probability exceeds it; ε = 1 never clips.

    Warm start (§6.2): :meth:`from_linear` maps a linear model's weights w to
    W_j = (j − (K − 1)/2) w. Then z_j = (j − (K−1)/2) wᵀx and the level distribution is
    stochastically increasing in s = wᵀx (its likelihood ratios exp(s) between adjacent
    levels increase with s), so h is strictly increasing in s: the warm start ranks every
    query exactly as the linear model does.

    Parameters
    ----------
    n_levels : int in [2, 512] or None
        K. ``None`` lets :func:`bmrm.fit` set it to the largest training label + 1. The
        training labels must lie in 0..K − 1; at most 512 levels, so that the gains
        2^j − 1 and their squares stay within float64.
    gain : {"exp", "linear"}
        G(j) = 2^j − 1 or G(j) = j.
    eps : float in [0.5, 1] or None
        The clipping threshold; ``None`` (or 1) never clips.
    clip_training : bool
        Clip during training too (see above).

    References
    ----------
    E. Yang, P. Ravikumar and M. Lease, "A new class of ranking functions for DCG-like
    evaluation metrics using conditional probability models" (2010), §4.1, §5.2, §6.2.
    """

    name = "expected_gain"
    version = 1

    def __init__(
        self,
        *,
        n_levels: int | None = None,
        gain: str = "exp",
        eps: float | None = None,
        clip_training: bool = False,
    ):
        if n_levels is not None and (
            isinstance(n_levels, bool) or not isinstance(n_levels, numbers.Integral)
            or not 2 <= n_levels <= MAX_LEVELS
        ):  # fmt: skip
            raise ValueError(
                f"n_levels must be an integer >= 2 and <= {MAX_LEVELS} or None; got {n_levels!r}"
            )
        if gain not in ("exp", "linear"):
            raise ValueError(f"gain must be 'exp' or 'linear'; got {gain!r}")
        if eps is not None and (
            isinstance(eps, bool) or not isinstance(eps, numbers.Real) or not 0.5 <= eps <= 1
        ):
            raise ValueError(f"eps must be a number in [0.5, 1] or None; got {eps!r}")
        if not isinstance(clip_training, bool):
            raise ValueError(f"clip_training must be a bool; got {clip_training!r}")
        self.n_levels = None if n_levels is None else int(n_levels)
        self.gain = gain
        self.eps = None if eps is None else float(eps)
        self.clip_training = clip_training

    def get_params(self, deep: bool = True) -> dict:
        """The parameters, as scikit-learn's ``get_params``.

        Parameters
        ----------
        deep : bool
            Unused (no nested parameters).

        Returns
        -------
        dict
            The parameters by name.
        """
        return {
            "n_levels": self.n_levels,
            "gain": self.gain,
            "eps": self.eps,
            "clip_training": self.clip_training,
        }

    def with_params(self, **params) -> ExpectedGainScorer:
        """A copy with ``params`` changed (for example ``eps`` chosen after training).

        Parameters
        ----------
        **params
            Any of ``n_levels``, ``gain``, ``eps``, ``clip_training``.

        Returns
        -------
        ExpectedGainScorer
            The copy.
        """
        unknown = sorted(set(params) - set(self.get_params()))
        if unknown:
            raise ValueError(
                f"ExpectedGainScorer has no parameter {unknown[0]!r}; its parameters are "
                f"{sorted(self.get_params())}"
            )
        return type(self)(**{**self.get_params(), **params})

    def set_params(self, **params) -> ExpectedGainScorer:
        """Change parameters in place (scikit-learn's protocol; :meth:`with_params` copies).

        Parameters
        ----------
        **params
            Any of ``n_levels``, ``gain``, ``eps``, ``clip_training``.

        Returns
        -------
        ExpectedGainScorer
            The scorer itself.
        """
        self.__dict__.update(self.with_params(**params).__dict__)
        return self

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"ExpectedGainScorer({params})"

    @property
    def gains(self) -> np.ndarray:
        """G(j) for j = 0..K−1."""
        j = np.arange(self._levels(), dtype=np.float64)
        return np.exp2(j) - 1.0 if self.gain == "exp" else j

    def check_labels(self, y) -> None:
        """Refuse training labels the scorer cannot represent, before any work.

        ``y`` must hold relevance levels 0..n_levels − 1 (0..511 when ``n_levels`` is None and
        :func:`bmrm.fit` sets it to the largest label + 1).

        Parameters
        ----------
        y : array-like
            The training labels.
        """
        levels = check_graded_labels(y)
        if not levels.size:
            return
        top = int(levels.max())
        if self.n_levels is None and top >= MAX_LEVELS:
            raise ValueError(
                f"y holds the relevance level {top}, but the expected-gain scorer has at most "
                f"n_levels={MAX_LEVELS} levels (0..{MAX_LEVELS - 1}: its gains and their "
                "squares must stay within float64)"
            )
        if self.n_levels is not None and top >= self.n_levels:
            raise ValueError(
                f"y holds the relevance level {top}, but the scorer's n_levels={self.n_levels} "
                f"covers the levels 0..{self.n_levels - 1}; give n_levels={top + 1} or None"
            )

    def _levels(self) -> int:
        if self.n_levels is None:
            raise ValueError("n_levels is not set: give n_levels or let bmrm.fit set it")
        return self.n_levels

    def n_params(self, n_features: int) -> int:
        """The length of the flat parameter vector θ.

        Parameters
        ----------
        n_features : int
            The columns of X.

        Returns
        -------
        int
            The length of θ.
        """
        return self._levels() * int(n_features)

    def _weights(self, X, theta) -> np.ndarray:
        K, d = self._levels(), X.shape[1]
        theta = np.asarray(theta, dtype=np.float64)
        if theta.shape != (K * d,):
            raise ValueError(f"theta must have K·d = {K}·{d} = {K * d} entries; got {theta.shape}")
        return theta.reshape(K, d)

    def _forward(self, X, theta, clip: bool):
        """(P, h): level probabilities (n × K, clipped when ``clip`` and ``eps`` is set)."""
        W = self._weights(X, theta)
        G = self.gains
        if _own_products(X):
            P = np.empty((X.shape[0], W.shape[0]))
            h = np.empty(X.shape[0])
            _eg.softmax_gain(X, W, G, P, h)
        else:
            Z = np.asarray(X @ W.T.astype(X.dtype, copy=False), dtype=np.float64)
            Z -= Z.max(axis=1, keepdims=True)
            P = np.exp(Z)
            P /= P.sum(axis=1, keepdims=True)
            h = P @ G
        if clip and self.eps is not None:
            top = P.argmax(axis=1)
            rows = np.flatnonzero(P[np.arange(len(P)), top] > self.eps)
            P[rows] = 0.0
            P[rows, top[rows]] = 1.0
            h[rows] = G[top[rows]]
        return P, h

    def probabilities(self, X, theta, *, clip: bool = True) -> np.ndarray:
        """The probabilities P_W(r = j | x) for every row (n × K).

        Parameters
        ----------
        X : ndarray or CSR matrix of shape (n_samples, n_features)
            The data.
        theta : ndarray
            The parameters θ.
        clip : bool
            Clip at ``eps``.

        Returns
        -------
        ndarray
            The probabilities, one row per row of X and one column per level.
        """
        return self._forward(X, theta, clip)[0]

    def scores(self, X, theta) -> np.ndarray:
        """The expected gains h_W(x) per row, clipped at ``eps`` (the scores to rank by).

        Parameters
        ----------
        X : ndarray or CSR matrix of shape (n_samples, n_features)
            The data.
        theta : ndarray
            The parameters θ.

        Returns
        -------
        ndarray
            The expected gains, one per row of X.
        """
        return self._forward(X, theta, True)[1]

    def linearize(self, X, theta):
        """The scores the training objective sees and their vector-Jacobian product at θ.

        The scores are clipped at ``eps`` when ``clip_training``.

        Parameters
        ----------
        X : ndarray or CSR matrix of shape (n_samples, n_features)
            The data.
        theta : ndarray
            The parameters θ.

        Returns
        -------
        tuple
            ``(f, vjp)``, ``vjp(g) = (∂f/∂θ)ᵀ g``.
        """
        P, h = self._forward(X, theta, self.clip_training)
        G = self.gains
        K, d = P.shape[1], X.shape[1]

        def vjp(g):
            g = np.ascontiguousarray(g, dtype=np.float64)
            if _own_products(X):
                out = np.empty((K, d))
                _eg.softmax_gain_vjp(X, P, G, h, g, out)
                return out.reshape(K * d)
            B = g[:, None] * P * (G[None, :] - h[:, None])
            if sp.issparse(X):
                grad = np.asarray((X.T @ B.astype(X.dtype, copy=False)).T, dtype=np.float64)
            else:
                grad = np.asarray(B.T.astype(X.dtype, copy=False) @ X, dtype=np.float64)
            return grad.reshape(K * d)

        return h, vjp

    def from_linear(self, w) -> np.ndarray:
        """The θ of the warm start W_j = (j − (K − 1)/2) w (the same ranking as w).

        Parameters
        ----------
        w : ndarray
            Linear weights.

        Returns
        -------
        ndarray
            The flat parameters θ.
        """
        w = np.asarray(w, dtype=np.float64).ravel()
        K = self._levels()
        return np.outer(np.arange(K) - (K - 1) / 2.0, w).ravel()


_SCORERS = {"linear": LinearScorer, "expected_gain": ExpectedGainScorer}


def get_scorer(scorer):
    """A scorer from a name (``"linear"``, ``"expected_gain"``) or a scorer object (a copy).

    Parameters
    ----------
    scorer : str or scorer object
        The name or object.

    Returns
    -------
    scorer object
        The scorer.
    """
    if isinstance(scorer, str):
        if scorer not in _SCORERS:
            raise ValueError(f"scorer must be one of {sorted(_SCORERS)} or a scorer object; "
                             f"got {scorer!r}")  # fmt: skip
        return _SCORERS[scorer]()
    for method in ("n_params", "scores", "linearize"):
        if not callable(getattr(scorer, method, None)):
            raise TypeError(
                f"scorer must be a name or an object with methods n_params, scores and "
                f"linearize; {type(scorer).__name__} has no method {method!r}"
            )
    return copy.copy(scorer)
