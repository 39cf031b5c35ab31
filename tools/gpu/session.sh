#!/usr/bin/env bash
# Runs softsnake's GPU checks on a CUDA machine without network access, from the repository root,
# in stages that each fit a 10-minute command. The payload of tools/gpu/pack.sh travels in parts
# (.gpu/part-NN, one or more per call); `stash` keeps the parts of this call in $STASH, which
# lasts as long as the machine, and `install` unpacks them once all are there.
#
#   bash tools/gpu/session.sh stash              # call 1: keep the parts carried this call
#   bash tools/gpu/session.sh install tests      # call 2: the last parts, unpack, the suite on CUDA
#   bash tools/gpu/session.sh table2             # seed 001's Table II, 1..1024 paper snakes, two solvers
#   bash tools/gpu/session.sh solvers vines      # the linear solvers alone; the vines with all three solvers
#   bash tools/gpu/session.sh gait               # softsnake gait --device cuda --snakes 1024 --seconds 10
#   bash tools/gpu/session.sh gait_start tests   # the same gait in the background (it outlives the call), the suite beside it
#   bash tools/gpu/session.sh gait_wait          # a later call: wait for that gait (up to STAGE_SECONDS), not stopping it
#   bash tools/gpu/session.sh gait_collect table2 # a later call: wait for that gait, bring back what it wrote
#   bash tools/gpu/session.sh resume_fetch       # an interrupted gait's resume point, in parts (RESUME_FIRST: from which)
#   RESUME=1 bash tools/gpu/session.sh gait_start # a later session: the gait goes on from the resume parts carried
#   bash tools/gpu/session.sh worlds             # do identical worlds stay identical (gpu_world_independence.py)
#   bash tools/gpu/session.sh rest               # the snake at rest on the GPU: iterations x linear solvers (snake_at_rest.py)
#   bash tools/gpu/session.sh tet                # the tetrahedra's rows stored or matrix-free: cost and agreement
#
# Several stages in one call run in order, each under STAGE_SECONDS (set it so that they fit the call's
# limit together: `STAGE_SECONDS=270 ... solvers vines`). Output goes to $OUT (the folder
# whose files come back; default ./gpu-out), at most 8 files: each stage writes its log and one
# tar.gz of its result files. A stage stops itself before its time limit (STAGE_SECONDS, default
# 540 s) so that what it printed and wrote comes back; every test is named as it finishes (-vv:
# the project's addopts hold a -q), so a cut run still says which failed.
#
# Environment: PYTHON (default python3), OUT, STASH (default /tmp/softsnake-gpu), STAGE_SECONDS,
# WORKERS (pytest-xdist processes, default 14), SNAKES and GAIT_SECONDS (gait, default 1024 and 10), GAIT_LIMIT
# (gait_start: wall seconds after which the background gait interrupts itself, keeping its partial files; default
# 720), SAVE_SECONDS (gait_collect: how long an interrupted gait may take to write its partial files and resume point;
# default 180: the 1024-snake gait took ~95 s at 997 frames on the H100 machine, before its CSV and GIF were written
# faster), TEST_DEVICES (the
# suite's SOFTSNAKE_TEST_DEVICES) and DEVICE (the benchmarks' and the gait's): both cuda by default, cpu for a
# dry run of a stage here; TABLE2_CASES, TABLE2_PEERS (none: no peer runs) and TABLE2_SOLVERS (table2's --cases,
# --peer-cases and --solvers), SOLVERS_CASES (solvers' --cases: coarse:1024 is the gait's system), VINES_ARGS
# (vine_runtime.py's options but --device and --out) for a shorter stage, REST_ARGS (snake_at_rest.py's,
# the same two apart) and TET_ARGS (tetrahedron_operator.py's, the same two apart); TESTS (pytest's test paths, default all: the files a cut run
# left unrun first, say); TESTS_FILE (a file of test node ids, one per line, instead of TESTS: a cut run
# leaves the tests it did not reach in $STASH/unrun.txt and $OUT/unrun.txt).
#
# A gait longer than a session: interrupted (gait_collect, or its own GAIT_LIMIT), it keeps gait.resume.npz beside
# gait.partial.usdc (softsnake gait --resume). gait_collect packs both into $STASH/resume/part-NN (RESUME_PART_MIB
# each, default 15, with a manifest of sha256 sums); `resume_fetch` brings back 3 parts and the manifest per call
# (RESUME_FIRST=0, 3, 6, ...; a call brings back 64 MiB at most). Here, put them into .gpu/resume/; in a later
# session carry them beside the payload's parts (`stash` keeps .gpu/resume/* too), and RESUME=1 gait_start unpacks
# them into the gait's folder and runs the same gait command with --resume.
set -uo pipefail
cd "$(dirname "$0")/../.."

