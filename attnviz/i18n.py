"""The texts of `attnviz explain`, in English and Portuguese.

Every key exists in both languages with the same `{placeholders}` (a test checks
it). Numbers and labels are formatted by the renderer and passed in as strings,
so a template never carries a format spec. Error messages stay in English.
"""

from __future__ import annotations

import string

from attnviz.language import resolve_lang

__all__ = ["CATALOGUE", "placeholders", "quoted", "text"]

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
    "step7_sink": (
        "{label} looks like an attention sink: this head parks the query there, with weight "
        "{weight}, and its transformed value is small (‖f(x)‖ {norm}, against a median of "
        "{median} for the other keys)."
    ),
    "step7_sink_agree": (
        "The contributions say what the weight says: its contribution, {contribution}, is "
        "still the largest (no other key adds more than {others})."
    ),
    "step7_sink_differ": (
        "The contributions rank the keys differently: the largest, {contribution}, comes "
        "from {label}."
    ),
    "step7_sink_small": (
        "What the head writes for this query is small: ‖o·W_Oᵀ‖ = {share}, against a median "
        "of {queries} over the same head's other queries and {heads} over the other heads "
        "for this query: the head is parked here, and adds little to this query whatever "
        "the weights say; --exclude first shows where the rest of its weight goes."
    ),
    "step7_sink_parked": (
        "What the head writes for this query, ‖o·W_Oᵀ‖ = {share}, is about what it writes "
        "for its other queries (median {queries}; {heads} over the other heads for this "
        "query), and {parked} of the queries that see {label} put over half their weight "
        "on it: the head is parked there, writing nearly the same vector, f({label}), "
        "whatever the query. The part that depends on this query is what the other keys "
        "add, which the contributions show; --exclude first shows where the rest of the "
        "weight goes."
    ),
    "step7_sink_not_small": (
        "What the head writes for this query is not small, though: ‖o·W_Oᵀ‖ = {share}, "
        "against a median of {queries} over the same head's other queries and {heads} over "
        "the other heads for this query; read the contributions, or drop the sink with "
        "--exclude first."
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
    # decoders (GPT-2, Llama, Mistral, Qwen2): what differs from the encoder's steps
    "model_line_decoder": (
        "model {model} · decoder, causal · {layers} layers · per layer, query heads: {heads}, "
        "key/value heads: {kv}"
    ),
    "step1_first_layer_gpt2": (
        "In layer 0 each row of X is the piece's embedding: the vector of the piece plus "
        "the vector of its position. This decoder normalizes before the attention, not "
        "after: the attention reads X through the layer's {norm}."
    ),
    "step1_first_layer_rotary": (
        "In layer 0 each row of X is the vector of the piece, normalized by the layer's "
        "{norm}. It carries no position: the position enters in step 2b, where q and k are "
        "rotated."
    ),
    "step1_later_layer_decoder": (
        "In layer {layer} each row of X is the piece's embedding plus what the layers before "
        "added to it (the residual stream), normalized by this layer's {norm}: the attention "
        "reads the normalized copy."
    ),
    "step2_body_decoder": (
        "Three learned linear maps turn X into queries ({T} × {qw}), keys and values "
        "({T} × {kvw} each): W_Q is {C} × {qw}, W_K and W_V are {C} × {kvw}. The query "
        "asks, each key says how well it matches, each value is what that piece passes on:"
    ),
    "f_step2_no_bias": "Q = X·W_Q    K = X·W_K    V = X·W_V",
    "step3_body_masked": (
        "q is compared with the key kⱼ of every piece j by a dot product: the more the two "
        "vectors point the same way, the higher the score. Of the keys the mask (step 5) "
        "lets the query see, the highest raw score is {score}, for {label}."
    ),
    "f_step7_contribution_no_bias": "f(x) = (x·W_V)·W_O    ‖wⱼ·f(xⱼ)‖ = wⱼ·‖f(xⱼ)‖",
    "step2_split_decoder": (
        "Each head works with d_k = {dk} numbers: Q is cut into h = {h} slices, and head "
        "{head} takes columns {first}–{last}."
    ),
    "f_step2_split_decoder": (
        "Q: {T} × {qw} → {h} × {T} × {dk}    K, V: {T} × {kvw} → {n_kv} × {T} × {dk}"
    ),
    "step2_groups": (
        "Grouped-query attention: K and V have fewer heads, only {n_kv}, each shared by {g} query "
        "heads. Query head {head} reads key/value head {kv} = {head} // {g}, columns "
        "{first}–{last} of K and V."
    ),
    "step2b": "2b. Rotary positions: q and k turned by their place in the text",
    "step2b_body": (
        "The head's {dk} numbers form {pairs} pairs (number i with number i + {pairs}), and "
        "each pair of q and of every key kⱼ is turned by an angle that grows with the "
        "piece's position p. At the query's position, {p}, the first pair turns by "
        "{first} rad and the slowest, pair {last}, by {slowest} rad:"
    ),
    "f_step2b": "angleᵢ = p · θ^(−2i/d_k)    θ = {theta}    i = 0…{last}",
    "step2b_scaling": (
        "The config also rescales these angles ({kind} rope scaling), for texts longer than "
        "the model was first trained on."
    ),
    "step2b_turn": (
        "A rotation turns a vector without stretching it, so the norms do not change. The "
        "query's q and its own key, before and after:"
    ),
    "f_step2b_q_before": "q before  ({values})    ‖q‖ = {norm}",
    "f_step2b_q_after": "q after   ({values})    ‖q‖ = {norm}",
    "f_step2b_k_before": "k before  ({values})    ‖k‖ = {norm}",
    "f_step2b_k_after": "k after   ({values})    ‖k‖ = {norm}",
    "step2b_why": (
        "Each key is turned by its own position's angles, so q·kⱼ depends on how far apart "
        "the query and piece j are, not on where they sit. The scores below use the turned "
        "q and kⱼ."
    ),
    "step2a": "2a. QK-norm: q and k normalised, head by head",
    "step2a_body": (
        "Before turning them, this model normalises each head's q and every key kⱼ on their "
        "own ({norm} over the head's {dk} numbers: divided by their root mean square, then "
        "times a learned gain), so that their sizes stay in a narrow range whatever the "
        "layer reads. The query's q and its own key, before and after:"
    ),
    "step2b_local": (
        "Layer {layer} slides a window, and Gemma 3 turns its sliding layers with their own "
        "base, θ = {theta}; its full layers use θ = {full}."
    ),
    "step2b_partial": (
        "This model turns only the first {r} of the head's {dk} numbers ({pairs} pairs); "
        "the other {rest} pass unturned."
    ),
    "step4_scalar": (
        "Gemma scales by 1/√query_pre_attn_scalar, set in its config, rather than by "
        "1/√d_k (d_k is {dk}): 1/√{scalar} = {scale}; the highest score becomes {scaled}."
    ),
    "step4_softcap": (
        "Then the scores are soft-capped (attn_logit_softcapping = {cap}): each becomes "
        "tanh(sⱼ / {cap}) × {cap}, which leaves small scores almost as they are and squashes "
        "large ones under {cap}. The highest, {before}, becomes {after}."
    ),
    "f_step4_softcap": "s'ⱼ = tanh(sⱼ / {cap}) × {cap}",
    "col_capped": "capped",
    "step4_off": (
        "This model's config turns the 1/√d_k scale off (scale_attn_weights is false): the "
        "scores are not divided by √{dk}."
    ),
    "step4_layer": (
        "Its config (scale_attn_by_inverse_layer_idx) also divides the scores of layer "
        "{layer} by layer + 1 = {n}; the highest becomes {scaled}."
    ),
    "f_step4_factor": "sⱼ = q·kⱼ × {scale}",
    "step5_decoder": (
        "The model's own causal mask, the one it was trained with: a piece sees itself and "
        "the pieces before it, never those after. The {count} keys after the query (pieces "
        "{first}–{last}) get the score −∞, so their weight is exactly 0."
    ),
    "step5_decoder_last": (
        "The model's own causal mask, the one it was trained with: a piece sees itself and "
        "the pieces before it, never those after. The query is the last piece, so no key "
        "comes after it."
    ),
    "step5_only_self": (
        "The query is the first piece: the only key it may see is itself, so its weight on "
        "itself is 1, whatever the scores."
    ),
    "step5_window": (
        "This layer also looks back at most {window} tokens (a sliding window): the {count} "
        "keys further back (pieces {first}–{last}) get −∞ too."
    ),
    "step5_window_none": (
        "This layer also looks back at most {window} tokens (a sliding window); the query "
        "is close enough to the start that the window hides nothing here."
    ),
    "step7_shared_values": (
        "The values are key/value head {kv}'s, shared by {g} query heads; the {dk} rows of "
        "W_O are this head's own."
    ),
    "f_step8_join_decoder": "concat: h × d_k = {h} × {dk} = {qw}",
    "step8_projection_decoder": (
        "The output projection W_O ({qw} × {C}) mixes the heads into the attention's "
        "output for the query. Head {head}'s part, o times its {dk} rows of W_O, has norm "
        "{share}."
    ),
    "f_step8_decoder": "output = concat·W_O{bias}    (1 × {qw})·({qw} × {C}) → 1 × {C}",
    "step8_after_decoder": (
        "The layer then adds this output to the query's row of its input before the norm "
        "(the residual stream); the feed-forward block reads a normalized copy of that sum "
        "and adds its own output to it."
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
    # 1. peças. As palavras são as de attnviz.lexicon: consulta (query), chave (key), valor
    # (value); score é pontuação. O termo em inglês vem entre parênteses só na primeira
    # menção da lição.
    "step1": "1. As peças e o que a camada lê",
    "step1_body": (
        "O tokenizador dividiu o texto em T = {T} peças (tokens especiais incluídos). A "
        "camada não vê letras: ela lê um vetor de C = {C} números por peça, uma linha por "
        "peça de uma matriz X:"
    ),
    "f_step1": "X: T × C = {T} × {C}",
    "step1_first_layer": (
        "Na camada 0 cada linha de X é o embedding da peça: o vetor da peça, mais o vetor "
        "da sua posição, mais o vetor do seu segmento, com a soma normalizada."
    ),
    "step1_later_layer": (
        "Na camada {layer} cada linha de X é o que a camada {previous} escreveu para aquela "
        "peça: o seu embedding, já misturado com o contexto pelas camadas anteriores."
    ),
    "step1_query": (
        "A consulta (query) é a peça cujo novo vetor acompanhamos: a peça {index}, {label}. "
        "Toda peça, inclusive a consulta, também é uma chave (key)."
    ),
    "step1_word": "{word} tem {count} peças ({pieces}); a consulta é a primeira, {label}.",
    "step1_word_nth": (
        "{word} tem {count} peças ({pieces}); a consulta é a peça {n} delas, {label}."
    ),
    "pieces_heading": "peças:",
    "piece_of": "{label} de {word}",
    # 2. projeções e cabeças
    "step2": "2. Consultas, chaves e valores (values), divididos em cabeças",
    "step2_body": (
        "Três mapas lineares aprendidos (cada W é {C} × {C}, cada b tem {C} números) "
        "transformam X nas matrizes de consultas, chaves e valores, cada uma {T} × {C}. A "
        "consulta pergunta, cada chave diz o quanto combina, cada valor é o que aquela "
        "peça repassa:"
    ),
    "f_step2": "Q = X·W_Q + b_Q    K = X·W_K + b_K    V = X·W_V + b_V",
    "step2_split": (
        "Com d = {C} e h = {h} cabeças, cada cabeça trabalha com d_k números: Q, K e V "
        "são cortadas em h fatias, e a cabeça {head} fica com as colunas {first}–{last} "
        "de cada uma."
    ),
    "f_step2_split": "d_k = d / h = {C} / {h} = {dk}    {T} × {C} → {h} × {T} × {dk}",
    "step2_q": "O vetor de consulta q da cabeça {head} é a linha {index} da sua fatia de Q:",
    "f_step2_q": "q = ({values})    ‖q‖ = {norm}",
    # 3. pontuações brutas
    "step3": "3. Pontuações brutas q·kⱼ",
    "step3_body": (
        "q é comparado com a chave kⱼ de cada peça j por um produto interno: quanto mais "
        "os dois vetores apontam na mesma direção, maior a pontuação. A maior pontuação "
        "bruta é {score}, de {label}."
    ),
    "f_step3": "q·kⱼ = Σᵢ qᵢ·kⱼᵢ    (i = 1…{dk})",
    # 4. escala
    "step4": "4. Escala por 1/√d_k",
    "step4_body": (
        "Uma soma de d_k produtos cresce com d_k, e pontuações grandes fariam o softmax "
        "dar quase tudo a uma só chave. Por isso cada pontuação é multiplicada por 1/√d_k, "
        "ou seja, dividida por √{dk} = {root}; a maior passa a {scaled}."
    ),
    "f_step4": "sⱼ = q·kⱼ × 1/√d_k    1/√d_k = 1/√{dk} = {scale}",
    # 5. máscara
    "step5": "5. Máscara",
    "step5_none": (
        "Sem máscara: este codificador deixa cada peça olhar para todas as {T} peças, antes "
        "e depois dela. (As peças de preenchimento, o padding, seriam mascaradas aqui; um "
        "texto sozinho não tem nenhuma.)"
    ),
    "step5_causal": (
        "Máscara causal hipotética, com a qual este modelo não foi treinado: as {count} "
        "chaves depois da consulta (peças {first}–{last}) recebem a pontuação −∞, então o "
        "peso delas será exatamente 0."
    ),
    "step5_causal_last": (
        "Máscara causal hipotética, com a qual este modelo não foi treinado: a consulta é "
        "a última peça, então nenhuma chave vem depois dela e nada fica escondido."
    ),
    # 6. softmax
    "step6": "6. Softmax: das pontuações aos pesos",
    "step6_body": (
        "O softmax transforma as pontuações escaladas em pesos entre 0 e 1 que mantêm a "
        "ordem delas e somam 1. O maior, {weight}, vai para {label}."
    ),
    "f_step6": "wⱼ = exp(sⱼ) / Σᵢ exp(sᵢ)    Σ wⱼ = {total} ({exact})",
    # 7. soma ponderada e contribuições
    "step7": "7. A saída da cabeça: o = Σ wⱼ vⱼ",
    "step7_body": (
        "A saída da cabeça para a consulta é a soma dos vetores de valor, cada um "
        "multiplicado pelo seu peso: {dk} números."
    ),
    "f_step7": "o = Σⱼ wⱼ·vⱼ    ‖o‖ = {norm}",
    "step7_contribution": (
        "Um peso diz o quanto a consulta olha para uma chave, não o quanto essa chave muda "
        "a saída. A chave j soma wⱼ·f(xⱼ) à saída da atenção, onde f fica com as {dk} "
        "colunas de valor desta cabeça e as suas {dk} linhas da projeção de saída "
        "(Kobayashi et al. 2020, “Attention is Not Only a Weight”). Um peso grande sobre "
        "um f(xⱼ) pequeno acrescenta pouco:"
    ),
    "f_step7_contribution": "f(x) = (x·W_V + b_V)·W_O    ‖wⱼ·f(xⱼ)‖ = wⱼ·‖f(xⱼ)‖",
    "step7_differ": (
        "Aqui os dois discordam: o maior peso, {weight}, está em {weight_label}, mas a "
        "maior contribuição, {contribution}, vem de {contribution_label}."
    ),
    "step7_agree": (
        "Aqui peso e contribuição concordam quanto à chave principal, {label}: peso "
        "{weight}, contribuição {contribution}."
    ),
    "step7_sink": (
        "{label} é onde esta cabeça estaciona a consulta (um sumidouro de atenção, attention "
        "sink): recebe peso {weight}, e o seu valor transformado é pequeno (‖f(x)‖ {norm}, "
        "contra uma mediana de {median} nas outras chaves)."
    ),
    "step7_sink_agree": (
        "As contribuições dizem o mesmo que o peso: a contribuição dela, {contribution}, "
        "ainda é a maior (nenhuma outra chave soma mais de {others})."
    ),
    "step7_sink_differ": (
        "As contribuições ordenam as chaves de outro jeito: a maior, {contribution}, vem "
        "de {label}."
    ),
    "step7_sink_small": (
        "O que a cabeça escreve para esta consulta é pouco: ‖o·W_Oᵀ‖ = {share}, contra uma "
        "mediana de {queries} nas outras consultas da mesma cabeça e de {heads} nas outras "
        "cabeças para esta consulta: a cabeça está estacionada aqui e acrescenta pouco a "
        "esta consulta, digam o que disserem os pesos; --exclude first mostra para onde vai "
        "o resto do peso."
    ),
    "step7_sink_parked": (
        "O que a cabeça escreve para esta consulta, ‖o·W_Oᵀ‖ = {share}, é mais ou menos o "
        "que escreve para as outras consultas (mediana {queries}; {heads} nas outras "
        "cabeças para esta consulta), e {parked} das consultas que veem {label} põem sobre "
        "ela mais da metade do peso: a cabeça está estacionada ali e escreve quase o mesmo "
        "vetor, f({label}), qualquer que seja a consulta. O que depende desta consulta é o "
        "que as outras chaves somam, e isso as contribuições mostram; --exclude first "
        "mostra para onde vai o resto do peso."
    ),
    "step7_sink_not_small": (
        "Mas o que a cabeça escreve para esta consulta não é pouco: ‖o·W_Oᵀ‖ = {share}, "
        "contra uma mediana de {queries} nas outras consultas da mesma cabeça e de {heads} "
        "nas outras cabeças para esta consulta; leia as contribuições, ou retire o "
        "sumidouro com --exclude first."
    ),
    "step7_top": (
        "As {n} chaves de maior peso: {by_weight}. As {n} de maior contribuição: {by_contribution}."
    ),
    # 8. junção e projeção de saída
    "step8": "8. Juntar as cabeças e a projeção de saída",
    "step8_body": (
        "As {h} cabeças fazem os passos 2–7 ao mesmo tempo, cada uma na sua fatia. As "
        "saídas delas para a consulta são concatenadas lado a lado, de volta a d números:"
    ),
    "f_step8_join": "concat: h × d_k = {h} × {dk} = {C} = d",
    "step8_projection": (
        "A projeção de saída W_O ({C} × {C}) e o seu viés b_O misturam as cabeças na saída "
        "da atenção para a consulta. A parte da cabeça {head}, o vetor o vezes as suas "
        "{dk} linhas de W_O, tem norma {share}."
    ),
    "f_step8": "saída = concat·W_O + b_O    (1 × {C})·({C} × {C}) → 1 × {C}",
    "f_step8_norm": "‖saída‖ = {norm}",
    "step8_after": (
        "Depois a camada soma essa saída à linha da consulta em X (a conexão residual) e "
        "normaliza a soma antes do bloco de propagação direta (feed-forward)."
    ),
    # decodificadores (GPT-2, Llama, Mistral, Qwen2): o que muda em relação aos passos do
    # codificador. A linha do modelo vem antes do passo 1: é um cabeçalho, como os rótulos
    # do lexicon, e os termos em inglês entram no passo 1.
    "model_line_decoder": (
        "modelo {model} · decodificador, causal · {layers} camadas · por camada, {heads} "
        "cabeças de consulta e {kv} de chave/valor"
    ),
    "step1_first_layer_gpt2": (
        "Na camada 0 cada linha de X é o embedding da peça: o vetor da peça mais o vetor da "
        "sua posição. Este decodificador normaliza antes da atenção, não depois: a atenção "
        "lê X através da {norm} da camada."
    ),
    "step1_first_layer_rotary": (
        "Na camada 0 cada linha de X é o vetor da peça, normalizado pela {norm} da camada. "
        "Ela não carrega posição: a posição entra no passo 2b, onde q e k são girados."
    ),
    "step1_later_layer_decoder": (
        "Na camada {layer} cada linha de X é o embedding da peça mais o que as camadas "
        "anteriores somaram a ele (o fluxo residual), normalizado pela {norm} desta "
        "camada: a atenção lê a cópia normalizada."
    ),
    "step2_body_decoder": (
        "Três mapas lineares aprendidos transformam X em consultas ({T} × {qw}), chaves e "
        "valores ({T} × {kvw} cada): W_Q é {C} × {qw}, W_K e W_V são {C} × {kvw}. A "
        "consulta pergunta, cada chave diz o quanto combina, cada valor é o que aquela "
        "peça repassa:"
    ),
    "f_step2_no_bias": "Q = X·W_Q    K = X·W_K    V = X·W_V",
    "step3_body_masked": (
        "q é comparado com a chave kⱼ de cada peça j por um produto interno: quanto mais "
        "os dois vetores apontam na mesma direção, maior a pontuação. Das chaves que a "
        "máscara (passo 5) deixa a consulta ver, a maior pontuação bruta é {score}, de "
        "{label}."
    ),
    "f_step7_contribution_no_bias": "f(x) = (x·W_V)·W_O    ‖wⱼ·f(xⱼ)‖ = wⱼ·‖f(xⱼ)‖",
    "step2_split_decoder": (
        "Cada cabeça trabalha com d_k = {dk} números: Q é cortada em h = {h} fatias, e a "
        "cabeça {head} fica com as colunas {first}–{last}."
    ),
    "f_step2_split_decoder": (
        "Q: {T} × {qw} → {h} × {T} × {dk}    K, V: {T} × {kvw} → {n_kv} × {T} × {dk}"
    ),
    "step2_groups": (
        "Atenção com consultas agrupadas (grouped-query attention): K e V têm menos "
        "cabeças, só {n_kv}, e cada uma é compartilhada por {g} cabeças de consulta. A "
        "cabeça de consulta {head} lê a cabeça de chave/valor {kv} = {head} // {g}, "
        "colunas {first}–{last} de K e V."
    ),
    "step2b": "2b. Posições rotativas: q e k girados pelo seu lugar no texto",
    "step2b_body": (
        "Os {dk} números da cabeça formam {pairs} pares (o número i com o i + {pairs}), e "
        "cada par de q e de cada chave kⱼ é girado por um ângulo que cresce com a posição "
        "p da peça. Na posição da consulta, {p}, o primeiro par gira {first} rad e o mais "
        "lento, o par {last}, gira {slowest} rad:"
    ),
    "f_step2b": "ânguloᵢ = p · θ^(−2i/d_k)    θ = {theta}    i = 0…{last}",
    "step2b_scaling": (
        "A configuração também reescala esses ângulos (rope_scaling do tipo {kind}), para "
        "textos mais longos do que os do treino original do modelo."
    ),
    "step2b_turn": (
        "Uma rotação gira um vetor sem esticá-lo, então as normas não mudam. O q da "
        "consulta e a sua própria chave, antes e depois:"
    ),
    "f_step2b_q_before": "q antes   ({values})    ‖q‖ = {norm}",
    "f_step2b_q_after": "q depois  ({values})    ‖q‖ = {norm}",
    "f_step2b_k_before": "k antes   ({values})    ‖k‖ = {norm}",
    "f_step2b_k_after": "k depois  ({values})    ‖k‖ = {norm}",
    "step2b_why": (
        "Cada chave é girada pelos ângulos da sua própria posição, então q·kⱼ depende da "
        "distância entre a consulta e a peça j, não de onde elas estão. As pontuações "
        "abaixo usam q e kⱼ já girados."
    ),
    "step2a": "2a. QK-norm: q e k normalizados, cabeça por cabeça",
    "step2a_body": (
        "Antes de girá-los, este modelo normaliza o q de cada cabeça e cada chave kⱼ "
        "separadamente ({norm} sobre os {dk} números da cabeça: divididos pela raiz da "
        "média dos quadrados, depois vezes um ganho aprendido), para que os seus tamanhos "
        "fiquem numa faixa estreita, seja o que for que a camada leia. O q da consulta e a "
        "sua própria chave, antes e depois:"
    ),
    "step2b_local": (
        "A camada {layer} usa uma janela deslizante, e nessas camadas o Gemma 3 gira q e k "
        "com uma base própria, θ = {theta}; as camadas completas usam θ = {full}."
    ),
    "step2b_partial": (
        "Este modelo gira só os primeiros {r} dos {dk} números da cabeça ({pairs} pares); "
        "os outros {rest} passam sem girar."
    ),
    "step4_scalar": (
        "O Gemma escala por 1/√query_pre_attn_scalar, definido na sua configuração, em vez "
        "de 1/√d_k (d_k é {dk}): 1/√{scalar} = {scale}; a maior pontuação passa a {scaled}."
    ),
    "step4_softcap": (
        "Depois as pontuações são limitadas suavemente (attn_logit_softcapping = {cap}): "
        "cada uma vira tanh(sⱼ / {cap}) × {cap}, o que deixa as pontuações pequenas quase "
        "iguais e espreme as grandes abaixo de {cap}. A maior, {before}, vira {after}."
    ),
    "f_step4_softcap": "s'ⱼ = tanh(sⱼ / {cap}) × {cap}",
    "col_capped": "limitada",
    "step4_off": (
        "A configuração deste modelo desliga a escala 1/√d_k (scale_attn_weights é false): "
        "as pontuações não são divididas por √{dk}."
    ),
    "step4_layer": (
        "A configuração (scale_attn_by_inverse_layer_idx) também divide as pontuações da "
        "camada {layer} por camada + 1 = {n}; a maior passa a {scaled}."
    ),
    "f_step4_factor": "sⱼ = q·kⱼ × {scale}",
    "step5_decoder": (
        "A máscara causal do próprio modelo, com a qual ele foi treinado: uma peça vê a si "
        "mesma e as peças antes dela, nunca as que vêm depois. As {count} chaves depois da "
        "consulta (peças {first}–{last}) recebem a pontuação −∞, então o peso delas é "
        "exatamente 0."
    ),
    "step5_decoder_last": (
        "A máscara causal do próprio modelo, com a qual ele foi treinado: uma peça vê a si "
        "mesma e as peças antes dela, nunca as que vêm depois. A consulta é a última peça, "
        "então nenhuma chave vem depois dela."
    ),
    "step5_only_self": (
        "A consulta é a primeira peça: a única chave que ela pode ver é ela mesma, então o "
        "peso dela em si mesma é 1, sejam quais forem as pontuações."
    ),
    "step5_window": (
        "Esta camada também olha no máximo {window} tokens para trás (uma janela "
        "deslizante): as {count} chaves mais distantes (peças {first}–{last}) também "
        "recebem −∞."
    ),
    "step5_window_none": (
        "Esta camada também olha no máximo {window} tokens para trás (uma janela "
        "deslizante); a consulta está perto o bastante do início para a janela não "
        "esconder nada."
    ),
    "step7_shared_values": (
        "Os valores são os da cabeça de chave/valor {kv}, compartilhada por {g} cabeças de "
        "consulta; as {dk} linhas de W_O são desta cabeça."
    ),
    "f_step8_join_decoder": "concat: h × d_k = {h} × {dk} = {qw}",
    "step8_projection_decoder": (
        "A projeção de saída W_O ({qw} × {C}) mistura as cabeças na saída da atenção para "
        "a consulta. A parte da cabeça {head}, o vetor o vezes as suas {dk} linhas de W_O, "
        "tem norma {share}."
    ),
    "f_step8_decoder": "saída = concat·W_O{bias}    (1 × {qw})·({qw} × {C}) → 1 × {C}",
    "step8_after_decoder": (
        "Depois a camada soma essa saída à linha da consulta na sua entrada ainda não "
        "normalizada (o fluxo residual); o bloco de propagação direta (feed-forward) lê "
        "uma cópia normalizada dessa soma e soma a ela a sua própria saída."
    ),
    # tabelas
    "col_index": "j",
    "col_key": "chave",
    "col_raw": "q·kⱼ",
    "col_scaled": "× {scale}",
    "col_weight": "peso",
    "col_value": "‖f(xⱼ)‖",
    "col_contribution": "‖wⱼf(xⱼ)‖",
    "hidden": "oculta",
    "sum_row": "soma",
    "rows_shown": (
        "{shown} de {T} chaves mostradas: os maiores pesos e contribuições, e a consulta."
    ),
    "legend_query": "▶ marca a consulta.",
}

CATALOGUE: dict[str, dict[str, str]] = {"en": _EN, "pt": _PT}


def placeholders(template: str) -> set[str]:
    """The field names a template fills, e.g. {"T", "C"} for "T = {T}, C = {C}"."""
    return {field for _, field, _, _ in string.Formatter().parse(template) if field is not None}


def quoted(label: str) -> str:
    """A piece or word as sentences show it: 'trem', '[SEP]'."""
    return f"'{label}'"


def text(lang: str, key: str, **values: object) -> str:
    """The text `key` in `lang`, filled with `values`."""
    return CATALOGUE[resolve_lang(lang)][key].format(**values)
