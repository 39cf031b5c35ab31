"""A seeded fuzzer of the engine: random small models with bad input, built, finalized and stepped.

Each case is drawn from ``numpy.random.default_rng([seed, case])``: a list of builder calls
(particles, bodies, shapes, soft meshes, every constraint type, obstacles, pressure channels, one
or more worlds, and now and then a list changed by hand behind the builder's back) whose
arguments mix ordinary values with bad ones (indices out of range, negative or fractional; 0,
negative, NaN, Inf, 1e30, 1e-30 and values beyond float32 for masses, lengths and moduli; wrong
types), then ``finalize`` and a few solver steps with random time steps, controls and external
forces (some NaN, Inf or huge). A case runs in one of two modes: ``"stop"`` ends it at the first
error, ``"continue"`` catches the builder's and the solver's errors and goes on, as a notebook
user would.

A case ends at a stage ("build", "finalize", "step") in one of these kinds:

- ``finite``: it ran to the end and the state is finite and below the solver's speed bound;
- ``project error``: a ``SoftsnakeError`` whose message names the item, input or world;
- ``unnamed error``: a ``SoftsnakeError`` whose message names none of them;
- ``other exception``: any other exception (a bug: bad input must give a project error);
- ``crash``: the process died (a kernel read past an array, say);
- ``hang``: no result within the time limit;
- ``silent non-finite``: a step returned, but the state is non-finite or runs away.

Crashes and hangs are only seen from outside the process, so ``run_cases`` runs the cases in
worker processes (``python -m softsnake.fuzzing``), many per process; a batch whose process dies
is run again case by case to name the culprit. The test suite (``tests/test_fuzz.py``) runs a few
hundred cases, ``experiments/fuzz.py`` many thousands.
"""

import argparse
import json
import math
import os
import queue
import re
import subprocess
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import numpy as np

STAGES = ("build", "finalize", "step")
KINDS = ("finite", "project error", "unnamed error", "other exception", "crash", "hang", "silent non-finite")
FAILURES = ("unnamed error", "other exception", "crash", "hang", "silent non-finite")
"""The kinds that must never happen."""
MODES = ("stop", "continue")

BAD_NUMBERS = (0.0, -1.0, math.nan, math.inf, -math.inf, 1e30, -1e30, 1e-30, 1e39, 1e46, 1e300, 1e-46)
BAD_TYPES = (None, "x", True, (1.0, 2.0), [])
NAMED = re.compile(r"particle|body|shape|obstacle|soft mesh|distance|tet|attachment|hinge|prismatic|angular spring|"
                   r"pressure|world|replicate|corrupt builder|control\.|state\.|dt\b")
"""What a project error's message must name: an item, an input, a world or the time step."""

RESULT_PREFIX = "FUZZ "

FAULT_VARIABLE = "SOFTSNAKE_FUZZ_FAULTS"
"""Set to "crash:CASE,hang:CASE" for a worker to abort or sleep at those cases: how the tests check that
crashes and hangs are caught and named."""


# ---------------------------------------------------------------------- drawing values
class Draw:
    """Random values for one case: mostly ordinary, sometimes bad (``bad``: the chance of a bad one)."""

    def __init__(self, rng, bad=0.15):
        self.rng = rng
        self.bad = bad

    def chance(self, p):
        return self.rng.random() < p

    def pick(self, values):
        return values[int(self.rng.integers(len(values)))]

    def number(self, low, high):
        """A float in [low, high] (log-uniform for positive ranges), or a bad value."""
        if self.chance(self.bad):
            return self.pick(BAD_NUMBERS + BAD_TYPES) if self.chance(0.85) else self.pick(BAD_TYPES)
        if low > 0:
            return float(math.exp(self.rng.uniform(math.log(low), math.log(high))))
        return float(self.rng.uniform(low, high))

    def scale(self, low, high):
        """A number in [low, high] (log-uniform), or a bad number (never another type)."""
        if self.chance(self.bad):
            return self.pick(BAD_NUMBERS)
        return float(math.exp(self.rng.uniform(math.log(low), math.log(high))))

    def index(self, count, allow_world=False):
        """An index below ``count`` (or -1, the world), or a bad one."""
        if count and not self.chance(self.bad):
            return -1 if allow_world and self.chance(0.2) else int(self.rng.integers(count))
        return self.pick((-1, -7, count, count + 5, 10**6, 10**30, 1.5, math.nan, True, None, "0"))

    def pair(self, count, allow_world=False):
        """Two different indices below ``count`` (the first may be -1, the world), or a bad pair."""
        first = self.index(count, allow_world)
        second = self.index(count)
        if count >= 2 and isinstance(first, int) and first == second and not self.chance(self.bad):
            second = (second + 1) % count
        return first, second

    def positive_vector(self, low, high, n=3):
        """n sizes in [low, high], or one bad component."""
        v = [self.scale(low, high) for _ in range(n)]
        return v if not self.chance(self.bad) else self.vector(high, n)

    def vector(self, scale, n=3):
        """n components of size ``scale``, or one bad component, or the wrong length."""
        v = list(self.rng.uniform(-scale, scale, n))
        if self.chance(self.bad):
            if self.chance(0.2):
                return v[:-1]
            v[int(self.rng.integers(n))] = self.pick(BAD_NUMBERS + (1e5, -2e4))
        return v

    def quaternion(self):
        q = self.vector(1.0, 4)
        return (0.0, 0.0, 0.0, 1.0) if not self.chance(0.5) else q


