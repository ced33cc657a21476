// flightrec agent: an agent's session turn by turn (inspect/turns.h).
#include <iostream>

#include "cli/commands.h"
#include "cli/options.h"
#include "common/text.h"
#include "inspect/turns.h"
#include "ledger/store.h"

namespace flightrec::cli {
namespace {

// One line of at most n characters, escaped as every view prints the agent's text.
std::string line(const std::string& s, size_t n) {
  std::string one = s;
  for (char& c : one)
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  if (one.size() > n) one = one.substr(0, n) + "...";
  return printable(one);
}

}  // namespace

int cmd_agent(const Args& args) {
  po::options_description desc("options");
  std::string db;
  int64_t session = 1;
  size_t width = 160;
  desc.add_options()("help,h", "show this help")("db", po::value(&db)->required(), "SQLite record to read")(
      "session", po::value(&session)->default_value(session), "the session")(
      "width", po::value(&width)->default_value(width), "characters of each text shown (prompt, answer, input, result)")(
      "json", po::bool_switch(), "the turns as one JSON object (whole texts, up to 4 KiB each)");
  po::variables_map vm;
  const char* usage =
      "usage: flightrec agent --db FILE [--session N] [--json] [--width N]\n\n"
      "The agent's session turn by turn, from its llm_call and tool_call entries (a\n"
      "session recorded with TLS capture): each model call, what the model was asked\n"
      "(the request's last user text) and what it answered (text and tool calls); for\n"
      "each tool call, what the agent's processes did while it ran (execs, files\n"
      "written, connects; each with the entry that records it and how it was linked:\n"
      "argv, subtree, path or window) and the result the model was told. Texts are the\n"
      "recorded bytes (redacted as recorded), escaped. It reads the entries as they\n"
      "are: 'flightrec verify' says whether the record is intact, and 'flightrec prove'\n"
      "proves any entry named here.";
  if (!parse_options(args, desc, usage, vm)) return 0;
  if (width < 8) throw UsageError("--width must be at least 8");
  ledger::Store store(db, ledger::Store::Mode::Read);
  nlohmann::json turns = inspect::agent_turns(store, session);
  if (vm["json"].as<bool>()) {
    std::cout << turns.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return 0;
  }
  auto str = [](const nlohmann::json& j, const char* k) {
    return j.contains(k) ? (j[k].is_string() ? j[k].get<std::string>() : j[k].dump()) : std::string();
  };
  if (turns["turns"].empty()) std::cout << "session " << session << ": no model calls recorded\n";
  size_t n = 0;
  for (const auto& t : turns["turns"]) {
    std::cout << "turn " << ++n << "  " << line(str(t, "api"), 40) << " " << line(str(t, "model"), 60) << "  status "
              << str(t, "status") << "  tokens " << str(t, "input_tokens") << "/" << str(t, "output_tokens") << "  "
              << line(str(t, "stop_reason"), 30) << "  (entry " << str(t, "llm_call") << ")\n";
    if (!str(t, "prompt").empty()) std::cout << "  asked:    " << line(str(t, "prompt"), width) << "\n";
    if (!str(t, "answer").empty()) std::cout << "  answered: " << line(str(t, "answer"), width) << "\n";
    if (t.contains("problems")) std::cout << "  problems: " << line(t["problems"].dump(), width) << "\n";
    for (const auto& c : t["tool_calls"]) {
      std::cout << "  tool call " << line(str(c, "name"), 60) << " " << line(str(c, "id"), 80) << "  (entry "
                << str(c, "tool_call") << ")\n"
                << "    input:  " << line(str(c, "input"), width) << "\n";
      for (const auto& a : c["acts"])
        std::cout << "    did:    " << line(str(a, "kind"), 12) << " " << line(str(a, "what"), width) << "  ["
                  << str(a, "link") << ", entry " << str(a, "seq") << "]\n";
      if (c.contains("result")) std::cout << "    result: " << line(str(c, "result"), width) << "\n";
      else if (str(c, "result_seen") == "0") std::cout << "    result: (never returned to the model)\n";
    }
  }
  return 0;
}

}  // namespace flightrec::cli
