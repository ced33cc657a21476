#include "cli/tls_attach.h"

#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "common/system.h"

namespace flightrec::cli {
namespace {

// Attaches to `path` as process `pid` names it, resolved in its own view.
// A process gone before its event is read takes its view along; when its
// view is the host's (run without a sandbox), the host's is used instead.
std::string attach_as_seen_by(probe::Capture& capture, uint32_t pid, const std::string& path, bool host_view) {
  int fd = open_as_seen_by(int(pid), path);
  if (fd < 0 && errno == ENOENT && host_view && path.rfind('/', 0) == 0 &&
      access(("/proc/" + std::to_string(pid)).c_str(), F_OK) != 0)
    return capture.attach_tls(path);
  if (fd < 0) return errno_message(path + " as process " + std::to_string(pid) + " sees it", errno);
  std::string err = capture.attach_tls(fd, path);
  close(fd);
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
      if (std::string err = attach_as_seen_by(capture, pid, path, false); !err.empty()) errors.push_back(err);
    }
  }
  return errors;
}

void attach_libssl_on_open(probe::Capture& capture, recorder::Recorder& rec, bool host_view) {
  rec.on_libssl_open = [&capture, &rec, host_view](uint32_t pid, const std::string& path) {
    if (std::string err = attach_as_seen_by(capture, pid, path, host_view); !err.empty())
      rec.note("error", "TLS capture: " + err);
  };
  // Programs that link OpenSSL in (node exports SSL_write from its binary);
  // most executables do not, so failing here is the normal case.
  rec.on_exec = [&capture, host_view](uint32_t pid, const std::string& file) {
    attach_as_seen_by(capture, pid, file, host_view);
  };
}

void attach_program_openssl(probe::Capture& capture, const std::string& program) {
  capture.attach_tls(program);  // fine to fail: most programs do not link OpenSSL in
}

}  // namespace flightrec::cli
