"""The measures floor: views of the attention (a layer's head, heads, rollout, flow), word
merging and exclusion, head statistics, links between words, one query's row, contribution
measures, explanations. Results draw themselves by importing a renderer inside a method."""
