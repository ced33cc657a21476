#pragma once
// A sandbox without a resolver (network.dns false) still looks names up:
// runtimes and agents do at start. Denied at the egress filter, glibc fails
// at once, but musl (static Rust and Go binaries) ignores a refused send
// and waits out its 5 s timeout. This stub is the sandbox's nameserver
// (its /etc/resolv.conf names it): it answers every query at once with
// REFUSED, so a lookup fails in a millisecond, whatever the libc.
// UDP on 127.53.x.y port 53, in the sandbox's network namespace (TCP there
// is accepted and closed).
#include <atomic>
#include <cstdint>
#include <string>
#include <thread>

namespace flightrec::sandbox {

class DnsStub {
 public:
  static constexpr const char* kOwnNetworkAddress = "127.53.0.1";  // free in a namespace of its own
  // Binds in the network namespace netns_fd names (-1: flightrec's own;
  // the calling thread visits the other and comes back) at `address`, or
  // at a free 127.53.x.y when it is empty; no thread yet, so it may be made
  // before the sandbox's init is forked. Throws Error.
  DnsStub(int netns_fd, const std::string& address);
  void start();  // serves from now on, on a thread of its own
  ~DnsStub();
  DnsStub(const DnsStub&) = delete;
  DnsStub& operator=(const DnsStub&) = delete;
  const std::string& address() const { return address_; }
  uint64_t refused() const { return refused_.load(); }

 private:
  void serve();
  int sock_ = -1, tcp_ = -1, stop_fd_ = -1;
  std::string address_;
  std::atomic<uint64_t> refused_{0};
  std::thread thread_;
};

// The /etc/resolv.conf that names it.
std::string stub_resolv_conf(const std::string& address);

}  // namespace flightrec::sandbox
