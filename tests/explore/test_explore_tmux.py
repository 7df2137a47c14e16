"""The real `attnviz explore` in tmux at 80 × 24: it opens on layer 0, head 0, the keys move
it, `/` reads a new text, and `q` exits 0, giving the screen back."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SENTENCE = "John thought: the train was full, but he found a free seat."

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux"),
]


class Pane:
    """One tmux server of its own (its socket in `folder`), one 80 × 24 window."""

    def __init__(self, folder: Path) -> None:
        self.socket = str(folder / "tmux.sock")

    def tmux(self, *args: str) -> str:
        done = subprocess.run(["tmux", "-S", self.socket, *args], capture_output=True,
                              text=True, check=True, timeout=30)  # fmt: skip
        return done.stdout

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "t")

    def wait_for(self, text: str, seconds: float = 60) -> str:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            shown = self.screen()
            if text in shown:
                return shown
            time.sleep(0.2)
        raise AssertionError(f"{text!r} never shown; the screen:\n{self.screen()}")


def test_it_opens_moves_and_quits_in_tmux(tmp_path: Path) -> None:
    pane = Pane(tmp_path)
    status = tmp_path / "status"
    command = (f"cd {shlex.quote(str(tmp_path))} && echo before; "
               f"{shlex.quote(sys.executable)} -m attnviz explore {shlex.quote(SENTENCE)}; "
               f"echo $? > {shlex.quote(str(status))}; sleep 60")  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TERM": "xterm-256color"}
    window = ["new-session", "-d", "-s", "t", "-x", "80", "-y", "24", command]
    subprocess.run(["tmux", "-S", pane.socket, "-f", "/dev/null", *window], env=env, check=True,
                   timeout=30)  # fmt: skip
    try:
        started = time.monotonic()
        first = pane.wait_for("all-MiniLM-L6-v2 · layer 0 · head 0")
        opened = time.monotonic() - started
        assert "keys of [CLS]" in first
        assert all(len(line) <= 80 for line in first.splitlines())
        pane.tmux("send-keys", "-t", "t", "Right")
        pane.wait_for("layer 0 · head 1")
        pane.tmux("send-keys", "-t", "t", "Down")
        pane.wait_for("layer 1 · head 1")
        pane.tmux("send-keys", "-t", "t", "Tab")
        pane.wait_for("keys of John")
        pane.tmux("send-keys", "-t", "t", "/")
        pane.wait_for("A new text")
        pane.tmux("send-keys", "-t", "t", "-l", "The cat sat.")
        pane.tmux("send-keys", "-t", "t", "Enter")
        new = pane.wait_for("1 The")  # read in the background, drawn from its first query
        assert "keys of [CLS]" in new and "John" not in new
        pane.tmux("send-keys", "-t", "t", "q")
        end = time.monotonic() + 30
        while not status.exists() and time.monotonic() < end:
            time.sleep(0.2)
        assert status.read_text().strip() == "0"
        after = pane.screen()
        assert "before" in after and "keys of" not in after  # the shell's screen, given back
        print(f"opened in {opened:.1f} s")
    finally:
        pane.tmux("kill-server")
