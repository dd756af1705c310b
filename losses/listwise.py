"""Structured max-margin losses for NDCG@k and NERU (normalised expected rank utility).

The loss
--------
For one query with scores ``f`` and labels ``y`` of ``m`` documents, a permutation π (π(i)
is the document at position i), position weights ``c`` (non-increasing, non-negative) and a
ranking loss Δ(π, y) = 1 − NDCG@k(π, y) or 1 − NERU(π, y),

    l(f, y) = max_π [ Δ(π, y) + Σ_i c_i f_{π(i)} ] − Σ_i c_i f_{σ(i)},

where σ is an *ideal ordering* (gains descending) and the parameter ``ties`` says which one
when several documents share a gain (S(y) is the set of ideal orderings; ``ties="pairs"``
changes the joint feature map instead, below):

* ``ties="latent"`` (default): the best one for the scores, max over σ ∈ S(y); equal gains
  in *decreasing* score;
* ``ties="increasing"``: the worst one, min over σ ∈ S(y); equal gains in *increasing*
  score.

Both measures have the form
Δ(π, y) = 1 − (1/Z) Σ_i a_i b_{π(i)} with non-increasing position discounts ``a`` (zero
beyond k) and document gains ``b``, Z being the value of an ideal ordering:

* NDCG@k: ``a_i = 1 / log2(i + 1)`` (``discount="log2"``) or ``a_1 = 1, a_i = 1 / log2(i)``
  (``discount="original"``, the discount of Järvelin & Kekäläinen, 2002, with base 2, which
  the LETOR 4.0 evaluation tool uses) for i <= k, ``b = 2^y − 1`` (``gain="exp"``) or
  ``b = y`` (``gain="linear"``), Z = ideal DCG@k;
* NERU: ``a_i = 2^{−(i − 1)/(α − 1)}`` (α the half-life), ``b = max(y − d, 0)`` (d the
  neutral vote), Z = ERU of an ideal ordering; with ``k`` set, positions beyond k get
  ``a_i = 0`` (NERU@k).

A subgradient is ``c`` placed on the documents of the maximising π minus ``c`` placed on
those of σ: ``g_{π(i)} += c_i``, ``g_{σ(i)} −= c_i``. With latent ties, documents tied in
both gain and score share the mean of ``c`` over their positions in σ (a mean of the
maximising σ's placements, so still a subgradient of the max over σ, and independent of the
listing order).

Ties among labels (the parameter ``ties``)
------------------------------------------
Write M(f) = max_π [Δ(π) + ⟨c, f_π⟩] and N(f) = max_{σ ∈ S} ⟨c, f_σ⟩; both are maxima of
finitely many affine functions of f (S depends on y only), so both are convex. Within a
gain level the positions of σ form a contiguous block on which c is non-increasing, so by
the rearrangement inequality N(f) puts equal gains in decreasing score and
min_{σ ∈ S} ⟨c, f_σ⟩ puts them in increasing score.

*Latent ties* (``l = M − N``; after Yu & Joachims, ICML 2009, the tie-breaking is a latent
structure chosen to fit the scores):

* *An upper bound.* Let τ sort f descending with any tie-breaking. Because c is
  non-increasing, ⟨c, f_τ⟩ = max_π ⟨c, f_π⟩ >= ⟨c, f_σ⟩ for every σ, in particular for
  the maximiser σ* of N; hence l >= Δ(τ) + ⟨c, f_τ⟩ − ⟨c, f_σ*⟩ >= Δ(τ). So l bounds
  1 − NDCG@k (1 − NERU) of the ranking by f for *every* tie-breaking of f, in particular
  the pessimistic one that :meth:`metric` reports.
* *Non-negative.* π = σ* is feasible in M and Δ(σ*) = 0, so M(f) >= N(f).
* *Independent of listing order.* Relabelling documents by a permutation ρ maps the set of
  permutations onto itself and S(y) onto S(y∘ρ), leaving Δ, M and N unchanged; the
  subgradient is permuted when π's placement is unique (σ's part always is, by the
  averaging above).
* *Does not charge the order within a level.* If f orders the gain levels with margin
  (⟨c, f_σ* − f_π⟩ >= Δ(π) for all π), l = 0 however the scores spread within a level.
* *Not convex; a difference of convex functions.* M − N is DC. Fixing the tie-breaking at
  scores f_0 gives the surrogate l_{f_0}(f) = M(f) − Σ_d ĉ_d f_d (ĉ the averaged σ*
  weights at f_0, :meth:`convexify`): convex, l_{f_0} >= l everywhere (Σ_d ĉ_d f_d is a
  mean of ⟨c, f_σ⟩ over ideal σ, at most N(f)) and equal at f_0. The concave-convex
  procedure (:mod:`bmrm.solver.cccp`) minimises one surrogate after another with the
  bundle method, and the regularised objective never increases. ``bmrm.fit`` does this
  for every loss with ``ties="latent"``, starting from the minimiser of the pairwise hinge
  over pairs of different gain (:meth:`initial_loss`): at w = 0 all scores tie, the
  averaged weights charge every spread within a level as the increasing rule does, and
  w = 0 can be a fixed point of the procedure.

*Increasing ties* (``l = M + max_{σ ∈ S} ⟨−c, f_σ⟩``, the rule of earlier versions): convex
(a sum of two convex maxima) and, by the same arguments, an upper bound, non-negative and
independent of listing order. Taking a σ fixed by listing order instead would be convex
but depend on the order documents are listed in. The price of convexity is that it
charges every spread of scores among documents of equal gain: max_π ⟨c, f_π⟩ pairs the
largest weights with the largest scores while σ pairs them, within a level, with the
smallest. On data where most documents of a query share one label (LETOR MQ2008: most
documents have label 0) that charge outweighs what ordering the labels gains, and the
regularized minimiser is w = 0, which the solver then certifies (``experiments/letor.py``
shows it). Replacing the minimising σ by the average over ideal orderings (still convex,
still an upper bound) reduces the charge but does not remove it.

*Adding the pairwise hinge* (``pairwise`` = μ > 0, with any tie rule): the loss becomes

    l_μ(f) = l(f) + μ · h(f),    h(f) = (1/P) Σ_{b_i > b_j} max(0, 1 − (f_i − f_j)),

h the pairwise hinge over the P pairs of different gain (the ordinal loss with cost 1,
normalised per query, on the gain levels; :class:`losses.ordinal.OrdinalLoss`; 0 when the
query has one gain level). The measure-driven part l acts on the top of the ranking, h on
every pair of levels down the list; mixing a metric-driven loss with a pairwise term is
what NDCG-Loss2++ does in the LambdaLoss framework (Wang et al., CIKM 2018), and Sculley
(KDD 2010) mixes a ranking and a regression loss the same way. The properties carry over:

* *An upper bound.* h >= 0, so l_μ >= l >= Δ(τ) for every tie-breaking τ of f.
* *Non-negative*, as both terms are.
* *Independent of listing order*: h depends only on the gains and scores of pairs.
* *Does not charge the order within a level*: h sums over pairs of different gain only,
  and l does not (latent ties and pairs).
* *Convexity*: h is convex (a sum of hinges), so l_μ is convex when l is (``"increasing"``,
  ``"pairs"``), and with latent ties l_μ = (M + μh) − N is again a difference of convex
  functions whose surrogate at f_0 is l_{f_0} + μh (:meth:`convexify` keeps h).

A subgradient is l's plus μ times h's. μ = 0 is the loss above; as μ → ∞ with lam = μ·λ,
the regularised minimiser tends to the ordinal loss's at λ (the objective divided by μ is
the ordinal one plus mean(l)/μ, and the two minimisers are within G/(μλ) when l's
subgradients in w are bounded by G).

*Adding the average-precision hinge* (``average_precision`` = ν > 0, with any tie rule, beside
``pairwise`` or alone): the loss gains ν · l_AP(f), the structured average-precision hinge
of :mod:`losses.average_precision` (SVM-MAP, Yue et al., SIGIR 2007) with the documents of
positive gain as the relevant ones (for NDCG with labels 0, 1, 2: label >= 1, LETOR's MAP
rule; for NERU: labels above d). Folding two criteria into one max-margin objective is what
Chakrabarti et al. (KDD 2008) propose; here the measure-driven part acts on the top k and
l_AP on the interleaving of relevant and non-relevant documents down the whole list, which
average precision measures. l_AP is convex, non-negative, at least 1 − AP of the ranking by
f for every tie-breaking, depends on the classes and scores only, and sums over relevant ×
non-relevant pairs (of different gain), so every property listed for ``pairwise`` carries
over with h replaced by l_AP (and l_μ,ν = l + μh + ν l_AP when both are set); with latent
ties the surrogate at f_0 is l_{f_0} + μh + ν l_AP.

For NERU the ideal orderings are defined by the gains b, so documents with labels at or
below the neutral vote d form one tie group; the loss does not care how they are ordered
among themselves, like the measure.

*Pairs* (``ties="pairs"``; the joint feature map of SVM-MAP, Yue et al., SIGIR 2007, and of
Chakrabarti et al., KDD 2008, over pairs of documents of different gain only): with P the
number of such pairs of the query and π's score ⟨ψ(π), f⟩ = (1/P) Σ_{b_i > b_j}
±(f_i − f_j) (+ when π puts i above j),

    l(f) = max_π [Δ(π) + ⟨ψ(π), f⟩] − ⟨ψ(σ), f⟩
         = max_π [Δ(π) − (2/P) Σ_{b_i > b_j, π puts j above i} (f_i − f_j)],

the same for every ideal σ, so the order within a level is ignored by construction. The
weights ``c`` are not used. Convex (a maximum of affine functions); non-negative (π = σ);
an upper bound (for τ sorting f, every pair τ inverts has f_i <= f_j, so its term is
>= 0 and l >= Δ(τ)); independent of listing order (only labels and scores enter). The
subgradient is −2/P on the higher-gain document and +2/P on the lower-gain one of every
pair the maximising π inverts. Loss-augmented inference is exact: in some maximising π the
documents of one level follow their scores (exchange argument), so π interleaves the
per-level sorted lists; a dynamic programme over the numbers taken from each level fills
the top K = min(k, m) positions (Π_l (min(m_l, K) + 1) states, O(K^L) for L levels), and
below K the remaining documents go in decreasing score, which inverts exactly the pairs
whose lower-gain document scores higher. The programme is exponential in the number of
gain levels: fine for graded relevance (a handful of levels), refused at validation beyond
4·10^6 states (many levels, for example real-valued NERU ratings, or a large k).

The ramp bound (the parameter ``bound``)
----------------------------------------
*Why the hinge bound learns nothing on long, noisy lists.* Along any direction w the hinge
loss at scores t·f is Δ(π*) + t·Σ_i c_i (f_{π*(i)} − f_{σ(i)}) at its maximiser π*. With
few documents per query, a direction that orders the labels better lowers both parts. With
many documents and weak features, π* keeps Δ near 1 by putting documents of gain 0 on top
— the ones the model itself scores highest among them, its hardest negatives — and, being
close to the ranking by f, makes the margin term compare the ranking by score with the
label order over the whole list, weighted by c. No linear model of noisy features puts a
long list in label order, so that term is positive for every direction and grows linearly
with t: the risk is smallest at w = 0 at every lam, and a fit returns w ≈ 0 (ranking
documents in file order). ``experiments/long_queries.py --analyse`` measures the two parts
along the ordinal model's direction: on lists of 150 documents at label noise 3 the margin
term dominates from t = 0.1 on while Δ(π*) barely moves; on lists of 8 both fall at first.
Truncating c to the top k (``truncate_c``), the pair feature map (``ties="pairs"``), the DCG
weights and the added pairwise hinge keep that linear growth.

*The ramp* (``bound="ramp"``; Do, Le, Teo, Chapelle & Smola, "Tighter bounds for structured
estimation", NIPS 2008): the reference is the ranking by the scores themselves,

    l(f) = max_π [Δ(π) + ⟨c, f_π⟩] − max_τ ⟨c, f_τ⟩,

τ over all permutations (so the ideal ordering and its tie rule do not enter):

* *An upper bound*: for τ sorting f (any tie-breaking), l >= Δ(τ) + ⟨c, f_τ⟩ − ⟨c, f_τ⟩.
* *Bounded*: 0 <= l <= 1 (Δ <= 1), so a model that ranks badly costs at most 1 per query
  however large its scores; as the scale of f grows, l tends to Δ of the ranking by f.
* *Independent of listing order*; *does not charge the order within a level* (when f orders
  the levels with margin, τ is ideal and l = 0).
* *A difference of convex functions* M − T; the surrogate fixed at f_0 replaces T by the
  linear ⟨ĉ, f⟩, ĉ placing c by the ranking of f_0 with tied scores sharing the mean of
  their positions' weights (:func:`losses._kernels.listwise.ranking_weights`), a
  majoriser equal to l at f_0. It is trained by the same concave-convex procedure as latent
  ties, from the minimiser of the pairwise hinge (:meth:`initial_loss`): at w = 0 every
  ranking ties and the ramp is flat (1 on every query that is not degenerate).

*The default* (``bound=None``) chooses by the data: with ``ties="latent"``, the ramp when the
median length of the batch's queries (those that are not degenerate) exceeds
:data:`LONG_QUERY` = 20 documents, the hinge otherwise; with the convex tie rules
(``"increasing"``, ``"pairs"``), which are hinge bounds by definition, the hinge. On short
lists the hinge's margin term helps: it lifts the ranking of LETOR MQ2008 (median 8
documents per query) above the ramp's, whose risk is flat near w = 0 and which needs a
small lam to learn at all; on long noisy lists only the ramp learns, and at 40 documents
with strong label noise the hinge's solution is already w ≈ 0 (its direction still ranks,
but the fit sits at the edge of learning nothing). ``experiments/long_queries.py`` measures
both on generated lists of 8 to 500 documents.
The rule looks at the batch given to :meth:`validate`: a fit decides once for its training
data (with the Dask backend, each partition for its own queries). ``bound="hinge"`` with
``ties="latent"`` is the loss of the previous sections. The added
pairwise and average-precision hinges (``pairwise``, ``average_precision``) combine with
the ramp as with the hinge.

Degenerate queries
------------------
A query whose gains are all equal (one document, all labels equal, all labels 0 for NDCG,
all labels <= d for NERU) has Δ ≡ 0 or an undefined normaliser Z = 0; it contributes zero
loss and zero gradient, and its :meth:`metric` is 0.

Reductions (exact)
------------------
The maximisation is a linear assignment (positions × documents, profit
``c_i f_j − a_i b_j / Z``). Fix a total order ≻ of the documents by score (descending, ties
broken arbitrarily but fixed); say j *dominates* j' when j ≻ j' and b_j <= b_j'. Among the
optimal π take one maximising Φ(π) = Σ_p p · rank(π(p)). Swapping a dominated document
placed before its dominator changes the objective by
(c_p − c_{p'})(f_j − f_{j'}) + (a_p − a_{p'})(b_{j'} − b_j)/Z >= 0 and strictly increases Φ,
so in this π every document follows all of its dominators; likewise the positions beyond k
(a = 0) hold their documents in ≻ order. Consequences, with K = min(k, m):

* only *candidates*, documents with fewer than K dominators, can occupy the top K positions
  (at most L·K of them for L gain levels);
* when c is zero beyond k (``truncate_c=True``) the tail is irrelevant and the problem is a
  K × n_candidates rectangular assignment, solved by
  :func:`losses._kernels.assignment.solve_assignment`. In batches with a query longer than
  :data:`~losses._kernels.listwise.TRUNCATED_SORT_MAX` the candidates are found without
  sorting the whole query: every candidate is among the K best documents of its gain level
  (its better documents of the same level dominate it), and so are all its dominators
  (shorter queries sort, which costs them no more);
* when K = m every position has a discount and the problem is the full m × m assignment
  (documents as rows in ≻ order, F_1 >= ... >= F_m their scores), solved by
  :func:`losses._kernels.assignment.solve_assignment_from` from the column duals
  v_1 = 0, v_p = Σ_{2<=s<=p} F_s (c_{s−1} − c_s). These are optimal for the score part
  −c_p F_t alone, where the order ≻ is optimal: with u_t = −c_t F_t − v_t the reduced cost
  −c_p F_t − u_t − v_p is F_t (c_t − c_p) − Σ_{t<s<=p} F_s (c_{s−1} − c_s) >= 0 for p > t
  (as F_s <= F_t) and Σ_{p<s<=t} F_s (c_{s−1} − c_s) − F_t (c_p − c_t) >= 0 for p < t (as
  F_s >= F_t), zero for p = t (the rearrangement inequality in dual form). The solver
  makes them feasible for the whole cost by row minima and augments only the rows whose
  cheapest position is taken, so the work shrinks as the scores outweigh the gains
  (against zero duals; experiments/bench_oracles.py measures the oracle);
* otherwise the tail holds the non-chosen documents in ≻ order. Writing F_1 >= ... >= F_m
  for the sorted scores and k_r for the number of chosen documents among the first r in ≻
  order, summation by parts gives the tail's value as a constant plus
  Σ_r (F_r − F_{r+1}) C(r − k_r), C(n) = Σ_{t <= n} c_{K+t}, which is concave in k_r. The
  problem is then a min-cost flow of K units (positions → candidates → a chain over the
  candidates' ranks with convex arc costs: k_r only changes at a candidate's rank, so the
  ranks between two candidates make one arc). Replacing each arc's convex cost by its
  secant through two consecutive flow values (a *window*) gives a lower bound, exact in the
  window, that is linear in the chosen set: a K × n_candidates rectangular assignment. A
  solution whose arc flows all lie in their windows is therefore optimal; otherwise the
  windows move to it and the assignment is solved again (windows first placed by a
  greedy fill; one or two solves certify nearly every query). When a few solves do not
  certify, K Dijkstra searches on about (K + 3)·n_candidates arcs solve the flow itself.
  Each assignment runs on the candidates within some position's bound (its largest cost
  over k guessed candidates, which bounds its k-th cheapest; some optimal assignment gives
  every position one of its k cheapest). This takes a fraction of the flow's time per
  query, and random queries seldom need the flow (experiments/bench_oracles.py);
* in that case, when the query has few gain levels, a dynamic programme over per-level
  counts replaces the flow. By the exchange above (documents of equal gain dominate each
  other in ≻ order), some optimal π takes from every level l its first n_l candidates in
  ≻ order and places every document after its dominators, so every top prefix is such a
  set too. The top part's cost is then the cheapest order of filling positions 0..K−1
  from the per-level lists (best[n] = min_l best[n − e_l] + cost of level l's n_l-th
  candidate at position Σn − 1), and the tail's value depends only on the chosen set:
  taking the chosen document of largest rank ρ last, it is the value without it plus
  D(Σn − 1, ρ) = −c_{K+ρ−p} F_ρ + Σ_{r>ρ} (c_{K+r−p−1} − c_{K+r−p}) F_r (p = Σn − 1: the
  documents below ρ move up one position). The answer minimises best[n] − tail[n] over
  Σn = K: O(K·m + S·L) for S count vectors and L levels. One path serves a batch (a mix
  would compile both): the loss takes the programme when every query longer than k has S
  at most 4,096 and a dense table of at most 65,536 cells and their mean S is at most
  1,500 (every batch of queries of up to four levels at k = 10, which have S <= 1,001;
  five levels where few documents reach the upper ones), since its time grows with S and
  the flow's hardly: the limits sit where the two take about the same time per query
  (experiments/bench_oracles.py);
* when all scores of the query are equal (the concave-convex procedure evaluates its
  surrogates at w = 0), Σ_i c_i f_{π(i)} is the same for every π and the maximisers are
  the π whose top K positions hold K smallest gains in increasing order (the
  rearrangement inequality, a being non-increasing and zero beyond k): O(m + L), no
  assignment. Among them the kernel takes one close to σ, to keep the subgradient small
  (a fit from w = 0 starts along it): σ's last K documents on top, equal gains in σ's
  order, the other documents in σ's order.

The maximisation over π does not depend on the tie rule. Cost per query, L gain levels:
O(m + L·K log(L·K) + K²·n_candidates) typically with truncated c (O(m·K) worst case for
the selection; O(m log m + K²·n_candidates) where the batch sorts); with untruncated c
and K < m, O(m log m + s (m + K²·n_candidates)) for s linearised solves (O(m log m + K
(K·n_candidates + m) log m) more when the flow runs; O(m log m + K·m + S·L) by the
dynamic programme); O(m³) worst case when K = m (NERU without k, or k >= m), where the
rank-two costs make shortest-augmenting-path solvers from zero duals markedly slower
than on random matrices (hence the start above). The reductions, the programme, the
linearised assignments (alone, one of them followed by the flow, and the flow alone) and
the start are checked against the full m × m assignment and against brute force over all
permutations in the tests. Latent ties add the choice of σ, O(m log m) per query.

References
----------
C.-N. J. Yu and T. Joachims, "Learning structural SVMs with latent variables", ICML 2009.
Y. Yue, T. Finley, F. Radlinski and T. Joachims, "A support vector method for optimizing
average precision", SIGIR 2007.
S. Chakrabarti, R. Khanna, U. Sawant and C. Bhattacharyya, "Structured learning for
non-smooth ranking losses", KDD 2008.
Q. Le and A. Smola, "Direct optimization of ranking measures", arXiv:0704.3359 (2007).
C. B. Do, Q. Le, C. H. Teo, O. Chapelle and A. Smola, "Tighter bounds for structured
estimation", NIPS 2008 (the ramp bound).
K. Järvelin and J. Kekäläinen, "Cumulated gain-based evaluation of IR techniques", ACM TOIS
20(4) (2002) (the discount ``"original"``).
X. Wang, C. Li, N. Golbandi, M. Bendersky and M. Najork, "The LambdaLoss framework for
ranking metric optimization", CIKM 2018 (NDCG-Loss2++, a metric-driven loss plus μ times a
pairwise one).
D. Sculley, "Combined regression and ranking", KDD 2010.
(SVM-MAP, Yue et al. 2007, above, for ``average_precision``; Chakrabarti et al. 2008, above,
for combining criteria.)
M. Weimer, A. Karatzoglou, Q. Le and A. Smola, "CofiRank: maximum margin matrix
factorization for collaborative ranking", NIPS 2007 (c_i = (i + 1)^(−1/4)).
C. H. Teo, S. V. N. Vishwanathan, A. Smola and Q. Le, "Bundle methods for regularized risk
minimization", JMLR 11 (2010), appendix on ranking losses (NDCG, ERU / NERU).
J. Breese, D. Heckerman and C. Kadie, "Empirical analysis of predictive algorithms for
collaborative filtering", UAI 1998 (expected rank utility).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from losses._base import Loss, rebased_ptr
from losses._kernels import listwise as _k
from losses._threads import run_queries
from losses.validation import (
    check_bool,
    check_finite_targets,
    check_graded_labels,
    check_k,
    check_real,
)

__all__ = ["NDCGLoss", "NERULoss"]

# an empty array: no per-document ideal weights (σ chosen by the kernel, equal gains in
# increasing score), or no store of assignment duals
_EMPTY = np.empty(0)
_EMPTY_INDEX = np.empty(0, dtype=np.int64)

_NAMED_C = ("power", "dcg")
TIES = ("latent", "increasing", "pairs")
BOUNDS = ("ramp", "hinge")
# bound=None: the ramp bound for batches whose median query (not degenerate) is longer
LONG_QUERY = 20
# Largest dynamic programme of ties="pairs" per query (states Π_l (min(m_l, k) + 1)).
_MAX_PAIR_STATES = 4_000_000
# Largest tail table of ties="pairs" per query, in float64 cells (Σ_{h > l} (m_h + 1)(m_l + 1)
# of them): it grows with the square of the query's length.
_MAX_PAIR_CELLS = 2**26
# Largest query solved as a full m × m assignment (when k >= m): 8·m² bytes per thread.
_MAX_DENSE = 4096


def _lattice_queries(run_start, query, sizes, n_top, long) -> tuple[np.ndarray, np.ndarray]:
    """Per query, the states and table cells of the dynamic programme over per-level
    counts (:func:`losses._kernels.listwise._lattice_top`), for the queries longer than
    ``n_top`` that are near or within its limits (0 for the others).

    With caps κ_l = min(count_l, n_top) over the query's gain levels, its states are the
    vectors 0 <= n_l <= κ_l with Σ n_l <= n_top (the programme's work) and its table holds
    Π (κ_l + 1) cells. Both are bounds: the kernel's caps count candidates only, which are
    fewer.

    ``run_start``: the first row of every (query, gain level) run in the rows sorted by
    query then gain; ``query``: the query of every row.
    """
    run_length = np.diff(np.append(run_start, query.size))
    cap = np.minimum(run_length, n_top)
    run_query = query[run_start]
    n_queries = sizes.size
    states = np.zeros(n_queries, dtype=np.int64)
    cells = np.zeros(n_queries, dtype=np.int64)
    # log2 of the product first (products of many levels overflow int64), then exact
    # counts for the queries near the limit or below
    log_cells = np.bincount(run_query, weights=np.log2(cap + 1.0), minlength=n_queries)
    near = long & (log_cells <= np.log2(_k.LATTICE_CELLS) + 1.0)
    if not np.any(near):
        return states, cells
    keep = near[run_query]
    kept_query = run_query[keep]
    kept_cap = cap[keep]
    first = np.flatnonzero(np.diff(np.append(-1, kept_query)))
    queries = kept_query[first]
    cells[queries] = np.multiply.reduceat(kept_cap + 1, first)
    # the states: coefficients up to degree n_top of Π_l (1 + x + ... + x^κ_l), one row
    # per query, multiplied in one level at a time (a window sum over the cumulative row)
    run_of_query = np.repeat(np.arange(first.size), np.diff(np.append(first, kept_query.size)))
    level_index = np.arange(kept_query.size) - first[run_of_query]
    poly = np.zeros((first.size, n_top + 1), dtype=np.int64)
    poly[:, 0] = 1
    degree = np.arange(n_top + 1)
    for index in range(int(level_index.max()) + 1):
        runs = np.flatnonzero(level_index == index)
        rows = run_of_query[runs]
        cumulative = np.cumsum(poly[rows], axis=1)
        low = degree[None, :] - kept_cap[runs][:, None] - 1
        below = np.take_along_axis(cumulative, np.maximum(low, 0), axis=1)
        poly[rows] = cumulative - np.where(low >= 0, below, 0)
    states[queries] = poly.sum(axis=1)
    return states, cells


def _lattice_cells(run_start, query, sizes, n_top, long) -> int:
    """The table size (cells) for the dynamic programme over per-level counts when the
    queries longer than ``n_top`` take it, else 0.

    They take it when every one of them is within :data:`~losses._kernels.listwise.
    LATTICE_STATES` and :data:`~losses._kernels.listwise.LATTICE_CELLS` (from
    :func:`_lattice_queries`) and their mean number of states is at most
    :data:`~losses._kernels.listwise.LATTICE_MEAN_STATES`: the programme's work grows
    with the states, the chain flow's hardly, and one path serves the whole batch.
    """
    states, cells = _lattice_queries(run_start, query, sizes, n_top, long)
    states, cells = states[long], cells[long]
    fits = (states > 0) & (states <= _k.LATTICE_STATES) & (cells <= _k.LATTICE_CELLS)
    if not np.all(fits) or states.mean() > _k.LATTICE_MEAN_STATES:
        return 0
    return int(cells.max())


class _Targets(NamedTuple):
    query_ptr: np.ndarray
    # the gain of each query's levels, ascending: query q's level l at level_ptr[q] + l
    # (one float per level, not per document)
    level_gain: np.ndarray
    level_ptr: np.ndarray
    level: np.ndarray
    n_levels: np.ndarray
    cut_level: np.ndarray
    n_above: np.ndarray
    inv_norm: np.ndarray
    a: np.ndarray
    c: np.ndarray
    n_top: int
    truncated: bool
    latent: bool = False
    ideal_c: np.ndarray | None = None
    pair_scale: np.ndarray | None = None
    # some query is longer than n_top (needs the truncated path or the chain flow)
    long_queries: bool = True
    # some query of 2 to n_top documents (needs the full assignment)
    short_queries: bool = True
    # per row, the column duals of its query's last full assignment (NaN: none yet), read
    # and written by the kernel to start the next one (structured_loss); None: not kept
    duals: np.ndarray | None = None
    # the ordinal loss's targets over the gain levels and its weight μ (``pairwise``), or
    # None when μ = 0
    pairwise: Any = None
    pairwise_weight: float = 0.0
    # > 0: the queries longer than n_top take the dynamic programme over per-level counts
    # instead of the chain flow (untruncated c, the batch within its limits), with tables
    # of this many cells (the largest query's); 0: the chain flow
    lattice: int = 0
    # the chain path's linearised assignments before the chain flow (0: the flow at once)
    secant_solves: int = _k.SECANT_SOLVES
    # truncated c: whether the queries longer than n_top select each level's best documents
    # instead of sorting (some query is longer than TRUNCATED_SORT_MAX)
    select: bool = True
    # the average-precision hinge's targets (relevant: positive gain) and its weight
    # (``average_precision``), or None when the weight is 0
    average_precision: Any = None
    average_precision_weight: float = 0.0
    # bound="ramp": the reference is the ranking by the scores (ranking_weights) instead of
    # an ideal ordering
    ramp: bool = False


def _check_weights(c: np.ndarray, *, name: str = "c") -> np.ndarray:
    try:
        c = np.asarray(c, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(
            f"{name} must be one of ['power', 'dcg'], an array of numbers or a callable "
            f"returning one; got {_brief(c)}"
        ) from None
    if c.ndim != 1:
        raise ValueError(f"{name} must be 1-d; got shape {c.shape}")
    if not np.all(np.isfinite(c)) or np.any(c < 0):
        raise ValueError(f"{name} must hold finite non-negative position weights")
    if np.any(np.diff(c) > 0):
        raise ValueError(f"{name} must be non-increasing in the position")
    return c


def _brief(value, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _dcg_discount(n: int) -> np.ndarray:
    return 1.0 / np.log2(np.arange(2, n + 2, dtype=np.float64))


class _StructuredRankingLoss(Loss):
    """Shared validation and kernels of :class:`NDCGLoss` and :class:`NERULoss`."""

    pointwise = False
    smooth = False

    def _init_ties(self, ties: str) -> None:
        if ties not in TIES:
            raise ValueError(f"ties must be one of {list(TIES)}; got {ties!r}")
        self.ties = ties

    def _init_bound(self, bound: str | None) -> None:
        if bound is not None and bound not in BOUNDS:
            raise ValueError(f"bound must be one of {list(BOUNDS)} or None; got {bound!r}")
        if bound == "ramp" and self.ties != "latent":
            raise ValueError(
                f"bound='ramp' compares with the ranking by the scores, so it takes no tie "
                f"rule for the ideal ordering: use ties='latent' (the default); got "
                f"ties={self.ties!r}"
            )
        self.bound = bound

    def _ramp_for(self, sizes: np.ndarray, live: np.ndarray) -> bool:
        """Whether a batch of queries takes the ramp bound: ``bound="ramp"``, or
        ``bound=None`` with ``ties="latent"`` when the median length of the queries that
        are not degenerate exceeds :data:`LONG_QUERY` documents."""
        if self.bound is not None:
            return self.bound == "ramp"
        if self.ties != "latent" or not np.any(live):
            return False
        return bool(np.median(sizes[live]) > LONG_QUERY)

    def _init_pairwise(self, pairwise, average_precision) -> None:
        self.pairwise = check_real(pairwise, "pairwise", low=0.0)
        self.average_precision = check_real(average_precision, "average_precision", low=0.0)

    @property
    def latent(self) -> bool:
        """Whether the reference ordering is latent (``ties="latent"``).

        The loss is then a difference of convex functions trained by the concave-convex
        procedure of :mod:`bmrm.solver.cccp`: the ramp bound (the ranking by the scores) or,
        with ``bound="hinge"``, the tie-breaking of the ideal ordering.
        """
        return self.ties == "latent"

    @property
    def convex(self) -> bool:
        """Whether the loss is convex in f: unless the tie-breaking is latent.

        A latent loss is a difference of convex functions, whose convex surrogates
        :meth:`convexify` gives.
        """
        return not self.latent

    def _init_weights(self, c, truncate_c: bool) -> None:
        check_bool(truncate_c, "truncate_c")
        if truncate_c and self.k is None:
            raise ValueError("truncate_c=True needs an integer k (weights are cut beyond k)")
        if isinstance(c, str):
            if c not in _NAMED_C:
                raise ValueError(
                    f"c must be one of {list(_NAMED_C)}, an array or a callable; got {c!r}"
                )
        elif not callable(c):
            c = _check_weights(c)
            if c.size == 0:
                raise ValueError("c must hold at least one position weight")
        self.c = c
        self.truncate_c = bool(truncate_c)

    def _position_weights(self, n: int) -> np.ndarray:
        """c_1..c_n (checked), zero beyond k when ``truncate_c``."""
        if isinstance(self.c, str):
            positions = np.arange(1, n + 1, dtype=np.float64)
            c = (positions + 1.0) ** -0.25 if self.c == "power" else _dcg_discount(n)
        elif callable(self.c):
            out = self.c(np.arange(1, n + 1))
            try:
                c = np.asarray(out, dtype=np.float64)
            except (TypeError, ValueError):
                raise ValueError(
                    f"c(positions) must return an array of numbers; got {_brief(out)}"
                ) from None
            if c.shape != (n,):
                raise ValueError(
                    f"c(positions) must return one weight per position; got shape {c.shape} "
                    f"for {n} positions"
                )
            c = _check_weights(c)
        else:
            if self.c.size < n:
                raise ValueError(
                    f"c holds {self.c.size} position weights but a query has {n} documents"
                )
            c = self.c[:n].copy()
        if self.truncate_c:
            c[self.k :] = 0.0
        return c

    def _c_param(self):
        return self.c.tolist() if isinstance(self.c, np.ndarray) else self.c

    def validate(self, y, query_ptr, **data) -> _Targets:
        """Compute each document's gain and each query's ideal value and weights.

        Parameters
        ----------
        y : array-like of shape (n_samples,)
            Targets in internal (query-contiguous) row order.
        query_ptr : ndarray of shape (n_queries + 1,), int64
            Query ``q`` is rows ``query_ptr[q]:query_ptr[q + 1]``.
        **data
            Loss data keywords; this loss takes none, and any raise ``ValueError``.

        Returns
        -------
        object
            The prepared targets (a named tuple of arrays), for :meth:`loss_grad`.

        Raises
        ------
        ValueError
            When a label is out of range for the gain, or data keywords are given.
        """
        if data:
            raise ValueError(
                f"the {self.name} loss takes no data keywords; got {sorted(data)} "
                f"(loss parameters go to losses.get({self.name!r}, ...))"
            )
        gain = self._gains(y)
        if not np.all(np.isfinite(gain)):
            raise ValueError(
                f"y holds labels whose gains overflow float64 for the {self.name} loss "
                f"(largest label {np.max(y)!r})"
            )
        query_ptr = np.asarray(query_ptr, dtype=np.int64)
        sizes = np.diff(query_ptr)
        n_queries = sizes.size
        max_m = int(sizes.max()) if n_queries else 0
        a = self._discounts(max_m)
        c = self._position_weights(max_m)
        # relevant: positive gain, decided before the gains are scaled
        average_precision = self._average_precision_targets(gain, query_ptr)
        _scale_gains(gain, query_ptr, sizes)

        # level: dense rank of the gain within its query (0 = smallest gain). The rows are
        # sorted by query first, so sorted row i is in query query[i]. n-sized temporaries
        # are freed or updated in place as soon as possible: each takes up to 8 bytes per row,
        # and the peak memory of a fit counts them.
        # row numbers in 32 bits while they fit: half the bytes of these temporaries
        index_type = np.int32 if gain.size < 2**31 else np.int64
        query = np.repeat(np.arange(n_queries, dtype=index_type), sizes)
        nonempty = sizes > 0
        starts = query_ptr[:-1][nonempty]
        ascending = np.lexsort((gain, query))
        g_sorted = gain[ascending]
        new_level = np.ones(gain.size, dtype=bool)
        new_level[1:] = g_sorted[1:] != g_sorted[:-1]
        new_level[starts] = True
        del g_sorted
        cum = np.cumsum(new_level)
        run_start = np.flatnonzero(new_level)
        del new_level
        n_levels = np.zeros(n_queries, dtype=np.int64)
        n_levels[nonempty] = cum[query_ptr[1:][nonempty] - 1] - cum[starts] + 1
        cum -= np.repeat(cum[starts], sizes[nonempty])
        level = np.empty(gain.size, dtype=np.int32)  # below a query's length
        level[ascending] = cum
        del ascending, cum

        # Z: the measure's value for gains sorted descending; 0 marks a degenerate query.
        descending = np.lexsort((-gain, query))
        position = np.arange(gain.size, dtype=index_type)
        position -= np.repeat(starts.astype(index_type), sizes[nonempty])
        weights = a[position]
        del position
        weights *= gain[descending]
        ideal = np.bincount(query, weights=weights, minlength=n_queries)
        del weights
        inv_norm = np.zeros(n_queries)
        live = n_levels >= 2
        inv_norm[live] = 1.0 / ideal[live]
        n_top = max_m if self.k is None else self.k
        if min(n_top, max_m) > _MAX_DENSE and n_top >= max_m:
            raise ValueError(
                f"a query of {max_m} documents with k={self.k} needs a dense {max_m} × "
                f"{max_m} assignment (over {_MAX_DENSE} documents); set k below {max_m}"
            )
        # σ's first n_top positions: every document above cut_level, then the lowest-scored
        # of cut_level (the level at ideal position n_top). Only for queries longer than k.
        cut_level = np.zeros(n_queries, dtype=np.int64)
        long = sizes > n_top
        cut_level[long] = level[descending[query_ptr[:-1][long] + n_top - 1]]
        del descending
        # the gains by level: the documents of a level share one gain (level is its rank)
        level_ptr = np.zeros(n_queries + 1, dtype=np.int64)
        np.cumsum(n_levels, out=level_ptr[1:])
        level_gain = np.empty(int(level_ptr[-1]))
        level_gain[level_ptr[query] + level] = gain
        del gain
        above = level > cut_level[query]
        n_above = np.bincount(query, weights=above, minlength=n_queries).astype(np.int64)
        pair_scale = None
        if self.ties == "pairs":
            pair_scale = self._pair_scale(query, level, sizes, n_levels, inv_norm, n_top)
        # one path for all the queries longer than n_top: compiling both for a mix would
        # cost a first fit about a second more than the programme saves
        lattice_cells = 0
        if pair_scale is None and not self.truncate_c and np.any(long):
            lattice_cells = _lattice_cells(run_start, query, sizes, n_top, long)
        del run_start
        short_queries = bool(np.any((sizes >= 2) & (sizes <= n_top)))
        duals = None
        if short_queries and pair_scale is None:
            duals = np.full(level.size, np.nan)
        return _Targets(
            query_ptr,
            level_gain,
            level_ptr,
            level,
            n_levels,
            cut_level,
            n_above,
            inv_norm,
            a,
            c,
            max(n_top, 1),
            self.truncate_c,
            self.latent,
            None,
            pair_scale,
            bool(np.any(long)),
            short_queries,
            duals,
            self._pairwise_targets(level, query_ptr),
            self.pairwise,
            lattice_cells,
            select=bool(self.truncate_c and max_m > _k.TRUNCATED_SORT_MAX),
            average_precision=average_precision,
            average_precision_weight=self.average_precision,
            ramp=self._ramp_for(sizes, live),
        )

    def _pairwise_targets(self, level, query_ptr):
        """The ordinal loss's targets over the gain levels when ``pairwise`` > 0."""
        if self.pairwise == 0.0:
            return None
        from losses.ordinal import OrdinalLoss

        return OrdinalLoss().validate(level, query_ptr)

    def _average_precision_targets(self, gain, query_ptr):
        """The average-precision hinge's targets (relevant: positive gain) when
        ``average_precision`` > 0."""
        if self.average_precision == 0.0:
            return None
        from losses.average_precision import AveragePrecisionLoss

        return AveragePrecisionLoss().validate(gain, query_ptr)

    def _pair_scale(self, query, level, sizes, n_levels, inv_norm, n_top) -> np.ndarray:
        """2 / (number of pairs of different gain) per query; checks the programme's size."""
        n_queries = sizes.size
        per_level = np.zeros((n_queries, int(n_levels.max()) if n_queries else 0))
        np.add.at(per_level, (query, level), 1.0)
        n_pairs = 0.5 * (sizes.astype(np.float64) ** 2 - (per_level**2).sum(axis=1))
        states = np.prod(np.minimum(per_level, n_top) + 1.0, axis=1)
        if states.size and states.max() > _MAX_PAIR_STATES:
            q = int(np.argmax(states))
            raise ValueError(
                f"ties='pairs': a query of {sizes[q]} documents in {n_levels[q]} gain levels "
                f"needs {states[q]:.3g} states with k={self.k} (over {_MAX_PAIR_STATES}); "
                "set a smaller k (or use fewer label levels)"
            )
        # Σ_{h > l} (m_h + 1)(m_l + 1) = ((Σ (m_l + 1))² − Σ (m_l + 1)²) / 2 over the levels
        counts = (per_level + 1.0) * (per_level > 0)
        cells = 0.5 * (counts.sum(axis=1) ** 2 - (counts**2).sum(axis=1))
        if cells.size and cells.max() > _MAX_PAIR_CELLS:
            q = int(np.argmax(cells))
            raise ValueError(
                f"ties='pairs': a query of {sizes[q]} documents needs a table of "
                f"{cells[q]:.3g} cells ({8 * cells[q] / 2**30:.3g} GiB; over {_MAX_PAIR_CELLS}), "
                "which grows with the square of the query's length; use ties='latent' "
                "(the default) for queries this long"
            )
        scale = np.zeros(n_queries)
        live = inv_norm > 0
        scale[live] = 2.0 / n_pairs[live]
        return scale

    def ideal_weights(self, f, targets: _Targets) -> np.ndarray:
        """Per document, c at its position in the ideal ordering best for the scores ``f``.

        σ puts gains descending and equal gains in decreasing ``f``; documents tied in both
        share the mean of c over their positions.

        Parameters
        ----------
        f : ndarray of shape (n_samples,), float64
            Scores in internal row order.
        targets : object
            What :meth:`validate` returned.

        Returns
        -------
        ndarray of shape (n_samples,)
            The weight of each document; zero on degenerate queries, NaN everywhere
            when a score is NaN or infinite.
        """
        f = np.ascontiguousarray(f, dtype=np.float64)
        if not np.isfinite(f).all():
            return np.full_like(f, np.nan)
        return self._ideal_weights(f, targets, _EMPTY_INDEX)

    def _ideal_weights(self, f, targets: _Targets, order) -> np.ndarray:
        """:meth:`ideal_weights` of float64 ``f``; ``order`` (empty, or int64 of shape
        (n,)) receives each query's rank order for the loss kernel (``given_order``)."""
        out = np.empty_like(f)
        if targets.ramp:
            run_queries(
                _k.ranking_weights,
                targets.query_ptr,
                f,
                targets.query_ptr,
                targets.inv_norm,
                targets.c,
                out,
                order,
            )
            return out
        run_queries(
            _k.latent_ideal_weights,
            targets.query_ptr,
            f,
            targets.query_ptr,
            targets.level,
            targets.n_levels,
            targets.inv_norm,
            targets.c,
            out,
            order,
        )
        return out

    def convexify(self, f, targets: _Targets) -> _Targets:
        """Return the targets of the convex surrogate with the tie-breaking fixed at ``f``.

        With these targets :meth:`loss_grad` returns
        ``l_f(f') = max_π [Δ(π) + ⟨c, f'_π⟩] − Σ_d ĉ_d f'_d`` (ĉ = :meth:`ideal_weights` at
        ``f``): convex in ``f'``, at least the latent loss everywhere and equal to it at
        ``f' = f``, the majorizer of one concave-convex step (Yuille & Rangarajan, "The
        concave-convex procedure", Neural Computation 15, 2003).

        Parameters
        ----------
        f : ndarray of shape (n_samples,), float64
            Scores in internal row order.
        targets : object
            What :meth:`validate` returned.

        Returns
        -------
        object
            The surrogate's targets, for :meth:`loss_grad`.

        Raises
        ------
        ValueError
            When the loss's ties are not ``"latent"`` (it is convex already).
        """
        if not targets.latent:
            raise ValueError(
                f"convexify applies to ties='latent'; this loss has ties={self.ties!r}, "
                "which is convex already"
            )
        return targets._replace(ideal_c=self.ideal_weights(f, targets))

    def query_block(self, targets: _Targets, start: int, stop: int) -> _Targets:
        """Return the targets of the queries ``start:stop`` alone (see :mod:`losses._base`).

        The paths the kernels take are chosen for all the queries (``long_queries``,
        ``select``, the lattice's size) and kept, so that every query of the block is
        evaluated as in the whole batch, to the bit.

        Parameters
        ----------
        targets : object
            What :meth:`validate` (or :meth:`convexify`) returned.
        start, stop : int
            The block's first query and one past its last.

        Returns
        -------
        object
            Their targets, rows numbered from 0 (views of ``targets``' arrays; the block's
            ``duals``, which the kernel updates, are a view of the batch's).
        """
        rows = slice(int(targets.query_ptr[start]), int(targets.query_ptr[stop]))
        queries = slice(start, stop)
        levels = slice(int(targets.level_ptr[start]), int(targets.level_ptr[stop]))

        def per_row(a):
            return None if a is None else a[rows]

        pairwise = targets.pairwise
        if pairwise is not None:
            from losses.ordinal import OrdinalLoss

            pairwise = OrdinalLoss().query_block(pairwise, start, stop)
        average_precision = targets.average_precision
        if average_precision is not None:
            from losses.average_precision import AveragePrecisionLoss

            average_precision = AveragePrecisionLoss().query_block(average_precision, start, stop)
        return targets._replace(
            query_ptr=rebased_ptr(targets.query_ptr, start, stop),
            level_gain=targets.level_gain[levels],
            level_ptr=rebased_ptr(targets.level_ptr, start, stop),
            level=targets.level[rows],
            n_levels=targets.n_levels[queries],
            cut_level=targets.cut_level[queries],
            n_above=targets.n_above[queries],
            inv_norm=targets.inv_norm[queries],
            ideal_c=per_row(targets.ideal_c),
            pair_scale=None if targets.pair_scale is None else targets.pair_scale[queries],
            duals=per_row(targets.duals),
            pairwise=pairwise,
            average_precision=average_precision,
        )

    def initial_loss(self, targets: _Targets):
        """The convex loss whose minimiser starts the concave-convex procedure.

        The pairwise hinge over the pairs of different gain within a query (the ordinal
        loss, cost 1, normalised per query), with its targets: it orders the gain levels
        without charging any order inside one, so the tie-breaking fixed at its scores is a
        meaningful first latent choice. Starting at w = 0 instead ties all scores, and the
        resulting surrogate (every document of a level weighted by the mean of its level's
        positions) charges every spread within a level, so that w = 0 can be its minimiser
        and a fixed point of the procedure.

        Parameters
        ----------
        targets : object
            What :meth:`validate` returned.

        Returns
        -------
        loss : OrdinalLoss
            The initial convex loss.
        targets : object
            Its targets, for its ``loss_grad``.
        """
        from losses.ordinal import OrdinalLoss

        ordinal = OrdinalLoss()
        return ordinal, ordinal.validate(targets.level, targets.query_ptr)

    def loss_grad(self, f, targets: _Targets):
        """Return the per-query losses and the subgradient of their sum.

        See the module docstring for the formula and its conventions; both are NaN
        everywhere when a score is NaN or infinite.

        Parameters
        ----------
        f : ndarray of shape (n_samples,), float64
            Scores in internal row order.
        targets : object
            What :meth:`validate` returned.

        Returns
        -------
        values : ndarray of shape (n_queries,)
            The loss of each query.
        grad : ndarray of shape (n_samples,)
            A subgradient of ``values.sum()`` with respect to ``f``.
        """
        f = np.ascontiguousarray(f, dtype=np.float64)
        values = np.empty(targets.inv_norm.size)
        grad = np.empty_like(f)
        if not np.isfinite(f).all():
            # no ranking to speak of (and the kernels' sorts assume ordered numbers): NaN,
            # which the solvers refuse by name
            values.fill(np.nan)
            grad.fill(np.nan)
            return values, grad
        if targets.pair_scale is not None:
            run_queries(
                _k.pairs_loss,
                targets.query_ptr,
                f,
                targets.query_ptr,
                targets.level_gain,
                targets.level_ptr,
                targets.level,
                targets.n_levels,
                targets.inv_norm,
                targets.pair_scale,
                targets.a,
                targets.n_top,
                values,
                grad,
            )
            return self._add_hinges(f, targets, values, grad)
        ideal_c = _EMPTY
        order = _EMPTY_INDEX
        if targets.latent:
            ideal_c = targets.ideal_c
            if ideal_c is None:
                # the weights' kernel sorts each query's scores as the loss kernel would:
                # it leaves that rank order for it, one sort per query instead of two
                order = np.empty(f.size, dtype=np.int64)
                ideal_c = self._ideal_weights(f, targets, order)
        # queries longer than n_top with untruncated c: the dynamic programme when they all
        # fit it, else the chain flow
        flow = not targets.truncated and targets.long_queries
        run_queries(
            _k.structured_loss,
            targets.query_ptr,
            f,
            targets.query_ptr,
            targets.level_gain,
            targets.level_ptr,
            targets.level,
            targets.n_levels,
            targets.cut_level,
            targets.n_above,
            targets.inv_norm,
            targets.a,
            targets.c,
            targets.n_top,
            # a path passed None is not compiled (see the kernel)
            True if targets.truncated and targets.long_queries else None,
            True if targets.truncated and targets.long_queries and targets.select else None,
            targets.secant_solves if flow and not targets.lattice else None,
            targets.lattice if flow and targets.lattice else None,
            True if targets.short_queries else None,
            ideal_c,
            _EMPTY if targets.duals is None else targets.duals,
            order,
            values,
            grad,
        )
        return self._add_hinges(f, targets, values, grad)

    @staticmethod
    def _add_hinges(f, targets: _Targets, values, grad):
        """Add μ times the pairwise hinge over pairs of different gain (``pairwise``) and
        ν times the average-precision hinge (``average_precision``)."""
        if targets.pairwise is not None:
            from losses.ordinal import OrdinalLoss

            pair_values, pair_grad = OrdinalLoss().loss_grad(f, targets.pairwise)
            values += targets.pairwise_weight * pair_values
            grad += targets.pairwise_weight * pair_grad
        if targets.average_precision is not None:
            from losses.average_precision import AveragePrecisionLoss

            ap_values, ap_grad = AveragePrecisionLoss().loss_grad(f, targets.average_precision)
            values += targets.average_precision_weight * ap_values
            grad += targets.average_precision_weight * ap_grad
        return values, grad

    def metric(self, f, targets: _Targets) -> np.ndarray:
        """Per-query 1 − measure of the ranking that sorts ``f`` descending.

        Documents with equal scores are ordered by increasing gain (the worst case), so the
        loss upper-bounds the value for every tie-breaking.

        Parameters
        ----------
        f : ndarray of shape (n_samples,), float64
            Scores in internal row order.
        targets : object
            What :meth:`validate` returned.

        Returns
        -------
        ndarray of shape (n_queries,)
            1 − the measure of each query; 0 for degenerate queries, NaN
            everywhere when a score is NaN or infinite.
        """
        f = np.ascontiguousarray(f, dtype=np.float64)
        values = np.empty(targets.inv_norm.size)
        if not np.isfinite(f).all():
            values.fill(np.nan)
            return values
        run_queries(
            _k.pessimistic_metric,
            targets.query_ptr,
            f,
            targets.query_ptr,
            targets.level_gain,
            targets.level_ptr,
            targets.level,
            targets.inv_norm,
            targets.a,
            values,
        )
        return values


class NDCGLoss(_StructuredRankingLoss):
    """Structured max-margin loss bounding 1 − NDCG@k (see the module docstring).

    Parameters
    ----------
    k : int, default=10
        Cut-off of NDCG@k; queries with fewer documents use all of them.
    gain : {"exp", "linear"}, default="exp"
        Document gain ``2^y − 1`` or ``y``; labels are non-negative integers.
    discount : {"log2", "original"}, default="log2"
        Position discount of the measure: ``1 / log2(i + 1)`` (trec_eval, scikit-learn) or
        ``1`` at position 1 and ``1 / log2(i)`` after (Järvelin & Kekäläinen, 2002; the
        LETOR 4.0 tool, ``losses.metrics.ndcg_score(..., discount="original")``). Both
        are non-increasing, which the bounds and the exact reductions of the module
        docstring need (position 2 ties with position 1 under ``"original"``).
    c : {"power", "dcg"}, array-like or callable, default="power"
        Position weights, non-increasing and non-negative: ``"power"`` is
        ``c_i = (i + 1)^(−1/4)``, ``"dcg"`` is ``1 / log2(i + 1)``; an array gives
        ``c_1, c_2, ...`` (at least as many as the largest query); a callable maps the
        positions ``1..m`` (int array) to weights. A callable makes :meth:`get_params`
        non-JSON-serialisable.
    truncate_c : bool, default=False
        Set ``c_i = 0`` beyond k: only the top k positions are assigned (the fast path).
    ties : {"latent", "increasing", "pairs"}, default="latent"
        How the loss treats documents of equal label (module docstring): ``"latent"``
        compares with the ideal ordering best for the scores (equal labels in decreasing
        score; not convex, trained by the concave-convex procedure, does not charge the
        order within a label level); ``"increasing"`` with the worst one (convex, but
        charges every spread of scores within a level, so that w = 0 can be optimal on real
        data); ``"pairs"`` uses a joint feature map over pairs of different labels only
        (convex, ignores the order within a level; ``c`` is not used).
    bound : {"ramp", "hinge"} or None, default=None
        ``"ramp"``: compare with the ranking by the scores (module docstring, "The ramp
        bound"): at most 1 per query, so it learns on long, noisy lists where the hinge
        bound's minimiser is w = 0; not convex, trained by the concave-convex procedure.
        ``"hinge"``: compare with an ideal ordering chosen by ``ties``. None: chosen by the
        data with ``ties="latent"`` (the ramp when the median query is longer than 20
        documents, the hinge otherwise), the hinge with the convex tie rules.
    pairwise : float, default=0
        Weight μ >= 0 of the pairwise hinge over the pairs of different label added to the
        loss (module docstring, "Adding the pairwise hinge"): still an upper bound on
        1 − NDCG@k, with the tie rule's convexity; μ = 0 leaves the loss as above.
    average_precision : float, default=0
        Weight ν >= 0 of the structured average-precision hinge (SVM-MAP; labels >= 1
        relevant) added to the loss (module docstring, "Adding the average-precision
        hinge"): still an upper bound on 1 − NDCG@k, with the tie rule's convexity; ν = 0
        leaves the loss as above.

    Notes
    -----
    NDCG@k(π, y) = Σ_{i<=k} a_i b_{π(i)} divided by its value for an ideal order.
    Queries with one document or all labels equal (including all zero) give zero loss.
    """

    name = "ndcg"

    def __init__(
        self,
        *,
        k: int = 10,
        gain: str = "exp",
        discount: str = "log2",
        c="power",
        truncate_c: bool = False,
        ties: str = "latent",
        bound: str | None = None,
        pairwise: float = 0.0,
        average_precision: float = 0.0,
    ):
        self.k = check_k(k, allow_none=False)
        if gain not in ("exp", "linear"):
            raise ValueError(f"gain must be 'exp' or 'linear'; got {gain!r}")
        self.gain = gain
        if discount not in ("log2", "original"):
            raise ValueError(f"discount must be 'log2' or 'original'; got {discount!r}")
        self.discount = discount
        self._init_weights(c, truncate_c)
        self._init_ties(ties)
        self._init_bound(bound)
        self._init_pairwise(pairwise, average_precision)

    def _params(self) -> dict[str, Any]:
        return {
            "k": self.k,
            "gain": self.gain,
            "discount": self.discount,
            "c": self._c_param(),
            "truncate_c": self.truncate_c,
            "ties": self.ties,
            "bound": self.bound,
            "pairwise": self.pairwise,
            "average_precision": self.average_precision,
        }

    def _gains(self, y) -> np.ndarray:
        y = check_graded_labels(y)
        if self.gain == "linear":
            return y.astype(np.float64)
        if y.size and y.max() > 1023:
            raise ValueError(
                f"y holds labels too large for gain='exp' (2^y overflows); got {y.max()}"
            )
        return np.exp2(y.astype(np.float64)) - 1.0

    def _discounts(self, n: int) -> np.ndarray:
        if self.discount == "original":
            a = 1.0 / np.log2(np.maximum(np.arange(1, n + 1, dtype=np.float64), 2.0))
        else:
            a = _dcg_discount(n)
        a[self.k :] = 0.0
        return a


def _scale_gains(gain: np.ndarray, query_ptr: np.ndarray, sizes: np.ndarray) -> None:
    """Scale each query's gains in place by the power of two that puts the largest in
    [0.5, 1).

    Δ(π) = 1 − (1/Z) Σ_i a_i b_{π(i)} depends on the gains only through their ratios, and a
    power of two scales every product and sum exactly, so the loss is unchanged to the last
    bit, while Z = Σ_i a_i b_{σ(i)} can neither overflow (a_1 = 1 and a_i <= 1, so Z is at
    most the query's length: large labels with ``gain="exp"``, huge NERU ratings) nor be so
    small that 1/Z overflows (tiny NERU ratings), either of which would make a query look
    degenerate or its weights infinite. Gains far below a query's largest may round to
    subnormal numbers; their share of Z is below 2^-1000 of it.
    """
    nonempty = sizes > 0
    if not np.any(nonempty):
        return
    largest = np.maximum.reduceat(gain, query_ptr[:-1][nonempty])
    _, exponent = np.frexp(largest)  # 0 for a query of zero gains, left as it is
    # x·2^-e by ldexp, which never forms 2^-e (beyond float64 for subnormal gains)
    np.ldexp(gain, np.repeat(-exponent, sizes[nonempty]), out=gain)


class NERULoss(_StructuredRankingLoss):
    """Structured max-margin loss bounding 1 − NERU (see the module docstring).

    Parameters
    ----------
    alpha : float, default=5
        Viewing half-life α > 1: position i has weight ``2^{−(i − 1)/(α − 1)}``.
    d : float, default=0
        Neutral vote: a document's gain is ``max(y − d, 0)``.
    k : int or None, default=None
        Only the top k positions count (NERU@k); ``None`` counts all.
    c : {"power", "dcg"}, array-like or callable, default="power"
        The position weights of the structured loss, as for :class:`NDCGLoss`.
    truncate_c : bool, default=False
        As for :class:`NDCGLoss`; ``True`` needs an integer ``k``.
    ties : {"latent", "increasing", "pairs"}, default="latent"
        The tie-breaking of the ideal ordering, as for :class:`NDCGLoss`.
    bound : {"ramp", "hinge"} or None, default=None
        As for :class:`NDCGLoss`.
    pairwise : float, default=0
        The weight of the hinge over pairs of different gain max(y − d, 0), as for
        :class:`NDCGLoss`.
    average_precision : float, default=0
        The weight of the average-precision hinge with the labels above d relevant, as for
        :class:`NDCGLoss`.

    Notes
    -----
    ERU(π, y) = Σ_i 2^{−(i − 1)/(α − 1)} max(y_{π(i)} − d, 0) (Breese et al., 1998) and
    NERU = ERU / ERU(ideal). Labels may be any finite reals. Queries whose gains are all
    equal (one document, all labels equal, or all labels <= d) give zero loss.
    """

    name = "neru"

    def __init__(
        self,
        *,
        alpha: float = 5.0,
        d: float = 0.0,
        k: int | None = None,
        c="power",
        truncate_c: bool = False,
        ties: str = "latent",
        bound: str | None = None,
        pairwise: float = 0.0,
        average_precision: float = 0.0,
    ):
        self.alpha = check_real(alpha, "alpha", low=1.0, strict=True)
        self.d = check_real(d, "d")
        self.k = check_k(k, allow_none=True)
        self._init_weights(c, truncate_c)
        self._init_ties(ties)
        self._init_bound(bound)
        self._init_pairwise(pairwise, average_precision)

    def _params(self) -> dict[str, Any]:
        return {
            "alpha": self.alpha,
            "d": self.d,
            "k": self.k,
            "c": self._c_param(),
            "truncate_c": self.truncate_c,
            "ties": self.ties,
            "bound": self.bound,
            "pairwise": self.pairwise,
            "average_precision": self.average_precision,
        }

    def _gains(self, y) -> np.ndarray:
        with np.errstate(over="ignore"):  # an overflow is refused by validate, naming y
            return np.maximum(check_finite_targets(y) - self.d, 0.0)

    def _discounts(self, n: int) -> np.ndarray:
        a = np.exp2(-np.arange(n, dtype=np.float64) / (self.alpha - 1.0))
        if self.k is not None:
            a[self.k :] = 0.0
        return a
