#!/usr/bin/env bash
# SageAttention2, the peer the workbook measures against, built from its public source into .peer/
# (git-ignored). Nothing of it is committed: `sagelib.backends.sage2` imports it from there.
#
#   scripts/build_peer.sh source [GIT]   copy the pinned commit's source from GIT (a clone, a bare mirror or a
#                                        URL; default https://github.com/thu-ml/SageAttention) to .peer/SageAttention
#   scripts/build_peer.sh build [--skip-sm80]   compile its CUDA extensions in place (a GPU machine with torch
#                                        and nvcc; minutes on 16 cores; TORCH_CUDA_ARCH_LIST defaults to 9.0);
#                                        --skip-sm80 leaves out the fp16-P.V extension no peer here uses
#   scripts/build_peer.sh pack DIR       the built modules as DIR/peer_so.part.* (under 15 MiB each), to carry
#   scripts/build_peer.sh unpack DIR     put packed modules back (skips the build on a machine like the first)
#   scripts/build_peer.sh check          import it and name the entry points found
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PIN=d1a57a5            # the commit every recorded peer measurement used
DEST=${PEER_DEST:-.peer/SageAttention}   # where sagelib looks by default (SAGELIB_PEER_DIR overrides)
PATHS=(csrc sageattention setup.py pyproject.toml LICENSE README.md)

case "${1:-}" in
  source)
    git_src=${2:-https://github.com/thu-ml/SageAttention}
    tmp=$(mktemp -d)
    if [ -d "$git_src" ] && git --git-dir="$git_src" rev-parse --git-dir >/dev/null 2>&1; then
      gitdir=$git_src                                  # a bare mirror
    elif [ -d "$git_src/.git" ]; then
      gitdir=$git_src/.git                             # a clone
    else
      git clone --quiet --bare "$git_src" "$tmp/mirror.git"; gitdir=$tmp/mirror.git
    fi
    rev=$(git --git-dir="$gitdir" rev-parse --verify --quiet "$PIN^{commit}" || git --git-dir="$gitdir" rev-parse HEAD)
    rm -rf "$DEST"; mkdir -p "$DEST"
    git --git-dir="$gitdir" archive "$rev" -- "${PATHS[@]}" 2>/dev/null | tar -x -C "$DEST" || {
      # mirrors without some large assets refuse `archive`: take the source files one by one
      git --git-dir="$gitdir" ls-tree -r "$rev" -- "${PATHS[@]}" | while read -r _ type sha path; do
        [ "$type" = blob ] || continue
        mkdir -p "$DEST/$(dirname "$path")"; git --git-dir="$gitdir" cat-file blob "$sha" > "$DEST/$path"
      done; }
    grep -qx '/.peer/' .git/info/exclude 2>/dev/null || echo '/.peer/' >> .git/info/exclude
    rm -rf "$tmp"
    echo "SageAttention source at $DEST (commit $(git --git-dir="$gitdir" rev-parse --short "$rev"); pinned $PIN)" ;;
  build)
    [ -f "$DEST/setup.py" ] || { echo "no source at $DEST: run '$0 source' first" >&2; exit 2; }
    if [ "${2:-}" = --skip-sm80 ]; then
      # the fp16-P.V (sm80) extension is not a peer we measure; the package imports without it
      sed -i 's/^\(\s*\)if HAS_SM80 or HAS_SM86 or HAS_SM89 .*:\s*$/\1if False:  # sm80 skipped by build_peer.sh/' "$DEST/setup.py"
    fi
    # the extensions build side by side (-j), each with MAX_JOBS parallel nvcc processes
    (cd "$DEST" && MAX_JOBS=${MAX_JOBS:-$(nproc)} TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0} \
       python3 setup.py build_ext --inplace -j 4) > "$DEST/../build.log" 2>&1 || { tail -30 "$DEST/../build.log"; exit 1; }
    echo "built: $(cd "$DEST" && ls sageattention/*.so | tr '\n' ' ')(log: $DEST/../build.log)" ;;
  pack)
    out=${2:?usage: $0 pack DIR}; mkdir -p "$out"
    (cd "$DEST" && tar czf - sageattention/*.so) | split -b 15M - "$out/peer_so.part."
    ls -la "$out"/peer_so.part.* ;;
  unpack)
    src=${2:?usage: $0 unpack DIR}
    cat "$src"/peer_so.part.* | tar xzf - -C "$DEST"
    echo "unpacked: $(cd "$DEST" && ls sageattention/*.so | tr '\n' ' ')" ;;
  check)
    PYTHONPATH=$DEST${PYTHONPATH:+:$PYTHONPATH} python3 -c '
import sageattention as s
from sageattention import core
names = [n for n in ("sageattn_qk_int8_pv_fp8_cuda", "sageattn_qk_int8_pv_fp8_cuda_sm90") if hasattr(s, n)]
print("SageAttention 2 at", s.__file__, "entry points:", ", ".join(names), "| sm90:", getattr(core, "SM90_ENABLED", False))' ;;
  *) sed -n 2,10p "$0"; exit 2 ;;
esac
