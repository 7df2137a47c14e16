"""Encoder-decoder models (T5, mT5, BART, Marian) through transformers' eager model: the
encoder, decoder and cross stacks equal transformers' own `encoder_attentions`,
`decoder_attentions` and `cross_attentions` for the same ids, on tiny random checkpoints
written here with tokenizers trained here (no network)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import TOKENIZER_CORPUS

SOURCE = "The cat sat on the mat."
TARGET = "O gato sentou no tapete."
CORPUS = [
    *TOKENIZER_CORPUS,
    SOURCE,
    TARGET,
    "The quick brown fox jumps over the lazy dog.",
    "A raposa marrom pula sobre o cão preguiçoso.",
]
FAMILIES = ("t5", "mt5", "bart", "marian")


def _unigram(folder: Path, special: list[str], eos: str) -> int:
    """A sentencepiece-style Unigram tokenizer (`▁` starts a word) that ends each input with
    `eos`, as T5's and Marian's do."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    unigram = Tokenizer(models.Unigram())
    unigram.pre_tokenizer = pre_tokenizers.Metaspace()
    unigram.decoder = decoders.Metaspace()
    trainer = trainers.UnigramTrainer(
        vocab_size=160, special_tokens=special, unk_token="<unk>", show_progress=False
    )
    unigram.train_from_iterator(CORPUS, trainer)
    eos_id = unigram.token_to_id(eos)
    unigram.post_processor = processors.TemplateProcessing(
        single=f"$A {eos}", pair=f"$A {eos} $B {eos}", special_tokens=[(eos, eos_id)]
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=unigram, eos_token=eos, unk_token="<unk>", pad_token="<pad>"
    )
    tokenizer.save_pretrained(folder)
    return len(tokenizer)


def _bart_bpe(folder: Path) -> int:
    """BART's byte-level BPE: `<s>` … `</s>` around each input (`<s>` 0, `<pad>` 1, `</s>` 2)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    special = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=special,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(CORPUS, trainer)
    bpe.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>",
        pair="<s> $A </s> </s> $B </s>",
        special_tokens=[("<s>", 0), ("</s>", 2)],
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        unk_token="<unk>",
    )
    tokenizer.save_pretrained(folder)
    return len(tokenizer)


def write_seq2seq(folder: Path, family: str) -> Path:
    """A tiny random encoder-decoder of `family` (t5, mt5, bart, marian) with its tokenizer:
    2 encoder layers, 3 decoder layers (so a stack read from the wrong side shows), 4 heads;
    weights wide enough that heads differ."""
    import torch
    import transformers

    folder.mkdir(parents=True, exist_ok=True)
    if family in ("t5", "mt5"):  # T5: <pad> 0 (the decoder's start), </s> 1, <unk> 2
        vocab = _unigram(folder, ["<pad>", "</s>", "<unk>"], "</s>")
        cls = transformers.T5Config if family == "t5" else transformers.MT5Config
        config = cls(
            vocab_size=vocab,
            d_model=32,
            d_kv=8,
            d_ff=48,
            num_layers=2,
            num_decoder_layers=3,
            num_heads=4,
            decoder_start_token_id=0,
            pad_token_id=0,
            eos_token_id=1,
            initializer_factor=1.0,
        )
        model_cls = (
            transformers.T5ForConditionalGeneration
            if family == "t5"
            else transformers.MT5ForConditionalGeneration
        )
    elif family == "marian":  # Marian: </s> 0, <unk> 1, <pad> 2 (the decoder's start)
        vocab = _unigram(folder, ["</s>", "<unk>", "<pad>"], "</s>")
        config = transformers.MarianConfig(
            vocab_size=vocab,
            d_model=32,
            encoder_layers=2,
            decoder_layers=3,
            encoder_attention_heads=4,
            decoder_attention_heads=4,
            encoder_ffn_dim=48,
            decoder_ffn_dim=48,
            max_position_embeddings=64,
            decoder_start_token_id=2,
            pad_token_id=2,
            eos_token_id=0,
            forced_eos_token_id=0,
            init_std=0.3,
        )
        model_cls = transformers.MarianMTModel
    else:  # BART: <s> 0, <pad> 1, </s> 2 (the decoder's start)
        vocab = _bart_bpe(folder)
        config = transformers.BartConfig(
            vocab_size=vocab,
            d_model=32,
            encoder_layers=2,
            decoder_layers=3,
            encoder_attention_heads=4,
            decoder_attention_heads=4,
            encoder_ffn_dim=48,
            decoder_ffn_dim=48,
            max_position_embeddings=64,
            init_std=0.3,
        )
        model_cls = transformers.BartForConditionalGeneration
    torch.manual_seed(0)
    model_cls(config).eval().save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def seq2seq(tmp_path_factory: pytest.TempPathFactory):
    """`seq2seq(family)`: the folder of a tiny random checkpoint of `family`, written once."""
    made: dict[str, Path] = {}

    def make(family: str) -> Path:
        if family not in made:
            made[family] = write_seq2seq(tmp_path_factory.mktemp(f"tiny-{family}"), family)
        return made[family]

    return make


def reference(folder: Path, source_ids: list[int], decoder_ids: list[int]):
    """transformers' own attentions for these ids: encoder, decoder and cross stacks."""
    import torch
    from transformers import AutoModelForSeq2SeqLM

    model = AutoModelForSeq2SeqLM.from_pretrained(folder, attn_implementation="eager").eval()
    with torch.no_grad():
        out = model(
            input_ids=torch.tensor([source_ids]),
            decoder_input_ids=torch.tensor([decoder_ids]),
            output_attentions=True,
        )
    return {
        "encoder": torch.stack(out.encoder_attentions)[:, 0].numpy(),
        "decoder": torch.stack(out.decoder_attentions)[:, 0].numpy(),
        "cross": torch.stack(out.cross_attentions)[:, 0].numpy(),
    }


