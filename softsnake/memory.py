"""Memory held by a simulation: the Warp arrays of its Model, State, Control and Solver.

The engine allocates everything at ``finalize`` and ``Solver`` construction and nothing while it
steps, so these arrays are the simulation's whole device footprint (Warp's kernel modules and
the CUDA context aside).
"""

import warp as wp


def _arrays(value, depth=3):
    """The Warp arrays of ``value``: itself, or those held by its attributes, a dict's values or a Warp struct's
    fields (the solver's ``transpose()`` layouts), ``depth`` levels down."""
    if isinstance(value, wp.array):
        yield value
    elif depth > 0:
        if isinstance(value, dict):
            children = value.values()
        elif hasattr(value, "__dict__"):
            children = vars(value).values()
        else:
            return
        for child in children:
            yield from _arrays(child, depth - 1)


def array_bytes(*objects):
    """Bytes allocated by the Warp arrays held by ``objects`` (as attributes, or inside their dicts and
    ``softsnake.linear_solve.Transpose`` layouts) [B].

    An array referenced from several places (a State sharing a Model array, say) counts once.
    """
    seen = {}
    for obj in objects:
        for value in vars(obj).values():
            for array in _arrays(value):
                if array.ptr is not None:
                    seen[array.ptr] = array.capacity
    return sum(seen.values())
