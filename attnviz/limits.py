"""The bounds attnviz keeps to, in one place: numeric options and the size of what it reads.

The command line declares its options with these ranges and the public API checks the
same values with `check_range`, so both refuse an absurd value with the same line
before any work: `--threads 100000` would otherwise crash OpenMP, `--dpi 1200` on a big
grid would allocate gigabytes. Sizes are refused before the work they would cost: a
text before it is tokenized, a corpus line before it is decoded, a config.json before
it is parsed, an image before it is rasterised.
"""

from __future__ import annotations

import numbers
import os
import reprlib
import sys
from collections.abc import Sequence

from attnviz.errors import BadInput

# Numeric options: (lowest, highest), inclusive.
THREADS = (1, 256)  # torch CPU threads; OpenMP fails or segfaults far past the core count
BATCH_SIZE = (1, 4096)  # sentences per padded batch (attention memory is capped separately)
TOP = (1, 1_000_000)  # rows listed by --top (more than there are simply lists them all)
DPI = (10, 1200)  # image resolution

# An image larger than this many pixels (figure size × dpi) is refused before it is drawn:
# PNG is drawn at that size, and SVG and PDF embed the heatmaps as images at that dpi
# (at --dpi 1200, a 150-word model view peaked at 3.1 GB as SVG). The default dpi (200)
# on the largest figure (30 inches a side) is 36 million pixels.
MAX_IMAGE_PIXELS = 40_000_000

# The attention attnviz keeps for one input (L·H·T·T float32 numbers). Past it, only the
# layers a view needs are computed and kept (`layers=`), and views over every layer are
# refused before any work: at 2,048 pieces, 30 layers × 9 heads would be 4.5 GB. One
# layer must fit, which bounds the input (9 heads: 3,861 pieces). ATTNVIZ_ATTENTION_MB
# sets another budget, for a machine with the memory for it (peak memory is a few times
# the attention kept: see docs/security.md, Limits).
ATTENTION_BYTES = 512 * 2**20
ATTENTION_ENV = "ATTNVIZ_ATTENTION_MB"
ATTENTION_MB = (16, 1 << 20)  # what ATTNVIZ_ATTENTION_MB may be: 16 MB to 1 TB
# The dequantized float32 weights of models read from GGUF files, kept in the cache under their
# own bound (not the attention's ATTNVIZ_CACHE_MB): Gemma 3 270M's take 1,023 MB.
WEIGHTS_ENV = "ATTNVIZ_WEIGHTS_MB"
WEIGHTS_MB = 2048  # its default

# Decoders take inputs as long as their position limit (thousands of tokens); attnviz reads
# at most this many pieces of one input (a 2,048-piece layer of 9 heads is 151 MB of float32
# attention; the model's own limit applies when it is lower).
DECODER_TOKENS = 2048

# The views made for length (attnviz.analyse_long: pooled maps, distance profiles, sink
# shares, one query's rows, head statistics) never hold a layer's whole attention: the model
# hands it over a block of queries at a time. They read up to this many pieces (the model's
# own limit applies when it is lower): 16,384 pieces on 30 layers of 9 heads is 4 minutes
# of compute on 2 cores, its blocks 150 MB.
LONG_TOKENS = 16_384

# Text. A piece of a BERT-family tokenizer is a few characters, so a text of more than
# TEXT_CHARS_PER_POSITION characters per position the model has is refused (or, with
# --truncate, cut at a space) before it is tokenized: tokenizing costs time and about
# 170 bytes of memory per character. MAX_TEXT_BYTES is what any model could take
# (65,536 positions, the largest config attnviz accepts), so standard input and corpus
# lines are read no further than that.
TEXT_CHARS_PER_POSITION = 64
MIN_TEXT_CHARS = 32_768
MAX_TEXT_BYTES = 16 * 2**20

# A memo of a rendered view (`cache.views`) bigger than this is neither written nor read.
MAX_VIEW_BYTES = 8 * 2**20


def max_text_chars(positions: int) -> int:
    """The longest text, in characters, read for a model of `positions` positions."""
    return max(MIN_TEXT_CHARS, TEXT_CHARS_PER_POSITION * positions)


def check_range(value: object, param: str, bounds: tuple[int, int], hint: str = "") -> int:
    """`value` as an int when it is a whole number within `bounds`; else BadInput, one line
    naming the parameter `param` (see `BadInput`)."""
    low, high = bounds
    name = "{" + param + "}"
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):  # numpy ints too
        raise BadInput(
            f"{name} must be a whole number from {low} to {high}, got {value!r}", param=param
        )
    number = int(value)
    if not low <= number <= high:
        raise BadInput(f"{name} {number} is out of range: use {low}..{high}{hint}", param=param)
    return number


