"""The texts of `attnviz explain`, in English and Portuguese.

Every key exists in both languages with the same `{placeholders}` (a test checks
it). Numbers and labels are formatted by the renderer and passed in as strings,
so a template never carries a format spec. Error messages stay in English.
"""

from __future__ import annotations

import os
import string
from collections.abc import Mapping

from attnviz.errors import BadInput

__all__ = ["CATALOGUE", "LANGS", "check_lang", "default_lang", "placeholders", "quoted", "text"]

LANGS = ("en", "pt")

_EN: dict[str, str] = {
    "title": "How head {head} of layer {layer} builds the new vector of {label} (piece {index})",
    "model_line": "model {model} · {layers} layers · {heads} heads per layer",
    "causal_model": "{model} (modified: causal mask)",
    # 1. pieces
    "step1": "1. The pieces and what the layer reads",
    "step1_body": (
        "The tokenizer cut the text into T = {T} pieces (special tokens included). The "
        "layer never sees letters: it reads one vector of C = {C} numbers per piece, one "
        "row per piece of a matrix X:"
    ),
    "f_step1": "X: T × C = {T} × {C}",
    "step1_first_layer": (
        "In layer 0 each row of X is the piece's embedding: the vector of the piece, plus "
        "the vector of its position, plus the vector of its segment, normalized."
    ),
    "step1_later_layer": (
        "In layer {layer} each row of X is what layer {previous} wrote for that piece: its "
        "embedding, already mixed with its context by the layers before."
    ),
    "step1_query": (
        "The query is the piece whose new vector we follow: piece {index}, {label}. Every "
        "piece, the query included, is also a key."
    ),
    "step1_word": "{word} is {count} pieces ({pieces}); the query is its first piece, {label}.",
    "step1_word_nth": (
        "{word} is {count} pieces ({pieces}); the query is piece {n} of them, {label}."
    ),
    "pieces_heading": "pieces:",
    "piece_of": "{label} of {word}",
    # 2. projections and heads
    "step2": "2. Queries, keys and values, split into heads",
    "step2_body": (
        "Three learned linear maps (each W is {C} × {C}, each b has {C} numbers) turn X "
        "into queries, keys and values, each {T} × {C}. The query asks, each key says how "
        "well it matches, each value is what that piece passes on:"
    ),
    "f_step2": "Q = X·W_Q + b_Q    K = X·W_K + b_K    V = X·W_V + b_V",
    "step2_split": (
        "With d = {C} and h = {h} heads, each head works with d_k numbers: Q, K and V are "
        "cut into h slices, and head {head} takes columns {first}–{last} of each."
    ),
    "f_step2_split": "d_k = d / h = {C} / {h} = {dk}    {T} × {C} → {h} × {T} × {dk}",
    "step2_q": "Head {head}'s query vector q is row {index} of its slice of Q:",
    "f_step2_q": "q = ({values})    ‖q‖ = {norm}",
    # 3. raw scores
    "step3": "3. Raw scores q·kⱼ",
    "step3_body": (
        "q is compared with the key kⱼ of every piece j by a dot product: the more the two "
        "vectors point the same way, the higher the score. The highest raw score is "
        "{score}, for {label}."
    ),
    "f_step3": "q·kⱼ = Σᵢ qᵢ·kⱼᵢ    (i = 1…{dk})",
    # 4. scale
    "step4": "4. Scale by 1/√d_k",
    "step4_body": (
        "A sum of d_k products grows with d_k, and large scores would make the softmax "
        "give almost everything to one key. So every score is multiplied by 1/√d_k, that "
        "is, divided by √{dk} = {root}; the highest becomes {scaled}."
    ),
    "f_step4": "sⱼ = q·kⱼ × 1/√d_k    1/√d_k = 1/√{dk} = {scale}",
    # 5. mask
    "step5": "5. Mask",
    "step5_none": (
        "No mask: this encoder lets each piece look at all {T} pieces, before and after "
        "it. (Padding would be masked here; a single text has none.)"
    ),
    "step5_causal": (
        "Causal what-if mask, which this model was not trained with: the {count} keys "
        "after the query (pieces {first}–{last}) get the score −∞, so their weight will "
        "be exactly 0."
    ),
    "step5_causal_last": (
        "Causal what-if mask, which this model was not trained with: the query is the "
        "last piece, so no key comes after it and nothing is hidden."
    ),
    # 6. softmax
    "step6": "6. Softmax: from scores to weights",
    "step6_body": (
        "The softmax turns the scaled scores into weights between 0 and 1 that keep their "
        "order and sum to 1. The largest, {weight}, goes to {label}."
    ),
    "f_step6": "wⱼ = exp(sⱼ) / Σᵢ exp(sᵢ)    Σ wⱼ = {total} ({exact})",
    # 7. weighted sum and contributions
    "step7": "7. The head's output: o = Σ wⱼ vⱼ",
    "step7_body": (
        "The head's output for the query is the sum of the value vectors, each multiplied "
        "by its weight: {dk} numbers."
    ),
    "f_step7": "o = Σⱼ wⱼ·vⱼ    ‖o‖ = {norm}",
    "step7_contribution": (
        "A weight says how much the query looks at a key, not how much that key changes "
        "the output. Key j adds wⱼ·f(xⱼ) to the attention's output, where f keeps this "
        "head's {dk} value columns and its {dk} rows of the output projection (Kobayashi "
        "et al. 2020, “Attention is Not Only a Weight”). A large weight on a small f(xⱼ) "
        "adds little:"
    ),
    "f_step7_contribution": "f(x) = (x·W_V + b_V)·W_O    ‖wⱼ·f(xⱼ)‖ = wⱼ·‖f(xⱼ)‖",
    "step7_differ": (
        "Here they disagree: the largest weight, {weight}, is on {weight_label}, but the "
        "largest contribution, {contribution}, comes from {contribution_label}."
    ),
    "step7_agree": (
        "Here weight and contribution agree on the top key, {label}: weight {weight}, "
        "contribution {contribution}."
    ),
    "step7_top": "Top {n} by weight: {by_weight}. Top {n} by contribution: {by_contribution}.",
    # 8. join and output projection
    "step8": "8. Join the heads, then the output projection",
    "step8_body": (
        "All {h} heads do steps 2–7 at the same time, each on its own slice. Their outputs "
        "for the query are joined side by side into d numbers again:"
    ),
    "f_step8_join": "concat: h × d_k = {h} × {dk} = {C} = d",
    "step8_projection": (
        "The output projection W_O ({C} × {C}) and its bias b_O mix the heads into the "
        "attention's output for the query. Head {head}'s part, o times its {dk} rows of "
        "W_O, has norm {share}."
    ),
    "f_step8": "output = concat·W_O + b_O    (1 × {C})·({C} × {C}) → 1 × {C}",
    "f_step8_norm": "‖output‖ = {norm}",
    "step8_after": (
        "The layer then adds this output to the query's row of X (the residual connection) "
        "and normalizes the sum before the feed-forward block."
    ),
    # tables
    "col_index": "j",
    "col_key": "key",
    "col_raw": "q·kⱼ",
    "col_scaled": "× {scale}",
    "col_weight": "weight",
    "col_value": "‖f(xⱼ)‖",
    "col_contribution": "‖wⱼf(xⱼ)‖",
    "hidden": "hidden",
    "sum_row": "sum",
    "rows_shown": (
        "{shown} of {T} keys shown: the largest weights and contributions, and the query."
    ),
    "legend_query": "▶ marks the query.",
}

