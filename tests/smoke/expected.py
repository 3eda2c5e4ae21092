"""Metric names each experiment's TINY run must write (those its component's tests and the
claims rely on); an experiment not listed is checked for the generic contract only."""

METRICS: dict[str, tuple[str, ...]] = {
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
