"""Golden states: the final states of a fixed set of engine scenes and short command runs.

A change that must not move any number (a refactor, a file move) keeps every one of them
byte-identical; a change that moves numbers on purpose records them again and says so in its
commit:

    SOFTSNAKE_GOLDEN_UPDATE=1 pytest tests/test_golden_states.py

The bytes are those of the platform that recorded them (``recording_platform``: processor, C library,
Warp, NumPy, kept in golden/index.json); on another the two tests skip and say why.

The scenes cover every constraint type (distance with and without pressure, tetrahedra,
attachment, hinge, prismatic with its drive, angular springs linear and sampled), every shape and
obstacle kind, friction, planar models, batches of worlds and both warm and cold starts; the
commands cover the snake gait, the link curvature, a bench case, the step response, vine scenes
and the planner.
"""

import hashlib
import json
import math
import os
import platform
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import warp as wp

import softsnake
from engine_scenes import scene_bodies, scene_chain_3d, scene_chain_planar, scene_soft
from softsnake.meshing import box_tet_mesh

GOLDEN = Path(__file__).parent / "golden"
STATES = GOLDEN / "states.npz"
COMMANDS = GOLDEN / "commands"
UPDATE = os.environ.get("SOFTSNAKE_GOLDEN_UPDATE") == "1"


def recording_platform():
    """What the bytes of a CPU run depend on besides the code: Warp compiles the CPU kernels with its LLVM
    for the host processor and calls the C library's maths, and the builder's NumPy (the tetrahedra's
    rest-shape inverses: LAPACK, dispatched by processor) rounds per version and processor. On an H100
    machine's host (an Intel Xeon, NumPy 2.5.2, 2026-11-26) every scene with tetrahedra moved, by 2e-7 m
    to 1e-4 m (the batch's contacts), and so did the snake commands' outputs: the bytes are this
    platform's, so they are compared only where they were recorded."""
    cpuinfo = Path("/proc/cpuinfo")
    lines = cpuinfo.read_text().splitlines() if cpuinfo.exists() else []

    def first(key):
        return next((line.split(":", 1)[1].strip() for line in lines if line.split(":")[0].strip() == key), "")

    return {"machine": platform.machine(), "processor": first("model name") or platform.processor(),
            "processor_features": hashlib.sha256(first("flags").encode()).hexdigest()[:16],
            "libc": " ".join(platform.libc_ver()).strip(), "warp": wp.__version__, "numpy": np.__version__}


def _run(model, steps, dt=1.0 / 120.0, control_fn=None, **solver_options):
    solver = softsnake.Solver(model, **solver_options)
    state, control = model.state(), model.control()
    for k in range(steps):
        if control_fn is not None:
            control_fn(control, k)
        solver.step(state, state, control, dt)
    return {name: getattr(state, name).numpy() for name in ("particle_q", "particle_qd", "body_q", "body_qd")}


def scene_particles():
    """Pendulum on a rigid rod, a compliant damped spring, particles resting and sliding on ground."""
    b = softsnake.ModelBuilder()
    b.add_ground(mu=0.4)
    pivot = b.add_particle((0.0, 0.0, 1.0), kinematic=True)
    bob = b.add_particle((0.3, 0.0, 0.6), mass=0.2)
    b.add_distance(pivot, bob)
    c = b.add_particle((1.0, 0.0, 0.5), mass=0.1, radius=0.01)
    b.add_distance(pivot, c, 0.8, compliance=1e-3, damping=0.01)
    b.add_particle((2.0, 0.0, 0.05), velocity=(1.5, 0.3, 0.0), mass=0.3, radius=0.05)
    b.add_particle((2.0, 1.0, 0.02), mass=0.3, radius=0.02)
    return b.finalize("cpu")


