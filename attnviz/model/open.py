"""One door to a model: located once, its config.json read once, what it is said from that."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from attnviz.errors import AttnvizError
from attnviz.limits import CONFIG_BYTES
from attnviz.model.families import read_raw_config
from attnviz.model.foreign import TRANSFORMERS, check_folder, resolve_engine
from attnviz.model.locate import ModelSource, locate
from attnviz.model.seq2seq_config import Seq2seqShape, check_names, describe_seq2seq, is_seq2seq
from attnviz.reading import read_json

__all__ = ["OpenModel", "open_model"]


@dataclass(frozen=True)
class OpenModel:
    """A located model and its config.json as read once (`raw`: None where the folder has no
    config.json file); what it is (`config`, `engine`, `seq2seq`) is said from these."""

    source: ModelSource
    raw: Any
    # What `seq2seq` said (generation_config.json read once): filled on its first call.
    _said: dict[str, Seq2seqShape | None] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    @property
    def config(self) -> dict[str, Any]:
        """The config.json as a JSON object; a missing or non-object one is refused in the
        words of `read_raw_config`."""
        if self.raw is None:
            return read_raw_config(self.source.folder)  # refuses: no config.json file
        if not isinstance(self.raw, dict):
            path = self.source.folder / "config.json"
            raise AttnvizError(f"{path} is not a JSON object: restore or re-download the file")
        check_names(self.raw, where=str(self.source.folder / "config.json"))
        return self.raw

    def engine(self, engine: str = "auto") -> str:
        """The engine that computes the model (`model.foreign.resolve_engine`); a folder for
        transformers' engine is checked (`check_folder`)."""
        config = self.config
        engine = resolve_engine(config, engine, where=str(self.source.folder / "config.json"))
        if engine == TRANSFORMERS:
            check_folder(self.source.folder, self.source.gguf)
        return engine

    def seq2seq(self) -> Seq2seqShape | None:
        """The encoder-decoder's shape (generation_config.json's decoder_start_token_id
        included), or None: not an encoder-decoder (a GGUF file, the embedded model never is).
        Said once: generation_config.json is read on the first call only."""
        if "seq2seq" not in self._said:
            self._said["seq2seq"] = self._read_seq2seq()
        return self._said["seq2seq"]

    def _read_seq2seq(self) -> Seq2seqShape | None:
        if self.source.gguf is not None or self.source.origin == "embedded":
            return None
        if not isinstance(self.raw, dict):
            return None
        where = str(self.source.folder / "config.json")
        check_names(self.raw, where=where)
        if not is_seq2seq(self.raw):
            return None
        start = None
        generation = self.source.folder / "generation_config.json"
        if generation.is_file():
            extra = read_json(generation, CONFIG_BYTES, "generation_config.json")
            start = extra.get("decoder_start_token_id") if isinstance(extra, dict) else None
        return describe_seq2seq(self.raw, where=where, start=start)


def open_model(model: str | None, *, use_cache: bool = True) -> OpenModel:
    """Locate `model` (`model.locate.locate`) and read its config.json once, bounded."""
    source = locate(model, use_cache=use_cache)
    path = source.folder / "config.json"
    raw = read_json(path, CONFIG_BYTES, "config.json") if path.is_file() else None
    return OpenModel(source, raw)
