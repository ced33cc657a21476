#include "ledger/proof.h"

#include <nlohmann/json.hpp>
#include <set>
#include <span>

#include "common/error.h"
#include "common/text.h"
#include "ledger/canonical.h"
#include "ledger/checkpoint.h"
#include "ledger/merkle.h"

namespace flightrec::ledger {

using nlohmann::json;

namespace {

// Every leaf of the session, hashed from its entry, and the entry asked for.
std::vector<Hash> session_leaves(Store& store, int64_t session, int64_t want, std::string* body) {
  std::vector<Hash> leaves;
  EntryFilter f;
  f.session = session;
  store.for_each_entry(f, [&](const EntryRow& e) {
    if (e.seq != int64_t(leaves.size()) + 1) throw Error("the record is damaged; run flightrec verify");
    leaves.push_back(leaf_hash(e.body));  // from the entry itself, not a stored hash
    if (e.seq == want && body) *body = e.body;
    return true;
  });
  if (leaves.empty()) throw Error("no session " + std::to_string(session) + " in " + store.path());
  return leaves;
}

std::vector<std::string> hex_all(const std::vector<Hash>& hs) {
  std::vector<std::string> out;
  for (const auto& h : hs) out.push_back(to_hex(h));
  return out;
}

json note_at(const std::vector<CheckpointRow>& checkpoints, int64_t size) {
  for (const auto& c : checkpoints)
    if (c.tree_size == size) return c.note;
  return nullptr;
}

int64_t latest_size(const std::vector<CheckpointRow>& checkpoints, size_t stored) {
  if (checkpoints.empty()) throw Error("the session has no checkpoint to prove against");
  int64_t latest = checkpoints.back().tree_size;
  if (latest < 1 || latest > int64_t(stored))
    throw Error("the latest checkpoint claims " + std::to_string(latest) + " entries but " + std::to_string(stored) +
                " are stored; run flightrec verify");
  return latest;
}

}  // namespace

std::string make_inclusion_proof(Store& store, int64_t session, int64_t entry) {
  std::string body;
  auto leaves = session_leaves(store, session, entry, &body);
  auto checkpoints = store.checkpoints(session);
  int64_t latest = latest_size(checkpoints, leaves.size());
  if (entry < 1 || entry > latest)
    throw Error("entry " + std::to_string(entry) + " is not covered by the latest checkpoint (size " +
                std::to_string(latest) + ")");
  std::span<const Hash> tree(leaves.data(), size_t(latest));
  json out = {{"type", "inclusion"},
              {"session", session},
              {"entry", body},
              {"leaf_index", entry - 1},
              {"leaf_hash", to_hex(leaves[size_t(entry - 1)])},
              {"tree_size", latest},
              {"root", to_hex(root_of(tree))},
              {"proof", hex_all(inclusion_proof(uint64_t(entry - 1), tree))},
              {"checkpoint", note_at(checkpoints, latest)}};
  return out.dump(2);
}

std::string make_consistency_proof(Store& store, int64_t session, int64_t from, std::optional<int64_t> to_arg) {
  auto leaves = session_leaves(store, session, 0, nullptr);
  auto checkpoints = store.checkpoints(session);
  int64_t to = to_arg ? *to_arg : latest_size(checkpoints, leaves.size());
  // from = to proves nothing (RFC 9162 2.1.4.2 fails an empty path).
  if (from < 1 || from >= to || to > int64_t(leaves.size()))
    throw Error("need 1 <= --from < --to <= " + std::to_string(leaves.size()));
  std::span<const Hash> tree(leaves.data(), size_t(to));
  // No session number: nothing in a consistency proof could vouch for it
  // (the checkpoints name their log by origin).
  json out = {{"type", "consistency"},
              {"from", from},
              {"to", to},
              {"root_from", to_hex(root_of(tree.subspan(0, size_t(from))))},
              {"root_to", to_hex(root_of(tree))},
              {"proof", hex_all(consistency_proof(uint64_t(from), tree))},
              {"checkpoint_from", note_at(checkpoints, from)},
              {"checkpoint_to", note_at(checkpoints, to)}};
  return out.dump(2);
}

namespace {

struct Failure {
  std::string reason;
};

// Strict readers: each member present with its type, nothing else.
void exact_members(const json& j, const std::set<std::string>& names) {
  for (const auto& [k, v] : j.items())
    if (!names.count(k)) throw Failure{"unknown member \"" + printable(k) + "\""};
  for (const auto& n : names)
    if (!j.contains(n)) throw Failure{"no \"" + n + "\""};
}

int64_t positive(const json& j, const char* key) {
  if (!j[key].is_number_integer() || j[key].get<int64_t>() < 0) throw Failure{std::string(key) + " is not a count"};
  return j[key].get<int64_t>();
}

Hash hash_of(const json& v, const std::string& what) {
  if (!v.is_string() || v.get<std::string>().size() != 64) throw Failure{what + " is not 64 hex digits"};
  const std::string& s = v.get_ref<const std::string&>();
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) throw Failure{what + " is not lowercase hex"};
  auto raw = hex_decode(s);
  Hash h;
  std::copy(raw->begin(), raw->end(), h.begin());
  return h;
}

std::vector<Hash> path_of(const json& v) {
  if (!v.is_array() || v.size() > 64) throw Failure{"proof is not a list of at most 64 hashes"};
  std::vector<Hash> out;
  for (size_t i = 0; i < v.size(); ++i) out.push_back(hash_of(v[i], "proof[" + std::to_string(i) + "]"));
  return out;
}

// The checkpoint's text, signature by `key`, size and root.
Checkpoint signed_checkpoint(const std::string& note_text, const VerifierKey& key, const std::string& what) {
  std::string why;
  auto note = parse_note(note_text, &why);
  if (!note) throw Failure{what + ": " + why};
  if (std::string bad = check_signature(*note, key); !bad.empty()) throw Failure{what + ": " + bad};
  auto c = parse_checkpoint(note->text, &why);
  if (!c) throw Failure{what + ": " + why};
  return *c;
}

// The checkpoints kept elsewhere (a file of notes, §5.6): each must be
// well-formed, with its chain line; those of `origin` must be signed by
// `key`, and those of `origin` at `size` must all sign `root` (a key holder
// who rewrote history can sign a second tree of a size: whichever note
// comes first must not decide). Notes of other logs are passed over, as
// verify does (one file may hold a fleet's). Returns whether one of them is
// of that origin and size.
bool saved_agree(const std::vector<std::string>& saved, const VerifierKey& key, const std::string& origin,
                 uint64_t size, const Hash& root) {
  bool found = false;
  for (size_t i = 0; i < saved.size(); ++i) {
    std::string what = "saved checkpoint " + std::to_string(i + 1), why;
    auto note = parse_note(saved[i], &why);
    auto c = note ? parse_checkpoint(note->text, &why) : std::nullopt;
    if (!c) throw Failure{what + ": " + why};
    if (!c->chain) throw Failure{what + ": it has no chain line"};
    if (c->origin != origin) continue;
    if (std::string bad = check_signature(*note, key); !bad.empty()) throw Failure{what + ": " + bad};
    if (c->size != size) continue;
    if (c->root != root)
      throw Failure{"the saved checkpoint of size " + std::to_string(size) +
                    " has another root than the proof's: history was rewritten since it was saved"};
    found = true;
  }
  return found;
}

std::string key_words(const VerifierKey& key) { return "signed by " + key.name() + " (key id " + key.key_id_hex() + ")"; }

ProofVerdict check_inclusion(const json& j, const VerifierKey& key, const std::vector<std::string>& saved) {
  exact_members(j, {"type", "session", "entry", "leaf_index", "leaf_hash", "tree_size", "root", "proof", "checkpoint"});
  int64_t session = positive(j, "session"), index = positive(j, "leaf_index"), size = positive(j, "tree_size");
  if (session < 1) throw Failure{"session is not a session id (1 or more)"};
  if (!j["entry"].is_string()) throw Failure{"entry is not a string"};
  const std::string& entry = j["entry"].get_ref<const std::string&>();
  // The entry says where it stands; its canonical bytes are what was hashed.
  TopLevel top;
  if (std::string why = check_canonical(entry, &top); !why.empty()) throw Failure{"entry: " + why};
  if (top.integer("session") != session || top.integer("seq") != index + 1)
    throw Failure{"the entry is not entry " + std::to_string(index + 1) + " of session " + std::to_string(session)};
  Hash leaf = leaf_hash(entry);
  if (leaf != hash_of(j["leaf_hash"], "leaf_hash")) throw Failure{"leaf_hash is not the hash of the entry"};
  if (index >= size) throw Failure{"leaf_index is outside the tree"};
  Hash root = hash_of(j["root"], "root");
  if (!verify_inclusion(uint64_t(index), uint64_t(size), leaf, path_of(j["proof"]), root))
    throw Failure{"the proof does not lead from the entry to the root (RFC 9162 2.1.3.2)"};
  if (!j["checkpoint"].is_string()) throw Failure{"no signed checkpoint of the tree"};
  Checkpoint c = signed_checkpoint(j["checkpoint"].get<std::string>(), key, "checkpoint");
  if (c.size != uint64_t(size) || c.root != root) throw Failure{"the checkpoint signs another tree than the proof's"};
  saved_agree(saved, key, c.origin, c.size, root);
  ProofVerdict v;
  v.ok = true;
  v.entry = entry;
  v.what = "entry " + std::to_string(index + 1) + " of session " + std::to_string(session) + " is in the tree of size " +
           std::to_string(size) + " of log " + printable(c.origin) + ", " + key_words(key);
  return v;
}

ProofVerdict check_consistency(const json& j, const VerifierKey& key, const std::vector<std::string>& saved) {
  exact_members(j, {"type", "from", "to", "root_from", "root_to", "proof", "checkpoint_from", "checkpoint_to"});
  int64_t from = positive(j, "from"), to = positive(j, "to");
  if (from < 1 || from >= to) throw Failure{"from and to are not 1 <= from < to"};
  Hash root_from = hash_of(j["root_from"], "root_from"), root_to = hash_of(j["root_to"], "root_to");
  if (!verify_consistency(uint64_t(from), uint64_t(to), path_of(j["proof"]), root_from, root_to))
    throw Failure{"the proof does not show the smaller tree is a prefix of the larger (RFC 9162 2.1.4.2)"};
  // Both trees must be signed ones, or the proof relates two made-up roots.
  if (!j["checkpoint_to"].is_string()) throw Failure{"no signed checkpoint of the larger tree"};
  Checkpoint c_to = signed_checkpoint(j["checkpoint_to"].get<std::string>(), key, "checkpoint_to");
  if (c_to.size != uint64_t(to) || c_to.root != root_to) throw Failure{"checkpoint_to signs another tree than root_to"};
  // The smaller tree: the proof's own checkpoint, and the one kept
  // elsewhere when given. A key holder who rewrote history can sign a
  // second tree of that size; only the saved note tells the two apart.
  std::optional<Checkpoint> c_from;
  if (j["checkpoint_from"].is_string())
    c_from = signed_checkpoint(j["checkpoint_from"].get<std::string>(), key, "checkpoint_from");
  else if (!j["checkpoint_from"].is_null())
    throw Failure{"checkpoint_from is neither a note nor null"};
  if (c_from && (c_from->size != uint64_t(from) || c_from->root != root_from))
    throw Failure{"checkpoint_from signs another tree than root_from"};
  bool kept = false;
  if (!saved.empty()) {
    kept = saved_agree(saved, key, c_to.origin, uint64_t(from), root_from);
    if (!kept) throw Failure{"none of the saved checkpoints is of this log at size " + std::to_string(from)};
  }
  if (!c_from && !kept) throw Failure{"no signed checkpoint of the smaller tree: give the one you saved (--checkpoint)"};
  if (c_from && c_from->origin != c_to.origin) throw Failure{"the two checkpoints are of different logs"};
  ProofVerdict v;
  v.ok = true;
  v.what = "the tree of size " + std::to_string(from) + " is a prefix of the tree of size " + std::to_string(to) +
           " of log " + printable(c_to.origin) + ", both " + key_words(key);
  return v;
}

}  // namespace

