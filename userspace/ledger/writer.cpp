#include "ledger/writer.h"

#include <algorithm>

#include "ledger/canonical.h"
#include "ledger/path_index.h"

namespace flightrec::ledger {

SessionWriter::SessionWriter(Store& store, int64_t session)
    : store_(store), session_(session), thread_([this] { run(); }) {}

SessionWriter::~SessionWriter() {
  try {
    flush();
  } catch (...) {  // a destructor must not throw; what was not flushed is not committed, and verify sees the end missing
  }
  {
    std::lock_guard lock(mu_);
    closing_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void SessionWriter::append(std::string_view canonical, std::string_view type, int64_t pid, int64_t ts,
                           std::optional<Paths> paths) {
  size_t paths_at = batch_.path_hashes.size();
  bool paths_all;
  if (paths) {
    batch_.path_hashes.insert(batch_.path_hashes.end(), paths->hashes.begin(), paths->hashes.end());
    paths_all = paths->all;
  } else {
    TopLevel top;  // (a body that is not canonical fails verify anyway; its block then matches every path)
    paths_all = !check_canonical(canonical, &top).empty() || !entry_path_hashes(top, batch_.path_hashes, kMaxPathHashes);
  }
  batch_.entries.push_back({batch_.bodies.size(), canonical.size(), std::string(type), pid, ts, uint32_t(paths_at),
                            uint32_t(batch_.path_hashes.size() - paths_at), paths_all});
  batch_.bodies.append(canonical);
  ++count_;
  if (batch_.entries.size() >= kBatch) submit();
}

void SessionWriter::checkpoint(const std::string& origin, const SigningKey* key) {
  if (count_ == 0 || uint64_t(count_) == checkpointed_) return;  // one checkpoint per tree size
  batch_.checkpoints.push_back({batch_.entries.size(), origin, key});
  checkpointed_ = uint64_t(count_);
}

void SessionWriter::rethrow_failure() {
  if (failure_) std::rethrow_exception(failure_);
}

void SessionWriter::submit() {
  if (batch_.entries.empty() && batch_.checkpoints.empty()) return;
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return queue_.size() < kMaxQueued || failure_; });
  rethrow_failure();
  // A busy session's next batch gets the room of one the writer thread
  // is done with, or else as much as this one took, so it appends without
  // regrowing; a quiet one (of a daemon's hundreds) holds no room between
  // its few entries.
  size_t entries = batch_.entries.size(), bytes = batch_.bodies.size();
  queue_.push_back(std::move(batch_));
  batch_ = {};
  if (entries >= kBatch / 4) {
    if (!spare_.empty()) {
      batch_ = std::move(spare_.back());
      spare_.pop_back();
    } else {
      batch_.entries.reserve(entries);
      batch_.bodies.reserve(std::min(bytes + bytes / 8, kBatchBytes));
    }
  }
  cv_.notify_all();
}

void SessionWriter::flush() {
  submit();
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return (queue_.empty() && !busy_) || failure_; });
  rethrow_failure();
}

Hash SessionWriter::head() {
  std::lock_guard lock(mu_);
  return head_;
}

// Hashes, chains and packs a batch (on the writer thread, in order). The
// batch's leaves are hashed together first, and the tree takes them in
// runs between checkpoints: independent digests interleave (sha256_many);
// only the chain is one after another by nature.
void SessionWriter::seal(Batch& batch, std::vector<BlockRow>& blocks, std::vector<CheckpointRow>& checkpoints,
                         std::vector<SealedEntry>& sealed) {
  const size_t n = batch.entries.size();
  leaf_inputs_.clear();
  for (const Pending& e : batch.entries)
    leaf_inputs_.push_back({kLeafPrefix, std::string_view(batch.bodies.data() + e.offset, e.size)});
  leaves_.resize(n);
  sha256_many(leaf_inputs_, leaves_.data());

  int64_t block_start = sealed_ + 1;
  auto seal_block = [&] {
    if (builder_.empty()) return;
    blocks.push_back(builder_.seal(session_, block_start, head_));
    block_start = sealed_ + 1;
  };
  size_t in_tree = 0;  // of this batch's leaves
  auto grow_tree = [&](size_t to) {
    tree_.append_all(std::span(leaves_).subspan(in_tree, to - in_tree));
    in_tree = to;
  };
  size_t next_cp = 0;
  auto take_checkpoints = [&](size_t done) {
    for (; next_cp < batch.checkpoints.size() && batch.checkpoints[next_cp].after == done; ++next_cp) {
      grow_tree(done);
      const auto& req = batch.checkpoints[next_cp];
      Checkpoint c{req.origin, uint64_t(sealed_), tree_.root(), head_};
      checkpoints.push_back({sealed_, sign_checkpoint(c, req.key)});
    }
  };
  for (size_t i = 0; i < n; ++i) {
    take_checkpoints(i);
    const Pending& e = batch.entries[i];
    const Hash& leaf = leaves_[i];
    head_ = chain_next(head_, leaf);
    ++sealed_;
    builder_.add(e.type, e.pid, e.ts, leaf, leaf_inputs_[i].body,
                 std::span(batch.path_hashes).subspan(e.paths_at, e.paths_count), e.paths_all);
    if (sink_) sealed.push_back({sealed_, e.type, leaf_inputs_[i].body, leaf});
    if (builder_.full()) seal_block();
  }
  take_checkpoints(n);
  grow_tree(n);
  seal_block();
}

void SessionWriter::run() {
  std::unique_lock lock(mu_);
  std::vector<BlockRow> blocks;
  std::vector<CheckpointRow> checkpoints;
  std::vector<SealedEntry> sealed;
  std::vector<SealedCheckpoint> sealed_checkpoints;
  for (;;) {
    cv_.wait(lock, [&] { return !queue_.empty() || closing_; });
    if (queue_.empty()) return;  // closing and drained
    Batch batch = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    std::exception_ptr failure;
    try {
      blocks.clear();
      checkpoints.clear();
      sealed.clear();
      seal(batch, blocks, checkpoints, sealed);
      store_.begin();
      for (const BlockRow& b : blocks) store_.insert_block(b);
      for (const CheckpointRow& c : checkpoints) store_.insert_checkpoint(session_, uint64_t(c.tree_size), c.note);
      store_.commit();
      if (sink_) {
        sealed_checkpoints.clear();
        for (const CheckpointRow& c : checkpoints) sealed_checkpoints.push_back({uint64_t(c.tree_size), c.note});
        try {
          sink_->sealed(sink_origin_, session_, sealed, sealed_checkpoints);
        } catch (...) {
          // What is shipped is a copy: its failure never fails the record.
        }
      }
      // A quiet session keeps no pages between its commits (a daemon
      // records hundreds); a busy one keeps its B-tree hot.
      if (batch.entries.size() < kBatch / 4) {
        store_.release_memory();
        leaf_inputs_ = {};
        leaves_ = {};
      }
    } catch (...) {
      failure = std::current_exception();
      store_.rollback();  // leave no transaction open behind the failure
    }
    lock.lock();
    if (batch.entries.size() >= kBatch / 4 && spare_.size() < kMaxSpare) {
      batch.bodies.clear();
      batch.entries.clear();
      batch.path_hashes.clear();
      batch.checkpoints.clear();
      spare_.push_back(std::move(batch));
    }
    busy_ = false;
    if (failure && !failure_) failure_ = failure;
    cv_.notify_all();
  }
}

}  // namespace flightrec::ledger
