"""`attnviz info`: the model's shape and where it was loaded from, no weights loaded."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.text import Text

from attnviz import api
from attnviz.cli.errors import in_flags

if TYPE_CHECKING:
    from attnviz.details import ModelDetails
    from attnviz.model.seq2seq_config import Seq2seqShape


def run(console: Console, model: str | None, engine: str = "auto") -> None:
    """The model's shape and where it was loaded from (no weights loaded)."""
    from rich.table import Table

    from attnviz.render.cells import visible

    details = api.model_info(model, engine=engine)
    about, shape = details.model, details.shape
    tokenizer, languages = about.tokenizer, about.languages
    assert tokenizer is not None  # model_info always reads it
    limit, why = shape.token_limit()
    why = in_flags(why)
    counted = "decoder, LM head not counted" if shape.causal else "encoder"
    if details.engine != "attnviz":
        counted = "every weight in the checkpoint"
    rows: list[tuple[str, Any]] = [
        ("model", about.name),
        ("language", f"{about.language_list} (model card)" if languages else "not stated"),
        ("text", tokenizer.normalisation),
        ("tokenizer", tokenizer.kind + (f", {tokenizer.size:,} pieces" if tokenizer.size else "")),
        ("family", shape.family),
        ("kind", _kind(shape.causal)),
        ("layers", shape.layers),
        ("heads per layer", shape.heads),
        ("hidden size", shape.hidden),
        ("head size", shape.head_size),
        ("feed-forward size", shape.intermediate),
        ("vocabulary", shape.vocab),
        ("max tokens", f"{limit:,}{why}"),
        ("activation", shape.activation),
        ("parameters", f"{details.parameters:,} ({counted})"),
        ("weights", _weights(details.weights)),
        ("loaded from", about.origin),
    ]
    if details.quantization is not None:
        rows[-1:-1] = [
            ("quantization", details.quantization),
            ("computes in", details.computes_in),
        ]
    rows.append(("computes with", details.computes_with))
    if shape.decoder is not None:
        at = rows.index(("heads per layer", shape.heads)) + 1
        rows[at:at] = details.decoder_rows()
    if shape.causal:  # a decoder of either engine
        rows.insert(rows.index(("kind", _kind(shape.causal))) + 1, ("start token", _start(details)))
    if details.encdec is not None:
        _encdec_rows(rows, details.encdec)
    if shape.embedding_size != shape.hidden:
        rows.insert(rows.index(("layers", shape.layers)), ("embedding size", shape.embedding_size))
    if shape.shared_layers:
        rows.insert(3, ("layer weights", "one set, shared by every layer"))
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold", no_wrap=True)
    table.add_column()
    for key, value in rows:
        table.add_row(key, Text(visible(str(value))))  # a model card's text: never markup
    console.print(table)
    # The folder on a line of its own, never broken inside a name: the terminal wraps it,
    # and a copy of it pastes whole.
    folder = visible(str(about.folder))
    console.print(Text.assemble(("folder", "bold"), f"  {folder}"), soft_wrap=True)


def _encdec_rows(rows: list[tuple[str, Any]], seq: Seq2seqShape) -> None:
    """An encoder-decoder's rows of `info`: its kind, each stack's layers and heads, the
    token its decoder starts from; in place of an encoder's."""
    changed = {
        "kind": "encoder-decoder: a source and a target (--target, or --generate N)",
        "layers": f"{seq.encoder_layers} encoder, {seq.decoder_layers} decoder",
        "heads per layer": f"{seq.encoder_heads} encoder, {seq.decoder_heads} decoder",
        "head size": seq.hidden // max(seq.encoder_heads, 1),
        "max tokens": f"{seq.max_tokens:,} (the source, and the target)",
    }
    dropped = ("feed-forward size", "activation")
    rows[:] = [(k, changed.get(k, v)) for k, v in rows if k not in dropped]
    at = next(i for i, (k, _) in enumerate(rows) if k == "kind") + 1
    rows[at:at] = [
        ("stacks", "encoder (source), decoder (target, causal), cross (target × source)"),
        ("decoder start", f"id {seq.decoder_start} (decoder_start_token_id)"),
    ]


def _start(details: ModelDetails) -> str:
    """Who puts the decoder's start token in front, for `info`."""
    if details.start_token is None:
        return "none (the model defines none: the first word is the first token)"
    if details.start_by == "tokenizer":
        return f"{details.start_token} (the tokenizer puts it in front; --no-bos takes it off)"
    return (
        f"{details.start_token} (the tokenizer adds none: attnviz puts it in front, as "
        "interpretability tools do; --no-bos reads the text as typed)"
    )


def _weights(files: tuple[str, ...]) -> str:
    if not files:
        return "none"
    return files[0] if len(files) == 1 else f"{len(files)} shards ({files[0]}, …)"


def _kind(causal: bool) -> str:
    if causal:
        return "decoder, causal: each token sees only itself and the tokens before it"
    return "encoder: each token sees every token"
