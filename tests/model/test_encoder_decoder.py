"""Encoder-decoder models (T5, mT5, BART, Marian, Pegasus) through transformers' eager model: the
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
FAMILIES = ("t5", "mt5", "bart", "marian", "pegasus")


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
    """A tiny random encoder-decoder of `family` (t5, mt5, bart, marian, pegasus) with its
    tokenizer:
    2 encoder layers, 3 decoder layers (so a stack read from the wrong side shows), 4 heads;
    weights wide enough that heads differ."""
    import torch
    import transformers

    folder.mkdir(parents=True, exist_ok=True)
    if family == "pegasus":  # Pegasus: <pad> 0 (the decoder's start), </s> 1, <unk> 2
        vocab = _unigram(folder, ["<pad>", "</s>", "<unk>"], "</s>")
        config = transformers.PegasusConfig(
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
        model_cls = transformers.PegasusForConditionalGeneration
    elif family in ("t5", "mt5"):  # T5: <pad> 0 (the decoder's start), </s> 1, <unk> 2
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


def test_config_reads_sizes_and_start_token() -> None:
    """Each stack's layers and heads and the decoder's start token, from config.json alone;
    a start token from generation_config.json when config.json has none; mBART refused."""
    from attnviz.errors import AttnvizError
    from attnviz.model.seq2seq_config import describe_seq2seq, is_seq2seq

    t5 = {"model_type": "t5", "num_layers": 2, "num_decoder_layers": 3, "num_heads": 4,
          "d_model": 32, "vocab_size": 100, "decoder_start_token_id": 0}  # fmt: skip
    shape = describe_seq2seq(t5)
    assert (shape.encoder_layers, shape.decoder_layers, shape.encoder_heads) == (2, 3, 4)
    assert shape.decoder_start == 0 and shape.stack_size("cross") == (3, 4)
    del t5["decoder_start_token_id"], t5["num_decoder_layers"]
    assert describe_seq2seq(t5, start=0).decoder_layers == 2  # T5: as deep as its encoder
    with pytest.raises(AttnvizError, match="decoder_start_token_id"):
        describe_seq2seq(t5)
    marian = {"model_type": "marian", "encoder_layers": 6, "decoder_layers": 6,
              "encoder_attention_heads": 8, "decoder_attention_heads": 8, "d_model": 512,
              "vocab_size": 58101, "max_position_embeddings": 512,
              "decoder_start_token_id": 58100}  # fmt: skip
    assert describe_seq2seq(marian).max_tokens == 512
    with pytest.raises(AttnvizError, match="encoder_layers=0"):
        describe_seq2seq({**marian, "encoder_layers": 0})
    mbart = {**marian, "model_type": "mbart", "is_encoder_decoder": True}
    assert is_seq2seq(mbart) and not is_seq2seq({"model_type": "bert"})
    with pytest.raises(AttnvizError, match="t5, mt5, bart, marian, pegasus"):
        describe_seq2seq(mbart)


# ---------------------------------------------------------------- the command line


def run(*args: str) -> tuple[int, str, str]:
    from typer.testing import CliRunner

    from attnviz.cli import app

    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "100"})
    return result.exit_code, result.stdout, result.stderr


def ok(*args: str) -> str:
    code, out, err = run(*args)
    assert code == 0, err
    return out


@pytest.mark.slow
@pytest.mark.parametrize("suffix", [".json", ".npz"])
def test_export_carries_both_sides_as_fed(seq2seq, tmp_path: Path, suffix: str) -> None:
    """JSON and NPZ of an encoder-decoder carry the source (`tokens`, `input_ids`) and the
    target as the decoder was fed it (`target_tokens`, `target_ids`), with the stack; the
    attention is the cross stack, (L_dec, H, T, S), and equals the API's."""
    import attnviz

    folder = seq2seq("t5")
    out = tmp_path / f"cross{suffix}"
    ok("export", SOURCE, "--model", str(folder), "--target", TARGET, "--out", str(out), "-q")
    if suffix == ".json":
        data = json.loads(out.read_text())
    else:
        with np.load(out, allow_pickle=False) as npz:
            data = {name: npz[name].tolist() for name in npz.files}
    analysis = attnviz.analyse(SOURCE, model=str(folder), target=TARGET)
    assert analysis.key_pieces is not None
    source, target = analysis.key_pieces, analysis.pieces
    assert data["tokens"] == source.tokens and data["input_ids"] == source.ids
    assert data["target_tokens"] == target.tokens and data["target_ids"] == target.ids
    assert data["target_ids"] == labels_shifted(folder, TARGET)  # start token, labels shifted
    assert data["text"] == SOURCE and data["target_text"] == TARGET
    assert data["stack"] == "cross" and data["generated"] is False
    weights = np.array(data["attentions"], dtype=np.float32)
    assert weights.shape == (3, 4, len(target), len(source))
    np.testing.assert_allclose(weights, analysis.attentions, atol=1e-6)


