#pragma once
// The agent's turns in the record. From the `tls` entries of a session's
// processes: an `llm_call` entry for each model API exchange (HTTP/1; see
// agent/llm_api.h for the APIs), naming the tls entries that hold its
// bytes; and a `tool_call` entry for each tool call the model made, written
// when the request that returns its result is seen, linking the llm_call
// that asked for it, the request that answered, and what the agent's
// processes did in between (execs, files opened for writing, connects),
// each link with the method that made it; at the session's end, an
// `acts_unexplained` entry lists the acts no tool call explains. HTTP/1.x
// and HTTP/2 (told apart by the connection's first bytes). docs/FORMAT.md
// says the members.
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "agent/http1.h"
#include "agent/http2.h"
#include "agent/llm_api.h"
#include "session/pipeline.h"

namespace flightrec::session {

class LlmCalls : public Observer {
 public:
  // redact: a tool call's input is masked as a body is (--tls-redact; its
  // bytes may have come compressed, which the body scanner cannot read).
  explicit LlmCalls(bool redact = true) : redact_(redact) {}
  void observe(const events::Entry& entry, Emitted& out) override;
  void written(const events::Entry& own) override;
  // The session's end: exchanges still open, tool calls never answered.
  void finish(Emitted& out);

 private:
  bool redact_;
  struct Exchange {
    agent::HttpMessage request;
    agent::LlmExchange x;
  };
  // Whose acts an entry of ours is about (the process that talks to the model).
  struct Who {
    int64_t pid = 0, tid = 0, ppid = 0, uid = 0, gid = 0;
    std::string comm;
    static Who of(const events::Entry& e);
    void fill(events::Entry& about, uint64_t ts) const;
  };
  struct Conn {
    enum class Protocol { Unknown, Http1, Http2 } protocol = Protocol::Unknown;
    agent::Http1Stream sent, received;
    std::unique_ptr<agent::Http2Stream> sent2, received2;  // HTTP/2's
    Who who;
    std::deque<Exchange> waiting;  // requests whose response has not come (in order: HTTP/1)
    std::map<uint32_t, Exchange> streams;  // HTTP/2's, by stream
    uint32_t pid = 0;
    int64_t fd = -1;
    uint64_t used = 0;
  };
  struct Asked {  // a tool call the model made, its result not seen yet
    agent::ToolCall call;
    uint64_t call_number = 0;  // of the llm_call that asked (its seq once written)
    uint64_t asked_ts = 0;     // the model's answer ended
    uint32_t agent = 0;        // the process that talks to the model
    Who who;
    std::string command;                // its shell command, read once from its input
    std::vector<std::string> paths;     // the files it names
  };
  struct Act {
    int64_t seq;
    uint32_t pid;
    uint64_t ts;
    const char* kind;  // "exec", "file_write", "connect"
    std::string what;  // argv joined, the path, or addr:port
    std::string last;  // an exec's last argument (a shell's script)
  };

  void on_tls(const events::Entry& e, Emitted& out);
  void on_request(Exchange& ex, const events::Entry& e, Emitted& out);
  void write_call(Conn& c, Exchange& ex, const agent::HttpMessage* response, const events::Entry& about, Emitted& out);
  void write_tool_call(const Asked& a, const Exchange* result, const events::Entry& about, Emitted& out);
  void note_act(const events::Entry& e);
  bool descends(uint32_t pid, uint32_t ancestor) const;

  std::map<std::pair<uint32_t, uint64_t>, Conn> conns_;  // (pid, ssl)
  std::map<std::pair<uint32_t, std::string>, Asked> asked_;  // by the agent's pid and the tool call's id
  std::map<uint64_t, int64_t> call_seqs_;                // llm_call number -> its seq (the last kMaxCallSeqs)
  std::map<uint32_t, uint32_t> parents_;                 // pid -> its parent, from fork and exec entries
  std::deque<Act> acts_;                                 // recent acts, for attribution
  // Every act of the session, to list at its end those no tool call explains
  // (the first kMaxAllActs; the rest counted), and what explains some.
  struct Seen {
    int64_t seq;
    uint32_t pid;
    int64_t fd;  // a connect's socket
    const char* kind;
  };
  std::vector<Seen> seen_;
  size_t seen_of_kind_[3] = {};                          // exec, file_write, connect
  uint64_t seen_beyond_ = 0;
  std::set<int64_t> linked_;                             // acts some tool_call links
  // (pid, fd) of model calls -> the first request seq of each: the connect
  // before it opened the socket, and is the agent's own.
  std::map<std::pair<uint32_t, int64_t>, std::vector<int64_t>> model_uses_;
  std::vector<uint8_t> scratch_;
  uint64_t calls_ = 0, uses_ = 0;
};

}  // namespace flightrec::session
