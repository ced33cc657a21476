#include "ship/websocket.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <utility>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <deque>
#include <iostream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <openssl/crypto.h>
#include <optional>
#include <set>
#include <thread>

#include "common/error.h"
#include "ledger/canonical.h"
#include "ledger/hash.h"
#include "ship/connection.h"

namespace flightrec::ship {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;

namespace {

// One message of the stream, as every client that wants it is sent it.
struct Item {
  std::string origin;
  int64_t seq = 0;  // entry seq, or checkpoint tree size
  bool checkpoint = false;
  std::string type;
  int level = -1;  // a violation's
  std::shared_ptr<const std::string> frame;
};

// What one client asked for.
struct Wants {
  std::set<std::string> types;  // empty: every type
  int min_level = EntryFilter::Info;
  std::string origin;           // empty: every log
  std::map<std::string, int64_t> resume;  // origin -> the last seq it has
  bool from_buffer = false;
  bool matches(const Item& i) const {
    if (!origin.empty() && i.origin != origin) return false;
    if (i.checkpoint) return true;
    if (!types.empty() && !types.count(i.type)) return false;
    return i.type != "violation" || i.level >= min_level;
  }
};

std::string url_decode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out += char(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16));
      i += 2;
    } else {
      out += s[i] == '+' ? ' ' : s[i];
    }
  }
  return out;
}

// "/stream?..." -> what the client wants, or why the request is refused.
std::optional<Wants> parse_target(std::string_view target, std::string& why) {
  size_t q = target.find('?');
  if (target.substr(0, q) != "/stream") {
    why = "the stream is at /stream";
    return std::nullopt;
  }
  Wants w;
  std::string_view rest = q == std::string_view::npos ? "" : target.substr(q + 1);
  while (!rest.empty()) {
    size_t amp = rest.find('&');
    std::string_view pair = rest.substr(0, amp);
    rest = amp == std::string_view::npos ? "" : rest.substr(amp + 1);
    size_t eq = pair.find('=');
    std::string key(pair.substr(0, eq)), value = eq == std::string_view::npos ? "" : url_decode(pair.substr(eq + 1));
    if (key == "types") {
      for (size_t at = 0; at <= value.size();) {
        size_t comma = value.find(',', at);
        std::string t = value.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
        if (!t.empty()) w.types.insert(t);
        if (comma == std::string::npos) break;
        at = comma + 1;
      }
    } else if (key == "level") {
      w.min_level = level_of(value);
      if (w.min_level < 0) {
        why = "level is info, alert or critical";
        return std::nullopt;
      }
    } else if (key == "origin") {
      w.origin = value;
    } else if (key == "resume") {
      size_t colon = value.rfind(':');
      int64_t seq = -1;
      try {
        if (colon != std::string::npos) seq = std::stoll(value.substr(colon + 1));
      } catch (const std::exception&) {  // not a number (or too large): seq stays -1, refused just below
      }
      if (colon == std::string::npos || seq < 0) {
        why = "resume is ORIGIN:SEQ";
        return std::nullopt;
      }
      w.resume[value.substr(0, colon)] = seq;
    } else if (key == "from") {
      if (value != "buffer" && value != "now") {
        why = "from is buffer or now";
        return std::nullopt;
      }
      w.from_buffer = value == "buffer";
    } else {
      why = "unknown parameter " + key + " (known: types, level, origin, resume, from)";
      return std::nullopt;
    }
  }
  return w;
}

}  // namespace

struct ClientBase {
  virtual ~ClientBase() = default;
  virtual void deliver(const std::shared_ptr<const std::vector<Item>>& items) = 0;
  virtual void shut() = 0;
  // A connection that has not sent its request yet: closed, to make room.
  virtual bool abandon() = 0;  // false when it is past that (or gone)
  virtual bool waiting() const = 0;
};

struct WebSocketOutput::Impl {
  WebSocketSettings s;
  net::io_context io;
  std::optional<net::ip::tcp::acceptor> tcp;
  std::optional<net::local::stream_protocol::acceptor> local;
  std::thread thread;
  std::set<std::shared_ptr<ClientBase>> clients;  // the io thread's
  size_t pending = 0;                             // connections not upgraded yet (the io thread's)
  std::deque<std::weak_ptr<ClientBase>> waiting;  // those, oldest first (some may be past it)
  beast::error_code accept_error;                 // the last one said on stderr (the io thread's)

