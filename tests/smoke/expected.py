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
        for end in ("lo", "hi")
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
    "beliefs_causal": (
        "steer_slope_smollm2",
        "steer_slope_smollm2_lo",
        "decisiveness_ablated_smollm2",
    ),
    "beliefs_modulation": (
        "rho_modulation_smollm2",
        "rho_null95_smollm2",
        "rho_factual_action_smollm2",
        "tomi_accuracy_smollm2",
    ),
    "beliefs_monitoring": (
        "partial_r_monitoring_smollm2",
        "confidence_tie_smollm2",
        "change_rate_clear_smollm2",
    ),
    "biophys_currents": (
        "current_corr_start",
        "current_corr_lowpass_mean",
        "current_corr_gain",
        "current_corr_gain_lo",
        "current_corr_gain_hi",
        *(f"ablation_match_{s}_{loss}" for s in ("rate", "const") for loss in ("anchor", "trace")),
        "spike_match_heldout",
        "spike_match_heldout_gain_lo",
        "spike_match_heldout_start",
        "spike_match_heldout_true_current",
        "class1_current_corr_mean",
        "class1_spike_match_heldout",
    ),
    "biophys_localize": (
        "loc_err_um_mean",
        "loc_err_um_baseline",
        "current_corr_mean",
        "loc_err_um_mean_mismatch",
        "loc_err_um_mean_mismatch_hi",
        "loc_err_um_median_mismatch_lo",
        "loc_err_um_baseline_mismatch",
    ),
    "blackboard_discovery": (
        "blackboard/f1",
        "blackboard/f1_lo",
        "f1_diff_vs_master_slave_lo",
        "master_slave_all/f1",
        "bm25_rerank/f1",
        "bm25_rerank/tokens_per_task",
        "f1_diff_vs_bm25_rerank_lo",
        "f1_diff_vs_master_slave_all_lo",
        "agent_relevance_auroc",
        "lexical_free_tasks",
        "model_calls",
    ),
    "blackboard_e2e": (
        "blackboard/success",
        "blackboard/success_lo",
        "success_diff_vs_single_agent_lo",
        "success_diff_vs_retrieval_lo",
        "bm25_rerank/success",
        "agent_relevance_auroc",
        "oracle/success",
    ),
    "blackboard_scaling": (
        "model_calls",
        "margin_growth_lo",
        "margin_slope",
        "agent_relevance_auroc",
    ),
    "cells_genes": ("program_precision_at_20", "chance_precision"),
    "cells_rare": tuple(
        f"{pre}{k}"
        for pre in ("", "sim_")
        for k in (
            "auroc_diff_lecell_knn",
            "auroc_diff_lecell_knn_lo",
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
    "cslm_complexity": ("smollm2/chain_sum/kendall_tau", "pairs_growing"),
    "cslm_reliability": ("smollm2/ece", "smollm2/ece_lo", "fits", "fits_exponential_beats_linear"),
    "cslm_triad": (
        "smollm2/lm_verifier_precision",
        "smollm2/gap_oracle_vs_majority",
        "smollm2/gap_lm_verifier_vs_majority_n",
    ),
    "eeg_cross_session": tuple(
        f"{prefix}_{model}"
        for prefix in ("bacc_within", "bacc_cross", "bacc_within_aligned", "bacc_cross_aligned")
        for model in ("lda", "tangent", "eegnet", "shallow")
    )
    + (
        "bacc_within_mean",
        "bacc_cross_mean",
        "bacc_within_aligned_mean",
        "bacc_cross_aligned_mean",
        "within_aligned_minus_cross_aligned_lo",
        "cross_aligned_minus_cross_lo",
    ),
    "eeg_effect_size": (
        "bacc_state_at_zero_effect",
        "bacc_technique_at_zero_effect",
        "bacc_state_at_zero_effect_lo",
        "bacc_technique_at_zero_effect_hi",
        "bacc_state_mean_scale1",
    ),
    "eeg_state": (
        "bacc_state_eegnet",
        "bacc_state_shallow",
        "bacc_state_deep",
        "bacc_state_lda",
        "bacc_state_lda_lo",
        "bacc_state_eegnet_hi",
    ),
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
    "illusions_causal": ("smollm2/temporal/p_causal", "smollm2/corr2cause/p_entail_not_entailed"),
    "illusions_correlation": (
        "smollm2/neutral/phi",
        "smollm2/letter_corrected/phi",
        "smollm2/neutral/minority_excess",
    ),
    "illusions_randomness": (
        "smollm2/coin/pattern_claim_random",
        "smollm2/coin/streak_slope",
        "smollm2/coin/streak_slope_lo",
        "smollm2/walk/streak_slope",
        "smollm2/coin/p_continue_periodic",
    ),
    "illusions_sae": (
        "top_minus_random",
        "framing/analytic_minus_holistic/phi",
        "framing/overlap_p",
    ),
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
        "dimension",
        "nll_laplex_test",
        "laplex_minus_diag_hi",
        "laplex_minus_grid_hi",
        "laplex_minus_fa_hi",
        "slq_rel_err_laplex",
    ),
    "laplex_head": (
        "acc_dense",
        "acc_dense_lo",
        "acc_random",
        "lr_dense",
        "lr_laplex1",
        "laplex1_minus_lowrank1_lo",
        "laplex1_minus_dense_lo",
    ),
    "laplex_scaling": ("loglog_slope", "loglog_slope_reused_plan"),
    "lengthprobe_decodable": (
        "natural_pairs",
        "natural_pairs_probe_wins",
        "remaining_spearman_smollm2_probe",
    ),
    "lengthprobe_retraction": (
        "jump_retraction",
        "jump_filler",
        "jump_diff_lo",
        "jump_position_only_smollm2",
        "jump_diff_phrase0_smollm2",
    ),
    "lengthprobe_transfer": (
        "transfer_nat_to_syn",
        "transfer_syn_to_nat",
        "asymmetry",
        "asymmetry_lo",
    ),
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
    "observers_x29": (
        "mse_after_transient_two_stage",
        "mse_ratio_two_stage_vs_lmi_only",
        "violation_starts",
    ),
    "routing_ablation": (
        "text/aiq/latent",
        "text/aiq_drop/latent_no_comm_lo",
        "text/aiq_drop_no_comm_minus/latent_point_head_lo",
    ),
    "routing_groups": ("spearman_rho", "spearman_rho_lo", "n_groups"),
    "routing_haps_ablation": ("gain_over/no_sharing_lo", "gain_over/no_reward_lo"),
    "routing_haps_efficiency": (
        "haps_over_routing_only_time_ratio",
        "generated_fraction_of_model_mean",
    ),
    "routing_haps_main": (
        "haps_gain_vs_best_routing_only_lo",
        "haps_gain_vs_static_lora_lo",
    ),
    "routing_masking": (
        "text/drop_vs_least_baseline_hi",
        "text/masked_gain_vs_best_baseline_lo",
    ),
    "routing_text": (
        "aiq/latent",
        "aiq_gain_vs_best_baseline_lo",
        "rank_gain_vs_best_baseline_lo",
    ),
    "routing_vqa": (
        "aiq/latent",
        "aiq_gain_vs_best_baseline_lo",
        "rank_gain_vs_best_baseline_lo",
    ),
    "sensing_maps": (
        "pattern_alignment_lo",
        "pattern_alignment_diff",
        "offset_angle_deg",
        "offset_p_value",
        "geometry_effect",
        "geometry_effect_lo",
        "geometry_effect_n",
    ),
    "sensing_policy": (
        "visits_to_threshold_lexicographic",
        "reward_lexicographic",
        "unseen_reward_lexicographic",
        "visits_to_threshold_lexicographic_minus_exploit_hi",
        "reward_lexicographic_minus_weighted_lo",
    ),
    "stereo_faces": tuple(
        f"{k}_{method}"
        for method in ("bm", "sgm_jaxlab", "sgbm_opencv", "raft")
        for k in ("delta1", "rmse_mm", "ir_5mm", "l3de_mm")
    )
    + ("rank_disagreements_lo", "delta1_over_ir5_spread_hi"),
    "stereo_ipd": (
        "ipd_abs_err_mm_raft",
        "ipd_abs_err_mm_gt_disparity",
        "ipd_abs_err_exact_px_mm_sgm_jaxlab",
        "sigma_iod_for_10x_best",
        "sweep_min_low_mm_sigma0",
    ),
    "stereo_middlebury": ("bad2_sgm_jaxlab_on_opencv_valid", "bad2_sgbm_opencv_on_opencv_valid"),
    "temporal_consistency": ("rmse_slope", "ci_coverage_95", "plugin_sd_over_mc_sd"),
    "topology_freesolv": (
        "rmse_hopse",
        "rmse_homp",
        "rmse_diff_hi",
        "speedup_epoch_vs_homp",
        "step_speedup_lo",
        "flop_ratio_homp_over_hopse",
    ),
    "topology_mutag": (
        "acc_hopse",
        "acc_homp",
        "acc_diff_lo",
        "speedup_vs_homp",
        "step_speedup_lo",
        "flop_ratio_homp_over_hopse",
    ),
    "topology_scaling": (
        "loglog_slope_hopse",
        "loglog_slope_homp",
        "speedup_vs_homp",
        "speedup_largest_lo",
        "flop_ratio_homp_over_hopse",
    ),
    "topology_zinc": (
        "mae_hopse",
        "mae_homp",
        "mae_diff_hi",
        "speedup_epoch_vs_homp",
        "step_speedup_lo",
        "flop_ratio_homp_over_hopse",
    ),
}