# ---------------------------------------------------------------------- building
TET_VERTICES = [[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 1.0, 1.0]]
TET_INDICES = [[0, 1, 2, 3], [1, 2, 3, 4]]


def builder_calls(draw, planar):
    """A random list of (method name, args, kwargs) for one world's builder: particles, soft meshes and
    bodies with shapes first, then constraints, pressure channels and obstacles in random order."""
    calls = []
    counts = Counter()  # what the calls would add if all succeeded: indices are drawn from it

    def add(name, *args, **kwargs):
        calls.append((name, args, kwargs))

    def axis():
        return (0, 0, 1) if planar else draw.vector(1.0)

    for _ in range(int(draw.rng.integers(0, 5))):
        if draw.chance(0.2):
            tets = [list(t) for t in TET_INDICES]
            if draw.chance(draw.bad):
                tets[-1][int(draw.rng.integers(4))] = draw.pick((-1, 5, 99))
            with np.errstate(all="ignore"):  # a bad scale makes Inf or NaN vertices: that is the point
                vertices = np.asarray(TET_VERTICES) * draw.scale(0.05, 0.5)
            add("add_soft_mesh", vertices, np.asarray(tets),
                draw.number(100.0, 2000.0), draw.number(1e3, 1e7), draw.number(0.0, 0.45), position=draw.vector(2.0),
                damping=draw.number(0.0, 0.01))
            counts["particle"] += 5
        else:
            add("add_particle", draw.vector(2.0), draw.vector(1.0), draw.number(0.01, 10.0),
                radius=draw.number(0.001, 0.1), kinematic=draw.chance(0.1))
            counts["particle"] += 1
    for _ in range(int(draw.rng.integers(0, 4))):
        shaped = draw.chance(0.6)
        inertia = np.eye(3) * draw.scale(1e-4, 1.0)
        if draw.chance(draw.bad):
            inertia = draw.pick(BAD_TYPES)
        add("add_body", draw.vector(2.0), draw.quaternion() if not planar else (0, 0, 0, 1),
            mass=0.0 if shaped else draw.number(0.01, 10.0), inertia=None if shaped else inertia,
            velocity=draw.vector(1.0), kinematic=draw.chance(0.1))
        if shaped:
            kind = draw.pick(("sphere", "box", "capsule", "cylinder"))
            size = {"sphere": (draw.number(0.01, 0.5),), "box": (draw.positive_vector(0.01, 0.3),),
                    "capsule": (draw.number(0.01, 0.3), draw.number(0.01, 0.3)),
                    "cylinder": (draw.number(0.01, 0.3), draw.number(0.01, 0.3))}[kind]
            body = draw.index(counts["body"] + 1) if draw.chance(draw.bad) else counts["body"]
            add(f"add_shape_{kind}", body, *size, density=draw.number(1.0, 2000.0),
                mu=draw.number(0.0, 1.0) if draw.chance(0.5) else None)
        counts["body"] += 1
    for _ in range(int(draw.rng.integers(0, 8))):
        p, b = counts["particle"], counts["body"]
        feasible = {"distance": p >= 2, "attachment": p >= 1 and b >= 1, "hinge": b >= 1, "prismatic": b >= 1,
                    "spring": b >= 1, "channel": True, "obstacle": True}
        ops = [op for op, ok in feasible.items() if ok or draw.chance(draw.bad)]
        op = draw.pick(ops + ["distance"] * feasible["distance"])
        if op == "distance":
            channel = draw.index(counts["channel"]) if draw.chance(0.3) else -1
            add("add_distance", *draw.pair(p), None if draw.chance(0.5) else draw.number(0.01, 2.0),
                compliance=draw.number(0.0, 1e-3), pressure_channel=channel,
                youngs_modulus=draw.number(1e3, 1e6) if channel != -1 else None)
        elif op == "attachment":
            add("add_attachment", draw.index(b), draw.index(p), compliance=draw.number(0.0, 1e-3))
        elif op == "hinge":
            add("add_hinge", *draw.pair(b, allow_world=True), draw.vector(2.0), axis())
        elif op == "prismatic":
            add("add_prismatic", *draw.pair(b, allow_world=True), draw.vector(2.0),
                (1, 0, 0) if planar else draw.vector(1.0), drive=draw.chance(0.5), rate=draw.number(-0.5, 0.5),
                drive_mobility=draw.number(0.0, 1.0))
        elif op == "spring":
            curve = None
            if draw.chance(0.3):
                curve = ([-1.0, 0.0, 1.0], [-draw.scale(0.1, 2.0), 0.0, draw.number(0.1, 2.0)])
            target = draw.pick((1e9, 1e30, -1e30)) if draw.chance(0.1) else draw.number(-3.0, 3.0)
            add("add_angular_spring", *draw.pair(b, allow_world=True), axis(),
                stiffness=draw.number(0.1, 100.0) if curve is None else None, damping=draw.number(0.0, 1.0),
                target=target, moment_curve=curve)
        elif op == "channel":
            add("add_pressure_channel")
            counts["channel"] += 1
        else:
            kind = draw.pick(("ground", "box", "cylinder"))
            if kind == "ground":
                add("add_ground", mu=draw.number(0.0, 1.0), normal=draw.vector(1.0), height=draw.number(-1.0, 0.0))
            elif kind == "box":
                add("add_obstacle_box", draw.vector(2.0), draw.positive_vector(0.05, 0.5), mu=draw.number(0.0, 1.0))
            else:
                add("add_obstacle_cylinder", draw.vector(2.0), draw.number(0.05, 0.5), draw.number(0.05, 1.0),
                    mu=draw.number(0.0, 1.0))
    if draw.chance(0.03):
        calls.append(("corrupt", (int(draw.rng.integers(1 << 30)),), {}))
    return calls


