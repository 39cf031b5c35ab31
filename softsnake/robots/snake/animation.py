"""The animation of a gait run (``softsnake gait``'s GIF): every snake's links, modules and wheels,
seen from above and in perspective, and a close-up that follows the middle pictured snake so that
its links' bending, its modules and its wheels show (in the whole scene a snake is a thin stick).
Each snake's links have the colour of its path in ``trajectories.png`` (matplotlib's C0, C1, ...)."""

import numpy as np
from matplotlib.colors import to_rgb

from softsnake.animation import CloseUp, Part, box_mesh, cylinder_mesh, frame_stride, posed, write_gif
from softsnake.errors import ConfigError

from .robot import snake_length

MODULE_COLOR = (0.25, 0.25, 0.3)
WHEEL_COLOR = (0.08, 0.08, 0.08)
CLOSE_UP_LENGTHS = 1.15
"""Width of the close-up's box in snake lengths [-]: the whole snake with a little room around it."""


def snake_color(snake):
    """RGB colour of snake ``snake`` in the plots and the animation."""
    return to_rgb(f"C{snake % 10}")


class SnakeAnimation:
    """Pictures of a ``SnakeSimulation`` run, taken every ``stride`` frames.

    Pass ``record`` as the run's frame callback (``SnakeSimulation.run(on_frame=..., on_frame_every=...)``);
    ``write`` draws what was recorded into a GIF (also after an interrupted run).
    """

    def __init__(self, simulation, stride, snakes=None):
        self.snake_count = simulation.snake_count if snakes is None else min(int(snakes), simulation.snake_count)
        """The snakes pictured: the first this many of the run."""
        self.dt = simulation.dt
        self.stride = int(stride)
        snake = simulation.snake
        self._link_particles = np.concatenate([np.arange(link.particles.start, link.particles.stop)
                                               for link in snake.links])
        self._link_faces = []
        offset = 0
        for link in snake.links:
            self._link_faces.append(np.asarray(link.surface_triangles) + offset)
            offset += link.particle_count
        self._faces = np.concatenate(self._link_faces)
        self._modules = np.asarray(snake.module_bodies)
        self._wheels = np.asarray(snake.wheel_bodies).reshape(-1)
        cap, wheel = simulation.config.cap, simulation.config.wheel
        self._module_mesh = box_mesh((0.5 * cap.length, 0.5 * cap.width, 0.5 * cap.height))
        self._wheel_mesh = cylinder_mesh(wheel.radius, 0.5 * wheel.width)
        self.followed = (self.snake_count - 1) // 2
        """The snake the close-up follows: the middle one pictured (snake 0 of one or two)."""
        self._close_up_span = CLOSE_UP_LENGTHS * snake_length(simulation.config)
        self._centers_of_mass = simulation.centers_of_mass
        self.times, self._points, self._bodies = [], [], []
        self.centers = []
        """Centre of mass of the followed snake in every picture (3,) [m], the close-up's camera target."""

    @classmethod
    def for_run(cls, simulation, snakes=None):
        """An animation of the first ``snakes`` snakes (None: all) of ``simulation`` with the default
        picture rate (``frame_stride``)."""
        return cls(simulation, frame_stride(simulation.frame_count, simulation.dt), snakes)

    def record(self, time, particles, body_q):
        """Keep one picture: ``particles`` (snakes, particles, 3) and ``body_q`` (snakes, bodies, 7)."""
        self.times.append(float(time))
        n = self.snake_count
        self._points.append(np.array(particles[:n, self._link_particles], dtype=np.float32))
        self._bodies.append(np.array(body_q[:n, np.concatenate([self._modules, self._wheels])], dtype=np.float32))
        followed = slice(self.followed, self.followed + 1)
        self.centers.append(self._centers_of_mass(particles, body_q, followed)[0])

    @property
    def frame_count(self):
        return len(self.times)

    def recorded(self):
        """The pictures kept so far as arrays (``restore`` takes them back: a run that goes on from a saved point)."""
        return {"times": np.asarray(self.times), "points": np.asarray(self._points), "bodies": np.asarray(self._bodies),
                "centers": np.asarray(self.centers)}

    def restore(self, arrays):
        """Keep the pictures ``recorded`` returned (of an animation of the same snakes) instead of these."""
        times = np.asarray(arrays["times"], dtype=float)
        points, bodies, centers = (np.asarray(arrays[name]) for name in ("points", "bodies", "centers"))
        if not len(points) == len(bodies) == len(centers) == len(times) or (
                len(times) and points.shape[1:] != (self.snake_count, len(self._link_particles), 3)):
            raise ConfigError(f"saved pictures of shape {points.shape} are not of this animation's {self.snake_count} "
                              f"snakes")
        self.times = times.tolist()
        self._points, self._bodies, self.centers = list(points), list(bodies), list(centers)

    def parts(self, index):
        """The ``Part`` list of picture ``index``."""
        parts = []
        modules = len(self._modules)
        for s in range(self.snake_count):
            parts.append(Part(self._points[index][s], self._faces, snake_color(s)))
            for k, pose in enumerate(self._bodies[index][s]):
                mesh, color = (self._module_mesh, MODULE_COLOR) if k < modules else (self._wheel_mesh, WHEEL_COLOR)
                parts.append(posed(mesh, pose[:3], pose[3:7], color))
        return parts

    def write(self, path, *, title=""):
        """Write the recorded pictures as an animated GIF (complete or absent); returns the path."""
        frames = [self.parts(k) for k in range(self.frame_count)]
        fps = 1.0 / (self.stride * self.dt)
        close_up = CloseUp(np.array(self.centers), self._close_up_span, f"snake {self.followed}, close-up")
        return write_gif(path, frames, self.times, title=title, fps=fps, close_up=close_up)
