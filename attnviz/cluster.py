"""Corpus work on a running Dask cluster: one slice a worker, the partials merged here.

`head_stats_on_dask` and `head_roles_on_dask` connect to a Dask scheduler (`dask.distributed`,
the `attnviz[dask]` extra; imported only here, only when called), cut the input into as many
slices as the cluster has workers and pin slice i to worker i, so each worker loads the model
once and runs one `partial_head_stats` (or `partial_head_roles`). The workers send back the
partials as JSON-ready dicts, checked here as a partial file is (`attnviz.partials`), and
their merge is what a single process returns, bit for bit.

Every worker must be able to import attnviz and find the model by the same name or path.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attnviz.errors import AttnvizError, BadInput

if TYPE_CHECKING:
    from attnviz.measures.roles import HeadRoles
    from attnviz.measures.stats import HeadStats

__all__ = ["head_roles_on_dask", "head_stats_on_dask", "roles_slice", "stats_slice"]

CONNECT_SECONDS = 30  # how long to wait for the scheduler to answer


def head_stats_on_dask(texts: Iterable[str], address: str, **options: Any) -> HeadStats:
    """`attnviz.head_stats(texts, **options)` computed on the Dask cluster at `address`
    ("tcp://host:8786"), a slice a worker; the result equals a single process's."""
    from attnviz.arguments import check_text

    sentences = [check_text(t, "a sentence") for t in _listed(texts)]
    return _run(address, stats_slice, sentences, options)  # type: ignore[return-value]


def head_roles_on_dask(examples: str | os.PathLike[str], address: str, **options: Any) -> HeadRoles:
    """`attnviz.head_roles(examples, **options)` on the Dask cluster at `address`: the
    labelled file is read here and sent to every worker (under its own name)."""
    from attnviz.roles import is_tsv, read_text, shipped_set

    path = shipped_set(Path(examples))
    payload = (path.name, read_text(path), is_tsv(path))
    return _run(address, roles_slice, payload, options)  # type: ignore[return-value]


def stats_slice(
    texts: list[str], shard: tuple[int, int], options: dict[str, Any]
) -> dict[str, Any]:
    """On a worker: one slice's partial statistics, as the dict a partial file holds."""
    from attnviz.corpus import partial_head_stats

    try:
        return partial_head_stats(texts, shard=shard, **options).to_dict()
    except AttnvizError as exc:
        return _failure(exc)


def roles_slice(
    payload: tuple[str, str, bool], shard: tuple[int, int], options: dict[str, Any]
) -> dict[str, Any]:
    """On a worker: one slice's partial roles; the file written under its name in a
    temporary folder, so the result names it as a single run does."""
    from attnviz.roles import partial_head_roles

    name, text, _ = payload
    with tempfile.TemporaryDirectory(prefix="attnviz-") as folder:
        path = Path(folder) / Path(name).name
        path.write_text(text, encoding="utf-8")
        try:
            return partial_head_roles(path, shard=shard, **options).to_dict()
        except AttnvizError as exc:
            return _failure(exc)


def _failure(exc: AttnvizError) -> dict[str, Any]:
    """A worker's refusal, as data (an exception's own pickling loses its fields)."""
    problems = getattr(exc, "problems", None)
    return {"error": str(exc), "problems": problems, "exit_code": exc.exit_code}


def _listed(texts: Iterable[str]) -> list[str]:
    if isinstance(texts, str) or not isinstance(texts, Iterable):
        raise BadInput("texts must be a list (or any iterable) of sentences")
    return list(texts)


def _run(address: str, task: Any, payload: Any, options: dict[str, Any]) -> HeadStats | HeadRoles:
    from attnviz.partials import from_dict, merge
    from attnviz.roles import BadExamples

    if "shard" in options or "progress" in options:
        raise BadInput("on a Dask cluster the slices are the workers, and no progress is shown: "
                       "drop shard and progress")  # fmt: skip
    client = connect(address)
    with client:
        workers = sorted(client.scheduler_info()["workers"])
        if not workers:
            raise BadInput(f"the Dask cluster at {address} has no workers: start some")
        n = len(workers)
        futures = [
            client.submit(
                task,
                payload,
                (i + 1, n),
                options,
                workers=[worker],
                pure=False,
                allow_other_workers=False,
            )
            for i, worker in enumerate(workers)
        ]
        answers = client.gather(futures)
    partials = []
    for answer in answers:
        if "error" in answer:
            if answer.get("problems"):
                raise BadExamples(answer["problems"])
            raise BadInput(str(answer["error"]))
        partials.append(from_dict(answer))
    names = [f"worker {w}" for w in workers]
    return merge(partials, names).result()


def connect(address: str) -> Any:
    """A `dask.distributed.Client` of the scheduler at `address`; one line when dask is
    missing or the scheduler does not answer."""
    if not isinstance(address, str) or not address.strip():
        raise BadInput("{dask} must be a scheduler's address, e.g. tcp://127.0.0.1:8786",
                       param="dask")  # fmt: skip
    try:
        from dask.distributed import Client
    except ImportError:
        raise BadInput("{dask} needs dask.distributed: pip install 'attnviz[dask]'",
                       param="dask") from None  # fmt: skip
    try:
        return Client(address, timeout=CONNECT_SECONDS, set_as_default=False)
    except (OSError, TimeoutError, ValueError) as exc:
        raise BadInput(
            f"cannot reach the Dask scheduler at {address}: {exc}", param="dask"
        ) from None
