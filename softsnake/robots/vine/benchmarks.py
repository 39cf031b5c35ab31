"""The vines the runtime benchmark times (experiments/vine_runtime.py) and the solver-settings
study checks for accuracy (experiments/vine_solver_settings.py), defined once for both.

- One vine (seed 000 Fig. 5): the runtime example's parameters of the reference README (mass
  0.001 kg, inertia 2e-4 kg m^2, stiffness 0.5 N m/rad, damping 3e-5 N m s/rad, tube diameter
  24 mm), 0.2 m long along +x at the start, growing at 0.1 m/s past one circle of radius 0.05 m
  at (0.35, 0.04) m, ``SINGLE_STEPS`` steps of ``SINGLE_DT`` (seed 000 gives neither the length,
  the growth rate nor the obstacle's place).
- Batches (seed 003 Fig. 5): vines of a scene with launch angles uniform within
  ``HEADING_SPREAD`` of the scene's heading.
"""

from dataclasses import replace

from .scene import ObstacleCircle, VineParams
from .simulation import VineSpec

SINGLE_STEPS, SINGLE_DT = 400, 0.01
"""Steps and step [s] of the one-vine runtime run."""

RUNTIME_VINE = VineParams(heading=0.0, length=0.2, tube_radius=0.012, body_mass=0.001, body_inertia=2e-4, stiffness=0.5,
                          damping=3e-5, growth_rate=0.1)
RUNTIME_OBSTACLE = ObstacleCircle(center=(0.35, 0.04), radius=0.05)

HEADING_SPREAD = 0.3
"""Launch angles are uniform within this many rad of the scene's heading."""


def runtime_vine_specs(bodies):
    """The one-vine runtime case with ``bodies`` bodies (an even number), as a batch of one VineSpec."""
    vine = replace(RUNTIME_VINE, link_count=bodies // 2, body_half_length=RUNTIME_VINE.length / (2 * bodies))
    return [VineSpec(vine, (RUNTIME_OBSTACLE,))]


def spread_batch_specs(scene, links, vines, rng):
    """``vines`` VineSpecs of ``scene``'s vine with ``links`` links (the same length) and launch
    angles drawn from ``rng`` (a numpy Generator) within ``HEADING_SPREAD`` of its heading."""
    vine = replace(scene.vine, link_count=links, body_half_length=scene.vine.length / (4 * links))
    headings = scene.vine.heading + rng.uniform(-HEADING_SPREAD, HEADING_SPREAD, vines)
    return [VineSpec(vine, scene.obstacles, float(h)) for h in headings]
