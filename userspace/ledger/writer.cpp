#include "ledger/writer.h"

namespace flightrec::ledger {

SessionWriter::SessionWriter(Store& store, int64_t session)
    : store_(store), session_(session), thread_([this] { run(); }) {
  batch_.entries.reserve(kBatch);
}

SessionWriter::~SessionWriter() {
  try {
    flush();
  } catch (...) {
  }
  {
    std::lock_guard lock(mu_);
    closing_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void SessionWriter::append(std::string canonical, const std::string& type, int64_t pid) {
  Hash leaf = leaf_hash(canonical);
  head_ = chain_next(head_, leaf);
  tree_.append(leaf);
  EntryRow& row = batch_.entries.emplace_back();
  row.session = session_;
  row.seq = ++count_;
  row.type = type;
  row.pid = pid;
  row.body = std::move(canonical);
  row.leaf.assign(as_bytes(leaf));
  row.chain.assign(as_bytes(head_));
  if (batch_.entries.size() >= kBatch) submit();
}

void SessionWriter::checkpoint(const std::string& origin, const SigningKey* key) {
  if (count_ == 0 || uint64_t(count_) == checkpointed_) return;  // one checkpoint per tree size
  Checkpoint c;
  c.origin = origin;
  c.size = uint64_t(count_);
  c.root = tree_.root();
  c.chain = head_;
  batch_.checkpoints.push_back({count_, sign_checkpoint(c, key)});
  checkpointed_ = c.size;
}

void SessionWriter::rethrow_failure() {
  if (failure_) std::rethrow_exception(failure_);
}

void SessionWriter::submit() {
  if (batch_.entries.empty() && batch_.checkpoints.empty()) return;
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return queue_.size() < kMaxQueued || failure_; });
  rethrow_failure();
  queue_.push_back(std::move(batch_));
  batch_ = {};
  batch_.entries.reserve(kBatch);
  cv_.notify_all();
}

void SessionWriter::flush() {
  submit();
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return (queue_.empty() && !busy_) || failure_; });
  rethrow_failure();
}

void SessionWriter::run() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return !queue_.empty() || closing_; });
    if (queue_.empty()) return;  // closing and drained
    Batch batch = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    std::exception_ptr failure;
    try {
      store_.begin();
      for (const EntryRow& row : batch.entries) store_.insert_entry(row);
      for (const CheckpointRow& c : batch.checkpoints) store_.insert_checkpoint(session_, uint64_t(c.tree_size), c.note);
      store_.commit();
    } catch (...) {
      failure = std::current_exception();
      store_.rollback();  // leave no transaction open behind the failure
    }
    lock.lock();
    busy_ = false;
    if (failure && !failure_) failure_ = failure;
    cv_.notify_all();
  }
}

}  // namespace flightrec::ledger
