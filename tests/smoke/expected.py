"""Metric names each experiment's TINY run must write (those its component's tests and the
claims rely on); an experiment not listed is checked for the generic contract only."""

METRICS: dict[str, tuple[str, ...]] = {
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
    "lowrank_agreement": ("linear_max_err", "tanh_err_slope"),
    "lowrank_exposure": ("initial_output_diff", "final_output_diff"),
    "lowrank_memory": ("history_decode_acc_invisible", "history_decode_acc_visible"),
    "lowrank_predictions": ("savings_ratio", "connectivity_signature_gap"),
}