def check_choice(value: object, allowed: Sequence[str], param: str) -> str:
    """`value` when it is one of `allowed`; else BadInput naming the parameter `param`."""
    if not isinstance(value, str) or value not in allowed:
        raise BadInput(f"{{{param}}} {value!r} is not one of {', '.join(allowed)}", param=param)
    return value


def resolve_index(value: object, size: int, what: str, param: str | None = None) -> int:
    """A 0-based index that may count from the end (-1 is the last), checked against `size`.

    `what` is what it counts ("layer", "head"); `param` the argument that gave it, when
    its name is not `what` (rollout's `upto` is a layer)."""
    param = param or what
    name = "{" + param + "}"
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):  # numpy ints too
        raise BadInput(f"{name} must be a whole number, got {value!r}", param=param)
    if not -size <= int(value) < size:
        raise BadInput(
            f"{name} {value} is out of range: this model has {size} {what}s, "
            f"use 0..{size - 1} (or -{size}..-1 from the end)",
            param=param,
        )
    return int(value) % size


def number_list(value: object, param: str, what: str, example: str) -> Sequence[object]:
    """`value` when it is a list (a sequence, or a 1-D numpy array) of `what` numbers, e.g.
    `example`; BadInput naming `param` for anything else. Its entries are checked by the
    caller."""
    numpy = sys.modules.get("numpy")  # an array comes from a numpy already imported
    array = numpy is not None and isinstance(value, numpy.ndarray)
    if isinstance(value, str | bytes) or not (isinstance(value, Sequence) or array):
        raise BadInput(
            f"{{{param}}} must be a list of {what} numbers, e.g. {example}; got {shown(value)}",
            param=param,
        )
    if array and getattr(value, "ndim", 1) != 1:
        raise BadInput(
            f"{{{param}}} must be a flat list of {what} numbers, e.g. {example}; got an array "
            f"of shape {getattr(value, 'shape', '?')}",
            param=param,
        )
    return value  # type: ignore[return-value]


def resolve_heads(heads: Sequence[int] | None, num_heads: int) -> list[int] | None:
    """Head numbers (`--heads 0,3,-1`) as 0-based numbers in the order given; None: every head."""
    if heads is None:
        return None
    heads = number_list(heads, "heads", "head", "[0, 3, 5]")  # type: ignore[assignment]
    if len(heads) > num_heads:  # refused by its length, before any entry is read
        raise BadInput(
            f"{{heads}} lists {len(heads):,} heads, but this model has {num_heads} per layer: "
            "list each head once",
            param="heads",
        )
    resolved = [_head_of(h, num_heads) for h in heads]
    if not resolved:
        raise BadInput(
            "the list of {heads} is empty: name at least one head, e.g. 0,3,5", param="heads"
        )
    seen: set[int] = set()
    repeated: set[int] = set()
    for h in resolved:  # linear: a set, never list.count
        (repeated if h in seen else seen).add(h)
    if repeated:
        listed = ",".join(map(str, sorted(repeated)))
        raise BadInput(f"{{heads}} names head {listed} twice: list each head once", param="heads")
    return resolved


def shown(value: object, limit: int = 60) -> str:
    """`repr(value)`, cut to `limit` characters (a value may be a huge list or string)."""
    try:
        text = reprlib.repr(value)
    except Exception:  # a hostile __repr__
        text = f"a {type(value).__name__}"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _head_of(value: object, num_heads: int) -> int:
    """One entry of a list of heads, resolved; BadInput naming the list."""
    try:
        return resolve_index(value, num_heads, "head")
    except BadInput as exc:
        raise BadInput("{heads}: " + str(exc), param="heads") from None


def megabytes(size: int) -> str:
    """`size` bytes as `12.3 MB` (1 MB = 2**20 bytes)."""
    return f"{size / 2**20:.1f} MB"


def attention_budget() -> int:
    """The bytes of attention kept for one input: ATTNVIZ_ATTENTION_MB, else 512 MB."""

    raw = os.environ.get(ATTENTION_ENV, "").strip()
    if not raw:
        return ATTENTION_BYTES
    low, high = ATTENTION_MB
    # ASCII digits, and few: `²` is a digit that int() refuses, and so are 5,000 digits
    number = raw.isascii() and raw.isdigit() and len(raw) <= len(str(high))
    if not number or not low <= int(raw) <= high:
        raise BadInput(
            f"{ATTENTION_ENV}={raw[:20]!r} is not a number of megabytes from {low} to {high:,}: "
            f"set it to one (512 is the default), or unset it"
        )
    return int(raw) * 2**20