def corrupt(builder, token):
    """Change one of ``builder``'s lists behind its back (as an interrupted add could have): an extra
    value in one field's list, or an index out of range. ``token`` picks which."""
    from softsnake.items import item_kinds

    rng = np.random.default_rng(token)
    kinds = [k for k in item_kinds() if k.fields]
    kind = kinds[int(rng.integers(len(kinds)))]
    field = kind.fields[int(rng.integers(len(kind.fields)))]
    values = getattr(builder, f"{kind.name}_{field.name}")
    if field.index and values and rng.random() < 0.5:
        k = int(rng.integers(len(values)))
        values[k] = tuple(v + 10**7 for v in values[k]) if isinstance(values[k], tuple) else values[k] + 10**7
    else:
        values.append(values[-1] if values else 0)


def case_plan(seed, case):
    """Everything a case does, drawn from (seed, case): the same for both modes."""
    draw = Draw(np.random.default_rng([seed, case]))
    draw.bad = draw.pick((0.0, 0.01, 0.03, 0.1))
    planar = draw.chance(0.2)
    gravity = (0.0, 0.0, -9.81) if draw.chance(0.8) else (0.0, 0.0, 0.0)
    worlds = 0 if draw.chance(0.6) else int(draw.rng.integers(1, 4))
    plan = {"planar": planar, "gravity": gravity, "worlds": [], "scene": [], "steps": []}
    if worlds:
        for _ in range(worlds):
            mismatch = draw.chance(0.05)
            plan["worlds"].append({"calls": builder_calls(draw, planar), "offset": draw.vector(3.0),
                                   "planar": planar != mismatch,
                                   "replicate": draw.pick((0, 1.5, -1, "2")) if draw.chance(draw.bad) else draw.pick((1, 2))})
        if draw.chance(0.5):
            plan["scene"].append(("add_ground", (), {"mu": draw.number(0.0, 1.0)}))
    else:
        plan["scene"] = builder_calls(draw, planar)
    plan["solver"] = {"substeps": int(draw.rng.integers(1, 3)), "newton_iterations": int(draw.rng.integers(1, 4)),
                      "linear_iterations": int(draw.rng.integers(4, 12)),
                      "linear_solver": draw.pick(("per_world", "batched"))}
    for _ in range(int(draw.rng.integers(1, 5))):
        dt = draw.pick((1 / 60, 1 / 120, 0.01, np.float32(0.01))) if not draw.chance(0.15) else draw.pick(
            (0.0, -0.01, math.nan, math.inf, True, 1e-25, "0.01", None, 1.0))
        plan["steps"].append({"dt": dt, "seed": int(draw.rng.integers(1 << 30)), "bad_input": draw.chance(0.15)})
    # Drawn last, so that the cases of earlier seeds keep every other draw.
    plan["solver"]["compensated_positions"] = draw.chance(0.5)
    return plan


