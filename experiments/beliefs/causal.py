"""P13 claim (2): belief formation causally drives action selection.

Per model: belief directions are fitted (difference of means, last prompt token) on 60% of
the templated scenarios; at the layer with the best held-out AUROC the unit belief
direction is added with strength alpha (a grid of both signs, in units of the median
residual norm at that layer) to the last prompt token, where the answer is chosen, and the
action is read as P(choose A) from the two options' next-token probabilities
(`jaxlab.beliefs.option_logprobs`) on the held-out scenarios. Controls at the same norm:
random directions and an orthogonal "topic" direction (box minus door scenarios, with the
belief direction projected out). The slope of the logit margin log P(A) - log P(B) against
alpha (the mean of the items' least-squares slopes) gets a percentile bootstrap interval over
items, and so does its paired difference from each control's |slope|; the dose-response
is monotone when the largest step of the item-mean P(choose A) against its direction stays
at 0 over a bootstrap of the items (the row's interval). Converse check:
projecting the belief direction out (at the best and all later stored layers) should move
choices towards chance, more than projecting out random directions (paired over items).
Competence gate (#55): every per-model row is testable only on a model whose plain choices
follow the evidence (`_setup.follows_evidence`: accuracy against k_A - k_B on the decided
items, Wilson interval above 1/2); otherwise it is `untestable`, never "no".
"""

from __future__ import annotations

import dataclasses

import jax
import matplotlib.pyplot as plt
import numpy as np

from experiments._harness import (
    Estimate,
    Precondition,
    Result,
    RunContext,
    all_of,
    at_least,
    at_most,
    bootstrap,
    excludes,
    gated,
    model_params,
    paired_bootstrap,
    superior,
)
from experiments.beliefs import _setup
from jaxlab import beliefs as bl

NAME = "beliefs_causal"
PAPER = "P13"
DESCRIPTION = "Steering the belief direction shifts the chosen action (dose-response, controls)"


@dataclasses.dataclass(frozen=True)
class Config(_setup.BaseConfig):
    """Settings of one run; the defaults are QUICK (items as in `beliefs_modulation`'s
    QUICK, reduced from the issue's size for the shared 2-core machine)."""

    test_fraction: float = 0.4
    alphas: tuple[float, ...] = (-1.0, -0.5, -0.25, 0.0, 0.25, 0.5, 1.0)
    n_random: int = 3
    n_resamples: int = 1000
    # a dose-response curve is monotone when no step of the mean P(choose A) goes against
    # its direction by more than this (a float tolerance, not a measured effect)
    monotone_tol: float = 1e-9


QUICK = Config()
TINY = Config(
    **_setup.TINY_SETTINGS, alphas=(-1.0, 0.0, 1.0), n_random=1, n_resamples=50
)  # the smoke tier
FULL = Config(
    **_setup.FULL_SETTINGS,
    alphas=(-1.0, -0.75, -0.5, -0.25, -0.125, 0.0, 0.125, 0.25, 0.5, 0.75, 1.0),
    n_random=10,
)


def full_work(config: Config) -> float:
    """The cache's model work (`_setup.full_work`) plus the steered and ablated answers."""
    n_scen = (config.max_evidence + 1) ** 2 * config.n_per_cell
    edits = len(config.alphas) * (2 + config.n_random) + 1 + config.n_random
    steer = n_scen * config.test_fraction * (100 + edits)
    params = sum(model_params(m) for m in config.models)
    return _setup.full_work(config) + steer * params


def _item_slopes(alphas, margins):
    """Per-item least-squares slopes of the margin vs alpha: margins (n, A) -> (n,). Their
    mean is `jaxlab.beliefs.dose_slope(alphas, margins)` (the slope is linear in the
    item-mean response), so a bootstrap of the mean over items resamples it over items."""
    da = np.asarray(alphas, np.float64) - np.mean(alphas)
    m = np.asarray(margins, np.float64)
    return (m - m.mean(1, keepdims=True)) @ da / (da @ da)


def _abs_mean(x, axis=-1):
    return np.abs(np.mean(x, axis=axis))


def against_curve(*curves, axis=-1):
    """The largest step of the mean dose-response against its direction (up or down,
    whichever is smaller): `curves[j]` holds the items' P(choose A) at the j-th alpha, the
    curve is their means along `axis`; 0 for a monotone curve. Vectorised for the harness's
    `bootstrap` (items resampled together across the alphas)."""
    steps = np.diff(np.stack([np.mean(c, axis=axis) for c in curves], axis=-1), axis=-1)
    return np.minimum(np.maximum(0.0, -steps.min(-1)), np.maximum(0.0, steps.max(-1)))


