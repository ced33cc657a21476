#include "cli/session_options.h"

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
      "chroot can rename its files (see docs/POLICIES.md, Path rules in the kernel)")(
      "tls", po::value(&tls)->default_value(tls),
      "on: record TLS plaintext from OpenSSL, GnuTLS, NSS, Go's crypto/tls and BoringSSL linked "
      "in (uprobes on SSL_read/SSL_write, gnutls_record_recv/send, PR_Read/PR_Write and "
      "(*tls.Conn).Read/Write, in the system's libraries, in any a recorded process opens, and in "
      "programs that carry one: node, Go programs, Bun's (Claude Code); `flightrec probe --tls "
      "FILE` says what a program holds); off: attach nothing")(
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
      "redact", po::value(&redact)->default_value(redact),
      "on: credentials in command lines (every exec's argv, the recorded command) are replaced with "
      "[REDACTED] before they are sealed: bearer tokens, sk-/ghp_/AKIA/xox?-/glpat- tokens and the "
      "like, --password=/--token= values, URL passwords, private-key blocks, and the policy's own "
      "redact: prefixes; each entry says what kinds it redacted; off: keep them")(
      "agent-turns", po::value(&agent_turns)->default_value(agent_turns),
      "on (with --tls on): from the TLS plaintext of calls to model APIs (Anthropic Messages, OpenAI "
      "Chat Completions and Responses, Gemini; HTTP/1.x and HTTP/2), write llm_call entries, tool_call entries "
      "linking each tool call to the acts it caused, and acts_unexplained at the end; off: the tls "
      "entries alone")(
      "entry-times", po::value(&entry_times)->default_value(entry_times),
      "on (run's default): trace every syscall's entry too: its start time (ts_enter_mono_ns), "
      "calls seccomp stopped marked by the kernel, exit and exit_group as entries, addresses that "
      "accept/getsockname/recvfrom return; off (watch's default): read each call at its return "
      "alone, where its number and arguments still are, which costs every process on the host "
      "about a third less per syscall (see docs/FORMAT.md for what it leaves out; refused for a "
      "sandbox with a seccomp filter, whose stops it could not tell from failures)")(
      "ring-size", po::value(&ring)->default_value(ring),
      "BPF ring buffer size: a power of two from 64K to 1G")(
      "verbose,v", po::bool_switch(&verbose),
      "print libbpf's messages: the verifier's log on a failure, and each program's verification time and states (what start-up is made of)");
}

session::Settings SessionOptions::settings() const {
  session::Settings s;
  s.ring_bytes = parse_size(ring, "--ring-size");
  s.on_loss = on_loss;
  s.checkpoint_entries = checkpoint_entries;
  s.checkpoint_ms = checkpoint_ms;
  s.deny_paths = deny_paths;
  s.allow_exec = allow_exec;
  if ((tls != "on" && tls != "off") || (tls_redact != "on" && tls_redact != "off") ||
      (entry_times != "on" && entry_times != "off") || (redact != "on" && redact != "off") ||
      (agent_turns != "on" && agent_turns != "off"))
    throw UsageError("--tls, --tls-redact, --redact, --agent-turns and --entry-times take on or off");
  s.agent_turns = agent_turns == "on";
  s.redact = redact == "on";
  s.entry_times = entry_times == "on";
  s.tls = tls == "on";
  s.tls_redact = tls_redact == "on";
  s.tls_chunk = parse_size(tls_chunk, "--tls-chunk");
  s.tls_cap = parse_size(tls_cap, "--tls-cap");
  s.tls_redact_headers = tls_redact_more;
  s.verbose = verbose;
  return s;
}

}  // namespace flightrec::cli
