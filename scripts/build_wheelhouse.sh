#!/usr/bin/env bash
# Build a wheelhouse of the notebook stack for a GPU host that cannot reach a package index.
#
# `sagelib run` executes notebooks with papermill; a GPU image usually has torch, CuPy and
# matplotlib but not the Jupyter pieces. This script downloads binary wheels of that stack for the
# target's Python version and platform (not this machine's), resolving dependencies for the target,
# and then drops the wheels of packages the target image already has (so the carried copy never
# shadows the image's own build of, say, pyyaml or jinja2).
#
# On the GPU host:
#   python3 -m pip install -q --no-index --no-deps --target /tmp/site WHEELHOUSE/*.whl
#   export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
#   python3 -c 'import papermill, nbconvert, jupytext, ipykernel'
#
# --dask adds Dask (distributed, dask-cuda, bokeh for the dashboard), which `sagelib bench/parity-grid/sweep
# --gpus N` and `--scheduler ADDRESS` need: the GPU image has none of them.
set -euo pipefail

usage() {
    cat <<'EOF'
usage: scripts/build_wheelhouse.sh [--python 3.12] [--arch x86_64] [--glibc 2.39]
                                   [--dest .whl] [--skip-from FILE | --no-skip] [--keep]
                                   [--dask] [--cudnn] [--dry-run] [-- EXTRA_REQUIREMENT ...]

  --python X.Y     target interpreter version (default 3.12: the H200 image's python3)
  --arch A         x86_64 or aarch64 (default x86_64)
  --glibc X.Y      newest glibc of the target; manylinux_2_5 .. manylinux_X_Y wheels are
                   accepted (default 2.39, Ubuntu 24.04)
  --dest DIR       where the wheels go (default .whl, git-ignored; carried to the device)
  --skip-from FILE package names already on the target image, one a line; their wheels are
                   removed after the download (default scripts/gpu_image_packages.txt)
  --no-skip        keep every wheel, even for packages the image has
  --keep           do not empty DIR first
  --dask           add Dask for --gpus/--scheduler: distributed, dask-cuda and bokeh (the dashboard),
                   the requirements of the dask extra in pyproject.toml
  --cudnn          add the cudnn-frontend Python package (nvidia-cudnn-frontend, without its CuTe DSL
                   dependencies: the FP8 attention graph runs in the image's cuDNN library), which the
                   cudnn-fp8 bench backend needs
  --dry-run        print the packages and the pip command, download nothing
  EXTRA_REQUIREMENT  more requirements to add to the stack (e.g. sageattention==1.0.6)
EOF
}

python_version=3.12
arch=x86_64
glibc=2.39
dest=.whl
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
skip_from="$here/gpu_image_packages.txt"
keep=0
dask=0
cudnn=0
dry_run=0
extra=()
# The dask extra of pyproject.toml (tests/test_distribute.py holds the two lists equal).
# Unpinned, pip takes dask-cuda 0.18 (2021), whose imports current distributed lacks; with >=24.2 its
# resolver backtracks into a pandas it cannot find. 26.10 resolves (tried 2026-12-02, cp312 x86_64).
dask_stack=("distributed>=2024.1" "dask-cuda>=26.10" "bokeh>=3.1")

while [[ $# -gt 0 ]]; do
    case "$1" in
        --python) python_version="$2"; shift 2 ;;
        --arch) arch="$2"; shift 2 ;;
        --glibc) glibc="$2"; shift 2 ;;
        --dest) dest="$2"; shift 2 ;;
        --skip-from) skip_from="$2"; shift 2 ;;
        --no-skip) skip_from=""; shift ;;
        --keep) keep=1; shift ;;
        --dask) dask=1; shift ;;
        --cudnn) cudnn=1; shift ;;
        --dry-run) dry_run=1; shift ;;
        -h|--help) usage; exit 0 ;;
        --) shift; extra+=("$@"); break ;;
        *) echo "build_wheelhouse: error: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done

if [[ ! "$python_version" =~ ^3\.[0-9]+$ ]]; then
    echo "build_wheelhouse: error: --python expects X.Y such as 3.12, got '$python_version'" >&2; exit 2
fi
if [[ "$arch" != x86_64 && "$arch" != aarch64 ]]; then
    echo "build_wheelhouse: error: --arch expects x86_64 or aarch64, got '$arch'" >&2; exit 2
fi
if [[ ! "$glibc" =~ ^2\.[0-9]+$ ]]; then
    echo "build_wheelhouse: error: --glibc expects 2.N such as 2.39, got '$glibc'" >&2; exit 2
