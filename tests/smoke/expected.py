"""Metric names each experiment's TINY run must write (those its component's tests and the
claims rely on); an experiment not listed is checked for the generic contract only."""

METRICS: dict[str, tuple[str, ...]] = {
    "biophys_currents": (
        "current_corr_start",
        "current_corr_lowpass_mean",
        "current_corr_gain",
        "current_corr_gain_low",
        "current_corr_gain_high",
        *(f"ablation_match_{s}_{loss}" for s in ("rate", "const") for loss in ("anchor", "trace")),
    ),
    "biophys_localize": ("loc_err_um_mean", "loc_err_um_baseline", "current_corr_mean"),
    "cells_genes": ("program_precision_at_20", "chance_precision"),
    "cells_rare": tuple(
        f"{pre}{k}"
        for pre in ("", "sim_")
        for k in (
            "auroc_diff_lecell_knn",
            "auroc_diff_lecell_iforest",
            "auroc_lecell_10pct_s1",
            "auroc_lecell_10pct_mean",
            "dose_spearman_lecell_residualized",
        )
    ),
    "cells_scib": tuple(
        f"{pre}scib_{part}_{k}"
        for pre in ("", "sim_")
        for part in ("bio", "batch", "total")
        for k in (
            "lecell",
            "pca",
            "vae_nobatch",
            "vae",
            "diff_lecell_pca",
            "diff_lecell_vae_nobatch",
        )
    ),
    "eeg_cross_session": tuple(
        f"{prefix}_{model}"
        for prefix in ("bacc_within", "bacc_cross", "bacc_cross_aligned")
        for model in ("lda", "tangent", "eegnet", "shallow")
    )
    + ("bacc_within_mean", "bacc_cross_mean", "bacc_cross_aligned_mean"),
    "eeg_effect_size": (
        "bacc_state_at_zero_effect",
        "bacc_technique_at_zero_effect",
        "bacc_state_at_zero_effect_ci_low",
        "bacc_technique_at_zero_effect_ci_high",
        "bacc_state_mean_scale1",
    ),
    "eeg_state": ("bacc_state_eegnet", "bacc_state_shallow", "bacc_state_deep", "bacc_state_lda"),
    "eeg_technique": ("bacc_technique_eegnet", "bacc_technique_shallow", "bacc_technique_lda"),
    # the P11 contract keys (issue 14): <metric>_<method>_x<k>, the noisy regime at x4
    "em_joint": tuple(
        f"{metric}_{method}_{setting}"
        for setting in ("x2", "x4", "x4_noisy")
        for method in ("bicubic", "separate", "joint", "joint_diffusion")
        for metric in ("psnr", "ssim", "voi", "arand", "cremi")
    ),
    "em_t0": tuple(
        f"{metric}_t0_{t}" for t in (0, 3, 10) for metric in ("voi", "arand", "cremi", "emb_mse")
    )
    + ("psnr", "ssim"),
    "lowrank_agreement": ("linear_max_err", "tanh_err_slope"),
    "lowrank_exposure": ("initial_output_diff", "final_output_diff"),
    "lowrank_memory": ("history_decode_acc_invisible", "history_decode_acc_visible"),
    "lowrank_predictions": ("savings_ratio", "connectivity_signature_gap"),
    "stereo_faces": tuple(
        f"{k}_{method}"
        for method in ("bm", "sgm_jaxlab", "sgbm_opencv", "raft")
        for k in ("delta1", "rmse_mm", "ir_5mm", "l3de_mm")
    ),
    "stereo_ipd": (
        "ipd_abs_err_mm_raft",
        "ipd_abs_err_mm_gt_disparity",
        "ipd_abs_err_exact_px_mm_sgm_jaxlab",
        "sigma_iod_for_10x_best",
    ),
    "stereo_middlebury": ("bad2_sgm_jaxlab_on_opencv_valid", "bad2_sgbm_opencv_on_opencv_valid"),
}
