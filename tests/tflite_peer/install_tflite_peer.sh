#!/usr/bin/env bash
# Fetches TensorFlow Lite 2.14 from Debian unstable (libtensorflow-lite2.14.1 and its runtime
# dependencies, including unstable's glibc and libstdc++) into DIR for the TFLite peer tests
# (tests/tflite_peer), unless DIR already holds them. Bookworm has no TFLite package, so the .debs
# are fetched with `apt-get download` against a private apt configuration (own sources list,
# state and cache under DIR/apt) and unpacked with `dpkg-deb -x` into DIR/root: nothing is
# installed system-wide and /etc/apt is not touched. The runner then runs under DIR/root's own
# loader (ld-linux-x86-64.so.2 --library-path DIR/root/usr/lib/x86_64-linux-gnu).
# Used by the ctest fixture tflite_peer_install; fails (exit 1, one line with the reason) when
# apt-get cannot fetch the packages, so the peer tests fail instead of being skipped.
#
# Usage: tests/tflite_peer/install_tflite_peer.sh DIR
set -euo pipefail
dir=${1:?usage: install_tflite_peer.sh DIR}
lib=$dir/root/usr/lib/x86_64-linux-gnu
stamp=$dir/root/.installed
if [ -f "$stamp" ] && [ -e "$lib/libtensorflow-lite.so.2.14.1" ] && [ -e "$lib/ld-linux-x86-64.so.2" ]; then
  echo "install_tflite_peer: present in $dir ($(tr '\n' ' ' <"$stamp"))"
  exit 0
fi
command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null ||
  { echo "install_tflite_peer: apt-get and dpkg-deb are needed (a Debian system)" >&2; exit 1; }
mkdir -p "$dir/apt/etc" "$dir/apt/state/lists/partial" "$dir/apt/cache/archives/partial" "$dir/debs"
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian unstable main" \
  >"$dir/apt/etc/sources.list"
opts=(-o "Dir::Etc::SourceList=$dir/apt/etc/sources.list" -o Dir::Etc::SourceParts=/dev/null
      -o "Dir::State=$dir/apt/state" -o "Dir::Cache=$dir/apt/cache" -o Dir::State::status=/dev/null
      -o Debug::NoLocking=1 -o APT::Sandbox::User=root -q)
apt-get "${opts[@]}" update >"$dir/apt/update.log" 2>&1 ||
  { echo "install_tflite_peer: apt-get update of Debian unstable failed (see $dir/apt/update.log)" >&2; exit 1; }
# The library and its direct dependencies as unstable declares them today (abseil's package name
# follows its soname); they include unstable's libc6 and libstdc++6, whose newer symbol versions
# the library needs. Their own dependencies are only libc6, libgcc-s1 and libstdc++6.
mapfile -t packages < <(apt-get "${opts[@]}" -s install --no-install-recommends libtensorflow-lite2.14.1 2>/dev/null |
  awk '$1 == "Inst" {print $2}' | grep -E '^(libtensorflow-lite2|libabsl|libcpuinfo|libfarmhash|libpthreadpool|libc6$|libgcc-s1$|libstdc\+\+6$)')
[ "${#packages[@]}" -ge 4 ] ||
  { echo "install_tflite_peer: cannot resolve libtensorflow-lite2.14.1's dependencies in Debian unstable" >&2; exit 1; }
(cd "$dir/debs" && rm -f ./*.deb && apt-get "${opts[@]}" download "${packages[@]}" >"$dir/apt/download.log" 2>&1) ||
  { echo "install_tflite_peer: apt-get download ${packages[*]} from Debian unstable failed (see $dir/apt/download.log)" >&2; exit 1; }
rm -rf "$dir/root"
mkdir -p "$dir/root"
for deb in "$dir"/debs/*.deb; do dpkg-deb -x "$deb" "$dir/root"; done
[ -e "$lib/libtensorflow-lite.so.2.14.1" ] && [ -e "$lib/ld-linux-x86-64.so.2" ] ||
  { echo "install_tflite_peer: the unpacked packages lack libtensorflow-lite.so.2.14.1 or the loader" >&2; exit 1; }
(cd "$dir/debs" && ls ./*.deb | sed 's|^\./||') >"$stamp"
echo "install_tflite_peer: installed into $dir: $(tr '\n' ' ' <"$stamp")"
