#pragma once
// A session as one self-contained HTML page for a reviewer: whether the
// record verifies, a timeline of what mattered, the process tree, files
// changed, network and TLS requests, violations and loss. No script, no
// network, no external assets. Every table is capped, so the page stays
// under kMaxReportBytes whatever the session's size; the caps are stated
// on the page where they cut.
#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "inspect/change_view.h"
#include "inspect/summary.h"
#include "ledger/verify.h"

namespace flightrec::inspect {

inline constexpr size_t kMaxReportBytes = 8u << 20;

class Report {
 public:
  explicit Report(int64_t session) : session_(session), summary_(session) { processes_.reserve(kMaxProcesses); }
  // Every entry of the session, in order (canonical: the caller checked).
  // Only entries of a type the page shows one by one need their JSON (the
  // rest are counted): `entry` may be null for the others.
  void add(const ledger::TopLevel& top, const nlohmann::json* entry);
  static bool shows(std::string_view type);
  // The agent's turns (inspect/turns.h), shown first as the Conversation.
  void conversation(nlohmann::json turns) { turns_ = std::move(turns); }
  // The page, with `verdict` (from verify) at its top.
  std::string html(const ledger::SessionVerdict& verdict, const std::string& record_name) const;

  static constexpr size_t kMaxRows = 2000;       // per table
  static constexpr size_t kMaxProcesses = 3000;  // in the tree
  static constexpr size_t kMaxText = 300;        // bytes of one value shown, escaped
  // Page bytes per long table and for the tree: with the short tables
  // they keep the page under kMaxReportBytes.
  static constexpr size_t kSectionBytes = 1u << 20;

 private:
  struct Process {
    int64_t pid = 0;
    int64_t parent = -1;  // its parent's id, -1: not seen
    std::string comm, exe, argv;
    std::string end;  // "exit 0", "killed by signal 9", or empty while running
    std::vector<int64_t> children;  // ids
  };
  struct Row {
    int64_t seq = 0, ts = 0, pid = 0;
    std::string comm, type, text, css;
  };
  // Keeps the first rows and, past them, the latest ones: an agent that
  // floods a table with cheap rows cannot push what it did last off the page.
  struct Rows {
    Rows(size_t first, size_t latest) : head_max(first), tail_max(latest) {}
    size_t head_max, tail_max;
    std::vector<Row> head;
    std::vector<Row> tail;  // ring of the latest, at tail_next
    size_t tail_next = 0, dropped = 0;
    void add(Row r);
    std::vector<const Row*> in_order() const;
  };
  void timeline(const nlohmann::json& e, const std::string& css);
  void what_changed(std::string& h) const;  // the "What changed" section
  // Its diffs, from a kept copy; `start`: where the section began in h.
  void diffs(std::string& h, const ChangeView::View& v, size_t start) const;
  Process* process_of(int64_t pid);   // the process now running as pid, or null
  Process* new_process(int64_t pid);  // a new one (a fork), or null past the cap

  int64_t session_;
  SessionSummary summary_;
  nlohmann::json turns_;
  Rows timeline_{1500, 500}, alerts_{1500, 500}, infos_{300, 200}, network_{kMaxRows, 0},
      tls_{1500, 500};
  std::vector<Process> processes_;        // by id, in the order they appeared
  std::map<int64_t, int64_t> running_;    // pid -> id of the process using it now
  size_t processes_dropped_ = 0;
  std::string genesis_command_, host_, policy_, policy_sha256_, kernel_;
  std::string workload_;  // a watched session's identity: pod, container, rule, cgroups
  ChangeView changes_{""};
  std::string kept_dir_;  // the session's kept changes (work_dir_mode: overlay), "" if none
};

}  // namespace flightrec::inspect
