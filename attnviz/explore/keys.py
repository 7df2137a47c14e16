"""The explorer's keys and words, in English and Portuguese: one table for the bindings,
the footer and the `?` help."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["KEYS", "Key", "say"]


@dataclass(frozen=True)
class Key:
    """One binding: Textual's key names, the app's action, what the footer and help say."""

    keys: str  # comma-separated Textual key names
    action: str
    shown: str  # the key as the help writes it
    en: str
    pt: str
    footer: bool = False  # listed in the footer (the rest only in `?`)
    group: tuple[str, str] | None = None  # the footer's one word (for a pair of keys): en, pt
    priority: bool = False  # before Textual's own use of the key (Tab moves the focus)


KEYS: tuple[Key, ...] = (
    Key("left", "head(-1)", "←", "previous head", "cabeça anterior", True, ("head", "cabeça")),
    Key("right", "head(1)", "→", "next head", "próxima cabeça", True, ("head", "cabeça")),
    Key("a", "mean", "a", "mean of the heads", "média das cabeças"),
    Key("up", "layer(-1)", "↑", "previous layer", "camada anterior", True, ("layer", "camada")),
    Key("down", "layer(1)", "↓", "next layer", "próxima camada", True, ("layer", "camada")),
    Key(
        "tab",
        "query(1)",
        "Tab",
        "next query",
        "próxima consulta",
        True,
        ("query", "consulta"),
        True,
    ),
    Key(
        "shift+tab",
        "query(-1)",
        "Shift-Tab",
        "previous query",
        "consulta anterior",
        True,
        ("query", "consulta"),
        True,
    ),
    Key("w", "measure", "w", "next measure", "próxima medida"),
    Key("x", "exclude", "x", "exclude special tokens", "excluir tokens especiais"),
    Key("u", "units", "u", "words / tokens", "palavras / tokens"),
    Key("r", "rollout", "r", "rollout", "rollout"),
    Key("e", "explain", "e", "explain this query and head", "explicar esta consulta e cabeça"),
    Key("f", "find", "f", "find: heads from query to key", "find: cabeças da consulta à chave"),
    Key("s", "save", "s", "save a PNG", "salvar um PNG", True, ("save", "salvar")),
    Key("slash", "retext", "/", "a new text", "um texto novo"),
    Key("escape", "cancel", "Esc", "cancel / close", "cancelar / fechar"),
    Key("question_mark", "help", "?", "all the keys", "todas as teclas", True, ("keys", "teclas")),
    Key("q", "quit", "q", "quit", "sair", True),
    Key("ctrl+c", "quit", "Ctrl-C", "quit", "sair", priority=True),
)

_WORDS: dict[str, tuple[str, str]] = {  # a message's name -> English, Portuguese
    "saved": ("saved {path}", "salvo {path}"),
    "computing": ("computing {what} … (Esc cancels)", "calculando {what} … (Esc cancela)"),
    "cancelled": ("cancelled", "cancelado"),
    "no_heads": (
        "{what} has one matrix a layer: no heads to move through",
        "{what} tem uma matriz por camada: não há cabeças a percorrer",
    ),
    "no_model": (
        "{what} needs the model: this attention was given as arrays",
        "{what} precisa do modelo: esta atenção foi dada como arrays",
    ),
    "new_text": (
        "A new text (Enter reads it, Esc closes):",
        "Um texto novo (Enter lê, Esc fecha):",
    ),
    "too_long": (
        "At most {most} characters here (pass a longer text as the command's argument):",
        "No máximo {most} caracteres aqui (passe um texto mais longo como argumento):",
    ),
    "help": ("Keys", "Teclas"),
    "close": ("Esc or the same key closes", "Esc ou a mesma tecla fecha"),
    "keys_of": ("keys of {query}", "chaves de {query}"),
    "cell": ("{query} → {key}: {value}", "{query} → {key}: {value}"),
    "rollout": ("rollout", "rollout"),
    "find_to": ("find: {query} → {key}", "find: {query} → {key}"),
}


def say(lang: str, name: str, **values: object) -> str:
    """The message `name` in `lang` ("en" or "pt"), its `{fields}` filled."""
    en, pt = _WORDS[name]
    return (pt if lang == "pt" else en).format(**values)
