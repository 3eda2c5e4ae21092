"""Real data from wheels: MovieLens-100k (recbole) and Open Bandit samples (obp)."""

import importlib.metadata

import numpy as np
import pytest

import jaxlab.bandits as B
from jaxlab._core import wheel_file


def _raw_lines(package, suffix):
    dist = importlib.metadata.distribution(package)
    (f,) = [f for f in dist.files if str(f).endswith(suffix)]
    return dist.locate_file(f).read_text(encoding="utf-8", errors="replace").splitlines()


def test_movielens_100k_loads():
    ml = B.load_movielens_100k()
    assert ml.rating.shape == (100_000,)
    assert (ml.n_users, ml.n_items) == (943, 1682)
    assert set(np.unique(ml.rating).tolist()) == {1.0, 2.0, 3.0, 4.0, 5.0}
    # independent re-read of the raw file: ratings of user "196" on item "242" etc.
    raw = [line.split("\t") for line in _raw_lines("recbole", "ml-100k.inter")[1:]]
    assert len(raw) == 100_000
    np.testing.assert_allclose(ml.rating, [float(r[2]) for r in raw])
    assert ml.genres.sum(axis=1).min() >= 1
    assert "Drama" in ml.genre_names
    assert ml.genres[:, ml.genre_names.index("Drama")].sum() == 725
    # every user rated at least 20 movies (the dataset's construction rule)
    assert np.bincount(ml.user, minlength=943).min() >= 20


def test_movielens_item_dimensions():
    ml = B.load_movielens_100k()
    train = ml.user < 800
    feats, fdim, names, fnames = B.movielens_item_dimensions(ml, train)
    assert feats.shape == (1682, len(fdim)) == (1682, len(fnames))
    assert names == ("genre", "decade", "popularity", "mean rating")
    fd = np.asarray(fdim)
    for m in (1, 2, 3):  # single-valued dimensions: exactly one feature per item
        np.testing.assert_array_equal(feats[:, fd == m].sum(axis=1), 1)
    with pytest.raises(ValueError, match="train_mask"):
        B.movielens_item_dimensions(ml, train[:10])


@pytest.mark.parametrize("policy", ["random", "bts"])
def test_open_bandit_loads(policy):
    log = B.load_open_bandit(policy, "all")
    assert log.action.shape == (10_000,)
    assert log.n_items == 80
    assert set(np.unique(log.position).tolist()) == {0, 1, 2}
    assert set(np.unique(log.reward).tolist()) <= {0.0, 1.0}
    if policy == "random":
        np.testing.assert_allclose(log.pscore, 1 / 80)  # uniform logging over 80 items
    assert np.all((log.pscore > 0) & (log.pscore <= 1))
    assert log.item_features.shape[0] == 80
    assert len(log.item_feature_dim) == log.item_features.shape[1]
    assert log.user_features.shape[0] == 10_000
    clicks = sum(int(line.split(",")[4]) for line in _raw_lines("obp", f"{policy}/all/all.csv")[1:])
    assert int(log.reward.sum()) == clicks


def test_missing_wheel_names_the_package():
    with pytest.raises(FileNotFoundError, match="pip install"):
        wheel_file("no-such-package-jaxlab", "x.csv")
    with pytest.raises(ValueError, match="policy"):
        B.load_open_bandit("greedy")
