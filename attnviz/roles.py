"""A head's role over labelled sentences: the file read and checked, the model run in batches.

`head_roles` behind `attnviz find --file`. The examples come from a JSON Lines file (`{"text",
"from", "to", "candidates"}` a line), a TSV file with the header `text	from	to	candidates`
(candidates comma-separated), or a list of such dicts. Every example is checked before
the model runs, the words against the text as the tokenizer splits it (as `find` matches
them: case and accents ignored, `ele#2` for a second `ele`; a word the text has twice
must say which); every problem is one line naming the file's line. The scores are
`attnviz.measures.roles`.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attnviz.arguments import check_flag, check_max_tokens, check_model
from attnviz.errors import AttnvizError, BadInput
from attnviz.inputs import DTYPES
from attnviz.language import resolve_lang
from attnviz.limits import (
    BATCH_SIZE,
    ROLES_CANDIDATES,
    ROLES_EXAMPLES,
    ROLES_FILE_BYTES,
    ROLES_LINES,
    ROLES_PROBLEMS,
    ROLES_TEXT_CHARS,
    THREADS,
    TOP,
    check_choice,
    check_range,
    shown,
)
from attnviz.text.match import match_key

if TYPE_CHECKING:
    from attnviz.measures.roles import Example, HeadRoles
    from attnviz.measures.select import UnitMap
    from attnviz.partials import RolesPartial
    from attnviz.text.pieces import Pieces

__all__ = ["BadExamples", "Labelled", "head_roles", "partial_head_roles", "read_examples"]

TSV_HEADER = ("text", "from", "to", "candidates")


@dataclass(frozen=True)
class Labelled:
    """One example as written: its words not yet found in the text."""

    line: int
    text: str
    source: str  # `from`
    target: str  # `to`
    candidates: tuple[str, ...] | None  # None: every other word of the text


def read_examples(
    given: str | os.PathLike[str] | Iterable[Mapping[str, Any]],
) -> tuple[list[Labelled], list[str], str]:
    """The examples of a file (JSON Lines, or TSV with its header) or of a list of dicts,
    the problems found (one line each, naming the line), and the name to cite them by."""
    if isinstance(given, str | os.PathLike):
        path = shipped_set(Path(given))
        return (*parse_lines(read_text(path), tsv=is_tsv(path)), path.name)
    if isinstance(given, Mapping) or not isinstance(given, Iterable):
        raise BadInput(
            "examples must be a file's path or a list of dicts "
            '{"text", "from", "to", "candidates"}, got ' + type(given).__name__
        )
    examples: list[Labelled] = []
    problems: list[str] = []
    for number, record in enumerate(given, start=1):
        if number > ROLES_EXAMPLES:
            raise BadInput(f"more than {ROLES_EXAMPLES} examples: split them")
        example = parse_record(record, number, problems)
        if example is not None:
            examples.append(example)
    return examples, problems, "examples"


def shipped_set(path: Path) -> Path:
    """`path`, or the shipped set it names when there is no such file here: the labelled sets
    of sample_sentences/ (`pronouns-en.jsonl`, `sample_sentences/objects-pt.jsonl`) are found
    in an installed attnviz too."""
    from attnviz.text.samples import sample_dir

    try:
        here = path.exists()
    except OSError:  # a name too long: read_text says so
        return path
    if here or str(path.parent) not in (".", "sample_sentences"):
        return path
    try:
        shipped = sample_dir() / path.name
    except FileNotFoundError:
        return path
    return shipped if shipped.suffix in (".jsonl", ".tsv") and shipped.is_file() else path


def read_text(path: Path) -> str:
    """The UTF-8 text of `path`, bounded by ROLES_FILE_BYTES; one line when it cannot be.

    Only a regular file is read (a FIFO would wait forever, /dev/zero never ends), and one
    larger than the bound is refused by its size before a byte is read."""
    import stat

    from attnviz.reading import read_bounded

    try:
        info = path.stat()
    except FileNotFoundError:
        raise BadInput(f"cannot read {path}: no such file") from None
    except (OSError, ValueError) as exc:  # a loop of links, a name too long, a NUL byte
        raise BadInput(f"cannot read {str(path)[:200]}: {_reason(exc)}") from None
    if not stat.S_ISREG(info.st_mode):
        kind = "a folder" if stat.S_ISDIR(info.st_mode) else "a pipe, a device or a socket"
        raise BadInput(f"{path} is {kind}: name a labelled file (JSON Lines, or TSV)")
    if info.st_size > ROLES_FILE_BYTES:
        raise BadInput(_too_big(path, info.st_size))
    try:
        data = read_bounded(path, ROLES_FILE_BYTES, "labelled file")
    except FileNotFoundError:
        raise BadInput(f"cannot read {path}: no such file") from None
    except BadInput:
        raise
    except AttnvizError:  # replaced by a pipe, or grown past the bound, since the check
        raise BadInput(_too_big(path, ROLES_FILE_BYTES + 1)) from None
    except OSError as exc:
        raise BadInput(f"cannot read {path}: {_reason(exc)}") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise BadInput(f"{path} is not UTF-8 text (byte {exc.start}): save it as UTF-8") from None


def _too_big(path: Path, size: int) -> str:
    from attnviz.limits import amount

    return (
        f"{path} is {amount(size)}; attnviz reads a labelled file of at most "
        f"{amount(ROLES_FILE_BYTES)} ({ROLES_EXAMPLES:,} examples): split it"
    )


def _reason(exc: BaseException) -> str:
    return getattr(exc, "strerror", None) or str(exc)


def is_tsv(path: Path) -> bool:
    return path.suffix.lower() in (".tsv", ".tab")


def parse_lines(text: str, *, tsv: bool) -> tuple[list[Labelled], list[str]]:
    """The examples of a file's text, and its problems; blank lines (and, in JSON Lines,
    lines starting with //) are skipped."""
    examples: list[Labelled] = []
    problems: list[str] = []
    numbered = []
    for at in file_lines(text):  # lazily: refused at the bound, the rest never split
        numbered.append(at)
        if len(numbered) > ROLES_LINES:
            raise BadInput(
                f"more than {ROLES_LINES:,} lines that are not blank: a labelled file holds "
                f"at most {ROLES_EXAMPLES:,} examples; split it"
            )
    if tsv:
        if not numbered or tuple(c.strip() for c in numbered[0][1].split("\t")) not in (
            TSV_HEADER,
            TSV_HEADER[:3],
        ):
            return [], ["line 1: a TSV file starts with the header text<TAB>from<TAB>to"
                        "<TAB>candidates"]  # fmt: skip
        has_candidates = len(numbered[0][1].split("\t")) == 4
        numbered = numbered[1:]
    numbered = [(n, line) for n, line in numbered if tsv or not line.lstrip().startswith("//")]
    if len(numbered) > ROLES_EXAMPLES:
        raise BadInput(f"{len(numbered)} examples: at most {ROLES_EXAMPLES} a file; split it")
    for number, line in numbered:
        if tsv:
            record = tsv_record(line, number, has_candidates, problems)
        else:
            record = json_record(line, number, problems)
        if record is not None:
            example = parse_record(record, number, problems)
            if example is not None:
                examples.append(example)
    if not examples and not problems:
        problems.append("no examples: one a line, " + '{"text": …, "from": …, "to": …}')
    return examples, problems