@pytest.mark.slow
def test_generate_is_the_models_own_greedy_output(seq2seq) -> None:
    """`--generate N`: the target is what transformers' greedy `generate` writes, fed with
    its start token, and every title says the target was generated."""
    import torch
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    folder = seq2seq("bart")
    data = json.loads(ok("show", SOURCE, "--model", str(folder), "--generate", "5", "--json", "-q"))
    assert "target generated by the model" in data["model"]
    assert data["stack"] == "cross" and data["engine"] == "transformers"  # the record says so
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForSeq2SeqLM.from_pretrained(folder, attn_implementation="eager").eval()
    ids = tokenizer(SOURCE, return_tensors="pt").input_ids
    with torch.no_grad():
        written = model.generate(ids, max_new_tokens=5, do_sample=False, num_beams=1)[0]
    import attnviz

    analysis = attnviz.analyse(SOURCE, model=str(folder), generate=5, stack="decoder")
    assert analysis.pieces.ids == written.tolist()
    assert analysis.sides is not None and analysis.sides.generated
    assert len(data["tokens"]) == len(analysis.words)  # rows: the generated target's words


@pytest.mark.slow
def test_find_ranks_the_cross_head_that_aligns_two_words(seq2seq) -> None:
    """`find --from TARGETWORD --to SOURCEWORD` on the cross stack ranks every decoder
    layer and head by the weight from the target word to the source word."""
    import attnviz

    folder = str(seq2seq("bart"))
    args = ("--model", folder, "--target", TARGET, "--from", "gato", "--to", "cat")
    found = json.loads(ok("find", SOURCE, *args, "--top", "12", "--json", "-q"))
    analysis = attnviz.analyse(SOURCE, model=folder, target=TARGET)
    weights = np.zeros((3, 4))  # (L_dec, H): gato's weight on cat, in words
    for layer in range(3):
        for head in range(4):
            view = analysis.view(layer, head)
            assert view.key_tokens is not None
            weights[layer, head] = view.matrix[
                view.tokens.index("gato"), view.key_tokens.index("cat")
            ]
    best = np.unravel_index(np.argmax(weights), weights.shape)
    assert (found["heads"][0]["layer"], found["heads"][0]["head"]) == tuple(map(int, best))
    assert found["heads"][0]["weight"] == pytest.approx(float(weights.max()), abs=1e-6)
    assert len(found["heads"]) == 12  # 3 layers x 4 heads


@pytest.mark.slow  # the tiny checkpoints: torch and transformers, written once
@pytest.mark.parametrize(
    "args, words",
    [
        (("show", SOURCE, "--model", "{t5}"), ("--target TEXT", "--generate N")),
        (("show", SOURCE, "--stack", "cross"), ("--stack is for encoder-decoder",)),
        (("show", SOURCE, "--model", "{t5}", "--generate", "0"), ("--generate 0", "1..256")),
        (("show", SOURCE, "--model", "{t5}", "--generate", "257"), ("--generate 257",)),
        (("rollout", SOURCE, "--model", "{t5}", "--target", TARGET), ("--stack encoder",)),
        (("show", SOURCE, "--model", "{t5}", "--target", TARGET, "--engine", "attnviz"),
         ("--engine transformers",)),
        (("show", SOURCE, "--model", "{t5}", "--target", TARGET, "--measure", "alti"),
         ("--measure alti",)),
        (("find", SOURCE, "--model", "{t5}", "--target", TARGET, "--from", "nada",
          "--to", "cat"), ("--from",)),
        (("find", SOURCE, "--model", "{t5}", "--target", TARGET, "--stack", "decoder",
          "--from", "gato", "--to", "sentou"), ("look only back", "--from sentou --to gato")),
        # compare-measures has no --target: it must not send the user looking for one
        (("compare-measures", SOURCE, "--model", "{t5}", "--query", "cat"),
         ("comparing the measures", "--engine transformers")),
    ],
    ids=["no-target", "stack-on-bert", "generate-0", "generate-257", "rollout-cross",
         "own-engine", "measure", "find-missing-word", "find-decoder-forward", "compare"],
)  # fmt: skip
def test_refusals_are_one_line(seq2seq, args: tuple[str, ...], words: tuple[str, ...]) -> None:
    """A missing target, --stack on a BERT, --generate out of range, rollout of the cross
    stack: each one line on stderr, exit != 0, nothing on stdout."""
    folder = str(seq2seq("t5"))
    code, out, err = run(*(a.replace("{t5}", folder) for a in args))
    assert code != 0 and out == ""
    assert err.startswith("Error: ") and err.count("\n") == 1, err
    for word in words:
        assert word in err


