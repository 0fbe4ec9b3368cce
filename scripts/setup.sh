#!/usr/bin/env bash
# Installs every build, test and reference dependency from Debian bookworm.
# Idempotent: packages already present are skipped by apt; runs as root or with sudo.
set -euo pipefail

packages=(
  cmake g++ make pkg-config git
  libtorch-dev            # head training, FedTC adapter, TorchScript backbones
  libeigen3-dev           # the math: EM, statistics, LDA heads
  libopenblas-dev         # BLAS behind Eigen's syrk/gemm and the Gram benchmark
  libzmq3-dev cppzmq-dev  # transport
  libmsgpack-cxx-dev      # wire format
  libsodium-dev           # identities and authenticated encryption
  libssl-dev              # the streams' AES-256-GCM (libcrypto), 2.4x libsodium's
  libgtest-dev            # unit and integration tests
  zlib1g-dev              # gzip IDX files
  libtomlplusplus-dev     # topology files (header-only TOML parser)
  nlohmann-json3-dev      # reading result files in cli/ and tests (header-only JSON parser)
  libpng-dev libjpeg62-turbo-dev  # image folders
  dataset-fashion-mnist   # the built-in dataset
  iproute2                # the network-namespace tests (ip netns, veth, tc)
  nftables                # the NAT test: routers that masquerade their sites (scripts/netns_nat_test.sh)
  help2man                # fednode's man page, made at build time from its --help and --version
  graphviz                # fednode topology --svg and the report's topology layout (dot)
  clang libclang-rt-dev libomp-dev  # scripts/fuzz.sh: libFuzzer, ASan and UBSan runtimes; OpenMP under clang
  pybind11-dev python3-dev python3-pytest  # the Python module (python/) and its tests
  python3 python3-numpy python3-sklearn python3-torch python3-torchvision python3-pil  # reference measurements; numpy also the module's arrays
  python3-matplotlib      # examples/python/: the sweep's plot
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: every dependency is installed"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "setup: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
