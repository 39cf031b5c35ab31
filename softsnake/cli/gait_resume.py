"""``softsnake gait --resume``: the saved point of an interrupted run, and going on from it.

A run that an interrupt stops (Ctrl-C, or a job scheduler's SIGTERM) finishes the frame in progress (in worker
processes, the frames they were sent ahead) and saves, beside its partial files, ``gait.resume.npz``: where it stopped (``RunPoint``: the engine's
state at the end of that frame, everything recorded so far, the solver's counts), the animation's pictures so far
and the run's settings. The same command with ``--resume`` goes on from there and writes what the run would have
written had it never stopped, bit for bit (tests/cli/test_gait_resume.py), in one process or in worker processes
(``--workers``: the same states bit for bit, so either may go on with the other's point); the USD file goes on in
the partial file. It refuses other settings, naming the first that differs: other options, another snake file, another
softsnake or Warp version, other softsnake source code (``provenance.source_digest``: a working tree keeps its version
number across commits), or another kind of device (the CPU and a GPU round differently).

The file is written whole under a temporary name and then renamed, so it is complete or absent.
"""

import hashlib
import json
import os
import zipfile

import numpy as np
import warp as wp

import softsnake
from softsnake.errors import ConfigError, UsageError
from softsnake.provenance import source_digest
from softsnake.robots.snake.simulation import RunPoint

RESUME_NAME = "gait.resume.npz"
PICTURES = "pictures."


def run_settings(args, gait, budget, config):
    """What a continued run must share with the run it continues, as JSON-ready values."""
    return {
        "softsnake": softsnake.__version__,
        "softsnake source": source_digest(),
        "warp": wp.__version__,
        "snakes": args.snakes,
        "seconds": args.seconds,
        "resolution": args.resolution,
        "device": "cuda" if str(args.device).startswith("cuda") else str(args.device),
        "budget": f"{budget['newton_iterations']}x{budget['linear_iterations']}",
        "substeps": budget["substeps"],
        "compensated positions": budget.get("compensated_positions", "auto"),
        "latency": bool(args.latency),
        "supply-psi": args.supply_psi,
        "frequency": gait.frequency.tolist(),
        "phase-shift": gait.phase_shift.tolist(),
        "offset": gait.offset.tolist(),
        "amplitude [Pa]": gait.amplitude.tolist(),
        "snake file": hashlib.sha256(repr(config).encode()).hexdigest()[:16],
        "pictured-snakes": args.pictured_snakes,
        "usd": args.usd_format if args.usd else None,
        "video": bool(args.video),
    }


def save(out, settings, point, animation):
    """Write ``out / RESUME_NAME`` (complete or absent); returns its path."""
    arrays = point.arrays()
    if animation is not None:
        arrays.update({PICTURES + name: value for name, value in animation.recorded().items()})
    arrays["settings"] = np.array(json.dumps(settings))
    path = out / RESUME_NAME
    temporary = path.with_name(f".{path.name}.writing.npz")
    np.savez(temporary, **arrays)
    os.replace(temporary, path)
    return path


def _shown(value):
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."


def load(out, settings):
    """(``RunPoint``, the animation's saved pictures or None) of the interrupted run in ``out``; UsageError if
    there is none or its settings differ from ``settings``."""
    path = out / RESUME_NAME
    if not path.is_file():
        raise UsageError(f"--resume: {path} does not exist (an interrupted run leaves it)")
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {name: data[name] for name in data.files}
        saved = json.loads(str(arrays.pop("settings")))
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
        raise UsageError(f"--resume: cannot read {path}: {exc}") from None
    for key, value in settings.items():
        if saved.get(key) != value:
            raise UsageError(f"--resume: the run in {out} had {key} {_shown(saved.get(key))}, this command "
                             f"{_shown(value)}; give the interrupted run's options")
    pictures = {name[len(PICTURES):]: arrays.pop(name) for name in list(arrays) if name.startswith(PICTURES)}
    try:
        point = RunPoint.from_arrays(arrays)
    except ConfigError as exc:
        raise UsageError(f"--resume: {path}: {exc}") from None
    return point, pictures or None