@pytest.mark.slow  # the tiny checkpoints: torch and transformers, written once
def test_python_names_arguments_as_python_spells_them(seq2seq) -> None:
    import attnviz

    folder = str(seq2seq("t5"))
    with pytest.raises(attnviz.BadInput, match="target TEXT"):
        attnviz.analyse(SOURCE, model=folder)
    with pytest.raises(attnviz.BadInput, match="^stack is for encoder-decoder"):
        attnviz.analyse(SOURCE, stack="cross")
    with pytest.raises(attnviz.BadInput, match="stack"):
        attnviz.analyse(SOURCE, model=folder, target=TARGET, stack="both")
    assert attnviz.is_encoder_decoder(folder) and not attnviz.is_encoder_decoder()


# ---------------------------------------------------------------- the page, in a browser


@pytest.mark.slow
def test_cross_page_shows_the_weights_of_show_json(seq2seq, tmp_path: Path) -> None:
    """A cross-attention page renders in Chromium with no console errors, and hovering a
    target token shows the weights `show --stack cross --json` prints for it."""
    from tests.render.test_html import Page, _browser

    sync_playwright = _browser()
    folder = str(seq2seq("marian"))
    out = tmp_path / "cross.html"
    common = (SOURCE, "--model", folder, "--target", TARGET, "--layer", "1", "-q")
    ok("heads", *common, "--out", str(out))
    shown = json.loads(ok("show", *common, "--stack", "cross", "--json"))
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        view = Page(chromium, out)
        page = view.page
        assert page.locator(".av-left .av-tok").count() == len(shown["tokens"])  # target words
        assert page.locator(".av-right .av-tok").count() == len(shown["key_tokens"])  # source
        row = shown["tokens"].index("gato")
        page.hover(f'.av-left .av-tok[data-index="{row}"]')
        np.testing.assert_allclose(view.weights("right"), shown["weights"][row], atol=1e-4)
        assert view.errors == [] and view.requests == []
        view.close()
        chromium.close()


@pytest.mark.slow
def test_a_config_larger_than_its_weights_is_refused_before_allocating(
    seq2seq, tmp_path: Path
) -> None:
    """A T5 config asking for 3 million vocabulary rows over the tiny checkpoint's weights is
    one line (the model is counted on the meta device), never 3 million random rows."""
    import shutil

    folder = tmp_path / "big-t5"
    shutil.copytree(seq2seq("t5"), folder)
    config = json.loads((folder / "config.json").read_text())
    config["vocab_size"] = 3_000_000
    (folder / "config.json").write_text(json.dumps(config))
    code, out, err = run("show", SOURCE, "--model", str(folder), "--target", TARGET)
    assert code == 1 and out == "" and err.count("\n") == 1
    assert "do not belong together" in err


@pytest.mark.slow  # the tiny checkpoints: torch and transformers, written once
def test_info_describes_both_stacks(seq2seq) -> None:
    """`info` on an encoder-decoder names its kind, each stack's layers and heads and the
    token its decoder starts from, without loading weights."""
    import attnviz

    folder = str(seq2seq("marian"))
    out = ok("info", "--model", folder)
    assert "encoder-decoder" in out and "2 encoder, 3 decoder" in out
    assert "id 2 (decoder_start_token_id)" in out and "MarianMTModel" in out
    details = attnviz.model_info(folder)
    assert details.engine == "transformers" and details.encdec is not None
    assert (details.shape.layers, details.shape.heads) == (3, 4)  # the cross stack's


@pytest.mark.slow  # the tiny checkpoints: torch and transformers, written once
def test_python_refuses_what_an_encoder_decoder_does_not_read(seq2seq) -> None:
    import attnviz

    folder = str(seq2seq("t5"))
    for extra, word in (({"pair": "B."}, "pair"), ({"mask": "causal"}, "mask causal")):
        with pytest.raises(attnviz.BadInput, match=word):
            attnviz.analyse(SOURCE, model=folder, target=TARGET, **extra)
    with pytest.raises(attnviz.BadInput, match="out of range"):
        attnviz.prepare_encdec(SOURCE, model=folder, target=TARGET).check(layer=3)


