"""Hidden cells look hidden: the keys a decoder's query cannot see (after it, outside a layer's
sliding window, an encoder's causal what-if) are marked masked in every view, drawn masked by
every renderer and listed in the data files.

The mask is checked against (k > q) | (q - k >= window), computed here independently of
attnviz, on a tiny Mistral whose window (4) is shorter than the sentence.
"""

from __future__ import annotations

import numpy as np
import pytest

from attnviz import analyse
from tests.conftest import TinyFactory

TEXT = "João said the bank refused the loan, and then the bank closed."
WINDOW = 4


@pytest.fixture(scope="module")
def windowed(tiny_decoder: TinyFactory):
    """An analysis on a tiny Mistral whose sliding window (4) is shorter than the text."""
    return analyse(TEXT, model=str(tiny_decoder("mistral", sliding_window=WINDOW)), cache=False)


def _expected(T: int, window: int | None) -> np.ndarray:
    """(T, T) bool over pieces: what a causal mask with `window` hides, by the definition."""
    hidden = np.zeros((T, T), dtype=bool)
    for q in range(T):
        for k in range(T):
            hidden[q, k] = k > q or (window is not None and q - k >= window)
    return hidden


def _words(hidden: np.ndarray, groups: list[list[int]]) -> np.ndarray:
    """A word pair is masked when every pair of its pieces is."""
    W = len(groups)
    out = np.zeros((W, W), dtype=bool)
    for a, qs in enumerate(groups):
        for b, ks in enumerate(groups):
            out[a, b] = all(hidden[q, k] for q in qs for k in ks)
    return out


@pytest.mark.slow
def test_view_mask_is_the_causal_window_mask_in_tokens_words_and_with_exclusion(windowed) -> None:
    A = windowed.attentions  # (L, H, T, T)
    T = A.shape[-1]
    hidden = _expected(T, WINDOW)
    assert hidden.any() and (np.arange(T)[:, None] - np.arange(T)[None, :] >= WINDOW).any()
    for head in (None, 3):
        view = windowed.view(layer=0, head=head, units="tokens")
        np.testing.assert_array_equal(view.masked, hidden)
        assert (view.matrix[hidden] == 0).all()  # the model's own zeros
    groups = [list(w.pieces) for w in windowed.words]
    words = windowed.view(layer=-1, units="words")
    np.testing.assert_array_equal(words.masked, _words(hidden, groups))
    assert words.masked.shape == words.matrix.shape
    # Exclusion drops the same rows and columns from the mask as from the weights.
    first = windowed.view(layer=0, units="tokens", exclude="first")
    np.testing.assert_array_equal(first.masked, hidden[1:, 1:])
    kept = [w for w in range(len(groups)) if w != 0]
    first_words = windowed.view(units="words", exclude="first")
    np.testing.assert_array_equal(first_words.masked, _words(hidden, groups)[np.ix_(kept, kept)])
    # Every panel of the heads and model views has its layer's mask.
    heads = windowed.heads(layer=1, units="tokens")
    assert heads.masked.shape == heads.matrices.shape
    assert all((m == hidden).all() for m in heads.masked)
    model = windowed.model_view(units="tokens")
    assert all((m == hidden).all() for m in model.masked)


@pytest.mark.slow
def test_rollout_mask_is_causal_with_the_chained_window(windowed) -> None:
    T = windowed.attentions.shape[-1]
    L = windowed.attentions.shape[0]
    rolled = windowed.rollout(units="tokens")
    # Two windowed layers of 4 reach 1 + 2·3 = 7 pieces back through the tokens in between.
    reach = 1 + L * (WINDOW - 1)
    np.testing.assert_array_equal(rolled.masked, _expected(T, reach))
    assert (rolled.matrix[rolled.masked] == 0).all()
    visible = ~rolled.masked
    assert (rolled.matrix[visible] > 0).any()


@pytest.mark.slow
def test_an_encoder_has_no_mask_and_its_causal_what_if_has_one(tiny_model: TinyFactory) -> None:
    folder = str(tiny_model("bert"))
    plain = analyse(TEXT, model=folder, cache=False).view(units="tokens")
    assert plain.masked is None
    what_if = analyse(TEXT, model=folder, cache=False, mask="causal").view(units="tokens")
    T = what_if.matrix.shape[0]
    np.testing.assert_array_equal(what_if.masked, _expected(T, None))
