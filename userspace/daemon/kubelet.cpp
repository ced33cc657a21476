// Pod identity from cgroup names. Both drivers build the same tree (QoS
// level, pod, container); only the spelling differs. Every piece is checked
// against the one form kubelet and the runtimes write.
#include "daemon/kubelet.h"

#include <algorithm>
#include <vector>

namespace flightrec::daemon {
namespace {

bool lower_hex(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// A pod uid as the API server gives it (a UUID, 8-4-4-4-12 lowercase hex),
// or a static pod's: the 32 hex digits of a hash of its manifest.
bool pod_uid(std::string_view s) {
  if (s.size() == 32) return lower_hex(s);
  if (s.size() != 36) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? s[i] != '-' : !lower_hex(s.substr(i, 1))) return false;
  }
  return true;
}

bool container_id(std::string_view s) { return s.size() >= 12 && s.size() <= 64 && lower_hex(s); }

// Strips prefix and suffix from s if it has both (and something between).
bool strip(std::string_view& s, std::string_view prefix, std::string_view suffix) {
  if (s.size() <= prefix.size() + suffix.size() || !s.starts_with(prefix) || !s.ends_with(suffix)) return false;
  s = s.substr(prefix.size(), s.size() - prefix.size() - suffix.size());
  return true;
}

using Parts = std::vector<std::string_view>;

// Below BASE.slice: [BASE-QOS.slice/]BASE[-QOS]-pod<uid>.slice[/<runtime>-<id>.scope],
// BASE being "kubepods", or "kubelet-kubepods" under kubelet --cgroup-root
// /kubelet (kind): systemd names a slice after all its parents.
std::optional<PodInfo> systemd(const std::string& base, const Parts& rest) {
  PodInfo info;
  size_t i = 0;
  std::string pod_prefix = base + "-pod";
  for (const char* qos : {"burstable", "besteffort"})
    if (!rest.empty() && rest[0] == base + "-" + qos + ".slice") {
      info.qos = qos;
      pod_prefix = base + "-" + qos + "-pod";
      i = 1;
    }
  if (info.qos.empty()) info.qos = "guaranteed";
  if (i >= rest.size()) return std::nullopt;  // kubepods or a QoS level: no pod
  std::string_view uid = rest[i++];
  // systemd reads '-' as the slice hierarchy: the uid's dashes are '_'.
  if (!strip(uid, pod_prefix, ".slice") || uid.find('-') != std::string_view::npos) return std::nullopt;
  info.pod_uid = uid;
  std::replace(info.pod_uid.begin(), info.pod_uid.end(), '_', '-');
  if (!pod_uid(info.pod_uid)) return std::nullopt;
  if (i == rest.size()) return info;           // the pod-level cgroup
  if (i + 1 != rest.size()) return std::nullopt;  // nothing below a container
  std::string_view scope = rest[i];
  const std::pair<const char*, const char*> runtimes[] = {
      {"cri-containerd-", "containerd"}, {"crio-conmon-", "crio"}, {"crio-", "crio"}, {"docker-", "docker"}};
  for (const auto& [prefix, runtime] : runtimes) {
    std::string_view id = scope;
    if (!strip(id, prefix, ".scope")) continue;
    if (!container_id(id)) return std::nullopt;
    info.container_id = id;
    info.runtime = runtime;
    info.monitor = std::string_view(prefix) == "crio-conmon-";
    return info;
  }
  return std::nullopt;
}

// Below kubepods: [QOS/]pod<uid>[/<id>]
std::optional<PodInfo> cgroupfs(const Parts& rest) {
  PodInfo info;
  size_t i = 0;
  if (!rest.empty() && (rest[0] == "burstable" || rest[0] == "besteffort")) {
    info.qos = rest[0];
    i = 1;
  } else {
    info.qos = "guaranteed";
  }
  if (i >= rest.size()) return std::nullopt;
  std::string_view uid = rest[i++];
  if (!strip(uid, "pod", "") || !pod_uid(uid)) return std::nullopt;
  info.pod_uid = uid;
  if (i == rest.size()) return info;
  if (i + 1 != rest.size() || !container_id(rest[i])) return std::nullopt;
  info.container_id = rest[i];
  return info;
}

}  // namespace

std::optional<PodInfo> parse_kubelet_cgroup(std::string_view relpath) {
  if (relpath.starts_with('/')) relpath.remove_prefix(1);
  if (relpath.empty() || relpath.size() > 4096) return std::nullopt;
  Parts parts;
  for (size_t start = 0;;) {
    size_t slash = relpath.find('/', start);
    std::string_view c = relpath.substr(start, slash == std::string_view::npos ? slash : slash - start);
    if (c.empty() || c.find('\0') != std::string_view::npos) return std::nullopt;
    parts.push_back(c);
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  // Only where kubelet puts it: kubepods at the root (both drivers); with
  // --cgroup-root=/P, under the cgroupfs driver P/kubepods (P at the root,
  // made by root), under the systemd driver P-kubepods.slice under exactly
  // P's slices (P.slice for P, a.slice/a-b.slice for a-b). One anywhere
  // else was made by someone who may make cgroups there (a container below
  // its own, a user under user.slice) and names nothing.
  Parts rest(parts.begin() + 1, parts.end());
  if (parts[0] == "kubepods") return cgroupfs(rest);
  if (parts.size() > 1 && parts[1] == "kubepods" && !parts[0].ends_with(".slice"))
    return cgroupfs(Parts(parts.begin() + 2, parts.end()));
  if (parts[0] == "kubepods.slice") return systemd("kubepods", rest);
  for (size_t k = 1; k < parts.size(); ++k) {
    if (!parts[k].ends_with("-kubepods.slice") || parts[k].size() <= 15) continue;
    std::string_view prefix = parts[k].substr(0, parts[k].size() - 15);  // P
    std::string chain;
    size_t level = 0;
    for (size_t at = 0; level < k; ++level) {
      size_t dash = prefix.find('-', at);
      chain = std::string(prefix.substr(0, dash));
      if (parts[level] != chain + ".slice") return std::nullopt;
      if (dash == std::string_view::npos) {
        ++level;
        break;
      }
      at = dash + 1;
    }
    if (level != k || chain != prefix) return std::nullopt;
    return systemd(std::string(parts[k].substr(0, parts[k].size() - 6)), Parts(parts.begin() + long(k) + 1, parts.end()));
  }
  return std::nullopt;
}

}  // namespace flightrec::daemon
