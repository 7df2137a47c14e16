"""Partial results of corpus work: one shard's exact sums and counts, as JSON, and their merge.

`attnviz.partial_head_stats` and `attnviz.partial_head_roles` return a `StatsPartial` or a
`RolesPartial` for one slice of the input (`attnviz.sharding`); `to_file` writes it, `read`
reads it back, `merge` adds partials, and `result()` on a merge of every slice gives the
`HeadStats` or `HeadRoles` a whole run gives, bit for bit: the statistics' sums are exact
integers (added in any order), the roles keep each example's hits and weights.

Each partial says what it was computed on (`Identity`: the model's name and the sha256 of its
config, the options that change the numbers, attnviz's version, the whole input's sha256 and
length) and which slice it is (`shards` of `of`). `merge` refuses, in one line, partials that do
not belong together, a slice given twice, and `result` a slice missing.

A partial file is input from a stranger: JSON only (never pickle), bounded by
`limits.PARTIAL_FILE_BYTES`, every value checked for its type and size before it is used.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from attnviz.errors import AttnvizError, BadInput
from attnviz.limits import PARTIAL_FILE_BYTES, PARTIALS, SHARDS
from attnviz.sharding import from_hex, rounded, to_hex
from attnviz.version import __version__

if TYPE_CHECKING:
    from attnviz.measures.roles import Example, HeadRoles
    from attnviz.measures.stats import HeadStats

__all__ = [
    "FORMAT",
    "Identity",
    "RolesPartial",
    "StatsPartial",
    "config_digest",
    "from_dict",
    "merge",
    "merge_partials",
    "read",
]

FORMAT = "attnviz-partial/1"
_KINDS = ("stats", "roles")


def config_digest(config: Mapping[str, Any]) -> str:
    """The sha256 of a model's config, keys sorted: the same model reads the same."""
    text = json.dumps(config, sort_keys=True, default=str, ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class Identity:
    """What a partial was computed on; partials merge only when theirs are equal."""

    kind: str  # "stats" (head_stats) or "roles" (head_roles)
    model: str  # the model's name
    config_sha256: str
    options: dict[str, Any]  # the options that change the numbers, JSON values
    input_sha256: str  # of the whole input, every shard's sentences (or examples)
    inputs: int  # sentences (or examples) in the whole input
    version: str = __version__

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "attnviz": self.version,
            "model": {"name": self.model, "config_sha256": self.config_sha256},
            "options": self.options,
            "input": {"sha256": self.input_sha256, "count": self.inputs},
        }

    def mismatch(self, other: Identity) -> str | None:
        """Why `other` does not belong with this one, or None."""
        if other.kind != self.kind:
            return f"one is a {self.kind} partial, the other a {other.kind} partial"
        if other.version != self.version:
            return f"written by attnviz {self.version} and {other.version}: use one version"
        if (other.model, other.config_sha256) != (self.model, self.config_sha256):
            if other.model != self.model:
                return f"computed on model {self.model} and on {other.model}"
            return f"computed on two different models named {self.model} (their configs differ)"
        for name in sorted(set(self.options) | set(other.options)):
            mine, theirs = self.options.get(name), other.options.get(name)
            if mine != theirs:
                return f"run with {name} {json.dumps(mine)} and with {json.dumps(theirs)}"
        if (other.input_sha256, other.inputs) != (self.input_sha256, self.inputs):
            return "run on different inputs (their sha256 differ)"
        return None


