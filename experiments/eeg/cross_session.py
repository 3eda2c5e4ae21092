"""P10 task 3: cross-session adaptation (train pre, test post) with and without
Euclidean alignment per (subject, session).

A simulator check: the six-week shift and the effects are planted by jaxlab.eeg's
simulator. The arms: within-session (pre -> pre) and cross-session (pre -> post), each
with and without Euclidean alignment (EA); EA's benefit is cross + EA vs cross without
EA, the cross-session cost is cross + EA vs within + EA (both arms aligned, so the
comparison isolates the session change, not the alignment).

"For most models" is read from a simultaneous interval of the number of models whose arm
beats the other (`models_count`): per model a one-sided paired t over the folds; the lower
end counts the models that hold under Holm's correction over the models (family alpha
`1 - claim_level`), the upper end excludes the models whose interval lies at or below 0 at
the Bonferroni level; the value counts the models whose mean over folds is higher. Both
ends hold together with probability >= `2 claim_level - 1`. The claim holds when the lower
end reaches a strict majority, fails when the upper end is below it."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import jax
import jax.numpy as jnp
import numpy as np

from experiments._harness import (
    Estimate,
    Result,
    RunContext,
    all_of,
    at_least,
    best_of,
    paired_t,
    superior,
)
from experiments.eeg import _setup as common
from jaxlab import eeg

NAME = "eeg_cross_session"
PAPER = "P10"
DESCRIPTION = "Rest vs meditation trained on pre, tested on post, with/without Euclidean alignment"


@dataclasses.dataclass(frozen=True)
class Config(common.EegConfig):
    """Settings of one run; the defaults are QUICK (2 CPU cores, minutes)."""

    deep_models: tuple[str, ...] = ("eegnet", "shallow")
    deep_epochs: int = 4
    # the claims' one-sided level: the mean-over-models comparisons (paired t over the
    # folds) and the per-model comparisons behind "most models" (family level, Holm)
    claim_level: float = 0.95


QUICK = Config()
# the smoke tier
TINY = Config(n_subjects=6, block_seconds=8.0, n_folds=2, deep_epochs=1)
FULL = Config(**common.FULL_OVERRIDES, deep_models=("eegnet", "shallow", "deep"), deep_epochs=100)


def _aligned(tab):
    """Euclidean alignment of each (subject, session) recording with its own unlabeled
    epochs (both conditions pooled: labels are never used). The reference is shrunk 5 %
    towards the identity because average re-referencing makes it singular."""
    x = np.array(tab.x)
    subj, sess = np.asarray(tab.subject), np.asarray(tab.session)
    for s in np.unique(subj):
        for e in (0, 1):
            m = (subj == s) & (sess == e)
            if m.any():
                x[m] = np.asarray(eeg.euclidean_alignment(jnp.asarray(x[m]), shrinkage=0.05))
    return eqx_replace(tab, x)


def eqx_replace(tab, x):
    return eeg.EpochTable(
        x=jnp.asarray(x),
        subject=tab.subject,
        session=tab.session,
        condition=tab.condition,
        group=tab.group,
        keep=tab.keep,
        sfreq=tab.sfreq,
        ch_names=tab.ch_names,
    )


def models_count(
    a: Mapping[str, np.ndarray], b: Mapping[str, np.ndarray], level: float
) -> Estimate:
    """The number of models whose `a[m]` beats `b[m]` (per-fold scores, paired over the
    folds), with its simultaneous two-sided interval at `level`.

    Per model, the one-sided paired t claim "`a - b > 0`" at family alpha
    `(1 - level) / 2` over the models: the lower end is the number of models Holm's
    step-down rejects (`best_of`), the upper end `m` minus the number whose interval lies
    at or below 0 at the Bonferroni level `alpha / m`; the value counts the models with
    `mean(a - b) > 0` (it lies between both ends)."""
    names = list(a)
    if not names or set(names) != set(b):
        raise ValueError(f"a, b: expected the same non-empty models, received {names}, {list(b)}")

    def candidate(m):
        return lambda lv: superior(paired_t(a[m], b[m], lv), m, "baseline", claim=m, paper="-")

    rec = best_of({m: candidate(m) for m in names}, level=level)
    adjusted = {name: verdict for name, verdict, _ in rec.parts}
    low = sum(v == "holds" for v in adjusted.values())
    high = len(names) - sum(v == "fails" for v in adjusted.values())
    value = sum(float(np.mean(np.asarray(a[m]) - np.asarray(b[m]))) > 0 for m in names)
    folds = {np.asarray(a[m]).size for m in names}
    return Estimate(
        float(value),
        float(low),
        float(high),
        level,
        f"count of {len(names)} models: paired t over {max(folds)} folds per model, Holm "
        "(lower end) / Bonferroni (upper end) over the models",
        len(names),
    )


def _split(folds, sess, train_session, test_session):
    return [(tr[sess[tr] == train_session], te[sess[te] == test_session]) for tr, te in folds]


def run(config, key: jax.Array, ctx: RunContext) -> Result:
    k_sim, k_fold = jax.random.split(key)
    tab, cfg, kept = common.epochs_for(config, k_sim)
    y, sess = np.asarray(tab.condition), np.asarray(tab.session)
    folds = common.folds_for(tab.subject, config.n_folds, k_fold)
    metrics = {
        "n_subjects": cfg.n_subjects,
        "n_epochs": int(len(y)),
        "kept_fraction": kept,
        **{f"effect_{k}": v for k, v in cfg.effect_sizes().items()},
    }
    models = list(config.models)
    deep_models = list(config.deep_models)
    feats, covs = common.inputs_for(tab)
    k_rf = jax.random.fold_in(key, 11)  # the random forest's seed
    within = common.evaluate(
        models, feats, covs, y, _split(folds, sess, 0, 0), "bacc_within", metrics, key=k_rf
    )
    cross = common.evaluate(
        models, feats, covs, y, _split(folds, sess, 0, 1), "bacc_cross", metrics, key=k_rf
    )
    aligned_tab = _aligned(tab)
    feats_a, covs_a = common.inputs_for(aligned_tab)
    within_a = common.evaluate(
        models,
        feats_a,
        covs_a,
        y,
        _split(folds, sess, 0, 0),
        "bacc_within_aligned",
        metrics,
        key=k_rf,
    )
    aligned = common.evaluate(
        models,
        feats_a,
        covs_a,
        y,
        _split(folds, sess, 0, 1),
        "bacc_cross_aligned",
        metrics,
        key=k_rf,
    )
    # deep models: one training on the pre session scores both the within (pre) and the
    # cross (post) test sets; a second training on aligned epochs scores both with EA
    k_deep = jax.random.fold_in(key, 7)
    epochs = int(config.deep_epochs)
    deep_folds = [(tr[sess[tr] == 0], te[sess[te] == 0], te[sess[te] == 1]) for tr, te in folds]
    dw, dc = common.evaluate_deep(
        deep_models,
        common.deep_inputs(tab),
        y,
        tab.subject,
        deep_folds,
        ("bacc_within", "bacc_cross"),
        metrics,
        k_deep,
        ctx=ctx,
        epochs=epochs,
        tag="cross_",
    )
    dwa, da = common.evaluate_deep(
        deep_models,
        common.deep_inputs(aligned_tab),
        y,
        tab.subject,
        deep_folds,
        ("bacc_within_aligned", "bacc_cross_aligned"),
        metrics,
        k_deep,
        ctx=ctx,
        epochs=epochs,
        tag="aligned_",
    )
    within.update(dw)
    cross.update(dc)
    within_a.update(dwa)
    aligned.update(da)
    names = models + deep_models
    arms = {"within": within, "cross": cross, "within_aligned": within_a, "aligned": aligned}
    mean = {k: {m: float(np.mean(v[m])) for m in names} for k, v in arms.items()}
    # per fold, the mean over the models (the folds pair the arms: same held-out subjects)
    per_fold = {k: np.mean([v[m] for m in names], axis=0) for k, v in arms.items()}
    mw, mc, mwa, ma = (float(np.mean(per_fold[k])) for k in arms)
    metrics.update(
        bacc_within_mean=mw,
        bacc_cross_mean=mc,
        bacc_within_aligned_mean=mwa,
        bacc_cross_aligned_mean=ma,
    )
    level = 2 * float(config.claim_level) - 1  # two-sided; its one end the claim's bound
    gap = paired_t(per_fold["within_aligned"], per_fold["aligned"], level)
    gain = paired_t(per_fold["aligned"], per_fold["cross"], level)
    metrics.update(within_aligned_minus_cross_aligned=gap, cross_aligned_minus_cross=gain)
    drop = models_count(within_a, aligned, level)
    helped = models_count(aligned, cross, level)
    metrics.update(
        n_models_within_aligned_gt_cross_aligned=drop,
        n_models_aligned_gt_cross=helped,
    )
    closed = "undefined (no mean drop)"
    if mwa > mc:  # fraction of the cross-session drop (to within + EA) that EA recovers
        metrics["gap_closed_fraction"] = (ma - mc) / (mwa - mc)
        closed = f"{metrics['gap_closed_fraction']:.2f}"
    per_model = "; ".join(
        f"{m} {mean['within'][m]:.3f}/{mean['within_aligned'][m]:.3f}/"
        f"{mean['cross'][m]:.3f}/{mean['aligned'][m]:.3f}"
        for m in names
    )
    # a strict majority of the models (the count's simultaneous interval over the models,
    # Holm / Bonferroni) and the mean over the models, paired over the folds (t interval):
    # both must hold
    majority = len(names) // 2 + 1
    k = len(per_fold["cross"])

    def most(count, what, null="no more than half the models"):
        return at_least(
            count,
            majority,
            null=null,
            claim=f"{what} for most models",
            paper="-",
            subject=f"models with {what}",
            detail=f"a strict majority is {majority} of {len(names)}; lower end: models "
            "significant after Holm's correction over the models",
        )

    def mean_gap(diff, method, baseline):
        return superior(diff, method, baseline, claim=f"mean {method} > mean {baseline}", paper="-")

    claims = [
        all_of(
            {
                "most models": most(drop, "within + EA > cross + EA"),
                "mean over models": mean_gap(gap, "within-session + EA", "cross-session + EA"),
            },
            claim="[simulator check, planted session shift] cross-session decoding (train "
            "pre, test post) is harder than within-session decoding, both with Euclidean "
            "alignment, for most models",
            paper="task 3 evaluates generalisation across the six-week gap (no numbers in "
            "the abstract)",
            detail=f"within + EA > cross + EA for {drop.value:g}/{len(names)} models by the "
            f"mean (Holm-significant {drop.low:g}); mean "
            f"over models within + EA {mwa:.3f}, cross + EA {ma:.3f} (paired over {k} "
            f"folds); planted effects, not real EEG (within/within + EA/cross/cross + EA: "
            f"{per_model})",
        ),
        all_of(
            {
                "most models": most(helped, "cross + EA > cross"),
                "mean over models": mean_gap(gain, "cross + EA", "cross without alignment"),
            },
            claim="[simulator check, planted session shift] Euclidean alignment improves "
            "cross-session (pre -> post) decoding for most models",
            paper="cross-session adaptation benchmarked as task 3 (no numbers in the abstract)",
            detail=f"cross + EA > cross for {helped.value:g}/{len(names)} models by the mean "
            f"(Holm-significant {helped.low:g}); mean over "
            f"models cross {mc:.3f}, cross + EA {ma:.3f} (paired over {k} folds); fraction "
            f"of the within + EA to cross gap closed {closed}; planted effects, not real EEG",
        ),
    ]
    fig = common.bar_figure(
        {
            "within (pre->pre)": within,
            "within + EA": within_a,
            "cross (pre->post)": cross,
            "cross + EA": aligned,
        },
        0.5,
        "eeg_cross_session: held-out subjects (simulated L-FAME)",
    )
    notes = (
        common.SIM_NOTE + " Folds are leave-subjects-out: train on the pre session of "
        "training subjects, test on the post (cross) or pre (within) session of held-out "
        "subjects. EA = Euclidean alignment (He & Wu 2019; reference shrunk 5 %) of each "
        "subject-session with its own unlabeled epochs (both conditions pooled), applied "
        "to the raw epochs (both the within and the cross arm, so that within + EA vs cross + "
        "EA isolates the session change) before feature extraction or deep training; after EA the "
        "spectral features are computed on the whitened (channel-mixed) signals. The "
        "simulated six-week shift (SimulationConfig): meditation effects x(1 + "
        f"training_gain={cfg.training_gain:g}); trait effect: post-session rest carries "
        f"trait_effect={cfg.trait_effect:g} of the trained theta/alpha state effect; "
        f"per-channel log-gain SD session_shift={cfg.session_shift:g}; overall log-scale "
        f"SD session_scale={cfg.session_scale:g}; cap displacement SD "
        f"montage_shift={cfg.montage_shift:g} head radii; 1/f exponent change "
        f"exponent_shift={cfg.exponent_shift:g}; alpha-peak change SD "
        f"alpha_peak_shift={cfg.alpha_peak_shift:g} Hz. This run: {cfg.n_subjects} "
        f"subjects, {cfg.block_seconds:.0f} s blocks, deep models {deep_models} for at "
        f"most {epochs} epochs (QUICK: short deep training, no DeepConvNet). Effect "
        f"sizes: {cfg.effect_sizes()}."
    )
    return Result(metrics=metrics, claims=claims, figures={"cross_session": fig}, notes=notes)
