#include "grants/name_asks.h"

#include <sys/socket.h>

#include <algorithm>

#include "common/system.h"
#include "policy/network.h"

namespace flightrec::grants {
namespace {

using nlohmann::json;

constexpr size_t kMaxMessage = 2048;

}  // namespace

void NameAsks::send(const std::string& msg) {
  // The resolver keeps its own deadline: an answer it never reads costs it nothing but time.
  if (fd_ >= 0) (void)!::send(fd_, msg.data(), msg.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
}

void NameAsks::receive(GrantTable& table, uint64_t* asks, const Emit& emit) {
  char buf[kMaxMessage];
  for (;;) {
    ssize_t n = recv(fd_, buf, sizeof(buf), MSG_DONTWAIT | MSG_TRUNC);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
    if (n <= 0) {  // the resolver is gone (the session ends): nothing waits for these answers
      fd_ = -1;
      waiting_.clear();
      return;
    }
    auto ask = size_t(n) <= sizeof(buf) ? policy::parse_name_ask(std::string_view(buf, size_t(n))) : std::nullopt;
    if (!ask) continue;  // flightrec's own resolver wrote it: nothing to answer
    uint64_t id = ++*asks;
    uint64_t now = mono_ns();
    emit({{"event", "ask"}, {"ask", id}, {"kind", "name"}, {"name", ask->name}, {"qtype", ask->qtype},
          {"client", ask->client}, {"timeout_ms", timeout_ms_}});
    if (Grant* g = table.for_name(ask->name, now)) {
      answer({*ask, id, 0}, *g, emit);
      continue;
    }
    if (waiting_.size() >= kMaxWaiting) {
      deny(*ask, id, "too many names waiting", emit);
      continue;
    }
    waiting_.push_back({std::move(*ask), id, now + timeout_ms_ * 1'000'000ull});
  }
}

void NameAsks::answer(const Waiting& w, const Grant& g, const Emit& emit) {
  emit({{"event", "use"}, {"id", g.id}, {"ask", w.id}, {"kind", "name"}, {"name", w.ask.name}});
  NameAnswer a;
  a.tag = w.ask.tag;
  a.ask = w.id;
  a.grant = g.id;
  a.name = g.name;
  a.port = g.port;
  a.until_ns = g.expires_ns;
  send(encode(a));
}

void NameAsks::deny(const NameAsk& a, uint64_t id, const std::string& why, const Emit& emit) {
  emit({{"event", "denied"}, {"ask", id}, {"kind", "name"}, {"name", a.name}, {"client", a.client}, {"why", why}});
  NameAnswer no;
  no.tag = a.tag;
  no.ask = id;
  no.denied = why;
  send(encode(no));
}

void NameAsks::granted(const Grant& g, const Emit& emit) {
  if (g.kind != Kind::Name) return;
  policy::HostRule rule{"", g.name, g.port};
  std::erase_if(waiting_, [&](const Waiting& w) {
    if (!policy::host_matches(rule, w.ask.name)) return false;
    answer(w, g, emit);
    return true;
  });
}

void NameAsks::expire(uint64_t now_ns, const Emit& emit) {
  std::erase_if(waiting_, [&](const Waiting& w) {
    if (w.deadline_ns > now_ns) return false;
    deny(w.ask, w.id, "no grant within " + std::to_string(timeout_ms_) + " ms", emit);
    return true;
  });
}

uint64_t NameAsks::next_deadline() const {
  uint64_t next = 0;
  for (const auto& w : waiting_)
    if (!next || w.deadline_ns < next) next = w.deadline_ns;
  return next;
}

void NameAsks::list(json* waiting, size_t max, uint64_t now_ns) const {
  for (const auto& w : waiting_) {
    if (waiting->size() >= max) return;
    waiting->push_back({{"ask", w.id}, {"kind", "name"}, {"name", w.ask.name}, {"client", w.ask.client},
                        {"times_out_in_ms", w.deadline_ns > now_ns ? (w.deadline_ns - now_ns) / 1'000'000 : 0}});
  }
}

}  // namespace flightrec::grants