  std::mutex mu;  // the replay buffer and the stats
  std::deque<Item> buffer;
  uint64_t buffer_bytes = 0;
  std::map<std::string, int64_t> evicted_through;  // origin -> highest entry seq no longer buffered
  OutputStats stats;
  std::atomic<uint64_t> sent{0}, queued{0}, clients_now{0};

  template <class Acceptor>
  void accept(Acceptor& a);
  // Under mu: the items a new client is sent first; "" or why its resume cannot be met.
  std::string replay(const Wants& w, std::vector<Item>& out);
};

namespace {

template <class Socket>
class Client : public ClientBase, public std::enable_shared_from_this<Client<Socket>> {
 public:
  Client(WebSocketOutput::Impl& impl, Socket socket, bool tcp)
      : impl_(impl), socket_(std::move(socket)), tcp_(tcp), deadline_(impl.io) {}

  // The request must come within 10 s: a connection that sends nothing
  // holds a client's place (max_clients) only that long.
  void start() {
    ++impl_.pending;
    waiting_ = true;
    impl_.waiting.push_back(this->weak_from_this());
    auto self = this->shared_from_this();
    deadline_.expires_after(std::chrono::seconds(10));
    deadline_.async_wait([self](beast::error_code ec) {
      if (ec) return;  // cancelled: the request came
      beast::error_code ignored;
      self->socket_.close(ignored);
    });
    http::async_read(socket_, buf_, req_, [self](beast::error_code ec, size_t) {
      self->deadline_.cancel();
      --self->impl_.pending;
      self->waiting_ = false;
      if (ec) return self->gone();
      self->on_request();
    });
  }
  void deliver(const std::shared_ptr<const std::vector<Item>>& items) override {
    if (!ws_ || closing_ || !ready_) return;
    for (const auto& i : *items) {
      if (!wants_.matches(i)) continue;
      if (backlog_.empty()) {
        send(i);
        continue;
      }
      // Behind a replay still going out: in order, after it; too far behind is too slow.
      backlog_.push_back({i, true});
      live_backlog_bytes_ += i.frame->size();
      if (live_backlog_bytes_ > impl_.s.client_queue_bytes) return too_slow();
    }
  }
  bool waiting() const override { return waiting_; }
  bool abandon() override {
    if (!waiting_) return false;
    waiting_ = false;
    beast::error_code ignored;
    socket_.close(ignored);  // its read ends with an error, and it is gone
    return true;
  }
  void shut() override {
    closing_ = true;
    if (ws_) {
      beast::error_code ec;
      beast::get_lowest_layer(*ws_).close(ec);
    }
  }

