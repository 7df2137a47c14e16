"""The family registry: no code outside attnviz/model/families/ branches on a family's name,
and every registered family declares the facts the shared code reads."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

from attnviz.measures.decoder_parts import DECODER_FACTS
from attnviz.model.families import DECODERS, ENCODER_DECODERS, FAMILIES
from attnviz.model.gguf.families import ARCHITECTURES

ROOT = Path(__file__).resolve().parents[2] / "attnviz"
FAMILY_FOLDER = ROOT / "model" / "families"
# Every model type attnviz computes, and the layout names a decoder config carries.
NAMES = {*FAMILIES, *DECODERS, *ENCODER_DECODERS, "gemma"}
# Names that a family branch compares: a model type, a config's kind, an architecture.
SUBJECTS = ("model_type", "kind", "arch", "family")
# Files whose family branches have not yet moved into attnviz/model/families/ (issue 30):
# each must still hold one (so that the list only shrinks); no other file may. None is left.
PENDING: set[str] = set()


def _literals(node: ast.expr) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return [v for e in node.elts for v in _literals(e)]
    return []


def _subject(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def family_branches(path: Path) -> list[str]:
    """Each comparison in `path` of a model type, kind or family to a family's name."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        subjects = [s for s in sides if any(w in _subject(s) for w in SUBJECTS)]
        named = [v for s in sides for v in _literals(s) if v in NAMES]
        if subjects and named:
            found.append(f"line {node.lineno}: {_subject(subjects[0])} vs {named}")
    return found


@functools.cache  # both tests read the same walk of attnviz/ (read once, not twice)
def _outside() -> dict[str, list[str]]:
    return {
        str(path.relative_to(ROOT)): family_branches(path)
        for path in sorted(ROOT.rglob("*.py"))
        if FAMILY_FOLDER not in path.parents
    }


def test_no_code_outside_the_families_branches_on_a_family_name() -> None:
    branches = {name: found for name, found in _outside().items() if found}
    assert set(branches) - PENDING == set(), {k: branches[k] for k in set(branches) - PENDING}


def test_the_pending_list_only_shrinks() -> None:
    done = sorted(name for name, found in _outside().items() if name in PENDING and not found)
    assert done == [], f"no family branch left in {done}: take them off PENDING"


def test_the_check_sees_a_branch(tmp_path: Path) -> None:
    tree = tmp_path / "probe.py"
    tree.write_text('if cfg.kind == "gpt2" or model_type in ("llama", "x"):\n    pass\n')
    assert len(family_branches(tree)) == 2


@pytest.mark.parametrize("model_type", sorted(DECODERS))
def test_every_decoder_declares_its_facts(model_type: str) -> None:
    family = DECODERS[model_type]
    assert family.name and family.prefix and family.names
    assert any(ours.startswith("tokens.") for _, ours in family.names)
    assert any(".attention.q_proj." in ours for _, ours in family.names)
    assert family.input_norm in {ours.split(".")[2] for _, ours in family.names if "{i}" in ours}
    if family.output_norm is not None:
        assert any(f".{family.output_norm}." in ours for _, ours in family.names)
    assert DECODER_FACTS[model_type].family == family.name


@pytest.mark.parametrize("model_type", sorted(set(ARCHITECTURES.values())))
def test_every_gguf_family_names_its_blocks(model_type: str) -> None:
    family = DECODERS[model_type]
    assert family.gguf_block and family.class_name.endswith(("ForCausalLM", "LMHeadModel"))
    assert {"attn_norm", "attn_output", "ffn_down"} <= set(family.gguf_block)


@pytest.mark.parametrize("model_type", sorted(FAMILIES))
def test_every_encoder_declares_its_facts(model_type: str) -> None:
    family = FAMILIES[model_type]
    assert family.name and family.prefix.endswith(".") and family.names
    assert any(".attention.q_proj." in ours for _, ours in family.names)


@pytest.mark.parametrize("model_type", sorted(ENCODER_DECODERS))
def test_every_encoder_decoder_declares_its_facts(model_type: str) -> None:
    from attnviz.model.seq2seq_config import SEQ2SEQ_CLASSES, SEQ2SEQ_TYPES, Seq2seqShape

    family = ENCODER_DECODERS[model_type]
    sizes = {
        "encoder_layers",
        "decoder_layers",
        "encoder_heads",
        "decoder_heads",
        "hidden",
        "vocab",
    }
    assert set(family.keys) == sizes and sizes <= set(Seq2seqShape.__dataclass_fields__)
    assert family.class_name.endswith(("ForConditionalGeneration", "MTModel"))
    assert SEQ2SEQ_TYPES[model_type] == family.name
    assert SEQ2SEQ_CLASSES[model_type] == family.class_name


def test_the_engines_share_the_registry_s_lists() -> None:
    from attnviz.model import foreign

    assert set(DECODERS) <= set(foreign.DECODER_TYPES)
    assert set(ENCODER_DECODERS) <= set(foreign.ENCODER_DECODER_TYPES)
    for types in (foreign.DECODER_TYPES, foreign.ENCODER_DECODER_TYPES):
        assert len(set(types)) == len(types)


def _family_imports(path: Path) -> set[str]:
    """The family modules `path` imports, at any level (kinds and reader excepted)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    prefix = "attnviz.model.families."
    shared = {prefix + "kinds", prefix + "reader"}
    return {m for m in found if m.startswith(prefix) and m not in shared}


@pytest.mark.parametrize("model_type", sorted(DECODERS))
def test_a_decoder_family_builds_on_its_parents_only(model_type: str) -> None:
    """A family's file imports only the files of the families its reader extends: Gemma
    builds on Llama, and Llama never names Gemma."""
    reader = DECODERS[model_type].reader
    module = reader.__module__
    parents = {cls.__module__ for cls in reader.__mro__} - {module}
    path = ROOT.parent / (module.replace(".", "/") + ".py")
    assert _family_imports(path) <= parents, (module, parents)


def test_the_readers_extend_their_parents() -> None:
    from attnviz.model.families.gemma2 import Gemma2Reader
    from attnviz.model.families.llama import LlamaReader
    from attnviz.model.families.qwen2 import Qwen2Reader

    assert issubclass(DECODERS["gemma3_text"].reader, Gemma2Reader)
    assert issubclass(DECODERS["qwen3"].reader, Qwen2Reader)
    for kind in ("mistral", "qwen2", "phi3", "gemma2"):
        assert DECODERS[kind].reader.__mro__[1] is LlamaReader, kind
