#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# deb.sh DIR - build tierd's Debian package (debian/) from the tracked files of this checkout,
# in DIR/tierd-VERSION with dpkg-buildpackage (binary only, unsigned); prints the .deb's path.
# The version is the CMake project's (debian/changelog must agree: checked).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: deb.sh DIR}
ver=$(sed -n 's/^project(tierd VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
dver=$(sed -n '1s/^tierd (\([^)]*\)).*/\1/p' debian/changelog)
[ "$ver" = "$dver" ] || { echo "deb: CMakeLists.txt says $ver, debian/changelog $dver" >&2; exit 1; }
rm -rf "$out"
mkdir -p "$out/tierd-$ver"
git ls-files -z | xargs -0 tar -cf - | tar -xf - -C "$out/tierd-$ver"
(cd "$out/tierd-$ver" && dpkg-buildpackage -us -uc -b -j"$(nproc)" >../build.log 2>&1) || {
  tail -30 "$out/build.log" >&2
  exit 1
}
ls "$out"/tierd_"$ver"_*.deb