@dataclass(frozen=True)
class StatsPartial:
    """One or more slices of `head_stats`: exact sums (units of 2**-1074) and counts."""

    identity: Identity
    shards: tuple[int, ...]  # the slices held, 1-based, sorted
    of: int  # slices the input was cut into
    layers: int
    heads: int
    decoder: bool
    title: str  # the model as the table's title names it
    lang: str
    exclude: tuple[str, ...]
    sums: tuple[int, ...]  # (S, L, H) flattened: exact
    log_t_sum: int  # Σ log T over the queries: exact
    sentences: int
    queries: int
    dropped: int
    firsts: tuple[str | None, ...]  # a decoder's first pieces seen, sorted (None: not special)

    def merged(self, other: StatsPartial) -> StatsPartial:
        firsts = sorted(
            set(self.firsts) | set(other.firsts), key=lambda f: (f is not None, f or "")
        )
        return replace(
            self,
            shards=tuple(sorted(self.shards + other.shards)),
            sums=tuple(a + b for a, b in zip(self.sums, other.sums, strict=True)),
            log_t_sum=self.log_t_sum + other.log_t_sum,
            sentences=self.sentences + other.sentences,
            queries=self.queries + other.queries,
            dropped=self.dropped + other.dropped,
            firsts=tuple(firsts),
        )

    def result(self) -> HeadStats:
        """The head statistics of the whole input: every slice must be here."""
        from attnviz.measures.stats import (
            STATISTICS,
            HeadStats,
            StatsAccumulator,
            decoder_records,
        )

        check_complete(self.shards, self.of)
        shape = (len(STATISTICS), self.layers, self.heads)
        sums = np.array(rounded(self.sums), dtype=np.float64).reshape(shape)  # (S, L, H)
        log_t = rounded([self.log_t_sum])[0]
        totals = StatsAccumulator.from_totals(sums, log_t, self.sentences, self.queries)
        if self.exclude and not self.queries:
            raise BadInput(
                f"{{exclude}} {','.join(self.exclude)} leaves nothing to measure in these "
                "sentences: exclude less, or give longer sentences",
                param="exclude",
            )
        if self.decoder and not self.queries:
            model = self.identity.model
            raise BadInput(
                f"every sentence is one piece long, and {model} is a decoder: a first "
                "token sees only itself, so there is nothing to measure; give longer sentences"
            )
        records = totals.result()
        if self.decoder:
            records = decoder_records(records, totals.uniform_entropy)
        for record in records if self.exclude else ():
            record["excluded"] = list(self.exclude)
        return HeadStats(
            records=records,
            model=self.title,
            layers=self.layers,
            heads=self.heads,
            sentences=self.sentences,
            queries=self.queries,
            dropped=self.dropped,
            first_token=self.firsts[0] if len(self.firsts) == 1 else None,
            lang=self.lang,
            exclude=self.exclude,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            **self.identity.to_dict(),
            "shards": list(self.shards),
            "of": self.of,
            "layers": self.layers,
            "heads": self.heads,
            "decoder": self.decoder,
            "title": self.title,
            "lang": self.lang,
            "exclude": list(self.exclude),
            "sums": to_hex(self.sums),
            "log_t_sum": to_hex([self.log_t_sum])[0],
            "sentences": self.sentences,
            "queries": self.queries,
            "dropped": self.dropped,
            "firsts": list(self.firsts),
        }

    def to_file(self, path: str | os.PathLike[str]) -> None:
        write(self.to_dict(), path)


