"""Metric names each experiment's TINY run must write (those its component's tests and the
claims rely on); an experiment not listed is checked for the generic contract only."""

METRICS: dict[str, tuple[str, ...]] = {
    "bandits_movielens": (
        "reward_tdge",
        "reward_linucb",
        "reward_lints",
        "reward_egreedy",
        "coldstart_reward_tdge",
        "coldstart_reward_linucb",
    ),
    "bandits_obd": tuple(
        f"random/{est}_{pol}_{end}"
        for pol in ("tdge", "linucb", "lints", "egreedy")
        for est in ("ips", "snips", "dr")
        for end in ("low", "high")
    ),
    "bandits_synthetic": (
        "regret_tdge",
        "regret_linucb",
        "regret_lints",
        "regret_egreedy",
        "dim_recovery_tdge",
        "rounds_to_identify_tdge",
        "rounds_to_identify_linucb",
        "small_regret_tdge",
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
    "blackboard_discovery": ("blackboard/f1", "f1_diff_vs_master_slave/ci_low", "model_calls"),
    "blackboard_e2e": (
        "blackboard/success",
        "success_diff_vs_single_agent/ci_low",
        "oracle/success",
    ),
    "blackboard_scaling": ("model_calls",),
    "cslm_complexity": ("smollm2/chain_sum/kendall_tau", "pairs_growing"),
    "cslm_reliability": ("smollm2/ece", "fits"),
    "cslm_triad": ("smollm2/lm_verifier_precision", "smollm2/gap_program_vs_majority"),
    "lowrank_agreement": ("linear_max_err", "tanh_err_slope"),
    "lowrank_exposure": ("initial_output_diff", "final_output_diff"),
    "lowrank_memory": ("history_decode_acc_invisible", "history_decode_acc_visible"),
    "lowrank_predictions": ("savings_ratio", "connectivity_signature_gap"),
    "observers_x29": (
        "mse_after_transient_two_stage",
        "mse_ratio_two_stage_vs_lmi_only",
        "violation_starts",
    ),
    "sensing_maps": (
        "pattern_alignment_lo",
        "offset_angle_deg",
        "offset_p_value",
        "geometry_effect",
    ),
    "sensing_policy": (
        "steps_to_nectar_lexicographic",
        "reward_auc_lexicographic",
        "unseen_success_lexicographic",
    ),
    "temporal_consistency": ("rmse_slope", "ci_coverage_95", "plugin_sd_over_mc_sd"),
    "routing_ablation": ("text/aiq/latent", "text/aiq_drop/latent_no_comm_ci_low"),
    "routing_groups": ("spearman_rho", "spearman_p_exact", "n_groups"),
    "routing_haps_ablation": ("gain_over/no_sharing_ci_low", "gain_over/no_reward_ci_low"),
    "routing_haps_efficiency": (
        "haps_over_routing_only_time_ratio",
        "generated_fraction_of_model_mean",
    ),
    "routing_haps_main": (
        "haps_gain_vs_best_routing_only_ci_low",
        "haps_gain_vs_static_lora_ci_low",
    ),
    "routing_masking": (
        "text/drop_vs_least_baseline_ci_high",
        "text/masked_gain_vs_best_baseline_ci_low",
    ),
    "routing_text": (
        "aiq/latent",
        "aiq_gain_vs_best_baseline_ci_low",
        "rank_gain_vs_best_baseline_ci_low",
    ),
    "routing_vqa": (
        "aiq/latent",
        "aiq_gain_vs_best_baseline_ci_low",
        "rank_gain_vs_best_baseline_ci_low",
    ),
}
