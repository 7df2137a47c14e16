"""Decoder rows of the benchmark: a cold show on a 135M-parameter decoder, and 2,048 tokens.

Both run on random checkpoints written here with transformers, in the shape of
HuggingFaceTB/SmolLM2-135M (Llama: 30 layers, 9 query heads sharing 3 key/value heads,
hidden 576, stored in bfloat16 as the real one is), with the byte-level BPE tokenizer the
tests train (tests/conftest.py). Nothing downloads.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# SmolLM2-135M's config.json, the sizes that matter here.
SMOLLM2_135M = dict(
    hidden_size=576,
    num_hidden_layers=30,
    num_attention_heads=9,
    num_key_value_heads=3,
    intermediate_size=1536,
    vocab_size=49152,
    max_position_embeddings=8192,
    rope_theta=100000.0,
    rms_norm_eps=1e-5,
    tie_word_embeddings=True,
)
# The default encoder's shape (all-MiniLM-L6-v2: 6 layers, 12 heads, 384 wide, feed-forward
# 1536) as a Llama-family decoder with 4 key/value heads: the measures' rows at 512 pieces,
# side by side with the encoder's figures.
MINILM_SHAPED = dict(
    hidden_size=384,
    num_hidden_layers=6,
    num_attention_heads=12,
    num_key_value_heads=4,
    intermediate_size=1536,
    vocab_size=49152,
    max_position_embeddings=2048,
    tie_word_embeddings=True,
)
SHORT = "John thought: the train was full."  # 20 pieces with the test tokenizer
WORDS = [
    "the",
    "train",
    "was",
    "full",
    "but",
    "he",
    "found",
    "a",
    "free",
    "seat",
    "near",
    "the",
    "window",
    "John",
    "thought",
]


def write_decoder(
    folder: Path,
    *,
    hidden: int | None = None,
    dtype: str = "bfloat16",
    shape: dict | None = None,
) -> Path:
    """A random SmolLM2-135M-shaped LlamaForCausalLM in `folder` (narrower with `hidden`;
    another `shape`, e.g. MINILM_SHAPED, replaces SmolLM2's)."""
    import torch
    import transformers

    from tests.conftest import decoder_tokenizer

    folder.mkdir(parents=True, exist_ok=True)
    decoder_tokenizer(folder, bos=False)
    settings = dict(shape or SMOLLM2_135M, initializer_range=0.3)
    if hidden is not None:  # the real head count, each head 16 wide
        settings.update(hidden_size=hidden, head_dim=hidden // 9, intermediate_size=2 * hidden)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**settings)).eval()
    model.to(getattr(torch, dtype)).save_pretrained(folder)
    return folder


def long_text(pieces: int = 2100) -> str:
    """A text of more than `pieces` pieces for the test tokenizer (about 3 pieces a word)."""
    rng = random.Random(0)
    return " ".join(rng.choice(WORDS) for _ in range(pieces // 2))


def weights_read(folder: Path) -> str:
    """The reference: import torch and read the checkpoint's tensors from disk."""
    return (
        "import torch\n"
        "from safetensors.torch import load_file\n"
        f"load_file({str(folder / 'model.safetensors')!r})\n"
    )
