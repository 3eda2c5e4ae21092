"""Metric names each experiment's TINY run must write (those its component's tests and the
claims rely on); an experiment not listed is checked for the generic contract only."""

METRICS: dict[str, tuple[str, ...]] = {
    "interp_sae": (
        "smollm2/ev",
        "smollm2/l0",
        "smollm2/dead_frac",
        "smollm2/ce_loss_score",
        "smollm2/kl_score",
        "smollm2/pca_ev",
        "smollm2/pca_ce_loss_score",
        "smollm2/pca_kl_score",
    ),
    "laplex_exactness": (
        "max_rel_err_f64",
        "max_rel_err_f32",
        "max_grad_rel_err_f64",
        "max_rel_err_f32_sym_presorted",
    ),
    "laplex_gram": (
        "nll_laplex_test",
        "laplex_minus_diag_hi",
        "laplex_minus_grid_hi",
        "slq_rel_err_laplex",
    ),
    "laplex_head": ("acc_dense", "acc_random", "laplex1_minus_lowrank1_lo"),
    "laplex_scaling": ("loglog_slope", "loglog_slope_reused_plan"),
    "lm_pool": (
        "pool_disagreement",
        "pool_oracle_acc",
        "ppl_smollm2_135m_instruct",
        "logiqa_acc_smollm2_135m_instruct",
    ),
    "lm_sanity": (
        "kv_cache_max_abs_diff",
        "smollm2_ppl_text",
        "smollm2_ppl_shuffled",
        "gemma3_paris",
    ),
    "lowrank_agreement": ("linear_max_err", "tanh_err_slope"),
    "lowrank_exposure": ("initial_output_diff", "final_output_diff"),
    "lowrank_memory": ("history_decode_acc_invisible", "history_decode_acc_visible"),
    "lowrank_predictions": ("savings_ratio", "connectivity_signature_gap"),
    "topology_freesolv": ("rmse_hopse", "rmse_homp", "rmse_diff_upper", "speedup_epoch_vs_homp"),
    "topology_mutag": ("acc_hopse", "acc_homp", "acc_diff_lower", "speedup_vs_homp"),
    "topology_scaling": ("loglog_slope_hopse", "loglog_slope_homp", "speedup_vs_homp"),
    "topology_zinc": ("mae_hopse", "mae_homp", "mae_diff_upper", "speedup_epoch_vs_homp"),
}
