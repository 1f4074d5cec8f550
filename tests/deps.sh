#!/bin/sh
# Install the Debian packages hetpipe needs to build, test and run, when missing.
# Idempotent: a second run installs nothing and does not touch the network.
# Used by .ci/run and by the README's quick-start commands.
set -eu

PKGS="build-essential pkg-config libopenblas-dev libiniparser-dev check zlib1g-dev
dataset-fashion-mnist bats clang-format libucx-dev ucx-utils libpmix-dev python3
slurmctld slurmd slurm-client slurm-wlm-basic-plugins munge libslurm-dev shellcheck
clang-14 libclang-rt-14-dev iproute2 chromium
libturbojpeg0-dev libpng-dev
libarchive-dev
fortunes python3-pil"

missing=""
for p in $PKGS; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done

if [ -z "$missing" ]; then
    echo "deps: all packages present"
    exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi
echo "deps: installing:$missing"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
# shellcheck disable=SC2086
$SUDO apt-get install -y -q --no-install-recommends $missing
