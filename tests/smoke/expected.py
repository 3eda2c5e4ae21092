"""Metric names each experiment's TINY run must write (those its component's tests and the
claims rely on); an experiment not listed is checked for the generic contract only."""

METRICS: dict[str, tuple[str, ...]] = {
    "lowrank_agreement": ("linear_max_err", "tanh_err_slope"),
    "lowrank_exposure": ("initial_output_diff", "final_output_diff"),
    "lowrank_memory": ("history_decode_acc_invisible", "history_decode_acc_visible"),
    "lowrank_predictions": ("savings_ratio", "connectivity_signature_gap"),
}
