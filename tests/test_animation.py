"""The GIF's close-up panel: its camera follows one point from frame to frame and draws only what lies
in its box; without a close-up the animation keeps its two panels."""

import numpy as np
import pytest

from softsnake.animation import HEIGHT, CloseUp, _extent, _Views, box_mesh, posed, render_frames

SPAN = 0.5
"""Width of the close-up's box [m]."""


def _frames():
    """Three frames of a 0.1 m box driving along +x past a box standing 3 m away [m], the moving box's
    centre in each."""
    centers = np.array([[0.2 * k, 0.0, 0.05] for k in range(3)])
    still = posed(box_mesh((0.05, 0.05, 0.05)), (0.0, 3.0, 0.05), (0.0, 0.0, 0.0, 1.0), (0.2, 0.2, 0.8))
    frames = [[posed(box_mesh((0.05, 0.05, 0.05)), center, (0.0, 0.0, 0.0, 1.0), (0.9, 0.5, 0.1)), still]
              for center in centers]
    return frames, [0.0, 0.1, 0.2], centers


def test_close_up_adds_a_third_panel_as_tall_as_the_others():
    frames, times, centers = _frames()
    two = render_frames(frames, times)
    three = render_frames(frames, times, close_up=CloseUp(centers, SPAN))
    assert len(three) == 3 and three[0].shape[0] == two[0].shape[0]
    assert three[0].shape[1] > 1.5 * two[0].shape[1]  # a third panel as wide as the perspective one


def test_close_up_follows_its_centre_and_draws_only_its_box():
    frames, times, centers = _frames()
    views = _Views(_extent(frames, ()), "", HEIGHT, CloseUp(centers, SPAN))
    for parts, time, center in zip(frames, times, centers):
        views.draw(parts, time, center)
        assert views.close_up.get_xlim() == pytest.approx((center[0] - 0.5 * SPAN, center[0] + 0.5 * SPAN))
        assert views.close_up.get_ylim() == pytest.approx((center[1] - 0.5 * SPAN, center[1] + 0.5 * SPAN))
        assert len(views._artists[-1].get_facecolor()) == 12  # the moving box's triangles, not the far one's


def test_close_up_needs_one_centre_per_frame():
    frames, times, centers = _frames()
    with pytest.raises(ValueError, match="one centre per frame"):
        render_frames(frames, times, close_up=CloseUp(centers[:2], SPAN))


def test_pictures_drawn_in_several_processes_are_those_of_one():
    """Each drawing process lays its panels out on picture 0 first, as one process does: the same bytes (a
    process that laid out on its own first picture would place the panels by another title's width)."""
    frames, times, centers = _frames()
    frames, times, centers = frames * 2, [0.1 * k for k in range(6)], np.concatenate([centers, centers + 1.0])
    one = render_frames(frames, times, close_up=CloseUp(centers, SPAN), processes=1)
    three = render_frames(frames, times, close_up=CloseUp(centers, SPAN), processes=3)
    assert len(three) == 6
    for k, (a, b) in enumerate(zip(one, three)):
        assert np.array_equal(a, b), f"picture {k} differs"


def test_drawing_processes_one_per_dozen_pictures_up_to_the_cores():
    from softsnake.animation import PICTURES_PER_PROCESS, drawing_processes

    assert drawing_processes(PICTURES_PER_PROCESS - 1, cores=16) == 1
    assert drawing_processes(5 * PICTURES_PER_PROCESS, cores=16) == 5
    assert drawing_processes(240, cores=2) == 2