def labels_shifted(folder: Path, target: str) -> list[int]:
    """The decoder's input ids transformers makes from `labels` for `target`."""
    import torch
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForSeq2SeqLM.from_pretrained(folder)
    labels = torch.tensor([tokenizer(text_target=target).input_ids])
    if hasattr(model, "_shift_right"):  # T5
        return model._shift_right(labels)[0].tolist()
    from transformers.models.bart.modeling_bart import shift_tokens_right

    config = model.config
    return shift_tokens_right(labels, config.pad_token_id, config.decoder_start_token_id)[
        0
    ].tolist()


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_each_stack_equals_transformers_own_attentions(seq2seq, family: str) -> None:
    """Through `auto`, encoder, decoder and cross stacks equal transformers' own attentions
    for the same ids, and the decoder reads the target as transformers shifts `labels`."""
    import attnviz

    folder = seq2seq(family)
    found = {}
    for stack in ("encoder", "decoder", "cross"):
        found[stack] = attnviz.analyse(SOURCE, model=str(folder), target=TARGET, stack=stack)
    cross = found["cross"]
    assert cross.key_pieces is not None  # a rectangle: target queries x source keys
    source_ids, target_ids = cross.key_pieces.ids, cross.pieces.ids
    assert target_ids == labels_shifted(folder, TARGET)
    want = reference(folder, source_ids, target_ids)
    S, T = len(source_ids), len(target_ids)
    assert found["encoder"].attentions.shape == (2, 4, S, S)
    assert found["decoder"].attentions.shape == (3, 4, T, T)
    assert found["cross"].attentions.shape == (3, 4, T, S)
    for stack, analysis in found.items():
        np.testing.assert_allclose(analysis.attentions, want[stack], atol=1e-6, rtol=0)
    # heads differ: a stack read from the wrong head or layer would show
    assert np.abs(want["cross"][0, 0] - want["cross"][0, 1]).max() > 0.05
    assert np.triu(found["decoder"].attentions, 1).max() == 0.0


def test_config_reads_sizes_and_start_token(seq2seq) -> None:
    from attnviz.model.seq2seq_config import describe_seq2seq

    raw = json.loads((seq2seq("t5") / "config.json").read_text())
    shape = describe_seq2seq(raw)
    assert (shape.encoder_layers, shape.decoder_layers, shape.encoder_heads) == (2, 3, 4)
    assert shape.decoder_start == 0
    raw = json.loads((seq2seq("marian") / "config.json").read_text())
    assert describe_seq2seq(raw).decoder_start == 2
