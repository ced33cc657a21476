#pragma once
// A live stream for SIEMs and dashboards: a WebSocket endpoint (RFC 6455,
// Boost.Beast) on the daemon that streams every session's sealed entries
// and checkpoints as JSON text frames, as they are committed.
//
//   GET /stream?types=exec,violation&level=alert&origin=O&resume=O:SEQ&from=buffer
//
// - auth: over TCP, "Authorization: Bearer TOKEN" (the token file's); on
//   the UNIX socket, a root peer (SO_PEERCRED). Anything else is refused
//   with 401 before the upgrade.
// - filter: `types` (entry types; checkpoints always go), `level` (a
//   violation's, from: info | alert | critical), `origin` (one log only).
// - resume: `resume=ORIGIN:SEQ` (repeatable) sends that log's messages
//   after SEQ from a replay buffer of the last `buffer` bytes, then live;
//   `from=buffer` sends the whole buffer first; otherwise live from now.
//   A resume point the buffer no longer holds is answered with an error
//   frame naming the oldest seq it has, and the connection is closed (the
//   record holds the rest).
// - a client that reads slower than entries come (its queue passes
//   client_queue bytes) is sent {"error":"too slow","resume":{ORIGIN:SEQ,...}}
//   (the last message it was sent of each log) and closed, never waited for.
//
// Frames: {"kind":"entry","origin","session","seq","type","leaf","entry":E}
// (E, the canonical form, as a string: its leaf is SHA-256(0x00 || E)) and
// {"kind":"checkpoint","origin","session","tree_size","note"}.
#include <cstdint>
#include <memory>
#include <string>

#include "ship/hub.h"

namespace flightrec::ship {

struct WebSocketSettings {
  std::string name;
  std::string listen;      // "HOST:PORT" (TCP, token required), or ""
  std::string token;       // the bearer token (read from token_file)
  std::string token_file;
  std::string unix_path;   // a UNIX socket (root peers), or ""
  uint64_t buffer_bytes = 64ull << 20;
  uint64_t client_queue_bytes = 8ull << 20;
  size_t max_clients = 64;
  EntryFilter filter = all_entries();  // what any client may get; each narrows it with its query
  bool operator==(const WebSocketSettings&) const = default;
  static EntryFilter all_entries() {
    EntryFilter f;
    f.all_types = true;
    f.types = {"all"};
    return f;
  }
};

class WebSocketOutput : public Output {
 public:
  explicit WebSocketOutput(WebSocketSettings settings);  // binds; throws Error
  ~WebSocketOutput() override;

  void offer(const std::string& origin, int64_t session, std::span<const ledger::SealedEntry> entries,
             std::span<const ledger::SealedCheckpoint> checkpoints) override;
  const EntryFilter& filter() const override { return settings_.filter; }
  OutputStats stats() const override;
  void close(std::chrono::milliseconds grace) override;

  struct Impl;

 private:
  WebSocketSettings settings_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace flightrec::ship
