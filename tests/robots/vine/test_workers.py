"""A vine batch split over worker processes gives the states of the whole batch in one process."""

from dataclasses import replace

import numpy as np
import pytest

from softsnake.errors import ConfigError, SimulationError
from softsnake.robots.vine.scene import load_scene
from softsnake.robots.vine.simulation import VineBatch, VineSpec, rollout
from softsnake.robots.vine.workers import VineBatchWorkers
from softsnake.newton_counts import NewtonCounts


def small_specs(count=5, links=6):
    scene = load_scene("jitosho_cluttered_1")
    vine = replace(scene.vine, link_count=links, body_half_length=scene.vine.length / (4 * links))
    return scene, [VineSpec(vine, scene.obstacles, scene.vine.heading + offset)
                   for offset in np.linspace(-0.3, 0.3, count)]


def test_split_batch_is_bit_identical_to_one_process():
    """Bit for bit (tolerance 0): a world's arithmetic does not depend on the other worlds of its batch.
    Steering, a growth-rate change and uneven shares (5 vines over 2 workers) are all exercised; the
    shares' Newton counts join into the whole batch's, vine by vine."""
    scene, specs = small_specs()
    steering = np.linspace(-4000.0, 4000.0, len(specs))[:, None]

    def run(batch):
        first = rollout(batch, 20, scene.sim.dt, steering=steering)
        batch.set_growth_rate(np.linspace(0.1, 0.3, len(specs)))
        second = rollout(batch, 20, scene.sim.dt)
        return np.concatenate([first.poses, second.poses]), batch.half_length, batch.time, batch.newton_counts()

    whole = run(VineBatch(specs, device="cpu"))  # worker processes run on the CPU
    with VineBatchWorkers(specs, workers=2) as split:
        assert (split.vine_count, split.link_count, split.body_count) == (5, 6, 12)
        shares = run(split)
    assert np.array_equal(whole[0], shares[0])
    assert np.array_equal(whole[1], shares[1])
    assert whole[2] == shares[2]
    for name in NewtonCounts.COUNTS:
        assert np.array_equal(getattr(whole[3], name), getattr(shares[3], name)), name
    assert whole[3].substeps.tolist() == [40] * len(specs)


def test_blow_up_in_a_worker_names_the_vine_of_the_whole_batch():
    """Vines 0-1 rest (no growth), vines 2-3 grow faster than the 0.01 m/s speed limit set here: the
    error comes from the second share and names vine 2 of the whole batch."""
    scene, specs = small_specs(count=4, links=4)
    specs = [replace(spec, vine=replace(spec.vine, growth_rate=0.0 if k < 2 else 0.2)) for k, spec in enumerate(specs)]
    with VineBatchWorkers(specs, workers=2, solver_options={"max_speed": 0.01}) as split:
        with pytest.raises(SimulationError, match=r"vine 2 \(worker share from vine 2\)") as raised:
            split.step(scene.sim.dt)
    assert raised.value.world == 2


@pytest.mark.parametrize("options, message", [
    ({"workers": 0}, "workers must be a positive integer"),
    ({"workers": 2.5}, "workers must be a positive integer"),
    ({"workers": 2, "device": "cuda"}, "worker processes run on the CPU"),
])
def test_bad_options_are_named_before_any_process_starts(options, message):
    _, specs = small_specs(count=2, links=4)
    with pytest.raises(ConfigError, match=message):
        VineBatchWorkers(specs, **options)


def test_bad_batch_option_in_a_worker_is_reported():
    _, specs = small_specs(count=2, links=4)
    with pytest.raises(ConfigError, match="growth must be one of"):
        VineBatchWorkers(specs, workers=2, growth="sideways")
