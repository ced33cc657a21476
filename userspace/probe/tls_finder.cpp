#include "probe/tls_finder.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/random.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "common/system.h"
#include "flightrec/abi/events.h"
#include "probe/boringssl.h"
#include "probe/elf_symbols.h"
#include "probe/go_tls.h"

namespace flightrec::probe {

const std::vector<TlsStack>& tls_stacks() {
  // Each function's cookie is its enum fr_tls_func: the BPF side reads the
  // arguments and the return by it.
  static const std::vector<TlsStack> stacks = {
      {"OpenSSL",
       {{"SSL_read", FR_TLS_SSL_READ},
        {"SSL_write", FR_TLS_SSL_WRITE},
        {"SSL_read_ex", FR_TLS_SSL_READ_EX},
        {"SSL_write_ex", FR_TLS_SSL_WRITE_EX},
        {"SSL_connect", FR_TLS_HANDSHAKE, true},
        {"SSL_do_handshake", FR_TLS_HANDSHAKE, true}}},
      {"GnuTLS",
       {{"gnutls_record_recv", FR_TLS_GNUTLS_RECV},
        {"gnutls_record_recv_seq", FR_TLS_GNUTLS_RECV},
        {"gnutls_record_send", FR_TLS_GNUTLS_SEND},
        {"gnutls_record_send2", FR_TLS_GNUTLS_SEND},
        {"gnutls_handshake", FR_TLS_HANDSHAKE, true}}},
      // NSS: the plaintext calls are NSPR's, dispatched to the SSL layer
      // pushed on the socket (bpf/tls.bpf.c keeps only layered fds); the
      // handshake is NSS's own, in libssl3.
      {"NSPR",
       {{"PR_Read", FR_TLS_NSPR_READ},
        {"PR_Recv", FR_TLS_NSPR_READ},
        {"PR_Write", FR_TLS_NSPR_WRITE},
        {"PR_Send", FR_TLS_NSPR_WRITE}}},
      {"NSS",
       {{"SSL_ForceHandshake", FR_TLS_HANDSHAKE},
        {"SSL_ForceHandshakeWithTimeout", FR_TLS_HANDSHAKE, true}}},
  };
  return stacks;
}

TlsFinding find_tls(int fd) {
  TlsFinding out;
  // The first stack whose functions the file exports, all of them (one
  // pass over the file for every stack: most files are no TLS library).
  std::vector<std::string> names;
  for (const TlsStack& s : tls_stacks())
    for (const auto& f : s.functions) names.push_back(f.name);
  auto found = function_offsets(fd, names);
  for (const TlsStack& s : tls_stacks())
    if (std::all_of(s.functions.begin(), s.functions.end(),
                    [&](const auto& f) { return f.optional || found.count(f.name); })) {
      out.tls = true;
      out.stack = s.name;
      out.found_by = "exported functions";
      for (const auto& f : s.functions)
        if (found.count(f.name)) out.entries.add(found[f.name], f.func, f.name);
      out.rets = out.entries;  // uretprobes on the same functions
      return out;
    }
  // A Go program: its function table, which stripping keeps.
  std::string why;
  if (auto go = go_tls_functions(fd, &why)) {
    // Most Go programs make no TLS calls (built without crypto/tls, or
    // refused): said, but not as a TLS file that failed.
    out.tls = !go->empty();
    out.stack = "Go crypto/tls";
    out.found_by = "Go's function table";
    out.uretprobes = false;
    out.why = "a Go program: " + why;
    for (const auto& f : *go) {
      out.entries.add(f.entry, f.func | FR_TLS_COOKIE_GO, f.name);
      for (uint64_t at : f.rets) out.rets.add(at, f.func | FR_TLS_COOKIE_GO, f.name + " (a RET)");
    }
    return out;
  }
  // BoringSSL linked in and stripped (Bun): its error sites.
  if (auto boring = boringssl_functions(fd, &why)) {
    out.tls = true;
    out.stack = "BoringSSL, linked in";
    out.found_by = "its error sites (ssl_lib.cc)";
    out.why = why;
    for (const auto& f : *boring) out.entries.add(f.entry, f.func, f.name);
    out.rets = out.entries;
    return out;
  }
  // Below a TLS library that is not found (rustls, in Rust programs like
  // Codex): the AEAD that seals and opens its records.
  if (auto aead = aead_functions(fd, &why)) {
    out.tls = true;
    out.stack = "TLS records through a linked-in AEAD (aws-lc or BoringSSL; rustls)";
    out.found_by = "its error sites (cipher/aead.c)";
    out.why = why;
    for (const auto& f : *aead) {
      out.entries.add(f.entry, f.func, f.name);
      if (f.func == FR_TLS_AEAD_OPEN || f.func == FR_TLS_AEAD_OPEN_GATHER) out.rets.add(f.entry, f.func, f.name);
    }
    return out;
  }
  out.why = "exports no TLS library's functions";
  return out;
}

namespace {

constexpr off_t kCachedFromBytes = 16 << 20;
constexpr size_t kCacheFilesMax = 4096;
constexpr off_t kCacheEntryMax = 1 << 20;

// The cache's directory, opened, where it is root's alone (made so if it
// is not there); -1 where it cannot be trusted or made.
int open_cache_dir() {
  if (geteuid() != 0) return -1;
  mkdir("/var/cache/flightrec", 0755);
  mkdir(kTlsFindCache, 0700);
  int dir = open(kTlsFindCache, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  struct stat st {};
  if (dir >= 0 && (fstat(dir, &st) != 0 || st.st_uid != 0 || (st.st_mode & 077) != 0)) {
    close(dir);
    return -1;
  }
  return dir;
}

std::string cache_name(const struct stat& st) {
  static const std::string self = [] {
    struct stat me {};
    if (stat("/proc/self/exe", &me) != 0) return std::string();
    char b[128];
    std::snprintf(b, sizeof(b), "%lx-%lx-%lx-%lx", (unsigned long)me.st_dev, (unsigned long)me.st_ino,
                  (unsigned long)me.st_size, (unsigned long)(me.st_mtim.tv_sec * 1000000000L + me.st_mtim.tv_nsec));
    return std::string(b);
  }();
  if (self.empty()) return {};
  // Not the device: a sandbox's overlay shows the host's file (same inode,
  // size and times) on a device of its own, new for each run. (An entry
  // is used only where the bytes at its offsets are the file's too.)
  char b[256];
  std::snprintf(b, sizeof(b), "%lx-%lx-%lx-%lx.by-%s.json", (unsigned long)st.st_ino,
                (unsigned long)st.st_size, (unsigned long)(st.st_mtim.tv_sec * 1000000000L + st.st_mtim.tv_nsec),
                (unsigned long)(st.st_ctim.tv_sec * 1000000000L + st.st_ctim.tv_nsec), self.c_str());
  return b;
}

nlohmann::json to_json(const Uprobes& u) {
  return {{"offsets", u.offsets}, {"cookies", u.cookies}, {"names", u.names}};
}

// Read back, every offset inside the file: nullopt for anything else.
std::optional<Uprobes> uprobes_of(const nlohmann::json& j, uint64_t file_size) {
  Uprobes u;
  u.offsets = j.at("offsets").get<std::vector<uint64_t>>();
  u.cookies = j.at("cookies").get<std::vector<uint64_t>>();
  u.names = j.at("names").get<std::vector<std::string>>();
  if (u.cookies.size() != u.offsets.size() || u.names.size() != u.offsets.size()) return std::nullopt;
  for (size_t i = 0; i < u.offsets.size(); ++i)
    if (u.offsets[i] >= file_size || u.cookies[i] > 0xffff) return std::nullopt;
  return u;
}

// The bytes at each probed offset, as hex: an entry is used only while the
// file still has them there (ctime can be what a FUSE or network file
// system says, and a write through a shared mapping may not move it).
std::string bytes_at(int file, const Uprobes& u) {
  std::string out;
  for (uint64_t off : u.offsets) {
    unsigned char b[16] = {};
    if (!pread_full(file, b, sizeof(b), off)) return {};
    for (unsigned char c : b) {
      char h[3];
      std::snprintf(h, sizeof(h), "%02x", c);
      out += h;
    }
  }
  return out;
}

std::optional<TlsFinding> read_cached(int dir, const std::string& name, int file, uint64_t file_size) {
  int fd = openat(dir, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  struct stat st {};
  std::string text;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size <= kCacheEntryMax) {
    text.resize(size_t(st.st_size));
    if (!pread_full(fd, text.data(), text.size(), 0)) text.clear();
  }
  close(fd);
  try {
    auto j = nlohmann::json::parse(text);
    TlsFinding f;
    f.tls = j.at("tls").get<bool>();
    f.stack = j.at("stack").get<std::string>();
    f.found_by = j.at("found_by").get<std::string>();
    f.uretprobes = j.at("uretprobes").get<bool>();
    f.why = j.at("why").get<std::string>();
    auto entries = uprobes_of(j.at("entries"), file_size), rets = uprobes_of(j.at("rets"), file_size);
    if (!entries || !rets) return std::nullopt;
    f.entries = *entries;
    f.rets = *rets;
    if (f.entries.offsets.empty() || j.at("bytes").get<std::string>() != bytes_at(file, f.entries) ||
        j.at("bytes_rets").get<std::string>() != bytes_at(file, f.rets))
      return std::nullopt;
    return f;
  } catch (const std::exception&) {
    return std::nullopt;  // cut short or not ours: read the file again
  }
}

void write_cached(int dir, const std::string& name, int file, const TlsFinding& f) {
  size_t files = 0;
  if (DIR* d = fdopendir(dup(dir))) {
    while (readdir(d) && files <= kCacheFilesMax) ++files;
    closedir(d);
  }
  if (files > kCacheFilesMax) return;  // full: bounded, whatever runs here
  nlohmann::json j = {{"tls", f.tls},        {"stack", f.stack},           {"found_by", f.found_by},
                      {"uretprobes", f.uretprobes}, {"why", f.why},        {"entries", to_json(f.entries)},
                      {"rets", to_json(f.rets)}, {"bytes", bytes_at(file, f.entries)},
                      {"bytes_rets", bytes_at(file, f.rets)}};
  std::string text = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  // Whole or not at all: written aside under a name no other writer has
  // (pids repeat across namespaces), then renamed into place.
  unsigned char nonce[8];
  if (getrandom(nonce, sizeof(nonce), 0) != ssize_t(sizeof(nonce))) return;
  std::string temp = ".tmp-";
  for (unsigned char c : nonce) temp += "0123456789abcdef"[c >> 4], temp += "0123456789abcdef"[c & 15];
  int fd = openat(dir, temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return;
  bool ok = write_full(fd, text.data(), text.size());
  close(fd);
  if (!ok || renameat(dir, temp.c_str(), dir, name.c_str()) != 0) unlinkat(dir, temp.c_str(), 0);
}

// File systems whose ctime the kernel keeps itself (not FUSE, NFS, 9p...).
bool local_file_system(int fd) {
  struct statfs fs {};
  if (fstatfs(fd, &fs) != 0) return false;
  switch (static_cast<unsigned long>(fs.f_type)) {
    case 0xEF53:      // ext2/3/4
    case 0x58465342:  // xfs
    case 0x9123683E:  // btrfs
    case 0x01021994:  // tmpfs
    case 0x794c7630:  // overlayfs
    case 0x73717368:  // squashfs
      return true;
  }
  return false;
}

}  // namespace

bool tls_found_quickly(int fd) {
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < kCachedFromBytes) return true;
  if (!local_file_system(fd)) return false;
  int dir = open_cache_dir();
  if (dir < 0) return false;
  std::string name = cache_name(st);
  bool found = !name.empty() && read_cached(dir, name, fd, uint64_t(st.st_size));
  close(dir);
  return found;
}

TlsFinding find_tls_cached(int fd, bool* cached) {
  if (cached) *cached = false;
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < kCachedFromBytes || !local_file_system(fd))
    return find_tls(fd);
  int dir = open_cache_dir();
  std::string name = dir >= 0 ? cache_name(st) : std::string();
  if (name.empty()) {
    if (dir >= 0) close(dir);
    return find_tls(fd);
  }
  if (auto f = read_cached(dir, name, fd, uint64_t(st.st_size))) {
    close(dir);
    if (cached) *cached = true;
    return *f;
  }
  TlsFinding f = find_tls(fd);
  // Only what is probed: a refusal or a miss may be this run's (capstone
  // missing, a read that failed) and is cheap to find again where it is not.
  if (!f.entries.offsets.empty()) write_cached(dir, name, fd, f);
  close(dir);
  return f;
}

}  // namespace flightrec::probe