@dataclass(frozen=True)
class RolesPartial:
    """One or more slices of `head_roles`: each example's (L, H) hits and weights."""

    identity: Identity
    shards: tuple[int, ...]
    of: int
    layers: int
    heads: int
    title: str
    units: str
    exclude: tuple[str, ...]
    source: str  # the labelled file's name ("" for a list)
    lang: str
    top: int
    places: tuple[int, ...]  # each example's place among every example of the input
    examples: tuple[Example, ...]
    hits: np.ndarray  # (E, L, H) bool, in the order of `places`
    weights: np.ndarray  # (E, L, H) float64

    def merged(self, other: RolesPartial) -> RolesPartial:
        return replace(
            self,
            shards=tuple(sorted(self.shards + other.shards)),
            places=self.places + other.places,
            examples=self.examples + other.examples,
            hits=np.concatenate([self.hits, other.hits]),
            weights=np.concatenate([self.weights, other.weights]),
        )

    def result(self) -> HeadRoles:
        """Every head's role over the whole input: every slice must be here."""
        from attnviz.measures.roles import HeadRoles

        check_complete(self.shards, self.of)
        order = np.argsort(np.array(self.places, dtype=np.int64), kind="stable")
        if sorted(self.places) != list(range(self.identity.inputs)):
            raise BadInput("the partials' examples do not cover the input once each")
        return HeadRoles(
            hits=self.hits[order],
            weights=self.weights[order],
            examples=[self.examples[i] for i in order],
            model=self.title,
            units=self.units,
            excluded=self.exclude,
            source=self.source,
            lang=self.lang,
            top=self.top,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            **self.identity.to_dict(),
            "shards": list(self.shards),
            "of": self.of,
            "layers": self.layers,
            "heads": self.heads,
            "title": self.title,
            "units": self.units,
            "exclude": list(self.exclude),
            "source": self.source,
            "lang": self.lang,
            "top": self.top,
            "places": list(self.places),
            "examples": [
                [e.line, e.text, e.source, e.target, list(e.candidates)] for e in self.examples
            ],
            "hits": _b64(np.packbits(self.hits.astype(bool).reshape(-1)).tobytes()),
            "weights": _b64(self.weights.astype("<f8").tobytes()),
        }

    def to_file(self, path: str | os.PathLike[str]) -> None:
        write(self.to_dict(), path)


Partial = StatsPartial | RolesPartial


def check_complete(shards: Sequence[int], of: int) -> None:
    """Refuse, in one line, a merge that lacks a slice."""
    missing = sorted(set(range(1, of + 1)) - set(shards))
    if missing:
        shown = ", ".join(f"{i}/{of}" for i in missing[:5]) + (" …" if len(missing) > 5 else "")
        raise BadInput(f"slice {shown} missing: merge the partials of every slice 1/{of} to "
                       f"{of}/{of}")  # fmt: skip


def merge(partials: Sequence[Partial], names: Sequence[str] | None = None) -> Partial:
    """The partials added up: one line when they do not belong together or a slice is twice.

    `names` (the files') name them in the refusals; by default "partial 1", "partial 2", ...
    """
    if not partials:
        raise BadInput("nothing to merge: give the partial files of every slice")
    names = list(names) if names is not None else [f"partial {n + 1}" for n in range(len(partials))]
    first, total = partials[0], partials[0]
    seen = {s: names[0] for s in first.shards}
    for partial, name in zip(partials[1:], names[1:], strict=True):
        why = first.identity.mismatch(partial.identity)
        if why is None and partial.of != first.of:
            why = f"cut into {first.of} and into {partial.of} slices"
        if why is not None:
            raise BadInput(f"{names[0]} and {name} do not belong together: {why}")
        for s in partial.shards:
            if s in seen:
                raise BadInput(f"slice {s}/{first.of} is given twice ({seen[s]} and {name})")
            seen[s] = name
        total = total.merged(partial)  # type: ignore[arg-type]
    return total


def merge_partials(
    given: Iterable[str | os.PathLike[str] | Partial],
) -> HeadStats | HeadRoles:
    """The result a whole run gives, from the partials of every slice (files or objects)."""
    if isinstance(given, str | bytes | os.PathLike) or not isinstance(given, Iterable):
        raise BadInput("give a list of the partial files (or partials) of every slice, not "
                       f"{type(given).__name__}")  # fmt: skip
    items = list(itertools.islice(given, PARTIALS + 1))
    for item in items:
        if not isinstance(item, str | os.PathLike | StatsPartial | RolesPartial):
            raise BadInput(f"a partial is a file's path or a partial, not {type(item).__name__}")
    if len(items) > PARTIALS:
        raise BadInput(f"{len(items)} partials: at most {PARTIALS} a merge")
    partials = [p if isinstance(p, StatsPartial | RolesPartial) else read(p) for p in items]
    names = [
        os.fspath(p) if not isinstance(p, StatsPartial | RolesPartial) else f"partial {n + 1}"
        for n, p in enumerate(items)
    ]
    return merge(partials, names).result()


