"""The GPU computes what the CPU computes: a short snake gait and a vine rollout on "cpu" and on
"cuda", compared. Needs a CUDA device (skipped without one; on CI there is none).

The two devices run the same kernels in float32 but not bit for bit (the GPU fuses multiply-adds
and has its own maths library), so their states part by round-off, which the Newton iterations and
the contacts' complementarity then carry along. Tolerances, for runs this short: the snakes' centres
of mass within 1e-4 m and their link curvatures within 1e-2 1/m (about 1e-3 of the gait's
curvature), the vines' body centres within 1e-4 m (a thousandth of a link) and their angles within
1e-3 rad. Measured on an H100 (experiments/results/gpu.md). Each test records the deviations it
measured as properties of its JUnit report (``pytest --junitxml``; tools/gpu/session.sh writes one).
"""

import numpy as np
import pytest
import warp as wp

from softsnake.robots.snake.simulation import SnakeSimulation
from softsnake.robots.vine.benchmarks import spread_batch_specs
from softsnake.robots.vine.scene import load_scene
from softsnake.robots.vine.simulation import VineBatch, rollout

pytestmark = pytest.mark.skipif(not wp.is_cuda_available(), reason="needs a CUDA device")


def snake_gait(device):
    return SnakeSimulation(2, resolution="coarse", device=device, seconds=0.25).run(progress=False)


def vine_rollout(device):
    scene = load_scene("jitosho_cluttered_1")
    specs = spread_batch_specs(scene, 15, 4, np.random.default_rng(0))
    return rollout(VineBatch(specs, device=device), 60, scene.sim.dt)


def test_snake_gait_agrees_on_cpu_and_cuda(record_property):
    cpu, cuda = snake_gait("cpu"), snake_gait("cuda")
    com_error = np.abs(cpu.com - cuda.com).max()
    curvature_error = np.abs(cpu.curvature - cuda.curvature).max()
    record_property("com_error_m", float(com_error))
    record_property("curvature_error_per_m", float(curvature_error))
    assert com_error < 1e-4 and curvature_error < 1e-2, (com_error, curvature_error)
    # The gait moved the snakes: the comparison is not of two resting states.
    assert np.abs(cpu.curvature[-1]).max() > 1.0


def test_vine_rollout_agrees_on_cpu_and_cuda(record_property):
    cpu, cuda = vine_rollout("cpu"), vine_rollout("cuda")
    position_error = np.abs(cpu.poses[..., :2] - cuda.poses[..., :2]).max()
    angle_error = np.abs(np.angle(np.exp(1j * (cpu.poses[..., 2] - cuda.poses[..., 2])))).max()
    record_property("position_error_m", float(position_error))
    record_property("angle_error_rad", float(angle_error))
    assert position_error < 1e-4 and angle_error < 1e-3, (position_error, angle_error)
    assert np.abs(cpu.lengths[-1] - cpu.lengths[0]).max() > 1e-3  # the vines grew
