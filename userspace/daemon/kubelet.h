#pragma once
// The pod and container kubelet encodes in a cgroup's path, for both of its
// cgroup drivers:
//   systemd:  kubepods.slice/kubepods-burstable.slice/
//               kubepods-burstable-pod<uid with _>.slice/cri-containerd-<id>.scope
//             (guaranteed: kubepods.slice/kubepods-pod<uid>.slice/...;
//              docker-<id>.scope, crio-<id>.scope, crio-conmon-<id>.scope)
//   cgroupfs: kubepods/burstable/pod<uid>/<id>  (guaranteed: kubepods/pod<uid>/<id>)
// The path is read, never trusted: anything that is not exactly one of
// these shapes is not a pod, rather than a guess.
#include <optional>
#include <string>
#include <string_view>

namespace flightrec::daemon {

struct PodInfo {
  std::string pod_uid;       // "1234abcd-5678-90ab-cdef-1234567890ab" (or a static pod's 32 hex)
  std::string container_id;  // 12-64 lowercase hex; empty: the pod-level cgroup
  std::string qos;           // "guaranteed" | "burstable" | "besteffort"
  std::string runtime;       // "containerd" | "docker" | "crio" | "" (cgroupfs, or pod level)
  // crio-conmon-<id>.scope: CRI-O's monitor of container <id>, not the
  // container's own processes (the caller will usually skip it).
  bool monitor = false;
};

// relpath: relative to the cgroup v2 root (one leading '/' is ignored).
// The first component that is kubepods.slice (systemd; or P-kubepods.slice,
// kubelet --cgroup-root=/P, as kind runs it, all names below then prefixed
// with "P-") or kubepods (cgroupfs) starts the kubelet part, which must then
// be a QoS level, a pod and at most a container, and nothing below. nullopt
// otherwise (outside kubepods, a QoS-level cgroup, a malformed uid or id...).
std::optional<PodInfo> parse_kubelet_cgroup(std::string_view relpath);

}  // namespace flightrec::daemon
