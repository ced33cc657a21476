#pragma once
// The one-way path of a session's events:
//
//   ring record -> decode -> sealed into the record -> observers, in order
//               -> the entries they emitted, sealed after it
//
// Observers (TLS attach, the policy judge and write tracking, ...) see each
// kernel entry once it is in the record and answer with the entries they
// want written; none of them writes to the record or calls back into it,
// so the order of the record is the order of this function.
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "events/entry.h"
#include "recorder/recorder.h"

extern "C" {
#include "flightrec/abi/events.h"
}

namespace flightrec::session {

// flightrec's own entries an observer (or any other source) wants written:
// made with flightrec's header, recorded in order by whoever owns the recorder.
class Emitted {
 public:
  explicit Emitted(const recorder::Recorder& rec) : rec_(rec) {}
  events::Entry& add(const char* type) { return entries_.emplace_back(rec_.own_entry(type)); }
  // One about what a process did: its ids and comm are the subject's.
  events::Entry& add_about(const char* type, const events::Entry& subject) {
    return entries_.emplace_back(rec_.entry_about(type, subject));
  }
  std::deque<events::Entry>& entries() { return entries_; }

 private:
  const recorder::Recorder& rec_;
  std::deque<events::Entry> entries_;  // a deque: what add() returned stays valid
};

class Observer {
 public:
  virtual ~Observer() = default;
  // Every kernel entry, once recorded (seq set), in record order.
  virtual void observe(const events::Entry& entry, Emitted& out) = 0;
  // Each of flightrec's own entries once recorded (its seq set), whoever emitted it.
  virtual void written(const events::Entry&) {}
};

// AEAD seals whose connection was not known when they were sealed
// (FR_TLS_UNBOUND, bpf/tls.bpf.c): held as the kernel gave them until the
// thread's next socket write names it (FR_REC_TLS_BIND), then passed on
// with their connection. Bounded in count, bytes and time: what no binding
// claims goes on as it is (ssl the AEAD context, fd -1).
class TlsBinder {
 public:
  using Pass = std::function<void(const void*, size_t)>;
  // Passes the record on, now or later (a binding itself is consumed).
  void on_record(const void* data, size_t size, const Pass& pass);
  void release_all(const Pass& pass);
  size_t held() const { return held_.size(); }

 private:
  struct Held {
    uint32_t pid;
    uint64_t ctx, ts;
    std::string bytes;
  };
  void age_out(uint64_t now, const Pass& pass);
  void pass_oldest(const Pass& pass);  // as it is, unbound
  std::deque<Held> held_;
  size_t bytes_ = 0;
};

class Pipeline {
 public:
  explicit Pipeline(recorder::Recorder& rec) : rec_(rec) {}
  void add(Observer& observer) { observers_.push_back(&observer); }  // before the first record
  // One ring-buffer record (the capture's handler).
  void on_record(const void* data, size_t size);
  // At the session's end: records still held for their connection.
  void release_held();
  // Writes entries a source other than an observer made (file changes,
  // packet drops, kills posted by the watchdog).
  void write(Emitted& out);
  Emitted emitted() const { return Emitted(rec_); }

 private:
  void record(const void* data, size_t size);
  recorder::Recorder& rec_;
  TlsBinder binder_;
  std::vector<Observer*> observers_;
  Emitted emitted_{rec_};  // kept across records: a deque allocates when made
};

}  // namespace flightrec::session
