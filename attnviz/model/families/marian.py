"""Marian: translation encoder-decoders that name their sizes as BART does."""

from __future__ import annotations

from dataclasses import replace

from attnviz.model.families.bart import BART

MARIAN = replace(BART, name="Marian", class_name="MarianMTModel")
