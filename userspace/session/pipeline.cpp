#include "session/pipeline.h"

namespace flightrec::session {

void Pipeline::on_record(const void* data, size_t size) {
  const events::Entry* entry = rec_.on_record(data, size);
  if (!entry) return;  // left out by the rate limit, or not encodable (a malformed entry says so)
  for (Observer* o : observers_) o->observe(*entry, emitted_);
  write(emitted_);
}

void Pipeline::write(Emitted& out) {
  for (auto& e : out.entries()) {
    rec_.record_own(e);
    for (Observer* o : observers_) o->written(e);
  }
  out.entries().clear();
}

}  // namespace flightrec::session
