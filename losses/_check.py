"""Check a loss object against the loss protocol before handing it to the solver.

:func:`check_oracle` evaluates a loss (a built-in one or a user's own object following
:mod:`losses._base`) on random scores and reports, check by check, whether it behaves as the
bundle method assumes: the right shapes, finite non-negative values, a gradient that is a
subgradient of the summed loss, invariance to the order in which documents are listed, and
so on. Each check catches the loss's exceptions, so a broken loss yields a report, not a
crash.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from losses._base import _REQUIRED
from losses.validation import check_int

__all__ = ["CheckResult", "OracleReport", "check_oracle"]

# Relative slack for inequalities that hold exactly in real arithmetic (convexity,
# upper bounds): float64 sums of a few hundred terms are far more accurate than this.
_RTOL = 1e-9
# Finite differences: relative tolerance against <g, d>, and the step relative to max |f|.
_FD_RTOL = 1e-6
_FD_STEP = 1e-6
# Step of the one-sided directional-derivative check, relative to max |f|.
_DIR_STEP = 1e-4
_N_PERMUTATIONS = 10
_N_REPEATS = 10

_PASS, _FAIL, _SKIP = "pass", "fail", "skip"


@dataclass(frozen=True)
class CheckResult:
    """The outcome of one check: ``status`` is ``"pass"``, ``"fail"`` or ``"skip"``."""

    name: str
    status: str
    message: str


class OracleReport:
    """The checks :func:`check_oracle` ran on a loss, in order.

    Attributes
    ----------
    loss : object
        The loss that was checked.
    checks : list of CheckResult
        One entry per check; ``report[name]`` looks one up by name.
    """

    def __init__(self, loss, checks: list[CheckResult]):
        self.loss = loss
        self.checks = checks

    @property
    def ok(self) -> bool:
        """True when no check failed (skipped checks do not count as failures)."""
        return not self.failed

    @property
    def failed(self) -> list[str]:
        """Names of the failing checks."""
        return [c.name for c in self.checks if c.status == _FAIL]

    def __getitem__(self, name: str) -> CheckResult:
        for check in self.checks:
            if check.name == name:
                return check
        raise KeyError(f"no check named {name!r}; checks are {[c.name for c in self.checks]}")

    def __str__(self) -> str:
        counts = {s: sum(c.status == s for c in self.checks) for s in (_PASS, _FAIL, _SKIP)}
        head = (
            f"check_oracle({_loss_label(self.loss)}): {'OK' if self.ok else 'FAILED'} "
            f"({counts[_PASS]} passed, {counts[_FAIL]} failed, {counts[_SKIP]} skipped)"
        )
        width = max((len(c.name) for c in self.checks), default=0)
        lines = [
            f"  {c.status.upper() if c.status == _FAIL else c.status:4}  {c.name:{width}}  "
            f"{c.message}"
            for c in self.checks
        ]
        return "\n".join([head, *lines])

    def __repr__(self) -> str:
        return f"<OracleReport {_loss_label(self.loss)}: failed={self.failed}>"


def _loss_label(loss) -> str:
    try:
        return repr(loss)
    except Exception:  # a user's __repr__ may itself be broken
        return type(loss).__name__


def _fmt(a) -> str:
    return np.array2string(np.asarray(a), precision=6, threshold=12, separator=", ")


def _random_problem(rng: np.random.Generator, binary: bool) -> tuple[np.ndarray, np.ndarray]:
    """Labels and query ids for the default problem.

    Seven queries: one document, two documents, all labels equal, and queries of 5-9
    documents with random levels (ties included); levels 0..3, or 0/1 when ``binary``.
    """
    top = 2 if binary else 4
    parts = [
        rng.integers(0, top, 1),
        np.array([0, 1]),
        np.full(4, top - 1),
        rng.integers(0, top, 5),
        rng.integers(0, top, 9),
        np.arange(6) % top,
        rng.integers(0, top, 7),
    ]
    y = np.concatenate(parts).astype(np.float64)
    qid = np.repeat(np.arange(len(parts)), [len(p) for p in parts])
    return y, qid


def _scores(rng: np.random.Generator, n: int, trial: int) -> tuple[np.ndarray, bool]:
    """Scores for one trial and whether they are in general position (no ties).

    Trials cycle through a standard normal draw, a coarse grid with many ties, a wide
    (σ = 5) and a narrow (σ = 0.05) normal draw.
    """
    kind = trial % 4
    if kind == 1:
        return 0.5 * rng.integers(-3, 4, n).astype(np.float64), False
    scale = {0: 1.0, 2: 5.0, 3: 0.05}[kind]
    return scale * rng.standard_normal(n), True


def _copy_data(value):
    return np.array(value, copy=True) if isinstance(value, np.ndarray) else value


def _same(a, b) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (
            isinstance(a, np.ndarray)
            and isinstance(b, np.ndarray)
            and a.shape == b.shape
            and a.dtype == b.dtype
            and np.array_equal(a, b, equal_nan=a.dtype.kind in "fc")
        )
    return True


class _Checker:
    """Runs the checks of :func:`check_oracle`; see there for what each one asserts."""

    def __init__(self, loss, y, qid, data, n_trials: int, rng: np.random.Generator):
        self.loss = loss
        self.y = y
        self.qid = qid
        self.data = data
        self.n_trials = n_trials
        self.rng = rng
        self.checks: list[CheckResult] = []
        self.pointwise = bool(getattr(loss, "pointwise", False))
        # a difference of convex functions: the convexity checks use its surrogate at f
        self.latent = bool(getattr(loss, "latent", False)) and callable(
            getattr(loss, "convexify", None)
        )
        self.mutations: list[str] = []
        self._evals: list[tuple[np.ndarray, bool, np.ndarray, np.ndarray]] | None = None

    # -- running -------------------------------------------------------------------------
    def run(self) -> list[CheckResult]:
        steps: list[tuple[str, Callable[[], tuple[str, str]]]] = [
            ("protocol", self.check_protocol),
            ("validate", self.check_validate),
            ("shapes", self.check_shapes),
            ("finite", self.check_finite),
            ("nonnegative", self.check_nonnegative),
            ("subgradient", self.check_subgradient),
            ("directional_derivative", self.check_directional),
            ("finite_differences", self.check_finite_differences),
            ("hessian", self.check_hessian),
            ("order_invariance", self.check_order_invariance),
            ("metric_bound", self.check_metric_bound),
            ("deterministic", self.check_deterministic),
            ("inputs_unchanged", self.check_inputs_unchanged),
        ]
        blocked = None  # the fatal failure after which checks needing its output are skipped
        for name, step in steps:
            # modified inputs are still reported when only the output shapes are wrong
            runnable = blocked is None or (blocked == "shapes" and name == "inputs_unchanged")
            if not runnable:
                self.checks.append(CheckResult(name, _SKIP, f"not run: {blocked} failed"))
                continue
            try:
                status, message = step()
            except Exception as exc:  # a broken loss must not stop the checker
                status, message = _FAIL, f"raised {type(exc).__name__}: {exc}"
            self.checks.append(CheckResult(name, status, message))
            if status == _FAIL and name in ("protocol", "validate", "shapes"):
                blocked = name
        return self.checks

    # -- evaluation helpers ---------------------------------------------------------------
    def loss_grad(self, f: np.ndarray, targets=None) -> tuple[np.ndarray, np.ndarray]:
        """The loss's output on a private copy of ``f``, recording whether it was modified."""
        f_in = f.copy()
        values, grad = self.loss.loss_grad(f_in, self.targets if targets is None else targets)
        if not np.array_equal(f_in, f) and len(self.mutations) < 3:
            self.mutations.append(f"loss_grad modified its argument f (given {_fmt(f)})")
        return values, grad

    def total(self, f: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        values, grad = self.loss_grad(f)
        return float(np.sum(values)), values, grad

    def evals(self):
        """(f, general_position, values, grad) at every trial point, computed once."""
        if self._evals is None:
            evals = []
            for t in range(self.n_trials):
                f, general = _scores(self.rng, self.n, t)
                values, grad = self.loss_grad(f)
                evals.append((f, general, np.asarray(values), np.asarray(grad)))
            self._evals = evals
        return self._evals

    def describe(self, term: int, f: np.ndarray) -> str:
        """Where loss term ``term`` lives, with its scores and labels."""
        lo, hi = self.term_ptr[term], self.term_ptr[term + 1]
        if self.pointwise:
            where = f"sample {term}"
        else:
            qid = np.asarray(self.groups.qids)[term].item()
            where = f"query {term} (qid {qid!r}, {hi - lo} documents)"
        return f"{where}: f = {_fmt(f[lo:hi])}, y = {_fmt(self.y_int[lo:hi])}"

    def per_term(self, x: np.ndarray) -> np.ndarray:
        """Sum of a per-row array over the rows of each loss term."""
        cs = np.concatenate(([0.0], np.cumsum(x)))
        return cs[self.term_ptr[1:]] - cs[self.term_ptr[:-1]]

    def worst_term(self, excess: np.ndarray, slack: np.ndarray, f: np.ndarray) -> str:
        """Describe the term with the largest excess over its slack, if any exceeds it."""
        bad = excess - slack
        if bad.size == 0 or not np.nanmax(bad) > 0:
            return ""
        j = int(np.nanargmax(bad))
        return f"; worst term is {self.describe(j, f)}"

    # -- checks ---------------------------------------------------------------------------
    def check_protocol(self):
        missing = [m for m in _REQUIRED if not callable(getattr(self.loss, m, None))]
        if missing:
            return _FAIL, (
                f"{type(self.loss).__name__} has no method {missing[0]!r} "
                f"(a loss needs {', '.join(_REQUIRED)})"
            )
        metric = getattr(self.loss, "metric", None)
        if metric is not None and not callable(metric):
            return _FAIL, f"metric must be a method; got {type(metric).__name__}"
        return _PASS, f"has {', '.join(_REQUIRED)}" + (", metric" if metric else "")

    def check_validate(self):
        from losses import prepare  # losses/__init__ imports this module lazily

        generated = self.y is None
        candidates = [False, True] if generated else [None]
        errors = []
        for binary in candidates:
            if generated:
                y, qid = _random_problem(self.rng, binary)
            else:
                y, qid = np.asarray(self.y), self.qid
            inputs = {"y": y, "qid": qid, **self.data}
            before = {k: _copy_data(v) for k, v in inputs.items()}
            try:
                prepared = prepare(self.loss, y, qid, **self.data)
            except ValueError as exc:
                errors.append(str(exc))
                continue
            for key, value in inputs.items():
                if not _same(before[key], value):
                    self.mutations.append(f"validate modified its input {key!r}")
            self.y, self.qid, self.prepared = y, qid, prepared
            break
        else:
            labels = "generated labels (levels 0..3, then 0/1)" if generated else "y"
            return _FAIL, f"validate rejected {labels}: {' / '.join(errors)}"
        self.groups = self.prepared.groups
        self.targets = self.prepared.targets
        self.n = len(self.y)
        self.y_int = self.groups.to_internal(np.asarray(self.y))
        self.n_terms = self.prepared.n_terms
        self.term_ptr = (
            np.arange(self.n + 1) if self.pointwise else np.asarray(self.groups.query_ptr)
        )
        source = "generated " + ("0/1" if binary else "0..3") + " labels" if generated else "y"
        return _PASS, (
            f"accepted {source}: {self.n} rows in {self.groups.n_queries} queries "
            f"({_sizes_text(np.diff(self.groups.query_ptr))})"
        )

    def check_shapes(self):
        f, _ = _scores(self.rng, self.n, 0)
        out = self.loss.loss_grad(f.copy(), self.targets)
        if not isinstance(out, tuple) or len(out) != 2:
            return _FAIL, f"loss_grad must return a tuple (values, grad); got {type(out).__name__}"
        unit = "sample" if self.pointwise else "query"
        for label, a, shape in (("values", out[0], (self.n_terms,)), ("grad", out[1], f.shape)):
            if not isinstance(a, np.ndarray):
                return _FAIL, f"{label} must be a numpy array; got {type(a).__name__}"
            if a.shape != shape:
                hint = f" (one per {unit})" if label == "values" else " (the shape of f)"
                return _FAIL, f"{label} must have shape {shape}{hint}; got {a.shape}"
            if a.dtype.kind != "f":
                return _FAIL, f"{label} must have a float dtype; got {a.dtype}"
        return _PASS, f"values {(self.n_terms,)} (one per {unit}) and grad {f.shape}, float"

    def check_finite(self):
        for t, (f, _, values, grad) in enumerate(self.evals()):
            for label, a in (("values", values), ("grad", grad)):
                bad = np.flatnonzero(~np.isfinite(a))
                if bad.size:
                    i = int(bad[0])
                    term = i if label == "values" else self.term_of_row(i)
                    return _FAIL, f"trial {t}: {label}[{i}] = {a[i]} at {self.describe(term, f)}"
        return _PASS, f"values and grad finite at {self.n_trials} random points"

    def term_of_row(self, row: int) -> int:
        return int(np.searchsorted(self.term_ptr, row, side="right") - 1)

    def check_nonnegative(self):
        for t, (f, _, values, _) in enumerate(self.evals()):
            if values.size and values.min() < 0:
                j = int(np.argmin(values))
                return (
                    _FAIL,
                    f"trial {t}: values[{j}] = {values[j]!r} < 0 at {self.describe(j, f)}",
                )
        return _PASS, f"values >= 0 at {self.n_trials} random points"

    def check_subgradient(self):
        """l(f') >= l(f) + <g, f' - f> on random pairs (sums over terms)."""
        if not getattr(self.loss, "convex", True) and not self.latent:
            return _SKIP, "the loss declares convex=False"
        evals = self.evals()
        for t, (f, _, values, grad) in enumerate(evals):
            if t % 2:
                f2 = evals[(t + 1) % len(evals)][0]
            else:
                f2 = f + self.rng.standard_normal(self.n) * (1.0 + np.abs(f).max(initial=0.0))
            total2, values2, _ = self.total(f2)
            if self.latent:
                surrogate2, _ = self.loss_grad(f2, self.loss.convexify(f, self.targets))
                bound = float(np.sum(surrogate2))
                if not total2 <= bound + _RTOL * (1.0 + abs(total2) + abs(bound)):
                    return _FAIL, (
                        f"trial {t}: l(f') = {total2!r} > l_f(f') = {bound!r}: the convex "
                        f"surrogate fixed at f does not majorise the loss; f' = {_fmt(f2)}"
                    )
                total2, values2 = bound, np.asarray(surrogate2)
            d = f2 - f
            gd = grad * d
            lhs, rhs = total2, float(values.sum()) + float(gd.sum())
            slack = _RTOL * (1.0 + abs(lhs) + abs(float(values.sum())) + np.abs(gd).sum())
            if not lhs >= rhs - slack:
                gd_term = self.per_term(gd)
                excess = values + gd_term - values2
                term_slack = _RTOL * (1.0 + np.abs(values) + np.abs(values2) + np.abs(gd_term))
                return _FAIL, (
                    f"trial {t}: l(f') = {lhs!r} < l(f) + <g, f' - f> = {rhs!r} "
                    f"(violated by {rhs - lhs:.3g}){self.worst_term(excess, term_slack, f)}; "
                    f"f' = {_fmt(f2)}"
                )
        return _PASS, f"l(f') >= l(f) + <g, f' - f> on {len(evals)} random pairs"

    def check_directional(self):
        """(l(f + h d) - l(f)) / h >= <g, d>: the right derivative bounds every subgradient."""
        if not getattr(self.loss, "convex", True) and not self.latent:
            return _SKIP, "the loss declares convex=False"
        for t, (f, _, values, grad) in enumerate(self.evals()):
            d = self.rng.standard_normal(self.n)
            h = _DIR_STEP * max(1.0, float(np.abs(f).max(initial=0.0)))
            if self.latent:
                fixed = self.loss.convexify(f, self.targets)
                total_h = float(np.sum(self.loss_grad(f + h * d, fixed)[0]))
            else:
                total_h, _, _ = self.total(f + h * d)
            diff = total_h - float(values.sum())
            gd = float(grad @ d)
            slack = _RTOL * (
                1.0 + abs(total_h) + np.abs(values).sum() + h * np.abs(grad * d).sum()
            )
            if not diff >= h * gd - slack:
                return _FAIL, (
                    f"trial {t}: (l(f + h d) - l(f)) / h = {diff / h!r} < <g, d> = {gd!r} "
                    f"(h = {h:.3g}) at f = {_fmt(f)}, d = {_fmt(d)}"
                )
        return _PASS, f"right derivative >= <g, d> at {self.n_trials} random points"

    def check_finite_differences(self):
        if not getattr(self.loss, "smooth", False):
            return _SKIP, "the loss does not declare smooth=True"
        n_checked = 0
        for t, (f, general, _, grad) in enumerate(self.evals()):
            if not general:
                continue
            n_checked += 1
            d = self.rng.standard_normal(self.n)
            h = _FD_STEP * max(1.0, float(np.abs(f).max(initial=0.0)))
            plus, v_plus, _ = self.total(f + h * d)
            minus, v_minus, _ = self.total(f - h * d)
            fd = (plus - minus) / (2.0 * h)
            gd = float(grad @ d)
            rounding = 1e-13 * (np.abs(v_plus).sum() + np.abs(v_minus).sum()) / h
            slack = _FD_RTOL * (1.0 + np.abs(grad * d).sum()) + rounding
            if not abs(fd - gd) <= slack:
                return _FAIL, (
                    f"trial {t}: central difference {fd!r} != <g, d> = {gd!r} "
                    f"(h = {h:.3g}, tolerance {slack:.3g}) at f = {_fmt(f)}, d = {_fmt(d)}"
                )
        return _PASS, f"central differences match <g, d> at {n_checked} random points"

    def check_hessian(self):
        """hessp(f, d) against central differences of the gradient; symmetric; PSD if convex."""
        hessp = getattr(self.loss, "hessp", None)
        if not callable(hessp):
            return _SKIP, "the loss offers no hessp"
        convex = getattr(self.loss, "convex", True)
        n_checked = 0
        for t, (f, general, _, _) in enumerate(self.evals()):
            d = self.rng.standard_normal(self.n)
            u = self.rng.standard_normal(self.n)
            hd = np.asarray(hessp(f.copy(), d.copy(), self.targets))
            if hd.shape != f.shape or hd.dtype.kind != "f":
                return _FAIL, f"hessp must return a float array of shape {f.shape}; got {hd}"
            hu = np.asarray(hessp(f.copy(), u.copy(), self.targets))
            scale = 1.0 + np.abs(hd).sum() + np.abs(hu).sum()
            if not abs(float(u @ hd) - float(d @ hu)) <= _RTOL * scale * (1.0 + np.abs(d).max()):
                return _FAIL, (
                    f"trial {t}: <u, H d> = {float(u @ hd)!r} != <d, H u> = {float(d @ hu)!r}: "
                    f"hessp is not symmetric at f = {_fmt(f)}"
                )
            if convex and not float(d @ hd) >= -_RTOL * (1.0 + np.abs(d * hd).sum()):
                return _FAIL, (
                    f"trial {t}: <d, H d> = {float(d @ hd)!r} < 0 for a loss declared convex "
                    f"at f = {_fmt(f)}, d = {_fmt(d)}"
                )
            if not general:
                continue
            n_checked += 1
            h = _FD_STEP * max(1.0, float(np.abs(f).max(initial=0.0)))
            _, g_plus = self.loss_grad(f + h * d)
            _, g_minus = self.loss_grad(f - h * d)
            fd = (np.asarray(g_plus) - np.asarray(g_minus)) / (2.0 * h)
            rounding = 1e-13 * (np.abs(g_plus).sum() + np.abs(g_minus).sum()) / h
            err = np.abs(fd - hd).sum()
            slack = _FD_RTOL * (1.0 + np.abs(hd).sum() + np.abs(fd).sum()) + rounding
            if not err <= slack:
                return _FAIL, (
                    f"trial {t}: central differences of the gradient differ from hessp(f, d) "
                    f"by {err:.3g} (sum of absolute differences; h = {h:.3g}, tolerance "
                    f"{slack:.3g}) at f = {_fmt(f)}, d = {_fmt(d)}"
                )
        return _PASS, (
            f"hessp symmetric{' and PSD' if convex else ''} at {self.n_trials} random points, "
            f"matches central differences of the gradient at {n_checked}"
        )

    def check_order_invariance(self):
        """Permuting documents within each query permutes grad and keeps per-query values."""
        from losses import prepare

        keys = tuple(getattr(self.loss, "row_index_keys", ()))
        order = self.groups.order
        evals = self.evals()
        n_perm = min(_N_PERMUTATIONS, len(evals))
        for p in range(n_perm):
            perm = np.arange(self.n)
            for q in range(self.groups.n_queries):
                rows = np.arange(self.groups.query_ptr[q], self.groups.query_ptr[q + 1])
                rows = rows if order is None else order[rows]
                perm[rows] = rows[self.rng.permutation(rows.size)]
            inverse = np.empty_like(perm)
            inverse[perm] = np.arange(self.n)
            data = dict(self.data)
            for key in keys:
                if data.get(key) is not None:
                    data[key] = inverse[np.asarray(data[key])]
            # per-row data follows its rows
            for key in getattr(self.loss, "row_array_keys", ()):
                if data.get(key) is not None:
                    data[key] = np.asarray(data[key])[perm]
            y = np.asarray(self.y)[perm]
            qid = None if self.qid is None else np.asarray(self.qid)[perm]
            permuted = prepare(self.loss, y, qid, **data)
            f_caller = self.groups.to_caller(evals[p][0])
            ref_values, ref_grad = self.caller_output(self.prepared, f_caller)
            values, grad = self.caller_output(permuted, f_caller[perm])
            if self.pointwise:
                ref_values = ref_values[perm]
            general = evals[p][1]
            close_v = np.allclose(values, ref_values, rtol=_RTOL, atol=_RTOL)
            close_g = not general or np.allclose(grad, ref_grad[perm], rtol=_RTOL, atol=_RTOL)
            if not (close_v and close_g):
                what = "values" if not close_v else "grad"
                return _FAIL, (
                    f"permutation {p}: {what} changed when the documents of each query were "
                    f"listed in another order (caller rows {_fmt(perm)}) at f = "
                    f"{_fmt(f_caller)}"
                )
        return _PASS, (
            f"{n_perm} within-query permutations permute grad and keep values "
            "(grad compared at scores without ties)"
        )

    def caller_output(self, prepared, f_caller: np.ndarray):
        """Values (per term, internal term order) and grad (caller row order)."""
        groups = prepared.groups
        f_int = np.ascontiguousarray(groups.to_internal(f_caller))
        values, grad = self.loss_grad(f_int, prepared.targets)
        values = np.asarray(values)
        if self.pointwise:
            values = groups.to_caller(values)
        return values, groups.to_caller(np.asarray(grad))

    def check_metric_bound(self):
        metric = getattr(self.loss, "metric", None)
        if metric is None:
            return _SKIP, "the loss has no metric"
        for t, (f, _, values, _) in enumerate(self.evals()):
            f_in = f.copy()
            m = np.asarray(metric(f_in, self.targets))
            if not np.array_equal(f_in, f) and len(self.mutations) < 3:
                self.mutations.append(f"metric modified its argument f (given {_fmt(f)})")
            if m.shape != values.shape:
                return _FAIL, f"metric must return shape {values.shape}; got {m.shape}"
            slack = _RTOL * (1.0 + np.abs(m))
            if not np.all(values >= m - slack):
                j = int(np.argmax(m - values - slack))
                return _FAIL, (
                    f"trial {t}: values[{j}] = {values[j]!r} < metric = {m[j]!r} at "
                    f"{self.describe(j, f)}"
                )
        return _PASS, f"values >= metric(f) at {self.n_trials} random points (ties included)"

    def check_deterministic(self):
        evals = self.evals()
        metric = getattr(self.loss, "metric", None)
        for t, (f, _, values, grad) in enumerate(evals[:_N_REPEATS]):
            values2, grad2 = self.loss_grad(f)
            same = _same(values, np.asarray(values2)) and _same(grad, np.asarray(grad2))
            if metric is not None:
                same = same and _same(
                    np.asarray(metric(f.copy(), self.targets)),
                    np.asarray(metric(f.copy(), self.targets)),
                )
            if not same:
                return _FAIL, f"trial {t}: a second call with the same f gave another output"
        return _PASS, f"repeated calls agree bit for bit at {min(_N_REPEATS, len(evals))} points"

    def check_inputs_unchanged(self):
        if self.mutations:
            return _FAIL, "; ".join(self.mutations)
        return _PASS, "validate, loss_grad and metric left their inputs unchanged"


def check_oracle(
    loss,
    y=None,
    qid=None,
    *,
    n_trials: int = 50,
    random_state: int | None = 0,
    raise_on_failure: bool = False,
    **data: Any,
) -> OracleReport:
    """Check a loss object against the loss protocol and the solver's assumptions.

    Parameters
    ----------
    loss : str or loss object
        A built-in name (checked with default parameters; pass ``losses.get(name, ...)``
        for others) or any object with ``validate`` and ``loss_grad``.
    y : array-like of shape (n_samples,) or None
        Targets. ``None`` generates graded labels 0..3 in seven queries, among them a
        one-document query, a two-document query, a query whose labels are all equal and
        queries with tied labels; if ``validate`` rejects them (a binary classifier, say),
        labels 0/1 in the same layout are tried.
    qid : array-like of shape (n_samples,) or None
        Query id per row (``None`` with a given ``y`` is one query).
    n_trials : int, default=50
        Number of random score vectors (and of random pairs for the subgradient check).
    random_state : int >= 0, None or numpy.random.Generator, default=0
        Seed of the random scores and permutations.
    raise_on_failure : bool, default=False
        Raise ``AssertionError`` listing the failing checks instead of returning them.
    **data
        Loss-specific keywords passed to ``validate`` through :func:`losses.prepare`
        (for example ``pairs=`` of the preference loss).

    Returns
    -------
    OracleReport
        ``report.ok``, ``report.failed`` (names), ``report[name]`` and a readable
        ``str(report)``. The checks, in order:

        ``protocol``
            ``validate`` and ``loss_grad`` exist (the message names a missing one);
            ``metric``, if present, is callable.
        ``validate``
            ``validate`` accepts the targets (via :func:`losses.prepare`).
        ``shapes``
            ``loss_grad`` returns a tuple of two float arrays: values with one entry per
            query (per sample when ``pointwise``) and grad with the shape of f.
        ``finite``, ``nonnegative``
            Values and grad are finite and values are >= 0 at every random point.
        ``subgradient``
            l(f') >= l(f) + <g, f' - f> for random pairs, l the sum of the values
            (skipped for a loss declaring ``convex = False`` without a latent part).
        ``directional_derivative``
            (l(f + h d) - l(f)) / h >= <g, d> for a small step h: the right derivative
            bounds <g, d> from above, as for any subgradient of a convex function
            (skipped for a loss declaring ``convex = False`` without a latent part).

            A loss with a latent part (``latent`` true and a ``convexify(f, targets)``
            method, a difference of convex functions) is not convex: both checks then use
            its convex surrogate l_f with the latent part fixed at f in place of l(f')
            and l(f + h d), and ``subgradient`` also checks l(f') <= l_f(f').
        ``finite_differences``
            Only when the loss declares ``smooth = True``: central differences of l
            match <g, d> at points without tied scores.
        ``hessian``
            Only when the loss offers ``hessp``: ⟨u, H d⟩ = ⟨d, H u⟩, ⟨d, H d⟩ >= 0 for a
            convex loss, and central differences of the gradient along d match
            ``hessp(f, d)`` at points without tied scores.
        ``order_invariance``
            Listing the documents of each query in another order (remapping the row
            indices of ``row_index_keys`` data) keeps the values and permutes grad
            (grad compared at scores without ties, where a subgradient may be chosen).
        ``metric_bound``
            When the loss has ``metric``: values >= metric(f), including tied scores.
        ``deterministic``
            A second call with the same input gives bit-identical output.
        ``inputs_unchanged``
            ``validate`` leaves y, qid and data unchanged; ``loss_grad`` and ``metric``
            leave f unchanged.

        A check that raises is reported as failed with the exception; checks that need a
        working ``validate`` or ``loss_grad`` are skipped once those fail.

    Notes
    -----
    Random scores cycle through standard normal, a coarse grid with many ties, wide
    (σ = 5) and narrow (σ = 0.05) draws. Inequalities allow a relative slack of 1e-9 for
    rounding. Cost: about 7 ``n_trials`` evaluations of the loss on the problem.

    Examples
    --------
    >>> import losses
    >>> report = losses.check_oracle("ordinal")
    >>> report.ok
    True
    """
    if isinstance(loss, str):
        from losses import get

        loss = get(loss)
    check_int(n_trials, "n_trials", 1)
    if not isinstance(random_state, np.random.Generator):
        check_int(random_state, "random_state", 0, allow_none=True)
    data = dict(data)
    rng = np.random.default_rng(random_state)
    report = OracleReport(loss, _Checker(loss, y, qid, data, n_trials, rng).run())
    if raise_on_failure and not report.ok:
        failures = "\n".join(
            f"  {c.name}: {c.message}" for c in report.checks if c.status == _FAIL
        )
        raise AssertionError(
            f"check_oracle({_loss_label(loss)}) failed {len(report.failed)} checks:\n{failures}"
        )
    return report


def _sizes_text(sizes) -> str:
    """Query sizes for a report line: all of them when there are at most ten, else their
    range and median."""
    sizes = np.asarray(sizes)
    if sizes.size <= 10:
        return f"sizes {sizes.tolist()}"
    if sizes.min() == sizes.max():
        return f"each of {int(sizes[0])} rows"
    return f"sizes {int(sizes.min())} to {int(sizes.max())}, median {float(np.median(sizes)):g}"
