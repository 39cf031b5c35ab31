"""Fitting vine stiffness models to Chen et al.'s real videos (seed 003 sec. IV-C), with gradients
through the engine.

Models (:class:`VideoModel`, seed 003's three): every model fits the body mass m, the body inertia I
and the pin damping C (seed 003 also fits the growth rate u; here the growth follows each video's
length schedule, which the video measures directly), and its stiffness:

* "linear": the pins' stiffness K (seed 000);
* "wrinkling": the tube's pressure P, which sets the wrinkling moment of seed 003 eqs. 1-2 (its
  criterion eps_crit(P) from the paper's cubic fit, the tube radius from the video);
* "mlp": the 3 H weights of seed 003's two-layer MLP of H = 10 tanh units (``stiffness.MlpMoment``,
  odd and monotone by construction), at a fixed moment scale ``MLP_MOMENT_SCALE``.

Positive parameters are fitted in their logarithms (within ``LOG_BOUNDS``), the MLP's weights as
they are. The fit is Adam (seed 003 uses AdamW) or L-BFGS-B (SciPy) on the training videos' mean
loss; every evaluation is one batched rollout of all training videos and its gradient
(``vine_gradients``: the adjoint of each converged step). Rollouts along walls make the loss rough
(a vine slips past a wall's end or not; the wrinkling curve's flat part): L-BFGS-B's line searches
stalled there (the wrinkling rollout fit did not leave its start in 10 evaluations), Adam's steps
do not. At a fixed rate Adam does not settle: it circles a minimum at the rate's distance (the
wrinkling rollout fit's best loss still fell 10 % between its 20th and 40th evaluation while its loss
swung by 20 %). So a fit explores at the fixed rate for ``ADAM_EXPLORATION`` evaluations (halving it at
once where the loss stops falling, it settled in the first dip of a rough loss: the wrinkling rollout
fit at 408 mm^2 where exploring finds 366 and refining 351, at the 30 x 60 solves of the twenty-fourth session), then refines from the best point met: the
rate halves, back at the best point, whenever ``ADAM_PATIENCE`` evaluations in a row lower the best loss by less than
``ADAM_IMPROVEMENT`` in all, and the fit stops, converged at the rate's resolution, where the rate would
fall below ``ADAM_FINAL_RATE``. It converges to a local minimum of a rough loss, not a global one.

Losses (``backbones``: both backbones resampled to 50 points evenly in arc length, mean squared
distance of corresponding points [m^2]):

* "rollout": one rollout per video from its first frame, the loss averaged over the video's frames,
  then over the videos; what a user who predicts the robot needs;
* "one_step": seed 003's, from the video's state at every ``ONE_STEP_STRIDE``-th frame (positions
  and backward-difference velocities, ``video.video_state``) one frame interval ahead, averaged over
  all those predictions of all training videos.

Numerical settings (``FIT_LINKS``, ``FIT_DT``, ``SOLVER_OPTIONS``): 10 links and steps of 1/30 s
(three per video frame) keep a gradient of all training videos within minutes on a CPU; the solves
run to 200 x 200 iterations with a tenth of the engine's proximal contact regularisation
(``CONTACT_REGULARIZATION``), where every model's rollouts of the training videos converge: the training
loss moves by at most 0.04 mm rms to 400 x 400 (``experiments/results/video_fit_convergence.md``). They do
not balance momentum (``SolverSettings``: the balanced iteration does not converge the wrinkling model
pressed on a wall at any budget up to 400 x 400), so the gradients carry the momentum lag of bodies that
turn within a step, and the plain iteration's end depends a little on the iterations it took (the lag of its
path: up to 0.2 mm rms in the training loss between budgets that both converge).
``experiments/fit_real_videos.py`` re-evaluates the fits at the papers' 1/90 s and at 400 x 400.
"""

import dataclasses
import math
import time

import numpy as np
from scipy.optimize import minimize

from softsnake.errors import ConfigError, ModelError, SimulationError

from .backbones import SHAPE_SAMPLES, resample_polyline, resampled_squared_distance, rollout_loss, video_errors
from .fitting import SOLVER_OPTIONS as WALL_FIT_OPTIONS
from .gradients import mlp_weight_gradient, vine_gradients, wrinkling_pressure_gradient
from .robot import MOMENT_CURVE_MAX_ANGLE, mlp_moment_curve
from .scene import VineParams
from .simulation import VineBatch, VineSpec, pin_points, pin_points_adjoint
from .stiffness import MlpMoment, eps_crit_pressure
from .video import growth_schedule, rollout_videos, steps_per_frame, video_state, video_vine