PYTHON=${PYTHON:-python3}
OUT=${OUT:-$PWD/gpu-out}
STASH=${STASH:-/tmp/softsnake-gpu}
STAGE_SECONDS=${STAGE_SECONDS:-540}
WORKERS=${WORKERS:-14}
SNAKES=${SNAKES:-1024}
GAIT_SECONDS=${GAIT_SECONDS:-10}
GAIT_LIMIT=${GAIT_LIMIT:-720}
SAVE_SECONDS=${SAVE_SECONDS:-180}
DEVICE=${DEVICE:-cuda}
TEST_DEVICES=${TEST_DEVICES:-$DEVICE}
TABLE2_CASES=${TABLE2_CASES:-0.25,1,10,32,128,256,1024}
TABLE2_PEERS=${TABLE2_PEERS:-1,32}
TABLE2_SOLVERS=${TABLE2_SOLVERS:-batched,block}
SOLVERS_CASES=${SOLVERS_CASES:-snake:1,snake:32,vine:1,vine:4096}
TESTS=${TESTS:-}
RESUME=${RESUME:-0}
RESUME_FIRST=${RESUME_FIRST:-0}
RESUME_PART_MIB=${RESUME_PART_MIB:-15}
TESTS_FILE=${TESTS_FILE:-}
REST_ARGS=${REST_ARGS:---substeps 2 --seconds 3 --positions float32 --iterations plain,bodies,balanced --linear-solvers block,batched}
TET_ARGS=${TET_ARGS:---cases 1024,256,1 --solvers block,batched --frames 5 --warmup 2 --repeats 2 --agree-seconds 2}
VINES_ARGS=${VINES_ARGS:---links 15 --sizes 1,256,4096 --bodies 30 --linear-solvers per_world,block,batched}
mkdir -p "$OUT" "$STASH/parts" "$STASH/resume-parts"

use_payload() {
    export PYTHONPATH="$PWD:$STASH/site${PYTHONPATH:+:$PYTHONPATH}"
    export SOFTSNAKE_REFERENCE="$STASH/reference"
    export PYTHONUNBUFFERED=1
}