fi
if [[ -n "$skip_from" && ! -f "$skip_from" ]]; then
    echo "build_wheelhouse: error: --skip-from: no file '$skip_from' (give a list, or --no-skip)" >&2; exit 2
fi

pip_cmd=(python3 -m pip)
if [[ -x .venv/bin/python ]]; then pip_cmd=(.venv/bin/python -m pip); fi

# Every manylinux tag the target's glibc accepts (pip matches platform tags exactly).
platforms=()
for ((n = 5; n <= ${glibc#2.}; n++)); do platforms+=(--platform "manylinux_2_${n}_${arch}"); done
platforms+=(--platform "manylinux2014_${arch}")
if [[ "$arch" == x86_64 ]]; then platforms+=(--platform manylinux2010_x86_64 --platform manylinux1_x86_64); fi

stack=(papermill nbclient nbformat ipykernel nbconvert jupytext)
if [[ $dask -eq 1 ]]; then stack+=("${dask_stack[@]}"); fi
stack+=("${extra[@]}")

# cudnn-frontend alone: its requirements (the CuTe DSL, TVM FFI; hundreds of MB) serve its Python-written
# engines, not the cuDNN library's FP8 attention that the cudnn-fp8 backend builds.
cudnn_stack=(nvidia-cudnn-frontend)

if [[ $dry_run -eq 1 ]]; then
    echo "build_wheelhouse: would download: ${stack[*]}"
    if [[ $cudnn -eq 1 ]]; then echo "build_wheelhouse: and without dependencies: ${cudnn_stack[*]}"; fi
    echo "build_wheelhouse: with: ${pip_cmd[*]} download --only-binary=:all: --python-version $python_version" \
         "--implementation cp ${platforms[*]} --dest $dest"
    exit 0
fi

mkdir -p "$dest"
if [[ $keep -eq 0 ]]; then rm -f "$dest"/*.whl; fi

echo "build_wheelhouse: downloading ${stack[*]} for cp${python_version/./} ${arch} glibc ${glibc} into $dest"
"${pip_cmd[@]}" download --quiet --only-binary=:all: \
    --python-version "$python_version" --implementation cp "${platforms[@]}" \
    --dest "$dest" "${stack[@]}"
if [[ $cudnn -eq 1 ]]; then
    "${pip_cmd[@]}" download --quiet --no-deps --only-binary=:all: \
        --python-version "$python_version" --implementation cp "${platforms[@]}" \
        --dest "$dest" "${cudnn_stack[@]}"
fi

# PEP 503 name normalisation, so 'jupyter_core-5.7.2-py3-none-any.whl' matches 'jupyter-core'.
normalise() { tr '[:upper:]' '[:lower:]' | sed -E 's/[-_.]+/-/g'; }

removed=()
if [[ -n "$skip_from" ]]; then
    skip_names="$(grep -v '^\s*#' "$skip_from" | sed 's/\s//g' | grep -v '^$' | normalise)"
    for wheel in "$dest"/*.whl; do
        name="$(basename "$wheel" | cut -d- -f1 | normalise)"
        if grep -qx "$name" <<<"$skip_names"; then
            removed+=("$name"); rm -f "$wheel"
        fi
    done
fi

# One version of each project: two wheels of one name stop a --no-deps install.
dupes="$(for w in "$dest"/*.whl; do basename "$w" | cut -d- -f1 | normalise; done | sort | uniq -d)"
if [[ -n "$dupes" ]]; then
    echo "build_wheelhouse: error: several versions of: $dupes (empty $dest or drop --keep)" >&2; exit 1
fi

count=$(ls "$dest"/*.whl | wc -l)
size=$(du -sh "$dest" | cut -f1)
echo "build_wheelhouse: $count wheels, $size in $dest"
if [[ ${#removed[@]} -gt 0 ]]; then
    echo "build_wheelhouse: left out (already on the target image): ${removed[*]}"
fi
cat <<EOF
build_wheelhouse: on the target host, from the repository root:
  python3 -m pip install -q --no-index --no-deps --target /tmp/site $dest/*.whl
  export PYTHONPATH=/tmp/site\${PYTHONPATH:+:\$PYTHONPATH}
  python3 -c 'import papermill, nbconvert, jupytext, ipykernel'
EOF
if [[ $dask -eq 1 ]]; then
    echo "  python3 -c 'import distributed, dask_cuda'   # then: sagelib bench --gpus all ..."
fi
if [[ $cudnn -eq 1 ]]; then
    echo "  python3 -c 'import cudnn'   # then: python3 scripts/fp8_anchor.py, sagelib bench --backends cudnn-fp8,..."
fi
