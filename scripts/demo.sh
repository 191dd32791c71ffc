#!/usr/bin/env bash
# Sets Volt up (scripts/setup.sh), then trains the Fashion-MNIST example and says where
# its metrics and checkpoints are, and how to plot them. Extra arguments go to the
# example, LightningCLI-style:
#   bash scripts/demo.sh --trainer.max_epochs 1
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

bash scripts/setup.sh

# The last --trainer.default_root_dir given wins, as in the example's own parser.
out=out/fashion_mnist
prev=
for arg in "$@"; do
  case "$arg" in
    --trainer.default_root_dir=*) out=${arg#*=} ;;
  esac
  if [ "$prev" = "--trainer.default_root_dir" ]; then out=$arg; fi
  prev=$arg
done

mkdir -p "$out"
stamp=$(mktemp)
trap 'rm -f "$stamp"' EXIT

echo "volt demo: training on Fashion-MNIST (/usr/share/datasets/fashion-mnist), logs under $out"
build/examples/fashion_mnist/fashion_mnist --trainer.default_root_dir out/fashion_mnist "$@"

# Report this run's files: the ones written since the stamp.
metrics=$(find "$out" -name metrics.csv -newer "$stamp" -print 2>/dev/null | sort -V | tail -n 1)
mapfile -t ckpts < <(find "$out" -name '*.ckpt' -newer "$stamp" -print 2>/dev/null | sort -V)

echo
if [ -n "$metrics" ]; then
  echo "volt demo: metrics:     $metrics"
  # Its curves as a picture (PNG, or SVG with --out curves.svg): docs/observability.md.
  echo "volt demo: plot them:   build/tools/volt/volt plot $(dirname "$metrics") --out curves.png"
else
  echo "volt demo: metrics:     no metrics.csv written under $out"
fi
if [ "${#ckpts[@]}" -gt 0 ]; then
  echo "volt demo: checkpoints:"
  printf '  %s\n' "${ckpts[@]}"
else
  echo "volt demo: checkpoints: none written under $out"
fi
