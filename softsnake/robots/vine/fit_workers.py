"""A video fit's evaluations split over worker processes, one per CPU core (softsnake.robots.workers: why, and how
Ctrl-C and the processes' start are handled).

The videos of a fit are independent worlds: each worker holds a contiguous share of them and computes their losses
and gradient terms (``video_fit.rollout_parts``, ``video_fit.one_step_parts``), the adjoint scaled for the mean over
every video (or every one-step world) of the fit; the parent joins the terms in video order. An evaluation then gives
bit for bit the loss and the gradient of one batch of every video in one process
(tests/robots/vine/test_fit_workers.py): each vine's arithmetic does not depend on the others in its batch, and a
vine whose video ends before its batch's last step gets exact zeros from the steps after it.
"""

import numpy as np

from softsnake.errors import ConfigError, SimulationError

from ..workers import WorkerPool
from .video_fit import KeptBatch, one_step_parts, one_step_video_losses, one_step_worlds, rollout_parts


class _VideoShare:
    """A worker's share of the fit's videos, stepped on the CPU."""

    def __init__(self, videos, link_count, dt, solver_options, stride):
        self.videos, self.stride = videos, stride
        self.options = {"link_count": link_count, "dt": dt, "solver_options": solver_options, "device": "cpu"}
        self.worlds = None
        self.kept = KeptBatch()

    def rollout(self, model, video_count):
        """(losses, gradient terms) of this share's videos for a mean over ``video_count`` videos."""
        return rollout_parts(model, self.videos, video_count=video_count, **self.options)

    def one_step_world_count(self, model):
        """Build this share's one-step worlds for ``model`` (kept for ``one_step``) and count them (a share whose
        videos give none has 0: one process refuses only a fit whose videos all give none)."""
        try:
            self.worlds = one_step_worlds(model, self.videos, stride=self.stride, link_count=self.options["link_count"])
        except ConfigError:
            self.worlds = None
            return 0
        return len(self.worlds[0])

    def one_step(self, model, world_count):
        """(losses, gradient terms, origins) of this share's one-step worlds for a mean over ``world_count`` worlds.
        A blow-up names the world within the share (the pool counts shares in videos)."""
        if self.worlds is None:
            return np.zeros(0), [], []
        try:
            losses, terms = one_step_parts(model, self.videos, self.worlds, world_count=world_count, kept=self.kept,
                                           **self.options)
        except SimulationError as error:
            raise SimulationError(f"one-step world {error.world} of this share: {error}", step=error.step,
                                  reason=error.reason) from None
        return losses, terms, self.worlds[2]


class FitWorkers(WorkerPool):
    """``videos`` shared among ``workers`` processes (default: one per CPU core this process may use, at most one
    per video), each evaluating its share on the CPU. ``loss_and_gradient(model, loss)`` is
    ``video_fit.rollout_loss_and_gradient`` or ``one_step_loss_and_gradient`` (``loss`` "rollout" or "one_step")
    of every video, the same numbers. Close it (or use it as a context manager) to stop the processes.

    link_count, dt [s], solver_options, stride: as for ``video_fit.fit_videos``.
    """

    def __init__(self, videos, *, workers=None, link_count, dt, solver_options, stride):
        self.videos, self.stride, self.link_count = list(videos), stride, link_count
        super().__init__(_VideoShare, len(self.videos), workers=workers, item="video",
                         arguments=lambda begin, end: (self.videos[begin:end], link_count, dt, solver_options, stride))

    def loss_and_gradient(self, model, loss):
        """(loss [m^2], its gradient with respect to ``model.vector()``, the loss per video (V,))."""
        count = len(self.videos)
        if loss == "rollout":
            parts = self.request("rollout", [(model, count)] * len(self.shares))
            losses = np.concatenate([share_losses for share_losses, _ in parts])
            return float(losses.mean()), sum(term for _, terms in parts for term in terms), losses
        world_count = sum(self.request("one_step_world_count", [(model,)] * len(self.shares)))
        if world_count == 0:
            # One process's error: no video gives a start state.
            one_step_worlds(model, self.videos, stride=self.stride, link_count=self.link_count)
        parts = self.request("one_step", [(model, world_count)] * len(self.shares))
        world_losses = np.concatenate([share_losses for share_losses, _, _ in parts])
        origins = [(begin + v, start) for (begin, _), (_, _, share_origins) in zip(self.shares, parts)
                   for v, start in share_origins]
        return (float(world_losses.mean()), sum(term for _, terms, _ in parts for term in terms),
                one_step_video_losses(world_losses, origins, count))
