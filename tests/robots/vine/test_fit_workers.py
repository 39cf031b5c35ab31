"""A video fit's evaluations split over worker processes (``robots.vine.fit_workers``) give the losses and gradients
of one process bit for bit, for both losses, with videos of different lengths (so that a share's batch ends before
the whole batch's would) and a wall that one vine meets; and ``fit_videos`` takes the same steps with them."""

import numpy as np
import pytest

from softsnake.errors import ConfigError
from softsnake.robots.vine import video_fit as vf
from softsnake.robots.vine.fit_workers import FitWorkers
from softsnake.robots.vine.scene import ObstacleWall

from synthetic_videos import straight_video


def videos():
    """Three synthetic videos of 9, 13 and 11 frames, the second with a wall across its path."""
    wall = ObstacleWall((0.14, -0.2), (0.14, 0.3))
    return [straight_video(frames=9, speed=0.08, heading=-0.2), straight_video(frames=13, speed=0.1, heading=0.3,
                                                                              walls=[wall]),
            straight_video(frames=11, speed=0.06, heading=0.1)]


@pytest.fixture(scope="module")
def pool():
    with FitWorkers(videos(), workers=2, link_count=vf.FIT_LINKS, dt=vf.FIT_DT, solver_options=vf.SOLVER_OPTIONS,
                    stride=vf.ONE_STEP_STRIDE) as workers:
        yield workers


@pytest.mark.parametrize("loss", ["rollout", "one_step"])
def test_shared_evaluations_are_one_process_bit_for_bit(pool, loss):
    assert pool.shares == [(0, 2), (2, 3)]
    model = vf.VideoModel.initial("linear")
    alone = vf.LOSS_FUNCTIONS[loss](model, videos())
    shared = pool.loss_and_gradient(model, loss)
    assert shared[0] == alone[0] > 0.0
    np.testing.assert_array_equal(shared[1], alone[1])
    np.testing.assert_array_equal(shared[2], alone[2])
    assert np.abs(alone[1]).max() > 0.0


def test_a_fit_with_workers_takes_the_same_steps():
    """Three Adam evaluations of the one-step loss, in one process and on two workers: the same losses."""
    fits = [vf.fit_videos("linear", videos(), loss="one_step", max_evaluations=3, workers=workers)
            for workers in (1, 2)]
    assert fits[0].losses == fits[1].losses and len(fits[0].losses) == 3
    np.testing.assert_array_equal(fits[0].model.vector(), fits[1].model.vector())


def test_a_share_without_one_step_worlds_is_no_error():
    """A video too short for the vine's bodies in every frame gives no one-step world: one process leaves it out,
    and so does the worker whose share it is alone, with the same loss and gradient."""
    short = straight_video(frames=6, speed=0.0)
    short = short.__class__(**{**short.__dict__, "skeletons": tuple(s[:3] * 0.1 for s in short.skeletons)})
    model = vf.VideoModel.initial("linear")
    with pytest.raises(ConfigError, match="no frame"):
        vf.one_step_worlds(model, [short])
    both = videos()[:2] + [short]
    alone = vf.one_step_loss_and_gradient(model, both)
    with FitWorkers(both, workers=2, link_count=vf.FIT_LINKS, dt=vf.FIT_DT, solver_options=vf.SOLVER_OPTIONS,
                    stride=vf.ONE_STEP_STRIDE) as workers:
        assert workers.shares == [(0, 2), (2, 3)]
        shared = workers.loss_and_gradient(model, "one_step")
    assert shared[0] == alone[0]
    np.testing.assert_array_equal(shared[1], alone[1])
    np.testing.assert_array_equal(shared[2], alone[2])
    assert np.isnan(alone[2][2]) and np.isfinite(alone[2][:2]).all()
