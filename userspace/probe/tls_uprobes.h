#pragma once
// The TLS plaintext probes of one capture, per file (find_tls(): libssl,
// libgnutls, NSS's libnspr4 and libssl3, a program that exports one, a Go
// program, BoringSSL or aws-lc linked in): which files carry them and since
// when, which were refused and why. Bounded: files probed, and uprobes per
// file; in flightrecd, files per tenant too (a session of its own or a
// run's: TenantTlsProbes), whose probes go when it ends. Kept by two
// threads, the one that drains the ring (TlsFollower) and EarlyTlsAttach's:
// every member takes the lock.
#include <cstddef>
#include <cstdint>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "probe/source.h"
#include "probe/tls_finder.h"

struct bpf_link;
struct bpf_program;

namespace flightrec::probe {

class TlsUprobes : public TlsProbes {
 public:
  // The loaded entry and return programs; multi: attach them as
  // uprobe_multi links (two per file) rather than a uprobe each.
  TlsUprobes(bpf_program* enter, bpf_program* ret, bool multi);
  ~TlsUprobes() override;  // every probe detached, here
  TlsUprobes(const TlsUprobes&) = delete;
  TlsUprobes& operator=(const TlsUprobes&) = delete;

  // Attaches the probes to one file, once per file, however many paths
  // name it. Returns "" or why not. library_path is flightrec's own
  // choice, resolved on the host. *tls_file (if given) is set when the file
  // is a TLS stack the probes know: an error then is a failure to probe
  // it, not a file without TLS.
  std::string attach_tls(const std::string& library_path, bool* tls_file = nullptr,
                         uint64_t* live_since_ns = nullptr) override;
  std::string attach_tls(int fd, const std::string& name, bool* tls_file = nullptr,
                         uint64_t* live_since_ns = nullptr) override;
  // For a tenant (open_tenant): a file it has probed counts against its
  // kTlsFilesPerTenant, and stays probed while some tenant that asked for
  // it is open (or the capture itself asked: tenant 0, for its life). A
  // tenant not open (ended meanwhile) probes nothing.
  std::string attach_tls_as(uint32_t tenant, int fd, const std::string& name, bool* tls_file = nullptr,
                            uint64_t* live_since_ns = nullptr);
  uint32_t open_tenant();  // a new tenant's id, never 0 nor one used before
  // The tenant's files that no other open tenant asked for lose their
  // probes: detached by one worker thread (the kernel makes whoever
  // detaches wait, ~0.1 s a link), counted against kTlsFilesMax until then.
  // Never throws (destructors call it).
  void close_tenant(uint32_t tenant) noexcept;
  bool probes_file(const std::string& path) override;
  bool probes_file(int fd) const;  // the file open there
  // Whether attach_tls(fd) answers at once: the file is known (probed or
  // refused), or what it holds is quickly found (tls_found_quickly).
  bool answers_quickly(int fd) const;
  size_t files_probed() const;
  std::vector<std::string> probed() const;  // "uprobe:PATH:FUNCTIONS", one per file

  // While the programs load: system_tls_libraries() probed, each answer
  // kept for attach_tls(path) to give once.
  void probe_system_tls();
  // At the capture's end: a helper process keeps the probes and detaches
  // them once flightrec has exited (the kernel makes whoever detaches wait).
  void detach_in_background();

  // Kernel memory the TLS probes may pin, by design: files probed, and
  // uprobes per file (a Go program: 3 entries and at most kGoRetsMax RETs
  // for each of Read and Write; a C library: a few entries and returns).
  // At ~262 bytes a uprobe: 256 files of 256 uprobes pin ~17 MB at most,
  // a tenant's 16 files ~1 MB.
  static constexpr size_t kTlsFilesMax = 256;
  static constexpr size_t kTlsFilesPerTenant = 16;
  static constexpr size_t kUprobesPerFileMax = 256;

 private:
  struct File {
    uint64_t live_since_ns = 0;  // when its probes went live (mono_ns)
    std::vector<bpf_link*> links;
    std::vector<int> link_fds;  // uprobe_multi links
    std::string line;           // "uprobe:PATH:FUNCTIONS"
    std::set<uint32_t> tenants;  // open tenants that asked for it
    bool kept = false;           // the capture's own (tenant 0): for its life
    uint32_t charged_to = 0;     // the tenant it counts against (0: none)
    uint64_t order = 0;          // probed() lists the files in the order they were probed
  };
  // Entry probes, and return probes: uretprobes on the same functions (C
  // libraries), or plain uprobes at the given offsets (Go's RETs). All or none.
  std::string attach_uprobes(int fd, const std::string& path, const Uprobes& entries, const Uprobes& rets,
                             bool uretprobes, File& file);
  void drop();  // every probe detached

  bpf_program* enter_;
  bpf_program* ret_;
  bool multi_;
  mutable std::mutex mu_;
  std::set<std::pair<uint64_t, uint64_t>> reading_;  // files a thread is reading (find_tls_cached)
  std::condition_variable reader_done_;
  std::map<std::pair<uint64_t, uint64_t>, File> files_;  // (dev, inode) attached
  std::map<uint32_t, size_t> tenants_;  // open tenants -> files charged to each
  uint32_t last_tenant_ = 0;
  // Detaching, away from the caller's thread: links waiting, and how many
  // files they were (still pinning kernel memory until detached).
  void detach_worker();
  static void destroy(std::vector<bpf_link*>& links, std::vector<int>& link_fds) noexcept;
  std::vector<bpf_link*> detach_links_;
  std::vector<int> detach_fds_;
  size_t detaching_files_ = 0;
  bool stop_detaching_ = false;
  std::condition_variable detach_wanted_;
  std::thread detacher_;  // started by the first close_tenant that detaches
  uint64_t probed_count_ = 0;
  // Files not probed, each read once: (device, inode) -> why not, and
  // whether it holds a TLS stack (one that could not be told apart).
  std::map<std::pair<uint64_t, uint64_t>, std::pair<std::string, bool>> refused_;
  std::map<std::string, std::pair<std::string, bool>> early_;
};

// One tenant's view of the capture's TLS probes (flightrecd: a session
// it records, or a run handed to it): what it probes is charged to it
// (TlsUprobes::kTlsFilesPerTenant), and released when this view goes.
class TenantTlsProbes : public TlsProbes {
 public:
  explicit TenantTlsProbes(TlsUprobes& all) : all_(all), tenant_(all.open_tenant()) {}
  ~TenantTlsProbes() override { all_.close_tenant(tenant_); }
  TenantTlsProbes(const TenantTlsProbes&) = delete;
  TenantTlsProbes& operator=(const TenantTlsProbes&) = delete;
  std::string attach_tls(const std::string& library_path, bool* tls_file = nullptr,
                         uint64_t* live_since_ns = nullptr) override;
  std::string attach_tls(int fd, const std::string& name, bool* tls_file = nullptr,
                         uint64_t* live_since_ns = nullptr) override {
    return all_.attach_tls_as(tenant_, fd, name, tls_file, live_since_ns);
  }
  bool probes_file(const std::string& path) override { return all_.probes_file(path); }
  uint32_t tenant() const { return tenant_; }

 private:
  TlsUprobes& all_;
  uint32_t tenant_;
};

// The system's TLS libraries that exist here, probed from a session's
// start: OpenSSL, GnuTLS, and NSS's two files (NSPR's I/O calls and NSS's
// handshake), where Debian and Fedora keep them.
std::vector<std::string> system_tls_libraries();

}  // namespace flightrec::probe