CONTACT_REGULARIZATION = 1e-3
"""The fit's proximal contact regularisation (``SolverSettings.contact_regularization``, the engine's 1e-2) [-].
The wrinkling fits end with heavy body rotations (inertia 0.001-0.005 kg m^2 on 2 g bodies): a pinned chain pressed
on a wall then moves only through them, the contact rows' J M^-1 J^T has eigenvalues far below its diagonal, and
the engine's proximal term (1e-2 of the diagonal, in the matrix only) shortens each Newton step there to a small
fraction. At 1e-2 the wrinkling model's rollouts of the training videos never converge (at its initial values 319
of 1 536 substeps unconverged at 200 x 200 and 131 at 400 x 400, the loss 22.21 -> 22.89 mm rms between the two);
at 1e-3 4 substeps stay unconverged at 200 x 200 and 400 x 400 and the loss moves by 0.04 mm; at 1e-5 the systems
lose their regularity and rollouts blow up (``experiments/results/video_fit_convergence.md``)."""

SOLVER_OPTIONS = {**WALL_FIT_OPTIONS, "newton_iterations": 200, "linear_iterations": 200,
                  "contact_regularization": CONTACT_REGULARIZATION, "energy_floor": 1e-3}
"""The fit's solver settings: ``fitting.SOLVER_OPTIONS`` (the plain iteration at the engine's Newton tolerance,
no stop at the round-off floor), at 200 x 200 iterations with ``CONTACT_REGULARIZATION``, where every model's
rollouts of the training videos converge (``experiments/results/video_fit_convergence.md``: at most 4 of 1 536
substeps unconverged, the training loss within 0.04 mm of 400 x 400; until the twenty-fifth session the fits
ran at 30 x 60 with the engine's regularisation, which left 1 044 of the wrinkling rollout fit's 1 536 training substeps unconverged
and its training loss 18.74 mm rms where converged it is 21.3), and the blow-up check's kinetic energy floor
raised from 1e-6 J to 1e-3 J. The videos'
growth stalls for a few frames at times (their length schedules); a vine pressed against a wall then
comes to rest and, when growth resumes, slips off with the strain energy it held: video 3 at the
initial linear model goes from 1.7e-6 J to 2.7e-4 J in one step of 1/30 s, identically at 30 x 60 and
100 x 200 iterations (physics, not a diverging solve), which the default floor's one-step rule flagged as a
blow-up (it no longer judges a slow world near a turning point, ``kernels.checks.TURNING_FRACTION``). At the
default floor the check still stops the wrinkling model at its start values on video 6 (step 119 at 1/30 s)
and video 3 (step 326 at 1/90 s), more than 31.6 times in each of two steps, and the one-step-fitted models as
they start from rest on video 1 (step 4 at 1/30 s, step 10 at 1/90 s), more than 100 times in one step. A diverging solve
still passes 1e-3 J within steps (a vine's kinetic energy while growing is 1e-5 to 5e-4 J), and the speed
limits hold."""

UNCONVERGED_LIMIT = 0.01
"""Share of a rollout's substeps that may end unconverged where the rollout still counts as converged [-]: at the
fit's settings a few substeps of the heavy wrinkling models stay unconverged at every budget (4 of 1 536 at 200 x 200
and at 400 x 400, the loss within 0.04 mm), while a short budget leaves many (``experiments/video_fit_convergence.py``)."""

FIT_BUDGET = {key: SOLVER_OPTIONS[key] for key in ("newton_iterations", "linear_iterations")}
"""The fit's solver budget, the iterations of ``SOLVER_OPTIONS`` (200 x 200): ``softsnake fit --budget``'s default."""

MODELS = ("linear", "mlp", "wrinkling")
"""Stiffness models a video fit accepts."""

LOSSES = ("rollout", "one_step")
"""Losses a video fit accepts (module docstring)."""

FIT_LINKS = 10
"""Links of the fitted vines [-]."""

FIT_DT = 1.0 / 30.0
"""Time step of the fit's rollouts [s] (three per video frame of 0.1 s)."""

ONE_STEP_STRIDE = 5
"""The one-step loss starts from every this many frames of each video [-]."""

MLP_MOMENT_SCALE = 0.05
"""Moment of a unit MLP output [N m]: the order of the linear model's moment at 1 rad (K about 0.03-0.1
N m/rad on the videos)."""

