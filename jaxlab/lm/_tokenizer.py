"""Tokenizers rebuilt from GGUF metadata with the `tokenizers` library.

Two GGUF tokenizer models are supported:

- `gpt2` (byte-level BPE with merges): the pre-tokenizer split is chosen by the
  GGUF's `tokenizer.ggml.pre`: `qwen2` (Qwen2/2.5) splits with Qwen2's regex
  (letters with at most one leading non-letter, single digits, punctuation runs,
  newline runs, whitespace) before the byte-level mapping, as llama.cpp and Qwen's
  own tokenizer do; otherwise (`smollm`: SmolLM2) digits split individually, then
  the GPT-2 byte-level pre-tokenizer, as in SmolLM2's own tokenizer;
- `llama` (SentencePiece BPE with scores and byte fallback; Gemma-3): spaces
  become "▁", merges are derived from the piece scores (a pair merges when the
  concatenation is a piece; higher score merges first), unknown bytes fall back
  to `<0xNN>` tokens.

Control tokens (GGUF token_type 3) are registered as special tokens: without this
`<|im_start|>` would be split into ordinary pieces and chat prompts degrade.
The chat template stored in the GGUF is rendered with a sandboxed jinja2.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["Tokenizer"]

_NORMAL, _UNKNOWN, _CONTROL, _USER, _UNUSED, _BYTE = 1, 2, 3, 4, 5, 6

# Qwen2's pre-tokenizer split (tokenizer.json of Qwen2/2.5; llama.cpp's LLAMA_VOCAB_PRE_TYPE_QWEN2).
_QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)


_TEMPLATE_MAX_CHARS = 1_000_000


def _token_id(gguf_file, key: str, default: int | None, vocab_size: int) -> int:
    """A token id from the metadata, checked to lie in [0, vocab_size) (no wrap-around)."""
    v = gguf_file.require(key) if default is None else gguf_file.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < vocab_size:
        raise ValueError(
            f"GGUF file {str(gguf_file.path)!r}: {key} must be a token id in "
            f"[0, {vocab_size}), got {v!r}"
        )
    return v


def _template_env(limit: int):
    """A sandboxed jinja2 environment whose `*` and `**` cannot build huge values."""
    from jinja2.exceptions import SecurityError
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class _Bounded(ImmutableSandboxedEnvironment):
        intercepted_binops = frozenset({"*", "**"})

        def call_binop(self, context, operator, left, right):
            if operator == "**" and abs(float(right)) > 64:
                raise SecurityError(f"exponent {right!r} is too large")
            if operator == "*":
                for seq, n in ((left, right), (right, left)):
                    if (
                        isinstance(seq, str | list | tuple)
                        and isinstance(n, int)
                        and len(seq) * n > limit
                    ):
                        raise SecurityError(f"repetition to {len(seq) * n} items")
            return super().call_binop(context, operator, left, right)

    def raise_exception(msg):
        raise ValueError(f"chat template: {msg}")

    env = _Bounded(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    return env


class Tokenizer:
    """Text <-> token ids for a GGUF model, with its chat template.

    **Attributes:**
        bos_id, eos_id, pad_id: special token ids (pad may equal eos).
        add_bos: whether `encode` prepends BOS by default (from the GGUF).
        stop_ids: ids that end generation (EOS plus end-of-turn tokens).
        vocab_size: number of ids.
    """

    def __init__(
        self,
        backend: Any,
        *,
        bos_id: int,
        eos_id: int,
        pad_id: int,
        add_bos: bool,
        chat_template: str | None,
        stop_ids: Sequence[int],
        special_ids: Sequence[int],
    ):
        self.backend = backend
        self.bos_id = int(bos_id)
        self.eos_id = int(eos_id)
        self.pad_id = int(pad_id)
        self.add_bos = bool(add_bos)
        self.chat_template = chat_template
        self.stop_ids = tuple(int(i) for i in stop_ids)
        self.special_ids = frozenset(int(i) for i in special_ids)
        self.vocab_size = int(backend.get_vocab_size(with_added_tokens=True))

    @classmethod
    def from_gguf(cls, gguf_file) -> Tokenizer:
        """Build the tokenizer stored in an open `GGUFFile`.

        **Raises:**
            ValueError: missing or malformed tokenizer metadata (token types outside
                0..6, ids outside the vocabulary, merges the BPE model refuses); the
                message names the file.
        """
        where = str(gguf_file.path)
        try:
            return cls._from_gguf(gguf_file)
        except ValueError as e:
            if where in str(e):
                raise
            raise ValueError(f"GGUF file {where!r}: {e}") from e
        except Exception as e:  # the tokenizers package raises TypeError / Exception
            raise ValueError(
                f"GGUF file {where!r}: the tokenizer metadata cannot be built into a "
                f"tokenizer ({type(e).__name__}: {str(e)[:200]})"
            ) from e

    @classmethod
    def _from_gguf(cls, gguf_file) -> Tokenizer:
        from tokenizers import AddedToken, Regex, decoders, models, normalizers, pre_tokenizers
        from tokenizers import Tokenizer as HFTokenizer

        meta = gguf_file.metadata
        kind = gguf_file.require("tokenizer.ggml.model")
        pieces: list[str] = list(gguf_file.require("tokenizer.ggml.tokens"))
        types = list(meta.get("tokenizer.ggml.token_type", [_NORMAL] * len(pieces)))
        if len(types) != len(pieces):
            raise ValueError("GGUF tokenizer: token_type and tokens have different lengths")
        bad = [i for i, t in enumerate(types) if not (isinstance(t, int) and 0 <= t <= _BYTE)]
        if bad:
            raise ValueError(
                f"GGUF tokenizer: token_type[{bad[0]}] is {types[bad[0]]!r} "
                f"(llama.cpp's token types are 0..{_BYTE}; {len(bad)} entries outside)"
            )
        vocab = {p: i for i, p in enumerate(pieces)}
        unk_id = meta.get("tokenizer.ggml.unknown_token_id")
        if unk_id is not None:
            unk_id = _token_id(gguf_file, "tokenizer.ggml.unknown_token_id", None, len(pieces))
        if kind == "gpt2":
            merges = [tuple(m.split(" ", 1)) for m in gguf_file.require("tokenizer.ggml.merges")]
            tok = HFTokenizer(models.BPE(vocab, merges, fuse_unk=False))
            if meta.get("tokenizer.ggml.pre") == "qwen2":
                tok.pre_tokenizer = pre_tokenizers.Sequence(
                    [
                        pre_tokenizers.Split(Regex(_QWEN2_SPLIT), behavior="isolated"),
                        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
                    ]
                )
            else:
                tok.pre_tokenizer = pre_tokenizers.Sequence(
                    [
                        pre_tokenizers.Digits(individual_digits=True),
                        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
                    ]
                )
            tok.decoder = decoders.ByteLevel()
        elif kind == "llama":
            scores = list(gguf_file.require("tokenizer.ggml.scores"))
            mergeable = [i for i, t in enumerate(types) if t in (_NORMAL, _USER)]
            merges = []
            for i in mergeable:
                p = pieces[i]
                for cut in range(1, len(p)):
                    a, b = p[:cut], p[cut:]
                    ia, ib = vocab.get(a), vocab.get(b)
                    if (
                        ia is not None
                        and ib is not None
                        and types[ia] in (_NORMAL, _USER)
                        and types[ib] in (_NORMAL, _USER)
                    ):
                        merges.append((-scores[i], i, ia, ib, a, b))
            merges.sort()
            tok = HFTokenizer(
                models.BPE(
                    vocab,
                    [(m[4], m[5]) for m in merges],
                    unk_token=pieces[unk_id] if unk_id is not None else None,
                    fuse_unk=True,
                    byte_fallback=True,
                )
            )
            tok.normalizer = normalizers.Replace(Regex(" "), "\u2581")
            tok.decoder = decoders.Sequence(
                [
                    decoders.Replace("\u2581", " "),
                    decoders.ByteFallback(),
                    decoders.Fuse(),
                ]
            )
        else:
            raise ValueError(f"GGUF tokenizer model {kind!r} is not supported (gpt2, llama)")
        special = [i for i, t in enumerate(types) if t in (_CONTROL, _UNKNOWN)]
        tok.add_special_tokens(
            [AddedToken(pieces[i], special=True, normalized=False) for i in special]
        )
        # llama.cpp matches user-defined pieces (Gemma's "\n\n", runs of spaces) on the
        # raw text before the model's own segmentation; added tokens do the same.
        user = [i for i, t in enumerate(types) if t == _USER]
        if user:
            tok.add_tokens([AddedToken(pieces[i], normalized=False) for i in user])
        eos = _token_id(gguf_file, "tokenizer.ggml.eos_token_id", None, len(pieces))
        bos = _token_id(gguf_file, "tokenizer.ggml.bos_token_id", eos, len(pieces))
        pad = _token_id(gguf_file, "tokenizer.ggml.padding_token_id", eos, len(pieces))
        stops = [eos] + [
            vocab[s]
            for s in ("<|im_end|>", "<end_of_turn>", "<|eot_id|>", "<|endoftext|>")
            if s in vocab and types[vocab[s]] == _CONTROL
        ]
        return cls(
            tok,
            bos_id=bos,
            eos_id=eos,
            pad_id=pad,
            add_bos=bool(meta.get("tokenizer.ggml.add_bos_token", False)),
            chat_template=meta.get("tokenizer.chat_template"),
            stop_ids=sorted(set(stops)),
            special_ids=special,
        )

    def encode(self, text: str, *, add_bos: bool | None = None) -> list[int]:
        """Token ids of `text`; special-token strings in it become their ids.

        **Arguments:**
            text: the string.
            add_bos: prepend BOS; default: the GGUF's `add_bos_token` setting.
        """
        if not isinstance(text, str):
            raise ValueError(f"text must be a str, got {type(text).__name__}")
        ids = self.backend.encode(text, add_special_tokens=False).ids
        if self.add_bos if add_bos is None else add_bos:
            ids = [self.bos_id, *ids]
        return list(ids)

    def decode(self, ids: Sequence[int], *, skip_special_tokens: bool = True) -> str:
        """The text of `ids` (special tokens dropped unless `skip_special_tokens=False`)."""
        ids = [int(i) for i in ids]
        bad = [i for i in ids if not 0 <= i < self.vocab_size]
        if bad:
            raise ValueError(f"ids must lie in [0, {self.vocab_size}), got {bad[:5]}")
        return self.backend.decode(ids, skip_special_tokens=skip_special_tokens)

    def apply_chat_template(
        self, messages: Sequence[dict[str, str]], *, add_generation_prompt: bool = True
    ) -> str:
        """Render `messages` ([{"role": ..., "content": ...}, ...]) with the GGUF's template.

        **Raises:**
            ValueError: the model ships no chat template (e.g. Gemma-3-270M, a base
                model), or a message is malformed.
        """
        if not self.chat_template:
            raise ValueError(
                "this model's GGUF has no chat template (a base model): "
                "use a plain completion prompt"
            )
        for m in messages:
            if not isinstance(m, dict) or "role" not in m or "content" not in m:
                raise ValueError(f"messages must be dicts with 'role' and 'content', got {m!r}")
        from jinja2.exceptions import SecurityError

        # The output is bounded: a template may repeat a string (`"x" * 10**10`) or loop;
        # both are cut off with a ValueError instead of exhausting memory.
        limit = _TEMPLATE_MAX_CHARS + 4 * sum(len(str(m["content"])) for m in messages)
        template = _template_env(limit).from_string(self.chat_template)
        parts, total = [], 0
        try:
            for piece in template.generate(
                messages=list(messages),
                add_generation_prompt=add_generation_prompt,
                bos_token=self.backend.id_to_token(self.bos_id),
                eos_token=self.backend.id_to_token(self.eos_id),
            ):
                total += len(piece)
                if total > limit:
                    raise ValueError(
                        f"chat template: output exceeds {limit} characters (a runaway template)"
                    )
                parts.append(piece)
        except SecurityError as e:
            raise ValueError(f"chat template: {e}") from None
        return "".join(parts)
