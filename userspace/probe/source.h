#pragma once
// What a recording session needs of the programs that record it, wherever
// they are loaded: in this process (Capture), or in flightrecd, which hands
// a session its own ring buffer (session/handed.h). The engine, its event
// loop, the loss policy and the TLS follower see only these.
#include <cstdint>
#include <string>
#include <vector>

extern "C" {
#include "flightrec/abi/events.h"
}

namespace flightrec::probe {

struct NetDrops {
  uint64_t count = 0;
  fr_net_drop last{};
};

// What the programs are and enforce, for the genesis entry and the judge.
struct CaptureTraits {
  std::vector<std::string> attached;  // "tp_btf/sys_exit", ... (for a full session)
  std::vector<std::string> refused;   // LSM programs this kernel refused
  bool path_rules = false;            // lsm/file_open decides the path rules
  bool unix_inbound = false;          // BPF-LSM keeps the host out of a confined session's UNIX sockets
  bool entry_times = false;           // sys_enter is attached
};

// The records of one session and their losses.
class Source {
 public:
  virtual ~Source() = default;
  static constexpr int kConsumeBudget = 65536;
  virtual int poll_fd() const = 0;  // readable when the kernel forced a wake-up
  virtual int ring_fd() const = 0;  // the ring buffer map: its waiters are woken at each forced wake-up
  // Handles what is waiting, at most `budget` records (so a busy ring
  // cannot keep the caller from its other work); returns how many.
  virtual int consume(int budget) = 0;
  int consume() { return consume(kConsumeBudget); }
  // Handles everything the kernel had committed when called.
  virtual void drain_to_now() = 0;
  // The session's records the kernel could not put in its ring, per CPU.
  virtual std::vector<uint64_t> drops_per_cpu() const = 0;
  // Runs of the programs the kernel skipped to avoid nesting.
  virtual uint64_t program_misses() const = 0;
  // Unread bytes in the ring buffer as a fraction of its size (0..1).
  virtual double ring_fill() const = 0;
  // Continues the processes backpressure's emergency brake stopped
  // (SessionSpec::brake); returns how many. Call once the ring drained.
  virtual size_t continue_braked() { return 0; }
  // Stop producing; consume() still drains.
  virtual void detach() = 0;
  virtual CaptureTraits traits() const = 0;
};

// Where the TLS plaintext probes are attached: one file at a time, once
// per file however many paths name it. Each returns "" or why not;
// *tls_file (if given) is set when the file is a TLS stack the probes know.
class TlsProbes {
 public:
  virtual ~TlsProbes() = default;
  // library_path: flightrec's own choice, resolved on the host.
  // *live_since_ns (if given): when the file's probes went live
  // (CLOCK_MONOTONIC, the kernel's clock for entries), 0 if not probed. A
  // call made before then was not seen, whatever the file is.
  virtual std::string attach_tls(const std::string& library_path, bool* tls_file = nullptr,
                                 uint64_t* live_since_ns = nullptr) = 0;
  // fd: the file, already opened as its user sees it (a path a recorded
  // process named is never resolved on the host); name: for messages.
  virtual std::string attach_tls(int fd, const std::string& name, bool* tls_file = nullptr,
                                 uint64_t* live_since_ns = nullptr) = 0;
  // Whether the file at path (on the host) has the plaintext probes.
  virtual bool probes_file(const std::string& path) = 0;
};

}  // namespace flightrec::probe
