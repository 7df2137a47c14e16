"""Text from strangers is text (issue 24): nothing a model file, a tokenizer or the typed
text holds can drive the terminal.

Each class of attack (an OSC that retitles the window, a CSI that clears the screen, the
8-bit CSI, a bidirectional override, an isolate, a zero-width space, a lone carriage
return, a bell) is fed through every command where a stranger's text enters: the typed
text (its pieces label the views), a model card's `language:`, a tokenizer's special
token (the BOS a decoder puts first) and the model's name. The raw character must never
reach stdout or stderr; its escaped form (`\\x1b`, `U+202E`) must, so the reader sees
that something was there. Rich markup in a label prints as it is written.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from attnviz.cli import app
from attnviz.cli.errors import one_line, printable
from attnviz.render.cells import visible
from tests.conftest import TinyFactory

# name: (the hostile text, the characters that must not get through, what shows instead)
ATTACKS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "osc-title": ("\x1b]0;PWNED\x07", "\x1b\x07", ("\\x1b", "\\x07")),
    "csi-clear": ("\x1b[2J", "\x1b", ("\\x1b",)),
    "c1-csi": ("\x9b31m", "\x9b", ("\\x9b",)),
    "bidi-override": ("\u202ekcatta", "\u202e", ("U+202E",)),
    "isolate": ("\u2066evil", "\u2066", ("U+2066",)),
    "zero-width": ("zero\u200bwidth", "\u200b", ("U+200B",)),
    "carriage-return": ("over\rwrite", "\r", ("\\r",)),
    "bell": ("ding\x07", "\x07", ("\\x07",)),
}
MARKUP = "[bold]x[/]"  # and a link: rich must print both as written
LINK = "[link=https://evil.example]y[/link]"


def _run(*args: str) -> tuple[str, str]:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})
    assert result.exit_code == 0, (args, result.stderr, result.stdout)
    return result.stdout, result.stderr


def _assert_escaped(
    output: str, attack: str, where: str, shown: tuple[str, ...] | None = None
) -> None:
    """No raw character of `attack` in `output`, and each of `shown` (default: the attack's
    escaped forms) in it."""
    _, raw, escaped = ATTACKS[attack]
    for char in raw:
        assert char not in output, f"{attack}: raw {char!r} reached the terminal in {where}"
    for form in escaped if shown is None else shown:
        assert form in output, f"{attack}: {form} not shown in {where}:\n{output}"


# ---------------------------------------------------------------------------
# The rule itself


@pytest.mark.parametrize("attack", ATTACKS)
def test_each_class_is_escaped_by_the_one_rule(attack: str) -> None:
    text, _, _ = ATTACKS[attack]
    for shown in (visible(text), printable(text), one_line(f"Error: {text}")):
        if attack == "carriage-return":  # one_line makes any whitespace one space
            shown = shown.replace(" ", "\\r")
        _assert_escaped(shown, attack, "visible")


def test_every_unsafe_class_is_escaped() -> None:
    controls = "".join(map(chr, [*range(0x20), 0x7F, *range(0x80, 0xA0)]))
    invisible = "\u061c\u200b\u200c\u200d\u200e\u200f\u202a\u202b\u202c\u202d\u202e"
    invisible += "\u2060\u2066\u2067\u2068\u2069\ufeff\u00ad\u2028\u2029\U000e0041\udcff"
    shown = visible(controls + invisible)
    assert shown.isascii() and shown.isprintable()
    assert "\\x00" in shown and "\\x1b" in shown and "\\x7f" in shown and "\\x9f" in shown
    assert "\\n" in shown and "\\t" in shown and "\\r" in shown
    for char in invisible:
        assert f"U+{ord(char):04X}" in shown
    assert visible("a\nb", newlines=True) == "a\nb"  # where a newline is meant


@pytest.mark.parametrize(
    "text",
    [
        "João",
        "東京の大学",
        "e\u0301te\u0301",  # combining accents
        "مرحبا",
        "שלום",
        "##ou",
        "Ġcafé",
        "▁casa",
        "👍🏽",
        "👨\u200d👩\u200d👧",  # a zero-width joiner inside an emoji sequence belongs there
        "🏳️\u200d🌈",
        "🇵🇹",
        "🏴\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f",  # Scotland's flag
        "می\u200cخواهم",  # Persian: the non-joiner between two letters is spelling
        "\u00a0nbsp and\u3000ideographic space",
        "[CLS]",
        MARKUP,
    ],
)
def test_ordinary_text_is_untouched(text: str) -> None:
    assert visible(text) == text


def test_joiners_and_tones_that_join_nothing_are_shown() -> None:
    assert visible("a\u200db") == "aU+200Db"
    assert visible("\u200d👍") == "U+200D👍"
    assert visible("ab\u200ccd") == "abU+200Ccd"  # not a script that uses it
    assert visible("🏽") == "U+1F3FD"  # a skin tone that modifies nothing
    assert visible("🔬\u200d🏽") == "🔬U+200DU+1F3FD"
    assert visible("\U000e0041\U000e007f") == "U+E0041U+E007F"  # tags with no flag: hidden text


# ---------------------------------------------------------------------------
# Through the commands: the typed text

HOSTILE_TEXT = "the bank " + " and ".join(text for text, _, _ in ATTACKS.values()) + " ok."


@pytest.fixture(scope="module")
def decoder(tiny_decoder: TinyFactory) -> str:
    """A tiny Llama: byte-level pieces keep every character of the text, and its BOS."""
    return str(tiny_decoder("llama"))


@pytest.fixture(scope="module")
def encoder(tiny_model: TinyFactory) -> str:
    """A tiny RoBERTa (byte-level BPE): for the commands that need an encoder."""
    return str(tiny_model("roberta"))


# A lone CR is whitespace to the tokenizer: its piece is labelled as byte-level BPE writes
# that byte (`č`), as the views label whitespace pieces; the raw CR never gets through.
TYPED_SHOWN: dict[str, tuple[str, ...]] = {"carriage-return": ("č",)}

COMMANDS = {
    "show": ["show", "--units", "tokens"],
    "show --query": ["show", "--query", "bank"],
    "heads": ["heads", "--units", "tokens"],
    "model": ["model", "--units", "tokens"],
    "tokens": ["tokens"],
    "rollout": ["rollout", "--units", "tokens"],
    "stats": ["stats"],
}


@pytest.mark.slow  # every command on a tiny model: a few seconds
@pytest.mark.parametrize("command", COMMANDS)
def test_the_typed_text_is_shown_escaped_by_every_command(command: str, decoder: str) -> None:
    name, *options = COMMANDS[command]
    out, err = _run(name, HOSTILE_TEXT, "--model", decoder, *options)
    for attack in ATTACKS:
        # stats' table shows no token of the text: nothing may get through, nothing to see
        shown = () if command == "stats" else TYPED_SHOWN.get(attack)
        _assert_escaped(out + err, attack, command, shown)


def _hostile_word(model: str, attack: str) -> tuple[str, int, str]:
    """A short text holding the attack, the index of a piece that carries its first
    character, and the word (as the text spells it) that holds that piece."""
    from attnviz import prepare

    text = f"the bank {ATTACKS[attack][0]} ok"
    pieces = prepare(text, model=model, cache=False).pieces
    char = ATTACKS[attack][1][0]
    for word in pieces.words():
        for i in word.pieces:
            start, end = pieces.offsets[i]
            if char in text[start:end]:
                return text, i, word.label
    raise AssertionError(f"no piece of {text!r} carries {char!r}")


@pytest.mark.slow  # a tiny model each
@pytest.mark.parametrize("attack", ATTACKS)
def test_a_hostile_word_is_shown_escaped_by_find_explain_and_compare(
    attack: str, decoder: str, encoder: str
) -> None:
    # the word carries the attack's first character (`\x1b]` of the OSC): that one shows
    shown = TYPED_SHOWN.get(attack, (visible(ATTACKS[attack][1][0]),))
    text, index, word = _hostile_word(decoder, attack)
    out, err = _run("find", text, "--model", decoder, "--from", "ok", "--to", word)
    _assert_escaped(out + err, attack, "find", shown)  # the caption names the typed word
    out, err = _run("explain", text, "--model", decoder, "--index", str(index), "--head", "0")
    _assert_escaped(out + err, attack, "explain", shown)
    text, _, word = _hostile_word(encoder, attack)
    args = ("compare-measures", text, "--model", encoder, "--query", word, "--top", "10")
    out, err = _run(*args)
    _assert_escaped(out + err, attack, "compare-measures", shown)


@pytest.mark.slow  # a tiny model each
@pytest.mark.parametrize("attack", ATTACKS)
def test_a_word_the_text_lacks_is_escaped_in_the_error_line(attack: str, decoder: str) -> None:
    text = ATTACKS[attack][0]
    hostile = f"no{text}such"
    args = ["show", "the bank ok", "--model", decoder, "--query", hostile]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.stderr
    # the message quotes the word as Python does (`'no\u202ekcatta'`), then the line escapes
    quoted = repr(hostile)[1:-1]
    _assert_escaped(result.stderr, attack, "the error line", (quoted,))


# ---------------------------------------------------------------------------
# Through the commands: a hostile model folder (its name, its card, its tokenizer)


def _hostile_model(decoder: str, attack: str, root: Path) -> Path:
    """A copy of the tiny Llama in a folder named after the attack, whose model card lists
    the attack as a language and whose BOS token (`<s>`, put before every text) holds it."""
    hostile = ATTACKS[attack][0]
    folder = root / f"model{hostile}"
    shutil.copytree(decoder, folder)
    card = f'---\nlanguage: [en, "{hostile}"]\nlicense: mit\n---\n# A model\n'
    (folder / "README.md").write_text(card, encoding="utf-8", newline="")
    bos = json.dumps(f"<s{hostile}>")  # the token's new name, as JSON spells it
    for name in ("tokenizer.json", "tokenizer_config.json"):
        path = folder / name
        path.write_text(path.read_text(encoding="utf-8").replace('"<s>"', bos), encoding="utf-8")
    return folder


# The card is read line by line: a CR ends its line there, and the language with it.
CARD_SHOWN: dict[str, tuple[str, ...]] = {"carriage-return": ()}


@pytest.mark.slow  # a tiny model each
@pytest.mark.parametrize("attack", ATTACKS)
def test_a_hostile_model_folder_card_and_tokenizer_are_shown_escaped(
    attack: str, decoder: str, tmp_path: Path
) -> None:
    folder = str(_hostile_model(decoder, attack, tmp_path))
    out, err = _run("info", "--model", folder)
    _assert_escaped(out + err, attack, "info")  # the model's name, its folder
    language = next(line for line in out.splitlines() if line.startswith("language"))
    _assert_escaped(language, attack, "info's language", CARD_SHOWN.get(attack))
    out, err = _run("tokens", "the bank ok", "--model", folder)
    _assert_escaped(out + err, attack, "tokens")  # the BOS: piece, text and word
    out, err = _run("stats", "the bank ok", "--model", folder)
    _assert_escaped(out + err, attack, "stats")  # the caption names the BOS; the title the model
    out, err = _run("show", "the bank ok", "--model", folder, "--units", "tokens")
    _assert_escaped(out + err, attack, "show")  # the title, the BOS's label
    note = err.splitlines()[-1]  # this text fits the tiny vocabulary badly: a note
    assert note.startswith("note: ") and "model language" in note, err
    _assert_escaped(note, attack, "the fit note", CARD_SHOWN.get(attack))


@pytest.mark.slow  # a tiny model
def test_rich_markup_from_strangers_prints_as_written(decoder: str, tmp_path: Path) -> None:
    folder = tmp_path / "m[bold]x"  # a folder name cannot hold the `/` of a closing tag
    shutil.copytree(decoder, folder)
    card = f"---\nlanguage: [en, '{MARKUP}', '{LINK}']\n---\n"
    (folder / "README.md").write_text(card, encoding="utf-8")
    for name in ("tokenizer.json", "tokenizer_config.json"):  # the BOS is named in markup
        path = folder / name
        path.write_text(path.read_text().replace('"<s>"', json.dumps(MARKUP)), encoding="utf-8")
    out, _ = _run("info", "--model", str(folder))
    assert MARKUP in out and LINK in out and "m[bold]x" in out, out
    for command in (["tokens"], ["show", "--units", "tokens"], ["rollout", "--units", "tokens"]):
        out, _ = _run(command[0], "the bank ok", "--model", str(folder), *command[1:])
        assert MARKUP in out, out
    out, _ = _run("stats", "the bank ok", "--model", str(folder))
    assert "m[bold]x · head statistics" in out and f"({MARKUP}, which" in out, out


# ---------------------------------------------------------------------------
# JSON on a terminal: the same data, nothing a terminal acts on


def test_json_escapes_exactly_what_a_terminal_would_act_on() -> None:
    import unicodedata

    from attnviz.render.cells import json_visible

    unsafe = [
        chr(c)
        for c in range(0x110000)
        if unicodedata.category(chr(c)) in ("Cc", "Cf", "Cs", "Zl", "Zp")
    ]
    record = {"tokens": ["João", "👨\u200d👩", *unsafe]}
    document = json_visible(json.dumps(record, ensure_ascii=False))
    assert json.loads(document) == record  # the same data
    assert "João" in document and "👨" in document  # still readable
    assert not any(char in document for char in unsafe)


@pytest.mark.slow  # a tiny model
def test_json_output_carries_the_typed_text_escaped(decoder: str) -> None:
    out, _ = _run("show", HOSTILE_TEXT, "--model", decoder, "--units", "tokens", "--json")
    for _, raw, _ in ATTACKS.values():
        assert not any(char in out for char in raw)
    tokens = json.loads(out)["tokens"]
    assert any("\x1b" in token for token in tokens) and any("\u202e" in t for t in tokens)
