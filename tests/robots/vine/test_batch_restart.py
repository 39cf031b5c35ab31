"""``VineBatch.restart``: a batch put back at its start with other fitted parameters is a new batch, bit for bit.

A video fit's one-step loss steps the same ~100 start states of its videos at every evaluation, with the next model's
masses, inertias and pin springs (``video_fit.KeptBatch``); restarting the batch instead of building it again must
change no number: every array of the model, and the loss and gradient of an evaluation after a first one that left the
batch (state, control, solver, gradient arrays) at its end."""

import numpy as np
import pytest
import warp as wp

from softsnake.errors import ConfigError
from softsnake.robots.vine import video_fit
from softsnake.robots.vine.simulation import VineBatch
from softsnake.robots.vine.video_fit import KeptBatch, VideoModel, one_step_loss_and_gradient, one_step_worlds

from softsnake.robots.vine import reference as ref

needs_reference = pytest.mark.skipif(not ref.reference_available(), reason="vine reference data not present")

STRIDE = 12
"""Start frames apart: a few worlds per video, enough to cover every kind of vine the videos give."""


@pytest.fixture(scope="module")
def videos():
    from softsnake.robots.vine.video import load_videos

    return load_videos([2, 3])


def perturbed(kind, scale, seed):
    start = VideoModel.initial(kind)
    return start.with_vector(start.vector() + scale * np.random.default_rng(seed).normal(size=start.vector().shape))


def model_arrays(model):
    return {name: value.numpy() for name, value in vars(model).items() if isinstance(value, wp.array)}


@needs_reference
@pytest.mark.parametrize("kind", ["linear", "wrinkling", "mlp"])
def test_restart_is_a_new_batch(videos, kind):
    """A batch built for one model and restarted with another's worlds holds every model array of a batch built for
    the other (the fitted ones changed: they do differ), and its evaluation gives the loss, per-video losses and
    gradient of a new batch to the bit, twice in a row (the second restart starts from the end of an evaluation)."""
    first, second, third = (perturbed(kind, 0.2, seed) for seed in (1, 2, 3))
    kept = KeptBatch()
    one_step_loss_and_gradient(first, videos, stride=STRIDE, kept=kept)
    batch = kept.batch
    for model in (second, third):
        got = one_step_loss_and_gradient(model, videos, stride=STRIDE, kept=kept)
        assert kept.batch is batch  # restarted, not built again
        expected = one_step_loss_and_gradient(model, videos, stride=STRIDE)
        assert got[0] == expected[0]
        assert np.array_equal(got[1], expected[1]) and np.array_equal(got[2], expected[2])
        fresh = VineBatch(one_step_worlds(model, videos, stride=STRIDE)[0], solver_options=video_fit.SOLVER_OPTIONS)
        restarted, built = model_arrays(batch.model), model_arrays(fresh.model)
        assert restarted.keys() == built.keys()
        changed = [name for name in built if not np.array_equal(restarted[name], built[name])]
        assert changed == [], f"arrays that differ from a new batch's: {changed}"
    before = model_arrays(VineBatch(one_step_worlds(first, videos, stride=STRIDE)[0]).model)
    moved = {name for name in before if not np.array_equal(before[name], model_arrays(batch.model)[name])}
    assert {"body_inv_mass", "spring_damping"} <= moved  # the parameters did change the batch


@needs_reference
def test_restart_refuses_other_worlds(videos):
    """Fewer worlds, another start frame or another stiffness model are other worlds: a ConfigError naming what
    differs, and KeptBatch builds a new batch for them."""
    model = VideoModel.initial("linear")
    specs = one_step_worlds(model, videos, stride=STRIDE)[0]
    batch = VineBatch(specs, solver_options=video_fit.SOLVER_OPTIONS)
    with pytest.raises(ConfigError, match="restart needs"):
        batch.restart(specs[:-1])
    mixed = list(specs)
    mixed[1] = one_step_worlds(model, videos, stride=STRIDE + 1)[0][1]  # video 2's frame 13 for its frame 12
    with pytest.raises(ConfigError, match="vine 1 differs from the batch's in more than its fitted parameters"):
        batch.restart(mixed)
    wrinkling = one_step_worlds(VideoModel.initial("wrinkling"), videos, stride=STRIDE)[0]
    with pytest.raises(ConfigError, match="differs from the batch's"):
        batch.restart(wrinkling)
    kept = KeptBatch()
    kept.get(specs, video_fit.SOLVER_OPTIONS, None)
    held = kept.batch
    assert kept.get(wrinkling, video_fit.SOLVER_OPTIONS, None) is not held
