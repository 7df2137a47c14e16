"""What every decoder family's config reader shares: a size, a flag or a number read from
config.json, checked, with the family's default for a key left out (no torch).

A family's file subclasses `DecoderReader` (Llama's `LlamaReader`, GPT-2's `Gpt2Reader`)
and a child subclasses its parent's, writing only what it changes: its defaults (the
defaults of its transformers config class) and the steps it reads its own way.
"""

from __future__ import annotations

from typing import Any, ClassVar

from attnviz.errors import AttnvizError
from attnviz.model.config import DecoderConfig, agreed, shown, whole
from attnviz.model.rope_config import positive

# Sizes past these are not a decoder this tool can show; refused before allocating.
LIMITS = {"layers": 1024, "heads": 1024, "hidden": 65536, "intermediate": 262144}
LIMITS.update({"positions": 1 << 20, "vocab": 4_000_000, "head_dim": 4096, "window": 1 << 20})


class DecoderReader:
    """Reads one decoder's config.json (`raw`, from the file `where`) into its `DecoderConfig`.

    `defaults`: the family's config class defaults, for keys a config.json leaves out (a key
    set to null is another thing: a null num_key_value_heads means one per query head, a
    null sliding_window no window). `aliases`: other keys transformers reads for a size (its
    config class's attribute_map); two that disagree are refused, naming both.
    """

    defaults: ClassVar[dict[str, Any]] = {}
    aliases: ClassVar[dict[str, str]] = {}

    def __init__(self, raw: dict[str, Any], where: str, name: str) -> None:
        self.raw, self.where, self.name = raw, where, name

    def read(self) -> DecoderConfig:
        """The decoder's shape, every size checked; one line naming the key otherwise."""
        raise NotImplementedError

    def size(self, key: str, default: Any, limit: str, low: int = 1) -> int:
        """A whole number from `low` to `LIMITS[limit]`: the config's, or the family's
        default, or `default` where the family has none."""
        keys = (key, self.aliases[key]) if key in self.aliases else (key,)
        found = agreed(self.raw, keys, self.where)
        if found is None:
            value = self.defaults.get(key)
            found = (key, default if value is None else value)
        key, value = found
        if not whole(value, low, LIMITS[limit]):
            raise AttnvizError(
                f"{self.where} has {key}={shown(value)}; expected a whole number from {low} to "
                f"{LIMITS[limit]}: the config is corrupt or not a {self.name}"
            )
        return int(value)

    def flag(self, key: str, default: bool) -> bool:
        """True or false (null or left out: `default`)."""
        value = self.raw.get(key, default)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise AttnvizError(
                f"{self.where} has {key}={shown(value)}; expected true or false: the config is "
                "corrupt"
            )
        return value

    def number(self, key: str, default: float) -> float:
        """A finite positive number (left out: `default`)."""
        return positive(self.raw.get(key, default), key, self.where)
