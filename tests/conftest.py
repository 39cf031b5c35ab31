"""Shared test set-up: Warp's output off, and the devices the engine tests run on.

A test that takes a ``device`` argument runs once per device in ``SOFTSNAKE_TEST_DEVICES``
(comma-separated Warp device names; default "cpu"): ``SOFTSNAKE_TEST_DEVICES=cpu,cuda pytest``
runs the same tests, with the same tolerances, on both; every other test runs on the first.
"""

import os

import warp as wp

from softsnake.console import quiet_warp

quiet_warp()

DEVICES = [name.strip() for name in os.environ.get("SOFTSNAKE_TEST_DEVICES", "cpu").split(",") if name.strip()]
"""The Warp devices of this test run."""

# Every other test builds its models on Warp's default device (``ModelBuilder.finalize()``): the
# first device of the run, so that SOFTSNAKE_TEST_DEVICES=cuda runs the whole suite on the GPU. The
# golden states and the CPU's timing and worker-process tests name "cpu" themselves.
wp.set_device(DEVICES[0])


def pytest_generate_tests(metafunc):
    if "device" in metafunc.fixturenames:
        metafunc.parametrize("device", DEVICES)
