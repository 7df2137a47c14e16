"""Renderers: draw attention matrices in the terminal or as image files."""
