"""The nineteen papers (abstracts: ../shared/seeds/papers.txt, in file order).

Each maps to (component, short title).
"""

PAPERS: dict[str, tuple[str, str]] = {
    "P1": ("lowrank", "Learning dynamics of low-rank RNNs in overlap space"),
    "P2": ("observers", "Provably stable neural-network observers"),
    "P3": ("temporal", "Sparse size-varying temporal networks: cycle counts and moments"),
    "P4": ("sensing", "Multimodal uncertainty-reduction maps (hawkmoth)"),
    "P5": ("cells", "LeCellModel: JEPA with SIGReg on single-cell expression"),
    "P6": ("routing", "Counterfactual-utility LLM routing (LatentRouter)"),
    "P7": ("cslm", "Token-complexity curves of small LMs"),
    "P8": ("blackboard", "Blackboard agents over a data lake"),
    "P9": ("laplex", "LAPLEX: exact trainable Laplace-kernel operators"),
    "P10": ("eeg", "Meditation-EEG benchmark (L-FAME)"),
    "P11": ("em", "Joint EM super-resolution and neuron segmentation"),
    "P12": ("biophys", "Differentiable biophysics fit to multi-electrode recordings"),
    "P13": ("beliefs", "Belief dominance in LLMs: metric, steering, self-report"),
    "P14": ("illusions", "Illusory correlations in LLMs with SAE features"),
    "P15": ("stereo", "HumanStereo: face stereo data, IR and L3DE metrics"),
    "P16": ("bandits", "TDGE: task-dimension-guided exploration"),
    "P17": ("lengthprobe", "Linear probes for remaining output length"),
    "P18": ("topology", "HOPSE: message-passing-free higher-order encodings"),
    "P19": ("routing", "HAPS: hierarchical architecture + LoRA routing"),
    # Shared components that several papers build on.
    "LM": ("lm", "Shared LLM runtime: SmolLM2 and Gemma-3 from GGUF"),
}


def paper_sort_key(paper: str) -> int:
    """P1 < P2 < ... < P19 (numeric, not lexical); unknown papers last."""
    try:
        return int(paper.lstrip("P"))
    except ValueError:
        return 10_000
