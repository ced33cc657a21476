// flightrec query: print recorded entries, as stored (JSON Lines) or as
// one readable line each.
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/options.h"
#include "ledger/canonical.h"
#include "ledger/store.h"
#include "common/text.h"

#include <algorithm>

namespace flightrec::cli {
namespace {

const char* kQueryUsage =
    "usage: flightrec query --db FILE [--json] [--session N] [--type T]... [--pid P]\n\n"
    "Prints entries in record order. --json prints each entry's canonical JSON, one per\n"
    "line. --type syscall also matches the syscall entries that have a more specific\n"
    "type (file_open, connect).";

// Every type of entry a record holds (docs/FORMAT.md).
const std::vector<std::string> kEntryTypes = {
    "syscall", "file_open", "connect", "exec", "exec_argv", "fork", "exit", "cgroup_move", "tls", "lsm", "lost", "violation",
    "file_change", "snapshot", "summary", "genesis", "session_end", "cgroup_gone", "freeze", "thaw", "error",
    "malformed", "changes_kept", "file_changes_truncated", "file_changes_at_close_skipped"};

std::string summary(const nlohmann::json& j) {
  const std::string type = j.value("type", "");
  auto str = [&](const char* k) { return j.contains(k) ? j[k].dump() : std::string(); };
  if (j.contains("nr")) {
    std::string s = j.value("name", "?");
    for (const char* k : {"path", "oldpath", "newpath", "target", "linkpath", "source", "addr"})
      if (j.contains(k)) s += " " + std::string(k) + "=" + str(k);
    if (j.contains("kernel_path") && str("kernel_path") != str("path")) s += " opened=" + str("kernel_path");
    if (j.contains("port")) s += " port=" + str("port");
    if (j.contains("ret")) s += " = " + str("ret");
    if (j.contains("err")) s += " " + j["err"].get<std::string>();
    return s;
  }
  if (type == "exec") return str("filename") + " " + str("argv");
  if (type == "fork") return "child " + str("child_pid") + (j.value("thread", 0) ? " (thread)" : "");
  if (type == "exit") return "code " + str("code") + " signal " + str("signal");
  if (type == "lost") return str("lost") + " events lost";
  if (type == "genesis") return str("mode") + " " + str("command") + " " + str("cgroups");
  if (type == "session_end") return str("reason");
  return j.dump();
}

}  // namespace

int cmd_query(const Args& args) {
  po::options_description desc("options");
  std::string db;
  int64_t session = 0, pid = 0;
  std::string type_help = "only entries of this type (repeatable): ";
  for (const auto& t : kEntryTypes) type_help += t + (&t == &kEntryTypes.back() ? "" : ", ");
  std::vector<std::string> types;
  desc.add_options()("help,h", "show this help")("db", po::value(&db)->required(),
                                                 "SQLite record to read")(
      "json", po::bool_switch(), "one canonical JSON entry per line")(
      "session", po::value(&session), "only this session")(
      "type", po::value(&types), type_help.c_str())(
      "pid", po::value(&pid), "only entries of this process id");
  po::variables_map vm;
  if (!parse_options(args, desc, kQueryUsage, vm)) return 0;

  ledger::Store store(db, ledger::Store::Mode::Read);
  ledger::EntryFilter f;
  if (vm.count("session")) f.session = session;
  // Types and pids are matched against each entry's own body: the store's
  // index is a convenience a forger could change without touching it.
  std::vector<std::string> wanted;
  for (const auto& t : types) {
    if (std::find(kEntryTypes.begin(), kEntryTypes.end(), t) == kEntryTypes.end())
      throw UsageError("--type " + t + ": no such entry type");
    wanted.push_back(t);
    if (t == "syscall") {
      wanted.push_back("file_open");
      wanted.push_back("connect");
    }
  }
  // The store's index skips blocks that hold none of these.
  f.types = wanted;
  if (vm.count("pid")) f.pid = pid;
  ledger::TopLevel top;
  bool json = vm["json"].as<bool>();
  std::ios::sync_with_stdio(false);
  store.for_each_entry(f, [&](const ledger::EntryRow& e) {
    if (!wanted.empty() || vm.count("pid")) {
      if (!ledger::check_canonical(e.body, &top).empty()) return true;  // verify reports it
      auto type = top.string("type");
      if (!wanted.empty() && (!type || std::find(wanted.begin(), wanted.end(), *type) == wanted.end()))
        return true;
      if (vm.count("pid") && top.integer("pid") != pid) return true;
    }
    if (json) {
      std::cout << e.body << '\n';
    } else {
      // Everything a recorded process named is escaped: a path or comm
      // with control characters cannot rewrite or hide other lines.
      auto j = nlohmann::json::parse(e.body, nullptr, false);
      std::string comm = j.is_object() && j.contains("comm") && j["comm"].is_string() ? j["comm"].get<std::string>() : "";
      std::cout << e.session << ":" << e.seq << " "
                << printable(e.type + " " + std::to_string(e.pid) + " " + comm + " " +
                             (j.is_object() ? summary(j) : "(unparsable entry)"))
                << '\n';
    }
    return bool(std::cout);
  });
  return 0;
}

}  // namespace flightrec::cli
