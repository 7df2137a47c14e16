"""Phi-3: Llama with q, k, v fused in qkv_proj and gate, up in gate_up_proj."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any, ClassVar

from attnviz.model.config import DecoderConfig
from attnviz.model.families.llama import LLAMA, LlamaReader
from attnviz.model.rope_config import Rope, read_rope

# Phi-3 keeps q, k and v in one qkv_proj, and the MLP's gate and up in one gate_up_proj.
GGUF_BLOCK = {
    "attn_norm": "input_layernorm",
    "attn_qkv": "self_attn.qkv_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_norm": "post_attention_layernorm",
    "ffn_up": "mlp.gate_up_proj",
    "ffn_down": "mlp.down_proj",
}
# Phi-3 keeps q, k and v in one qkv_proj, and the feed-forward's gate and up in one
# gate_up_proj (gate first): split here, by the config's widths, into Llama's names.
FUSED = r"^(layers\.\d+\.)(self_attn\.qkv_proj|mlp\.gate_up_proj)\.weight$"


def split(name: str, value: Any, cfg: DecoderConfig | None) -> list[tuple[str, Any]]:
    """One Phi-3 entry as Llama entries: qkv_proj split in q, k, v; gate_up_proj in gate, up.

    `value` is a tensor, a shape (a list) or a name. Rows that do not add up to the
    config's widths are split anyway (the last part takes the rest), so that the strict
    check reports the stored tensor's wrong shape.
    """
    fused = re.match(FUSED, name)
    if not fused or cfg is None:
        return [(name, value)]
    prefix, kind = fused[1], fused[2]
    widths: tuple[int, ...]
    if kind == "self_attn.qkv_proj":
        q, kv = cfg.num_heads * cfg.head_size, cfg.num_kv_heads * cfg.head_size
        widths = (q, kv, kv)
        names = [f"{prefix}self_attn.{part}_proj.weight" for part in "qkv"]
    else:
        widths = (cfg.intermediate_size, cfg.intermediate_size)
        names = [f"{prefix}mlp.gate_proj.weight", f"{prefix}mlp.up_proj.weight"]
    out: list[tuple[str, Any]] = []
    start = 0
    for i, (part, width) in enumerate(zip(names, widths, strict=True)):
        stop = None if i == len(widths) - 1 else start + width
        out.append((part, _rows(value, start, stop)))
        start += width
    return out


def _rows(value: Any, start: int, stop: int | None) -> Any:
    """Rows start:stop of a weight (a tensor, or a shape), or the name itself."""
    if isinstance(value, str):
        return value
    if isinstance(value, list | tuple):
        rows = len(range(value[0])[start:stop]) if value else 0
        return type(value)([rows, *value[1:]])
    return value[start:stop]


def stored_name(hf: str) -> str:
    """The checkpoint's name of a projection that Phi-3 fuses: qkv_proj, gate_up_proj."""
    hf = re.sub(r"\.self_attn\.[qkv]_proj\.", ".self_attn.qkv_proj.", hf)
    return re.sub(r"\.mlp\.(gate|up)_proj\.", ".mlp.gate_up_proj.", hf)


def stored_shape(
    key: str, ours: tuple[int, ...], decoder: DecoderConfig | None = None
) -> tuple[int, ...]:
    """The shape stored for `key`: q, k, v fused in qkv_proj, gate and up in gate_up_proj."""
    if decoder is not None and len(ours) == 2:
        if key.endswith("qkv_proj.weight"):
            rows = (decoder.num_heads + 2 * decoder.num_kv_heads) * decoder.head_size
            return (rows, ours[1])
        if key.endswith("gate_up_proj.weight"):
            return (2 * decoder.intermediate_size, ours[1])
    return ours


class Phi3Reader(LlamaReader):
    """Phi-3's config.json: Llama's, with LongRoPE and a partial rotation, no biases, and
    one window in every layer when the config sets one."""

    defaults: ClassVar[dict[str, Any]] = {
        **LlamaReader.defaults,
        "vocab_size": 32064,
        "hidden_size": 3072,
        "intermediate_size": 8192,
        "max_position_embeddings": 4096,
        "rms_norm_eps": 1e-5,
    }

    def rope(self, head_dim: int) -> tuple[Rope, Rope | None]:
        return read_rope(self.raw, self.where, phi3=True, head_dim=head_dim), None

    def attention_bias(self) -> tuple[bool, bool]:
        return False, False

    def mlp_bias(self) -> bool:
        return False

    def windows(self, layers: int) -> tuple[int | None, ...]:
        if "sliding_window" not in self.raw or self.raw["sliding_window"] is None:
            return ()
        return (self.size("sliding_window", None, "window"),) * layers


PHI3 = replace(
    LLAMA,
    name="Phi-3",
    reader=Phi3Reader,
    class_name="Phi3ForCausalLM",
    gguf_block=GGUF_BLOCK,
    gguf_undo=None,  # Phi-3's fused qkv is stored as transformers holds it
    split=split,
    stored_name=stored_name,
    stored_shape=stored_shape,
)
