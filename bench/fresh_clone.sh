#!/usr/bin/env bash
# Times one of the README's two commands on a fresh clone of this repository's HEAD,
# on this machine, with empty caches: an empty ccache (CCACHE_DIR in the clone's
# folder), no pip cache (PIP_NO_CACHE_DIR: the .venv's ~4.5 GB come from PyPI again)
# and a new .venv. Debian packages already installed stay (CI's machine is "like
# this one"; bench/fresh_machine.sh times the main job on a bare Debian instead).
#
#   bash bench/fresh_clone.sh test     # bash scripts/test.sh: setup, build, CTest
#   bash bench/fresh_clone.sh demo     # bash scripts/demo.sh: the main job
#
# Prints each output line with the seconds since the start, then the command's wall
# time. DIR names the folder (default: a new one under /tmp, removed after; KEEP=1 keeps it).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
case "${1:-}" in
  test) command=(bash scripts/test.sh) ;;
  demo) command=(bash scripts/demo.sh) ;;
  *) echo "error: bench/fresh_clone.sh: expected 'test' or 'demo', got '${1:-}'" >&2; exit 2 ;;
esac
[ $# -le 1 ] || { echo "error: bench/fresh_clone.sh: one argument (test or demo), got $#" >&2; exit 2; }
dir=${DIR:-$(mktemp -d /tmp/lmkit-fresh-clone.XXXXXX)}
if [ -e "$dir/lmkit" ]; then echo "error: $dir/lmkit exists; name an empty DIR" >&2; exit 2; fi
[ -n "${KEEP:-}" ] || trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir/ccache" "$dir/cache"
git clone -q "$repo" "$dir/lmkit"
git -C "$dir/lmkit" checkout -q "$(git rev-parse HEAD)"
log="$dir/$1.log"
echo "fresh clone of $(git rev-parse --short HEAD) in $dir/lmkit: ${command[*]} (log: $log)"
start=$SECONDS
rc=0
(cd "$dir/lmkit" && CCACHE_DIR="$dir/ccache" XDG_CACHE_HOME="$dir/cache" PIP_NO_CACHE_DIR=1 "${command[@]}") 2>&1 |
  while IFS= read -r line; do printf '[%4d s] %s\n' $((SECONDS - start)) "$line"; done | tee "$log" || rc=$?
t=$((SECONDS - start))
printf 'fresh clone: %s took %d s (%d min %02d s), exit %d\n' "${command[*]}" "$t" $((t / 60)) $((t % 60)) "$rc"
exit "$rc"
