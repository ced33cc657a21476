#include "ledger/writer.h"

namespace flightrec::ledger {

SessionWriter::SessionWriter(Store& store, int64_t session)
    : store_(store), session_(session), thread_([this] { run(); }) {
  batch_.reserve(kBatch);
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
  EntryRow& row = batch_.emplace_back();
  row.session = session_;
  row.seq = ++count_;
  row.type = type;
  row.pid = pid;
  row.body = std::move(canonical);
  row.leaf.assign(as_bytes(leaf));
  row.chain.assign(as_bytes(head_));
  if (batch_.size() >= kBatch) submit();
}

void SessionWriter::rethrow_failure() {
  if (failure_) std::rethrow_exception(failure_);
}

void SessionWriter::submit() {
  if (batch_.empty()) return;
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return queue_.size() < kMaxQueued || failure_; });
  rethrow_failure();
  queue_.push_back(std::move(batch_));
  batch_ = {};
  batch_.reserve(kBatch);
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
    std::vector<EntryRow> batch = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    std::exception_ptr failure;
    try {
      store_.begin();
      for (const EntryRow& row : batch) store_.insert_entry(row);
      store_.commit();
    } catch (...) {
      failure = std::current_exception();
    }
    lock.lock();
    busy_ = false;
    if (failure && !failure_) failure_ = failure;
    cv_.notify_all();
  }
}

}  // namespace flightrec::ledger