# ---------------------------------------------------------------------- running one case
class CaseResult:
    """How a case ended: stage, kind, the message, and the errors caught on the way (continue mode)."""

    def __init__(self):
        self.stage, self.kind, self.message, self.caught = "build", "finite", "", 0

    def as_dict(self, case):
        return {"case": case, "stage": self.stage, "kind": self.kind, "message": self.message[:300],
                "caught": self.caught}


def _error_kind(exc):
    from softsnake.errors import SoftsnakeError

    if isinstance(exc, SoftsnakeError):
        return "project error" if NAMED.search(str(exc)) else "unnamed error"
    return "other exception"


class Stop(Exception):
    """Ends a case in stop mode (the first error) or on a bug in either mode."""


def _attempt(result, stage, mode, action):
    """Run ``action``; record an error as the case's outcome; in stop mode, or for a bug, end the case."""
    try:
        return action(), True
    except Exception as exc:  # noqa: BLE001 - the fuzzer classifies every exception
        kind = _error_kind(exc)
        result.stage, result.kind, result.message = stage, kind, f"{type(exc).__name__}: {exc}"
        if mode == "stop" or kind != "project error":
            raise Stop() from None
        result.caught += 1
        return None, False


def _apply_calls(builder, calls, result, mode):
    for name, args, kwargs in calls:
        if name == "corrupt":
            corrupt(builder, *args)
            continue
        _attempt(result, "build", mode, lambda: getattr(builder, name)(*args, **kwargs))


def _set_inputs(model, state, control, draw, bad):
    """Random pressures, joint targets, growth rates and external forces; some NaN, Inf or huge if ``bad``."""
    def values(shape, scale):
        a = draw.rng.uniform(-scale, scale, shape)
        if bad and a.size and draw.chance(0.5):
            a.flat[int(draw.rng.integers(a.size))] = draw.pick((math.nan, math.inf, -math.inf, 1e30, 1e9))
        return a.astype(np.float32)

    control.pressure.assign(values(control.pressure.shape, 2e4))
    control.joint_target.assign(values(control.joint_target.shape, 3.0))
    control.prismatic_rate.assign(values(control.prismatic_rate.shape, 0.2))
    state.particle_f.assign(values((model.particle_count, 3), 5.0))
    state.body_f.assign(values((model.body_count, 6), 5.0))


def _state_ok(state, max_speed):
    """Whether positions and velocities are finite and below ``max_speed``."""
    q, qd = state.particle_q.numpy(), state.particle_qd.numpy()
    bq, bqd = state.body_q.numpy(), state.body_qd.numpy()
    finite = all(np.all(np.isfinite(a)) for a in (q, qd, bq, bqd))
    speeds = [np.linalg.norm(a, axis=1) for a in (qd, bqd[:, :3]) if len(a)]
    return finite and all(np.all(s <= max_speed) for s in speeds)


def run_case(seed, case, mode):
    """Build, finalize and step case ``case`` of ``seed`` in this process; returns a ``CaseResult``."""
    import softsnake

    plan = case_plan(seed, case)
    result = CaseResult()
    try:
        scene = softsnake.ModelBuilder(gravity=plan["gravity"], planar=plan["planar"])
        for world in plan["worlds"]:
            builder = softsnake.ModelBuilder(gravity=plan["gravity"], planar=world["planar"])
            _apply_calls(builder, world["calls"], result, mode)
            count = world["replicate"]
            _attempt(result, "build", mode, lambda: scene.replicate(builder, count, spacing=world["offset"]))
        _apply_calls(scene, plan["scene"], result, mode)
        result.stage = "finalize"
        model, ok = _attempt(result, "finalize", mode, lambda: scene.finalize("cpu"))
        if not ok:
            return result
        result.stage = "step"
        solver = softsnake.Solver(model, **plan["solver"])
        state, control = model.state(), model.control()
        stepped = False
        for step in plan["steps"]:
            draw = Draw(np.random.default_rng(step["seed"]))
            _set_inputs(model, state, control, draw, step["bad_input"])
            _, stepped = _attempt(result, "step", mode, lambda: solver.step(state, state, control, step["dt"]))
        if stepped and not _state_ok(state, solver.max_speed):
            result.stage, result.kind, result.message = "step", "silent non-finite", "a step returned a bad state"
        elif stepped:
            result.kind = "finite"
    except Stop:
        pass
    return result