 private:
  void refuse(http::status status, const std::string& why) {
    auto res = std::make_shared<http::response<http::string_body>>(status, req_.version());
    res->set(http::field::content_type, "text/plain");
    if (status == http::status::unauthorized) res->set(http::field::www_authenticate, "Bearer");
    res->body() = why + "\n";
    res->keep_alive(false);
    res->prepare_payload();
    auto self = this->shared_from_this();
    http::async_write(socket_, *res, [self, res](beast::error_code, size_t) {
      beast::error_code ec;
      self->socket_.shutdown(Socket::shutdown_both, ec);
      self->gone();
    });
  }
  bool authorized() {
    if (!tcp_) {
      ucred peer{};
      socklen_t len = sizeof(peer);
      return getsockopt(socket_.native_handle(), SOL_SOCKET, SO_PEERCRED, &peer, &len) == 0 && peer.uid == 0;
    }
    std::string want = "Bearer " + impl_.s.token;
    auto it = req_.find(http::field::authorization);
    if (it == req_.end() || impl_.s.token.empty()) return false;
    std::string got(it->value());
    return got.size() == want.size() && CRYPTO_memcmp(got.data(), want.data(), want.size()) == 0;
  }
  void on_request() {
    if (!websocket::is_upgrade(req_)) return refuse(http::status::bad_request, "a WebSocket upgrade is expected");
    if (!authorized())
      return refuse(http::status::unauthorized, tcp_ ? "a bearer token is required" : "only root may read the stream");
    std::string why;
    auto w = parse_target(std::string_view(req_.target().data(), req_.target().size()), why);
    if (!w) return refuse(http::status::bad_request, why);
    wants_ = *w;
    ws_.emplace(std::move(socket_));
    ws_->set_option(websocket::stream_base::timeout::suggested(beast::role_type::server));
    auto self = this->shared_from_this();
    ws_->async_accept(req_, [self](beast::error_code ec) {
      if (ec) return self->gone();
      self->on_accept();
    });
  }
  void on_accept() {
    ws_->text(true);
    impl_.clients.insert(this->shared_from_this());
    impl_.clients_now = impl_.clients.size();
    {
      std::lock_guard lock(impl_.mu);
      ++impl_.stats.connects;
    }
    std::vector<Item> first;
    std::string why;
    {
      std::lock_guard lock(impl_.mu);
      why = impl_.replay(wants_, first);
    }
    ready_ = true;
    if (!why.empty()) {
      finish(nlohmann::json{{"error", why}}.dump());
    } else {
      // The replay goes out as the client reads it: it never counts as falling behind.
      for (auto& i : first)
        if (wants_.matches(i)) backlog_.push_back({std::move(i), false});
      if (!writing_) write_next();
    }
    read_loop();
  }
  // The client sends nothing we need, but its close and pings must be read.
  void read_loop() {
    auto self = this->shared_from_this();
    ws_->async_read(in_, [self](beast::error_code ec, size_t) {
      if (ec) return self->gone();
      self->in_.consume(self->in_.size());
      self->read_loop();
    });
  }
  void send(const Item& i) {
    if (closing_ || !wants_.matches(i)) return;
    int64_t& last = i.checkpoint ? last_checkpoint_[i.origin] : last_entry_[i.origin];
    if (i.seq <= last) return;  // sent already (by the replay)
    if (queued_bytes_ + i.frame->size() > impl_.s.client_queue_bytes) return too_slow();
    last = i.seq;
    push(i.frame);
  }
  // Told where it got to (the last entry queued of each log, all of which
  // go out before the close), and closed.
  void too_slow() {
    if (closing_) return;
    nlohmann::json resume = nlohmann::json::object();
    for (const auto& [origin, seq] : last_entry_) resume[origin] = seq;
    {
      std::lock_guard lock(impl_.mu);
      ++impl_.stats.dropped;
    }
    backlog_.clear();
    finish(nlohmann::json{{"error", "too slow"}, {"resume", resume}}.dump());
  }
  void push(std::shared_ptr<const std::string> frame) {
    push_only(std::move(frame));
    if (!writing_) write_next();
  }
  void push_only(std::shared_ptr<const std::string> frame) {
    queued_bytes_ += frame->size();
    impl_.queued += 1;
    queue_.push_back(std::move(frame));
  }
  // A last frame, then the close.
  void finish(const std::string& frame) {
    push(std::make_shared<const std::string>(frame));
    closing_ = true;
  }
  void write_next() {
    // The backlog feeds the queue up to half its bound at a time.
    while (queue_.empty() && !backlog_.empty() && !closing_) {
      while (!backlog_.empty() && queued_bytes_ < impl_.s.client_queue_bytes / 2) {
        Pending p = std::move(backlog_.front());
        backlog_.pop_front();
        if (p.live) live_backlog_bytes_ -= p.item.frame->size();
        int64_t& last = p.item.checkpoint ? last_checkpoint_[p.item.origin] : last_entry_[p.item.origin];
        if (p.item.seq <= last) continue;
        last = p.item.seq;
        push_only(p.item.frame);
      }
    }
    if (queue_.empty()) {
      writing_ = false;
      if (closing_ && ws_) {
        auto self = this->shared_from_this();
        ws_->async_close(websocket::close_code::policy_error, [self](beast::error_code) { self->gone(); });
      }
      return;
    }
    writing_ = true;
    auto self = this->shared_from_this();
    // The frame is held here: gone() (a shut at close, an error) may empty
    // the queue while it is being written, and has counted it out then.
    std::shared_ptr<const std::string> frame = queue_.front();
    ws_->async_write(net::buffer(*frame), [self, frame](beast::error_code ec, size_t) {
      if (self->queue_.empty() || self->queue_.front() != frame) return self->gone();
      self->queued_bytes_ -= frame->size();
      self->queue_.pop_front();
      self->impl_.queued -= 1;
      if (ec) return self->gone();
      self->impl_.sent += 1;
      self->write_next();
    });
  }
  void gone() {
    impl_.queued -= queue_.size();
    queue_.clear();
    backlog_.clear();
    queued_bytes_ = 0;
    closing_ = true;
    impl_.clients.erase(this->shared_from_this());
    impl_.clients_now = impl_.clients.size();
  }

