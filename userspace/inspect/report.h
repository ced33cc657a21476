#pragma once
// A session as one self-contained HTML page for a reviewer: whether the
// record verifies, a timeline of what mattered, the process tree, files
// changed, network and TLS requests, violations and loss. No script, no
// network, no external assets. Every table is capped, so the page stays
// under kMaxReportBytes whatever the session's size; the caps are stated
// on the page where they cut.
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "inspect/summary.h"
#include "ledger/verify.h"

namespace flightrec::inspect {

inline constexpr size_t kMaxReportBytes = 8u << 20;

class Report {
 public:
  explicit Report(int64_t session) : session_(session), summary_(session) {}
  // Every entry of the session, in order (canonical: the caller checked).
  // Only entries of a type the page shows one by one need their JSON (the
  // rest are counted): `entry` may be null for the others.
  void add(const ledger::TopLevel& top, const nlohmann::json* entry);
  static bool shows(std::string_view type);
  // The page, with `verdict` (from verify) at its top.
  std::string html(const ledger::SessionVerdict& verdict, const std::string& record_name) const;

  static constexpr size_t kMaxRows = 2000;       // per table
  static constexpr size_t kMaxProcesses = 3000;  // in the tree
  static constexpr size_t kMaxText = 300;        // bytes of one value shown

 private:
  struct Process {
    int64_t pid = 0, parent = 0;
    std::string comm, exe, argv;
    int64_t start_ns = 0;
    std::string end;  // "exit 0", "signal 9", or empty while running
    std::vector<int64_t> children;
  };
  struct Row {
    int64_t seq = 0, ts = 0, pid = 0;
    std::string comm, type, text, css;
  };
  void timeline(const nlohmann::json& e, const std::string& css);
  Process& process(int64_t pid);

  int64_t session_;
  SessionSummary summary_;
  std::vector<Row> timeline_, violations_, files_, network_, tls_;
  size_t timeline_dropped_ = 0, violations_dropped_ = 0, files_dropped_ = 0, network_dropped_ = 0, tls_dropped_ = 0;
  std::map<int64_t, Process> processes_;
  std::vector<int64_t> roots_;
  size_t processes_dropped_ = 0;
  std::string genesis_command_, host_, policy_, policy_sha256_, kernel_;
};

}  // namespace flightrec::inspect
