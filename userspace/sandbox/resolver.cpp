#include "sandbox/resolver.h"

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "common/error.h"
#include "common/system.h"
#include "events/dns_message.h"
#include "policy/network.h"
#include "sandbox/dns_upstream.h"

extern "C" {
#include "flightrec/abi/events.h"
}

namespace flightrec::sandbox {
namespace dns = events::dns;

namespace {

constexpr int kMaxWorkers = 64;          // upstream exchanges at once; then SERVFAIL
constexpr int kMaxTcpClients = 16;       // then a connection is closed at once
constexpr size_t kMaxCached = 4096;
constexpr size_t kMaxCachedReply = 4096;   // bytes; a bigger answer is asked again
constexpr size_t kMaxAddresses = 32;       // admitted and recorded per answer; the rest counted

// An answer's address as the kernel's maps key it: IPv4-mapped IPv6 as IPv4.
std::optional<fr_egress_endpoint> endpoint_of(const std::string& text) {
  fr_egress_endpoint e{};
  if (inet_pton(AF_INET, text.c_str(), e.addr) == 1) e.family = AF_INET;
  else if (inet_pton(AF_INET6, text.c_str(), e.addr) == 1) e.family = AF_INET6;
  else return std::nullopt;
  if (e.family == AF_INET6 && std::memcmp(e.addr, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12) == 0) {
    std::memmove(e.addr, e.addr + 12, 4);
    std::memset(e.addr + 4, 0, 12);
    e.family = AF_INET;
  }
  return e;
}
constexpr size_t kMaxEventsWaiting = 20'000;
constexpr size_t kMaxUpstreamsTried = 3;
constexpr int kTcpIdleMs = 10'000;

int bind_port53(const std::string& address, int type) {
  int s = socket(AF_INET, type | SOCK_CLOEXEC, 0);
  if (s < 0) return -errno;
  // In a namespace of its own the sandbox's init may not have brought its
  // loopback up yet: the address is bound now and served once it is.
  int on = 1;
  setsockopt(s, IPPROTO_IP, IP_FREEBIND, &on, sizeof(on));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(53);
  inet_pton(AF_INET, address.c_str(), &a.sin_addr);
  if (bind(s, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    int err = errno;
    close(s);
    return -err;
  }
  return s;
}

}  // namespace

struct Resolver::Client {
  bool tcp = false;
  int fd = -1;  // tcp: the connection; udp: the server's socket
  sockaddr_storage from{};
  socklen_t from_len = 0;
  std::mutex write_mu;  // tcp: one reply at a time
  int stop_fd = -1;
  void send_reply(const std::string& reply) {
    if (reply.empty()) return;
    if (!tcp) {
      sendto(fd, reply.data(), reply.size(), MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&from), from_len);
      return;
    }
    std::lock_guard lock(write_mu);
    uint8_t head[2] = {uint8_t(reply.size() >> 8), uint8_t(reply.size())};
    if (write_full(fd, head, 2, stop_fd, 1000)) write_full(fd, reply.data(), reply.size(), stop_fd, 1000);
  }
  std::string peer() const {
    sockaddr_storage a = from;
    socklen_t len = tcp ? socklen_t(sizeof(a)) : from_len;
    if (tcp && getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return "";
    if (a.ss_family != AF_INET) return "";
    const auto* in = reinterpret_cast<const sockaddr_in*>(&a);
    char text[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text));
    return std::string(text) + ":" + std::to_string(ntohs(in->sin_port));
  }
  ~Client() {
    if (tcp && fd >= 0) close(fd);
  }
};

Resolver::Resolver(int netns_fd, const std::string& address, Options opts) : opts_(std::move(opts)) {
  int home = -1;
  if (netns_fd >= 0) {
    home = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    if (home < 0 || setns(netns_fd, CLONE_NEWNET) != 0) {
      int err = errno;
      if (home >= 0) close(home);
      throw Error(errno_message("cannot enter the sandbox's network namespace for its resolver", err));
    }
  }
  int err = 0;
  for (int attempt = 0; attempt < 32 && sock_ < 0; ++attempt) {
    std::string a = address;
    if (a.empty()) {
      uint8_t r[2] = {};
      (void)!getrandom(r, sizeof(r), 0);
      a = "127.53." + std::to_string(r[0]) + "." + std::to_string(r[1] | 1);
    }
    // TCP too, on the same address: a connection there reaches this
    // resolver, never a host resolver bound to every address.
    int s = bind_port53(a, SOCK_DGRAM), t = s >= 0 ? bind_port53(a, SOCK_STREAM) : -1;
    if (t >= 0 && listen(t, 16) != 0) {
      close(t);
      t = -errno;
    }
    if (s >= 0 && t >= 0) {
      sock_ = s;
      tcp_ = t;
      address_ = a;
    } else {
      err = s < 0 ? -s : -t;
      if (s >= 0) close(s);
      if (!address.empty()) break;
    }
  }
  if (home >= 0) {
    // Back, or this thread would go on in the sandbox's namespace.
    if (setns(home, CLONE_NEWNET) != 0) throw Error(errno_message("cannot return from the sandbox's network namespace", errno));
    close(home);
  }
  if (sock_ < 0) throw Error(errno_message("cannot bind the sandbox's resolver on 127.53.x.y port 53", err));
  stop_fd_ = eventfd(0, EFD_CLOEXEC);
  events_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (stop_fd_ < 0 || events_fd_ < 0) {
    int e = errno;
    for (int fd : {sock_, tcp_, stop_fd_, events_fd_})
      if (fd >= 0) close(fd);
    throw Error(errno_message("eventfd", e));
  }
}

void Resolver::start() { thread_ = std::thread([this] { serve(); }); }

void Resolver::stop() {
  stopping_ = true;
  uint64_t one = 1;
  (void)!write(stop_fd_, &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
  decltype(workers_) workers;
  {
    std::lock_guard lock(mu_);
    workers.swap(workers_);
  }
  for (auto& w : workers) w.first.join();
}

Resolver::~Resolver() {
  stop();
  for (int fd : {sock_, tcp_, stop_fd_, events_fd_}) close(fd);
}

void Resolver::grant(uint64_t id, const std::string& name, uint16_t port, uint64_t until_ns) {
  std::lock_guard lock(mu_);
  if (granted_.count(id) || grants_ended_.count(id)) return;
  Granted& g = granted_[id];
  g.rule = policy::HostRule{"grant " + std::to_string(id) + ": " + name + ":" + std::to_string(port), name, port};
  g.until_ns = until_ns;
  // What was answered before the grant says nothing of it: asked again.
  std::erase_if(cache_, [&](const auto& kv) { return policy::host_matches(g.rule, kv.first.first); });
}

void Resolver::ungrant(uint64_t id) {
  std::lock_guard lock(mu_);
  ungrant_locked(id);
}

void Resolver::ungrant_all() {
  std::lock_guard lock(mu_);
  while (!granted_.empty()) ungrant_locked(granted_.begin()->first);
}

void Resolver::ungrant_locked(uint64_t id) {
  grants_ended_.insert(id);
  auto it = granted_.find(id);
  if (it == granted_.end()) return;
  Granted gone = std::move(it->second);
  granted_.erase(it);
  std::erase_if(cache_, [&](const auto& kv) { return policy::host_matches(gone.rule, kv.first.first); });
  // New connects end now where only this grant admitted them (a connection made lives on).
  for (const auto& key : gone.keys) {
    bool kept = policy_keys_.count(key) > 0;
    for (const auto& [other, g] : granted_) kept = kept || g.keys.count(key) > 0;
    if (kept) continue;
    if (key.size() == sizeof(fr_egress_name)) {  // a server name no longer allowed there
      if (opts_.server_names_map_fd >= 0) bpf_map_delete_elem(opts_.server_names_map_fd, key.data());
      if (auto at = server_names_.find(key); at != server_names_.end()) {
        server_name_order_.erase(at->second);
        server_names_.erase(at);
      }
    } else if (opts_.named_map_fd >= 0) {
      uint64_t now = mono_ns();
      bpf_map_update_elem(opts_.named_map_fd, key.data(), &now, BPF_EXIST);  // expired: packets pass, connects do not
    }
  }
}

std::vector<NameEvent> Resolver::take_events() {
  uint64_t count;
  (void)!read(events_fd_, &count, sizeof(count));
  std::lock_guard lock(mu_);
  std::vector<NameEvent> out;
  out.swap(events_);
  return out;
}

void Resolver::post(NameEvent ev) {
  {
    std::lock_guard lock(mu_);
    // A refused question asked again and again (a retry loop, a flood) is
    // one entry with its count while it waits to be recorded.
    if (ev.verdict == "refused" && !events_.empty()) {
      NameEvent& last = events_.back();
      if (last.verdict == "refused" && last.name == ev.name && last.type == ev.type && last.rcode == ev.rcode &&
          last.waited == ev.waited && last.ask == ev.ask &&
          last.error == ev.error && last.client == ev.client && last.transport == ev.transport &&
          ev.mono_ns - last.mono_ns < 1'000'000'000) {
        last.repeats++;
        return;
      }
    }
    if (events_.size() >= kMaxEventsWaiting) {
      // Never silently: the last one waiting says how many more there were.
      if (events_.back().verdict != "unrecorded") {
        NameEvent gap;
        gap.mono_ns = ev.mono_ns;
        gap.verdict = "unrecorded";
        events_.push_back(std::move(gap));
      }
      events_.back().unrecorded++;
      return;
    }
    events_.push_back(std::move(ev));
  }
  uint64_t one = 1;
  (void)!write(events_fd_, &one, sizeof(one));
}

void Resolver::serve() {
  uint8_t query[4096];
  std::vector<std::pair<std::thread, std::shared_ptr<std::atomic<bool>>>> tcp_clients;
  for (;;) {
    int wait_ms = ask_wait_ms();
    pollfd fds[4] = {{sock_, POLLIN, 0}, {stop_fd_, POLLIN, 0}, {tcp_, POLLIN, 0},
                     {asks_open_ ? opts_.asks_fd : -1, POLLIN, 0}};
    if (poll(fds, 4, wait_ms) < 0 && errno != EINTR) break;
    if (fds[1].revents) break;
    if (fds[3].revents) take_answers();
    if (wait_ms >= 0) end_asks(mono_ns(), false);
    // Threads that are done are joined as the loop goes.
    std::erase_if(tcp_clients, [](auto& c) {
      if (!c.second->load()) return false;
      c.first.join();
      return true;
    });
    {
      std::lock_guard lock(mu_);
      std::erase_if(workers_, [](auto& w) {
        if (!w.second->load()) return false;
        w.first.join();
        return true;
      });
    }
    if (fds[2].revents & POLLIN) {
      int c = accept4(tcp_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      // Out of descriptors: the connection waits in the backlog; poll would say so again at once.
      if (c < 0 && (errno == EMFILE || errno == ENFILE)) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      if (c >= 0 && tcp_clients.size() >= size_t(kMaxTcpClients)) {
        close(c);
        NameEvent ev;
        ev.mono_ns = mono_ns();
        ev.transport = "tcp";
        ev.verdict = "refused";
        ev.error = "a TCP connection closed unread: " + std::to_string(kMaxTcpClients) + " were open";
        post(std::move(ev));
      } else if (c >= 0) {
        auto client = std::make_shared<Client>();
        client->tcp = true;
        client->fd = c;
        client->stop_fd = stop_fd_;
        auto done = std::make_shared<std::atomic<bool>>(false);
        tcp_clients.emplace_back(std::thread([this, client, done] {
          // Length-prefixed queries, answered in turn, until the client
          // closes or is idle.
          std::vector<uint8_t> msg(65535);
          uint8_t head[2];
          while (read_full(client->fd, head, 2, stop_fd_, kTcpIdleMs)) {
            size_t n = size_t(head[0]) << 8 | head[1];
            if (n == 0 || !read_full(client->fd, msg.data(), n, stop_fd_, kTcpIdleMs)) break;
            guarded_query(msg.data(), n, client);
          }
          done->store(true);
        }), done);
      }
    }
    if (!(fds[0].revents & POLLIN)) continue;
    auto client = std::make_shared<Client>();
    client->fd = sock_;
    client->from_len = sizeof(client->from);
    ssize_t n = recvfrom(sock_, query, sizeof(query), MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&client->from),
                         &client->from_len);
    if (n > 0) guarded_query(query, size_t(n), client);
  }
  end_asks(0, true);  // what waits for a grant is refused: the session ends
  for (auto& c : tcp_clients) c.first.join();
}

// A query whose handling failed (no memory, no thread) is answered
// SERVFAIL and recorded as such: the resolver, and the recording, go on.
void Resolver::guarded_query(const uint8_t* msg, size_t size, const std::shared_ptr<Client>& client,
                             const Resumed* resumed) {
  try {
    on_query(msg, size, client, resumed);
  } catch (const std::exception& e) {
    try {
      client->send_reply(dns::refusal(msg, size, dns::kServFail));
      NameEvent ev;
      ev.mono_ns = mono_ns();
      ev.transport = client->tcp ? "tcp" : "udp";
      ev.verdict = "refused";
      ev.rcode = dns::rcode_name(dns::kServFail);
      ev.error = std::string("flightrec could not handle the query: ") + e.what();
      post(std::move(ev));
    } catch (...) {  // nothing left to tell it with; the next query tries again
    }
  }
}

void Resolver::on_query(const uint8_t* msg, size_t size, const std::shared_ptr<Client>& client,
                        const Resumed* resumed) {
  const uint64_t now = mono_ns(), asked = resumed ? resumed->asked_ns : now;
  auto q = dns::parse_query(msg, size);
  NameEvent ev;
  ev.mono_ns = asked;
  ev.waited = resumed != nullptr;
  ev.ask = resumed ? resumed->ask : 0;
  ev.transport = client->tcp ? "tcp" : "udp";
  ev.client = client->peer();
  if (!q) {
    // Not a query we can read: FORMERR (nothing for what is no query at all).
    std::string reply = dns::refusal(msg, size, dns::kFormErr);
    if (reply.empty()) return;
    client->send_reply(reply);
    ev.verdict = "refused";
    ev.rcode = dns::rcode_name(dns::kFormErr);
    ev.error = "not a query flightrec can read (" + std::to_string(size) + " bytes)";
    post(std::move(ev));
    return;
  }
  ev.name = q->name;
  ev.type = dns::type_name(q->type);
  std::vector<Rule> rules;
  for (const auto& rule : opts_.allow)
    if (policy::host_matches(rule, q->name)) rules.emplace_back(0, rule);
  {
    std::lock_guard lock(mu_);
    std::vector<uint64_t> ended;
    for (const auto& [id, g] : granted_) {
      if (g.until_ns && now >= g.until_ns) ended.push_back(id);
      else if (policy::host_matches(g.rule, q->name)) rules.emplace_back(id, g.rule);
    }
    for (uint64_t id : ended) ungrant_locked(id);  // its time is up (the supervisor says so too)
  }
  bool internet = q->klass == 1;
  if ((rules.empty() && !opts_.answer_all) || !internet) {
    if (internet && !resumed && park(msg, size, client, ev)) return;  // ask.connect: it waits for a grant
    uint8_t rcode = opts_.service.refuse_nxdomain ? dns::kNxDomain : dns::kRefused;
    client->send_reply(dns::refusal(msg, size, rcode));
    ev.verdict = "refused";
    ev.rcode = dns::rcode_name(rcode);
    ev.took_us = (mono_ns() - asked) / 1000;
    post(std::move(ev));
    return;
  }
  if (!rules.empty()) ev.rule = rules.front().second.text;
  ev.verdict = rules.empty() ? "answered" : "allowed";
  // From the cache: the asker's id and question, TTLs lowered to what is left.
  {
    std::unique_lock lock(mu_);
    auto it = cache_.find({q->name, q->type});
    if (it != cache_.end() && it->second.expires_ns > now) {
      std::string reply = it->second.reply;
      NameEvent cached = it->second.event;
      uint32_t left = uint32_t((it->second.expires_ns - now) / 1'000'000'000);
      bool same_span = it->second.question_end == q->end;
      if (cached.verdict == "allowed") touch_server_names_locked(cached);
      lock.unlock();
      std::memcpy(reply.data(), msg, 2);
      if (same_span) std::memcpy(reply.data() + 12, msg + 12, q->end - 12);  // the asker's spelling of the name
      dns::cap_ttls(reply, left);
      client->send_reply(reply);
      cached.mono_ns = asked;
      cached.transport = ev.transport;
      cached.client = ev.client;
      cached.cached = true;
      cached.waited = ev.waited;
      cached.ask = ev.ask;
      cached.took_us = (mono_ns() - asked) / 1000;
      post(std::move(cached));
      return;
    }
  }
  std::string query(reinterpret_cast<const char*>(msg), size);
  ev.qtype = q->type;
  if (client->tcp) {
    ask_upstream(std::move(query), client, std::move(ev), std::move(rules));  // this connection's thread, or a resumed query's
    return;
  }
  if (busy_.load() >= kMaxWorkers) {  // only this thread adds to it
    client->send_reply(dns::refusal(msg, size, dns::kServFail));
    ev.rcode = dns::rcode_name(dns::kServFail);
    ev.error = std::to_string(kMaxWorkers) + " lookups were already waiting for an answer";
    post(std::move(ev));
    return;
  }
  auto done = std::make_shared<std::atomic<bool>>(false);
  busy_++;
  std::thread worker;
  try {
    worker = std::thread([this, query = std::move(query), client, ev = std::move(ev), rules = std::move(rules), done]() mutable {
      std::string name = ev.name;
      try {
        ask_upstream(std::move(query), client, std::move(ev), std::move(rules));
      } catch (...) {  // no memory: the asker's own retry asks again; the record says so
        try {
          NameEvent failed;
          failed.mono_ns = mono_ns();
          failed.name = name;
          failed.verdict = "refused";
          failed.error = "flightrec could not handle the query (no memory)";
          post(std::move(failed));
        } catch (...) {  // nothing left to tell it with
        }
      }
      busy_--;
      done->store(true);
    });
  } catch (...) {
    busy_--;
    throw;
  }
  std::lock_guard lock(mu_);
  workers_.emplace_back(std::move(worker), std::move(done));
}

void Resolver::ask_upstream(std::string query, std::shared_ptr<Client> client, NameEvent ev,
                            std::vector<Rule> rules) {
  // Upstream, a query of its own: a random id (what comes back is matched
  // to this exchange) and the question alone, no flag or record of the asker's.
  std::string asked = query;
  std::string client_id = query.substr(0, 2);
  auto q = dns::parse_query(reinterpret_cast<const uint8_t*>(asked.data()), asked.size());
  uint16_t id = 0;
  (void)!getrandom(&id, sizeof(id), 0);
  std::optional<std::string> rebuilt = q ? dns::build_query(id, q->name, q->type) : std::nullopt;
  std::optional<std::string> reply;
  std::string error;
  if (!rebuilt) {
    ev.rcode = dns::rcode_name(dns::kFormErr);
    ev.error = "a name that cannot be asked";
    finish(client, dns::refusal(reinterpret_cast<const uint8_t*>(asked.data()), asked.size(), dns::kFormErr), std::move(ev));
    return;
  }
  query = std::move(*rebuilt);
  size_t tried = 0;
  for (const auto& server : opts_.upstream) {
    if (tried++ >= kMaxUpstreamsTried || stopping_) break;
    reply = exchange(server, query, client->tcp, stop_fd_, &error);
    auto parsed = reply ? dns::parse_response(reinterpret_cast<const uint8_t*>(reply->data()), reply->size()) : std::nullopt;
    // Truncated over UDP: the same upstream over TCP, so the whole answer is judged.
    if (parsed && parsed->truncated && !client->tcp) {
      reply = exchange(server, query, true, stop_fd_, &error);
      parsed = reply ? dns::parse_response(reinterpret_cast<const uint8_t*>(reply->data()), reply->size()) : std::nullopt;
    }
    if (parsed && parsed->question.name == ev.name && parsed->question.type == ev.qtype &&
        parsed->rcode != dns::kServFail) {
      {
        // A grant revoked while upstream answered admits nothing.
        std::lock_guard lock(mu_);
        std::erase_if(rules, [&](const Rule& r) { return r.first && !granted_.count(r.first); });
      }
      bool revoked = !ev.rule.empty() && rules.empty();
      auto res = dns::resolve(*parsed, ev.name);
      if (res.addresses.size() > kMaxAddresses) {
        ev.addresses_left_out = res.addresses.size() - kMaxAddresses;
        res.addresses.resize(kMaxAddresses);
      }
      ev.rcode = dns::rcode_name(parsed->rcode);
      ev.addresses = res.addresses;
      ev.cnames = res.cnames;
      ev.ttl = res.ttl;
      if (!rules.empty()) admit(ev, rules);
      uint32_t cache_s = std::min(res.addresses.empty() ? std::min(res.ttl, 30u) : res.ttl, opts_.service.ttl_max_s);
      if (ev.admitted_s) cache_s = std::min(cache_s, ev.admitted_s);
      dns::cap_ttls(*reply, ev.admitted_s ? ev.admitted_s : opts_.service.ttl_max_s);
      if (cache_s > 0 && reply->size() <= kMaxCachedReply && !revoked) {
        std::lock_guard lock(mu_);
        if (cache_.size() >= kMaxCached) {
          uint64_t now = mono_ns();
          std::erase_if(cache_, [&](const auto& kv) { return kv.second.expires_ns <= now; });
          if (cache_.size() >= kMaxCached) cache_.erase(cache_.begin());
        }
        cache_[{ev.name, ev.qtype}] = {*reply, parsed->question.end, ev.mono_ns + uint64_t(cache_s) * 1'000'000'000, ev};
      }
      std::memcpy(reply->data(), client_id.data(), 2);
      if (q && parsed->question.end == q->end)  // the asker's id, flags' RD and spelling of the name
        std::memcpy(reply->data() + 12, asked.data() + 12, q->end - 12);
      finish(client, *reply, std::move(ev));
      return;
    }
    if (reply && !parsed) error = server + ": an answer that does not parse";
    else if (parsed && parsed->rcode == dns::kServFail) error = server + ": SERVFAIL";
    else if (parsed) error = server + ": an answer to another question";
    reply.reset();
  }
  if (opts_.upstream.empty()) error = "no upstream resolver (network.dns_upstream, or nameserver in /etc/resolv.conf)";
  ev.rcode = dns::rcode_name(dns::kServFail);
  ev.error = error;
  finish(client, dns::refusal(reinterpret_cast<const uint8_t*>(asked.data()), asked.size(), dns::kServFail), std::move(ev));
}

void Resolver::admit(NameEvent& ev, const std::vector<Rule>& rules) {
  if (ev.addresses.empty()) return;
  std::vector<uint16_t> ports;
  for (const auto& r : rules) ports.push_back(r.second.port);
  if (std::find(ports.begin(), ports.end(), 0) != ports.end()) ports = {0};
  std::sort(ports.begin(), ports.end());
  ports.erase(std::unique(ports.begin(), ports.end()), ports.end());
  ev.admitted_s = std::clamp(ev.ttl, opts_.service.ttl_min_s, opts_.service.ttl_max_s);
  if (!opts_.service.admit_private) {
    bool any_public = false;
    for (const auto& a : ev.addresses) {
      uint8_t b[16] = {};
      int family = inet_pton(AF_INET, a.c_str(), b) == 1 ? AF_INET : inet_pton(AF_INET6, a.c_str(), b) == 1 ? AF_INET6 : 0;
      any_public = any_public || (family && !policy::private_address(family, b));
    }
    if (!any_public) ev.admitted_s = 0;
  }
  ev.ports = ports;
  uint64_t until = mono_ns() + uint64_t(ev.admitted_s) * 1'000'000'000;
  for (const auto& a : ev.addresses) {
    auto parsed = endpoint_of(a);
    if (!parsed) continue;
    fr_egress_endpoint key = *parsed;
    if (!opts_.service.admit_private && policy::private_address(int(key.family), key.addr)) {
      ev.not_admitted.push_back(a);  // rebinding: passed on, but no connect goes there
      continue;
    }
    if (opts_.server_names_map_fd >= 0 && ev.admitted_s && ev.name.size() <= 253)
      for (uint16_t port : ports) admit_server_name(ev, key, port, rules);
    if (opts_.names) {  // as decoding looks it up: IPv4 as IPv4
      char text[INET6_ADDRSTRLEN] = {};
      inet_ntop(int(key.family), key.addr, text, sizeof(text));
      opts_.names->note(text, ev.name);
    }
    for (uint16_t port : ports) {
      key.port = port;
      // An answer never shortens what another gave the same address.
      uint64_t had = 0, keep = until;
      if (opts_.named_map_fd >= 0 && bpf_map_lookup_elem(opts_.named_map_fd, &key, &had) == 0) keep = std::max(had, until);
      if (opts_.named_map_fd >= 0 && bpf_map_update_elem(opts_.named_map_fd, &key, &keep, BPF_ANY) != 0 && ev.error.empty())
        ev.error = errno_message("cannot admit " + a + " in the kernel's map", errno);
      // Which rules admitted it: a grant's keys go when it does, unless the policy's or another grant's hold them.
      std::string k(reinterpret_cast<const char*>(&key), sizeof(key));
      std::lock_guard lock(mu_);
      if (!own_key_locked(k, rules) && opts_.named_map_fd >= 0) {
        uint64_t now = mono_ns();  // its grant ended while upstream answered: expired, as ungrant_locked does
        bpf_map_update_elem(opts_.named_map_fd, &key, &now, BPF_EXIST);
      }
    }
  }
}

std::string Resolver::put_server_name_locked(const std::string& name, const fr_egress_endpoint& to, uint16_t port) {
  // The name asked (as a TLS server_name or HTTP Host names it) with the address and the rule's port.
  fr_egress_name pair{};
  std::memcpy(pair.name, name.data(), std::min(name.size(), sizeof(pair.name) - 1));
  std::memcpy(pair.addr, to.addr, sizeof(pair.addr));
  pair.family = to.family;
  pair.port = port;
  uint8_t one = 1;
  if (bpf_map_update_elem(opts_.server_names_map_fd, &pair, &one, BPF_ANY) != 0) return {};
  std::string k(reinterpret_cast<const char*>(&pair), sizeof(pair));
  keep_server_name_locked(k);
  return k;
}

void Resolver::admit_server_name(NameEvent& ev, const fr_egress_endpoint& to, uint16_t port, const std::vector<Rule>& rules) {
  std::lock_guard lock(mu_);
  std::string k = put_server_name_locked(ev.name, to, port);
  if (k.empty()) {
    if (ev.error.empty()) ev.error = errno_message("cannot admit the server name " + ev.name + " in the kernel's map", errno);
    return;
  }
  if (!own_key_locked(k, rules)) {  // its grant ended while upstream answered
    bpf_map_delete_elem(opts_.server_names_map_fd, k.data());
    if (auto at = server_names_.find(k); at != server_names_.end()) {
      server_name_order_.erase(at->second);
      server_names_.erase(at);
    }
  }
}

bool Resolver::own_key_locked(const std::string& key, const std::vector<Rule>& rules) {
  bool held = false;
  for (const auto& r : rules) {
    if (!r.first) {
      if (policy_keys_.size() < 4 * FR_EGRESS_NAMED_MAX) policy_keys_.insert(key);
      held = true;
    } else if (auto g = granted_.find(r.first); g != granted_.end()) {
      if (g->second.keys.size() < FR_EGRESS_NAMED_MAX) g->second.keys.insert(key);
      held = true;
    }
  }
  if (held || policy_keys_.count(key)) return true;
  for (const auto& [id, g] : granted_)
    if (g.keys.count(key)) return true;
  return false;
}

void Resolver::keep_server_name_locked(const std::string& key) {
  // Least recently answered out first, when the map is full.
  if (auto at = server_names_.find(key); at != server_names_.end()) {
    server_name_order_.splice(server_name_order_.end(), server_name_order_, at->second);
    return;
  }
  server_names_[key] = server_name_order_.insert(server_name_order_.end(), key);
  if (server_name_order_.size() > FR_EGRESS_NAMES_MAX - 1) {
    const std::string& oldest = server_name_order_.front();
    bpf_map_delete_elem(opts_.server_names_map_fd, oldest.data());
    server_names_.erase(oldest);
    server_name_order_.pop_front();
  }
}

void Resolver::touch_server_names_locked(const NameEvent& ev) {
  // A cached answer: its pairs were answered again (kept from eviction; back if they went).
  if (opts_.server_names_map_fd < 0 || !ev.admitted_s || ev.name.size() > 253) return;
  for (const auto& a : ev.addresses) {
    if (std::find(ev.not_admitted.begin(), ev.not_admitted.end(), a) != ev.not_admitted.end()) continue;
    if (auto to = endpoint_of(a))
      for (uint16_t port : ev.ports) put_server_name_locked(ev.name, *to, port);
  }
}

void Resolver::finish(const std::shared_ptr<Client>& client, const std::string& reply, NameEvent ev) {
  client->send_reply(reply);
  ev.took_us = (mono_ns() - ev.mono_ns) / 1000;
  post(std::move(ev));
}

}  // namespace flightrec::sandbox
