#include "ledger/verify.h"

#include "common/progress.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

#include "common/text.h"
#include "ledger/path_index.h"
#include "ledger/sha256_many.h"

namespace flightrec::ledger {

std::string canonical_problem(const std::string& body) { return check_canonical(body, nullptr); }

namespace {

// A byte string member as set_bytes wrote it: NAME (UTF-8) or NAME_b64.
std::optional<std::string> bytes_member(const TopLevel& top, const std::string& name) {
  if (auto s = top.string(name)) return s;
  if (auto b = top.string(name + "_b64")) return base64_decode(*b);
  return std::nullopt;
}

// A session's entries as the store holds them, each with its leaf hash:
// read, decompressed and hashed (a batch's leaves together) on a thread of
// their own, a batch ahead of the checks, which are sequential by nature
// (the chain, the tree, the checkpoints) and so keep this thread. fn
// returns false to stop early.
struct HashedEntry {
  int64_t seq;
  std::string_view body;
  const std::string* leaf_stored;
  const std::string* chain_stored;
  const Hash* leaf;
  std::string_view type;
  int64_t pid;
  const BlockIndex* block;
};

class HashedReader {
 public:
  HashedReader(Store& store, int64_t session) : store_(store), session_(session), thread_([this] { read(); }) {}
  ~HashedReader() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  HashedReader(const HashedReader&) = delete;
  HashedReader& operator=(const HashedReader&) = delete;

  // Every entry in order, unless fn stops; rethrows what reading threw.
  void for_each(const std::function<bool(const HashedEntry&)>& fn) {
    for (;;) {
      Batch batch;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return !queue_.empty() || done_; });
        if (queue_.empty()) {
          if (failure_) std::rethrow_exception(failure_);
          return;
        }
        batch = std::move(queue_.front());
        queue_.pop_front();
        queued_bytes_ -= batch.bodies.size();
      }
      cv_.notify_all();
      for (const Row& r : batch.rows) {
        HashedEntry e{r.seq,  std::string_view(batch.bodies).substr(r.offset, r.size), &r.leaf_stored,
                      &r.chain_stored, &r.leaf, r.type, r.pid, r.block < 0 ? nullptr : &batch.blocks[size_t(r.block)]};
        if (!fn(e)) return;
      }
    }
  }

 private:
  // A batch is handed over at 2048 entries or 1 MiB of bodies, and at most
  // 4 MiB wait (or one batch, however large: a block may hold one 64 MiB
  // entry), so a hostile record costs a few blocks of memory, as in line.
  static constexpr size_t kBatch = 2048, kBatchBytes = 1u << 20, kMaxQueuedBytes = 4u << 20;
  struct Row {
    int64_t seq;
    size_t offset, size;
    std::string leaf_stored, chain_stored;
    Hash leaf;
    std::string type;  // the index's view of the entry
    int64_t pid;
    int32_t block;  // in Batch::blocks; -1: none (format 2)
  };
  struct Batch {
    std::string bodies;
    std::vector<Row> rows;
    std::vector<BlockIndex> blocks;  // one per block the rows come from
  };

  void read() {
    Batch batch;
    std::vector<HashInput> leaf_inputs;
    std::vector<Hash> leaves;
    auto hand_over = [&] {
      // The batch's leaves together: they interleave (sha256_many).
      leaf_inputs.clear();
      for (const Row& r : batch.rows) leaf_inputs.push_back({kLeafPrefix, std::string_view(batch.bodies).substr(r.offset, r.size)});
      leaves.resize(leaf_inputs.size());
      sha256_many(leaf_inputs, leaves.data());
      for (size_t i = 0; i < batch.rows.size(); ++i) batch.rows[i].leaf = leaves[i];
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return queued_bytes_ + batch.bodies.size() <= kMaxQueuedBytes || queue_.empty() || stop_; });
      if (stop_) return false;
      queued_bytes_ += batch.bodies.size();
      queue_.push_back(std::move(batch));
      batch = {};
      cv_.notify_all();
      return true;
    };
    bool go_on = true;
    std::exception_ptr failure;
    try {
      EntryFilter f;
      f.session = session_;
      store_.for_each_entry(f, [&](const EntryRow& e) {
        // A block's first entry (its seq is the block's id) starts its index copy.
        if (e.block && (batch.blocks.empty() || e.seq == e.block->first_seq)) batch.blocks.push_back(*e.block);
        batch.rows.push_back({e.seq, batch.bodies.size(), e.body.size(), e.leaf, e.chain, Hash{}, e.type,
                              e.pid, e.block ? int32_t(batch.blocks.size() - 1) : -1});
        batch.bodies.append(e.body);
        if (batch.rows.size() >= kBatch || batch.bodies.size() >= kBatchBytes) go_on = hand_over();
        return go_on;
      });
      if (go_on && !batch.rows.empty()) hand_over();
    } catch (...) {
      // After the entries read before it, as reading in line would.
      failure = std::current_exception();
      try {
        if (go_on && !batch.rows.empty()) hand_over();
      } catch (...) {
        // out of memory handing them over: the first failure is what the caller gets
      }
    }
    std::lock_guard lock(mu_);
    failure_ = failure;
    done_ = true;
    cv_.notify_all();
  }

  Store& store_;
  int64_t session_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Batch> queue_;
  size_t queued_bytes_ = 0;
  bool stop_ = false, done_ = false;
  std::exception_ptr failure_;
  std::thread thread_;  // last: starts once the rest exists
};

}  // namespace

