// flightrec prove: RFC 9162 inclusion and consistency proofs from a record.
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/options.h"
#include "common/error.h"
#include "ledger/checkpoint.h"
#include "ledger/merkle.h"
#include "ledger/store.h"

namespace flightrec::cli {
namespace {

std::vector<std::string> hex_all(const std::vector<ledger::Hash>& hs) {
  std::vector<std::string> out;
  for (const auto& h : hs) out.push_back(ledger::to_hex(h));
  return out;
}

}  // namespace

int cmd_prove(const Args& args) {
  po::options_description desc("options");
  std::string db;
  int64_t session = 0, entry = 0, from = 0, to = 0;
  desc.add_options()("help,h", "show this help")("db", po::value(&db)->required(), "SQLite record")(
      "session", po::value(&session)->required(), "session")(
      "entry", po::value(&entry), "inclusion proof of this entry (seq)")(
      "from", po::value(&from), "consistency proof from this tree size...")(
      "to", po::value(&to), "...to this one (default: the latest checkpoint)");
  po::variables_map vm;
  const char* usage =
      "usage: flightrec prove --db FILE --session N (--entry SEQ | --from A [--to B])\n\n"
      "Prints an RFC 9162 proof as JSON: that entry SEQ is in the tree of the latest\n"
      "signed checkpoint (inclusion), or that the tree at size A is a prefix of the tree\n"
      "at size B (consistency). Hashes are hex; leaf index = SEQ - 1.";
  if (!parse_options(args, desc, usage, vm)) return 0;
  bool inclusion = vm.count("entry"), consistency = vm.count("from");
  if (inclusion == consistency) throw UsageError("give either --entry or --from");

  ledger::Store store(db, ledger::Store::Mode::Read);
  std::vector<ledger::Hash> leaves;
  std::string entry_body;
  ledger::EntryFilter f;
  f.session = session;
  store.for_each_entry(f, [&](const ledger::EntryRow& e) {
    if (e.seq != int64_t(leaves.size()) + 1) throw Error("the record is damaged; run flightrec verify");
    leaves.push_back(ledger::leaf_hash(e.body));  // from the entry itself, not a stored hash
    if (e.seq == entry) entry_body = e.body;
    return true;
  });
  if (leaves.empty()) throw Error("no session " + std::to_string(session) + " in " + db);
  auto checkpoints = store.checkpoints(session);
  auto note_at = [&](int64_t size) -> nlohmann::json {
    for (const auto& c : checkpoints)
      if (c.tree_size == size) return c.note;
    return nullptr;
  };
  int64_t latest = checkpoints.empty() ? int64_t(leaves.size()) : checkpoints.back().tree_size;
  if (latest < 1 || latest > int64_t(leaves.size()))
    throw Error("the latest checkpoint claims " + std::to_string(latest) + " entries but " +
                std::to_string(leaves.size()) + " are stored; run flightrec verify");
  nlohmann::json out;
  out["session"] = session;
  if (inclusion) {
    if (entry < 1 || entry > latest)
      throw Error("entry " + std::to_string(entry) + " is not covered by the latest checkpoint (size " +
                  std::to_string(latest) + ")");
    std::span<const ledger::Hash> tree(leaves.data(), size_t(latest));
    out["type"] = "inclusion";
    out["entry"] = entry_body;
    out["leaf_index"] = entry - 1;
    out["leaf_hash"] = ledger::to_hex(leaves[size_t(entry - 1)]);
    out["tree_size"] = latest;
    out["root"] = ledger::to_hex(ledger::root_of(tree));
    out["proof"] = hex_all(ledger::inclusion_proof(uint64_t(entry - 1), tree));
    out["checkpoint"] = note_at(latest);
  } else {
    if (!vm.count("to")) to = latest;
    if (from < 1 || from > to || to > int64_t(leaves.size()))
      throw Error("need 1 <= --from <= --to <= " + std::to_string(leaves.size()));
    std::span<const ledger::Hash> tree(leaves.data(), size_t(to));
    out["type"] = "consistency";
    out["from"] = from;
    out["to"] = to;
    out["root_from"] = ledger::to_hex(ledger::root_of(tree.subspan(0, size_t(from))));
    out["root_to"] = ledger::to_hex(ledger::root_of(tree));
    out["proof"] = hex_all(ledger::consistency_proof(uint64_t(from), tree));
    out["checkpoint_from"] = note_at(from);
    out["checkpoint_to"] = note_at(to);
  }
  std::cout << out.dump(2) << "\n";
  return 0;
}

}  // namespace flightrec::cli