def scene_batch():
    """Three worlds of one soft block each, placed apart, with a shared ground."""
    world = softsnake.ModelBuilder()
    verts, tets = box_tet_mesh((0.05, 0.05, 0.05), (1, 1, 1))
    world.add_soft_mesh(verts, tets, 1000.0, 5e4, 0.3, position=(0.0, 0.0, 0.02), velocity=(0.5, 0.0, 0.0))
    body = world.add_body((0.3, 0.0, 0.1))
    world.add_shape_box(body, (0.03, 0.03, 0.03), density=500.0)
    scene = softsnake.ModelBuilder()
    scene.add_ground(mu=0.5)
    scene.replicate(world, 3, spacing=(0.0, 1.0, 0.0))
    return scene.finalize("cpu")


def _pressure_ramp(control, k):
    control.pressure.assign(np.array([2e4 if k >= 10 else 0.0], dtype=np.float32))


def _joint_targets(control, k):
    control.joint_target.assign(np.full(control.joint_target.shape, 0.1 * math.sin(0.1 * k), dtype=np.float32))


ENGINE_CASES = {
    "particles_warm": (scene_particles, 90, {}, None),
    "particles_cold": (scene_particles, 90, {"warm_start": False}, None),
    "bodies_warm": (scene_bodies, 90, {}, None),
    "bodies_cold": (scene_bodies, 90, {"warm_start": False, "substeps": 3}, None),
    "soft_warm": (scene_soft, 40, {}, _pressure_ramp),
    "soft_warm_no_elastic": (scene_soft, 40, {"elastic_warm_start": False}, _pressure_ramp),
    "soft_cold_batched": (scene_soft, 40, {"warm_start": False, "linear_solver": "batched"}, _pressure_ramp),
    "chain_planar": (scene_chain_planar, 90, {"substeps": 1}, _joint_targets),
    "chain_planar_batched": (scene_chain_planar, 60, {"linear_solver": "batched"}, _joint_targets),
    "chain_3d": (scene_chain_3d, 90, {}, _joint_targets),
    "batch": (scene_batch, 60, {"newton_iterations": 3, "linear_iterations": 15}, None),
}


def engine_states():
    states = {}
    # On the CPU whatever the run's default device (SOFTSNAKE_TEST_DEVICES=cuda): the recorded bytes are the
    # CPU's, and the shared scenes of engine_scenes.py build on the default device.
    with wp.ScopedDevice("cpu"):
        for name, (make, steps, options, control_fn) in ENGINE_CASES.items():
            for key, value in _run(make(), steps, control_fn=control_fn, **options).items():
                states[f"{name}/{key}"] = value
    return states


def bench_case_state():
    """The bench's one-link case after its frames (the state the bench times)."""
    from softsnake.robots.snake.bench import case_model as _case_model  # the bench's own case builder
    from softsnake.robots.snake.config import load_snake_config
    from softsnake.robots.snake.gait import GaitParams, gait_command
    from softsnake.robots.actuation import chamber_targets
    from softsnake.robots.snake.simulation import DT_DEFAULT, snake_solver

    config = load_snake_config(resolution="coarse")
    model, handle, count = _case_model(0.25, config, "coarse", "cpu")
    solver = snake_solver(model)
    state, control = model.state(), model.control()
    command = gait_command(GaitParams(snake_count=count), 0.1, handle.link_count)
    channels = model.pressure_channel_world_start[:-1, None, None] + handle.link_channels[None]
    pressure = np.zeros(model.pressure_channel_count, dtype=np.float32)
    pressure[channels.ravel()] = chamber_targets(command).ravel()
    control.pressure.assign(pressure)
    for _ in range(6):
        solver.step(state, state, control, DT_DEFAULT)
    return {"bench_link/particle_q": state.particle_q.numpy(), "bench_link/body_q": state.body_q.numpy()}


COMMAND_RUNS = {
    # name: (arguments, output files compared byte for byte)
    "gait": (["gait", "--snakes", "2", "--seconds", "0.25", "--sweep", "offset=-0.3:0.3", "--no-usd", "--no-video"],
             ["trajectories.csv"]),
    "gait_no_latency": (["gait", "--snakes", "1", "--seconds", "0.2", "--no-latency", "--no-usd", "--no-video"],
                        ["trajectories.csv"]),
    "curvature": (["curvature", "--seconds", "0.3", "--min-psi", "-4", "--max-psi", "4", "--step-psi", "2"], ["curvature.csv"]),
    "step_response": (["step-response", "--duration", "0.5"], ["step_response.csv"]),
    "vine_wall": (["vine", "jitosho_wall", "--seconds", "0.3", "--no-video"], None),
    "vine_cluttered": (["vine", "jitosho_cluttered_1", "--seconds", "0.3", "--vines", "2", "--spread-heading", "0.2",
                        "--no-video"], None),
    "plan": (["plan", "planner_navigation", "--json"], "stdout"),
}


