#include "ledger/bundle.h"

#include <algorithm>
#include <fstream>
#include <set>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/text.h"

namespace flightrec::ledger {
namespace {

constexpr int kBundleVersion = 1;

std::string public_key_of(Store& store, int64_t session) {
  EntryFilter f;
  f.session = session;
  std::string key;
  store.for_each_entry(f, [&](const EntryRow& e) {
    TopLevel top;
    if (check_canonical(e.body, &top).empty()) key = top.string("public_key").value_or("");
    return false;  // only the genesis entry
  });
  return key;
}

// What §4 allows of a bundle's JSON (the document, its header and
// checkpoint lines): no member name twice in one object, nesting at most
// kMaxDepth deep, and exactly the members listed. Throws BadBundle.
struct BadBundle {
  std::string why;
};
constexpr int kMaxDepth = 2;

nlohmann::json parse_bundle_json(std::string_view text, std::initializer_list<const char*> members) {
  std::vector<std::set<std::string>> seen;
  auto check = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    if (depth > kMaxDepth) throw BadBundle{"JSON nested more than " + std::to_string(kMaxDepth) + " deep"};
    if (event == E::object_start) seen.emplace_back();
    if (event == E::object_end && !seen.empty()) seen.pop_back();
    if (event == E::key && !seen.empty() && !seen.back().insert(parsed.get<std::string>()).second)
      throw BadBundle{"member \"" + parsed.get<std::string>() + "\" given twice"};
    return true;
  };
  nlohmann::json j = nlohmann::json::parse(text, check, false);
  if (!j.is_object()) throw BadBundle{"not a JSON object"};
  if (j.size() != members.size()) throw BadBundle{"members other than those of the format"};
  for (const char* m : members)
    if (!j.contains(m)) throw BadBundle{"member \"" + std::string(m) + "\" missing"};
  return j;
}

}  // namespace

BundleVerdict verify_bundle_inner(const std::string& path, const VerifierKey* pinned,
                                  const SavedCheckpoints* saved);

int64_t export_bundle(Store& store, int64_t session, std::ostream& out, BundleFormat format) {
  bool found = false;
  for (const auto& s : store.sessions()) found = found || s.id == session;
  if (!found) throw Error("no session " + std::to_string(session) + " in " + store.path());
  auto checkpoints = store.checkpoints(session);
  std::string key = public_key_of(store, session);
  EntryFilter f;
  f.session = session;
  int64_t n = 0;
  std::string buf;
  if (format == BundleFormat::Json) {
    buf = "{\"checkpoints\":[";
    for (size_t i = 0; i < checkpoints.size(); ++i) {
      if (i) buf += ',';
      append_json_string(buf, checkpoints[i].note);
    }
    buf += "],\"entries\":[";
    out << buf;
    store.for_each_entry(f, [&](const EntryRow& e) {
      buf.clear();
      if (n++) buf += ',';
      append_json_string(buf, e.body);
      out << buf;
      return bool(out);
    });
    buf = "],\"format\":\"flightrec-bundle\",\"format_version\":" + std::to_string(kBundleVersion) +
          ",\"public_key\":";
    append_json_string(buf, key);
    buf += ",\"session\":" + std::to_string(session) + "}\n";
    out << buf;
  } else {
    buf = "{\"format\":\"flightrec-bundle-lines\",\"format_version\":" + std::to_string(kBundleVersion) +
          ",\"public_key\":";
    append_json_string(buf, key);
    buf += ",\"session\":" + std::to_string(session) + "}\n";
    out << buf;
    size_t next_cp = 0;
    auto put_checkpoints = [&] {
      while (next_cp < checkpoints.size() && checkpoints[next_cp].tree_size == n) {
        buf = "{\"checkpoint\":";
        append_json_string(buf, checkpoints[next_cp++].note);
        buf += "}\n";
        out << buf;
      }
    };
    store.for_each_entry(f, [&](const EntryRow& e) {
      out << e.body << '\n';
      ++n;
      put_checkpoints();
      return bool(out);
    });
  }
  out.flush();
  if (!out) throw Error("writing the bundle failed");
  return n;
}

namespace {
BundleVerdict require_external_match(BundleVerdict r, size_t saved) {
  std::string reason;
  if (r.verdict.ok && !every_saved_checkpoint_matched(saved, {&r.verdict}, &reason)) {
    r.verdict.ok = false;
    r.verdict.where = "saved checkpoint";
    r.verdict.reason = reason;
  }
  return r;
}
}  // namespace

BundleVerdict verify_bundle(const std::string& path, const VerifierKey* pinned,
                            std::optional<std::string> external) {
  std::optional<SavedCheckpoints> saved;
  if (external) saved = SavedCheckpoints::parse(*external);
  return require_external_match(verify_bundle_inner(path, pinned, saved ? &*saved : nullptr),
                                saved ? saved->notes.size() : 0);
}