@pytest.mark.slow
@pytest.mark.parametrize("stack", ["cross", "decoder"])
def test_an_export_loaded_back_draws_the_same(seq2seq, tmp_path: Path, stack: str) -> None:
    """`--load` of an encoder-decoder's export takes its rows from the target (the source is
    `tokens` in the file): the same heatmap, masked cells included, and the same `find`."""
    folder = str(seq2seq("t5"))
    out = tmp_path / f"{stack}.npz"
    given = (SOURCE, "--model", folder, "--target", TARGET, "--stack", stack, "-q")
    ok("export", *given, "--out", str(out))
    words = ("sentou", "gato") if stack == "decoder" else ("gato", "cat")  # a decoder looks back
    for args in (("show", "--layer", "1", "--head", "2"),
                 ("find", "--from", words[0], "--to", words[1], "--json")):  # fmt: skip
        loaded = ok(*args, "--load", str(out))
        computed = ok(*args[:1], *given, *args[1:])
        if args[0] == "show":  # the title names the stack only when computed
            loaded, computed = loaded.split("▕", 1)[1], computed.split("▕", 1)[1]
        else:
            loaded, computed = json.loads(loaded)["heads"], json.loads(computed)["heads"]
        assert loaded == computed


@pytest.mark.slow
def test_the_engine_note_is_on_stderr_never_in_json(seq2seq) -> None:
    folder = str(seq2seq("t5"))
    code, out, err = run("show", SOURCE, "--model", folder, "--target", TARGET, "--json")
    assert code == 0 and json.loads(out)["key_tokens"][-1] == "</s>"
    assert "weights computed by transformers' eager" in err and err.count("\n") == 1
    code, out, err = run("show", SOURCE, "--model", folder, "--target", TARGET, "--json", "-q")
    assert code == 0 and err == ""


@pytest.mark.slow
def test_a_long_target_is_refused_or_cut_to_the_models_positions(seq2seq) -> None:
    import attnviz

    folder = str(seq2seq("bart"))  # 64 positions
    long = TARGET * 20
    with pytest.raises(attnviz.BadInput, match="^the target: .* at most 64"):
        attnviz.prepare_encdec(SOURCE, model=folder, target=long)
    cut = attnviz.prepare_encdec(SOURCE, model=folder, target=long, truncate=True)
    assert cut.target is not None and len(cut.target) == 64 and cut.target.ids[0] == 2
    with pytest.raises(attnviz.BadInput, match="generate 64 is more than"):
        attnviz.prepare_encdec(SOURCE, model=folder, generate=64)


@pytest.mark.slow
def test_query_lists_a_target_words_source_keys(seq2seq) -> None:
    """`show --query TARGETWORD` on the cross stack lists the source's words, each with the
    cross weight of that head (pieces merged into words on both sides)."""
    import attnviz

    folder = str(seq2seq("bart"))
    given = ("--model", folder, "--target", TARGET, "--layer", "1", "--head", "0", "-q")
    row = json.loads(ok("show", SOURCE, *given, "--query", "gato", "--json"))
    view = attnviz.analyse(SOURCE, model=folder, target=TARGET).view(1, 0)
    assert view.key_tokens is not None
    expected = view.matrix[view.tokens.index("gato")]
    assert sorted(k["token"] for k in row["keys"]) == sorted(view.key_tokens)
    for key in row["keys"]:
        assert key["weight"] == pytest.approx(float(expected[key["index"]]), abs=1e-6)


@pytest.mark.slow
def test_info_and_the_note_name_the_class_that_runs_not_the_configs_claim(
    seq2seq, tmp_path: Path
) -> None:
    """config.json's `architectures` is a stranger's claim: transformers loads the class of
    the model type (AutoModelForSeq2SeqLM), and that is what info and the note name."""
    import shutil

    folder = tmp_path / "t5-claims-bert"
    shutil.copytree(seq2seq("t5"), folder)
    config = json.loads((folder / "config.json").read_text())
    config["architectures"] = ["BertModel"]
    (folder / "config.json").write_text(json.dumps(config))
    out = ok("info", "--model", str(folder))
    assert "T5ForConditionalGeneration" in out and "BertModel" not in out
    code, out, err = run("show", SOURCE, "--model", str(folder), "--target", TARGET)
    assert code == 0 and "eager T5ForConditionalGeneration (t5 " in err
