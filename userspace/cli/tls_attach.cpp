#include "cli/tls_attach.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace flightrec::cli {
namespace {

// A path as process `pid` sees it, from the host: its root and cwd may differ.
std::string host_view(uint32_t pid, const std::string& path) {
  std::string proc = "/proc/" + std::to_string(pid);
  return path.rfind('/', 0) == 0 ? proc + "/root" + path : proc + "/cwd/" + path;
}

// Attaches to `path` as process `pid` named it. A short-lived process may be
// gone before its event is read: its view of the path is then lost, and the
// host's view of an absolute path is the best guess.
std::string attach_as_seen_by(probe::Capture& capture, uint32_t pid, const std::string& path) {
  std::string err = capture.attach_tls(host_view(pid, path));
  if (!err.empty() && path.rfind('/', 0) == 0 && access(("/proc/" + std::to_string(pid)).c_str(), F_OK) != 0)
    err = capture.attach_tls(path);
  return err;
}

}  // namespace

std::vector<std::string> attach_system_libssl(probe::Capture& capture) {
  std::vector<std::string> errors;
  for (const char* path : {"/usr/lib/x86_64-linux-gnu/libssl.so.3", "/usr/lib64/libssl.so.3", "/usr/lib/libssl.so.3"}) {
    if (access(path, R_OK) != 0) continue;
    if (std::string err = capture.attach_tls(path); !err.empty()) errors.push_back(err);
  }
  return errors;
}

std::vector<std::string> attach_mapped_libssl(probe::Capture& capture, const std::vector<std::string>& cgroups) {
  std::vector<std::string> errors;
  std::set<uint32_t> pids;
  for (const auto& cg : cgroups) {
    std::error_code ec;
    std::vector<std::string> dirs{cg};
    for (auto it = std::filesystem::recursive_directory_iterator(cg, ec);
         !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec))
      if (it->is_directory()) dirs.push_back(it->path());
    for (const auto& d : dirs) {
      std::ifstream procs(d + "/cgroup.procs");
      uint32_t pid;
      while (procs >> pid) pids.insert(pid);
    }
  }
  for (uint32_t pid : pids) {
    std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
    std::string line;
    std::set<std::string> seen;
    while (std::getline(maps, line)) {
      size_t at = line.find('/');
      if (at == std::string::npos || line.find("libssl.so", at) == std::string::npos) continue;
      std::string path = line.substr(at);
      if (!seen.insert(path).second) continue;
      if (std::string err = capture.attach_tls(host_view(pid, path)); !err.empty()) errors.push_back(err);
    }
  }
  return errors;
}

void attach_libssl_on_open(probe::Capture& capture, recorder::Recorder& rec) {
  rec.on_libssl_open = [&capture, &rec](uint32_t pid, const std::string& path) {
    if (std::string err = attach_as_seen_by(capture, pid, path); !err.empty())
      rec.note("error", "TLS capture: " + err);
  };
  // Programs that link OpenSSL in (node exports SSL_write from its binary);
  // most executables do not, so failing here is the normal case.
  rec.on_exec = [&capture](uint32_t pid, const std::string& file) { attach_as_seen_by(capture, pid, file); };
}

void attach_program_openssl(probe::Capture& capture, const std::string& program) {
  capture.attach_tls(program);  // fine to fail: most programs do not link OpenSSL in
}

}  // namespace flightrec::cli
