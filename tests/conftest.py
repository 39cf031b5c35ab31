"""Shared test set-up: Warp's output off, and the devices the engine tests run on.

A test that takes a ``device`` argument runs once per device in ``SOFTSNAKE_TEST_DEVICES``
(comma-separated Warp device names; default "cpu"): ``SOFTSNAKE_TEST_DEVICES=cpu,cuda pytest``
runs the same tests, with the same tolerances, on both.
"""

import os

from softsnake.console import quiet_warp

quiet_warp()

DEVICES = [name.strip() for name in os.environ.get("SOFTSNAKE_TEST_DEVICES", "cpu").split(",") if name.strip()]
"""The Warp devices of this test run."""


def pytest_generate_tests(metafunc):
    if "device" in metafunc.fixturenames:
        metafunc.parametrize("device", DEVICES)
