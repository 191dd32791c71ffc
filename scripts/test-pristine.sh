#!/usr/bin/env bash
# Runs one of the README's commands on a pristine Debian 12 (a minbase chroot), as a new user's
# fresh machine would: what a worked-on machine already has cannot hide a missing install step.
#   bash scripts/test-pristine.sh                         bash scripts/test.sh in a fresh chroot
#   bash scripts/test-pristine.sh --command "bash scripts/demo.sh"
#   bash scripts/test-pristine.sh --keep DIR ...          reuse DIR (packages already installed there)
# Run as root, from a clone: the chroot gets a fresh `git clone` of this repository's HEAD (commit
# first). Not part of CI (a cold build and test there takes ~17 minutes on 2 cores).
#
# What a minbase chroot lacks that a real machine has, and what this script therefore adds:
#   - the host's apt sources and apt settings (the chroot would only know `bookworm main`);
#   - the host's extra CA certificates (/usr/local/share/ca-certificates), e.g. a TLS-inspecting
#     proxy's, and NODE_EXTRA_CA_CERTS, without which npm fails with SELF_SIGNED_CERT_IN_CHAIN;
#   - / as a mount point (bind-mounted onto itself), which `ip netns` needs (distributed.multinode);
#   - /proc, /dev, /sys.
# It deliberately does not add /etc/hosts: with none, `localhost` does not resolve, which is how a
# default of "localhost" for the TPU host's address was found (Volt now uses 127.0.0.1).
set -uo pipefail

src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
command="bash scripts/test.sh"
keep=""
while [ $# -gt 0 ]; do
  case "$1" in
    --command) command=$2; shift 2 ;;
    --keep) keep=$2; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "test-pristine: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
say() { echo "volt pristine: $*"; }
[ "$(id -u)" -eq 0 ] || { echo "volt pristine: needs root (debootstrap, chroot, mount)" >&2; exit 1; }

B=/var/cache/volt-bookworm
if [ ! -e "$B/.ready" ]; then
  command -v debootstrap >/dev/null || apt-get install -y -q --no-install-recommends debootstrap
  mirror=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null)
  say "making the base chroot $B with debootstrap (${mirror:-http://deb.debian.org/debian})"
  rm -rf "$B"
  debootstrap --variant=minbase --include=ca-certificates bookworm "$B" "${mirror:-http://deb.debian.org/debian}" ||
    exit 1
  touch "$B/.ready"
fi

if [ -n "$keep" ]; then
  R=$keep
  [ -d "$R/etc/apt" ] || { echo "volt pristine: --keep $R is not a chroot made by this script" >&2; exit 2; }
else
  R=$(mktemp -d /var/tmp/volt-pristine.XXXXXX)
  cp -a "$B/." "$R/"
  if [ -f /etc/apt/sources.list.d/debian.sources ]; then
    rm -f "$R/etc/apt/sources.list"
    cp /etc/apt/sources.list.d/debian.sources "$R/etc/apt/sources.list.d/"
  fi
  for f in /etc/apt/apt.conf.d/*; do
    case "$(basename "$f")" in docker-*|*packagekit*|*appstream*) ;; *) cp "$f" "$R/etc/apt/apt.conf.d/" ;; esac
  done
  cp /etc/resolv.conf "$R/etc/resolv.conf"
fi
say "chroot $R (kept afterwards: remove it, or pass --keep $R to reuse it)"
mkdir -p "$R/usr/local/share/ca-certificates"
cp /usr/local/share/ca-certificates/* "$R/usr/local/share/ca-certificates/" 2>/dev/null || true
rm -rf "$R/project"
git clone -q "$src" "$R/project" || exit 1

cleanup() {
  # Deepest first; `ip netns` leaves a mount at /run/netns inside.
  awk -v r="$R" '$2 == r || index($2, r "/") == 1 { print $2 }' /proc/self/mounts | sort -r |
    while read -r m; do umount -l "$m" 2>/dev/null; done
}
trap cleanup EXIT
mount --bind "$R" "$R"
mount -t proc proc "$R/proc"
mount --rbind /dev "$R/dev"
mount -t sysfs sys "$R/sys"
chroot "$R" update-ca-certificates >/dev/null 2>&1

start=$SECONDS
say "running '$command' in /project"
chroot "$R" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
  DEBIAN_FRONTEND=noninteractive NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt \
  bash -c "cd /project && $command"
rc=$?
say "'$command' exited $rc after $((SECONDS - start)) s"
exit $rc