stash() {
    if compgen -G ".gpu/part-*" > /dev/null; then
        cp .gpu/part-* .gpu/manifest "$STASH/parts/"
    fi
    if compgen -G ".gpu/resume/*" > /dev/null; then
        cp .gpu/resume/* "$STASH/resume-parts/"
    fi
    echo "stash: $(ls "$STASH/parts" | tr '\n' ' ')"
    compgen -G "$STASH/resume-parts/*" > /dev/null && echo "stash: resume $(ls "$STASH/resume-parts" | tr '\n' ' ')"
    return 0
}

install() {
    stash
    if [ -f "$STASH/installed" ]; then
        echo "install: already unpacked"
    else
        local manifest="$STASH/parts/manifest"
        [ -f "$manifest" ] || { echo "install: no manifest carried (.gpu/manifest)"; return 1; }
        (cd "$STASH/parts" && grep ' part-' manifest | sha256sum --check --quiet) \
            || { echo "install: parts missing or damaged (carry the rest of .gpu/part-*)"; return 1; }
        grep ' part-' "$manifest" | awk '{print $2}' | sed "s|^|$STASH/parts/|" | xargs cat \
            | xz -d | tar -C "$STASH" -xf - || { echo "install: unpacking failed"; return 1; }
        cp "$manifest" "$STASH/installed"
    fi
    use_payload
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    "$PYTHON" - <<'EOF'
import sys, warp as wp, numpy, softsnake
wp.init()
print(f"python {sys.version.split()[0]}, warp {wp.__version__}, numpy {numpy.__version__}, "
      f"cuda devices {wp.get_cuda_device_count()}")
EOF
}

# Every kernel module loaded once on both devices before the workers start, so that the 14 test
# processes find Warp's kernel cache full instead of each compiling the same modules.
warm() {
    use_payload
    "$PYTHON" - <<'EOF'
import importlib, pkgutil, time
import warp as wp
import softsnake, softsnake.kernels, softsnake.constraints
from softsnake.console import quiet_warp
quiet_warp()
start = time.perf_counter()
for package in (softsnake.kernels, softsnake.constraints):
    for info in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{package.__name__}.{info.name}")
import softsnake.linear_solve, softsnake.robots.snake.simulation, softsnake.robots.vine.simulation  # noqa: F401
devices = ["cpu"] + (["cuda"] if wp.is_cuda_available() else [])
for device in devices:
    wp.force_load(device=device)
print(f"warm: kernel modules loaded on {', '.join(devices)} in {time.perf_counter() - start:.0f} s")
EOF
}

tests() {
    use_payload
    warm
    local timeout_option=() selection=()
    "$PYTHON" -c "import pytest_timeout" 2> /dev/null && timeout_option=(--timeout 300)
    if [ -n "$TESTS_FILE" ]; then
        mapfile -t selection < "$TESTS_FILE"  # node ids, one per line (they may hold spaces)
    else
        # shellcheck disable=SC2206  # $TESTS is a list of test paths
        selection=($TESTS)
    fi
    SOFTSNAKE_TEST_DEVICES=$TEST_DEVICES timeout --signal=INT "$STAGE_SECONDS" "$PYTHON" -m pytest -n "$WORKERS" \
        -vv -rfE --tb=short -p no:cacheprovider "${timeout_option[@]}" --junitxml="$OUT/junit.xml" \
        "${selection[@]}" 2>&1 | tee "$OUT/tests.log" | grep -E "FAILED|ERROR|passed|failed" | tail -40
    unrun "${selection[@]}"
}

# The tests of the selection that the junit file does not report (a run cut by its limit), one node id per
# line into $OUT/unrun.txt and $STASH/unrun.txt: `TESTS_FILE=$STASH/unrun.txt ... tests` runs them next.
unrun() {
    # The project's addopts hold a -q, which with this one would print counts per file instead of node ids.
    SOFTSNAKE_TEST_DEVICES=$TEST_DEVICES "$PYTHON" -m pytest -o addopts=--import-mode=importlib --collect-only -q \
        -p no:cacheprovider "$@" 2> /dev/null \
        | grep "::" > "$OUT/collected.txt"
    "$PYTHON" - "$OUT/collected.txt" "$OUT/junit.xml" "$OUT/tests.log" "$OUT/unrun.txt" <<'EOF'
import re
import sys
import xml.etree.ElementTree as ElementTree

collected, junit, log, unrun = sys.argv[1:]
ran = set()
try:
    for case in ElementTree.parse(junit).getroot().iter("testcase"):
        ran.add((case.get("classname"), case.get("name")))
except (OSError, ElementTree.ParseError):
    pass  # no junit file: a run cut before pytest wrote it (the log below still names what finished)
# Every test that reported its outcome in the log (-vv: "[gwN] [ NN%] PASSED node"), also where the stage's limit
# cut pytest before its junit file; an interrupt's traceback may follow the node id on the same line.
finished = set()
try:
    for line in open(log, errors="replace"):
        match = re.match(r"\[gw\d+\] \[\s*\d+%\] (?:PASSED|FAILED|SKIPPED|XFAIL|XPASS|ERROR) (tests/.*?)\s*(?:Traceback.*)?$",
                         line.rstrip("\n"))
        if match:
            finished.add(match.group(1))
except OSError:
    pass
nodes = open(collected).read().splitlines()
left = []
for node in nodes:
    path, *names = node.split("::")
    classname = ".".join([path.removesuffix(".py").replace("/", "."), *names[:-1]])
    if (classname, names[-1]) not in ran and node.strip() not in finished:
        left.append(node)
open(unrun, "w").write("".join(line + "\n" for line in left))
print(f"unrun: {len(left)} of the {len(nodes)} selected tests did not run (their ids: {unrun})")
EOF
    cp "$OUT/unrun.txt" "$STASH/unrun.txt"
    rm -f "$OUT/collected.txt"
}

# One experiment under the stage's time limit, its printout in $OUT/NAME.log and its files in $OUT/NAME.tar.gz.
experiment() {
    local name=$1
    shift
    local dir="$OUT/$name"
    mkdir -p "$dir"
    timeout "$STAGE_SECONDS" "$PYTHON" "$@" 2>&1 | tee "$OUT/$name.log"
    tar -C "$OUT" -czf "$OUT/$name.tar.gz" "$name" && rm -rf "$dir"
}

table2() {
    use_payload
    experiment table2 experiments/gpu_benchmarks.py --device "$DEVICE" --cases "$TABLE2_CASES" \
        --peer-cases "$TABLE2_PEERS" --solvers "$TABLE2_SOLVERS" --frames 5 --warmup 2 --out "$OUT/table2"
}

solvers() {
    use_payload
    experiment solvers experiments/gpu_linear_solvers.py --device "$DEVICE" --cases "$SOLVERS_CASES"
}

vines() {
    use_payload
    # shellcheck disable=SC2086  # $VINES_ARGS is a list of options
    experiment vines experiments/vine_runtime.py --device "$DEVICE" $VINES_ARGS --out "$OUT/vines"
}

worlds() {
    use_payload
    experiment worlds experiments/gpu_world_independence.py --device "$DEVICE" --out "$OUT/worlds"
}

rest() {
    use_payload
    # shellcheck disable=SC2086  # $REST_ARGS is a list of options
    experiment rest experiments/snake_at_rest.py --device "$DEVICE" $REST_ARGS --out "$OUT/rest"
}

tet() {
    use_payload
    # shellcheck disable=SC2086  # $TET_ARGS is a list of options
    experiment tet experiments/tetrahedron_operator.py --device "$DEVICE" $TET_ARGS --out "$OUT/tet"
}

# The gait command of both gait stages (the output folder is each stage's own).
gait_command=("$PYTHON" -m softsnake gait --device "$DEVICE" --snakes "$SNAKES" --seconds "$GAIT_SECONDS")

gait() {
    use_payload
    local dir="$OUT/gait"
    timeout --signal=INT "$STAGE_SECONDS" "${gait_command[@]}" --out "$dir" 2>&1 | tee "$OUT/gait.log"
    tar -C "$OUT" -czf "$OUT/gait.tar.gz" gait && rm -rf "$dir"
}

# The gait in a new process session, so that it runs on after this call returns (the machine keeps such a
# process until it is given back): 1024 paper-budget snakes need more than one 10-minute call. It stops itself
# after GAIT_LIMIT seconds with an interrupt, which keeps its partial files; $STASH/gait/rc holds its exit status.
gait_start() {
    use_payload
    local dir="$STASH/gait" resume=()
    rm -rf "$dir"
    mkdir -p "$dir/out"
    if [ "$RESUME" = 1 ]; then
        local parts="$STASH/resume-parts"
        [ -f "$parts/manifest" ] || { echo "gait_start: RESUME=1 but no resume parts were carried (.gpu/resume)"; return 1; }
        (cd "$parts" && sha256sum --check --quiet manifest) \
            || { echo "gait_start: resume parts missing or damaged (carry the rest of .gpu/resume)"; return 1; }
        awk '{print $2}' "$parts/manifest" | sed "s|^|$parts/|" | xargs cat | xz -d | tar -C "$dir/out" -xf - \
            || { echo "gait_start: unpacking the resume parts failed"; return 1; }
        resume=(--resume)
        echo "gait_start: going on from $(cd "$dir/out" && ls | tr '\n' ' ')"
    fi
    setsid bash -c 'dir=$1; shift; echo $$ > "$dir/pid"
                    timeout --signal=INT "$@" > "$dir/log" 2>&1; echo $? > "$dir/rc"' \
        _ "$dir" "$GAIT_LIMIT" "${gait_command[@]}" --out "$dir/out" "${resume[@]}" < /dev/null > /dev/null 2>&1 &
    sleep 2
    echo "gait_start: $SNAKES snakes for $GAIT_SECONDS s in the background (stops itself after $GAIT_LIMIT s): $dir"
}

# Waits up to STAGE_SECONDS for gait_start's run to end, naming its progress every minute (STAGE is the name printed).
wait_for_gait() {
    local dir="$STASH/gait" waited=0
    while [ ! -f "$dir/rc" ] && [ "$waited" -lt "$STAGE_SECONDS" ]; do
        sleep 5
        waited=$((waited + 5))
        [ $((waited % 60)) -eq 0 ] && echo "$1: ${waited} s: $(tail -c 300 "$dir/log" | tr '\r' '\n' | tail -1)"
    done
    return 0
}

# Waits up to STAGE_SECONDS for gait_start's run without stopping it: a call spent waiting, so that a gait longer
# than one call's limit runs on into the next call's gait_collect.
gait_wait() {
    [ -f "$STASH/gait/pid" ] || { echo "gait_wait: no gait was started ($STASH/gait)"; return 1; }
    wait_for_gait gait_wait
    if [ -f "$STASH/gait/rc" ]; then echo "gait_wait: the gait ended"; else echo "gait_wait: the gait runs on"; fi
}

# Waits up to STAGE_SECONDS for gait_start's run (interrupting it then, which keeps its partial files), and brings
# back its printout, a listing of every file it wrote (sizes and sha256), its plot and animation, and the CSV rows
# of snakes 0, SNAKES/2 and SNAKES-1 (the whole CSV of 1024 snakes is ~230 MB, more than a call brings back).
gait_collect() {
    local dir="$STASH/gait"
    [ -f "$dir/pid" ] || { echo "gait_collect: no gait was started ($dir)"; return 1; }
    wait_for_gait gait_collect
    if [ ! -f "$dir/rc" ]; then
        echo "gait_collect: still running after $STAGE_SECONDS s: interrupted (it ends its frame, then writes its" \
             "partial files and resume point; up to SAVE_SECONDS=$SAVE_SECONDS s)"
        pkill -INT -s "$(cat "$dir/pid")" -x timeout  # timeout passes the interrupt on to the gait
        local saving=0
        while [ ! -f "$dir/rc" ] && [ "$saving" -lt "$SAVE_SECONDS" ]; do sleep 1; saving=$((saving + 1)); done
        if [ -f "$dir/rc" ]; then
            echo "gait_collect: it ended ${saving} s after the interrupt"
        else
            echo "gait_collect: still writing ${SAVE_SECONDS} s after the interrupt: what it wrote so far comes back;" \
                 "its resume point may be missing (a longer SAVE_SECONDS)"
        fi
    fi
    echo "gait_collect: exit status $(cat "$dir/rc" 2> /dev/null || echo unknown)"
    local pack="$OUT/gait"
    mkdir -p "$pack"
    cp "$dir/log" "$OUT/gait.log"
    tail -20 "$dir/log"
    (cd "$dir/out" && ls -l && sha256sum ./*) > "$pack/files.txt" 2>&1
    cp "$dir"/out/*.png "$dir"/out/*.gif "$pack/" 2> /dev/null
    local csv
    csv=$(ls "$dir"/out/*.csv 2> /dev/null | head -1)
    if [ -n "$csv" ]; then
        awk -F, -v a=0 -v b=$((SNAKES / 2)) -v c=$((SNAKES - 1)) \
            'NR == 1 || $2 == a || $2 == b || $2 == c' "$csv" > "$pack/$(basename "$csv" .csv).three_snakes.csv"
    fi
    cat "$pack/files.txt"
    tar -C "$OUT" -czf "$OUT/gait.tar.gz" gait && rm -rf "$pack"
    pack_resume
}

# An interrupted gait's resume point and partial USD file, xz-compressed and split into $STASH/resume/part-NN.
pack_resume() {
    local out="$STASH/gait/out" parts="$STASH/resume"
    [ -f "$out/gait.resume.npz" ] || return 0
    rm -rf "$parts" && mkdir -p "$parts"
    tar -C "$out" -cf - gait.resume.npz $(cd "$out" && ls gait.partial.usd* 2> /dev/null) | xz -1 -T0 \
        | split -b "${RESUME_PART_MIB}M" -d - "$parts/part-"
    (cd "$parts" && sha256sum part-* > manifest)
    echo "gait_collect: the resume point in $(ls "$parts" | grep -c part-) parts of ${RESUME_PART_MIB} MiB at most" \
         "($(du -sh "$parts" | cut -f1)); resume_fetch brings them back, 3 a call"
}

# Three of the resume parts (from RESUME_FIRST) and the manifest into $OUT/resume.
resume_fetch() {
    local parts="$STASH/resume"
    # A gait that gait_collect stopped but did not wait for long enough has written its resume point since.
    [ -f "$parts/manifest" ] || [ ! -f "$STASH/gait/rc" ] || pack_resume
    [ -f "$parts/manifest" ] || { echo "resume_fetch: no resume point (the gait runs on, ended, or wrote none)"; return 1; }
    mkdir -p "$OUT/resume"
    cp "$parts/manifest" "$OUT/resume/"
    local count=0
    for part in $(awk '{print $2}' "$parts/manifest" | tail -n +"$((RESUME_FIRST + 1))" | head -3); do
        cp "$parts/$part" "$OUT/resume/"
        count=$((count + 1))
    done
    echo "resume_fetch: $count parts from $RESUME_FIRST of $(grep -c part- "$parts/manifest")"
}

STAGES="stash install warm tests table2 solvers vines worlds rest tet gait gait_start gait_wait gait_collect resume_fetch"
[ $# -gt 0 ] || { sed -n '2,26p' "$0"; exit 2; }
for stage in "$@"; do
    if [[ " $STAGES " == *" $stage "* ]]; then
        echo "== $stage ($(date -u +%T))"
        "$stage" || exit 1
    else
        echo "session.sh: unknown stage $stage (${STAGES// /, })" >&2
        exit 2
    fi
done