def file_lines(text: str) -> Iterator[tuple[int, str]]:
    """The file's lines that are not blank, numbered from 1 as an editor numbers them: split
    at line feeds only (a carriage return before one is dropped). JSON allows U+2028, U+0085
    and form feeds inside a string, which `str.splitlines` would split at. Blank lines are
    passed over by the regular expression, counted by `str.count`: 15 million of them cost
    no Python loop."""
    number, at = 1, 0
    for match in _CONTENT.finditer(text):
        number += text.count("\n", at, match.start())
        at = match.start()
        yield number, match.group().removesuffix("\r")


_CONTENT = re.compile(r"^[^\n]*?\S[^\n]*", re.MULTILINE)  # a line with a visible character


def json_record(line: str, number: int, problems: list[str]) -> Any:
    """A JSON line's value; None (and a problem) when it is not JSON, nests past Python's
    parser or holds a number Python will not convert (more than 4,300 digits)."""
    try:
        return json.loads(line)
    except json.JSONDecodeError as exc:
        problems.append(f"line {number}: not JSON ({exc.msg}, column {exc.colno})")
    except RecursionError:
        problems.append(f"line {number}: nested too deeply to read; an example is one object")
    except ValueError as exc:  # an integer of more digits than int() converts
        problems.append(f"line {number}: not JSON that attnviz reads ({shown(str(exc), 80)})")
    return None


