"""Tiny random GGUF files written with `gguf.GGUFWriter`, as llama.cpp's converter writes them
(Q and K rows of Llama permuted, Gemma's norms stored as 1 + w, 1-D tensors in F32), with a
small tokenizer in the metadata: sentencepiece-style (llama) or byte-level BPE (gpt2, qwen2).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

# Words of the test sentences, so that the tiny vocabularies have merges to use.
WORDS = ["the", "train", "was", "full", "but", "he", "found", "seat", "free", "thought"]
TEXT = "John thought: the train was full, but he found a free seat. The cat sat."


# llama.cpp's general.file_type for a file whose 2-D weights are all of one type
FILE_TYPES = {"F32": 0, "F16": 1, "Q4_0": 2, "Q4_1": 3, "Q8_0": 7, "Q5_0": 8, "Q5_1": 9}
FILE_TYPES.update({"Q2_K": 10, "Q3_K": 12, "Q4_K": 15, "Q5_K": 17, "Q6_K": 18, "BF16": 32})


def _spm_vocab() -> tuple[list[str], list[float], list[int]]:
    """A sentencepiece-like vocabulary: specials, characters, then merged pieces by score."""
    tokens = ["<unk>", "<s>", "</s>"]
    types = [2, 3, 3]  # UNKNOWN, CONTROL, CONTROL
    chars = sorted(set("".join(WORDS) + "abcdefghijklmnopqrstuvwxyzJT.,:!?'"))
    pieces = ["▁", *chars]
    for word in WORDS:
        spelled = "▁" + word
        for end in range(2, len(spelled) + 1):
            pieces.append(spelled[:end])
    pieces = list(dict.fromkeys(pieces))
    tokens += pieces
    types += [1] * len(pieces)
    scores = [0.0, 0.0, 0.0] + [-float(i) for i in range(len(pieces))]
    # merged pieces should win over characters: longer first
    scores = [
        s if len(t) < 2 or t.startswith("<") else s + 1000.0 * len(t)
        for t, s in zip(tokens, scores, strict=True)
    ]
    return tokens, scores, types


def _byte_vocab() -> tuple[list[str], list[str], list[int]]:
    """A byte-level BPE vocabulary: the 256 byte symbols, a few merges, <|endoftext|>."""
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    symbols = list(dict.fromkeys(bytes_to_unicode().values()))
    merges: list[str] = []
    tokens = list(symbols)
    for word in WORDS:
        spelled = "Ġ" + word
        current = spelled[0]
        for char in spelled[1:]:
            merged = current + char
            if merged not in tokens:
                merges.append(f"{current} {char}")
                tokens.append(merged)
            current = merged
    tokens.append("<|endoftext|>")
    types = [1] * (len(tokens) - 1) + [3]
    return tokens, merges, types


def _permute(w: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp's reordering of Q or K rows (rotating halves -> rotating pairs)."""
    return (
        w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)
    )