def _signed_minus_abs(x, y, axis=-1):
    return np.mean(x, axis=axis) - np.abs(np.mean(y, axis=axis))


def _unit(v):
    return v / np.linalg.norm(v)


def _steering_claim(claim, paper, mono, slope_test, vs, subject, competent, detail):
    """The potency and the signed steering claims: a monotone dose-response, the slope
    test `slope_test` = (name, constructor, slope estimate) against a zero slope, and the
    belief slope above every control's |slope| (`vs`: paired differences by control),
    gated on the model following the evidence (`competent`)."""
    part = {"claim": claim, "paper": paper}
    name, test, slope = slope_test
    checks = {
        "monotone": mono,
        name: test(slope, 0.0, null="no effect (slope 0)", subject="belief slope", **part),
    }
    for c, d in vs.items():
        checks[f"vs {c}"] = superior(d, subject, f"{c} direction |slope|", **part)
    return gated(all_of(checks, **part, detail=detail), competent)


def run(config: Config, key: jax.Array, ctx: RunContext) -> Result:
    alphas = np.asarray(config.alphas, np.float64)
    if not np.any(alphas == 0):
        raise ValueError("alphas: expected the grid to contain 0 (the plain run)")
    metrics: dict[str, float | Estimate] = {}
    claims = []
    fig, axes = plt.subplots(1, len(config.models), figsize=(5 * len(config.models), 3.4))
    axes = np.atleast_1d(axes)
    for mi, model in enumerate(config.models):
        tag = _setup.short(model)
        items = _setup.make_items(_setup.item_config(config, model), key)
        km = jax.random.fold_in(key, 200 + mi)
        run_ = _setup.model_run(
            model,
            items,
            n_layers=config.n_layers,
            max_new_tokens=config.max_new_tokens,
            chunk=config.chunk,
        )
        rows, train = _setup.scenario_split(items, km, config.test_fraction)
        bal = np.array([items[i].balance for i in rows])
        decided = bal != 0
        x = run_.states[:, rows, 0]  # (L, n, d) last prompt token
        fit = bl.fit_directions(x[:, decided], bal[decided] > 0, train=train[decided])
        best = int(np.argmax(np.asarray(fit.test_auroc)))
        layer = run_.layers[best]
        unit = np.asarray(fit.unit, np.float64)
        u = unit[best]
        scale = float(np.median(np.linalg.norm(x[best], axis=-1)))
        rng = np.random.default_rng(np.asarray(jax.random.key_data(km)))
        d = u.shape[0]
        fam = np.array([items[i].family for i in rows])
        topic = x[best][train & (fam == "box")].mean(0) - x[best][train & (fam == "door")].mean(0)
        topic = _unit(topic - (topic @ u) * u)
        rand = [_unit(rng.normal(size=d)) for _ in range(config.n_random)]
        dirs = np.stack([u, topic, *rand])  # (D, d) unit vectors
        vectors = (alphas[None, :, None] * scale * dirs[:, None, :]).reshape(-1, d)
        test = np.flatnonzero(~train)
        t_items = [items[rows[j]] for j in test]
        lp, _ = _setup.steer_scores(
            model, t_items, vectors, layers=[layer], mode="add", tag="steer"
        )
        margins = (lp[..., 0] - lp[..., 1]).reshape(len(dirs), alphas.size, -1)  # (D, A, n)
        p_a = 1 / (1 + np.exp(-margins))
        kk = jax.random.split(km, len(dirs))
        seed = int(jax.random.randint(kk[0], (), 0, 2**31 - 1))
        item_slopes = np.stack([_item_slopes(alphas, margins[i].T) for i in range(len(dirs))])
        slopes = [float(bl.dose_slope(alphas, margins[i].T)) for i in range(len(dirs))]
        slope = bootstrap(item_slopes[0], seed=seed, n_resamples=config.n_resamples)
        curve = p_a[0].mean(axis=1)
        # the largest step against the curve's direction, bootstrapped over the held-out
        # items (resampled together across the alphas)
        against = bootstrap(tuple(p_a[0]), against_curve, seed=seed, n_resamples=config.n_resamples)
        monotone = bool(against.value <= config.monotone_tol)
        control_max = max(abs(r) for r in slopes[1:])
        s, lo, hi = slope.value, slope.low, slope.high
        controls = ["topic"] + [f"random {i + 1}" for i in range(config.n_random)]
        vs_abs = {
            c: paired_bootstrap(
                item_slopes[0],
                item_slopes[i + 1],
                _abs_mean,
                seed=seed,
                n_resamples=config.n_resamples,
            )
            for i, c in enumerate(controls)
        }
        vs_signed = {
            c: bootstrap(
                (item_slopes[0], item_slopes[i + 1]),
                _signed_minus_abs,
                seed=seed,
                n_resamples=config.n_resamples,
            )
            for i, c in enumerate(controls)
        }
        metrics.update(
            {
                f"steer_slope_{tag}": slope,
                f"steer_slope_random_{tag}": float(np.mean(slopes[2:])),
                f"steer_slope_random_max_abs_{tag}": float(max(abs(r) for r in slopes[2:])),
                f"steer_slope_topic_{tag}": slopes[1],
                f"steer_abs_slope_minus_topic_{tag}": vs_abs["topic"],
                f"steer_layer_{tag}": layer,
                f"steer_scale_{tag}": scale,
                f"steer_auroc_{tag}": float(fit.test_auroc[best]),
                f"steer_monotone_{tag}": float(monotone),
                f"steer_against_{tag}": against,
                f"p_choose_a_min_alpha_{tag}": float(curve[0]),
                f"p_choose_a_max_alpha_{tag}": float(curve[-1]),
                f"steer_items_{tag}": float(test.size),
            }
        )
        # converse: project the belief direction out at the best and all later layers
        later = [i for i, li in enumerate(run_.layers) if li >= layer]
        abl_layers = [run_.layers[i] for i in later]
        abl = np.stack(
            [unit[later]]
            + [np.stack([_unit(rng.normal(size=d)) for _ in later]) for _ in range(config.n_random)]
        )
        lpa, _ = _setup.steer_scores(
            model, t_items, abl, layers=abl_layers, mode="project_out", tag="ablate"
        )
        plain = margins[0, int(np.flatnonzero(alphas == 0)[0])]
        dec_t = decided[test]
        sign = np.sign(bal[test][dec_t])

        def decisive_items(m, dec_t=dec_t):
            return np.abs(1 / (1 + np.exp(-m[dec_t])) - 0.5)

        def decisive(m):
            return float(np.mean(decisive_items(m)))

        def accuracy(m, dec_t=dec_t, sign=sign):
            return float(np.mean(np.sign(m[dec_t]) == sign))

        abl_m = lpa[..., 0] - lpa[..., 1]
        metrics.update(
            {
                f"decisiveness_plain_{tag}": decisive(plain),
                f"decisiveness_ablated_{tag}": decisive(abl_m[0]),
                f"decisiveness_random_ablated_{tag}": float(
                    np.mean([decisive(m) for m in abl_m[1:]])
                ),
                f"accuracy_plain_{tag}": accuracy(plain),
                f"accuracy_ablated_{tag}": accuracy(abl_m[0]),
                f"accuracy_random_ablated_{tag}": float(np.mean([accuracy(m) for m in abl_m[1:]])),
            }
        )
        mono = at_most(
            against,
            config.monotone_tol,
            null="a non-monotone dose-response",
            claim="monotone dose-response",
            paper="-",
            subject="mean P(choose A) over alpha",
        )
        potency = f"{tag}: steering the belief direction at the answer token shifts the chosen "
        potency += (
            "action monotonically (either sign), with a slope whose 95% CI excludes 0 and lies "
            "beyond every same-norm control's |slope| (random, orthogonal topic; paired "
            f"bootstrap of |slope| - |control slope| over items). {_setup.CAVEAT}"
        )
        paper = "belief formation causally drives action selection"
        competent = _setup.follows_evidence(run_, items, rows)
        claims.append(
            _steering_claim(
                potency,
                paper,
                mono,
                ("slope excludes 0", excludes, slope),
                vs_abs,
                "belief |slope|",
                competent,
                f"slope of logit P(A) per unit alpha {s:.2f} [{lo:.2f}, {hi:.2f}] at "
                f"layer {layer} (alpha unit = median residual norm {scale:.1f}); P(A) "
                f"{curve[0]:.2f} -> {curve[-1]:.2f} over alpha {alphas[0]:g}..{alphas[-1]:g}, "
                f"monotone: {monotone}; random slopes "
                f"{', '.join(f'{r:.2f}' for r in slopes[2:])}, topic {slopes[1]:.2f}; "
                f"n={test.size} held-out scenarios",
            )
        )
        signed = (
            f"{tag}: the shift has the belief's sign: steering towards 'evidence favours A' "
            "raises P(choose A) (slope CI above 0 and, paired over items, above every "
            f"control's |slope|). {_setup.CAVEAT}"
        )
        claims.append(
            _steering_claim(
                signed,
                f"{paper} (signed)",
                mono,
                ("slope above 0", at_least, slope),
                vs_signed,
                "belief slope",
                competent,
                f"slope {s:.2f} [{lo:.2f}, {hi:.2f}]; max control |slope| "
                f"{control_max:.2f}; behaviour on these items: accuracy vs evidence "
                f"{metrics.get(f'accuracy_plain_{tag}', float('nan')):.2f}",
            )
        )
        dp, da = metrics[f"decisiveness_plain_{tag}"], metrics[f"decisiveness_ablated_{tag}"]
        dr = metrics[f"decisiveness_random_ablated_{tag}"]
        n_dec = int(dec_t.sum())
        if n_dec >= 2:
            ablated = decisive_items(abl_m[0])
            vs_plain = paired_bootstrap(
                ablated, decisive_items(plain), seed=seed, n_resamples=config.n_resamples
            )
            vs_random = paired_bootstrap(
                ablated,
                np.mean([decisive_items(m) for m in abl_m[1:]], axis=0),
                seed=seed,
                n_resamples=config.n_resamples,
            )
        else:
            vs_plain = vs_random = Estimate.point(float("nan"), method="too few decided items")
        metrics[f"decisiveness_ablated_minus_plain_{tag}"] = vs_plain
        metrics[f"decisiveness_ablated_minus_random_{tag}"] = vs_random
        converse = (
            f"{tag}: projecting the belief direction out (best and later layers, answer "
            "token) moves decided choices towards chance more than projecting out random "
            f"directions (paired over decided items). {_setup.CAVEAT}"
        )
        part = {
            "claim": converse,
            "paper": "belief formation causally drives action selection (converse check)",
            "higher_is_better": False,
        }
        claims.append(
            gated(
                gated(
                    all_of(
                        {
                            "vs plain": superior(
                                vs_plain, "belief direction ablated", "no ablation", **part
                            ),
                            "vs random": superior(
                                vs_random,
                                "belief direction ablated",
                                "random directions ablated",
                                **part,
                            ),
                        },
                        claim=converse,
                        paper=part["paper"],
                        detail=f"mean |P(A) - 0.5| plain {dp:.3f}, belief ablated {da:.3f}, random "
                        f"ablated {dr:.3f}; accuracy vs evidence "
                        f"{metrics[f'accuracy_plain_{tag}']:.2f} -> "
                        f"{metrics[f'accuracy_ablated_{tag}']:.2f} at layers {abl_layers}",
                    ),
                    Precondition(
                        ">= 2 decided held-out items", n_dec >= 2, f"{n_dec} decided items"
                    ),
                ),
                competent,
            )
        )
        ax = axes[mi]
        labels = ["belief", "topic (orth.)"] + [f"random {i + 1}" for i in range(config.n_random)]
        for i, name in enumerate(labels):
            ax.plot(
                alphas,
                p_a[i].mean(axis=1),
                marker="o" if i == 0 else None,
                lw=2 if i == 0 else 1,
                alpha=1 if i < 2 else 0.5,
                label=name,
            )
        ax.axhline(0.5, color="grey", lw=0.5)
        ax.set_xlabel(f"alpha (x median residual norm {scale:.1f}), layer {layer}")
        ax.set_ylabel("mean P(choose A)")
        ax.set_title(tag)
        ax.legend(fontsize=7)
    fig.tight_layout()
    notes = (
        f"{_setup.CAVEAT} Steering and ablation act on the last prompt token only (its KV-cached "
        "prefix is shared by all conditions); the action is the two options' next-token "
        "probabilities renormalised."
    )
    return Result(metrics=metrics, claims=claims, figures={"dose_response": fig}, notes=notes)
