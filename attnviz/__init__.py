"""attnviz: look inside transformer attention from the command line.

Importing this package is cheap: torch, transformers and matplotlib are only
imported by the modules that compute or draw.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