def _random_k_blocks(rng: np.random.Generator, rows: int, cols: int, qtype: object) -> np.ndarray:
    """Random K-quant blocks (gguf cannot quantize to these) with small, finite scales."""
    import gguf

    block, size = gguf.GGML_QUANT_SIZES[qtype]
    data = rng.integers(0, 256, size=(rows, cols // block, size), dtype=np.uint8)
    scale = np.frombuffer(np.float16(0.004).tobytes(), np.uint8)
    name = qtype.name
    where = {"Q4_K": (0, 2), "Q5_K": (0, 2), "Q6_K": (size - 2,), "Q3_K": (size - 2,)}
    where["Q2_K"] = (size - 4, size - 2)
    for start in where[name]:
        data[..., start : start + 2] = scale
    return data.reshape(rows, cols // block * size)


def write_gguf(
    path: Path,
    family: str = "llama",
    qtype: str = "F32",
    *,
    hidden: int = 64,
    layers: int = 2,
    heads: int = 4,
    kv_heads: int = 2,
    ffn: int = 128,
    seed: int = 0,
    untied: bool = True,
    name: str | None = None,
) -> Path:
    """Write a tiny random `family` model quantized to `qtype` (2-D weights) to `path`."""
    import gguf

    rng = np.random.default_rng(seed)
    # transformers' GGUF loader reads no n_positions nor n_inner for GPT-2 (it keeps 1024 and
    # 4 * hidden): write those, so that its model can load the file at all
    context = 1024 if family == "gpt2" else 256
    ffn = 4 * hidden if family == "gpt2" else ffn
    q = gguf.GGMLQuantizationType[qtype]
    arch = {"mistral": "llama"}.get(family, family)
    writer = gguf.GGUFWriter(str(path), arch)
    if name:
        writer.add_name(name)
    if family == "gpt2" or family == "qwen2":
        tokens, merges, types = _byte_vocab()
    else:
        tokens, scores, types = _spm_vocab()
    vocab = len(tokens)
    # Gemma 3 and Qwen3 have head sizes of their own (transformers' loader reads none for
    # Qwen3 and keeps Qwen3Config's 128, the size of every real Qwen3)
    head_dim = {"gemma3": 256, "qwen3": 128}.get(family, hidden // heads)

    def rand(*shape: int, scale: float = 0.3) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    def add(name: str, values: np.ndarray) -> None:
        if values.ndim == 1 or qtype == "F32":
            writer.add_tensor(name, values.astype(np.float32))
        elif qtype in ("Q4_K", "Q5_K", "Q6_K", "Q2_K", "Q3_K"):
            writer.add_tensor(name, _random_k_blocks(rng, *values.shape, q), raw_dtype=q)
        else:
            writer.add_tensor(name, gguf.quants.quantize(values, q), raw_dtype=q)

    writer.add_block_count(layers)
    writer.add_context_length(context)
    writer.add_embedding_length(hidden)
    writer.add_feed_forward_length(ffn)
    writer.add_head_count(heads)
    writer.add_file_type(FILE_TYPES[qtype])
    if family == "gpt2":
        writer.add_layer_norm_eps(1e-5)
        add("token_embd.weight", rand(vocab, hidden))
        add("position_embd.weight", rand(context, hidden))
        for i in range(layers):
            b = f"blk.{i}."
            add(b + "attn_norm.weight", 1 + rand(hidden, scale=0.1))
            add(b + "attn_norm.bias", rand(hidden, scale=0.1))
            add(b + "attn_qkv.weight", rand(3 * hidden, hidden))
            add(b + "attn_qkv.bias", rand(3 * hidden, scale=0.1))
            add(b + "attn_output.weight", rand(hidden, hidden))
            add(b + "attn_output.bias", rand(hidden, scale=0.1))
            add(b + "ffn_norm.weight", 1 + rand(hidden, scale=0.1))
            add(b + "ffn_norm.bias", rand(hidden, scale=0.1))
            add(b + "ffn_up.weight", rand(ffn, hidden))
            add(b + "ffn_up.bias", rand(ffn, scale=0.1))
            add(b + "ffn_down.weight", rand(hidden, ffn))
            add(b + "ffn_down.bias", rand(hidden, scale=0.1))
        add("output_norm.weight", 1 + rand(hidden, scale=0.1))
        add("output_norm.bias", rand(hidden, scale=0.1))
        if untied:
            add("output.weight", rand(vocab, hidden))
    else:
        writer.add_head_count_kv(kv_heads)
        writer.add_layer_norm_rms_eps(1e-6)
        writer.add_rope_freq_base(10000.0)
        if family in ("llama", "mistral", "phi3"):
            writer.add_rope_dimension_count(head_dim)
        if family in ("gemma3", "qwen3"):
            writer.add_key_length(head_dim)
            writer.add_value_length(head_dim)
        if family == "gemma3":
            writer.add_sliding_window(4)
        shift = 1.0 if family == "gemma3" else 0.0  # llama.cpp stores Gemma's norms as 1 + w
        add("token_embd.weight", rand(vocab, hidden))
        for i in range(layers if family == "phi3" else 0):  # q, k, v fused; gate and up too
            b = f"blk.{i}."
            add(b + "attn_norm.weight", 1 + rand(hidden, scale=0.1))
            add(b + "attn_qkv.weight", rand((heads + 2 * kv_heads) * head_dim, hidden))
            add(b + "attn_output.weight", rand(hidden, heads * head_dim))
            add(b + "ffn_norm.weight", 1 + rand(hidden, scale=0.1))
            add(b + "ffn_up.weight", rand(2 * ffn, hidden))
            add(b + "ffn_down.weight", rand(hidden, ffn))
        for i in range(0 if family == "phi3" else layers):
            b = f"blk.{i}."
            wq, wk = rand(heads * head_dim, hidden), rand(kv_heads * head_dim, hidden)
            if family in ("llama", "mistral"):
                wq, wk = _permute(wq, heads), _permute(wk, kv_heads)
            add(b + "attn_norm.weight", shift + 1 + rand(hidden, scale=0.1))
            add(b + "attn_q.weight", wq)
            add(b + "attn_k.weight", wk)
            add(b + "attn_v.weight", rand(kv_heads * head_dim, hidden))
            add(b + "attn_output.weight", rand(hidden, heads * head_dim))
            if family == "qwen2":
                add(b + "attn_q.bias", rand(heads * head_dim, scale=0.1))
                add(b + "attn_k.bias", rand(kv_heads * head_dim, scale=0.1))
                add(b + "attn_v.bias", rand(kv_heads * head_dim, scale=0.1))
            if family in ("gemma3", "qwen3"):
                add(b + "attn_q_norm.weight", shift + 1 + rand(head_dim, scale=0.1))
                add(b + "attn_k_norm.weight", shift + 1 + rand(head_dim, scale=0.1))
            add(b + "ffn_norm.weight", shift + 1 + rand(hidden, scale=0.1))
            if family == "gemma3":
                add(b + "post_attention_norm.weight", shift + 1 + rand(hidden, scale=0.1))
                add(b + "post_ffw_norm.weight", shift + 1 + rand(hidden, scale=0.1))
            add(b + "ffn_gate.weight", rand(ffn, hidden))
            add(b + "ffn_up.weight", rand(ffn, hidden))
            add(b + "ffn_down.weight", rand(hidden, ffn))
        add("output_norm.weight", shift + 1 + rand(hidden, scale=0.1))
        if untied:
            add("output.weight", rand(vocab, hidden))
    if family in ("gpt2", "qwen2"):
        writer.add_tokenizer_model("gpt2")
        writer.add_tokenizer_pre("qwen2" if family == "qwen2" else "gpt-2")
        writer.add_token_list(tokens)
        writer.add_token_merges(merges)
        writer.add_token_types(types)
        writer.add_bos_token_id(vocab - 1)
        writer.add_eos_token_id(vocab - 1)
        writer.add_add_bos_token(False)
    else:
        writer.add_tokenizer_model("llama")
        writer.add_token_list(tokens)
        writer.add_token_scores(scores)
        writer.add_token_types(types)
        writer.add_bos_token_id(1)
        writer.add_eos_token_id(2)
        writer.add_unk_token_id(0)
        if family == "phi3":  # Phi3Config's default pad id (32000) is past this vocabulary
            writer.add_pad_token_id(2)
        writer.add_add_bos_token(True)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


# ---------------------------------------------------------------------------------------------
# A written file's metadata changed byte by byte (gguf.GGUFWriter refuses a duplicate key and
# writes each value as its declared type): pairs replaced, removed or added, the tensors kept.
UINT8, INT32, UINT32, FLOAT32, BOOL, STRING, ARRAY, UINT64, FLOAT64 = 0, 5, 4, 6, 7, 8, 9, 10, 12
_FORMATS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?"}
_FORMATS.update({10: "<Q", 11: "<q", 12: "<d"})


def encoded(kind: int, value: object) -> bytes:
    """A metadata value of GGUF type `kind`; an array's `value` is (item type, items)."""
    import struct

    if kind in _FORMATS:
        return struct.pack(_FORMATS[kind], value)
    if kind == STRING:
        raw = value if isinstance(value, bytes) else str(value).encode()
        return struct.pack("<Q", len(raw)) + raw
    item, items = value  # type: ignore[misc]
    head = struct.pack("<IQ", item, len(items))
    return head + b"".join(encoded(item, v) for v in items)


def pair(key: str, kind: int, value: object) -> bytes:
    """One metadata pair: the key, its type, its value."""
    return encoded(STRING, key) + kind.to_bytes(4, "little") + encoded(kind, value)


def _skip(data: bytes, at: int, kind: int) -> int:
    """Where the value of type `kind` at `at` ends."""
    import struct

    if kind in _FORMATS:
        return at + struct.calcsize(_FORMATS[kind])
    if kind == STRING:
        return at + 8 + struct.unpack_from("<Q", data, at)[0]
    item, count = struct.unpack_from("<IQ", data, at)
    at += 12
    for _ in range(count):
        at = _skip(data, at, item)
    return at


def pairs(data: bytes) -> tuple[dict[str, bytes], int]:
    """Each metadata pair's bytes by key (a repeated key: the last), and where they end."""
    import struct

    count = struct.unpack_from("<Q", data, 16)[0]
    found: dict[str, bytes] = {}
    at = 24
    for _ in range(count):
        start = at
        n = struct.unpack_from("<Q", data, at)[0]
        key = data[at + 8 : at + 8 + n].decode()
        at = _skip(data, at + 8 + n + 4, struct.unpack_from("<I", data, at + 8 + n)[0])
        found[key] = data[start:at]
    return found, at


def with_pairs(
    data: bytes, changes: dict[str, bytes | None], extra: tuple[bytes, ...] = ()
) -> bytes:
    """`data` (a GGUF file aligned to 32 bytes) with the pairs of `changes` replaced (None:
    removed) and `extra` pairs added after them; its tensor data is kept as it was."""
    import struct

    found, end = pairs(data)
    n_tensors = struct.unpack_from("<Q", data, 8)[0]
    at = end
    for _ in range(n_tensors):
        n = struct.unpack_from("<Q", data, at)[0]
        dims = struct.unpack_from("<I", data, at + 8 + n)[0]
        at += 8 + n + 4 + 8 * dims + 4 + 8
    records, start = data[end:at], -(-at // 32) * 32
    kept = [changes.get(k, v) for k, v in found.items()]
    body = b"".join(p for p in kept if p is not None) + b"".join(extra)
    count = sum(p is not None for p in kept) + len(extra)
    header = data[:16] + struct.pack("<Q", count) + body + records
    return header + bytes(-len(header) % 32) + data[start:]