ProofVerdict check_proof(const std::string& proof_json, const VerifierKey& key, const std::vector<std::string>& saved) {
  // A member given twice would be read as its last copy while a person
  // reading the file may see the first: refused.
  bool duplicate = false;
  std::set<std::string> top_keys;
  json::parser_callback_t once = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::key && depth == 1 && !top_keys.insert(parsed.get<std::string>()).second)
      duplicate = true;
    return true;
  };
  auto j = json::parse(proof_json, once, false);
  try {
    // The JSON parser skips a byte order mark and stops at a NUL: either
    // would let bytes no reader sees ride along.
    if (proof_json.starts_with("\xEF\xBB\xBF")) throw Failure{"the proof starts with a byte order mark"};
    if (proof_json.find('\0') != std::string::npos) throw Failure{"the proof holds a NUL byte"};
    if (duplicate) throw Failure{"a member is given twice"};
    if (j.is_discarded() || !j.is_object()) throw Failure{"not a JSON object"};
    if (!j.contains("type") || !j["type"].is_string()) throw Failure{"no proof type"};
    if (j["type"] == "inclusion") return check_inclusion(j, key, saved);
    if (j["type"] == "consistency") return check_consistency(j, key, saved);
    throw Failure{"unknown proof type \"" + printable(j["type"].get<std::string>()) + "\""};
  } catch (const Failure& f) {
    ProofVerdict v;
    v.reason = f.reason;
    return v;
  }
}

}  // namespace flightrec::ledger