# ---------------------------------------------------------------------- worker processes
def worker_main(argv=None):
    """``python -m softsnake.fuzzing SEED MODE CASE...``: run the cases, one result line each."""
    import warp as wp

    wp.config.quiet = True
    parser = argparse.ArgumentParser(description="run fuzz cases; prints one JSON result line per case")
    parser.add_argument("seed", type=int)
    parser.add_argument("mode", choices=MODES)
    parser.add_argument("cases", type=int, nargs="+")
    args = parser.parse_args(argv)
    faults = dict(f.split(":")[::-1] for f in os.environ.get(FAULT_VARIABLE, "").split(",") if f)
    for case in args.cases:
        if faults.get(str(case)) == "crash":
            os.abort()
        if faults.get(str(case)) == "hang":
            time.sleep(3600)
        result = run_case(args.seed, case, args.mode)
        print(RESULT_PREFIX + json.dumps(result.as_dict(case)), flush=True)
    return 0


def _reader(stream, lines):
    for line in stream:
        lines.put(line)
    lines.put(None)


def _run_process(seed, mode, cases, timeout, startup):
    """Results of ``cases`` run in one worker process, in order, until it ends or stalls.

    Returns (results {case: dict}, how it ended: "done", "crash" or "hang", the process's last output).
    A case counts as hung when no result comes within ``timeout`` s of the last one (``startup`` s for
    the first, which may load or compile the kernels).
    """
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    process = subprocess.Popen([sys.executable, "-m", "softsnake.fuzzing", str(seed), mode, *map(str, cases)],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    lines = queue.Queue()
    threading.Thread(target=_reader, args=(process.stdout, lines), daemon=True).start()
    results, tail, deadline = {}, [], time.monotonic() + startup
    while True:
        try:
            line = lines.get(timeout=max(deadline - time.monotonic(), 0.0))
        except queue.Empty:
            process.kill()
            process.wait()
            return results, "hang", "".join(tail[-5:])
        if line is None:
            code = process.wait()
            return results, "done" if code == 0 else "crash", "".join(tail[-5:]) + f"(exit status {code})"
        if line.startswith(RESULT_PREFIX):
            result = json.loads(line[len(RESULT_PREFIX):])
            results[result["case"]] = result
            deadline = time.monotonic() + timeout
        else:
            tail.append(line)


def _failure(case, kind, tail):
    return {"case": case, "stage": "?", "kind": kind, "message": tail[-300:], "caught": 0}


def run_batch(seed, mode, cases, *, timeout=60.0, startup=600.0):
    """Results of ``cases`` (one dict each, in order), from worker processes: the case during which a
    process crashed is run again alone (to name the culprit), a hung case is ended, and the cases after
    either run on in a new process."""
    results = {}
    pending = list(cases)
    while pending:
        got, ended, tail = _run_process(seed, mode, pending, timeout, startup)
        results.update(got)
        pending = [c for c in pending if c not in results]
        if not pending:
            break
        culprit, pending = pending[0], pending[1:]
        if ended == "hang":
            results[culprit] = _failure(culprit, "hang", tail)
        else:
            # The batch died during its culprit: run it alone to tell its own crash from one that earlier
            # cases of the batch led up to (counted as a crash all the same, with a note).
            alone, ended_alone, tail_alone = _run_process(seed, mode, [culprit], timeout, startup)
            results[culprit] = _failure(culprit, ended_alone, tail_alone) if culprit not in alone else _failure(
                culprit, "crash", f"crashed in its batch but not alone: {tail}")
    return [results[c] for c in cases]


def run_cases(seed, mode, cases, *, workers=2, batch=50, timeout=60.0, startup=600.0):
    """Results of ``cases`` (dicts, in order) over ``workers`` parallel worker processes."""
    cases = list(cases)
    chunks = [cases[k:k + batch] for k in range(0, len(cases), batch)]
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        done = pool.map(lambda chunk: run_batch(seed, mode, chunk, timeout=timeout, startup=startup), chunks)
        return [result for chunk in done for result in chunk]


def outcome_table(results):
    """Counts of (stage, kind) over ``results``: {stage: Counter(kind)}; a crash or hang has stage "?"."""
    table = {stage: Counter() for stage in (*STAGES, "?")}
    for result in results:
        table[result["stage"]][result["kind"]] += 1
    return table


if __name__ == "__main__":
    sys.exit(worker_main())
