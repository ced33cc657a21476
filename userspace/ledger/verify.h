#pragma once
// Verification of one session's record, fed entry by entry (from SQLite or
// from a bundle): canonical form, leaf hashes, the hash chain, the Merkle
// tree, every checkpoint's signature, root and size, and the end.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ledger/canonical.h"
#include "ledger/checkpoint.h"
#include "ledger/keys.h"
#include "ledger/merkle.h"
#include "ledger/store.h"

namespace flightrec {
class Progress;
}

namespace flightrec::ledger {

struct SessionVerdict {
  bool ok = true;
  std::string where;      // "entry 812" or "checkpoint at size 3000"; empty for the session
  int64_t bad_seq = 0;    // the entry named, if any
  std::string reason;

  int64_t entries = 0;
  int64_t checkpoints = 0;
  int64_t signed_checkpoints = 0;
  int64_t gaps = 0;       // "lost" entries
  uint64_t lost = 0;      // events they count
  bool terminated = false;           // ends with session_end covered by a checkpoint
  uint64_t last_checkpoint = 0;      // tree size
  std::string key;                   // vkey the signatures were checked with
  bool key_from_record = false;      // no --pubkey: the key named in the genesis entry
  std::string origin;
  std::string record_key;            // the genesis entry's public_key ("" if unsigned)
  std::vector<size_t> saved_matched;  // which saved checkpoints (0-based) are this session's and were checked
};

// A saved-checkpoint file (docs/FORMAT.md 5.6), parsed once for every
// session it is checked against: its notes, or why the file is malformed.
struct SavedCheckpoints {
  struct Saved {
    std::string name;  // "saved checkpoint", or "saved checkpoint 2" in a file of several
    Note note;
    Checkpoint checkpoint;
  };
  std::vector<Saved> notes;
  std::string where = "saved checkpoint", problem;  // problem: non-empty when malformed
  static SavedCheckpoints parse(const std::string& file);
};

class SessionVerifier {
 public:
  // `pinned`: the key the checkpoints must be signed with (nullptr: the key
  // the genesis entry names). `saved`: checkpoints kept elsewhere (of this
  // session or others), or nullptr.
  SessionVerifier(int64_t session, const VerifierKey* pinned, const SavedCheckpoints* saved);

  // Entry seq = entries()+1. stored_leaf/stored_chain: what the database
  // holds next to the entry (nullptr for bundles). leaf: body's leaf hash
  // when the caller computed it (on another thread); nullptr: computed here.
  // Returns false once failed.
  bool add_entry(std::string_view body, const std::string* stored_leaf = nullptr,
                 const std::string* stored_chain = nullptr, const Hash* leaf = nullptr);
  // What the store's index says of the entry just added: its type and pid
  // as the block stores them beside it, and its block's lists (nullptr:
  // no block index, format 2). Queries skip by the index, so one that
  // disagrees with an entry would hide it from them: that is a failure.
  bool check_index(std::string_view type, int64_t pid, const BlockIndex* block);
  // A checkpoint that covers exactly the entries added so far.
  bool add_checkpoint(std::string_view note);
  // The database skips from entries()+1 to next_stored.
  void missing_entry(int64_t next_stored);
  // A checkpoint that claims more entries than the record holds.
  void checkpoint_beyond_end(uint64_t tree_size);
  const SessionVerdict& finish();

  int64_t entries() const { return count_; }
  const SessionVerdict& verdict() const { return v_; }

 private:
  bool fail(std::string where, int64_t seq, std::string reason);
  std::string entry_name(int64_t seq) const { return "entry " + std::to_string(seq); }

  int64_t session_;
  const VerifierKey* pinned_;
  std::optional<VerifierKey> record_key_;
  const SavedCheckpoints* external_;
  struct Saved {
    std::string name;
    Checkpoint checkpoint;
    std::optional<Hash> root_seen, chain_seen;  // the record's, at the checkpoint's size
  };
  std::vector<Saved> saved_;  // this session's saved checkpoints
  SessionVerdict v_;
  int64_t count_ = 0;
  Hash head_ = kChainStart;
  CompactTree tree_;
  bool ended_ = false;  // session_end seen
  uint64_t every_entries_ = 0;  // the genesis entry's checkpoint_every_entries (0: no cadence rule)
  uint64_t lost_entries_ = 0;   // sum of the lost entries' "lost" so far
  bool finished_ = false;
  TopLevel top_;
  std::vector<uint64_t> path_hashes_;  // of the entry being checked, reused
  bool paths_indexed(std::string_view bits);
};

// Every session in a database (or one). Stops at the first failure.
struct StoreVerdict {
  bool ok = true;
  int64_t bad_session = 0;
  std::vector<std::pair<int64_t, SessionVerdict>> sessions;
};
// progress (may be null) is told the entries checked so far.
StoreVerdict verify_store(Store& store, std::optional<int64_t> only_session,
                          const VerifierKey* pinned, std::optional<std::string> external,
                          Progress* progress = nullptr);

// ok unless some of the `count` saved checkpoints belong to none of the
// verdicts' sessions; then that one is named in *where / *reason.
bool every_saved_checkpoint_matched(size_t count, const std::vector<const SessionVerdict*>& verdicts,
                                    std::string* reason);

// "" when the genesis entry's copies agree with what they copy (key_id and
// public_key, policy_sha256 and policy, origin and host), else what not.
std::string genesis_problem(const TopLevel& top, const VerifierKey* record_key);

// "" when `body` is canonical JSON per docs/FORMAT.md, else why not.
std::string canonical_problem(const std::string& body);

}  // namespace flightrec::ledger
