"""Pegasus: a summarising encoder-decoder that names its sizes as BART does."""

from __future__ import annotations

from dataclasses import replace

from attnviz.model.families.bart import BART

PEGASUS = replace(BART, name="Pegasus", class_name="PegasusForConditionalGeneration")
