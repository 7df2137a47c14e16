"""The words every drawing, table and page labels itself with, in English and Portuguese.

Titles, axis names, colour bars, legends, table headers and captions, the terminal's
notes and the HTML page's controls all take their text from here (the step-by-step
explanation has its own texts in `attnviz.i18n`). Every key exists in both languages
with the same `{placeholders}` (a test checks it). The Portuguese is the lessons':
consulta (query), chave (key), valor (value), camada (layer), cabeça (head), peso de
atenção (attention weight), peça (a token: a piece of a word).

The language is resolved once, by the command line (`--lang`) or the public API (`lang=`),
with `resolve_lang`: a renderer is handed the language and never reads the environment.
Error messages stay in English. Data files keep their field names in English (they are an
API); JSON records may name the language they were drawn in.
"""

from __future__ import annotations

from collections.abc import Mapping

from attnviz.errors import BadInput
from attnviz.i18n import LANGS, default_lang

__all__ = ["LABELS", "label", "page_texts", "resolve_lang"]

_EN: dict[str, str] = {
    # axes, colour bars, the words of every title
    "query": "query",
    "key": "key",
    "layer": "layer",
    "head": "head",
    "attention_weight": "attention weight",
    "axis_every": "{name} (every {nth} token labelled)",
    "layer_n": "layer {layer}",
    "head_n": "head {head}",
    "query_named": "query {label}",
    "mean_of_heads": "mean of {n} heads",
    "all_heads_n": "all {n} heads",
    "heads_listed": "heads {heads}",
    "all_heads": "all heads",
    "all_heads_together": "all heads together",
    "layers_by": "{n} layers × {which}",
    "panel_layer_head": "L{layer} H{head}",
    "panel_layer": "L{layer}",
    "through_layer": "{what} through layer {upto}",
    "rollout": "rollout",
    "attention_flow": "attention flow",
    "without": " · without {names} (rows renormalised)",
    "and": " and ",
    "excluded_special": "special tokens",
    "excluded_punct": "punctuation",
    "excluded_first": "the first token",
    "in_every_head": "{source} → {target} in every head",
    "modified_causal": "{model} (modified: causal mask)",
    "computed_in": "{model} (in {dtype})",
    # the measures, as titles name them
    "measure_weight": "attention weight",
    "measure_norm": "‖α·f(x)‖ (Kobayashi et al. 2020); rows sum to the norm added",
    "measure_norm-res-ln": (
        "‖T_i(x_j)‖ with residual and LayerNorm (Kobayashi et al. 2021); rows sum to the norm"
    ),
    "measure_alti": "ALTI (Ferrando et al. 2022); rows sum to 1",
    "measure_value-zeroing": "value zeroing (Mohebbi et al. 2023); rows sum to 1",
    # the terminal
    "corner": "query \\ key",
    "corner_short": "query \\ key",  # where the corner above the row labels is narrow
    "keys_page": "keys {first}–{last} of {n}",
    "keys_list": "keys:",
    "queries_list": "queries:",
    "not_normalised": "{model} (rows not normalised)",
    "tokens_list": "tokens:",
    "panels_note": "panels: rows = queries, columns = keys, in token order",
    "masked_short": "masked",
    "masked_mark": "{mark} masked (the model cannot see this key)",
    "bars_header": "key, weight (bars: share of the largest, {top})",
    "sources_title": "what each token draws most from",
    "sources_header": "token ← draws most from (input, share)",
    # tokens
    "tokens_title": "{pieces} pieces, {words} words",
    "tokens_index": "index",
    "tokens_piece": "piece",
    "tokens_text": "text",
    "tokens_id": "id",
    "tokens_word": "word",
    "tokens_span": "span",
    # find
    "find_caption": (
        "weight: {source} → {target}. rank: of {target} among {source}'s keys (1 = its "
        "largest). others: words other than these two that attend to {target} more (many = "
        "a broad column, not a link). sink: share of the words that see {target} putting over "
        "half their weight on it (high = the attention sink)."
    ),
    "col_layer": "layer",
    "col_head": "head",
    "col_weight": "weight",
    "col_rank": "rank",
    "col_top_key": "top key",
    "col_others": "others",
    "col_sink": "sink",
    "the_target": "(the target)",
    # compare-measures
    "compare_share": "share of the query's row",
    "compare_shares_note": "shares: each measure's row divided by its sum",
    "compare_all_first": "every measure puts {word} first",
    "compare_puts_first": "{measures} puts {word} first",
    "compare_put_first": "{measures} put {word} first",
    "compare_shares": "{measure} shares {shared} of {first}'s top {top} keys",
    "compare_title": "{title} · layer {layer} · query {query}",
    # stats
    "stats_title": "{model} · head statistics over {n} sentences ({queries} query positions)",
    "stats_title_one": ("{model} · head statistics over {n} sentence ({queries} query positions)"),
    "stats_entropy": "entropy",
    "stats_first": "first",
    "stats_punct": "punct",
    "stats_self": "self",
    "stats_prev": "prev",
    "stats_next": "next",
    "stats_label": "label",
    "stats_compact_layer": "L",
    "stats_compact_head": "H",
    "stats_compact_entropy": "ent",
    "stats_caption": (
        "entropy: mean over queries, in nats. CLS … next: mean attention weight to [CLS], "
        "to [SEP], to punctuation, to the token itself, to the previous and to the next token."
    ),
    "stats_decoder_caption": (
        "A decoder: each token sees only itself and the tokens before it. entropy: mean over "
        "queries, in nats. first … prev: mean attention weight to the first token{first}, to "
        "punctuation, to the token itself and to the previous token. The first query, which "
        "sees only itself, is left out."
    ),
    "stats_first_token": " ({token}, which the tokenizer puts first)",
    "stats_short": " Shares are written without their leading 0 (.95 is 0.95).",
    "stats_not_shown": " Not shown here: {names} (widen the terminal or use --json).",
    "panel_entropy": "entropy (nats)",
    "panel_cls": "to [CLS]",
    "panel_sep": "to [SEP]",
    "panel_first": "to the first token",
    "panel_punct": "to punctuation",
    "panel_self": "to itself",
    "panel_prev": "to previous token",
    "panel_next": "to next token",
    # a head's label in the stats table (the JSON keeps the English name), and its short form
    "head_label_previous-token": "previous-token",
    "head_label_next-token": "next-token",
    "head_label_self": "self",
    "head_label_[CLS]": "[CLS]",
    "head_label_[SEP]": "[SEP]",
    "head_label_first-token": "first-token",
    "head_label_punctuation": "punctuation",
    "head_label_broad": "broad",
    "head_label_mixed": "mixed",
    "head_label_short_previous-token": "prev",
    "head_label_short_next-token": "next",
    "head_label_short_punctuation": "punct",
    "head_label_short_[CLS]": "CLS",
    "head_label_short_[SEP]": "SEP",
    "head_label_short_first-token": "first",
    # the HTML page (its script fills the {placeholders})
    "page_view_heads": "Head view",
    "page_masked": "masked (the model cannot see this key)",
    "page_masked_cell": "{query} → {key}: masked (the model cannot see this key)",
    "page_view_matrix": "Matrix",
    "page_view_model": "Model",
    "page_views": "view",
    "page_units": "units",
    "page_words": "words",
    "page_pieces": "pieces",
    "page_heads": "heads",
    "page_heads_legend": "heads:",
    "page_all": "all",
    "page_layer": "layer",
    "page_head": "head",
    "page_layer_n": "layer {layer}",
    "page_head_n": "head {head}",
    "page_mean_option": "mean of heads",
    "page_mean_n": "mean of {n} heads",
    "page_mean_listed": "mean of heads {heads}",
    "page_toggle_head": "show or hide {head}",
    "page_precision": " · weights stored in 8 bits, within 0.002",
    "page_heads_status": (
        "{heads} · {layer} · hover a token to isolate its attention (left: from it, right: "
        "to it); click to pin; shift-click a head to show it alone"
    ),
    "page_from": "{token} attends to each key with these weights ({heads})",
    "page_to": "how much each query attends to {token} ({heads})",
    "page_matrix_label": "attention matrix, {layer}, {heads}",
    "page_matrix_status": (
        "{layer} · {heads} · rows are queries, columns keys; colour 0 to {vmax} (viridis)"
    ),
    "page_col_head": "H{head}",
    "page_row_layer": "L{layer}",
    "page_thumb": "layer {layer}, head {head}: click to open",
    "page_model_status": (
        "{layers} layers × {heads} heads, each on its own colour scale (0 to its maximum); "
        "click a head (or Enter) to open it"
    ),
    "page_decoding": "decoding the attention…",
    "page_no_stream": (
        "this browser cannot decompress the data (it needs DecompressionStream: Chrome 80, "
        "Firefox 113, Safari 16.4 or later)"
    ),
    "page_unreadable": "cannot read the attention data: {error}",
}