# ---------------------------------------------------------------- the file


def write(data: dict[str, Any], path: str | os.PathLike[str]) -> None:
    """Write the JSON whole or not at all (a temporary file renamed over the path)."""
    target = os.fspath(path)
    temporary = f"{target}.{os.getpid()}.part"
    try:
        with open(temporary, "w", encoding="utf-8") as handle:
            json.dump(data, handle, ensure_ascii=False, separators=(",", ":"))
            handle.write("\n")
        os.replace(temporary, target)
    except OSError as exc:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise BadInput(f"cannot write {target}: {exc.strerror or exc}") from None


def read(path: str | os.PathLike[str]) -> Partial:
    """A partial file, checked; one line naming the file and what is wrong."""
    from attnviz.reading import read_bounded

    name = os.fspath(path)
    try:
        data = read_bounded(path, PARTIAL_FILE_BYTES, "partial file")
    except FileNotFoundError:
        raise BadInput(f"cannot read {name}: no such file") from None
    except AttnvizError as exc:
        raise BadInput(f"{name}: {exc}") from None
    except OSError as exc:
        raise BadInput(f"cannot read {name}: {exc.strerror or exc}") from None
    try:
        record = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        raise BadInput(
            f"{name} is not a partial file (not JSON): write it with --partial"
        ) from None
    return from_dict(record, name)


class _Bad(Exception):
    """A partial's field that is not what it must be (the message names it)."""


def _get(record: Mapping[str, Any], key: str, kind: type | tuple[type, ...]) -> Any:
    value = record.get(key)
    if not isinstance(value, kind) or (isinstance(value, bool) and bool not in _kinds(kind)):
        raise _Bad(f"its {key!r} is missing or not a {_named(kind)}")
    return value


