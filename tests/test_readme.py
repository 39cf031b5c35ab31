"""The README's Python examples run as a user pastes them (a user tries the README first)."""

import pathlib
import re

import pytest

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"
EXAMPLES = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)


def test_readme_has_its_examples():
    assert len(EXAMPLES) == 4, ("the README's Python examples: the engine, the snake from Python, the gradients and "
                                "the gait's gradient")


@pytest.mark.parametrize("code", EXAMPLES, ids=["engine", "snake", "gradients", "gait_gradient"][:len(EXAMPLES)])
def test_readme_example_runs(code, capsys):
    namespace = {"__name__": "__readme__"}
    exec(compile(code, str(README), "exec"), namespace)  # noqa: S102 - the README's own code
    if "positions" in namespace:  # the engine example: 64 worlds, each as its world 0 would be
        import numpy as np

        model = namespace["model"]
        assert model.world_count == 64 and np.isfinite(namespace["positions"]).all()
        assert namespace["energy"].shape == (64,) and (namespace["energy"] > 0.0).all()
    elif "sim" in namespace:  # the snake stepped frame by frame to its end, its offsets steering
        import numpy as np

        sim = namespace["sim"]
        assert sim.frames_done == sim.frame_count == 60
        seen = sim.observe()
        assert np.isfinite(seen.com).all() and seen.time == pytest.approx(0.5)
        assert np.all(np.abs(namespace["offset"]) <= 0.5)
    else:  # the gradients examples print two finite numbers
        import math

        printed = capsys.readouterr().out.split()
        assert len(printed) == 2 and all(math.isfinite(float(value)) for value in printed)
