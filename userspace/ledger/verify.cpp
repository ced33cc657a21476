#include "ledger/verify.h"

#include <nlohmann/json.hpp>

#include "ledger/hash.h"

namespace flightrec::ledger {
namespace {

bool has_float(const nlohmann::json& j) {
  if (j.is_number_float()) return true;
  if (j.is_structured())
    for (const auto& v : j)
      if (has_float(v)) return true;
  return false;
}

bool field_is(const nlohmann::json& j, const char* key, int64_t want) {
  auto it = j.find(key);
  return it != j.end() && it->is_number_integer() && it->get<int64_t>() == want;
}

}  // namespace

std::string canonical_problem(const std::string& body) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(body);
  } catch (const std::exception&) {
    return "entry is not valid JSON";
  }
  if (!j.is_object()) return "entry is not a JSON object";
  if (has_float(j)) return "entry holds a non-integer number";
  // nlohmann keeps keys sorted by bytes and escapes as RFC 8785 does, so
  // a canonical body survives a round trip unchanged.
  try {
    if (j.dump() != body) return "entry is not in canonical form";
  } catch (const std::exception&) {
    return "entry is not valid UTF-8";
  }
  return "";
}

VerifyResult verify_store(Store& store, std::optional<int64_t> only_session) {
  VerifyResult res;
  auto fail = [&](int64_t session, int64_t seq, std::string why) {
    if (!res.ok) return;
    res.ok = false;
    res.bad_session = session;
    res.bad_seq = seq;
    res.reason = std::move(why);
  };

  for (const SessionRow& s : store.sessions()) {
    if (only_session && s.id != *only_session) continue;
    ++res.sessions;
    int64_t expected = 1;
    Hash head = kChainStart;
    EntryFilter f;
    f.session = s.id;
    store.for_each_entry(f, [&](const EntryRow& e) {
      if (e.seq != expected) {
        if (e.seq > expected)
          fail(s.id, expected, "entry is missing (the next stored entry is " +
                                   std::to_string(e.seq) + ")");
        else
          fail(s.id, e.seq, "entry is out of order");
        return false;
      }
      Hash leaf = leaf_hash(e.body);
      if (e.leaf != as_bytes(leaf)) {
        fail(s.id, e.seq, "content does not match its stored leaf hash (entry was altered)");
        return false;
      }
      if (std::string why = canonical_problem(e.body); !why.empty()) {
        fail(s.id, e.seq, why);
        return false;
      }
      auto j = nlohmann::json::parse(e.body);
      if (!field_is(j, "seq", e.seq) || !field_is(j, "session", s.id)) {
        fail(s.id, e.seq, "entry names another position (seq/session fields disagree; moved or spliced)");
        return false;
      }
      auto type = j.find("type");
      if (type == j.end() || !type->is_string() || type->get<std::string>() != e.type) {
        fail(s.id, e.seq, "type column disagrees with the entry");
        return false;
      }
      Hash chain = chain_next(head, leaf);
      if (e.chain != as_bytes(chain)) {
        fail(s.id, e.seq, "chain hash does not follow from the previous entry");
        return false;
      }
      head = chain;
      ++expected;
      ++res.entries;
      return true;
    });
    if (!res.ok) return res;
    int64_t count = expected - 1;
    if (count == 0) {
      fail(s.id, 0, "session has no entries");
      return res;
    }
    if (!s.end_real_ns) {
      ++res.unterminated;
      continue;
    }
    if (s.entry_count && *s.entry_count != count) {
      fail(s.id, count + 1,
           "session closed with " + std::to_string(*s.entry_count) + " entries but " +
               std::to_string(count) + " are stored (tail removed or added)");
      return res;
    }
    if (s.chain_head && *s.chain_head != to_hex(head)) {
      fail(s.id, count, "last chain hash differs from the session's closing chain head");
      return res;
    }
  }
  return res;
}

}  // namespace flightrec::ledger