std::string genesis_problem(const TopLevel& top, const VerifierKey* record_key) {
  // The copies the genesis entry carries must agree with what they copy.
  if (record_key) {
    auto key_id = top.string("key_id");
    if (!key_id || *key_id != record_key->key_id_hex()) return "key_id is not the hash of its public_key";
  } else if (top.raw("key_id")) {
    return "key_id without a public_key";
  }
  // A member and its _b64 form are one or the other: two would leave a
  // reader to choose which counts.
  for (const char* name : {"policy", "host"})
    if (top.raw(name) && top.raw(std::string(name) + "_b64"))
      return std::string("genesis entry has both ") + name + " and " + name + "_b64";
  auto policy = bytes_member(top, "policy");
  auto policy_sha = top.string("policy_sha256");
  if (!policy || !policy_sha || *policy_sha != to_hex(sha256(*policy)))
    return "policy_sha256 is not the SHA-256 of its policy";
  // origin: flightrec/<host, each byte outside [A-Za-z0-9._-] as _>/<32 hex digits>.
  auto host = bytes_member(top, "host");
  auto origin = top.string("origin").value_or("");
  if (!host || host->empty()) return "genesis entry has no host";
  std::string expect = "flightrec/";
  for (unsigned char c : *host) expect += std::isalnum(c) || c == '.' || c == '-' || c == '_' ? char(c) : '_';
  expect += "/";
  bool tail_ok = origin.size() == expect.size() + 32 &&
                 origin.find_first_not_of("0123456789abcdef", expect.size()) == std::string::npos;
  if (!origin.starts_with(expect) || !tail_ok) return "origin does not name its host as the format says";
  return "";
}

SavedCheckpoints SavedCheckpoints::parse(const std::string& file) {
  SavedCheckpoints out;
  auto notes = split_saved_checkpoints(file, &out.problem);
  if (!notes) return out;
  for (size_t i = 0; i < notes->size(); ++i) {
    std::string name = notes->size() == 1 ? "saved checkpoint" : "saved checkpoint " + std::to_string(i + 1);
    auto note = parse_note((*notes)[i], &out.problem);
    auto cp = note ? parse_checkpoint(note->text, &out.problem) : std::nullopt;
    if (cp && !cp->chain) out.problem = "it has no chain line";
    if (!cp || !cp->chain) {
      out.where = name;
      out.notes.clear();
      return out;
    }
    out.notes.push_back({std::move(name), std::move(*note), std::move(*cp)});
  }
  return out;
}

