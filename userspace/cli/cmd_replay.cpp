// flightrec replay: what another policy would have denied in a recorded
// session (the shadow -> replay -> enforce workflow, policies/README.md).
#include <iostream>

#include "cli/commands.h"
#include "cli/options.h"
#include "common/error.h"
#include "common/progress.h"
#include "inspect/replay.h"
#include "ledger/store.h"
#include "policy/policy.h"

namespace flightrec::cli {

int cmd_replay(const Args& args) {
  po::options_description desc("options");
  std::string db, policy_name, work_dir;
  int64_t session = 0;
  size_t limit = 50;
  desc.add_options()("help,h", "show this help")("db", po::value(&db)->required(), "SQLite record to read")(
      "session", po::value(&session)->required(), "the recorded session")(
      "policy", po::value(&policy_name)->required(), "the policy to judge it by: a shipped name (agent, strict, ...) or a YAML file")(
      "work-dir", po::value(&work_dir),
      "the session's work directory (default: the one its genesis entry names; needed for sessions recorded without a confining policy)")(
      "json", po::bool_switch(), "one JSON object")(
      "limit", po::value(&limit)->default_value(limit), "entries listed per list (the counts are always complete)");
  po::variables_map vm;
  const char* usage =
      "usage: flightrec replay --db FILE --session N --policy NAME|FILE [--work-dir DIR] [--json]\n\n"
      "Judges every entry of a recorded session by another policy, as shadow mode\n"
      "would, and sets it beside what the recorded policy did (the session's own\n"
      "violation entries): what the new policy would deny that was allowed, with\n"
      "rule ids and counts, and what was denied that it would allow. It judges what\n"
      "the session did; how the agent would have reacted to another answer is not in\n"
      "the record. Limits, packet filters and circuit breakers are not replayed.\n"
      "Exit 0 when the replay ran (whatever it found), 1 if the record cannot be read.";
  if (!parse_options(args, desc, usage, vm)) return 0;
  if (limit == 0) throw UsageError("--limit must be at least 1");
  if (vm.count("work-dir") && (work_dir.empty() || work_dir[0] != '/'))
    throw UsageError("--work-dir " + work_dir + ": give an absolute path");

  policy::Policy policy;
  try {
    policy = policy::load(policy_name);
  } catch (const policy::PolicyError& e) {
    throw UsageError(e.what());
  }
  ledger::Store store(db, ledger::Store::Mode::Read);
  // The work directory: given, or as the genesis entry recorded it.
  ledger::EntryFilter f;
  f.session = session;
  f.types = {"genesis"};
  bool found = false;
  store.for_each_entry(f, [&](const ledger::EntryRow& e) {
    auto g = nlohmann::json::parse(e.body, nullptr, false);
    found = true;
    if (work_dir.empty() && g.is_object() && g.contains("work_dir") && g["work_dir"].is_string())
      work_dir = g["work_dir"].get<std::string>();
    return false;
  });
  if (!found) throw Error("no session " + std::to_string(session) + " in " + db);
  if (work_dir.empty()) {
    if (policy.filesystem.work_dir == ".")
      throw UsageError("session " + std::to_string(session) +
                       " does not say its work directory (recorded without a confining policy, or by an older "
                       "flightrec): give --work-dir");
    work_dir = policy.filesystem.work_dir;
  }

  inspect::Replay replay(policy, work_dir);
  f.types.clear();
  {
    Progress progress("replaying session " + std::to_string(session), store.stored_entries(session));
    int64_t done = 0;
    store.for_each_entry(f, [&](const ledger::EntryRow& e) {
      replay.add(nlohmann::json::parse(e.body, nullptr, false));
      progress.update(++done);
      return true;
    });
  }
  if (vm["json"].as<bool>())
    std::cout << replay.to_json(limit).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  else
    std::cout << replay.to_text(limit);
  return 0;
}

}  // namespace flightrec::cli
