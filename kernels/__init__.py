"""Warp kernels of the softsnake engine, grouped by what they compute.

- ``entities``: shared device functions for particle and rigid-body degrees of freedom.
- ``integration``: prediction, position updates from multipliers, velocities from positions.
- ``distance``, ``tetrahedron``, ``attachment``, ``hinge``, ``prismatic`` (with the growth
  drive), ``angular_spring``, ``contact``:
  one module per constraint type, each evaluating its rows (residual, Jacobian, compliance).
- ``rows``: the type-independent part of every row (right-hand side, damping, Jacobi diagonal).
- ``linear_solver``: the matrix-free product with J M^-1 J^T + E and Jacobi-preconditioned
  conjugate residual with per-world reductions.
- ``checks``: detection of non-finite states per world.
"""
