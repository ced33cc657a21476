// flightrec changes / flightrec apply: a session's changes to its work
// directory (work_dir_mode: overlay keeps them aside), shown as a diff and
// applied to the host where the host still has what the session started
// from (sandbox/apply.h, sandbox/kept.h).
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/options.h"
#include "common/error.h"
#include "common/text.h"
#include "inspect/kept_diff.h"
#include "inspect/replay.h"
#include "ledger/store.h"
#include "policy/judge.h"
#include "policy/policy.h"
#include "sandbox/apply.h"
#include "sandbox/kept.h"
#include "sandbox/layer.h"

namespace flightrec::cli {
namespace {

struct SessionChanges {
  std::string work_dir;  // as the record says
  std::string kept;      // the kept copy's directory, "" if none
  std::vector<std::string> protect;  // the recorded policy's filesystem.protect
  std::vector<sandbox::FileChange> changes;
};

std::string text_member(const nlohmann::json& e, const std::string& key) {
  if (e.contains(key) && e[key].is_string()) return e[key].get<std::string>();
  if (e.contains(key + "_b64") && e[key + "_b64"].is_string()) return base64_decode(e[key + "_b64"].get<std::string>()).value_or("");
  return "";
}

uint64_t number(const nlohmann::json& e, const char* key) {
  return e.contains(key) && e[key].is_number_unsigned() ? e[key].get<uint64_t>() : 0;
}

// The end-of-session file_change entries below the work directory, and
// where the session kept them.
SessionChanges read_changes(const std::string& db, int64_t session) {
  ledger::Store store(db, ledger::Store::Mode::Read);
  ledger::EntryFilter f;
  f.session = session;
  f.types = {"genesis", "file_change", "changes_kept"};
  SessionChanges out;
  bool found = false;
  store.for_each_entry(f, [&](const ledger::EntryRow& row) {
    auto e = nlohmann::json::parse(row.body, nullptr, false);
    if (!e.is_object()) return true;
    if (row.type == "genesis") {
      found = true;
      out.work_dir = text_member(e, "work_dir");
      try {
        out.protect = inspect::recorded_policy(e).filesystem.protect;
      } catch (const policy::PolicyError&) {
        out.protect = policy::load("agent").filesystem.protect;  // unreadable: the shipped list
      }
    } else if (row.type == "changes_kept") {
      if (std::string w = text_member(e, "work_dir_changes"); w.starts_with(sandbox::kKeptChangesDir + "/")) out.kept = w;
    } else if (text_member(e, "when") == "end" && !out.work_dir.empty()) {
      sandbox::FileChange c{text_member(e, "change"), text_member(e, "path"), text_member(e, "kind"),
                            number(e, "size"), uint32_t(number(e, "mode")), text_member(e, "sha256_before"),
                            text_member(e, "sha256_after"), text_member(e, "link_target")};
      if (policy::path_under(c.path, out.work_dir) && c.path != out.work_dir) out.changes.push_back(std::move(c));
    }
    return true;
  });
  if (!found) throw Error("no session " + std::to_string(session) + " in " + db);
  if (out.work_dir.empty())
    throw Error("session " + std::to_string(session) + " has no work directory (recorded without a sandbox)");
  return out;
}

// The kept copy and what it belongs to, checked against the record.
sandbox::KeptMeta kept_for(const SessionChanges& s, int64_t session) {
  if (s.kept.empty())
    throw Error("session " + std::to_string(session) +
                " kept no changes aside (its policy's work_dir_mode is write, or it changed nothing in " + s.work_dir + ")");
  std::string why;
  auto meta = sandbox::read_kept(s.kept, &why);
  if (!meta) throw Error(why);
  if (meta->work_dir != s.work_dir)
    throw Error(s.kept + " belongs to the work directory " + meta->work_dir + ", but the record says " + s.work_dir +
                ": refusing (has the record been edited?)");
  return *meta;
}

}  // namespace

int cmd_changes(const Args& args) {
  po::options_description desc("options");
  std::string db;
  int64_t session = 0;
  desc.add_options()("help,h", "show this help")("db", po::value(&db)->required(), "SQLite record to read")(
      "session", po::value(&session)->required(), "the recorded session")(
      "stat", po::bool_switch(), "one line per change, no diff");
  po::variables_map vm;
  const char* usage =
      "usage: flightrec changes --db FILE --session N [--stat]\n\n"
      "What a session changed in its work directory, as a unified diff against the\n"
      "host's files (binary files summarized by size and SHA-256; deletions, new\n"
      "directories, symlinks and modes listed). The after-state comes from the copy\n"
      "the session kept (policy work_dir_mode: overlay); write it to the host with\n"
      "flightrec apply. Exit 0, or 1 if the record or the copy cannot be read.";
  if (!parse_options(args, desc, usage, vm)) return 0;
  SessionChanges s = read_changes(db, session);
  if (s.changes.empty()) {
    std::cout << "session " << session << " changed nothing in " << s.work_dir << "\n";
    return 0;
  }
  if (vm["stat"].as<bool>()) {
    for (const auto& c : s.changes) std::cout << c.change << " " << c.kind << " " << printable(c.path) << "\n";
    return 0;
  }
  kept_for(s, session);
  sandbox::Layer host(s.work_dir), kept(s.kept + "/files");
  for (const auto& c : s.changes) std::cout << inspect::kept_change_text(c, s.work_dir, host, kept);
  return 0;
}

int cmd_apply(const Args& args) {
  po::options_description desc("options");
  std::string db;
  int64_t session = 0;
  desc.add_options()("help,h", "show this help")("db", po::value(&db)->required(), "SQLite record to read")(
      "session", po::value(&session)->required(), "the recorded session")(
      "dry-run", po::bool_switch(), "say what would be applied and refused, change nothing");
  po::variables_map vm;
  const char* usage =
      "usage: flightrec apply --db FILE --session N [--dry-run]\n\n"
      "Writes what a session kept aside (policy work_dir_mode: overlay) to its work\n"
      "directory on the host: each change only where the host still has what the\n"
      "session started from (the record's before-hash; nothing, for a new file),\n"
      "and never a protected path (filesystem.protect). Every conflict is refused\n"
      "by name. Exit 0 when everything was applied, 1 when something was refused.";
  if (!parse_options(args, desc, usage, vm)) return 0;
  SessionChanges s = read_changes(db, session);
  if (s.changes.empty()) {
    std::cout << "session " << session << " changed nothing in " << s.work_dir << "\n";
    return 0;
  }
  sandbox::KeptMeta meta = kept_for(s, session);
  sandbox::ApplyOptions o;
  o.upper = s.kept + "/files";
  o.work_dir = s.work_dir;
  o.uid = meta.uid;
  o.gid = meta.gid;
  o.session_start_ns = meta.session_start_ns;
  o.work_dev = dev_t(meta.work_dev);
  o.work_ino = ino_t(meta.work_ino);
  o.dry_run = vm["dry-run"].as<bool>();
  // The policy the session ran under protects them; so does the shipped
  // agent list, whatever an edited record says.
  o.protect = s.protect;
  for (const auto& p : policy::load("agent").filesystem.protect) o.protect.push_back(p);
  size_t refused = 0;
  for (const auto& a : sandbox::apply_changes(s.changes, o)) {
    std::cout << (a.ok ? (o.dry_run ? "would apply " : "applied ") : "REFUSED ") << a.change->change << " "
              << printable(a.change->path) << (a.ok ? "" : ": " + a.why) << "\n";
    refused += !a.ok;
  }
  std::cout << (o.dry_run ? "dry run: " : "") << s.changes.size() - refused << " of " << s.changes.size()
            << " change(s) " << (o.dry_run ? "would be applied" : "applied") << (refused ? ", " + std::to_string(refused) + " refused" : "") << "\n";
  return refused ? 1 : 0;
}

}  // namespace flightrec::cli
