"""The Warp kernels of the solver's pipeline, one module per stage of a substep.

The kernels that evaluate each constraint type's rows live with their type in
``softsnake.constraints``; these are the stages every type shares, in the order a substep runs them:

- ``world_frame``: each world's substep moved into a frame centred on that world and back (float32 positions
  then round a world's physics as they would at the origin).
- ``integration``: prediction x~ = x + h v + h^2 M^-1 f, position updates, velocities from positions
  (and their corrections: ``add_particle_velocities``).
- ``rows``: the type-independent part of every row (right-hand side, damping, Jacobi diagonal) and
  the solver's copies of J and J^T.
- ``operator``: the system operator J M^-1 J^T + E, matrix-free (also moves the bodies by M^-1 J^T).
- ``linear_solver``: Jacobi-preconditioned conjugate residual with per-world reductions, batched
  or one thread per world.
- ``momentum``: the momentum gap x - x~ - M^-1 J^T lambda and its share of the merit (only with
  ``SolverSettings.momentum_balance``).
- ``multipliers``: accumulation of the multipliers and the warm start.
- ``checks``: detection of blown-up worlds.
- ``entities``: device functions for particle and body degrees of freedom that the constraint
  kernels use to write their Jacobian blocks.
"""
