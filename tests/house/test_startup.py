"""Start-up: what `attnviz --help` and light imports leave out (speed is measured by
benchmarks/bench.py, never timed here)."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest


@pytest.mark.slow  # subprocess
def test_help_is_rich_without_markdown_or_tracebacks() -> None:
    probe = (
        "import sys\n"
        "sys.argv = ['attnviz', '--help']\n"
        "from attnviz.cli import main\n"
        "try:\n"
        "    main()\n"
        "except SystemExit:\n"
        "    pass\n"
        "left_out = ('rich.markdown', 'markdown_it', 'pygments', 'rich.traceback')\n"
        "assert not [m for m in left_out if m in sys.modules], sorted(sys.modules)\n"
        "import typer.rich_utils as r\n"
        "from rich.markdown import Markdown\n"
        "from rich.traceback import Traceback\n"
        "assert type(r.Markdown('*x*')) is Markdown  # the stand-in gives the real thing\n"
        "assert isinstance(Markdown('*y*'), r.Markdown)\n"
        "assert r.Traceback.from_exception == Traceback.from_exception\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "100", "FORCE_COLOR": "1"},
    )
    assert result.returncode == 0, result.stderr
    assert "Commands" in result.stdout and "show" in result.stdout
    assert "\x1b[1m" in result.stdout  # bold, as rich markup renders it


@pytest.mark.slow  # subprocess
def test_importing_the_weight_loader_compiles_no_renaming_rules() -> None:
    probe = (
        "import attnviz.model.weights as w\n"
        "assert w._to_ours.cache_info().currsize == 0\n"
        "assert w.hf_name('layers.3.attention.out_proj.weight').startswith('encoder.layer.3.')\n"
    )
    subprocess.run([sys.executable, "-c", probe], check=True)


def test_only_the_command_that_runs_is_built_and_the_help_lists_them_all(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from typer.testing import CliRunner

    import attnviz.cli.lazy as lazy
    from attnviz.cli import app

    built: list[str] = []
    real = lazy.get_command_from_info

    def spy(info: Any, **kwargs: Any) -> Any:
        built.append(info.callback.__name__)
        return real(info, **kwargs)

    monkeypatch.setattr(lazy, "get_command_from_info", spy)
    runner = CliRunner()
    assert runner.invoke(app, ["info", "--help"]).exit_code == 0
    assert built == ["info"]
    built.clear()
    listing = runner.invoke(app, ["--help"], env={"COLUMNS": "120"})
    assert listing.exit_code == 0 and built == []
    catalogue = sys.modules["attnviz.cli.running"].catalogue
    names = [info.name or info.callback.__name__ for info in catalogue.registered_commands]
    assert len(names) == 17 and {"compare-measures", "models", "explore", "ablate"} <= set(names)
    for name in [*names, "cache"]:
        assert f" {name} " in listing.stdout, name
    typo = runner.invoke(app, ["shw"])
    assert typo.exit_code == 2 and "Did you mean 'show'?" in typo.output


@pytest.mark.slow  # subprocess
@pytest.mark.parametrize("argv", [["info"], ["tokens", "O trem estava cheio."]])
def test_tokens_and_info_import_neither_numpy_nor_torch(argv: list[str]) -> None:
    probe = (
        "import sys\n"
        f"sys.argv = ['attnviz', *{argv!r}]\n"
        "from attnviz.cli import main\n"
        "try:\n"
        "    main()\n"
        "except SystemExit as exit:\n"
        "    assert not exit.code, exit.code\n"
        "heavy = [m for m in ('numpy', 'torch', 'safetensors') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "100"},
    )
    assert result.returncode == 0, result.stderr
    assert "pieces" in result.stdout or "parameters" in result.stdout
