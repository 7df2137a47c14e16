"""A tiny Llama that has learnt a few sentences by heart: a decoder to watch write, offline.

Trains a 4-layer, 64-wide LlamaForCausalLM (4 query heads sharing 2 key/value heads) for
a few hundred steps on attnviz's sample sentences and a few more, with the byte-level BPE
tokenizer the tests train, and saves it with transformers' save_pretrained. Nothing
downloads; about three minutes of CPU time. docs/generation.md runs on it.

    python benchmarks/tiny_writer.py OUT_FOLDER
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

STORIES = [
    "John thought: the train was full, but he found a free seat.",
    "I saw John and Mary yesterday. They were together.",
    "The bank refused the loan because it had no funds.",
    "Once upon a time there was a train that was always full.",
    "Mary thought: the bank was closed, but she found an open door.",
    "The quick brown fox jumps over the lazy dog, unbelievably.",
]


def train(folder: Path, steps: int = 400) -> Path:
    import torch
    import transformers

    from tests.conftest import decoder_tokenizer

    folder.mkdir(parents=True, exist_ok=True)
    vocab = decoder_tokenizer(folder, bos=True)
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    config = transformers.LlamaConfig(
        vocab_size=vocab,
        hidden_size=64,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=128,
        max_position_embeddings=128,
        bos_token_id=0,
        eos_token_id=1,
        pad_token_id=2,
        tie_word_embeddings=True,
    )
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config)
    batch = tokenizer([s + "</s>" for s in STORIES], return_tensors="pt", padding=True)
    labels = batch.input_ids.masked_fill(batch.attention_mask == 0, -100)
    optimiser = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(steps):
        loss = model(**batch, labels=labels).loss
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    model.eval()
    model.generation_config.eos_token_id = 1
    model.save_pretrained(folder)
    print(f"trained {steps} steps, final loss {float(loss):.3f}; saved in {folder}")
    return folder


if __name__ == "__main__":
    train(Path(sys.argv[1] if len(sys.argv) > 1 else "tiny-writer"))
