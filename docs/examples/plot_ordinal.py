"""
Ordinal regression
==================

:class:`bmrm.OrdinalRegressor` learns a linear score with the pairwise ordinal hinge (the
loss of SVM^rank over pairs of different level) and then the thresholds that cut the score
into levels, minimising the training mean absolute error. It is a scikit-learn estimator,
so ``GridSearchCV`` chooses lam here. The plot shows, for the test rows, the learnt score
against the true level, with the thresholds.
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.model_selection import GridSearchCV, train_test_split

import bmrm

rng = np.random.default_rng(0)
X = rng.normal(size=(1500, 8))
latent = X @ rng.normal(size=8) + rng.normal(scale=0.5, size=1500)
y = np.digitize(latent, [-2.0, -0.5, 0.5, 2.0])  # levels 0..4
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, random_state=0)

search = GridSearchCV(
    bmrm.OrdinalRegressor(), {"lam": [1e-4, 1e-3, 1e-2, 1e-1]}, scoring="neg_mean_absolute_error"
)
search.fit(X_train, y_train)
model = search.best_estimator_
print("lam chosen:", search.best_params_["lam"])
print("test MAE:", np.abs(model.predict(X_test) - y_test).mean())

scores = model.decision_function(X_test)
fig, ax = plt.subplots(figsize=(6, 4))
ax.scatter(scores, y_test + rng.uniform(-0.15, 0.15, len(y_test)), s=6, alpha=0.5)
for t in model.thresholds_:
    ax.axvline(t, color="k", lw=0.8)
ax.set_xlabel("learnt score (thresholds as lines)")
ax.set_ylabel("true level (jittered)")
fig.tight_layout()
plt.show()