  WebSocketOutput::Impl& impl_;
  Socket socket_;
  bool tcp_;
  bool waiting_ = false;  // its request not read yet
  beast::flat_buffer buf_, in_;
  http::request<http::string_body> req_;
  std::optional<websocket::stream<Socket>> ws_;
  Wants wants_;
  std::deque<std::shared_ptr<const std::string>> queue_;
  uint64_t queued_bytes_ = 0;
  bool writing_ = false, closing_ = false, ready_ = false;
  std::map<std::string, int64_t> last_entry_, last_checkpoint_;
  struct Pending {
    Item item;
    bool live;  // came while the replay went out (else: part of it)
  };
  std::deque<Pending> backlog_;  // not queued yet: the replay, and what came meanwhile
  uint64_t live_backlog_bytes_ = 0;
  net::steady_timer deadline_;
};

}  // namespace

std::string WebSocketOutput::Impl::replay(const Wants& w, std::vector<Item>& out) {
  for (const auto& [origin, seq] : w.resume) {
    auto it = evicted_through.find(origin);
    if (it != evicted_through.end() && it->second > seq)
      return "cannot resume " + origin + " after entry " + std::to_string(seq) + ": the buffer holds it from entry " +
             std::to_string(it->second + 1) + " on (the record has the rest)";
  }
  if (w.resume.empty() && !w.from_buffer) return "";
  for (const auto& i : buffer) {
    auto r = w.resume.find(i.origin);
    if (r != w.resume.end() ? i.seq > r->second : w.from_buffer) out.push_back(i);
  }
  return "";
}

template <class Acceptor>
void WebSocketOutput::Impl::accept(Acceptor& a) {
  a.async_accept([this, &a](beast::error_code ec, typename Acceptor::protocol_type::socket socket) {
    if (ec == net::error::operation_aborted || !a.is_open()) return;  // closed
    if (ec) {
      // Out of descriptors or memory, or a connection reset before it was
      // taken: keep listening. Stopping here would leave every later client
      // hanging in the backlog. A pause lets closing clients free descriptors.
      if (ec != accept_error)
        std::cerr << "flightrecd: websocket output " << s.name << ": accept: " << ec.message()
                  << "; accepting again in 100 ms\n";
      accept_error = ec;
      auto pause = std::make_shared<net::steady_timer>(io, std::chrono::milliseconds(100));
      pause->async_wait([this, &a, pause](beast::error_code) { accept(a); });
      return;
    }
    accept_error = {};
    // Clients that sent their request are max_clients at most. Those that
    // have not are too, apart: when they are that many, the oldest makes
    // room, so connections that never speak cannot keep the token's
    // holder out (each also has 10 s at most).
    if (clients.size() >= s.max_clients) {
      beast::error_code ignored;
      socket.close(ignored);
    } else {
      while (pending >= s.max_clients && !waiting.empty()) {
        auto oldest = waiting.front().lock();
        waiting.pop_front();
        if (oldest && oldest->abandon()) break;
      }
      if (waiting.size() > 4 * s.max_clients)  // entries of those past it, dropped in bulk
        std::erase_if(waiting, [](const std::weak_ptr<ClientBase>& w) {
          auto c = w.lock();
          return !c || !c->waiting();
        });
      bool tcp = std::is_same_v<typename Acceptor::protocol_type, net::ip::tcp>;
      std::make_shared<Client<typename Acceptor::protocol_type::socket>>(*this, std::move(socket), tcp)->start();
    }
    accept(a);
  });
}

