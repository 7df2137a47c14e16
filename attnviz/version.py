"""attnviz's version, on the ground floor: the cache keys its entries by it."""

__version__ = "0.1.0"
