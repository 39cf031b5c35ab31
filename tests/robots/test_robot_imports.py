"""The robot packages import on their own: neither robot imports the other, and neither needs
usd-core (pxr) until a USD file is written."""

import json
import subprocess
import sys

import pytest


def _modules_after_import(module):
    """Names of the modules loaded by a fresh interpreter after ``import module``."""
    code = f"import json, sys, {module}; print(json.dumps(sorted(sys.modules)))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    return set(json.loads(result.stdout.splitlines()[-1]))


@pytest.mark.parametrize("module, other_robot", [
    ("softsnake.robots.snake.simulation", "softsnake.robots.vine"),
    ("softsnake.robots.vine.simulation", "softsnake.robots.snake"),
    ("softsnake.robots.vine.workers", "softsnake.robots.snake"),
    ("softsnake.robots.snake.workers", "softsnake.robots.vine"),
])
def test_robot_imports_without_the_other_robot_or_usd(module, other_robot):
    loaded = _modules_after_import(module)
    assert "pxr" not in loaded
    assert not any(name == other_robot or name.startswith(f"{other_robot}.") for name in loaded)
    assert not any(name.startswith("softsnake.cli") for name in loaded)
