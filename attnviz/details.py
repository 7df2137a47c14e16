"""A model as `attnviz info` describes it (`ModelDetails`), read without loading weights."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from attnviz.arguments import check_model

if TYPE_CHECKING:
    from pathlib import Path

    from attnviz.inputs import ModelInfo
    from attnviz.model.families import ModelShape
    from attnviz.model.locate import ModelSource
    from attnviz.model.seq2seq_config import Seq2seqShape


@dataclass(frozen=True)
class ModelDetails:
    """A model as `attnviz info` describes it, read from its files without loading weights."""

    model: ModelInfo  # name, family, layers, heads, folder, origin, tokenizer, languages
    shape: ModelShape  # every size its config gives, a decoder's positions and window
    parameters: int  # the encoder's (a decoder's LM head not counted)
    weights: tuple[str, ...]  # the weight files' names, shards in order; () when there are none
    # A decoder's start token (BOS) and who puts it in front: "tokenizer", "attnviz" (the
    # tokenizer adds none; `bos=False` reads the text as typed) or None (no start token).
    start_token: str | None = None
    start_by: str | None = None
    quantization: str | None = None  # a GGUF file's types (`Q4_K_M (file type 15): …`)
    computes_in: str | None = None  # a GGUF file: "float32, from dequantized weights"
    # What computes the weights: "attnviz's own engine (...)" or "transformers' eager
    # DebertaV2Model"; `engine` says which, as `Analysis.engine`.
    computes_with: str = "attnviz's own engine (from-scratch modules)"
    engine: str = "attnviz"
    # An encoder-decoder's sizes (each stack's layers and heads, its start token); `shape`
    # is then its cross stack's. None for other models.
    encdec: Seq2seqShape | None = None

    def __repr__(self) -> str:
        about = self.model
        return (
            f"<ModelDetails {about.name}: {about.family} {about.kind}, {about.layers} layers × "
            f"{about.heads} heads, {self.parameters:,} parameters>"
        )

    def rows(self) -> list[tuple[str, str]]:
        """What `attnviz info` says, as (name, value) rows in the order it prints them."""
        import re

        about, shape, files = self.model, self.shape, self.weights
        limit, why = shape.token_limit()
        why = re.sub(r"\{([a-z_]+)\}", r"\1", why)  # an argument named as Python names it
        languages = f"{about.language_list} (model card)" if about.languages else "not stated"
        rows = [("model", about.name), ("language", languages)]
        if about.tokenizer is not None:
            size = f", {about.tokenizer.size:,} pieces" if about.tokenizer.size else ""
            rows += [("text", about.tokenizer.normalisation)]
            rows += [("tokenizer", about.tokenizer.kind + size)]
        kind = (
            "decoder, causal: each token sees only itself and the tokens before it"
            if shape.causal
            else "encoder: each token sees every token"
        )
        rows += [("family", shape.family), ("kind", kind)]
        if self.start_token is not None:
            by = "the tokenizer" if self.start_by == "tokenizer" else "attnviz"
            rows += [("start token", f"{self.start_token} ({by} puts it in front; bos=False)")]
        if shape.shared_layers:
            rows += [("layer weights", "one set, shared by every layer")]
        if shape.embedding_size != shape.hidden:
            rows += [("embedding size", f"{shape.embedding_size}")]
        rows += [("layers", f"{shape.layers}"), ("heads per layer", f"{shape.heads}")]
        if shape.decoder is not None:
            rows += self.decoder_rows()
        counted = "decoder, LM head not counted" if shape.causal else "encoder"
        shards = f"{len(files)} shards ({files[0]}, …)" if len(files) > 1 else "".join(files)
        rows += [
            ("hidden size", f"{shape.hidden}"),
            ("head size", f"{shape.head_size}"),
            ("feed-forward size", f"{shape.intermediate}"),
            ("vocabulary", f"{shape.vocab}"),
            ("max tokens", f"{limit:,}{why}"),
            ("activation", shape.activation),
            ("parameters", f"{self.parameters:,} ({counted})"),
            ("weights", shards or "none"),
        ]
        if self.quantization is not None:
            rows += [("quantization", self.quantization), ("computes in", f"{self.computes_in}")]
        rows += [("computes with", self.computes_with)]
        return [*rows, ("loaded from", about.origin), ("folder", str(about.folder))]

    def decoder_rows(self) -> list[tuple[str, str]]:
        """What `attnviz info` adds for a decoder (part of `rows()`): key/value heads,
        positions, window, scale."""
        cfg = self.shape.decoder
        assert cfg is not None
        rows = []
        if cfg.num_kv_heads < cfg.num_heads:
            share = cfg.num_heads // cfg.num_kv_heads
            grouped = f"each read by {share} query heads (grouped-query attention)"
            rows.append(("key/value heads", f"{cfg.num_kv_heads}, {grouped}"))
        if cfg.learned_positions:
            rows.append(("positions", "a learned vector per position, added to the tokens"))
        else:
            rotary = f"rotary (RoPE): q and k turned by position, θ = {cfg.rope_theta:g}"
            scaling = dict(cfg.rope_scaling)
            if cfg.rope_type == "longrope":
                trained = scaling["original_max_position_embeddings"]
                rotary += (
                    f", longrope scaling (trained on {trained:,}"
                    f" tokens, cos and sin ×{scaling['attention_factor']:.4g})"
                )
            elif cfg.rope_type != "default":
                rotary += f", {cfg.rope_type} scaling ×{scaling['factor']:g}"
            if cfg.local_rope_theta is not None:
                rotary += f" (full layers); θ = {cfg.local_rope_theta:g} in the sliding layers"
            if cfg.rotary_dims is not None:
                rotary += f"; the first {cfg.rotary_dims} of each head's {cfg.head_size} numbers"
            rows.append(("positions", rotary))
        if cfg.qk_norm:
            rows.append(("QK-norm", "each head's q and k RMS-normalised before the rotation"))
        windows = cfg.sliding_windows
        if any(w is not None for w in windows):
            sizes = {w for w in windows if w is not None}
            where = (
                "every layer"
                if None not in windows
                else "layers " + ", ".join(str(i) for i, w in enumerate(windows) if w is not None)
            )
            size = " / ".join(f"{w:,}" for w in sorted(sizes))
            sees = f"a token sees the last {size} tokens (itself included), in {where}"
            rows.append(("sliding window", sees))
        if cfg.query_pre_attn_scalar is not None:
            scale = f"1/√{cfg.query_pre_attn_scalar:g} (query_pre_attn_scalar) = {cfg.scale(0):.4g}"
            rows.append(("score scale", scale))
        if cfg.softcap is not None:
            cap = f"{cfg.softcap:g}"
            rows.append(("soft-capping", f"scores become tanh(s / {cap}) × {cap}"))
        if not cfg.scale_attn_weights or cfg.scale_by_inverse_layer:
            scale = "1/√d_k" if cfg.scale_attn_weights else "none"
            if cfg.scale_by_inverse_layer:
                scale = ("1/√d_k × " if cfg.scale_attn_weights else "") + "1/(layer + 1)"
            rows.append(("score scale", scale))
        return rows

    def _repr_html_(self) -> str:
        """A notebook cell that ends in a model's details shows `rows()` as a table."""
        from attnviz.render.notebook import details_table, rich_html

        return rich_html(details_table(self.rows()))


