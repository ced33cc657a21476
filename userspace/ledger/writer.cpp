#include "ledger/writer.h"

namespace flightrec::ledger {

SessionWriter::~SessionWriter() {
  try {
    flush();
  } catch (...) {
  }
}

void SessionWriter::append(const std::string& canonical, const std::string& type, int64_t pid,
                           int64_t tid, int64_t ts_mono_ns) {
  if (pending_ == 0) store_.begin();
  Hash leaf = leaf_hash(canonical);
  Hash chain = chain_next(head_, leaf);
  row_.session = session_;
  row_.seq = count_ + 1;
  row_.type = type;
  row_.pid = pid;
  row_.tid = tid;
  row_.ts_mono_ns = ts_mono_ns;
  row_.body = canonical;
  row_.leaf.assign(as_bytes(leaf));
  row_.chain.assign(as_bytes(chain));
  store_.insert_entry(row_);
  head_ = chain;
  ++count_;
  ++pending_;
}

void SessionWriter::flush() {
  if (pending_ == 0) return;
  store_.commit();
  pending_ = 0;
}

}  // namespace flightrec::ledger
