#!/bin/bash
# Boots Debian's stock kernels under QEMU (software emulation: KVM is not
# available here) and runs a command from the host's file system inside,
# to test what this host's kernel refuses (BPF-LSM, fentry) on kernels that
# allow it. The guest's root is the host's / shared read-only over 9p, with
# a tmpfs on /tmp; the command's exit code comes back through a writable
# 9p share (qemu's own exit status says nothing about the guest).
#
#   tools/vmtest/run.sh [--kernel 6.1|6.12|all] [--timeout SECONDS] [--tmp tmpfs|ext4] -- COMMAND [ARGS...]
#
# --tmp ext4: the guest's /tmp is an ext4 disk instead of a tmpfs (a file
# system that Linux before 6.3 can idmap, as the sandbox's work directory needs).
# Needs qemu-system-x86, busybox-static and e2fsprogs; kernels are fetched with
# apt-get download and cached in $VMTEST_CACHE (default /var/cache/flightrec-vmtest).
set -euo pipefail

kernels=all
timeout=900
tmpfs=tmpfs
while [ $# -gt 0 ]; do
  case "$1" in
    --kernel) kernels=$2; shift 2 ;;
    --timeout) timeout=$2; shift 2 ;;
    --tmp) tmpfs=$2; shift 2
      case "$tmpfs" in tmpfs|ext4) ;; *) echo "vmtest: --tmp takes tmpfs or ext4" >&2; exit 2 ;; esac ;;
    --) shift; break ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "vmtest: unknown option $1" >&2; exit 2 ;;
  esac
done
[ $# -gt 0 ] || { echo "vmtest: missing command (see --help)" >&2; exit 2; }
for tool in qemu-system-x86_64 busybox dpkg-deb cpio depmod mkfs.ext4; do
  command -v "$tool" >/dev/null || { echo "vmtest: $tool is missing (apt-get install qemu-system-x86 busybox-static cpio kmod xz-utils e2fsprogs)" >&2; exit 2; }
done
cache=${VMTEST_CACHE:-/var/cache/flightrec-vmtest}
mkdir -p "$cache"

# The newest package of a kernel series, by name.
package_for() {
  case "$1" in
    6.1) apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-6\.1\./ && !found {print $2; found = 1}' ;;
    6.12) apt-cache search --names-only '^linux-image-6\.12\.[0-9]+\+deb12-amd64-unsigned$' | awk '{print $1}' | sort -V | tail -1 ;;
  esac
}

# Unpacks the kernel and builds an initramfs with busybox and the 9p modules.
prepare() {
  local series=$1 pkg dir
  pkg=$(package_for "$series")
  [ -n "$pkg" ] || { echo "vmtest: no Debian package for kernel $series" >&2; return 1; }
  dir="$cache/$pkg"
  if [ ! -f "$dir/initrd.gz" ] || [ "$(dirname "$0")/init" -nt "$dir/initrd.gz" ] || [ "$0" -nt "$dir/initrd.gz" ]; then
    rm -rf "$dir" && mkdir -p "$dir/pkg" "$dir/initrd/bin" "$dir/initrd/modules"
    (cd "$dir" && apt-get download -q "$pkg" >/dev/null && dpkg-deb -x ./*.deb pkg && rm -f ./*.deb)
    cp "$dir"/pkg/boot/vmlinuz-* "$dir/vmlinuz"
    local moddir
    moddir=$(echo "$dir"/pkg/lib/modules/*)
    # The package leaves modules.dep to depmod at install time.
    depmod -b "$dir/pkg" "$(basename "$moddir")"
    # 9p over virtio and what it needs, in load order (modules.dep lists deps).
    local order=()
    add_module() {
      local name=$1 line path dep
      line=$(grep -E "(^|/)$name\.ko(\.xz|\.zst)?:" "$moddir/modules.dep" || true)
      [ -n "$line" ] || return 0
      path=${line%%:*}
      for dep in ${line#*:}; do add_module "$(basename "${dep%%.ko*}")"; done
      for m in "${order[@]:-}"; do [ "$m" = "$path" ] && return 0; done
      order+=("$path")
    }
    # (ext4 loads its checksum driver by name, not as a module dependency.)
    for m in virtio_pci 9pnet_virtio 9p overlay virtio_blk crc32c_generic ext4; do add_module "$m"; done
    local n=0
    for path in "${order[@]}"; do
      n=$((n + 1))
      local out
      out="$dir/initrd/modules/$(printf %02d $n)-$(basename "${path%%.ko*}").ko"
      case "$path" in
        *.xz) xz -dc "$moddir/$path" > "$out" ;;
        *.zst) zstd -qdc "$moddir/$path" > "$out" ;;
        *) cp "$moddir/$path" "$out" ;;
      esac
    done
    cp "$(command -v busybox)" "$dir/initrd/bin/busybox"
    cp "$(dirname "$0")/init" "$dir/initrd/init"
    chmod +x "$dir/initrd/init"
    (cd "$dir/initrd" && find . | cpio -o -H newc --quiet | gzip -1) > "$dir/initrd.gz"
    rm -rf "$dir/pkg"
  fi
  echo "$dir"
}

run_one() {
  local series=$1 dir out
  shift
  # One preparer at a time: ctest -j2 boots two guests of one kernel at once.
  exec 9>"$cache/.prepare.lock"
  flock 9
  dir=$(prepare "$series")
  flock -u 9
  out=$(mktemp -d /tmp/flightrec-vmtest-XXXXXX)
  printf '%q ' "$@" > "$out/command"
  # The guest's watchdog reports its processes 150 s before the timeout.
  if [ "$timeout" -gt 300 ]; then
    echo $((timeout - 150)) > "$out/report-after"
    cp "$(dirname "$0")/hang-report" "$out/hang-report"
  fi
  # The guest gets a fresh /tmp; a command that lives under the host's /tmp
  # (a CI clone, say) keeps its top directory there, read-only.
  case "$1" in /tmp/?*) echo "$1" | cut -d/ -f3 > "$out/keep-tmp" ;; esac
  local disk=()
  if [ "$tmpfs" = ext4 ]; then
    # Sparse: only what the guest writes takes space.
    truncate -s 8G "$out.ext4"
    mkfs.ext4 -q -F "$out.ext4"
    disk=(-drive "file=$out.ext4,if=virtio,format=raw,cache=unsafe")
    touch "$out/tmp-ext4"
  fi
  echo "vmtest: kernel $series ($(basename "$dir")), /tmp on $tmpfs: $*"
  timeout "$timeout" qemu-system-x86_64 "${disk[@]}" -accel tcg,thread=single -cpu max -smp 2 -m 3072 -nographic -no-reboot \
    -kernel "$dir/vmlinuz" -initrd "$dir/initrd.gz" \
    -append "console=ttyS0 quiet loglevel=5 panic=-1 softlockup_panic=1 lsm=lockdown,capability,landlock,yama,apparmor,bpf" \
    -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
    -virtfs local,path="$out",mount_tag=out,security_model=none \
    </dev/null | sed -u "s/^/[$series] /" || true
  local code=124
  [ -f "$out/exit-code" ] && code=$(cat "$out/exit-code")
  rm -rf "$out" "$out.ext4"
  echo "vmtest: kernel $series: exit $code"
  return "$code"
}

status=0
case "$kernels" in
  all) series_list="6.1 6.12" ;;
  *) series_list=$kernels ;;
esac
for series in $series_list; do
  run_one "$series" "$@" || status=1
done
exit $status
