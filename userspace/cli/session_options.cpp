#include "cli/session_options.h"

#include <algorithm>
#include <cctype>

#include "session/path_rules.h"
#include "common/error.h"
#include "common/text.h"
#include "probe/capture.h"
#include "probe/features.h"

namespace flightrec::cli {

void SessionOptions::add_to(po::options_description& desc) {
  desc.add_options()("db", po::value(&db)->required(), "SQLite record to write (created if missing)")(
      "key", po::value(&key_dir),
      "directory with flightrec.key and flightrec.pub (flightrec keygen) to sign checkpoints; "
      "without it checkpoints are unsigned")(
      "checkpoint-entries",
      po::value<std::string>()
          ->default_value(std::to_string(checkpoint_entries))
          ->notifier([this](const std::string& t) { checkpoint_entries = parse_count(t, "--checkpoint-entries"); }),
      "a checkpoint every this many entries")(
      "checkpoint-ms",
      po::value<std::string>()
          ->default_value(std::to_string(checkpoint_ms))
          ->notifier([this](const std::string& t) { checkpoint_ms = parse_count(t, "--checkpoint-ms"); }),
      "and at least this often, in milliseconds (0: by entries only)")(
      "on-loss", po::value(&on_loss)->default_value(on_loss),
      "before and when the kernel loses events: backpressure (pause the session's cgroups while "
      "the ring buffer is over half full, and after any loss, until the collector catches up: "
      "the command slows down instead of leaving gaps; 'freeze' is its old name), continue "
      "(record each gap, with a warning on stderr), kill (end the session at the first loss)")(
      "deny-path", po::value(&deny_paths),
      "the session may not open this file or anything under it (repeatable, up to 64; enforced "
      "by BPF-LSM on the kernel's resolved path, so only where the kernel allows it; refused "
      "otherwise)")(
      "allow-exec", po::value(&allow_exec)->value_name("PATH"),
      "the session may execve only files under these paths (repeatable, up to 64; with the ELF "
      "interpreter's, e.g. /usr on Debian); enforced by BPF-LSM as --deny-path is. In a sandbox "
      "the policy's filesystem.exec decides instead. Path rules: a session that may mount or "
      "chroot can rename its files (see README)")(
      "tls", po::value(&tls)->default_value(tls),
      "on: record TLS plaintext from OpenSSL (uprobes on libssl's SSL_read/SSL_write); off: "
      "attach nothing")(
      "tls-chunk", po::value(&tls_chunk)->default_value(tls_chunk),
      "plaintext bytes per TLS entry (at most 16K)")(
      "tls-cap", po::value(&tls_cap)->default_value(tls_cap),
      "plaintext bytes kept per SSL call; the rest is counted in truncated_bytes")(
      "tls-redact", po::value(&tls_redact)->default_value(tls_redact),
      "on: replace the values of credential headers in HTTP/1.x (Authorization, Proxy-Authorization, "
      "Cookie, Set-Cookie, X-Api-Key, Api-Key, X-Auth-Token, X-Access-Token, X-Amz-Security-Token, "
      "X-Goog-Api-Key, Private-Token, X-Csrf-Token) with [REDACTED]")(
      "tls-redact-header", po::value(&tls_redact_more)->value_name("NAME"),
      "redact this header too (repeatable)")(
      "ring-size", po::value(&ring)->default_value(ring),
      "BPF ring buffer size: a power of two from 64K to 1G")(
      "verbose,v", po::bool_switch(&verbose), "print libbpf's messages (verifier log on failure)");
}

void SessionOptions::validate(const po::variables_map&) {
  if (!probe::valid_ring_size(ring_bytes()))
    throw UsageError("--ring-size must be a power of two from 64K to 1G");
  if (on_loss != "backpressure" && on_loss != "freeze" && on_loss != "continue" && on_loss != "kill")
    throw UsageError("--on-loss must be backpressure, continue or kill");
  if (checkpoint_entries == 0) throw UsageError("--checkpoint-entries must be at least 1");
  for (const auto& [paths, option] : {std::pair{&deny_paths, "--deny-path"}, std::pair{&allow_exec, "--allow-exec"}}) {
    if (paths->size() > 64) throw UsageError(std::string("at most 64 ") + option + " rules");
    for (auto& p : *paths) {
      while (p.size() > 1 && p.back() == '/') p.pop_back();
      // Matched byte for byte against the kernel's path, which has no "//", "." or "..".
      bool plain = p.find("//") == std::string::npos && p.find("/./") == std::string::npos &&
                   p.find("/../") == std::string::npos && !p.ends_with("/.") && !p.ends_with("/..");
      if (p.empty() || p[0] != '/' || !plain || p.size() >= FR_PATH_RULE_MAX || !is_valid_utf8(p))
        throw UsageError(std::string(option) + " takes an absolute UTF-8 path without '.', '..' or '//', " +
                         "shorter than " + std::to_string(FR_PATH_RULE_MAX) + " bytes: '" + p + "'");
    }
  }
  // Before anything is created: without BPF-LSM nothing would enforce them.
  if ((!deny_paths.empty() || !allow_exec.empty()) && !probe::bpf_lsm_available())
    throw Error("this kernel refuses BPF-LSM programs, so --deny-path and --allow-exec cannot be enforced; "
                "flightrec will not run unconfined (boot with lsm=...,bpf)");
  if ((tls != "on" && tls != "off") || (tls_redact != "on" && tls_redact != "off"))
    throw UsageError("--tls and --tls-redact take on or off");
  for (auto& name : tls_redact_more) {
    // An HTTP field name (RFC 9110 token), compared in lower case.
    static const std::string token = "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyz";
    for (char& c : name) c = char(std::tolower(static_cast<unsigned char>(c)));
    if (name.empty() || name.size() > 64 || name.find_first_not_of(token) != std::string::npos)
      throw UsageError("--tls-redact-header takes a header name like X-Api-Key, not '" + name + "'");
  }
  size_t chunk = tls_chunk_bytes(), cap = tls_cap_bytes();
  if (chunk < 1 || chunk > 16384) throw UsageError("--tls-chunk must be from 1 to 16K");
  if (cap < chunk || cap / chunk > 16) throw UsageError("--tls-cap must be from --tls-chunk to 16 times it");
}

size_t SessionOptions::ring_bytes() const { return parse_size(ring, "--ring-size"); }

std::unique_ptr<ledger::SigningKey> SessionOptions::load_key() const {
  if (key_dir.empty()) return nullptr;
  return std::make_unique<ledger::SigningKey>(ledger::SigningKey::load_dir(key_dir));
}

void SessionOptions::fill(recorder::SessionMeta& meta) const {
  meta.ring_bytes = ring_bytes();
  meta.on_loss = on_loss;
  meta.checkpoint_entries = checkpoint_entries;
  meta.checkpoint_ms = checkpoint_ms;
  meta.tls = tls_enabled();
  meta.tls_redact = tls_redact == "on";
  for (const auto& name : tls_redact_more)
    if (std::find(meta.tls_redact_headers.begin(), meta.tls_redact_headers.end(), name) == meta.tls_redact_headers.end())
      meta.tls_redact_headers.push_back(name);
  meta.tls_chunk = tls_chunk_bytes();
  meta.tls_cap = tls_cap_bytes();
}

void SessionOptions::fill(probe::CaptureOptions& copts) const {
  copts.ring_bytes = ring_bytes();
  copts.verbose = verbose;
  copts.tls = tls_enabled();
  session::add_path_rules(copts.hidden, deny_paths, "/");
  session::add_path_rules(copts.exec, allow_exec, "/");
  copts.require_lsm = !deny_paths.empty() || !allow_exec.empty();  // nothing else enforces them
  copts.tls_chunk = tls_chunk_bytes();
  copts.tls_cap = tls_cap_bytes();
}

}  // namespace flightrec::cli
