#!/usr/bin/env bash
# Installs what Volt needs on Debian 12 and builds it into build/.
#   bash scripts/setup.sh              packages + configure (once) + build
#   bash scripts/setup.sh --no-build   packages only
# Run as root (or as a user with sudo) from any directory. Idempotent: when every
# package is installed and build/ is configured it only runs the (incremental) build.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

build=1
for arg in "$@"; do
  case "$arg" in
    --no-build) build=0 ;;
    -h|--help) sed -n '2,6s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "volt setup: unknown argument '$arg' (known: --no-build)" >&2; exit 2 ;;
  esac
done

packages=(
  libtorch-dev libgloo-dev libopenblas0-openmp cmake ninja-build g++ ccache
  libyaml-cpp-dev nlohmann-json3-dev libgtest-dev libgmock-dev libbenchmark-dev
  zlib1g-dev libpng-dev libjpeg62-turbo-dev libjpeg-dev dataset-fashion-mnist git ca-certificates python3-numpy iproute2 python3-torch
  libcpp-httplib-dev pkgconf chromium chromium-driver node-prismjs
  libkainjow-mustache-dev fortunes python3-nbformat python3-nbconvert python3-ipykernel
  openmpi-bin slurm-wlm
  python3-yaml python3-tqdm python3-fsspec python3-packaging python3-typing-extensions
  clang-14 libclang-rt-14-dev
  python3-pil python3-torchvision
  libsentencepiece-dev python3-sentencepiece sentencepiece python3-pandas bible-kjv bible-kjv-text
)
# Node.js and npm run the browser tests of `volt ui` (tests/ui/e2e). A machine may already have them from
# elsewhere (NodeSource's nodejs bundles npm and conflicts with Debian's npm package): only install when absent.
command -v node >/dev/null || packages+=(nodejs)
command -v npm >/dev/null || packages+=(npm)

missing=()
for p in "${packages[@]}"; do
  if [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" != "install ok installed" ]; then
    missing+=("$p")
  fi
done

if [ "${#missing[@]}" -gt 0 ]; then
  echo "volt setup: installing ${#missing[@]} packages: ${missing[*]}"
  sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null; then
      sudo=(sudo)
    else
      echo "volt setup: installing packages needs root; run as root or install sudo" >&2
      exit 1
    fi
  fi
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    -o Dpkg::Use-Pty=0 "${missing[@]}" </dev/null
else
  echo "volt setup: all ${#packages[@]} packages installed"
fi

# playwright-core for the browser tests, exactly as locked; it drives Debian's /usr/bin/chromium and downloads
# no browser. Re-run only when the lock file changed since the last install.
# playwright-core 1.64 needs Node.js 20 or newer: with an older node (Debian 12's is 18) the browser test is
# skipped (tests/ui/CMakeLists.txt), so there is nothing to install.
e2e=tests/ui/e2e
node_major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
if [ "$node_major" -lt 20 ]; then
  echo "volt setup: Node.js $(node --version 2>/dev/null || echo '(none)') is older than 20: the browser test of" \
       "volt ui will be skipped, and its packages are not installed"
elif [ ! -f "$e2e/node_modules/.package-lock.json" ] || [ "$e2e/package-lock.json" -nt "$e2e/node_modules/.package-lock.json" ]; then
  echo "volt setup: installing the browser-test packages (npm ci in $e2e)"
  if ! (cd "$e2e" && npm ci --no-audit --no-fund); then
    echo "volt setup: npm ci in $e2e failed (see above; the npm registry must be reachable, and a TLS-inspecting" \
         "proxy's CA known to Node.js through NODE_EXTRA_CA_CERTS). The browser test needs these packages." >&2
    exit 1
  fi
else
  echo "volt setup: browser-test packages in $e2e are up to date"
fi

[ "$build" -eq 1 ] || exit 0

# Configure only once: a configured tree re-runs CMake by itself when a CMakeLists.txt
# changes. A configure that failed half-way leaves a cache but no build files: redo it
# with the cached settings (and generator, should someone have chosen another one).
if [ ! -f build/CMakeCache.txt ]; then
  echo "volt setup: configuring build/ (Release, Ninja)"
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
elif [ ! -f build/build.ninja ] && [ ! -f build/Makefile ]; then
  echo "volt setup: configuring build/ again (the last configure did not finish)"
  cmake -S . -B build
fi

jobs=$(nproc)
# Paths relative to the tree in ccache's keys: a fresh clone elsewhere (CI) reuses the
# objects of an earlier build of the same sources.
export CCACHE_BASEDIR="$PWD"
echo "volt setup: building build/ with $jobs jobs"
build_start=$SECONDS
cmake --build build -j "$jobs"
echo "volt setup: build/ is up to date (the build took $((SECONDS - build_start)) s)"
