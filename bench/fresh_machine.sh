#!/usr/bin/env bash
# Times the README's main job as a new user meets it: a fresh Debian bookworm
# (debootstrap --variant=minbase into a chroot: no compiler, no cmake, no CUDA
# toolkit, no Python packages, an empty ccache), a clone of this repository's
# HEAD, then `bash scripts/demo.sh`. Prints each output line with the seconds
# since the start, and a summary of the phases (Debian packages, the .venv,
# the build, pretraining). Needs root and the network this machine has (the
# host's apt sources, CA certificates and pip.conf are copied in, so a proxy
# that the host trusts works inside too).
#
#   bash bench/fresh_machine.sh                 # root in /tmp/lmkit-fresh, removed after
#   ROOT=/tmp/f KEEP=1 bash bench/fresh_machine.sh
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
root=${ROOT:-/tmp/lmkit-fresh}
log=${LOG:-$root.log}
if [ "$(id -u)" != 0 ]; then echo "error: bench/fresh_machine.sh needs root (debootstrap, chroot)" >&2; exit 1; fi
if [ -e "$root" ]; then echo "error: $root exists; remove it or set ROOT" >&2; exit 2; fi
command -v debootstrap >/dev/null || { apt-get update -qq && apt-get install -y -qq debootstrap >/dev/null; }

cleanup() {
  for m in dev/pts dev sys proc; do umount "$root/$m" 2>/dev/null || true; done
  if [ -z "${KEEP:-}" ]; then rm -rf "$root"; fi
}
trap cleanup EXIT

t0=$(date +%s)
debootstrap --variant=minbase bookworm "$root" http://deb.debian.org/debian >/dev/null
echo "fresh: debootstrap bookworm minbase in $(( $(date +%s) - t0 )) s"
mount -t proc proc "$root/proc"; mount -t sysfs sys "$root/sys"
mount --bind /dev "$root/dev"; mount --bind /dev/pts "$root/dev/pts"
cp /etc/resolv.conf "$root/etc/"
cp -r /etc/apt/sources.list.d/. "$root/etc/apt/sources.list.d/" 2>/dev/null || true
cp /etc/apt/apt.conf.d/99* "$root/etc/apt/apt.conf.d/" 2>/dev/null || true
[ -f /etc/pip.conf ] && cp /etc/pip.conf "$root/etc/"
if compgen -G "/usr/local/share/ca-certificates/*" >/dev/null; then
  mkdir -p "$root/usr/local/share/ca-certificates"
  cp /usr/local/share/ca-certificates/* "$root/usr/local/share/ca-certificates/"
  # Enough of ca-certificates to trust them (the demo's setup installs the package itself).
  chroot "$root" bash -c 'apt-get update -qq && apt-get install -y -qq ca-certificates >/dev/null && update-ca-certificates >/dev/null'
fi
git clone -q "$repo" "$root/root/lmkit"
git -C "$root/root/lmkit" checkout -q "$(git rev-parse HEAD)"

cat > "$root/root/run.sh" <<'EOF'
cd /root/lmkit
start=$(date +%s)
{ time bash scripts/demo.sh; } 2>&1 | while IFS= read -r line; do
  printf '[%4d s] %s\n' $(( $(date +%s) - start )) "$line"; done
EOF
echo "fresh: running scripts/demo.sh at $(git rev-parse --short HEAD) in the chroot (log: $log)"
chroot "$root" env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt REQUESTS_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt \
  PIP_CERT=/etc/ssl/certs/ca-certificates.crt PIP_DEFAULT_TIMEOUT=180 bash /root/run.sh | tee "$log"

# Phases from the timestamps of the lines that open and close them.
at() { grep -m1 -- "$1" "$log" | sed -E 's/^\[ *([0-9]+) s\].*/\1/'; }
last_at() { grep -- "$1" "$log" | tail -1 | sed -E 's/^\[ *([0-9]+) s\].*/\1/'; }
venv=$(at 'setup: installing scripts/requirements'); venv=${venv:-0}
setup=$(at 'setup: all packages present')
built=$(last_at '\] \[[0-9]*/[0-9]*\] ')
trained=$(at 'validation at step')
echo "fresh: phases, seconds (from the timestamps in $log)"
echo "  Debian packages (apt-get)       $venv"
echo "  .venv (pip, pinned)             $(( setup - venv ))"
echo "  build (lmkit-info, -pretrain)   $(( built - setup ))"
echo "  pretraining and evaluation      $(( trained - built ))"
echo "  the whole demo                  $(grep -P '\] real\t' "$log" | awk '{print $NF}')"
