"""A seeded fuzzer in the suite (softsnake.fuzzing): random small models with bad input, built,
finalized and stepped in worker processes, both stopping at the first error and going on after
caught errors. Every case must end in a finite state or in a project error naming the item: no
crash, hang, other exception or silent non-finite state. ``experiments/fuzz.py`` runs many more.
"""

import pytest

from softsnake.fuzzing import FAILURES, FAULT_VARIABLE, outcome_table, run_batch, run_cases

SEED = 11
CASES = 300
"""Cases per mode: about 4 s per mode on two idle cores (the first run of a fresh checkout also loads the kernels)."""


@pytest.mark.parametrize("mode", ["stop", "continue"])
def test_fuzz_cases_end_finite_or_in_a_project_error(mode):
    results = run_cases(SEED, mode, range(CASES), workers=2, batch=CASES // 2)
    failures = [f"case {r['case']} ({r['stage']}, {r['kind']}): {r['message']}" for r in results
                if r["kind"] in FAILURES]
    assert not failures, "\n".join(failures)
    table = outcome_table(results)
    # The cases reach every stage, and some run to the end.
    assert table["step"]["finite"] > 0 and table["finalize"]["project error"] > 0
    assert table["step"]["project error"] > 0
    if mode == "stop":
        assert table["build"]["project error"] > 0
    else:
        assert sum(r["caught"] for r in results) > 0 and not table["build"]


def test_crashes_and_hangs_are_caught_and_named(monkeypatch):
    """A worker that dies or stalls mid-batch: the case it was running is named (crash, hang), and the
    cases after it still run."""
    monkeypatch.setenv(FAULT_VARIABLE, "crash:1,hang:3")
    results = run_batch(SEED, "stop", [0, 1, 2, 3, 4], timeout=3.0, startup=300.0)
    assert [r["case"] for r in results] == [0, 1, 2, 3, 4]
    assert [r["kind"] for r in results][1] == "crash" and results[3]["kind"] == "hang"
    assert all(r["kind"] not in FAILURES for k, r in enumerate(results) if k not in (1, 3))