def command_outputs(tmp_root):
    """{name/file: bytes} of every command run (CSV and JSON files; PNG and USD hold tool metadata)."""
    outputs = {}
    for name, (arguments, files) in COMMAND_RUNS.items():
        out = Path(tmp_root) / name
        out.mkdir(parents=True)
        result = subprocess.run([sys.executable, "-m", "softsnake", *arguments, "--out", str(out)],
                                capture_output=True, cwd=out, timeout=600)
        assert result.returncode == 0, f"{name}: {result.stderr.decode()[-2000:]}"
        if files == "stdout":
            document = json.loads(result.stdout)
            document.pop("plot", None)  # the PNG's path: where this run wrote it
            document.pop("source", None)  # the scene file's absolute path: where the checkout lies
            outputs[f"{name}/stdout.json"] = json.dumps(document, indent=1, sort_keys=True).encode()
            continue
        names = files if files is not None else sorted(p.name for p in out.iterdir() if p.suffix == ".csv")
        assert names, f"{name} wrote no CSV"
        for file in names:
            outputs[f"{name}/{file}"] = (out / file).read_bytes()
    return outputs


def _record(states, outputs):
    GOLDEN.mkdir(exist_ok=True)
    np.savez_compressed(STATES, **{k.replace("/", "__"): v for k, v in states.items()})
    if COMMANDS.exists():
        for old in COMMANDS.rglob("*"):
            if old.is_file():
                old.unlink()
    for key, data in outputs.items():
        path = COMMANDS / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    (GOLDEN / "index.json").write_text(json.dumps(
        {"platform": recording_platform(), "states": sorted(states), "commands": sorted(outputs)}, indent=1) + "\n")


def _describe(expected, actual):
    if expected.shape != actual.shape:
        return f"shape {actual.shape} != {expected.shape}"
    diff = np.abs(actual.astype(np.float64) - expected.astype(np.float64))
    return f"max |difference| {np.nanmax(diff):.3g} at {np.unravel_index(np.nanargmax(diff), diff.shape)}"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    recorded_on, here = json.loads((GOLDEN / "index.json").read_text()).get("platform"), recording_platform()
    if not UPDATE and recorded_on != here:
        pytest.skip(f"golden bytes recorded on {recorded_on}, this is {here}: they hold only where "
                    "they were recorded (recording_platform); record them here with SOFTSNAKE_GOLDEN_UPDATE=1 to use them")
    states = {**engine_states(), **bench_case_state()}
    outputs = command_outputs(tmp_path_factory.mktemp("golden"))
    if UPDATE:
        _record(states, outputs)
    return states, outputs


def test_engine_states_are_byte_identical(recorded):
    states, _ = recorded
    golden = np.load(STATES)
    expected = {k.replace("__", "/"): golden[k] for k in golden.files}
    assert sorted(expected) == sorted(states), "the set of golden scenes changed: record them again"
    moved = [f"{k}: {_describe(expected[k], v)}" for k, v in states.items()
             if expected[k].dtype != v.dtype or expected[k].tobytes() != v.tobytes()]
    assert not moved, "states moved:\n" + "\n".join(moved)


def test_command_outputs_are_byte_identical(recorded):
    _, outputs = recorded
    index = json.loads((GOLDEN / "index.json").read_text())
    assert sorted(index["commands"]) == sorted(outputs), "the set of golden command outputs changed"
    moved = [key for key, data in outputs.items() if (COMMANDS / key).read_bytes() != data]
    assert not moved, f"command outputs moved: {moved}"
