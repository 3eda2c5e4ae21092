"""Metric names each experiment's TINY run must write (those its component's tests and the
claims rely on); an experiment not listed is checked for the generic contract only."""

METRICS: dict[str, tuple[str, ...]] = {
    "beliefs_causal": (
        "steer_slope_smollm2",
        "steer_slope_ci_low_smollm2",
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
    "illusions_causal": ("smollm2/temporal/p_causal", "smollm2/corr2cause/p_entail_not_entailed"),
    "illusions_correlation": (
        "smollm2/neutral/phi",
        "smollm2/letter_corrected/phi",
        "smollm2/neutral/minority_excess",
    ),
    "illusions_randomness": (
        "smollm2/coin/pattern_claim_random",
        "smollm2/coin/streak_slope",
        "smollm2/walk/streak_slope",
    ),
    "illusions_sae": (
        "top_minus_random",
        "framing/analytic_minus_holistic/phi",
        "framing/overlap_p",
    ),
    "lengthprobe_decodable": (
        "natural_pairs",
        "natural_pairs_probe_wins",
        "remaining_spearman_smollm2_probe",
    ),
    "lengthprobe_retraction": (
        "jump_retraction",
        "jump_filler",
        "jump_diff_ci_low",
        "jump_position_only_smollm2",
    ),
    "lengthprobe_transfer": (
        "transfer_nat_to_syn",
        "transfer_syn_to_nat",
        "asymmetry",
        "asymmetry_low",
    ),
    "lowrank_agreement": ("linear_max_err", "tanh_err_slope"),
    "lowrank_exposure": ("initial_output_diff", "final_output_diff"),
    "lowrank_memory": ("history_decode_acc_invisible", "history_decode_acc_visible"),
    "lowrank_predictions": ("savings_ratio", "connectivity_signature_gap"),
}
