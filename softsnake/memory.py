"""Memory held by a simulation: the Warp arrays of its Model, State, Control and Solver.

The engine allocates everything at ``finalize`` and ``Solver`` construction and nothing while it
steps, so these arrays are the simulation's whole device footprint (Warp's kernel modules and
the CUDA context aside).
"""

import warp as wp


def array_bytes(*objects):
    """Bytes allocated by the Warp arrays held as attributes of ``objects`` [B].

    An array referenced from several places (a State sharing a Model array, say) counts once.
    """
    seen = {}
    for obj in objects:
        for value in vars(obj).values():
            if isinstance(value, wp.array) and value.ptr is not None:
                seen[value.ptr] = value.capacity
    return sum(seen.values())