def _kinds(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def _named(kind: type | tuple[type, ...]) -> str:
    return " or ".join(k.__name__ for k in _kinds(kind))


def _count(record: Mapping[str, Any], key: str, high: int = 1 << 62) -> int:
    value: int = _get(record, key, int)
    if not 0 <= value <= high:
        raise _Bad(f"its {key!r} is out of range")
    return value


def _strings(value: object, key: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _Bad(f"its {key!r} is not a list of strings")
    return tuple(value)


def from_dict(record: object, name: str = "the partial") -> Partial:
    """A partial from its JSON; one line naming `name` and the first field that is wrong."""
    try:
        return _from_dict(record)
    except (_Bad, BadInput) as exc:
        raise BadInput(f"{name}: {exc}") from None


def _from_dict(record: object) -> Partial:
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        raise _Bad(f"not a partial file of this attnviz (format {FORMAT}): write it with --partial")
    version = _get(record, "attnviz", str)
    if version != __version__:
        raise _Bad(f"written by attnviz {version[:40]}, this is {__version__}: run the shards "
                   "with this version")  # fmt: skip
    kind = _get(record, "kind", str)
    if kind not in _KINDS:
        raise _Bad(f"its kind must be one of {', '.join(_KINDS)}")
    model, given = _get(record, "model", dict), _get(record, "input", dict)
    identity = Identity(
        kind=kind,
        model=_get(model, "name", str),
        config_sha256=_get(model, "config_sha256", str),
        options=_get(record, "options", dict),
        input_sha256=_get(given, "sha256", str),
        inputs=_count(given, "count"),
        version=version,
    )
    of = _count(record, "of", SHARDS[1])
    shards = _get(record, "shards", list)
    if not shards or not all(isinstance(s, int) and not isinstance(s, bool) and 1 <= s <= of
                             for s in shards) or len(set(shards)) != len(shards):  # fmt: skip
        raise _Bad(f"its 'shards' must be distinct slices from 1 to {of}")
    layers, heads = _count(record, "layers", 1 << 12), _count(record, "heads", 1 << 12)
    if not layers or not heads:
        raise _Bad("it has no layers or no heads")
    common = {
        "identity": identity,
        "shards": tuple(sorted(shards)),
        "of": of,
        "layers": layers,
        "heads": heads,
        "title": _get(record, "title", str),
        "lang": _get(record, "lang", str),
        "exclude": _strings(record.get("exclude"), "exclude"),
    }
    if kind == "stats":
        return _stats(record, common)
    return _roles(record, common)


def _stats(record: Mapping[str, Any], common: dict[str, Any]) -> StatsPartial:
    from attnviz.measures.stats import STATISTICS

    size = len(STATISTICS) * common["layers"] * common["heads"]
    try:
        sums = from_hex(record.get("sums"), size, "its 'sums'")
        (log_t,) = from_hex([record.get("log_t_sum")], 1, "its 'log_t_sum'")
    except BadInput as exc:
        raise _Bad(str(exc)) from None
    firsts = record.get("firsts")
    if not isinstance(firsts, list) or not all(f is None or isinstance(f, str) for f in firsts):
        raise _Bad("its 'firsts' is not a list of strings")
    return StatsPartial(
        **common,
        decoder=_get(record, "decoder", bool),
        sums=tuple(sums),
        log_t_sum=log_t,
        sentences=_count(record, "sentences"),
        queries=_count(record, "queries"),
        dropped=_count(record, "dropped"),
        firsts=tuple(firsts),
    )


def _roles(record: Mapping[str, Any], common: dict[str, Any]) -> RolesPartial:
    from attnviz.measures.roles import Example

    places = _get(record, "places", list)
    if not all(isinstance(p, int) and not isinstance(p, bool) and 0 <= p < (1 << 40)
               for p in places):  # fmt: skip
        raise _Bad("its 'places' must be whole numbers")
    rows = _get(record, "examples", list)
    if len(rows) != len(places):
        raise _Bad("it has not one example a place")
    examples = []
    for row in rows:
        if not (isinstance(row, list) and len(row) == 5 and isinstance(row[1], str)
                and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0
                        for v in (row[0], row[2], row[3], *_listed(row[4])))):  # fmt: skip
            raise _Bad("an example is not [line, text, from, to, [candidates]]")
        examples.append(Example(row[0], row[1], row[2], row[3], tuple(row[4])))
    E, L, H = len(places), common["layers"], common["heads"]
    hits = _bytes(record, "hits", (E * L * H + 7) // 8)
    weights = _bytes(record, "weights", E * L * H * 8)
    unpacked = np.unpackbits(np.frombuffer(hits, dtype=np.uint8))[: E * L * H]
    values = np.frombuffer(weights, dtype="<f8").astype(np.float64).reshape(E, L, H)
    if not np.isfinite(values).all():
        raise _Bad("a weight in its 'weights' is not a finite number")
    return RolesPartial(
        **common,
        units=_get(record, "units", str),
        source=_get(record, "source", str),
        top=_count(record, "top"),
        places=tuple(places),
        examples=tuple(examples),
        hits=unpacked.astype(bool).reshape(E, L, H),
        weights=values,
    )


def _listed(value: object) -> list[Any]:
    return value if isinstance(value, list) else [None]


def _bytes(record: Mapping[str, Any], key: str, size: int) -> bytes:
    text = _get(record, key, str)
    try:
        data = base64.b64decode(text, validate=True)
    except ValueError:
        raise _Bad(f"its {key!r} is not base64") from None
    if len(data) != size:
        raise _Bad(f"its {key!r} holds {len(data)} bytes, expected {size}")
    return data


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")