// The bundle's public_key is a convenience copy: it must say what the
// genesis entry says (empty when the session is unsigned).
static BundleVerdict check_bundle_key(BundleVerdict r, const std::string& bundle_key) {
  if (r.verdict.ok && bundle_key != r.verdict.record_key) {
    r.verdict.ok = false;
    r.verdict.where = "";
    r.verdict.reason = "the bundle's public_key differs from the one in the genesis entry";
  }
  return r;
}

BundleVerdict verify_bundle_inner(const std::string& path, const VerifierKey* pinned,
                                  const SavedCheckpoints* saved) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read " + path);
  std::string first;
  std::getline(in, first);
  BundleVerdict out;
  auto bad = [&](const std::string& why) {
    out.verdict.ok = false;
    out.verdict.reason = why;
    return out;
  };

  nlohmann::json first_loose = nlohmann::json::parse(first, nullptr, false);
  // (Compared, not value(): a "format" that is not a string must not throw.)
  if (first_loose.is_object() && first_loose.contains("format") && first_loose["format"] == "flightrec-bundle-lines") {
    nlohmann::json header;
    try {
      header = parse_bundle_json(first, {"format", "format_version", "public_key", "session"});
    } catch (const BadBundle& b) {
      return bad("bundle header: " + b.why);
    }
    if (header["format_version"] != kBundleVersion) return bad("unsupported bundle version");
    if (!header["session"].is_number_integer() || !header["public_key"].is_string())
      return bad("bundle header: session is not an integer or public_key not a string");
    out.session = header["session"].get<int64_t>();
    SessionVerifier v(out.session, pinned, saved);
    std::string line;
    bool ended_with_newline = !in.eof();
    while (ended_with_newline && std::getline(in, line)) {
      if (in.eof()) {  // a line without its newline: cut short
        ended_with_newline = false;
        break;
      }
      if (line.starts_with("{\"checkpoint\":")) {
        nlohmann::json j;
        try {
          j = parse_bundle_json(line, {"checkpoint"});
        } catch (const BadBundle& b) {
          return bad("checkpoint line after entry " + std::to_string(v.entries()) + ": " + b.why);
        }
        if (!j["checkpoint"].is_string()) return bad("malformed checkpoint line");
        if (!v.add_checkpoint(j["checkpoint"].get<std::string>())) break;
      } else if (!v.add_entry(line)) {
        break;
      }
    }
    if (v.verdict().ok && !ended_with_newline) return bad("the last line does not end with a newline (cut short?)");
    out.verdict = v.finish();
    return check_bundle_key(out, header["public_key"].get<std::string>());
  }

  // One JSON document: read the rest and parse it whole.
  std::string rest((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  nlohmann::json doc;
  try {
    doc = parse_bundle_json(first + "\n" + rest,
                            {"checkpoints", "entries", "format", "format_version", "public_key", "session"});
  } catch (const BadBundle& b) {
    nlohmann::json loose = nlohmann::json::parse(first + "\n" + rest, nullptr, false);
    if (!loose.is_object() || !loose.contains("format") || loose["format"] != "flightrec-bundle")
      throw Error(path + " is not a flightrec bundle");
    return bad("bundle: " + b.why);
  }
  if (doc["format"] != "flightrec-bundle") throw Error(path + " is not a flightrec bundle");
  if (doc["format_version"] != kBundleVersion) return bad("unsupported bundle version");
  if (!doc["session"].is_number_integer() || !doc["entries"].is_array() || !doc["checkpoints"].is_array() ||
      !doc["public_key"].is_string())
    return bad("bundle lacks session, entries or checkpoints");
  out.session = doc["session"].get<int64_t>();
  std::vector<std::pair<uint64_t, std::string>> checkpoints;
  for (const auto& c : doc["checkpoints"]) {
    if (!c.is_string()) return bad("a checkpoint is not a string");
    std::string why, text = c.get<std::string>();
    auto note = parse_note(text, &why);
    auto cp = note ? parse_checkpoint(note->text, &why) : std::nullopt;
    if (!cp) return bad("malformed checkpoint: " + why);
    if (!checkpoints.empty() && cp->size <= checkpoints.back().first)
      return bad("checkpoints are not in increasing tree size (at size " + std::to_string(cp->size) + ")");
    checkpoints.emplace_back(cp->size, std::move(text));
  }
  SessionVerifier v(out.session, pinned, saved);
  size_t next_cp = 0;
  auto feed = [&] {
    while (next_cp < checkpoints.size() && checkpoints[next_cp].first == uint64_t(v.entries()))
      v.add_checkpoint(checkpoints[next_cp++].second);
  };
  feed();
  for (const auto& e : doc["entries"]) {
    if (!e.is_string()) return bad("an entry is not a string");
    if (!v.add_entry(e.get_ref<const std::string&>())) break;
    feed();
  }
  if (v.verdict().ok && next_cp < checkpoints.size()) v.checkpoint_beyond_end(checkpoints[next_cp].first);
  out.verdict = v.finish();
  return check_bundle_key(out, doc["public_key"].get<std::string>());
}

}  // namespace flightrec::ledger