WebSocketOutput::WebSocketOutput(WebSocketSettings settings) : settings_(std::move(settings)), impl_(std::make_unique<Impl>()) {
  impl_->s = settings_;
  impl_->stats.kind = "websocket";
  impl_->stats.name = settings_.name;
  try {
    if (!settings_.listen.empty()) {
      std::string host;
      uint16_t port = 0;
      if (!split_address(settings_.listen, host, port))
        throw Error("websocket " + settings_.name + ": listen " + settings_.listen + " is not HOST:PORT");
      if (host == "localhost") host = "127.0.0.1";
      net::ip::tcp::endpoint at(net::ip::make_address(host), port);
      impl_->tcp.emplace(impl_->io);
      impl_->tcp->open(at.protocol());
      impl_->tcp->set_option(net::socket_base::reuse_address(true));
      impl_->tcp->bind(at);
      impl_->tcp->listen();
      impl_->accept(*impl_->tcp);
    }
    if (!settings_.unix_path.empty()) {
      unlink(settings_.unix_path.c_str());  // a stale socket of an earlier run
      impl_->local.emplace(impl_->io, net::local::stream_protocol::endpoint(settings_.unix_path));
      chmod(settings_.unix_path.c_str(), 0600);
      impl_->accept(*impl_->local);
    }
  } catch (const boost::system::system_error& e) {
    throw Error("websocket output " + settings_.name + ": " + e.what());
  }
  impl_->thread = std::thread([this] { impl_->io.run(); });
}

WebSocketOutput::~WebSocketOutput() { close(std::chrono::milliseconds(0)); }


void WebSocketOutput::offer(const std::string& origin, int64_t session, std::span<const ledger::SealedEntry> entries,
                            std::span<const ledger::SealedCheckpoint> checkpoints) {
  auto items = std::make_shared<std::vector<Item>>();
  auto frame = [](const nlohmann::json& f) {
    return std::make_shared<const std::string>(f.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  };
  in_log_order(
      entries, checkpoints,
      [&](const ledger::SealedEntry& e) {
        if (!settings_.filter.accepts(e.type, e.body)) return;
        int level = -1;
        if (e.type == "violation") {
          ledger::TopLevel top;
          ledger::check_canonical(e.body, &top);
          if (auto l = top.string("level")) level = level_of(*l);
        }
        items->push_back({origin, e.seq, false, std::string(e.type), level,
                          frame({{"kind", "entry"}, {"origin", origin}, {"session", session}, {"seq", e.seq},
                                 {"type", e.type}, {"leaf", ledger::to_hex(e.leaf)}, {"entry", e.body}})});
      },
      [&](const ledger::SealedCheckpoint& c) {
        items->push_back({origin, int64_t(c.tree_size), true, "", -1,
                          frame({{"kind", "checkpoint"}, {"origin", origin}, {"session", session},
                                 {"tree_size", c.tree_size}, {"note", c.note}})});
      });
  if (items->empty()) return;
  {
    std::lock_guard lock(impl_->mu);
    for (const auto& i : *items) {
      impl_->buffer.push_back(i);
      impl_->buffer_bytes += i.frame->size();
    }
    while (impl_->buffer_bytes > settings_.buffer_bytes && !impl_->buffer.empty()) {
      const Item& old = impl_->buffer.front();
      if (!old.checkpoint) impl_->evicted_through[old.origin] = std::max(impl_->evicted_through[old.origin], old.seq);
      impl_->buffer_bytes -= old.frame->size();
      impl_->buffer.pop_front();
    }
  }
  std::shared_ptr<const std::vector<Item>> shared = items;
  net::post(impl_->io, [impl = impl_.get(), shared] {
    auto clients = impl->clients;  // a client may leave while served
    for (const auto& c : clients) c->deliver(shared);
  });
}

OutputStats WebSocketOutput::stats() const {
  std::lock_guard lock(impl_->mu);
  OutputStats s = impl_->stats;
  s.sent = impl_->sent;
  s.queued = impl_->queued;
  s.connected = impl_->clients_now > 0;
  return s;
}

void WebSocketOutput::close(std::chrono::milliseconds grace) {
  if (!impl_->thread.joinable()) return;
  // Give the clients what is queued, then close everything.
  auto until = std::chrono::steady_clock::now() + grace;
  while (impl_->queued > 0 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  net::post(impl_->io, [impl = impl_.get()] {
    beast::error_code ec;
    if (impl->tcp) impl->tcp->close(ec);
    if (impl->local) impl->local->close(ec);
    auto clients = impl->clients;
    for (const auto& c : clients) c->shut();
    impl->clients.clear();
    impl->io.stop();
  });
  impl_->thread.join();
  if (!settings_.unix_path.empty()) unlink(settings_.unix_path.c_str());
}

}  // namespace flightrec::ship
