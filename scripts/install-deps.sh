#!/usr/bin/env bash
# Installs the Debian packages Stowage builds with (idempotent). Run as root (or with sudo).
set -euo pipefail
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
PKGS=(
  cmake ninja-build g++ python3 pkg-config
  libmlir-19-dev mlir-19-tools llvm-19-dev llvm-19-tools
  libdnnl-dev ocl-icd-opencl-dev
  libflatbuffers-dev flatbuffers-compiler
  libgtest-dev nlohmann-json3-dev libcli11-dev libxxhash-dev
  clang-19 libclang-rt-19-dev clang-format-19
  libcpp-httplib-dev  # stowage-server's HTTP layer
  libopenmpi-dev openmpi-bin  # multi-host runs (STOWAGE_ENABLE_MPI=AUTO)
  chromium-headless-shell  # renders plan-dump --svg in the screenshot test (~100 MB, ~30 s)
)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi
echo "install-deps: all ${#PKGS[@]} packages present"