def tsv_record(
    line: str, number: int, has_candidates: bool, problems: list[str]
) -> dict[str, Any] | None:
    """A TSV line as the dict a JSON line would be; None (and a problem) when malformed."""
    cells = line.split("\t")
    wanted = 4 if has_candidates else 3
    if len(cells) != wanted:
        problems.append(f"line {number}: {len(cells)} columns, the header has {wanted}")
        return None
    record: dict[str, Any] = dict(zip(TSV_HEADER, cells, strict=False))
    if has_candidates:
        given = [c.strip() for c in cells[3].split(",")]
        record["candidates"] = given if any(given) else None
    return record


def parse_record(record: Any, number: int, problems: list[str]) -> Labelled | None:
    """One example from its dict; None (and a problem) when a field is missing or wrong."""
    where = f"line {number}"
    if not isinstance(record, Mapping):
        problems.append(f"{where}: an example is an object " + '{"text", "from", "to"}')
        return None
    fields = {}
    for name in ("text", "from", "to"):
        value = record.get(name)
        if not isinstance(value, str) or not value.strip():
            problems.append(f"{where}: {name!r} must be a non-empty string")
            return None
        fields[name] = value
    if len(fields["text"]) > ROLES_TEXT_CHARS:
        problems.append(f"{where}: the text has {len(fields['text'])} characters, at most "
                        f"{ROLES_TEXT_CHARS}")  # fmt: skip
        return None
    extra = sorted(set(record) - {"text", "from", "to", "candidates"})
    if extra:
        problems.append(f"{where}: unknown field {extra[0]!r} (the fields are text, from, "
                        "to, candidates)")  # fmt: skip
        return None
    candidates = record.get("candidates")
    if candidates is not None:
        if not isinstance(candidates, list) or not all(
            isinstance(c, str) and c.strip() for c in candidates
        ):
            problems.append(f"{where}: 'candidates' must be a list of words")
            return None
        if not 2 <= len(candidates) <= ROLES_CANDIDATES:
            problems.append(f"{where}: {len(candidates)} candidates; give 2 to "
                            f"{ROLES_CANDIDATES}, or none (every other word)")  # fmt: skip
            return None
        candidates = tuple(candidates)
    return Labelled(number, fields["text"], fields["from"], fields["to"], candidates)


