#!/bin/bash
# Builds flightrec_VERSION_amd64.deb from a build directory: flightrec and
# flightrecd, the systemd unit, the default daemon config (a conffile, so
# an edited one survives upgrades and purge removes it), the shipped
# policies, the docs and examples, and the alerting rules and dashboard. Records under /var/lib/flightrec are evidence: purge leaves them.
#   tools/build-deb.sh [BUILD_DIR] [OUT_DIR]     (defaults: build, build)
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$src/build}" && pwd)
out=$(mkdir -p "${2:-$build}" && cd "${2:-$build}" && pwd)
for bin in flightrec flightrecd; do
  [ -x "$build/$bin" ] || { echo "build-deb: $build/$bin is missing (build first)" >&2; exit 1; }
done
version=$(sed -n 's/^project(flightrec VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
[ -n "$version" ] || { echo "build-deb: no version in CMakeLists.txt" >&2; exit 1; }

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
install -D -m 0755 "$build/flightrec" "$stage/usr/bin/flightrec"
install -D -m 0755 "$build/flightrecd" "$stage/usr/sbin/flightrecd"
install -D -m 0644 "$src/tools/deb/flightrecd.service" "$stage/lib/systemd/system/flightrecd.service"
install -D -m 0644 "$src/tools/deb/flightrecd.yaml" "$stage/etc/flightrec/flightrecd.yaml"
install -d -m 0755 "$stage/usr/share/flightrec/policies"
install -m 0644 "$src"/policies/*.yaml "$src/policies/README.md" "$stage/usr/share/flightrec/policies/"
install -D -m 0644 "$src/README.md" "$stage/usr/share/doc/flightrec/README.md"
# The reference docs (benchmarks stay in the repository), the examples, and
# the health rules and dashboard; the --help pages are the manual.
for doc in FORMAT LITE SHIPPING HEALTH OTLP RECORDING AGENTS POLICIES DAEMON SECURITY; do install -m 0644 "$src/docs/$doc.md" "$stage/usr/share/doc/flightrec/"; done
install -d -m 0755 "$stage/usr/share/doc/flightrec/examples" "$stage/usr/share/flightrec/prometheus" "$stage/usr/share/flightrec/grafana"
install -m 0644 "$src"/examples/* "$stage/usr/share/doc/flightrec/examples/"
install -m 0644 "$src"/deploy/prometheus/*.yml "$stage/usr/share/flightrec/prometheus/"
install -m 0644 "$src"/deploy/grafana/*.json "$stage/usr/share/flightrec/grafana/"
strip --strip-unneeded "$stage/usr/bin/flightrec" "$stage/usr/sbin/flightrecd"

mkdir -p "$stage/DEBIAN"
echo /etc/flightrec/flightrecd.yaml > "$stage/DEBIAN/conffiles"
# The shared libraries the binaries link, by the Debian package that has each.
# (usrmerge: dpkg knows some as /lib/..., others as /usr/lib/...)
package_of() {
  local real; real=$(realpath "$1")
  for p in "$1" "$real" "${real#/usr}" "/usr${real}"; do
    # awk reads to the end: a reader that stops early would SIGPIPE the writer (pipefail)
    dpkg -S "$p" 2>/dev/null | awk -F: 'NR == 1 {print $1; found = 1} END {exit !found}' && return 0
  done
  echo "build-deb: no Debian package has $1" >&2
  return 1
}
# And those they load when needed (dlopen): capstone, for Go programs'
# probes; libnats, for JetStream outputs and `flightrec collect`.
loaded=""
for lib in libcapstone libnats; do
  found=$(ldconfig -p | awk -v re="^${lib}\\.so\\.[0-9]" '$1 ~ re && /x86-64/ && !found {print $NF; found = 1}')
  [ -n "$found" ] || { echo "build-deb: $lib is not installed" >&2; exit 1; }
  loaded="$loaded $found"
done
depends=$(for bin in "$stage/usr/bin/flightrec" "$stage/usr/sbin/flightrecd"; do
            ldd "$bin" | awk '/=> \//{print $3}'
          done | { cat; printf '%s\n' $loaded; } | sort -u | while read -r lib; do package_of "$lib"; done |
          sort -u | grep -v '^libc6$' | paste -sd, | sed 's/,/, /g')
cat > "$stage/DEBIAN/control" <<CONTROL
Package: flightrec
Version: $version
Architecture: amd64
Maintainer: flightrec developers <flightrec@localhost>
Depends: libc6, $depends
Section: admin
Priority: optional
Installed-Size: $(du -sk "$stage" --exclude=DEBIAN | cut -f1)
Description: flight recorder for AI agents (eBPF, sealed records)
 flightrec runs commands confined and records what they do at the kernel
 boundary into a record sealed by a hash chain, a Merkle tree and signed
 checkpoints; flightrecd records the cgroups its config names.
CONTROL
cat > "$stage/DEBIAN/postinst" <<'SCRIPT'
#!/bin/sh
set -e
if [ "$1" = configure ] && [ -d /run/systemd/system ]; then
  systemctl daemon-reload || true
fi
SCRIPT
cat > "$stage/DEBIAN/prerm" <<'SCRIPT'
#!/bin/sh
set -e
if [ "$1" = remove ] && [ -d /run/systemd/system ]; then
  systemctl stop flightrecd.service || true
fi
SCRIPT
cat > "$stage/DEBIAN/postrm" <<'SCRIPT'
#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then
  systemctl daemon-reload || true
fi
if [ "$1" = purge ]; then
  rmdir /etc/flightrec 2>/dev/null || true
  if [ -d /var/lib/flightrec ]; then
    echo "flightrec: records in /var/lib/flightrec are kept (remove them yourself)" >&2
  fi
fi
SCRIPT
chmod 0755 "$stage/DEBIAN/postinst" "$stage/DEBIAN/prerm" "$stage/DEBIAN/postrm"
deb="$out/flightrec_${version}_amd64.deb"
dpkg-deb --root-owner-group --build "$stage" "$deb" >/dev/null
echo "$deb"
