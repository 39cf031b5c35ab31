"""Backward code exactly where gradients need it (issue 13, item 4).

Kernels compile without their backward pass (``enable_backward=False``: per module with
``wp.set_module_options``, per kernel in ``kernels/integration.py``) unless ``softsnake.gradients``
records them on a ``wp.Tape`` (measured on the CPU, 2 cores: the cold compile of every kernel
module from 47 s to 35 s; the forward-only modules from 15.5 s to 4.7 s; the row kernels and
``kernels.adjoint``, 27 s, keep theirs). A kernel on a tape without backward code would be skipped
by ``Tape.backward`` (a warning and a silently wrong gradient) and fail in the replayed backward of
``rollout_gradient``, so this records every launch that the gradients put on a tape, for scenes
that hold every constraint type, particles and bodies, and checks that each has backward code; and,
the other way, that no kernel of ``softsnake.kernels`` or ``softsnake.constraints`` that never
reaches a tape compiles one.
"""

import importlib
import pkgutil

import numpy as np
import pytest
import warp as wp
from engine_scenes import scene_chain_3d, scene_soft

import softsnake
import softsnake.constraints
import softsnake.kernels
from softsnake.gradients import record_rollout, rollout_gradient, tape_rows

DT = 1.0 / 60.0


def package_kernels(package):
    """{qualified name: kernel} of every Warp kernel defined in a module of ``package``."""
    kernels = {}
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        for value in vars(module).values():
            if isinstance(value, wp.Kernel) and value.func.__module__ == module.__name__:
                kernels[f"{module.__name__}.{value.key}"] = value
    return kernels


def qualified(kernel):
    return f"{kernel.func.__module__}.{kernel.key}"


def has_backward(kernel):
    """Whether Warp generates the kernel's backward pass (its own option first, else its module's)."""
    option = kernel.options.get("enable_backward")
    if option is None:
        option = kernel.module.options.get("enable_backward", wp.config.enable_backward)
    return bool(option)


@pytest.fixture(scope="module")
def taped_kernels():
    """({qualified name: kernel} of every launch recorded on a wp.Tape by ``tape_rows`` and a one-step
    ``rollout_gradient`` of a soft cantilever (particles, tetrahedra, attachments, pressure-driven
    distance rows, contacts, a kinematic body) and of a 3-D chain (bodies, hinges, a driven
    prismatic joint, linear and sampled angular springs, contacts with obstacles); the errors the
    gradients raised)."""
    recorded, failures = {}, []
    original = wp.Tape.record_launch

    def record_launch(self, kernel, *args, **kwargs):
        recorded[qualified(kernel)] = kernel
        return original(self, kernel, *args, **kwargs)

    wp.Tape.record_launch = record_launch
    try:
        for model in (scene_soft(), scene_chain_3d()):
            solver = softsnake.Solver(model, substeps=1)
            state, control = model.state(), model.control()
            if model.pressure_channel_count:
                control.pressure.assign(np.full(control.pressure.shape, 2e4, dtype=np.float32))
            records = record_rollout(solver, state, control, DT, 1)
            seed = {name: np.ones(getattr(state, name).numpy().shape) for name in ("particle_q", "body_q")}
            try:
                adjoint, _ = rollout_gradient(solver, records, seed)
                assert all(np.isfinite(values).all() for values in adjoint.values())
            except RuntimeError as error:  # a kernel without backward code fails in the replayed backward
                failures.append(f"{type(error).__name__}: {error}")
            tape_rows(solver, state, control, DT)
    finally:
        wp.Tape.record_launch = original
    return recorded, failures


def test_every_constraint_and_adjoint_kernel_reaches_the_tape(taped_kernels):
    """The scenes cover what the gradients differentiate: every kernel of ``softsnake.constraints``
    (row kernels, contact detection) and of ``kernels.adjoint``, except those declared forward-only
    (``enable_backward=False``: the warm start's fit of the carried contact multipliers, which the
    implicit gradient of a step does not see)."""
    needed = {name: k for name, k in package_kernels(softsnake.constraints).items() if has_backward(k)}
    needed.update({name: k for name, k in package_kernels(softsnake.kernels).items()
                   if name.startswith("softsnake.kernels.adjoint.")})
    missing = sorted(set(needed) - set(taped_kernels[0]))
    assert not missing, f"no scene here puts these on a tape (extend the scenes): {missing}"


def test_kernels_on_a_tape_have_backward_code(taped_kernels):
    recorded, failures = taped_kernels
    without = sorted(name for name, kernel in recorded.items() if not has_backward(kernel))
    assert not without, f"recorded on a wp.Tape by softsnake.gradients but compiled with enable_backward=False: {without}"
    assert not failures, f"rollout_gradient failed: {failures}"


def test_kernels_never_on_a_tape_compile_no_backward_code(taped_kernels):
    kernels = package_kernels(softsnake.kernels) | package_kernels(softsnake.constraints)
    extra = sorted(name for name, kernel in kernels.items() if name not in taped_kernels[0] and has_backward(kernel))
    assert not extra, (f"never on a wp.Tape but compiled with backward code (set enable_backward=False on the "
                       f"kernel or its module): {extra}")
