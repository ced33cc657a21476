// flightrec probe: which kernel features really load here; with --tls,
// which TLS stack a program holds and whether its plaintext is captured.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/options.h"
#include "common/error.h"
#include "common/system.h"
#include "probe/capture.h"
#include "probe/features.h"
#include "probe/tls_finder.h"
#include "sandbox/cgroup.h"
#include "sandbox/leftovers.h"

namespace flightrec::cli {
namespace {

// What the TLS probes would find in a program or library, without
// attaching anything: exit 0 when its plaintext is captured.
int probe_tls_file(const std::string& path, bool json, bool use_cache) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) throw Error(errno_message("cannot open " + path, errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    throw Error(path + " is not a regular file");
  }
  auto began = std::chrono::steady_clock::now();
  bool cached = false;
  probe::TlsFinding found = use_cache ? probe::find_tls_cached(fd, &cached) : probe::find_tls(fd);
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - began).count();
  close(fd);
  bool captured = !found.entries.offsets.empty();
  if (json) {
    nlohmann::json j = {{"file", path},         {"tls", found.tls},   {"captured", captured},
                        {"read_ms", ms},        {"cached", cached}, {"functions", nlohmann::json::array()}};
    if (found.tls) j["stack"] = found.stack, j["found_by"] = found.found_by;
    if (!captured) j["why"] = found.why;
    for (size_t i = 0; i < found.entries.offsets.size(); ++i)
      j["functions"].push_back({{"name", found.entries.names[i]}, {"file_offset", found.entries.offsets[i]}});
    std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return captured ? 0 : 1;
  }
  std::cout << path << ": ";
  if (!found.tls) std::cout << "no TLS stack flightrec knows (" << found.why << ")\n";
  else if (!captured) std::cout << found.stack << ", not captured: " << found.why << "\n";
  else std::cout << found.stack << ", captured (found by " << found.found_by << ")\n";
  for (size_t i = 0; i < found.entries.offsets.size(); ++i) {
    char offset[32];
    std::snprintf(offset, sizeof(offset), "0x%llx", static_cast<unsigned long long>(found.entries.offsets[i]));
    std::cout << "  " << std::left << std::setw(44) << found.entries.names[i] << " at file offset " << offset << "\n";
  }
  std::cout << "  (" << (cached ? "from the cache " + std::string(probe::kTlsFindCache) + " in" : "read in") << " "
            << std::fixed << std::setprecision(1) << ms << " ms)\n";
  return captured ? 0 : 1;
}

}  // namespace

int cmd_probe(const Args& args) {
  po::options_description desc("options");
  desc.add_options()("help,h", "show this help")("json", po::bool_switch(),
                                                 "print the findings as one JSON object (exit codes unchanged)")(
      "tls", po::value<std::string>(),
      "FILE: say which TLS stack this program or library holds and whether flightrec captures its plaintext "
      "(nothing is attached; exit 0 when captured, 1 when not)")(
      "no-cache", po::bool_switch(),
      "with --tls: read the file again, not what a session found in it before (kept, as root, for files of 16 MiB "
      "and more, in /var/cache/flightrec/tls)");
  po::variables_map vm;
  if (!parse_options(args, desc,
                     "usage: flightrec probe [--json]\n       flightrec probe --tls FILE [--json]\n\nLoads tiny BPF programs and maps to find what this "
                     "kernel allows, then\nflightrec's own programs, hook by hook (what a session "
                     "would attach here);\nexit 0 when everything recording needs is there, 1 otherwise.\n"
                     "--json prints {\"ok\", \"features\":[{\"name\", \"available\", \"required\", \"detail\"}],\n"
                     "\"programs\":[{\"section\", \"attached\"}], \"programs_error\" (when they did not load)}.",
                     vm))
    return 0;
  bool json = vm["json"].as<bool>();
  if (vm.count("tls")) return probe_tls_file(vm["tls"].as<std::string>(), json, !vm["no-cache"].as<bool>());
  nlohmann::json out = {{"features", nlohmann::json::array()}, {"programs", nlohmann::json::array()}};
  auto line = [&](const std::string& name, bool yes, const std::string& detail) {
    if (json) return;
    std::cout << std::left << std::setw(48) << name << (yes ? "yes" : "no ");
    if (!detail.empty()) std::cout << "  " << detail;
    std::cout << "\n";
  };
  bool ok = true;
  for (const auto& f : probe::probe_features()) {
    bool missing = f.required && !f.available;
    ok = ok && !missing;
    line(f.name, f.available, f.detail + (missing ? (f.detail.empty() ? "" : "  ") + std::string("(required)") : ""));
    out["features"].push_back({{"name", f.name}, {"available", f.available}, {"required", f.required}, {"detail", f.detail}});
  }
  // flightrec's own programs, loaded as a session would (into a throwaway
  // cgroup): each hook attached, or refused alone and left to the tracepoints.
  if (ok) {
    try {
      // Claimed: a probe killed midway leaves its cgroups to the next reaper.
      sandbox::SessionClaim claim("probe-" + std::to_string(getpid())), lite_claim("probe-lite-" + std::to_string(getpid()));
      sandbox::Cgroup cgroup = sandbox::Cgroup::create(claim.name());
      sandbox::Cgroup lite_cgroup = sandbox::Cgroup::create(lite_claim.name());
      probe::CaptureOptions copts;
      copts.session_cgroups = {cgroup.id()};
      copts.ring_bytes = 64u << 10;
      copts.lite = true;
      {
        probe::Capture capture(copts, [](const void*, size_t) {});
        std::vector<std::string> sections = capture.attached();
        try {  // and a lite session: its tracepoints attach (a failure here is lite's alone)
          capture.open_session({lite_cgroup.id()}, {.lite = true});
          size_t lite_calls = 0;
          for (const auto& section : capture.attached(true))
            if (section.rfind("tracepoint/", 0) == 0) {
              ++lite_calls;
              out["programs"].push_back({{"section", section}, {"attached", true}, {"lite", true}});
            }
          std::string absent;
          for (const auto& name : capture.lite_absent()) absent += (absent.empty() ? "" : " ") + name;
          line("lite mode: " + std::to_string(lite_calls) + " syscalls:sys_exit_* tracepoints", lite_calls > 0,
               absent.empty() ? "" : "not in this kernel (ENOSYS, nothing to miss): " + absent);
        } catch (const Error& e) {
          line("lite mode", false, e.what());
          out["lite_error"] = e.what();
        }
        for (const auto& section : sections) {
          line("program " + section, true, "");
          out["programs"].push_back({{"section", section}, {"attached", true}});
        }
        for (const auto& section : capture.refused()) {
          line("program " + section, false, "refused by this kernel: the syscall tracepoints see these calls");
          out["programs"].push_back({{"section", section}, {"attached", false}});
        }
      }
      cgroup.remove_if_owned();
      lite_cgroup.remove_if_owned();
    } catch (const Error& e) {
      ok = false;
      line("flightrec's programs", false, e.what());
      out["programs_error"] = e.what();
    }
  }
  if (json) {
    out["ok"] = ok;
    std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  }
  return ok ? 0 : 1;
}

}  // namespace flightrec::cli
