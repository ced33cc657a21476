// flightrec query: print recorded entries, as stored (JSON Lines) or as
// one readable line each.
#include <algorithm>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>

#include "cli/commands.h"
#include "cli/options.h"
#include "common/text.h"
#include "inspect/describe.h"
#include "inspect/filter.h"
#include "ledger/canonical.h"
#include "ledger/store.h"
#include "policy/rule_ids.h"

namespace flightrec::cli {
namespace {

const char* kQueryUsage =
    "usage: flightrec query --db FILE [--json] [--session N] [filters]\n\n"
    "Prints entries in record order, each as one line: local time, session:seq, pid,\n"
    "comm, type and what it says, decoded (--json: each entry's canonical JSON, one per\n"
    "line, for jq and other programs). Filters combine (all must hold); --type and\n"
    "--rule may be repeated (any of them). --type syscall also matches the syscall\n"
    "entries of a more specific type (file_open, connect). Times are local unless\n"
    "they end in Z or +HH:MM; @SECONDS is Unix time; -10m (s, m, h, d) is that long\n"
    "before now. Exit 0 also when nothing\n"
    "matches; 2 for an unknown type, level or rule id.";

// Rule ids a record's own entries name, for --rule ids no list knows
// (a policy's own `id:`). The index finds the blocks that hold them.
std::set<std::string> rule_ids_in(ledger::Store& store, std::optional<int64_t> session) {
  std::set<std::string> ids;
  ledger::EntryFilter f;
  f.session = session;
  f.types = {"violation", "lsm", "summary", "snapshot"};
  ledger::TopLevel top;
  store.for_each_entry(f, [&](const ledger::EntryRow& e) {
    if (ledger::check_canonical(e.body, &top).empty())
      if (auto id = top.string("rule_id")) ids.insert(*id);
    return ids.size() < 10000;
  });
  return ids;
}

}  // namespace

int cmd_query(const Args& args) {
  po::options_description desc("options");
  std::string db, since, until, level;
  int64_t session = 0, pid = 0;
  std::string type_help = "only entries of this type: ";
  for (const auto& t : inspect::entry_types()) type_help += t + (&t == &inspect::entry_types().back() ? "" : ", ");
  inspect::Criteria c;
  std::string path, comm, exec, tool_call;
  desc.add_options()("help,h", "show this help")("db", po::value(&db)->required(), "SQLite record to read")(
      "json", po::bool_switch(), "one canonical JSON entry per line")(
      "session", po::value(&session), "only this session")(
      "type", po::value(&c.types), type_help.c_str())(
      "pid", po::value(&pid), "only entries of this process id")(
      "since", po::value(&since), "only entries at or after this wall time (2026-12-01 14:05, 2026-12-01T14:05:00Z, @1764597900, -10m)")(
      "until", po::value(&until), "only entries at or before this wall time")(
      "rule", po::value(&c.rules), "only entries naming this rule id, or one under it (network covers network.allow)")(
      "level", po::value(&level), "only entries of this level or more severe: INFO < ALERT < CRITICAL")(
      "path", po::value(&path), "only entries naming this path or one under it (whole components: /etc covers /etc/passwd, not /etcx)")(
      "comm", po::value(&comm), "only entries of tasks of this name (comm)")(
      "exec", po::value(&exec), "only entries of processes running this program (its path, or its file name alone)")(
      "tool-call", po::value(&tool_call),
      "only the entries of this tool call (its id, as the model gave it): its tool_call entry, the llm_call that asked "
      "for it, the acts linked to it and the tls entries of the request that returned its result");
  // "--since -10m": a value that begins with '-' is an option to the
  // parser; joined as --since=-10m it is the value.
  Args joined;
  for (size_t i = 0; i < args.size(); ++i) {
    bool time_option = args[i] == "--since" || args[i] == "--until";
    if (time_option && i + 1 < args.size() && args[i + 1].size() > 1 && args[i + 1][0] == '-' &&
        isdigit(static_cast<unsigned char>(args[i + 1][1]))) {
      joined.push_back(args[i] + "=" + args[i + 1]);
      ++i;
    } else {
      joined.push_back(args[i]);
    }
  }
  po::variables_map vm;
  if (!parse_options(joined, desc, kQueryUsage, vm)) return 0;

  for (const auto& t : c.types)
    if (std::find(inspect::entry_types().begin(), inspect::entry_types().end(), t) == inspect::entry_types().end())
      throw UsageError("--type " + t + ": no such entry type");
  if (vm.count("pid")) c.pid = pid;
  for (auto [text, out, name] : {std::tuple{&since, &c.since_ns, "--since"}, std::tuple{&until, &c.until_ns, "--until"}})
    if (vm.count(name + 2)) {
      *out = inspect::parse_wall_time(*text);
      if (!*out) throw UsageError(std::string(name) + " " + *text + ": not a time (2026-12-01, 2026-12-01 14:05[:09], 2026-12-01T14:05:09Z, @SECONDS, -10m)");
    }
  if (c.since_ns && c.until_ns && *c.since_ns > *c.until_ns) throw UsageError("--since is later than --until");
  if (vm.count("level")) {
    c.min_level = inspect::parse_level(level);
    if (!c.min_level) throw UsageError("--level " + level + ": not a level (INFO, ALERT, CRITICAL)");
  }
  if (vm.count("path")) {
    if (path.empty() || path[0] != '/') throw UsageError("--path " + path + ": give an absolute path");
    while (path.size() > 1 && path.back() == '/') path.pop_back();  // "/etc/" is "/etc"
    c.path = path;
  }
  if (vm.count("comm")) c.comm = comm;
  if (vm.count("exec")) {
    if (exec.empty()) throw UsageError("--exec: give a program's path or file name");
    c.exec = exec;
  }
  auto only = vm.count("session") ? std::optional<int64_t>(session) : std::nullopt;

  ledger::Store store(db, ledger::Store::Mode::Read);
  std::vector<std::string> unknown;
  for (const auto& r : c.rules)
    if (!policy::is_known_rule_id(r)) unknown.push_back(r);
  if (!unknown.empty()) {
    auto present = rule_ids_in(store, only);
    for (const auto& r : unknown) {
      // The id itself, or a family of ids the record names ("mycorp" for "mycorp.egress").
      bool named_here = std::any_of(present.begin(), present.end(),
                                    [&](const std::string& id) { return id == r || id.rfind(r + ".", 0) == 0; });
      if (!named_here) {
        std::string named;
        for (const auto& id : present) named += (named.empty() ? "" : ", ") + id;
        throw UsageError(printable("--rule " + r + ": no such rule id (policies/README.md lists them; this record's entries name " +
                                   (named.empty() ? std::string("none") : named) + ")"));
      }
    }
  }

  // --tool-call: the entries its tool_call entry names, by (session, seq).
  std::set<std::pair<int64_t, int64_t>> of_call;
  if (vm.count("tool-call")) {
    ledger::EntryFilter f;
    f.session = only;
    f.types = {"tool_call"};
    store.for_each_entry(f, [&](const ledger::EntryRow& e) {
      auto t = nlohmann::json::parse(e.body, nullptr, false);
      if (!t.is_object() || !t.contains("tool_call_id") || t["tool_call_id"] != tool_call) return true;
      of_call.insert({e.session, e.seq});
      if (t.contains("llm_call") && t["llm_call"].is_number_integer()) of_call.insert({e.session, t["llm_call"].get<int64_t>()});
      for (const char* key : {"act_seqs", "result_request_seqs"})
        if (t.contains(key) && t[key].is_array())
          for (const auto& s : t[key])
            if (s.is_number_integer()) of_call.insert({e.session, s.get<int64_t>()});
      return true;
    });
    if (of_call.empty()) {
      std::cerr << "flightrec query: no tool call " << printable(tool_call) << " in " << printable(db) << "\n";
      return 0;
    }
  }

  bool json = vm["json"].as<bool>();
  bool filtered = !c.empty();
  inspect::Matcher matcher(std::move(c));
  ledger::TopLevel top;
  std::ios::sync_with_stdio(false);
  store.for_each_entry(matcher.store_filter(only), [&](const ledger::EntryRow& e) {
    // A body that is not canonical JSON (nested without bound, say) is
    // never parsed further: verify names it.
    if (!of_call.empty() && !of_call.count({e.session, e.seq})) return true;
    bool canonical = ledger::check_canonical(e.body, &top).empty();
    if (filtered && (!canonical || !matcher.matches(e.session, top))) return true;
    if (json)
      std::cout << e.body << '\n';
    else if (!canonical)
      std::cout << e.session << ":" << e.seq << " (not canonical JSON: run flightrec verify)\n";
    else
      std::cout << inspect::entry_line(e.session, e.seq, nlohmann::json::parse(e.body, nullptr, false)) << '\n';
    return bool(std::cout);
  });
  return 0;
}

}  // namespace flightrec::cli
