"""A synthetic vine video with a known answer, shared by the video tests."""

import math

import numpy as np

from softsnake.robots.vine import video as vv


def straight_video(frames=12, speed=0.04, heading=0.0, walls=()):
    """A straight robot growing at ``speed`` [m/s] along ``heading`` [rad] from 0.1 m, skeleton from a 12 mm
    base gap, frames ``vv.FRAME_INTERVAL`` apart (metres)."""
    interval = vv.FRAME_INTERVAL
    lengths = 0.1 + speed * interval * np.arange(frames)
    direction = np.array([math.cos(heading), math.sin(heading)])
    skeletons = tuple(np.linspace(0.012, length, 40)[:, None] * direction for length in lengths)
    return vv.VineVideo(number=0, skeletons=skeletons, walls=tuple(walls), base_marker=np.array([[-0.05, 0], [0, 0]]),
                        frame_interval=interval, pixels_per_metre=vv.PIXELS_PER_METRE, heading=heading,
                        raw_lengths=lengths.copy(), lengths=lengths.copy())