START = {"linear": {"body_mass": 0.002, "body_inertia": 5e-5, "damping": 1e-4, "stiffness": 0.03},
         "mlp": {"body_mass": 0.002, "body_inertia": 5e-5, "damping": 1e-4},
         "wrinkling": {"body_mass": 0.002, "body_inertia": 5e-3, "damping": 1e-2, "pressure": 6894.757}}
"""Initial values of each model's fit [SI]: VineParams' mass and stiffness, an inertia and damping ten
times VineParams' for the linear and MLP pins (sqrt(K / I) 24 rad/s; the MLP's initial slope is about
the linear K), and for the wrinkling model 1 psi (its moment then holds 0.41 N m from its onset at 1.1
degrees on the 67 mm tube, an elastic slope of 21 N m/rad) with a hundred times more inertia and damping
(sqrt(K / I) 65 rad/s, C / I the same 2/s): at up to 5e-4 kg m^2 its bodies are flung off (tip errors of
metres, at 1/30 and at 1/90 s), and at 5e-3 kg m^2 the linear pins are too slow (video 3: tip error
371 mm against 39 mm at 5e-5)."""

FIRST_STEP = 0.5
"""Length of an L-BFGS-B fit's first step in the fitted vector (logs: a factor e^0.5 = 1.65 at most).
L-BFGS-B starts a bounded problem with the raw negative gradient as its step, so the objective is
scaled by FIRST_STEP / |its first gradient| (its minimiser unchanged): unscaled, the steps were a few
per cent and 20 evaluations moved the rollout fit by 2 % of its loss."""

LOG_BOUNDS = {"body_mass": (1e-4, 1.0), "body_inertia": (1e-7, 1e-1), "damping": (1e-7, 1.0),
              "stiffness": (1e-5, 10.0),
              "pressure": (10.0, (1.0 - 1e-3) * eps_crit_pressure(math.sin(0.5 * MOMENT_CURVE_MAX_ANGLE)))}
"""Bounds of the positive parameters [SI]. The wrinkling pressure's upper bound (about 43.1 kPa) keeps the wrinkling
onset, 2 asin(eps_crit), inside the pins' sampled moment curve (``robot.MOMENT_CURVE_MAX_ANGLE``), so that the
curve's samples, and its derivative in the pressure, stay the same around every pressure the fit tries; it lies just
below the end of the eps_crit cubic (``stiffness.EPS_CRIT_PRESSURE_LIMIT``, 43.2 kPa). With 1e5 Pa, fits stepped
beyond either and stopped with the cubic's or the derivative's error."""


