"""Classical baselines (P10): LDA, logistic regression, SVM, random forest on spectral
features (scikit-learn), and a tangent-space Riemannian classifier on covariances."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC

from jaxlab._core import as_array, check_ids, sklearn_seed

from ._evaluate import balanced_accuracy, macro_f1
from ._riemann import log_euclidean_mean, tangent_space

__all__ = ["CLASSICAL_MODELS", "TangentSpaceFeatures", "make_classifier", "cross_validate"]

CLASSICAL_MODELS = ("lda", "logreg", "svm", "rf", "tangent")
"""The classical classifiers `make_classifier` builds: LDA, logistic regression, SVM, random
forest, and tangent-space logistic regression."""


class TangentSpaceFeatures(TransformerMixin, BaseEstimator):
    """sklearn transformer: covariances `(N, C, C)` -> tangent vectors at the log-Euclidean
    mean of the training covariances (computed with jaxlab.eeg's own JAX geometry)."""

    def fit(self, x, y=None):
        self.reference_ = log_euclidean_mean(jnp.asarray(x))
        return self

    def transform(self, x):
        return np.asarray(tangent_space(jnp.asarray(x), self.reference_))


def make_classifier(name: str, *, key: jax.Array | None = None):
    """A fresh sklearn estimator for `name` in `CLASSICAL_MODELS`.

    `lda`, `logreg`, `svm`, `rf` take feature matrices `(N, D)`; `tangent` takes
    covariance matrices `(N, C, C)`. `key` (keyword-only) seeds the random ones (`rf`,
    which raises a `ValueError` without it); the others are deterministic and ignore it.
    """
    if name == "lda":
        return make_pipeline(
            StandardScaler(), LinearDiscriminantAnalysis(solver="lsqr", shrinkage="auto")
        )
    if name == "logreg":
        return make_pipeline(StandardScaler(), LogisticRegression(C=0.1, max_iter=2000))
    if name == "svm":
        return make_pipeline(StandardScaler(), SVC(C=1.0, kernel="rbf"))
    if name == "rf":
        if key is None:
            raise ValueError("key: the 'rf' classifier is random; pass key=jax.random.key(...)")
        return RandomForestClassifier(
            n_estimators=100, min_samples_leaf=2, random_state=sklearn_seed(key), n_jobs=1
        )
    if name == "tangent":
        return make_pipeline(
            TangentSpaceFeatures(), StandardScaler(), LogisticRegression(C=0.1, max_iter=2000)
        )
    raise ValueError(f"name: unknown model {name!r}; expected one of {CLASSICAL_MODELS}")


def cross_validate(name: str, inputs, y, folds, *, key: jax.Array | None = None):
    """Fit `name` on each fold's training rows, score the test rows.

    **Arguments:** `inputs` `(N, D)` features or `(N, C, C)` covariances (for `tangent`);
    `y` `(N,)` labels; `folds` list of `(train_idx, test_idx)`; `key` (keyword-only) for
    random classifiers (`make_classifier`; every fold's model gets the same key).

    `inputs` must be finite real numbers with at least one row, `y` integer labels >= 0,
    and each fold's indices integers in [0, N) (never wrapped); otherwise a `ValueError`
    names the argument.

    **Returns:** dict with per-fold lists `"bacc"` and `"f1"`.
    """
    if name not in CLASSICAL_MODELS:
        raise ValueError(f"name: unknown model {name!r}; expected one of {CLASSICAL_MODELS}")
    inputs = np.asarray(as_array("inputs", inputs, finite=True, nonempty=True, real=True))
    y = check_ids("y", y, None, what="class labels")
    if inputs.ndim not in (2, 3):
        raise ValueError(f"inputs: expected (N, D) or (N, C, C), received shape {inputs.shape}")
    if y.ndim != 1:
        raise ValueError(f"y: expected (N,) labels, received shape {y.shape}")
    if len(inputs) != len(y):
        raise ValueError(f"inputs/y: {len(inputs)} rows vs {len(y)} labels")
    if isinstance(folds, str | bytes) or not hasattr(folds, "__iter__"):
        raise ValueError(f"folds: expected (train_idx, test_idx) pairs, received {folds!r:.60}")
    checked = []
    for i, fold in enumerate(folds):
        if len(fold) != 2:
            raise ValueError(f"folds[{i}]: expected a (train_idx, test_idx) pair")
        train, test = (check_ids(f"folds[{i}]", idx, len(y), what="row indices") for idx in fold)
        if not train.size or not test.size:
            raise ValueError(f"folds[{i}]: expected non-empty train and test indices")
        checked.append((train, test))
    out = {"bacc": [], "f1": []}
    for train, test in checked:
        clf = make_classifier(name, key=key).fit(inputs[train], y[train])
        pred = clf.predict(inputs[test])
        out["bacc"].append(balanced_accuracy(y[test], pred))
        out["f1"].append(macro_f1(y[test], pred))
    return out
