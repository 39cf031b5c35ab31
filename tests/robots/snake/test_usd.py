"""A short multi-snake gait run streamed to USD and read back with pxr; a diverging snake is named."""

import numpy as np
import pytest
from PIL import Image
from pxr import Usd, UsdGeom

from softsnake.robots.snake.config import load_snake_config
from softsnake.errors import SimulationError
from softsnake.robots.snake.simulation import SnakeSimulation


FRAMES = 6
DT = 1.0 / 120.0


@pytest.fixture(scope="module")
def coarse():
    return load_snake_config(resolution="coarse")


@pytest.fixture(scope="module")
def recorded(coarse, tmp_path_factory):
    """Two coarse snakes, six frames, every frame written to a .usda file."""
    path = tmp_path_factory.mktemp("usd") / "gait.usda"
    simulation = SnakeSimulation(2, config=coarse, seconds=FRAMES * DT, dt=DT)
    trajectories = simulation.run(usd_path=path, usd_fps=1.0 / DT, progress=False)
    return path, simulation, trajectories


def test_usd_scene_prims(recorded, coarse):
    """Ground, and per snake four link meshes, five module boxes and ten wheel cylinders."""
    path, simulation, _ = recorded
    stage = Usd.Stage.Open(str(path))
    assert stage.GetPrimAtPath("/World/ground").IsA(UsdGeom.Mesh)
    for s in range(2):
        root = f"/World/snake_{s:03d}"
        for i in range(coarse.link_count):
            assert stage.GetPrimAtPath(f"{root}/link_{i}").IsA(UsdGeom.Mesh)
        for k in range(coarse.module_count):
            assert stage.GetPrimAtPath(f"{root}/module_{k}").IsA(UsdGeom.Cube)
            for side in ("left", "right"):
                assert stage.GetPrimAtPath(f"{root}/wheel_{k}_{side}").IsA(UsdGeom.Cylinder)
    assert UsdGeom.GetStageUpAxis(stage) == UsdGeom.Tokens.z


def test_usd_time_samples_and_points(recorded):
    """One sample per frame and t = 0; a link's points at the last sample are that link's particle
    positions at the end of the run (float32 round-off, 1e-6 m); the modules are posed."""
    path, simulation, trajectories = recorded
    stage = Usd.Stage.Open(str(path))
    link = simulation.snake.links[2]
    mesh = UsdGeom.Mesh(stage.GetPrimAtPath("/World/snake_001/link_2"))
    times = mesh.GetPointsAttr().GetTimeSamples()
    assert len(times) == FRAMES + 1 and times[0] == 0.0 and times[-1] == FRAMES
    points = np.asarray(mesh.GetPointsAttr().Get(times[-1]))
    assert points.shape == (link.particle_count, 3)
    # USD shows the scene: snake 1 at its place in the row (the engine simulates it in its own frame).
    particles = simulation.model.scene_particle_q(simulation.state)[simulation.model.world_slice("particle", 1)]
    np.testing.assert_allclose(points, particles[link.particles], atol=1e-6)
    module = UsdGeom.Xformable(stage.GetPrimAtPath("/World/snake_001/module_0"))
    assert len(module.GetXformOpOrderAttr().Get()) == 3
    translate = module.GetOrderedXformOps()[0].GetAttr()
    assert len(translate.GetTimeSamples()) == FRAMES + 1
    body = simulation.model.world_slice("body", 1).start + simulation.snake.module_bodies[0]
    np.testing.assert_allclose(np.asarray(translate.Get(times[-1])),
                               simulation.model.scene_body_q(simulation.state)[body, :3], atol=1e-6)
    assert not path.with_name("gait.partial.usda").exists()


def test_usd_scene_and_animation_picture_the_first_snakes(coarse, tmp_path):
    """``usd_snakes`` / the animation's ``snakes``: the first N snakes are pictured (a GPU batch of a thousand
    would take gigabytes), every snake is still simulated and recorded in the trajectories."""
    from softsnake.robots.snake.animation import SnakeAnimation

    path = tmp_path / "gait.usda"
    simulation = SnakeSimulation(3, config=coarse, seconds=2 * DT, dt=DT)
    animation = SnakeAnimation(simulation, 1, snakes=2)
    trajectories = simulation.run(usd_path=path, usd_fps=1.0 / DT, usd_snakes=1, progress=False,
                                  on_frame=animation.record)
    stage = Usd.Stage.Open(str(path))
    assert stage.GetPrimAtPath("/World/snake_000/link_0").IsA(UsdGeom.Mesh)
    assert not stage.GetPrimAtPath("/World/snake_001").IsValid()
    assert animation.snake_count == 2 and animation.frame_count == 3
    assert len(animation.parts(0)) == 2 * (1 + 3 * coarse.module_count)  # links, modules, two wheels each
    assert trajectories.com.shape == (3, 3, 3)
    # The close-up follows the middle pictured snake (snake 0 of two) at its centre of mass.
    assert animation.followed == 0
    np.testing.assert_allclose(animation.centers, trajectories.com[:, 0], atol=1e-6)
    with Image.open(animation.write(tmp_path / "gait.gif")) as gif:
        assert gif.n_frames == 3 and gif.width > 2 * gif.height  # three panels side by side


def test_diverging_snake_is_named(coarse, tmp_path):
    """A NaN velocity in snake 1 makes its state non-finite in the first step: the run stops with an
    error naming snake 1, the sample at t = 0 is kept and the USD file is left clearly partial."""
    simulation = SnakeSimulation(3, config=coarse, seconds=3 * DT, dt=DT)
    velocities = simulation.state.particle_qd.numpy()
    velocities[simulation.model.world_slice("particle", 1).start] = np.nan
    simulation.state.particle_qd.assign(velocities)
    path = tmp_path / "gait.usdc"
    with pytest.raises(SimulationError, match="snake 1 ") as caught:
        simulation.run(usd_path=path, progress=False)
    assert caught.value.world == 1
    assert len(simulation.trajectories.time) == 1
    assert not path.exists() and (tmp_path / "gait.partial.usdc").exists()