@dataclasses.dataclass(frozen=True, eq=False)
class VideoModel:
    """A stiffness model with its fitted values (module docstring).

    kind: "linear", "mlp" or "wrinkling"
    values: {name: value} of the positive parameters [SI]: body_mass, body_inertia, damping, and
        stiffness (linear) or pressure (wrinkling)
    mlp: the MlpMoment of an "mlp" model, else None
    """

    kind: str
    values: dict
    mlp: MlpMoment = None

    def __post_init__(self):
        if self.kind not in MODELS:
            raise ConfigError(f"the stiffness model must be one of {', '.join(MODELS)}, got {self.kind!r}")
        missing = set(self.positive_names()) - set(self.values)
        if missing:
            raise ConfigError(f"a {self.kind} model needs values for {', '.join(sorted(missing))}")
        if (self.kind == "mlp") != (self.mlp is not None):
            raise ConfigError("an MLP weight set goes with the 'mlp' model, and with it only")

    @classmethod
    def initial(cls, kind, *, seed=0):
        """The model ``kind`` at the fit's initial values (``START``; the MLP's weights Xavier-random from
        ``seed``, its scale ``MLP_MOMENT_SCALE``)."""
        if kind not in START:
            raise ConfigError(f"the stiffness model must be one of {', '.join(MODELS)}, got {kind!r}")
        mlp = MlpMoment.random(seed, moment_scale=MLP_MOMENT_SCALE) if kind == "mlp" else None
        return cls(kind, dict(START[kind]), mlp)

    def positive_names(self):
        """Names of the positive parameters, in the order of the fitted vector."""
        stiffness = {"linear": ("stiffness",), "wrinkling": ("pressure",), "mlp": ()}[self.kind]
        return ("body_mass", "body_inertia", "damping", *stiffness)

    def vector(self):
        """The fitted vector: log of each positive parameter, then the MLP's weights."""
        logs = np.log([self.values[n] for n in self.positive_names()])
        return logs if self.mlp is None else np.concatenate([logs, self.mlp.as_vector()])

    def with_vector(self, x):
        """The model at the fitted vector ``x``."""
        names = self.positive_names()
        values = {n: float(math.exp(v)) for n, v in zip(names, x)}
        mlp = None if self.mlp is None else MlpMoment.from_vector(np.asarray(x[len(names):]), self.mlp.moment_scale)
        return VideoModel(self.kind, values, mlp)

    def bounds(self):
        """L-BFGS-B bounds of the fitted vector."""
        logs = [tuple(np.log(LOG_BOUNDS[n])) for n in self.positive_names()]
        return logs + ([(None, None)] * (3 * self.mlp.hidden_units) if self.mlp is not None else [])

    def vine(self, video, link_count=FIT_LINKS):
        """The VineParams of this model grown in ``video`` (``video.video_vine``)."""
        vine = VineParams(stiffness_model="wrinkling" if self.kind == "wrinkling" else "linear", **self.values)
        return video_vine(video, vine, link_count=link_count)

    def moment_curve(self):
        """(angles, moments) of an MLP model's pins, else None (the vine's own stiffness model)."""
        return None if self.mlp is None else mlp_moment_curve(self.mlp)

    def vector_gradient(self, gradients, vine):
        """dL/d(fitted vector) from a ``vine_gradients`` entry of a vine of this model (``vine``, its
        VineParams)."""
        logs = []
        for name in self.positive_names():
            if name == "pressure":
                derivative = wrinkling_pressure_gradient(gradients, vine)
            else:
                derivative = gradients[name]
            logs.append(derivative * self.values[name])  # d/d(log p) = p d/dp
        if self.mlp is None:
            return np.asarray(logs)
        angles, _ = self.moment_curve()
        return np.concatenate([logs, mlp_weight_gradient(gradients, self.mlp, angles)])

    def describe(self):
        """One line with the values (SI units)."""
        parts = [f"{n} {self.values[n]:.4g}" for n in self.positive_names()]
        if self.mlp is not None:
            parts.append(f"MLP of {self.mlp.hidden_units} units")
        return f"{self.kind}: " + ", ".join(parts)