def locate(
    labels: Sequence[str], word: str, keys: Mapping[str, list[int]] | None = None
) -> int | str:
    """The unit `word` names among `labels` (`ele`, `ele#2`, any case or accents), or why
    not: missing, or ambiguous (the text has it twice and no #N says which). `keys`, when
    given, is `keyed(labels)`, made once for an example's many words."""
    keys = keyed(labels) if keys is None else keys
    wanted, occurrence, numbered = match_key(word), 1, False
    if wanted not in keys and "#" in word:
        bare, _, n = word.strip().rpartition("#")
        if n.isascii() and n.isdigit() and bare:  # not `#²` (a digit int() refuses)
            if len(n) > len(str(len(labels))):  # more digits than the text has units
                return f"{shown(word)}: the text has no occurrence {shown(n, 12)} of {shown(bare)}"
            wanted, occurrence, numbered = match_key(bare), int(n), True
    found = keys.get(wanted, [])
    if not found:  # a word is a stranger's: quoted, escaped and cut in the line
        return f"{shown(word)} is not a word of the text"
    if len(found) > 1 and not numbered:
        return f"{shown(word)} is ambiguous: the text has it {len(found)} times; write {word}#1.." \
               f"{word}#{len(found)}"  # fmt: skip
    if not 1 <= occurrence <= len(found):
        return f"{shown(word)}: the text has it {len(found)} time{'s' * (len(found) > 1)}"
    return found[occurrence - 1]


def keyed(labels: Sequence[str]) -> dict[str, list[int]]:
    """Where each match key stands among `labels`, made once for all the words of an example
    (up to ROLES_CANDIDATES + 2 over up to 512 units: the keys made again for each word, a
    16 MB file took 0.25 s an example, 12 minutes in all, before the model ran)."""
    index: dict[str, list[int]] = {}
    for i, label in enumerate(labels):
        index.setdefault(match_key(label), []).append(i)
    return index


def word_units(pieces: Pieces, unit_map: UnitMap) -> list[bool]:
    """Per unit of `unit_map`: whether it is a word of the text (not a special token, not
    punctuation), the default candidates."""
    import numpy as np

    from attnviz.text.pieces import token_kinds

    kinds = token_kinds(pieces)
    other = np.array([s is None for s in pieces.sequence_ids]) | kinds.punct  # (T,)
    if unit_map.words:
        flags = [not other[w.pieces].all() for w in pieces.words()]
    else:
        flags = [not bool(x) for x in other]
    keep = unit_map.keep()
    return [f for f, k in zip(flags, keep, strict=True) if k]


def resolve(labelled: Labelled, pieces: Pieces, unit_map: UnitMap, causal: bool) -> Example | str:
    """The example in units, or its problem (one line, without the line number)."""
    from attnviz.measures.roles import Example

    labels = unit_map.labels()
    keys = keyed(labels)
    found: dict[str, int] = {}
    for name, word in (("from", labelled.source), ("to", labelled.target)):
        at = locate(labels, word, keys)
        if isinstance(at, str):
            return f"{name} {at}"
        found[name] = at
    source, target = found["from"], found["to"]
    if source == target:
        return "'from' and 'to' are the same word"
    if labelled.candidates is None:
        words = word_units(pieces, unit_map)
        candidates = [i for i, w in enumerate(words) if w and i != source]
    else:
        candidates = []
        for word in labelled.candidates:
            at = locate(labels, word, keys)
            if isinstance(at, str):
                return f"candidate {at}"
            if at == source:
                return f"candidate {word!r} is the 'from' word"
            candidates.append(at)
        if target not in candidates:
            return f"'to' {labelled.target!r} is not among the candidates"
        if len(set(candidates)) < len(candidates):
            return "a candidate is given twice"
    if causal:
        if target > source:
            return (f"'to' {labelled.target!r} comes after 'from' {labelled.source!r}, and this "
                    "model looks only back")  # fmt: skip
        if labelled.candidates is None:
            candidates = [c for c in candidates if c < source]
        elif any(c > source for c in candidates):
            return "a candidate comes after 'from', and this model looks only back"
    if len(candidates) < 2:
        return "fewer than two candidates: nothing to choose between"
    return Example(labelled.line, labelled.text, source, target, tuple(sorted(candidates)))


