#!/usr/bin/env bash
# Packs what a GPU machine without network access needs to run softsnake's tests and benchmarks:
# the dependencies its image lacks (warp-lang, usd-core, meshio, tetgen, at the versions installed
# here) installed for its Python into a staging folder, and the external reference data, as one
# xz-compressed tar split into parts small enough to travel one per call.
#
# Why parts: Warp's wheel alone is 149 MB (warp.so carries NVRTC and kernels for every GPU
# generation); compressed with xz the whole payload is about 100 MB, and a device call carries at
# most 64 MiB with the working tree. tools/gpu/session.sh stash/install reassemble it there.
#
# Runs here, on a machine that reaches PyPI, with the project's virtual environment active (the
# versions are taken from it). No GPU needed. About 6 minutes on 2 cores (the xz compression).
#
# Usage: bash tools/gpu/pack.sh [--python 3.12] [--part-mib 52] [--out .gpu]
# Writes: OUT/part-00, OUT/part-01, ... and OUT/manifest (sha256 of each part, versions).
# OUT is ignored by git (.gitignore).
set -euo pipefail
cd "$(dirname "$0")/../.."

python_version=3.12
part_mib=52
out=.gpu
while [ $# -gt 0 ]; do
    case "$1" in
        --python) python_version=$2; shift 2 ;;
        --part-mib) part_mib=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        *) echo "pack.sh: unknown option $1 (see the usage in the script's header)" >&2; exit 2 ;;
    esac
done

reference=${SOFTSNAKE_REFERENCE:-../shared/reference}
if [ ! -d "$reference/vine" ]; then
    echo "pack.sh: no reference data at $reference/vine (set SOFTSNAKE_REFERENCE)" >&2
    exit 2
fi

versions=$(python - <<'EOF'
from importlib.metadata import version
print(" ".join(f"{name}=={version(name)}" for name in ("warp-lang", "usd-core", "meshio", "tetgen")))
EOF
)

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/site"
# shellcheck disable=SC2086  # $versions is a list of requirement words
python -m pip install --quiet --no-deps --only-binary=:all: --target "$stage/site" \
    --python-version "$python_version" --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    $versions
cp -r "$reference" "$stage/reference"

mkdir -p "$out" && rm -f "$out"/part-* "$out/manifest"  # only what an earlier pack wrote
tar -C "$stage" -cf - site reference | xz -9 -T0 | split -b "${part_mib}M" -d - "$out/part-"
{
    echo "python $python_version"
    echo "packages $versions"
    (cd "$out" && sha256sum part-*)
} > "$out/manifest"
ls -l "$out"
