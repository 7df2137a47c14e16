"""`attnviz generate`: a decoder writes after the text; then what each new token attended to."""

from __future__ import annotations

from dataclasses import asdict

from rich.text import Text

from attnviz import api
from attnviz.cli.analysing import prepare_request
from attnviz.cli.input import Output, Request
from attnviz.cli.printing import print_json, wrote
from attnviz.errors import BadInput
from attnviz.output import DATA_SUFFIXES, HTML_SUFFIXES, IMAGE_SUFFIXES, check_output


def run(
    output: Output,
    request: Request,
    *,
    max_new: int,
    sample: bool = False,
    temperature: float = 1.0,
    top_k: int | None = None,
    seed: int | None = None,
    layer: int = -1,
    head: int | None = None,
    lens: bool = False,
) -> None:
    """Write after the text, printing the continuation as it comes; then each new token's
    attention (and the logit lens), and the file asked for."""
    from attnviz.render.cells import visible

    console, out, style, as_json = output.console, output.out, output.style, output.as_json

    if out is not None:
        allowed = IMAGE_SUFFIXES if lens else IMAGE_SUFFIXES + HTML_SUFFIXES + DATA_SUFFIXES
        if lens and out.suffix.lower() not in IMAGE_SUFFIXES:
            raise BadInput(
                "--lens writes its image (.png, .svg, .pdf): drop --lens to write the steps' "
                "page or data, or name an image"
            )
        check_output(out, allowed, style)
    from attnviz.generation import MAX_NEW, check_generation
    from attnviz.limits import check_range

    prepared, _ = prepare_request(request)
    prepared.refuse_internals("generate (a decoder writing with attnviz's key/value cache)")
    check_generation(prepared, check_range(max_new, "max_new", (1, MAX_NEW)))
    prepared.check(layer=layer, head=head)
    stream = not as_json
    started = [False]

    def on_text(piece: str) -> None:
        if not started[0]:  # the prompt, once the model is loaded and writing
            console.print(Text(visible(request.text, newlines=True)), end="", soft_wrap=True)
            started[0] = True
        text = "\n".join(visible(line) for line in piece.split("\n"))
        console.print(Text(text, style="bold"), end="", soft_wrap=True)
        console.file.flush()

    generation = api.generate(
        request.text,
        model=request.model,
        max_new=max_new,
        sample=sample,
        temperature=temperature,
        top_k=top_k,
        seed=seed,
        dtype=request.dtype,
        max_tokens=request.max_tokens,
        bos=request.bos,
        on_text=on_text if stream else None,
        engine=request.engine,
    )
    if as_json:
        record = generation.to_dict()
        if lens:
            record["lens"] = generation.lens().to_dict()
        print_json(record)
    else:
        end = "end token" if generation.stopped_at_eos else f"{len(generation.new_ids)} tokens"
        console.print()
        console.print(Text(f"({end})", style="dim"))
        console.print()
        console.print(generation.steps_view(layer, head))
        if lens:
            console.print()
            console.print(generation.lens())
    if out is not None:
        if lens:
            generation.lens().save(out, **asdict(style))
        elif out.suffix.lower() in HTML_SUFFIXES:
            generation.save(out, layer=layer, head=head, theme=style.theme)
        else:
            generation.save(out, layer=layer, head=head, **asdict(style))
    wrote(out)