_PT: dict[str, str] = {
    # eixos, barras de cor, as palavras de cada título
    "query": "consulta",
    "key": "chave",
    "layer": "camada",
    "head": "cabeça",
    "attention_weight": "peso de atenção",
    "axis_every": "{name} (uma peça rotulada a cada {nth})",
    "layer_n": "camada {layer}",
    "head_n": "cabeça {head}",
    "query_named": "consulta {label}",
    "mean_of_heads": "média das {n} cabeças",
    "all_heads_n": "todas as {n} cabeças",
    "heads_listed": "cabeças {heads}",
    "all_heads": "todas as cabeças",
    "all_heads_together": "todas as cabeças juntas",
    "layers_by": "{n} camadas × {which}",
    "panel_layer_head": "C{layer} c{head}",
    "panel_layer": "C{layer}",
    "through_layer": "{what} até a camada {upto}",
    "rollout": "rollout",
    "attention_flow": "fluxo de atenção",
    "without": " · sem {names} (linhas renormalizadas)",
    "and": " e ",
    "excluded_special": "tokens especiais",
    "excluded_punct": "pontuação",
    "excluded_first": "o primeiro token",
    "in_every_head": "{source} → {target} em cada cabeça",
    "modified_causal": "{model} (modificado: máscara causal)",
    "computed_in": "{model} (em {dtype})",
    # as medidas, como os títulos as nomeiam
    "measure_weight": "peso de atenção",
    "measure_norm": "‖α·f(x)‖ (Kobayashi et al. 2020); as linhas somam a norma adicionada",
    "measure_norm-res-ln": (
        "‖T_i(x_j)‖ com residual e LayerNorm (Kobayashi et al. 2021); as linhas somam a norma"
    ),
    "measure_alti": "ALTI (Ferrando et al. 2022); as linhas somam 1",
    "measure_value-zeroing": "zerar o valor (Mohebbi et al. 2023); as linhas somam 1",
    # o terminal
    "corner": "consulta \\ chave",
    "corner_short": "cons \\ chave",
    "keys_page": "chaves {first}–{last} de {n}",
    "keys_list": "chaves:",
    "queries_list": "consultas:",
    "not_normalised": "{model} (linhas não normalizadas)",
    "tokens_list": "peças:",
    "panels_note": "painéis: linhas = consultas, colunas = chaves, na ordem das peças",
    "masked_short": "mascarada",
    "masked_mark": "{mark} mascarada (o modelo não vê esta chave)",
    "bars_header": "chave, peso (barras: fração do maior, {top})",
    "sources_title": "de onde cada peça mais tira",
    "sources_header": "peça ← tira mais de (entrada, fração)",
    # tokens
    "tokens_title": "{pieces} peças, {words} palavras",
    "tokens_index": "índice",
    "tokens_piece": "peça",
    "tokens_text": "texto",
    "tokens_id": "id",
    "tokens_word": "palavra",
    "tokens_span": "trecho",
    # find
    "find_caption": (
        "peso: {source} → {target}. posição: de {target} entre as chaves de {source} (1 = a "
        "maior). outras: palavras, além dessas duas, que atendem mais a {target} (muitas = "
        "uma coluna larga, não uma ligação). sumidouro: fração das palavras que veem {target} "
        "e põem sobre {target} mais da metade do peso (alta = o sumidouro de atenção)."
    ),
    "col_layer": "camada",
    "col_head": "cabeça",
    "col_weight": "peso",
    "col_rank": "posição",
    "col_top_key": "maior chave",
    "col_others": "outras",
    "col_sink": "sumidouro",
    "the_target": "(o alvo)",
    # compare-measures
    "compare_share": "fração da linha da consulta",
    "compare_shares_note": "frações: a linha de cada medida dividida pela sua soma",
    "compare_all_first": "todas as medidas põem {word} em primeiro",
    "compare_puts_first": "{measures} põe {word} em primeiro",
    "compare_put_first": "{measures} põem {word} em primeiro",
    "compare_shares": "{measure} tem {shared} das {top} maiores chaves de {first}",
    "compare_title": "{title} · camada {layer} · consulta {query}",
    # stats
    "stats_title": (
        "{model} · estatísticas das cabeças em {n} frases ({queries} posições de consulta)"
    ),
    "stats_title_one": (
        "{model} · estatísticas das cabeças em {n} frase ({queries} posições de consulta)"
    ),
    "stats_entropy": "entropia",
    "stats_first": "primeira",
    "stats_punct": "pont",
    "stats_self": "si",
    "stats_prev": "ant",
    "stats_next": "próx",
    "stats_label": "rótulo",
    "stats_compact_layer": "C",
    "stats_compact_head": "c",
    "stats_compact_entropy": "ent",
    "stats_caption": (
        "entropia: média sobre as consultas, em nats. CLS … próx: peso de atenção médio em "
        "[CLS], em [SEP], na pontuação, na própria peça, na peça anterior e na seguinte."
    ),
    "stats_decoder_caption": (
        "Um decoder: cada peça vê só a si mesma e as peças antes dela. entropia: média sobre "
        "as consultas, em nats. primeira … ant: peso de atenção médio na primeira peça{first}, "
        "na pontuação, na própria peça e na peça anterior. A primeira consulta, que só vê a si "
        "mesma, fica de fora."
    ),
    "stats_first_token": " ({token}, que o tokenizador põe primeiro)",
    "stats_short": " As frações vêm sem o 0 inicial (.95 é 0.95).",
    "stats_not_shown": " Não mostradas aqui: {names} (alargue o terminal ou use --json).",
    "panel_entropy": "entropia (nats)",
    "panel_cls": "em [CLS]",
    "panel_sep": "em [SEP]",
    "panel_first": "na primeira peça",
    "panel_punct": "na pontuação",
    "panel_self": "em si mesma",
    "panel_prev": "na peça anterior",
    "panel_next": "na peça seguinte",
    # o rótulo de uma cabeça na tabela (o JSON guarda o nome em inglês), e a forma curta
    "head_label_previous-token": "peça-anterior",
    "head_label_next-token": "peça-seguinte",
    "head_label_self": "si-mesma",
    "head_label_[CLS]": "[CLS]",
    "head_label_[SEP]": "[SEP]",
    "head_label_first-token": "primeira-peça",
    "head_label_punctuation": "pontuação",
    "head_label_broad": "ampla",
    "head_label_mixed": "mista",
    "head_label_short_previous-token": "ant",
    "head_label_short_next-token": "próx",
    "head_label_short_punctuation": "pont",
    "head_label_short_[CLS]": "CLS",
    "head_label_short_[SEP]": "SEP",
    "head_label_short_first-token": "primeira",
    # a página HTML (o seu script preenche os {campos})
    "page_view_heads": "Cabeças",
    "page_masked": "mascarada (o modelo não vê esta chave)",
    "page_masked_cell": "{query} → {key}: mascarada (o modelo não vê esta chave)",
    "page_view_matrix": "Matriz",
    "page_view_model": "Modelo",
    "page_views": "visão",
    "page_units": "unidades",
    "page_words": "palavras",
    "page_pieces": "peças",
    "page_heads": "cabeças",
    "page_heads_legend": "cabeças:",
    "page_all": "todas",
    "page_layer": "camada",
    "page_head": "cabeça",
    "page_layer_n": "camada {layer}",
    "page_head_n": "cabeça {head}",
    "page_mean_option": "média das cabeças",
    "page_mean_n": "média das {n} cabeças",
    "page_mean_listed": "média das cabeças {heads}",
    "page_toggle_head": "mostrar ou esconder {head}",
    "page_precision": " · pesos guardados em 8 bits, com erro até 0.002",
    "page_heads_status": (
        "{heads} · {layer} · passe o mouse sobre uma peça para isolar a sua atenção "
        "(esquerda: dela, direita: para ela); clique para fixar; shift-clique numa cabeça "
        "para vê-la sozinha"
    ),
    "page_from": "{token} atende a cada chave com estes pesos ({heads})",
    "page_to": "quanto cada consulta atende a {token} ({heads})",
    "page_matrix_label": "matriz de atenção, {layer}, {heads}",
    "page_matrix_status": (
        "{layer} · {heads} · linhas são consultas, colunas são chaves; cor de 0 a {vmax} (viridis)"
    ),
    "page_col_head": "c{head}",
    "page_row_layer": "C{layer}",
    "page_thumb": "camada {layer}, cabeça {head}: clique para abrir",
    "page_model_status": (
        "{layers} camadas × {heads} cabeças, cada uma na sua própria escala de cor (de 0 ao "
        "seu máximo); clique numa cabeça (ou Enter) para abri-la"
    ),
    "page_decoding": "decodificando a atenção…",
    "page_no_stream": (
        "este navegador não consegue descomprimir os dados (precisa de DecompressionStream: "
        "Chrome 80, Firefox 113, Safari 16.4 ou mais recente)"
    ),
    "page_unreadable": "não foi possível ler os dados de atenção: {error}",
}

LABELS: dict[str, dict[str, str]] = {"en": _EN, "pt": _PT}


def resolve_lang(lang: object = None, environ: Mapping[str, str] | None = None) -> str:
    """`lang` checked ("en" or "pt"), or, when None, what the environment asks for
    (`i18n.default_lang`: LC_ALL, LC_MESSAGES or LANG starting with pt). Called once, by the
    command line or the public API; renderers are handed the result."""
    if lang is None:
        return default_lang(environ)
    if not isinstance(lang, str) or lang not in LABELS:
        shown = repr(lang) if isinstance(lang, str) else type(lang).__name__
        raise BadInput(
            f"{{lang}} {shown} is not available: use one of {', '.join(LANGS)}", param="lang"
        )
    return lang


def label(lang: str, key: str, /, **values: object) -> str:
    """The label `key` in `lang` (already resolved), filled with `values`."""
    return LABELS[lang][key].format(**values)


def page_texts(lang: str) -> dict[str, str]:
    """The HTML page's strings in `lang`, keyed without their `page_` prefix; the page's
    script fills their `{placeholders}` itself."""
    return {key[5:]: text for key, text in LABELS[lang].items() if key.startswith("page_")}
