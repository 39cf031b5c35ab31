"""A step's Jacobian dG/dy one colour at a time (``softsnake.gradients._StepEquations``), on the device.

One backward pass of the step's equations seeded with 1 on every equation of a colour gives the rows of dG/dy of
all of them at once (no two equations of a colour share an unknown: ``gradients._JacobianPattern``). These
kernels seed the pass from the colour held on the device, store its gradients as the colour's row of a stacked
array and step to the next colour, so that one colour's launches are one graph that is replayed for every colour.
"""

import warp as wp

from .entities import nonnegative

# Never on a wp.Tape: they move seeds and results around the tape's backward pass.
wp.set_module_options({"enable_backward": False})


@wp.kernel
def seed_colour(equation_colour: wp.array(dtype=int), colour: wp.array(dtype=int), dofs: int,
                G1_adjoint: wp.array(dtype=float), G2_adjoint: wp.array(dtype=float)):
    """The adjoints of G1 (degrees of freedom) and G2 (rows): 1 on the equations of colour ``colour[0]``, else 0."""
    i = nonnegative(wp.tid())
    seed = wp.where(equation_colour[i] == colour[0], 1.0, 0.0)
    if i < dofs:
        G1_adjoint[i] = seed
    else:
        G2_adjoint[i - dofs] = seed


@wp.kernel
def store_colour(u_adjoint: wp.array(dtype=float), lam_adjoint: wp.array(dtype=float), colour: wp.array(dtype=int),
                 dofs: int, size: int, stacked: wp.array(dtype=float)):
    """Row ``colour[0]`` of ``stacked`` (``size`` entries per colour): the pass's gradients of u, then of lambda."""
    i = nonnegative(wp.tid())
    value = float(0.0)
    if i < dofs:
        value = u_adjoint[i]
    else:
        value = lam_adjoint[i - dofs]
    stacked[nonnegative(colour[0] * size + i)] = value


@wp.kernel
def next_colour(colour: wp.array(dtype=int)):
    colour[0] = colour[0] + 1
