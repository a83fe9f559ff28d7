#!/usr/bin/env bash
# Installs what building and testing comm needs on a Debian 12 machine.
# Idempotent: installs only what is missing. Needs root (or sudo) for apt.
set -euo pipefail

apt_packages=(build-essential cmake ninja-build pkg-config python3-pip python3-dev python3-venv
              libucx-dev ucx-utils libfabric-dev libfabric-bin libgloo-dev doctest-dev
              openmpi-bin libopenmpi-dev
              clang libclang-rt-14-dev locales)
missing=()
for p in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  echo "install-deps: apt-get install ${missing[*]}"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# A comma-decimal locale for the locale-independence test (test_locale).
if ! locale -a 2>/dev/null | grep -qi '^de_DE\.utf-\?8$'; then
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  echo "install-deps: locale-gen de_DE.UTF-8"
  $sudo_cmd sed -i 's/^# *\(de_DE.UTF-8 UTF-8\)/\1/' /etc/locale.gen
  grep -q '^de_DE.UTF-8 UTF-8' /etc/locale.gen || echo 'de_DE.UTF-8 UTF-8' | $sudo_cmd tee -a /etc/locale.gen >/dev/null
  $sudo_cmd locale-gen >/dev/null
fi

# NCCL headers and library for compiling the NCCL transport (it runs only on a GPU).
# Conan for the packaging test.
pip_install() {
  python3 -m pip install -q --disable-pip-version-check "$@" 2>/dev/null ||
    python3 -m pip install -q --disable-pip-version-check --break-system-packages "$@"
}
python3 -c "import nvidia.nccl" 2>/dev/null || pip_install nvidia-nccl-cu13
command -v conan >/dev/null 2>&1 || pip_install "conan>=2,<3"
# The Python package (python/) and its tests: bindings, build backend, arrays, bfloat16.
for m in nanobind:nanobind scikit_build_core:scikit-build-core numpy:numpy ml_dtypes:ml_dtypes; do
  python3 -c "import ${m%%:*}" 2>/dev/null || pip_install "${m#*:}"
done
exit 0