def _encdec_found(model: object) -> tuple[ModelSource, dict[str, Any], Seq2seqShape] | None:
    from attnviz.encdec import read_encdec

    return read_encdec(check_model(model))


def _encdec_details(source: ModelSource, config: dict[str, Any], seq: Seq2seqShape) -> ModelDetails:
    """`model_info` of an encoder-decoder: its cross stack's shape, its own sizes beside."""
    from attnviz.encdec import stack_shape
    from attnviz.errors import AttnvizError
    from attnviz.inputs import ModelInfo
    from attnviz.model.foreign import TRANSFORMERS
    from attnviz.model.hf_engine import count_parameters
    from attnviz.model.weights import weight_files

    shape = stack_shape(seq, "cross")
    try:
        weights = tuple(path.name for path in weight_files(source.folder))
    except AttnvizError:
        weights = ()
    from attnviz.model.seq2seq_config import SEQ2SEQ_CLASSES

    # the class AutoModelForSeq2SeqLM loads, not the one config.json's architectures claims
    computes = f"transformers' eager {SEQ2SEQ_CLASSES[seq.model_type]}"
    return ModelDetails(
        ModelInfo.read(source, shape),
        shape,
        count_parameters(source.folder),
        weights,
        computes_with=computes[:200],
        engine=TRANSFORMERS,
        encdec=seq,
    )


def model_info(
    model: str | os.PathLike[str] | None = None, *, engine: str = "auto"
) -> ModelDetails:
    """The model `model` names (see `prepare`): its shape, tokenizer, model card's languages,
    parameter count and weight files, and which engine computes it (`engine` as in
    `prepare`); no weights loaded, no torch imported."""
    from attnviz.errors import AttnvizError
    from attnviz.inputs import ModelInfo
    from attnviz.model.foreign import computes_with, shape_of
    from attnviz.model.weights import count_parameters, weight_files
    from attnviz.pipeline import read_model

    found = None if engine == "attnviz" else _encdec_found(model)
    if found is not None:
        return _encdec_details(*found)
    source, config, engine = read_model(check_model(model), engine)
    shape = shape_of(config, engine)
    try:
        weights = tuple(path.name for path in weight_files(source.folder))
    except AttnvizError:
        weights = ()
    info = ModelInfo.read(source, shape)
    start, by = _start(source.folder, config) if shape.causal else (None, None)
    if engine != "attnviz":
        from attnviz.model.hf_engine import count_parameters as count_foreign

        return ModelDetails(
            info,
            shape,
            count_foreign(source.folder),
            weights,
            start,
            by,
            computes_with=computes_with(config, engine),
            engine=engine,
        )
    parameters = count_parameters(source.folder)
    if source.gguf is not None:
        from attnviz.model.gguf.convert import quantization
        from attnviz.model.gguf.convert import source as gguf_source

        about = gguf_source(source.folder) or {}
        computes = "float32, from dequantized weights"
        return ModelDetails(
            info, shape, parameters, (source.gguf.name,), start, by, quantization(about), computes
        )
    return ModelDetails(info, shape, parameters, weights, start, by)


def _start(folder: Path, config: dict[str, Any]) -> tuple[str | None, str | None]:
    """A decoder's start token and who adds it: ("<s>", "tokenizer"), ("<|endoftext|>",
    "attnviz") or (None, None) when the model defines none."""
    from attnviz.text.tokenize import load_tokenizer, start_token

    tokenizer = load_tokenizer(folder)
    added = start_token(tokenizer, folder, config)
    if added is not None:
        return added[0], "attnviz"
    first = tokenizer.encode("").ids[:1]  # a tokenizer that adds a start token adds it here too
    return (tokenizer.id_to_token(first[0]), "tokenizer") if first else (None, None)