def rollout_parts(model, videos, *, link_count=FIT_LINKS, dt=FIT_DT, solver_options=None, video_count=None,
                  device=None):
    """Per video of ``videos``: its rollout loss (``backbones.rollout_loss``) [m^2], and its term of the gradient of the
    mean over ``video_count`` videos (default: these) with respect to ``model.vector()``, from one batch. A fit split
    over worker processes (``FitWorkers``) joins the shares' terms in video order: the same numbers as one batch of
    every video (each vine's arithmetic does not depend on the others in its batch)."""
    videos = list(videos)
    video_count = len(videos) if video_count is None else video_count
    curve = model.moment_curve()
    vines = [model.vine(video, link_count) for video in videos]
    batch = VineBatch([VineSpec(vine, video.walls, moment_curve=curve) for vine, video in zip(vines, videos)],
                      solver_options=SOLVER_OPTIONS if solver_options is None else solver_options, device=device)
    per_frame = np.array([steps_per_frame(video, dt) for video in videos])
    frames = np.array([video.frame_count for video in videos])
    steps = int(np.max((frames - 1) * per_frame))
    targets = [[resample_polyline(backbone, SHAPE_SAMPLES) for backbone in video.backbones()] for video in videos]
    V = len(videos)
    losses = np.array([resampled_squared_distance(pin_points(p, d), t[0])[0] / n
                       for p, d, t, n in zip(batch.poses(), batch.half_length, targets, frames)])

    def adjoint_at(k, poses):
        done = k + 1
        looking = np.flatnonzero((done % per_frame == 0) & (done // per_frame < frames))
        if not len(looking):
            return None
        adjoint = np.zeros((V, batch.body_count, 3))
        for v in looking:
            loss, gradient = resampled_squared_distance(pin_points(poses[v], batch.half_length[v]),
                                                        targets[v][done // per_frame[v]])
            losses[v] += loss / frames[v]
            adjoint[v] = pin_points_adjoint(gradient, poses[v], batch.half_length[v]) / (frames[v] * video_count)
        return adjoint

    gradients = vine_gradients(batch, steps, dt, lambda poses: np.zeros((V, batch.body_count, 3)),
                               pose_adjoint_at=adjoint_at, growth_rates=growth_schedule(videos, per_frame, steps))
    return losses, [model.vector_gradient(g, vine) for g, vine in zip(gradients, vines)]


def rollout_loss_and_gradient(model, videos, *, link_count=FIT_LINKS, dt=FIT_DT, solver_options=None):
    """The rollout loss of ``model`` on ``videos`` (mean over videos of ``backbones.rollout_loss``) [m^2],
    its gradient with respect to ``model.vector()``, and the loss per video (V,), from one batch."""
    losses, terms = rollout_parts(model, videos, link_count=link_count, dt=dt, solver_options=solver_options)
    return float(losses.mean()), sum(terms), losses


def one_step_worlds(model, videos, *, stride=ONE_STEP_STRIDE, link_count=FIT_LINKS):
    """The one-step loss's worlds: (VineSpecs, their vines, (video index, start frame) per world). A start
    frame whose backbone is too short for the vine's bodies is left out (``video.one_step_predictions``)."""
    curve = model.moment_curve()
    specs, vines, origins = [], [], []
    for v, video in enumerate(videos):
        vine = model.vine(video, link_count)
        for start in range(0, video.frame_count - 1, stride):
            try:
                poses, rates = video_state(video, start, vine, velocities=True)
            except ModelError:
                continue
            specs.append(VineSpec(vine, video.walls, initial_poses=poses, initial_velocities=rates, moment_curve=curve))
            vines.append(vine)
            origins.append((v, start))
    if not specs:
        raise ConfigError("no frame of these videos gives a start state the vine's bodies fit in")
    return specs, vines, origins


class KeptBatch:
    """A fit's one-step batch kept from one evaluation to the next: the same worlds with the next model's parameters
    (``VineBatch.restart``: bit for bit a new batch, without building its ~100 vines again: 0.44 s of a 1.86 s
    evaluation of the wrinkling model on videos 2, 3 and 5). A batch whose evaluation failed is built again."""

    def __init__(self):
        self.batch, self.key = None, None

    def get(self, specs, solver_options, device):
        """A VineBatch of ``specs``: the kept one restarted where it was built for the same worlds and options."""
        key = (tuple(sorted(solver_options.items())), device)
        if self.batch is not None and key == self.key:
            try:
                self.batch.restart(specs)
                return self.batch
            except ConfigError:
                pass
        self.drop()  # no batch kept while the new one is built, if it fails
        self.batch, self.key = VineBatch(specs, solver_options=solver_options, device=device), key
        return self.batch

    def drop(self):
        self.batch, self.key = None, None


def one_step_parts(model, videos, worlds, *, link_count=FIT_LINKS, dt=FIT_DT, solver_options=None, world_count=None,
                   device=None, kept=None):
    """Per world of ``worlds`` (``one_step_worlds(model, videos)``): its one-step loss [m^2], and its term of the
    gradient of the mean over ``world_count`` worlds (default: these) with respect to ``model.vector()``, from one
    batch (joined by ``FitWorkers`` as ``rollout_parts``). ``kept``: a KeptBatch to take the batch from (and keep it
    in), else a new batch."""
    specs, vines, origins = worlds
    world_count = len(specs) if world_count is None else world_count
    per_frame = {steps_per_frame(video, dt) for video in videos}
    if len(per_frame) != 1:
        raise ConfigError("the one-step loss needs one frame interval for all videos")
    steps = per_frame.pop()
    options = SOLVER_OPTIONS if solver_options is None else solver_options
    if kept is None:
        batch = VineBatch(specs, solver_options=options, device=device)
    else:
        batch = kept.get(specs, options, device)
    try:
        return _one_step_parts(model, videos, specs, vines, origins, world_count, steps, dt, batch)
    except BaseException:
        if kept is not None:
            kept.drop()  # a batch stopped part-way (a blow-up, an interrupt) is not restarted
        raise


def _one_step_parts(model, videos, specs, vines, origins, world_count, steps, dt, batch):
    """``one_step_parts`` on its batch."""
    rates = np.array([videos[v].frame_growth_rates()[start] for v, start in origins])
    targets = [resample_polyline(videos[v].backbone(start + 1), SHAPE_SAMPLES) for v, start in origins]
    W = len(specs)
    world_losses = np.zeros(W)

    def final_adjoint(poses):
        adjoint = np.zeros((W, batch.body_count, 3))
        for w in range(W):
            loss, gradient = resampled_squared_distance(pin_points(poses[w], batch.half_length[w]), targets[w])
            world_losses[w] = loss
            adjoint[w] = pin_points_adjoint(gradient, poses[w], batch.half_length[w]) / world_count
        return adjoint

    gradients = vine_gradients(batch, steps, dt, final_adjoint, growth_rates=np.tile(rates, (steps, 1)))
    return world_losses, [model.vector_gradient(g, vine) for g, vine in zip(gradients, vines)]


def one_step_loss_and_gradient(model, videos, *, stride=ONE_STEP_STRIDE, link_count=FIT_LINKS, dt=FIT_DT,
                               solver_options=None, kept=None):
    """Seed 003's one-step loss of ``model`` on ``videos`` (module docstring) [m^2], its gradient with
    respect to ``model.vector()``, and the loss per video (V,), from one batch of every start state (``kept``: a
    KeptBatch that holds it from one call to the next)."""
    videos = list(videos)
    worlds = one_step_worlds(model, videos, stride=stride, link_count=link_count)
    world_losses, terms = one_step_parts(model, videos, worlds, link_count=link_count, dt=dt,
                                         solver_options=solver_options, kept=kept)
    return float(world_losses.mean()), sum(terms), one_step_video_losses(world_losses, worlds[2], len(videos))


def one_step_video_losses(world_losses, origins, video_count):
    """The one-step loss per video (V,): the mean over its worlds (``origins``: (video index, start frame) each); NaN
    for a video that gives no world (every frame's backbone too short for the vine's bodies)."""
    per_video = [world_losses[[w for w, (v, _) in enumerate(origins) if v == index]] for index in range(video_count)]
    return np.array([losses.mean() if len(losses) else math.nan for losses in per_video])


LOSS_FUNCTIONS = {"rollout": rollout_loss_and_gradient, "one_step": one_step_loss_and_gradient}


@dataclasses.dataclass
class VideoFit:
    """A fit's result: the fitted model, the loss [m^2] and the model at every evaluation, the wall time
    [s], how it ended (the optimiser's message), and the evaluations that failed: (evaluation number,
    what failed: a rollout's blow-up, an adjoint that blew up, a saturated MLP curve)."""

    model: VideoModel
    losses: list
    models: list
    seconds: float
    message: str
    failures: list = dataclasses.field(default_factory=list)

    @property
    def evaluations(self):
        """Rollouts with their gradient the fit took [-]."""
        return len(self.losses)


OPTIMIZERS = ("adam", "lbfgs")
"""Optimisers of ``fit_videos``."""

ADAM_RATE = 0.1
"""Adam's first step per coordinate of the fitted vector [-]: about 10 % of a positive parameter per iteration."""

ADAM_EXPLORATION = 40
"""Evaluations at the first rate before the refinement starts [-]."""

ADAM_PATIENCE = 5
"""Evaluations in a row without a new best loss (by ``ADAM_IMPROVEMENT``) after which Adam goes back to its best
point at half the rate [-]."""

ADAM_IMPROVEMENT = 1e-3
"""Least relative fall of the best loss that counts as progress [-]."""

ADAM_FINAL_RATE = ADAM_RATE / 16
"""Adam's convergence: it stops where the rate would halve below this [-] (steps of 0.6 % of a positive parameter
that no longer lower the loss by 0.1 % in ``ADAM_PATIENCE`` evaluations)."""


def _adam(evaluate_at, x0, bounds, iterations, rate, *, exploration=ADAM_EXPLORATION, patience=ADAM_PATIENCE,
          improvement=ADAM_IMPROVEMENT, final_rate=ADAM_FINAL_RATE):
    """Adam (Kingma and Ba; seed 003 fits with AdamW, here without weight decay: every parameter is
    physical) on the fitted vector within ``bounds``, at most ``iterations`` evaluations. ``evaluate_at(x)``
    gives (loss, gradient), or None where the rollout failed. A failed evaluation, the end of the first
    ``exploration`` evaluations, and after them ``patience`` in a row over which the best loss fell by less
    than the fraction ``improvement``, send it back to the best point with half the rate and fresh moments;
    it stops, converged, where the rate would fall below ``final_rate``. Returns a message that says which
    way it ended."""
    lower = np.array([-np.inf if low is None else low for low, _ in bounds])
    upper = np.array([np.inf if high is None else high for _, high in bounds])
    x, best_x, best = np.array(x0, dtype=float), np.array(x0, dtype=float), math.inf
    beta1, beta2, eps = 0.9, 0.999, 1e-12
    first, second, t = np.zeros_like(x), np.zeros_like(x), 0
    # Progress is the best loss's fall since the last evaluation that counted as progress, so that a slow but
    # steady descent (a fraction of `improvement` each evaluation) adds up and is not taken for a plateau.
    stale, reference = 0, math.inf
    for evaluation in range(1, iterations + 1):
        result = evaluate_at(x)
        if result is not None:
            value, gradient = result
            if value < best:
                best, best_x = value, x.copy()
            stale, reference = (0, best) if best < reference * (1.0 - improvement) else (stale + 1, reference)
        if result is None or evaluation == exploration or (evaluation > exploration and stale >= patience):
            if 0.5 * rate < final_rate and result is None:
                return f"Adam: stopped after {evaluation} evaluations: one failed at its smallest rate {rate:g}"
            if 0.5 * rate < final_rate:
                return (f"Adam: converged after {evaluation} evaluations (no {improvement:.1%} fall of the loss in "
                        f"{patience} at rate {rate:g})")
            x, rate, stale = best_x.copy(), 0.5 * rate, 0
            first, second, t = np.zeros_like(x), np.zeros_like(x), 0
            continue
        t += 1
        first = beta1 * first + (1.0 - beta1) * gradient
        second = beta2 * second + (1.0 - beta2) * gradient ** 2
        step = (first / (1.0 - beta1 ** t)) / (np.sqrt(second / (1.0 - beta2 ** t)) + eps * np.abs(gradient).max() + 1e-300)
        x = np.clip(x - rate * step, lower, upper)
    return f"Adam: not converged, stopped at its {iterations} evaluations at rate {rate:g}"


def fit_videos(kind, videos, *, loss="rollout", optimizer="adam", max_evaluations=20, start=None,
               link_count=FIT_LINKS, dt=FIT_DT, solver_options=None, progress=None, workers=1):
    """Fit the stiffness model ``kind`` to ``videos`` on ``loss`` ("rollout" or "one_step").

    optimizer: "adam" (``ADAM_RATE`` per coordinate and iteration at first, halved where the loss stops falling,
        until ``ADAM_FINAL_RATE``; robust where the loss is rough, as rollouts along walls are) or "lbfgs"
        (L-BFGS-B, SciPy; fewer evaluations on smooth losses)
    start: the VideoModel to start from (default ``VideoModel.initial(kind)``)
    max_evaluations: most loss-and-gradient evaluations (each a batched rollout of the videos)
    progress: optional callable(evaluation, loss [m^2], model), called after every evaluation
    workers: CPU processes that share the videos of every evaluation (``fit_workers.FitWorkers``: the same losses
        and gradients bit for bit); 1 (default): this process alone, on Warp's default device; None: one per CPU
        core this process may use (at most one per video)
    An evaluation whose rollout blows up (SimulationError) or whose MLP curve saturates (ModelError)
    has no gradient: Adam goes back to the best point with half the rate, L-BFGS-B sees a loss 100
    times the best so far, so its line search steps back. Returns a VideoFit holding the model of the
    lowest loss met.
    """
    if loss not in LOSS_FUNCTIONS:
        raise ConfigError(f"the loss must be one of {', '.join(LOSSES)}, got {loss!r}")
    if optimizer not in OPTIMIZERS:
        raise ConfigError(f"the optimizer must be one of {', '.join(OPTIMIZERS)}, got {optimizer!r}")
    videos = list(videos)
    if not videos:
        raise ConfigError("a fit needs at least one video")
    model = VideoModel.initial(kind) if start is None else start
    if model.kind != kind:
        raise ConfigError(f"the start model is {model.kind!r}, the fit is of {kind!r}")
    clock = time.perf_counter()
    losses, models, failures, best = [], [], [], [math.inf, model]
    pool = None
    if workers != 1:
        from .fit_workers import FitWorkers

        pool = FitWorkers(videos, workers=workers, link_count=link_count, dt=dt, solver_options=solver_options,
                          stride=ONE_STEP_STRIDE)

    kept = {"kept": KeptBatch()} if loss == "one_step" else {}

    def function(trial):
        if pool is not None:
            return pool.loss_and_gradient(trial, loss)
        return LOSS_FUNCTIONS[loss](trial, videos, link_count=link_count, dt=dt, solver_options=solver_options, **kept)

    def evaluate_at(x):
        trial = model.with_vector(x)
        models.append(trial)
        try:
            value, gradient, _ = function(trial)
        except (SimulationError, ModelError) as error:
            value, gradient = math.inf, None
            failures.append((len(losses) + 1, str(error)))
        if value < best[0]:
            best[:] = [value, trial]
        losses.append(value)
        if progress is not None:
            progress(len(losses), value, trial)
        return None if gradient is None else (value, gradient)

    try:
        message = _optimize(optimizer, evaluate_at, model, max_evaluations, best)
    finally:
        if pool is not None:
            pool.close()
    return VideoFit(model=best[1], losses=losses, models=models, seconds=time.perf_counter() - clock, message=message,
                    failures=failures)


def _optimize(optimizer, evaluate_at, model, max_evaluations, best):
    """Run ``optimizer`` ("adam" or "lbfgs") on ``evaluate_at`` from ``model``; its closing message."""
    if optimizer == "adam":
        message = _adam(evaluate_at, model.vector(), model.bounds(), max_evaluations, ADAM_RATE)
    else:
        scale = []

        def objective(x):
            result = evaluate_at(x)
            if result is None:
                return (100.0 * best[0] if math.isfinite(best[0]) else math.inf), np.zeros(len(x))
            value, gradient = result
            if not scale:
                norm = float(np.linalg.norm(gradient))
                scale.append(FIRST_STEP / norm if norm > 0.0 else 1.0)
            return scale[0] * value, scale[0] * gradient

        message = str(minimize(objective, model.vector(), jac=True, method="L-BFGS-B", bounds=model.bounds(),
                               options={"maxfun": max_evaluations}).message)
    return message


def evaluate(model, videos, *, link_count=FIT_LINKS, dt=FIT_DT, solver_options=None):
    """``model`` rolled out on every video (one batch): per video a dict of its tip and shape errors
    (``backbones.VideoErrors.summary``: mean and max, in m and tube diameters), its rollout loss
    [m^2], its substeps, Newton steps and unconverged substeps (``NewtonCounts``); and the VideoRollouts."""
    videos = list(videos)
    vines = [model.vine(video, link_count) for video in videos]
    rollouts = rollout_videos(videos, vines, moment_curves=model.moment_curve(), link_count=link_count, dt=dt,
                              solver_options=SOLVER_OPTIONS if solver_options is None else solver_options)
    rows = []
    for video, rollout in zip(videos, rollouts):
        errors = video_errors(list(rollout.backbones), video)
        row = {"video": video.number, **errors.summary()}
        row["rollout_loss_m2"] = rollout_loss(list(rollout.backbones), video.backbones())
        row["substeps"] = int(rollout.newton_counts.substeps[0])
        row["unconverged_substeps"] = int(rollout.newton_counts.unconverged_ends[0])
        row["newton_steps"] = int(rollout.newton_counts.newton_steps[0])
        row["wander_returns"] = int(rollout.newton_counts.wander_returns[0])
        rows.append(row)
    return rows, rollouts


LEGACY_FIT_SETTINGS = {"budget": {"newton_iterations": 30, "linear_iterations": 60}, "contact_regularization": 1e-2}
"""What a fit file written before ``softsnake fit`` recorded them ran at: 30 x 60 iterations and the engine's contact
regularisation (until the twenty-fifth session)."""


def fit_file_settings(document):
    """(budget, contact regularisation) a ``softsnake fit`` JSON document was fitted at (``LEGACY_FIT_SETTINGS`` for
    files that do not record them)."""
    settings = {**LEGACY_FIT_SETTINGS, **document["settings"]}
    return settings["budget"], settings["contact_regularization"]


def model_to_dict(model):
    """A VideoModel as plain JSON data (SI units)."""
    data = {"kind": model.kind, "values": dict(model.values)}
    if model.mlp is not None:
        data["mlp_weights"] = model.mlp.as_vector().tolist()
        data["mlp_moment_scale"] = model.mlp.moment_scale
    return data


def model_from_dict(data):
    """The VideoModel of ``model_to_dict``'s data; ConfigError names what is missing or wrong."""
    try:
        mlp = None
        if "mlp_weights" in data:
            mlp = MlpMoment.from_vector(np.asarray(data["mlp_weights"], dtype=float), float(data["mlp_moment_scale"]))
        return VideoModel(data["kind"], {k: float(v) for k, v in data["values"].items()}, mlp)
    except (KeyError, TypeError, AttributeError) as exc:
        raise ConfigError(f"not a fitted vine model (kind, values, and MLP weights for 'mlp'): missing {exc}") from None