class BadExamples(BadInput):
    """A labelled file (or list) with problems: `problems` holds one line each, naming the
    file and the line; the message is those lines."""

    def __init__(self, problems: Sequence[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = list(problems)


def problems_error(problems: Sequence[str], name: str) -> BadExamples:
    """One error, a line a problem (the first ROLES_PROBLEMS), each naming its line."""
    lines = [f"{name}: {p}" for p in problems[:ROLES_PROBLEMS]]
    if len(problems) > ROLES_PROBLEMS:
        lines.append(f"{name}: and {len(problems) - ROLES_PROBLEMS} more problems")
    return BadExamples(lines)


def head_roles(
    examples: str | os.PathLike[str] | Iterable[Mapping[str, Any]],
    *,
    model: str | None = None,
    units: str = "words",
    exclude: str | Sequence[str] | None = None,
    lang: str | None = None,
    top: int = 10,
    batch_size: int = 32,
    device: str = "auto",
    threads: int | None = None,
    dtype: str = "float32",
    max_tokens: int | None = None,
    bos: bool = True,
    engine: str = "auto",
    progress: Callable[[int], None] | None = None,
) -> HeadRoles:
    """Every head scored over labelled examples (Clark et al. 2019): which head does what.

    `examples` is a JSON Lines file (`{"text", "from", "to", "candidates"}` a line), a TSV
    file (.tsv) with the header `text	from	to	candidates` (candidates comma-separated),
    or a list of such dicts. Words match as `Analysis.find` matches them (case and accents
    ignored, `ele#2`); without `candidates`, every other word of the text is one (on a
    decoder, every earlier word). The whole file is checked before the model runs: its
    problems raise `BadExamples`, one line each naming the line.

    A head gets an example right when `to` weighs more, from `from`, than every other
    candidate (weight to a word: the sum over its pieces; from a word: the mean). The
    result ranks every head by accuracy, with a 95% Wilson interval, beside the
    baselines on the same examples (nearest, first, random) and the held-out accuracy of
    the head picked first (picked on one half, scored on the other, both ways).
    `units`, `exclude` and `lang` as on `find`; `batch_size`, `device`, `threads`, `dtype`,
    `max_tokens`, `bos`, `engine` and `progress(n)` as on `head_stats`; the examples run in
    blocks of `sharding.block_size(batch_size)`, as `partial_head_roles` runs a slice of them.
    """
    return partial_head_roles(
        examples, model=model, units=units, exclude=exclude, lang=lang, top=top,
        batch_size=batch_size, device=device, threads=threads, dtype=dtype,
        max_tokens=max_tokens, bos=bos, engine=engine, progress=progress,
    ).result()  # fmt: skip


def partial_head_roles(
    examples: str | os.PathLike[str] | Iterable[Mapping[str, Any]],
    *,
    shard: tuple[int, int] | str = (1, 1),
    model: str | None = None,
    units: str = "words",
    exclude: str | Sequence[str] | None = None,
    lang: str | None = None,
    top: int = 10,
    batch_size: int = 32,
    device: str = "auto",
    threads: int | None = None,
    dtype: str = "float32",
    max_tokens: int | None = None,
    bos: bool = True,
    engine: str = "auto",
    progress: Callable[[int], None] | None = None,
) -> RolesPartial:
    """`head_roles` over slice `shard` (i, n) of the examples, the i-th of n (1-based): block k
    of `sharding.block_size(batch_size)` examples belongs to slice k mod n + 1. Every example
    is checked, as `head_roles` checks them; only the slice's run. `to_file` writes the
    partial; `attnviz.merge_partials` of every slice returns what `head_roles` returns.
    """
    from attnviz.measures.roles import RoleScores
    from attnviz.measures.select import UnitMap, check_exclude, check_units
    from attnviz.partials import Identity, RolesPartial, config_digest
    from attnviz.pipeline import Corpus, compute_batches, corpus_chunks, load_engine
    from attnviz.sharding import InputDigest, block_size, check_shard, shard_blocks

    model = check_model(model)
    units, excluded = check_units(units), check_exclude(exclude)
    lang = resolve_lang(lang)
    top = check_range(top, "top", TOP)
    check_range(batch_size, "batch_size", BATCH_SIZE)
    if threads is not None:
        check_range(threads, "threads", THREADS)
    check_choice(device, ("auto", "cpu", "cuda"), "device")
    check_choice(dtype, DTYPES, "dtype")
    bos, max_tokens = check_flag(bos, "bos"), check_max_tokens(max_tokens)
    if progress is not None and not callable(progress):
        raise BadInput("progress must be a function of the examples done, or None")
    shard = check_shard(shard)
    labelled, problems, name = read_examples(examples)
    texts = [e.text for e in labelled]
    corpus = next(
        corpus_chunks(
            texts,
            model=model,
            chunk=max(1, len(texts)),
            truncate=None,  # an example is read whole: its words may be anywhere in it
            max_tokens=max_tokens,
            bos=bos,
            engine=engine,
            named=lambda number: f"line {labelled[number - 1].line}",
        )
    )
    causal = corpus.shape.causal
    resolved: list[Example] = []
    maps: list[UnitMap] = []
    for example, pieces in zip(labelled, corpus.pieces, strict=True):
        try:
            unit_map = UnitMap.checked(pieces, units, excluded)
        except BadInput as exc:
            problems.append(f"line {example.line}: {exc}")
            continue
        found = resolve(example, pieces, unit_map, causal)
        if isinstance(found, str):
            problems.append(f"line {example.line}: {found}")
        else:
            resolved.append(found)
            maps.append(unit_map)
    if problems:
        problems.sort(key=lambda p: int(p.split(":")[0].split()[-1]) if p[:5] == "line " else 0)
        raise problems_error(problems, name)
    shape = corpus.shape
    scores = RoleScores(shape.layers, shape.heads)
    blocks = shard_blocks(len(resolved), block_size(batch_size), shard)
    encoder = (
        load_engine(corpus.model.folder, corpus.config, corpus.engine, dtype) if blocks else None
    )
    for places in blocks:  # the slice's blocks, each batched on its own
        part = Corpus(
            corpus.model, corpus.config, [corpus.pieces[j] for j in places], corpus.engine
        )
        for batch in compute_batches(
            part, batch_size=batch_size, device=device, threads=threads, dtype=dtype,
            encoder=encoder,
        ):  # fmt: skip
            for b, (k, n) in enumerate(zip(batch.indices, batch.lengths, strict=True)):
                i = places[k]  # the example's place among all of them
                attention = batch.attentions[:, b, :, :n, :n]  # (L, H, n, n)
                matrix = maps[i].matrix(attention)  # (L, H, N, N) in units
                scores.add(i, resolved[i], matrix[:, :, resolved[i].source, :])  # (L, H, N)
            if progress is not None:
                progress(len(batch.indices))
    hits, weights = scores.arrays()
    title = corpus.model.name + (f" (in {dtype})" if dtype != "float32" else "")
    digest = InputDigest()
    for done in resolved:
        digest.add(json.dumps([done.line, done.text, done.source, done.target, done.candidates]))
    options = {"units": units, "exclude": list(excluded), "top": top, "dtype": dtype,
               "max_tokens": max_tokens, "bos": bos, "engine": corpus.engine,
               "batch_size": batch_size}  # fmt: skip
    identity = Identity("roles", corpus.model.name, config_digest(corpus.config), options,
                        digest.sha256, digest.count)  # fmt: skip
    taken = [i for places in blocks for i in places]
    return RolesPartial(
        identity=identity,
        shards=(shard[0],),
        of=shard[1],
        layers=shape.layers,
        heads=shape.heads,
        title=title,
        units=units,
        exclude=excluded,
        source="" if name == "examples" else name,
        lang=lang,
        top=top,
        places=tuple(taken),
        examples=tuple(resolved[i] for i in taken),
        hits=hits,
        weights=weights,
    )
