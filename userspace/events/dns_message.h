#pragma once
// DNS messages (RFC 1035) as the session's resolver reads them: a query's
// first question, and an answer's records. Everything here may come from
// a hostile sandbox or a hostile server: lengths, counts and compression
// pointers are checked, a pointer may only point backwards, and a name
// that cannot be read makes the whole message unreadable.
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace flightrec::events::dns {

constexpr uint16_t kTypeA = 1, kTypeCname = 5, kTypeAaaa = 28;
constexpr uint8_t kNoError = 0, kFormErr = 1, kServFail = 2, kNxDomain = 3, kRefused = 5;

struct Question {
  uint16_t id = 0;
  uint16_t flags = 0;
  // Lower case, dots between labels, no trailing dot ("" for the root); a
  // byte that is not a letter, digit, '-' or '_' as \DDD (so it matches no rule).
  std::string name;
  uint16_t type = 0, klass = 0;
  size_t end = 0;  // offset just past the question
};

// A query (QR clear, opcode QUERY, at least one question): its first question.
std::optional<Question> parse_query(const uint8_t* msg, size_t size);

struct Record {
  std::string owner;  // as Question::name
  uint16_t type = 0;
  uint32_t ttl = 0;
  std::string address;  // A / AAAA: the address as text
  std::string target;   // CNAME: the name it points to
};

struct Response {
  Question question;  // its first question (id and flags too)
  uint8_t rcode = 0;
  bool truncated = false;
  std::vector<Record> answers;  // A, AAAA and CNAME records of the answer section
};

// A response (QR set) with exactly one question; nullopt otherwise.
std::optional<Response> parse_response(const uint8_t* msg, size_t size);

// What an answer says about one name: the addresses of the name and of the
// CNAME chain from it (no record of another owner counts), and the least TTL met on the way.
struct Resolution {
  std::vector<std::string> addresses;  // text, as inet_ntop writes it
  std::vector<std::string> cnames;     // the chain, in order
  uint32_t ttl = 0;
};
Resolution resolve(const Response& r, const std::string& name);

// A query of one question (class IN, RD set, nothing else: no flag, option
// or record of the asker's goes upstream); name as Question::name has it.
// nullopt for a name that cannot be one.
std::optional<std::string> build_query(uint16_t id, const std::string& name, uint16_t type);

// The reply to a query that is not answered: its header and first question,
// QR set, opcode and RD kept, no records, `rcode`. A query that does not
// parse gets its header alone with FORMERR. Empty when `msg` is no query
// at all (too short, or itself a response): nothing to answer.
std::string refusal(const uint8_t* msg, size_t size, uint8_t rcode);

// Lowers every record's TTL in a response to at most max_ttl (the OPT
// pseudo-record's TTL field is flags, left alone). False, and msg as it
// was, if the message cannot be walked.
bool cap_ttls(std::string& msg, uint32_t max_ttl);

// "A", "AAAA", "HTTPS", ... or the number.
std::string type_name(uint16_t type);
// "NOERROR", "NXDOMAIN", ... or the number.
std::string rcode_name(uint8_t rcode);

}  // namespace flightrec::events::dns
