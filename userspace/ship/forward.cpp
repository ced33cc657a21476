#include "ship/forward.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <iostream>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "ledger/canonical.h"
#include "ledger/hash.h"

namespace flightrec::ship {

std::vector<std::string> encode_forwarded(const std::string& origin, int64_t session,
                                          std::span<const ledger::SealedEntry> entries,
                                          std::span<const ledger::SealedCheckpoint> checkpoints,
                                          const std::vector<std::string>& types, size_t max_line) {
  bool all = types.size() == 1 && types[0] == "*";
  std::vector<std::string> lines;
  nlohmann::json e = nlohmann::json::array(), c = nlohmann::json::array();
  size_t bytes = 0, next_checkpoint = 0;
  // A checkpoint goes on the line of the entry that completes it (or the
  // first line after): the daemon hands each line to its outputs as it
  // comes, and a log's reader takes a checkpoint only right after its
  // last entry. All of them on the last line put a checkpoint of size 1001
  // after entry 2174 when a commit of 2174 entries took two lines.
  auto checkpoints_through = [&](int64_t seq) {
    for (; next_checkpoint < checkpoints.size() && int64_t(checkpoints[next_checkpoint].tree_size) <= seq; ++next_checkpoint)
      c.push_back({checkpoints[next_checkpoint].tree_size, checkpoints[next_checkpoint].note});
  };
  auto line = [&] {
    nlohmann::json l = {{"origin", origin}, {"session", session}, {"entries", std::move(e)}, {"checkpoints", std::move(c)}};
    lines.push_back(l.dump(-1, ' ', false, nlohmann::json::error_handler_t::strict) + "\n");
    e = nlohmann::json::array();
    c = nlohmann::json::array();
    bytes = 0;
  };
  for (const auto& x : entries) {
    if (!all && std::find(types.begin(), types.end(), x.type) == types.end()) continue;
    if (!e.empty() && bytes + x.body.size() > max_line) {
      checkpoints_through(x.seq - 1);
      line();
    }
    e.push_back({x.seq, x.type, x.body, ledger::to_hex(x.leaf)});
    bytes += x.body.size() + 100;
  }
  checkpoints_through(INT64_MAX);
  if (!e.empty() || !c.empty()) line();
  return lines;
}

void ForwardedStream::take(std::string_view text) {
  nlohmann::json line = nlohmann::json::parse(text, nullptr, false);
  if (!line.is_object() || line.size() != 4 || !line.contains("origin") || !line["origin"].is_string() ||
      !line.contains("session") || !line["session"].is_number_integer() || !line.contains("entries") ||
      !line["entries"].is_array() || !line.contains("checkpoints") || !line["checkpoints"].is_array())
    throw Error("a line is not {origin, session, entries, checkpoints}");
  std::string origin = line["origin"].get<std::string>();
  int64_t session = line["session"].get<int64_t>();
  if (origin_.empty()) {
    if (log_id(origin).empty()) throw Error("the origin is not a flightrec one");
    origin_ = origin;
    session_ = session;
  } else if (origin != origin_ || session != session_) {
    throw Error("one connection forwards one session");
  }
  std::vector<ledger::SealedEntry> entries;
  std::vector<ledger::SealedCheckpoint> checkpoints;
  std::vector<std::string> types;  // views of entries point into these and into `line`
  const auto& es = line["entries"];
  types.reserve(es.size());
  for (const auto& e : es) {
    if (!e.is_array() || e.size() != 4 || !e[0].is_number_integer() || !e[1].is_string() || !e[2].is_string() ||
        !e[3].is_string())
      throw Error("an entry is not [seq, type, body, leaf]");
    int64_t seq = e[0].get<int64_t>();
    if (seq <= last_seq_) throw Error("entries out of order (seq " + std::to_string(seq) + " after " + std::to_string(last_seq_) + ")");
    const std::string& body = e[2].get_ref<const std::string&>();
    ledger::TopLevel top;
    if (std::string why = ledger::check_canonical(body, &top); !why.empty())
      throw Error("entry " + std::to_string(seq) + " is not canonical: " + why);
    if (top.integer("seq") != seq || top.integer("session") != session || top.string("type") != e[1].get<std::string>())
      throw Error("entry " + std::to_string(seq) + ": its seq, session or type is not the one it is sent as");
    ledger::Hash leaf = ledger::leaf_hash(body);
    if (ledger::to_hex(leaf) != e[3].get<std::string>()) throw Error("entry " + std::to_string(seq) + ": its leaf hash is wrong");
    last_seq_ = seq;
    types.push_back(e[1].get<std::string>());
    entries.push_back({seq, types.back(), body, leaf});
  }
  for (const auto& c : line["checkpoints"]) {
    if (!c.is_array() || c.size() != 2 || !c[0].is_number_unsigned() || !c[1].is_string())
      throw Error("a checkpoint is not [size, note]");
    uint64_t size = c[0].get<uint64_t>();
    // (Its size may pass the last entry forwarded: not every type is.)
    if (size <= last_checkpoint_ || !c[1].get_ref<const std::string&>().starts_with(origin_ + "\n" + std::to_string(size) + "\n"))
      throw Error("checkpoint of size " + std::to_string(size) + " is out of order or not this session's");
    last_checkpoint_ = size;
    checkpoints.push_back({size, c[1].get_ref<const std::string&>()});
  }
  hub_->sealed(origin_, session_, entries, checkpoints);
}

ForwardingSink::~ForwardingSink() {
  if (fd_ >= 0) close(fd_);
}

void ForwardingSink::sealed(const std::string& origin, int64_t session, std::span<const ledger::SealedEntry> entries,
                            std::span<const ledger::SealedCheckpoint> checkpoints) {
  if (fd_ < 0) return;
  std::string lines;
  try {
    for (auto& l : encode_forwarded(origin, session, entries, checkpoints, types_)) lines += l;
  } catch (const std::exception&) {
    return;  // not UTF-8 cannot happen for canonical entries; nothing to send then
  }
  std::string_view rest = lines;
  while (!rest.empty()) {
    ssize_t n = send(fd_, rest.data(), rest.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      std::cerr << "flightrec: flightrecd stopped taking this run's entries for its outputs ("
                << (n < 0 && errno == EAGAIN ? std::string("too slow") : errno_message("send", errno))
                << "); the record itself is complete\n";
      close(fd_);
      fd_ = -1;
      return;
    }
    rest.remove_prefix(size_t(n));
  }
}

}  // namespace flightrec::ship
