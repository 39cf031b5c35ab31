"""The README's Python examples run as a user pastes them (a user tries the README first)."""

import pathlib
import re

import pytest

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"
EXAMPLES = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)


def test_readme_has_its_examples():
    assert len(EXAMPLES) == 2, "the README's Python examples: the engine and the gradients"


@pytest.mark.parametrize("code", EXAMPLES, ids=["engine", "gradients"][:len(EXAMPLES)])
def test_readme_example_runs(code, capsys):
    namespace = {"__name__": "__readme__"}
    exec(compile(code, str(README), "exec"), namespace)  # noqa: S102 - the README's own code
    if "positions" in namespace:  # the engine example: 64 worlds, each as its world 0 would be
        import numpy as np

        model = namespace["model"]
        assert model.world_count == 64 and np.isfinite(namespace["positions"]).all()
        assert namespace["energy"].shape == (64,) and (namespace["energy"] > 0.0).all()
    else:  # the gradients example prints two finite numbers
        import math

        printed = capsys.readouterr().out.split()
        assert len(printed) == 2 and all(math.isfinite(float(value)) for value in printed)