def longest_input(heads: int, budget: int | None = None) -> int:
    """The most pieces for which one layer's attention (heads × T² float32) fits the budget."""
    import math

    return math.isqrt((attention_budget() if budget is None else budget) // (heads * 4))


# Files that hold every weight of every layer: a .json export writes each as text (about 10
# bytes, and Python builds the whole document first: 1.8 GB and 6 GB of memory for 130
# million weights); a page carries them all to the browser, which decodes and draws them.
JSON_WEIGHTS = 20_000_000  # a 512-piece input on a 6-layer, 12-head model is 18.9 million
PAGE_WEIGHTS = 40_000_000


def check_export(suffix: str, weights: int, maps: int | None = None) -> None:
    """Refuse a .json or .html file of `weights` weights past what attnviz writes, in one line.

    `maps` (layers × heads the file holds), when known, lets the refusal name the longest
    input that fits: `--max-tokens N --truncate`, a suggestion that works for this file."""
    import math

    suffix = suffix.lower()

    def fits(limit: int) -> str:
        if not maps:
            return ""
        longest = min(math.isqrt(limit // maps), math.isqrt(attention_budget() // (maps * 4)))
        return f", or read at most {longest:,} pieces ({{max_tokens}} {longest} with {{truncate}})"

    if suffix == ".json" and weights > JSON_WEIGHTS:
        raise BadInput(
            f"a .json file writes every weight as text: {weights:,} weights (about "
            f"{amount(weights * 10)}) are more than attnviz writes ({JSON_WEIGHTS:,}); write "
            f".npz instead (4 bytes a weight), or shorten the text{fits(JSON_WEIGHTS)}",
            param=("max_tokens", "truncate") if maps else None,
        )
    if suffix in (".html", ".htm") and weights > PAGE_WEIGHTS:
        raise BadInput(
            f"a page carries every weight of every layer to the browser: {weights:,} weights are "
            f"more than attnviz puts in one ({PAGE_WEIGHTS:,}); draw one layer (show or heads "
            "--layer L --out x.png), the pooled model view (model --pool N --out x.png), write "
            f".npz, or shorten the text{fits(PAGE_WEIGHTS)}",
            param=("max_tokens", "truncate") if maps else None,
        )


def amount(size: int) -> str:
    """`size` bytes as people say it: `151 MB`, `4.5 GB`."""
    if size >= 2**30:
        return f"{size / 2**30:.1f} GB"
    return f"{size / 2**20:.0f} MB" if size >= 2**20 else f"{size / 2**10:.0f} KB"


# ---------------------------------------------------------------------------------------------
# The files of a model folder are input from strangers. Each is read only when it is a regular
# file (never a FIFO, which would wait forever, a device such as /dev/zero, which never ends, a
# socket or a folder), and no further than the bound of its kind; past it, one line refuses
# it before a byte is parsed. Real files are far below these: a config.json is a few
# kilobytes, the largest tokenizer.json published (Gemma's) about 35 MB.
CONFIG_BYTES = 8 * 2**20  # config.json (a long id2label map makes some hundreds of KB)
INDEX_BYTES = 16 * 2**20  # model.safetensors.index.json: one line per tensor
TOKENIZER_BYTES = 64 * 2**20  # tokenizer.json, tokenizer_config.json, vocab files, ...
SAFETENSORS_HEADER_BYTES = 100_000_000  # the safetensors format's own bound on its header
# Of a model card (README.md) only the front matter at its start is read (its `language:`):
# at most this many bytes, however long the card; a card that is not a regular file is skipped.
MODEL_CARD_BYTES = 64 * 2**10
# An .npy array in an .npz (an attention file, a cache entry) starts with a header: a Python
# dict literal of its dtype and shape, its length in the file's first bytes. numpy reads the
# whole header before it checks its length (a 1 MB .npz may declare a 1 GB header), so
# attnviz reads the length first and refuses a header past this bound before a byte of it is
# read. Real headers are under 1 KB (numpy pads them to 64 or 128 bytes).
NPY_HEADER_BYTES = 4 * 2**10
NPY_DIMENSIONS = 32  # axes an array may have (attnviz writes at most 4; numpy allows 64)

# What the contribution measures (attnviz.measures.contributions) may cost. They run the
# encoder again in float64, keeping its attention (L·H·T² numbers) and the layers' inputs,
# build their result (L·H·T² for the norm, L·T² for the others) and work through chunks;
# their estimate of these arrays is refused past `attention_budget()`, before any work.
MEASURE_NUMBER_BYTES = 8  # the measures compute in float64
# Their chunks take at most this share of the budget: 1/4 of 512 MB is 128 MB.
MEASURE_CHUNK_SHARE = 4
DECOMPOSED_ARRAYS = 6  # (q, T, C) arrays alive at once in norm-res-ln and ALTI's chunks
VALUE_ZEROING_ARRAYS = 6  # (j, T, max(C, F)) arrays alive at once in value zeroing's chunks
# Their time, bounded by their work before it starts. ALTI computes Σ_h α_ij f_h(x_j) for
# every query and key of every layer: L·T²·C·H multiply-adds, and a dozen passes over
# (T, T, C) numbers (T = 512 on the default model, 6 layers of 12 heads and 384 numbers:
# about 2 minutes on 2 busy cores). Value zeroing runs every layer T + 1 times over T
# pieces, feed-forward included: L·T²·C·(2F + C) (F the feed-forward width); 256 pieces on
# the default model take about a minute, 512 took 5. Past these, the measure is refused
# in one line that names the --max-tokens that fits.
DECOMPOSED_WORK = 6 * 512**2 * 384 * 12
VALUE_ZEROING_WORK = 6 * 256**2 * 384 * (2 * 1536 + 384)


def chunk_numbers(arrays: int, budget: int | None = None) -> int:
    """How many numbers one chunk array may hold, so that `arrays` of them (in float64) take
    at most 1/MEASURE_CHUNK_SHARE of the budget."""
    budget = attention_budget() if budget is None else budget
    return max(1, budget // (MEASURE_CHUNK_SHARE * arrays * MEASURE_NUMBER_BYTES))


# A GGUF file's metadata (attnviz.model.gguf) is a stranger's too: every count it claims is
# checked against these before a list, a table or a tokenizer is built from it. The largest
# vocabulary published is Gemma 3's 262,144 tokens (2.3 MB of text, its longest token 48
# bytes); Llama 3's is 128,256, Qwen's 151,936.
GGUF_LAYERS = 1024  # block_count: a decoder's config.json bound (model.families.reader)
GGUF_TOKENS = 524_288  # tokens, or merges, in one vocabulary: twice Gemma 3's
GGUF_TOKEN_BYTES = 1024  # one token (a longer one costs transformers quadratic time)
GGUF_VOCABULARY_BYTES = 32 * 2**20  # every token's text together
GGUF_ARRAY_ITEMS = 8 * GGUF_TOKENS  # the items of every array of the file together
GGUF_INNER_ARRAYS = 1 << 16  # arrays held in arrays, the file's whole (real files hold none)


# A labelled file for `find --file` (`attnviz.roles`): read whole, checked whole before the
# model runs, so it is bounded in bytes, examples and candidates per example.
ROLES_FILE_BYTES = 16 * 2**20
ROLES_EXAMPLES = 20_000
ROLES_CANDIDATES = 256
ROLES_TEXT_CHARS = 4_000  # one example's text, in characters
ROLES_PROBLEMS = 20  # problems listed, one a line, before "and N more"
ROLES_LINES = 5 * ROLES_EXAMPLES  # lines not blank, comments (//) too: split no further

# `attnviz ablate --target/--foil`: a word that is one piece of the vocabulary. No token of a
# vocabulary attnviz reads is longer (GGUF_TOKEN_BYTES), so a longer word is refused before
# the tokenizer sees it (tokenizing costs about 170 bytes of memory a character).
ABLATE_WORD_CHARS = 1024

# `attnviz explore`'s `/` line: a new text typed or pasted. The smallest bound of a model's
# text (MIN_TEXT_CHARS); a longer text is refused as it is pasted, in the line itself (a
# terminal heatmap of thousands of words is unreadable; pass a long text as the argument).
EXPLORE_TEXT_CHARS = MIN_TEXT_CHARS

# `attnviz models` reads what it lists from strangers' folders: at most this many bytes of
# config.json files, model cards and GGUF metadata in all (a real config is a few KB, the
# front of a card some KB), and of a GGUF file only its first GGUF_PEEK_BYTES, where its
# architecture is named (a full header holds the whole vocabulary: 0.5 s for Gemma's).
MODELS_SCAN_BYTES = 64 * 2**20
GGUF_PEEK_BYTES = 64 * 2**10

# Corpus work split over processes (attnviz.sharding, attnviz.partials): the slices a run may
# be cut into, and the bound on a partial file (a stranger's file is input). A roles partial
# holds each example's (L, H) hits and weights: 20,000 examples on a 32 × 32-head model are
# about 220 MB of base64.
SHARDS = (1, 100_000)
# Sentences tokenized and held at a time (pipeline.corpus_chunks; a block of the slices is
# never larger): a tokenized sentence holds some kilobytes (pieces, offsets, labels), so a
# chunk stays in the tens of megabytes however long the corpus, and the first batch runs
# long before a streamed corpus ends; within a chunk, batches are sorted by length.
CORPUS_CHUNK = 4096
PARTIAL_FILE_BYTES = 512 * 2**20
PARTIALS = 100_000  # partial files one merge reads

# transformers' engine: the numbers of position tables it computes in Python when it builds a
# model (RoFormer's, Marian's and Pegasus's sinusoids, a list of floats each, about 100 bytes
# and some microseconds a number): Pegasus-large's 1024 x 1024 fits; a config that asks for
# 65,536 positions of 64 features would take gigabytes before a weight is read.
COMPUTED_TABLE_NUMBERS = 2**20
