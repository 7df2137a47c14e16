"""Llama: rotary positions, RMSNorm, a SwiGLU feed-forward; the parent of the decoders here."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, ClassVar

from attnviz.errors import AttnvizError
from attnviz.model.config import DecoderConfig, check_activation, shown
from attnviz.model.families.kinds import DecoderFamily
from attnviz.model.families.reader import DecoderReader
from attnviz.model.gguf.metadata import BadGguf
from attnviz.model.rope_config import Rope, read_rope

if TYPE_CHECKING:
    import numpy as np

NAMES = [
    ("embed_tokens.", "tokens."),
    ("layers.{i}.input_layernorm.", "layers.{i}.norm1."),
    ("layers.{i}.self_attn.q_proj.", "layers.{i}.attention.q_proj."),
    ("layers.{i}.self_attn.k_proj.", "layers.{i}.attention.k_proj."),
    ("layers.{i}.self_attn.v_proj.", "layers.{i}.attention.v_proj."),
    ("layers.{i}.self_attn.o_proj.", "layers.{i}.attention.out_proj."),
    ("layers.{i}.self_attn.q_norm.", "layers.{i}.attention.q_norm."),  # Qwen3
    ("layers.{i}.self_attn.k_norm.", "layers.{i}.attention.k_norm."),
    ("layers.{i}.post_attention_layernorm.", "layers.{i}.norm2."),
    ("layers.{i}.mlp.gate_proj.", "layers.{i}.ff_gate."),
    ("layers.{i}.mlp.up_proj.", "layers.{i}.ff_in."),
    ("layers.{i}.mlp.down_proj.", "layers.{i}.ff_out."),
    ("norm.", "final_norm."),
]
IGNORED = r"^(rotary_emb\.|layers\.\d+\.self_attn\.rotary_emb\.)"
# A GGUF tensor's name inside a block -> transformers' name inside `model.layers.N.`
GGUF_BLOCK = {
    "attn_norm": "input_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "attn_q_norm": "self_attn.q_norm",
    "attn_k_norm": "self_attn.k_norm",
    "ffn_norm": "post_attention_layernorm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
GGUF_TOP = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
}


def gguf_undo(gguf_name: str, values: np.ndarray, config: dict[str, Any]) -> np.ndarray:
    """Q and K as transformers holds them: llama.cpp's converter reorders their rows within
    each head (from rotating halves to rotating pairs); put them back."""
    if not re.search(r"\.attn_[qk]\.(weight|bias)$", gguf_name):
        return values
    heads = config["num_attention_heads"]
    if ".attn_k." in gguf_name:
        heads = config["num_key_value_heads"]
    rows = values.shape[0]
    if rows % (2 * heads):
        raise BadGguf(f"{gguf_name} has {rows} rows, not two per rotary pair of {heads} heads")
    # (heads, 2, hs/2, C) stored as (heads, hs/2, 2, C): swap the two middle axes back
    paired = values.reshape(heads, rows // heads // 2, 2, *values.shape[1:])
    return paired.swapaxes(1, 2).reshape(values.shape)


class LlamaReader(DecoderReader):
    """Llama's config.json, the steps every decoder here that builds on Llama shares: a child
    overrides the defaults and the steps it reads its own way (`rope`, `attention_bias`,
    `mlp_bias`, `windows`), never the reverse."""

    defaults: ClassVar[dict[str, Any]] = {
        "vocab_size": 32000,
        "hidden_size": 4096,
        "intermediate_size": 11008,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": None,  # one per query head
        "max_position_embeddings": 2048,
    }
    activation_key: ClassVar[str] = "hidden_act"
    qk_norm: ClassVar[bool] = False  # an RMSNorm over each head's q and k (Qwen3, Gemma 3)

    def read(self) -> DecoderConfig:
        layers = self.size("num_hidden_layers", 32, "layers")
        heads = self.size("num_attention_heads", 32, "heads")
        hidden = self.size("hidden_size", 4096, "hidden")
        kv_heads = self.kv_heads(heads)
        head_dim = self.head_dim(hidden, heads)
        if self.raw.get("pretraining_tp", 1) not in (1, None):
            raise AttnvizError(
                f"{self.where} has pretraining_tp={shown(self.raw.get('pretraining_tp'))}; "
                "attnviz computes Llama with pretraining_tp 1 only (as transformers does by "
                "default): set it to 1"
            )
        rope, local = self.rope(head_dim)
        turned = int(head_dim * rope.partial)
        qkv_bias, out_bias = self.attention_bias()
        act_key = self.activation_key
        return DecoderConfig(
            vocab_size=self.size("vocab_size", 32000, "vocab"),
            hidden_size=hidden,
            num_layers=layers,
            num_heads=heads,
            num_kv_heads=kv_heads,
            head_size=head_dim,
            intermediate_size=self.size("intermediate_size", 11008, "intermediate"),
            max_positions=self.size("max_position_embeddings", 2048, "positions"),
            norm_eps=self.number("rms_norm_eps", self.defaults.get("rms_norm_eps", 1e-6)),
            hidden_act=check_activation(
                self.raw.get(act_key, self.defaults.get(act_key, "silu")), act_key, self.where
            ),
            qkv_bias=qkv_bias,
            out_bias=out_bias,
            mlp_bias=self.mlp_bias(),
            tie_word_embeddings=self.flag(
                "tie_word_embeddings", self.defaults.get("tie_word_embeddings", False)
            ),
            rope_theta=rope.theta,
            rope_scaling=rope.scaling,
            sliding_windows=self.windows(layers),
            qk_norm=self.qk_norm,
            local_rope_theta=local.theta if local is not None else None,
            local_rope_scaling=local.scaling if local is not None else (),
            rotary_dims=turned if turned != head_dim else None,
        )

    def kv_heads(self, heads: int) -> int:
        """Key/value heads. Null (or left out where the family's default is null, as Llama's
        and Phi-3's are): one per query head; left out: the family's default."""
        key = "num_key_value_heads"
        if self.raw.get(key) is None and (key in self.raw or self.defaults.get(key) is None):
            kv_heads = heads
        else:
            kv_heads = self.size(key, heads, "heads")
        if heads % kv_heads:
            raise AttnvizError(
                f"{self.where} has num_attention_heads={heads}, not a multiple of "
                f"num_key_value_heads={kv_heads}: the config is corrupt"
            )
        return kv_heads

    def head_dim(self, hidden: int, heads: int) -> int:
        """A head's size: head_dim (the family's default), else hidden_size / heads; even."""
        own = self.raw.get("head_dim") is not None or "head_dim" in self.defaults
        if not own and hidden % heads:
            raise AttnvizError(
                f"{self.where} has hidden_size={hidden}, not divisible by "
                f"num_attention_heads={heads}, and no head_dim: the config is corrupt"
            )
        head_dim = self.size("head_dim", hidden // heads, "head_dim")
        if head_dim % 2:
            raise AttnvizError(
                f"{self.where} has head_dim={head_dim}; rotary embeddings need an even head "
                "size: the config is corrupt"
            )
        return head_dim

    def rope(self, head_dim: int) -> tuple[Rope, Rope | None]:
        """The rotary setting, and the sliding layers' own (None: they share it)."""
        return read_rope(self.raw, self.where, head_dim=head_dim), None

    def attention_bias(self) -> tuple[bool, bool]:
        """Biases on (q, k and v; the output projection): attention_bias, false by default."""
        bias = self.flag("attention_bias", False)
        return bias, bias

    def mlp_bias(self) -> bool:
        """Biases on the feed-forward's projections: mlp_bias, false by default."""
        return self.flag("mlp_bias", False)

    def windows(self, layers: int) -> tuple[int | None, ...]:
        """How far back each layer looks (None: the whole prefix; (): no window): Llama
        slides none."""
        return ()

    def layer_types(self, layers: int) -> list[str] | None:
        """transformers 5's layer_types (each layer's kind), checked; None when not given."""
        types = self.raw.get("layer_types")
        if types is not None and (
            not isinstance(types, list)
            or len(types) != layers
            or not all(t in ("full_attention", "sliding_attention") for t in types)
        ):
            raise AttnvizError(
                f"{self.where} has layer_types={shown(types)}; expected one of full_attention "
                f"or sliding_attention for each of its {layers} layers: the config is corrupt"
            )
        return types


LLAMA = DecoderFamily(
    "Llama",
    "model.",
    NAMES,
    IGNORED,
    LlamaReader,
    class_name="LlamaForCausalLM",
    gguf_block=GGUF_BLOCK,
    gguf_top=GGUF_TOP,
    gguf_undo=gguf_undo,
)