SessionVerifier::SessionVerifier(int64_t session, const VerifierKey* pinned, const SavedCheckpoints* saved)
    : session_(session), pinned_(pinned), external_(saved) {}

bool SessionVerifier::fail(std::string where, int64_t seq, std::string reason) {
  if (v_.ok) {
    v_.ok = false;
    v_.where = std::move(where);
    v_.bad_seq = seq;
    v_.reason = std::move(reason);
  }
  return false;
}

bool SessionVerifier::add_entry(std::string_view body, const std::string* stored_leaf,
                                const std::string* stored_chain, const Hash* leaf_given) {
  if (!v_.ok) return false;
  int64_t seq = count_ + 1;
  const auto at = [&] { return entry_name(seq); };
  Hash leaf = leaf_given ? *leaf_given : leaf_hash(body);
  // The store keeps the start of each leaf (format 2: all of it) to name an
  // altered entry; the hashes that prove anything are recomputed here.
  if (stored_leaf && !stored_leaf->empty() &&
      (stored_leaf->size() > leaf.size() || as_bytes(leaf).substr(0, stored_leaf->size()) != *stored_leaf))
    return fail(at(), seq, "content does not match its stored leaf hash (entry was altered)");
  if (std::string why = check_canonical(body, &top_); !why.empty()) return fail(at(), seq, why);
  if (top_.integer("seq") != seq || top_.integer("session") != session_)
    return fail(at(), seq,
                "entry says it is session " + std::string(top_.raw("session").value_or("?")) +
                    " entry " + std::string(top_.raw("seq").value_or("?")) +
                    " (entries were removed, inserted, reordered or spliced in)");
  auto type_raw = top_.raw("type");
  if (!type_raw || type_raw->size() < 2 || (*type_raw)[0] != '"') return fail(at(), seq, "entry has no type");
  // Types are words of [a-z0-9_], 1 to 255 bytes (what storage holds): the
  // raw text between the quotes is the type.
  std::string_view type = type_raw->substr(1, type_raw->size() - 2);
  if (type.empty() || type.size() > 255 ||
      type.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") != std::string_view::npos)
    return fail(at(), seq, "entry's type is not a word of a-z, 0-9 and _ (1 to 255 bytes)");
  if (ended_) return fail(at(), seq, "entry after the session's end");
  // The checkpoint of size 1 is committed with the genesis entry: without
  // it a whole session (genesis included) could be made up.
  if (seq == 2 && v_.last_checkpoint != 1)
    return fail("entry 1", 1, "the genesis entry is not sealed by a checkpoint of size 1");
  if (seq == 1) {
    if (type != "genesis") return fail(at(), seq, "the first entry is not the genesis entry");
    auto origin = top_.string("origin");
    if (!origin || origin->empty()) return fail(at(), seq, "genesis entry has no origin");
    v_.origin = *origin;
    if (auto vkey = top_.string("public_key")) {
      v_.record_key = *vkey;
      record_key_ = VerifierKey::parse(*vkey);
      if (!record_key_) return fail(at(), seq, "genesis entry's public key is malformed");
    }
    if (pinned_ && (!record_key_ || record_key_->vkey() != pinned_->vkey()))
      return fail(at(), seq, "the record names another signing key (" +
                               (record_key_ ? record_key_->vkey() : std::string("none")) +
                               ") than the one given (" + pinned_->vkey() + ")");
    if (std::string why = genesis_problem(top_, record_key_ ? &*record_key_ : nullptr); !why.empty())
      return fail(at(), seq, why);
    // Absent in no record flightrec writes; present, it must be a count.
    if (top_.raw("checkpoint_every_entries")) {
      every_entries_ = top_.unsigned_integer("checkpoint_every_entries").value_or(0);
      if (every_entries_ == 0) return fail(at(), seq, "checkpoint_every_entries is not a positive integer");
    }
    if (external_) {
      if (!external_->problem.empty()) return fail(external_->where, 0, external_->problem);
      const VerifierKey* key = pinned_ ? pinned_ : record_key_ ? &*record_key_ : nullptr;
      for (size_t i = 0; i < external_->notes.size(); ++i) {
        const auto& n = external_->notes[i];
        if (n.checkpoint.origin != v_.origin) continue;  // another session's
        if (!key) return fail(n.name, 0, "the record is unsigned, so a saved checkpoint cannot be checked");
        if (std::string bad = check_signature(n.note, *key); !bad.empty()) return fail(n.name, 0, bad);
        saved_.push_back({n.name, n.checkpoint, std::nullopt, std::nullopt});
        v_.saved_matched.push_back(i);
      }
    }
  } else if (type == "genesis") {
    return fail(at(), seq, "a second genesis entry");
  }
  Hash chain = chain_next(head_, leaf);
  if (stored_chain && !stored_chain->empty() && *stored_chain != as_bytes(chain))
    return fail(at(), seq, "chain hash does not follow from the previous entry");
  head_ = chain;
  if (type == "lost") {
    ++v_.gaps;
    auto lost = top_.unsigned_integer("lost");
    if (!lost) return fail(at(), seq, "a lost entry without a count of events lost (lost)");
    if (*lost > UINT64_MAX - v_.lost) return fail(at(), seq, "the lost entries' counts add up past 2^64");
    v_.lost += *lost;
  }
  if (type == "session_end") {
    ended_ = true;
    // What the end says must be what the record holds.
    if (top_.unsigned_integer("lost_total") != v_.lost)
      return fail(at(), seq, "lost_total " + std::string(top_.raw("lost_total").value_or("(none)")) +
                                 " is not the sum of the lost entries (" + std::to_string(v_.lost) + ")");
    if (top_.integer("entries_before") != seq - 1)
      return fail(at(), seq, "entries_before " + std::string(top_.raw("entries_before").value_or("(none)")) +
                                 " is not the number of entries before it (" + std::to_string(seq - 1) + ")");
  }
  tree_.append(leaf);
  count_ = seq;
  v_.entries = seq;
  for (auto& saved : saved_)
    if (saved.checkpoint.size == uint64_t(seq)) {
      saved.root_seen = tree_.root();
      saved.chain_seen = head_;
    }
  return true;
}

// Whether a block's path index (ledger/path_index.h) may hold every path
// the entry being checked names, and every directory above them (however
// many: a filter with all bits set holds them all).
bool SessionVerifier::paths_indexed(std::string_view bits) {
  path_hashes_.clear();
  entry_path_hashes(top_, path_hashes_);
  return std::all_of(path_hashes_.begin(), path_hashes_.end(), [&](uint64_t h) { return path_bits_may_hold(bits, h); });
}

bool SessionVerifier::check_index(std::string_view type, int64_t pid, const BlockIndex* block) {
  if (!v_.ok) return false;
  // What the recorder stores beside each entry: its type, its pid (0 when
  // it has none) and its ts_real_ns in the block's span (when it has one).
  // add_entry checked the body, so its members are sorted and found fast.
  std::string_view type_raw = top_.raw("type").value_or(""), pid_raw = top_.raw("pid").value_or(""),
                   ts_raw = top_.raw("ts_real_ns").value_or("");
  auto integer = [](std::string_view raw) {
    int64_t n = 0;
    if (!raw.empty() && std::from_chars(raw.data(), raw.data() + raw.size(), n).ptr != raw.data() + raw.size()) n = 0;
    return n;
  };
  int64_t body_pid = integer(pid_raw), ts = integer(ts_raw);
  // Types are plain ASCII words (add_entry): the raw text between the quotes.
  std::string_view body_type = type_raw.size() >= 2 ? type_raw.substr(1, type_raw.size() - 2) : std::string_view();
  std::string wrong;
  if (type != body_type) wrong = "type " + std::string(type);
  else if (pid != body_pid) wrong = "pid " + std::to_string(pid);
  else if (block && !has_type(block->types, type)) wrong = "a block without this type";
  else if (block && !(block->pid_bits & index_bit(body_pid))) wrong = "a block without this pid";
  else if (block && ts && (ts < block->ts_min || ts > block->ts_max)) wrong = "a block of another time span";
  else if (block && block->path_bits && !paths_indexed(*block->path_bits)) wrong = "a block without a path it names";
  if (wrong.empty()) return true;
  return fail(entry_name(count_), count_,
              "the record's index disagrees with the entry (it says " + wrong +
                  "): the file was edited outside flightrec, and a query that uses the index could miss entries");
}

bool SessionVerifier::add_checkpoint(std::string_view text) {
  if (!v_.ok) return false;
  std::string at = "checkpoint at size " + std::to_string(count_);
  std::string why;
  auto note = parse_note(text, &why);
  if (!note) return fail(at, 0, why);
  auto c = parse_checkpoint(note->text, &why);
  if (!c) return fail(at, 0, why);
  at = "checkpoint at size " + std::to_string(c->size);
  if (c->size != uint64_t(count_))
    return fail(at, 0, "it claims " + std::to_string(c->size) + " entries where " +
                           std::to_string(count_) + " precede it");
  if (c->origin != v_.origin) return fail(at, 0, "it is for another log (" + c->origin + ")");
  const VerifierKey* key = pinned_ ? pinned_ : record_key_ ? &*record_key_ : nullptr;
  if (key) {
    if (std::string bad = check_signature(*note, *key); !bad.empty()) return fail(at, 0, bad);
    ++v_.signed_checkpoints;
  } else if (!note->signatures.empty()) {
    return fail(at, 0, "signed, but the record names no key to check it with");
  }
  if (v_.checkpoints > 0 && c->size == v_.last_checkpoint)
    return fail(at, 0, "a second checkpoint of the same tree size");
  // The writer takes one as soon as checkpoint_every_entries entries were
  // added since the last: a wider gap means one was removed.
  if (every_entries_ && c->size > v_.last_checkpoint + every_entries_)
    return fail(at, 0, "the previous checkpoint is at size " + std::to_string(v_.last_checkpoint) + ", more than " +
                           std::to_string(every_entries_) + " entries earlier: a checkpoint between was removed");
  if (c->root != tree_.root())
    return fail(at, 0, "its root hash is not the root of the entries it covers");
  if (!c->chain || *c->chain != head_) return fail(at, 0, "its chain head is not the chain of the entries it covers");
  ++v_.checkpoints;
  v_.last_checkpoint = c->size;
  return true;
}

void SessionVerifier::missing_entry(int64_t next_stored) {
  fail(entry_name(count_ + 1), count_ + 1,
       "entry is missing (the next stored entry is " + std::to_string(next_stored) + ")");
}

void SessionVerifier::checkpoint_beyond_end(uint64_t tree_size) {
  fail("checkpoint at size " + std::to_string(tree_size), 0,
       "it covers more entries than the record holds (" + std::to_string(count_) +
           "): entries were removed from the end");
}

const SessionVerdict& SessionVerifier::finish() {
  if (finished_) return v_;
  finished_ = true;
  if (!v_.ok) return v_;
  const VerifierKey* key = pinned_ ? pinned_ : record_key_ ? &*record_key_ : nullptr;
  if (key) {
    v_.key = key->vkey();
    v_.key_from_record = !pinned_;
  }
  if (count_ == 0) {
    fail("", 0, "session has no entries");
    return v_;
  }
  if (count_ == 1 && v_.last_checkpoint != 1) {
    fail("entry 1", 1, "the genesis entry is not sealed by a checkpoint of size 1");
    return v_;
  }
  for (const Saved& s : saved_) {
    if (!v_.ok) break;
    const std::string& which = s.name;
    if (s.checkpoint.size > uint64_t(count_)) {
      fail(which, 0,
           "the record holds " + std::to_string(count_) + " entries but a checkpoint saved elsewhere covers " +
               std::to_string(s.checkpoint.size) + ": the record was truncated or rolled back");
    } else if (s.root_seen != s.checkpoint.root || s.chain_seen != s.checkpoint.chain) {
      fail(which, 0,
           "the first " + std::to_string(s.checkpoint.size) +
               " entries differ from what the checkpoint saved elsewhere signed: history was rewritten");
    }
  }
  if (!v_.ok) return v_;
  if (ended_ && v_.last_checkpoint != uint64_t(count_)) {
    fail("entry " + std::to_string(count_), count_,
         "the session's end is not covered by a checkpoint (the last covers " +
             std::to_string(v_.last_checkpoint) + " of " + std::to_string(count_) +
             " entries): its end checkpoint was removed or entries were added");
    return v_;
  }
  if (!ended_ && every_entries_ && uint64_t(count_) - v_.last_checkpoint >= every_entries_) {
    fail("entry " + std::to_string(v_.last_checkpoint + every_entries_), int64_t(v_.last_checkpoint + every_entries_),
         "no checkpoint covers it, though one is taken every " + std::to_string(every_entries_) +
             " entries: a checkpoint was removed");
    return v_;
  }
  v_.terminated = ended_;
  return v_;
}

StoreVerdict verify_store(Store& store, std::optional<int64_t> only_session, const VerifierKey* pinned,
                          std::optional<std::string> external, Progress* progress) {
  StoreVerdict out;
  int64_t done = 0;
  std::optional<SavedCheckpoints> saved;
  if (external) saved = SavedCheckpoints::parse(*external);
  // Every session anything was recorded for: the sessions table is only an
  // index, and a deleted row must not hide a session from verification.
  for (int64_t id : store.session_ids()) {
    if (only_session && id != *only_session) continue;
    SessionVerifier v(id, pinned, saved ? &*saved : nullptr);
    auto checkpoints = store.checkpoints(id);
    size_t next_cp = 0;
    auto feed_checkpoints = [&] {
      while (next_cp < checkpoints.size() && checkpoints[next_cp].tree_size == v.entries())
        v.add_checkpoint(checkpoints[next_cp++].note);
    };
    feed_checkpoints();
    HashedReader reader(store, id);
    reader.for_each([&](const HashedEntry& e) {
      if (e.seq != v.entries() + 1) {
        v.missing_entry(e.seq);
        return false;
      }
      if (!v.add_entry(e.body, e.leaf_stored, e.chain_stored, e.leaf)) return false;
      if (!v.check_index(e.type, e.pid, e.block)) return false;
      feed_checkpoints();
      if (progress) progress->update(++done);
      return true;
    });
    if (v.verdict().ok && next_cp < checkpoints.size()) v.checkpoint_beyond_end(uint64_t(checkpoints[next_cp].tree_size));
    out.sessions.emplace_back(id, v.finish());
    if (!out.sessions.back().second.ok) {
      out.ok = false;
      out.bad_session = id;
      return out;
    }
  }
  std::vector<const SessionVerdict*> verdicts;
  for (const auto& [id, v] : out.sessions) verdicts.push_back(&v);
  std::string reason;
  if (!out.sessions.empty() && !every_saved_checkpoint_matched(saved ? saved->notes.size() : 0, verdicts, &reason)) {
    auto& last = out.sessions.back().second;
    last.ok = out.ok = false;
    last.where = "saved checkpoint";
    last.reason = reason;
    out.bad_session = out.sessions.back().first;
  }
  return out;
}

bool every_saved_checkpoint_matched(size_t count, const std::vector<const SessionVerdict*>& verdicts,
                                    std::string* reason) {
  std::vector<bool> matched(count);
  for (const auto* v : verdicts)
    for (size_t i : v->saved_matched) matched[i] = true;
  for (size_t i = 0; i < count; ++i)
    if (!matched[i]) {
      *reason = (count == 1 ? std::string("it") : "checkpoint " + std::to_string(i + 1) + " of " + std::to_string(count)) +
                " belongs to none of the sessions verified (another origin)";
      return false;
    }
  return true;
}

}  // namespace flightrec::ledger
