"""What a decoder family's file declares: its checkpoint layout, GGUF names and norm facts."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class DecoderFamily:
    """One decoder family's facts, each read by the shared code that needs it.

    `prefix`, `names` and `ignored`: where a *ForCausalLM checkpoint keeps the decoder, its
    names -> this project's (`{i}` a layer number), and what is not the decoder.
    `gguf_block`: a GGUF tensor's name inside a block -> transformers' inside a layer (empty:
    no GGUF support); `class_name` the transformers class a GGUF file is read as.
    `input_norm` / `output_norm`: the layer's norm before attention, and the norm on the
    attention's output before the residual (Gemma), which the decoder measures read.
    """

    name: str  # as shown to users: "Phi-3"
    prefix: str
    names: list[tuple[str, str]]
    ignored: str
    class_name: str = ""
    gguf_block: dict[str, str] = field(default_factory=dict)
    prefixes: tuple[str, ...] = ()  # other prefixes a checkpoint may use (multimodal Gemma 3)
    input_norm: str = "norm1"
    output_norm: str | None = None