_PT: dict[str, str] = {
    "title": "Como a cabeça {head} da camada {layer} monta o novo vetor de {label} (peça {index})",
    "model_line": "modelo {model} · {layers} camadas · {heads} cabeças por camada",
    "causal_model": "{model} (modificado: máscara causal)",
    # 1. peças
    "step1": "1. As peças e o que a camada lê",
    "step1_body": (
        "O tokenizador dividiu o texto em T = {T} peças (tokens especiais incluídos). A "
        "camada não vê letras: ela lê um vetor de C = {C} números por peça, uma linha por "
        "peça de uma matriz X:"
    ),
    "f_step1": "X: T × C = {T} × {C}",
    "step1_first_layer": (
        "Na camada 0 cada linha de X é o embedding da peça: o vetor da peça, mais o vetor "
        "da sua posição, mais o vetor do seu segmento, normalizados."
    ),
    "step1_later_layer": (
        "Na camada {layer} cada linha de X é o que a camada {previous} escreveu para aquela "
        "peça: o seu embedding, já misturado com o contexto pelas camadas anteriores."
    ),
    "step1_query": (
        "A query é a peça cujo novo vetor acompanhamos: a peça {index}, {label}. Toda "
        "peça, inclusive a query, também é uma key."
    ),
    "step1_word": "{word} tem {count} peças ({pieces}); a query é a primeira, {label}.",
    "step1_word_nth": "{word} tem {count} peças ({pieces}); a query é a peça {n} delas, {label}.",
    "pieces_heading": "peças:",
    "piece_of": "{label} de {word}",
    # 2. projeções e cabeças
    "step2": "2. Queries, keys e values, divididas em cabeças",
    "step2_body": (
        "Três mapas lineares aprendidos (cada W é {C} × {C}, cada b tem {C} números) "
        "transformam X em queries, keys e values, cada uma {T} × {C}. A query pergunta, "
        "cada key diz o quanto combina, cada value é o que aquela peça repassa:"
    ),
    "f_step2": "Q = X·W_Q + b_Q    K = X·W_K + b_K    V = X·W_V + b_V",
    "step2_split": (
        "Com d = {C} e h = {h} cabeças, cada cabeça trabalha com d_k números: Q, K e V "
        "são cortadas em h fatias, e a cabeça {head} fica com as colunas {first}–{last} "
        "de cada uma."
    ),
    "f_step2_split": "d_k = d / h = {C} / {h} = {dk}    {T} × {C} → {h} × {T} × {dk}",
    "step2_q": "O vetor query q da cabeça {head} é a linha {index} da sua fatia de Q:",
    "f_step2_q": "q = ({values})    ‖q‖ = {norm}",
    # 3. scores brutos
    "step3": "3. Scores brutos q·kⱼ",
    "step3_body": (
        "q é comparado com a key kⱼ de cada peça j por um produto interno: quanto mais os "
        "dois vetores apontam na mesma direção, maior o score. O maior score bruto é "
        "{score}, de {label}."
    ),
    "f_step3": "q·kⱼ = Σᵢ qᵢ·kⱼᵢ    (i = 1…{dk})",
    # 4. escala
    "step4": "4. Escala por 1/√d_k",
    "step4_body": (
        "Uma soma de d_k produtos cresce com d_k, e scores grandes fariam o softmax dar "
        "quase tudo a uma só key. Por isso cada score é multiplicado por 1/√d_k, ou seja, "
        "dividido por √{dk} = {root}; o maior passa a {scaled}."
    ),
    "f_step4": "sⱼ = q·kⱼ × 1/√d_k    1/√d_k = 1/√{dk} = {scale}",
    # 5. máscara
    "step5": "5. Máscara",
    "step5_none": (
        "Sem máscara: este encoder deixa cada peça olhar para todas as {T} peças, antes e "
        "depois dela. (O padding seria mascarado aqui; um texto sozinho não tem padding.)"
    ),
    "step5_causal": (
        "Máscara causal hipotética, com a qual este modelo não foi treinado: as {count} "
        "keys depois da query (peças {first}–{last}) recebem score −∞, então o peso delas "
        "será exatamente 0."
    ),
    "step5_causal_last": (
        "Máscara causal hipotética, com a qual este modelo não foi treinado: a query é a "
        "última peça, então nenhuma key vem depois dela e nada fica escondido."
    ),
    # 6. softmax
    "step6": "6. Softmax: dos scores aos pesos",
    "step6_body": (
        "O softmax transforma os scores escalados em pesos entre 0 e 1 que mantêm a ordem "
        "deles e somam 1. O maior, {weight}, vai para {label}."
    ),
    "f_step6": "wⱼ = exp(sⱼ) / Σᵢ exp(sᵢ)    Σ wⱼ = {total} ({exact})",
    # 7. soma ponderada e contribuições
    "step7": "7. A saída da cabeça: o = Σ wⱼ vⱼ",
    "step7_body": (
        "A saída da cabeça para a query é a soma dos vetores value, cada um multiplicado "
        "pelo seu peso: {dk} números."
    ),
    "f_step7": "o = Σⱼ wⱼ·vⱼ    ‖o‖ = {norm}",
    "step7_contribution": (
        "Um peso diz o quanto a query olha para uma key, não o quanto essa key muda a "
        "saída. A key j soma wⱼ·f(xⱼ) à saída da atenção, onde f fica com as {dk} colunas "
        "de value desta cabeça e as suas {dk} linhas da projeção de saída (Kobayashi et al. "
        "2020, “Attention is Not Only a Weight”). Um peso grande sobre um f(xⱼ) pequeno "
        "acrescenta pouco:"
    ),
    "f_step7_contribution": "f(x) = (x·W_V + b_V)·W_O    ‖wⱼ·f(xⱼ)‖ = wⱼ·‖f(xⱼ)‖",
    "step7_differ": (
        "Aqui eles discordam: o maior peso, {weight}, está em {weight_label}, mas a maior "
        "contribuição, {contribution}, vem de {contribution_label}."
    ),
    "step7_agree": (
        "Aqui peso e contribuição concordam sobre a key principal, {label}: peso {weight}, "
        "contribuição {contribution}."
    ),
    "step7_top": (
        "As {n} maiores por peso: {by_weight}. As {n} maiores por contribuição: {by_contribution}."
    ),
    # 8. junção e projeção de saída
    "step8": "8. Juntar as cabeças e a projeção de saída",
    "step8_body": (
        "As {h} cabeças fazem os passos 2–7 ao mesmo tempo, cada uma na sua fatia. As "
        "saídas delas para a query são concatenadas lado a lado, de volta a d números:"
    ),
    "f_step8_join": "concat: h × d_k = {h} × {dk} = {C} = d",
    "step8_projection": (
        "A projeção de saída W_O ({C} × {C}) e o seu bias b_O misturam as cabeças na saída "
        "da atenção para a query. A parte da cabeça {head}, o vezes as suas {dk} linhas "
        "de W_O, tem norma {share}."
    ),
    "f_step8": "saída = concat·W_O + b_O    (1 × {C})·({C} × {C}) → 1 × {C}",
    "f_step8_norm": "‖saída‖ = {norm}",
    "step8_after": (
        "Depois a camada soma essa saída à linha da query em X (a conexão residual) e "
        "normaliza a soma antes do bloco feed-forward."
    ),
    # tabelas
    "col_index": "j",
    "col_key": "key",
    "col_raw": "q·kⱼ",
    "col_scaled": "× {scale}",
    "col_weight": "peso",
    "col_value": "‖f(xⱼ)‖",
    "col_contribution": "‖wⱼf(xⱼ)‖",
    "hidden": "oculta",
    "sum_row": "soma",
    "rows_shown": "{shown} de {T} keys mostradas: os maiores pesos e contribuições, e a query.",
    "legend_query": "▶ marca a query.",
}

CATALOGUE: dict[str, dict[str, str]] = {"en": _EN, "pt": _PT}


def default_lang(environ: Mapping[str, str] | None = None) -> str:
    """ "pt" when LANG starts with pt (pt_BR.UTF-8, pt_PT), else "en"."""
    env = os.environ if environ is None else environ
    return "pt" if env.get("LANG", "").strip().lower().startswith("pt") else "en"


def check_lang(lang: str) -> str:
    """`lang` if the explanation exists in it, else BadInput naming the choices."""
    if lang not in CATALOGUE:
        raise BadInput(f"--lang {lang!r} is not available: use one of {', '.join(LANGS)}")
    return lang


def placeholders(template: str) -> set[str]:
    """The field names a template fills, e.g. {"T", "C"} for "T = {T}, C = {C}"."""
    return {field for _, field, _, _ in string.Formatter().parse(template) if field is not None}


def quoted(label: str) -> str:
    """A piece or word as sentences show it: 'trem', '[SEP]'."""
    return f"'{label}'"


def text(lang: str, key: str, **values: object) -> str:
    """The text `key` in `lang`, filled with `values`."""
    return CATALOGUE[check_lang(lang)][key].format(**values)
