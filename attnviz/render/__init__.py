"""The render floor: attention drawn in the terminal (rich), as images (matplotlib, or
straight to PNG pixels), as a self-contained HTML page, or written as data files. Renderers
take arrays, labels and plain records (or Protocols of their own), never a model."""
