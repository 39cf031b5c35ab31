"""Static equilibria by stepping with kinetic damping: every velocity is zeroed whenever the kinetic
energy stops growing, so the model comes to rest at the equilibrium its constraints and loads
define, without a damping term that would enter the result."""

import numpy as np


def settle_with_kinetic_damping(model, solver, state, control, dt, steps):
    """Step ``state`` ``steps`` times by ``dt`` [s], zeroing the particle velocities whenever the
    particles' kinetic energy drops; return the particle positions [m], shape (particle_count, 3)."""
    mass = model.particle_mass_numpy()
    previous = 0.0
    for _ in range(steps):
        solver.step(state, state, control, dt)
        energy = float(np.sum(mass[:, None] * state.particle_qd.numpy() ** 2))
        if energy < previous:
            state.particle_qd.zero_()
            energy = 0.0
        previous = energy
    return state.particle_q.numpy().copy()  # not a view of the state on the CPU: the same on every device
