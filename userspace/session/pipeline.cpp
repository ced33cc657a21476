#include "session/pipeline.h"

#include <cstring>

namespace flightrec::session {

namespace {
constexpr size_t kHeldMax = 1024;
constexpr size_t kHeldBytesMax = 4 << 20;
constexpr uint64_t kHeldNsMax = 2'000'000'000;  // a binding comes within microseconds
}  // namespace

void TlsBinder::on_record(const void* data, size_t size, const Pass& pass) {
  if (size < sizeof(fr_header)) return pass(data, size);
  fr_header h;
  std::memcpy(&h, data, sizeof(h));
  if (h.type == FR_REC_TLS && size >= sizeof(fr_tls)) {
    fr_tls r;
    std::memcpy(&r, data, sizeof(r));
    if (r.flags & FR_TLS_UNBOUND) {
      held_.push_back({h.pid, r.ssl, h.ts_mono_ns, std::string(static_cast<const char*>(data), size)});
      bytes_ += size;
      while (held_.size() > kHeldMax || bytes_ > kHeldBytesMax) pass_oldest(pass);
      return;
    }
  } else if (h.type == FR_REC_TLS_BIND && size == sizeof(fr_tls_bind)) {
    fr_tls_bind b;
    std::memcpy(&b, data, sizeof(b));
    for (auto it = held_.begin(); it != held_.end();) {
      if (it->pid != h.pid || it->ctx != b.ctx) {
        ++it;
        continue;
      }
      fr_tls r;
      std::memcpy(&r, it->bytes.data(), sizeof(r));
      r.ssl = b.conn;
      r.fd = b.fd;
      r.flags &= ~FR_TLS_UNBOUND;
      std::memcpy(it->bytes.data(), &r, sizeof(r));
      pass(it->bytes.data(), it->bytes.size());
      bytes_ -= it->bytes.size();
      it = held_.erase(it);
    }
    return;
  }
  age_out(h.ts_mono_ns, pass);
  pass(data, size);
}

void TlsBinder::age_out(uint64_t now, const Pass& pass) {
  while (!held_.empty() && now > held_.front().ts && now - held_.front().ts > kHeldNsMax) pass_oldest(pass);
}

void TlsBinder::pass_oldest(const Pass& pass) {
  pass(held_.front().bytes.data(), held_.front().bytes.size());
  bytes_ -= held_.front().bytes.size();
  held_.pop_front();
}

void TlsBinder::release_all(const Pass& pass) {
  for (const auto& held : held_) pass(held.bytes.data(), held.bytes.size());
  held_.clear();
  bytes_ = 0;
}

void Pipeline::on_record(const void* data, size_t size) {
  binder_.on_record(data, size, [this](const void* d, size_t n) { record(d, n); });
}

void Pipeline::release_held() {
  binder_.release_all([this](const void* d, size_t n) { record(d, n); });
}

void Pipeline::record(const void* data, size_t size) {
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
