#include "ledger/bundle.h"

#include "common/progress.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <cstdint>
#include <fstream>
#include <optional>
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
// The members of a JSON bundle (§4.1).
const std::set<std::string> kJsonBundleMembers = {"checkpoints", "entries", "format",
                                                  "format_version", "public_key", "session"};

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

int64_t export_bundle(Store& store, int64_t session, std::ostream& out, BundleFormat format, Progress* progress) {
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
      if (progress) progress->update(n);
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
      if (progress) progress->update(n);
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

namespace {

// A JSON bundle (§4.1) read as a stream, so a session of millions of
// entries never sits in memory. One pass checks the document's shape (§4's
// rules), keeps its small members and checkpoints and, when the checkpoints
// come before the entries (as flightrec writes them), verifies each entry
// as it is read; otherwise a second pass verifies with the checkpoints known.
class JsonBundleReader : public nlohmann::json_sax<nlohmann::json> {
 public:
  using Checkpoints = std::vector<std::pair<uint64_t, std::string>>;
  // known: the checkpoints from a first pass (this is the second), or nullptr.
  JsonBundleReader(const VerifierKey* pinned, const SavedCheckpoints* saved, const Checkpoints* known)
      : pinned_(pinned), saved_(saved), known_(known) {}

  std::string problem;       // the first thing wrong with the shape: twice, nesting
  std::string type_problem;  // the first member or element of the wrong type
  bool syntax_error = false;
  bool need_second_pass = false;  // the entries came before the checkpoints
  std::optional<std::string> format, public_key;
  std::optional<int64_t> session, format_version;
  Checkpoints checkpoints;        // read here (first pass)
  std::set<std::string> members;  // the format's members present (others: `problem`)
  std::optional<SessionVerifier> verifier;
  int64_t verified_session = 0;   // the session the verifier checked entries against

  bool null() override { return scalar("null"); }
  bool boolean(bool) override { return scalar("boolean"); }
  bool number_integer(number_integer_t v) override { return integer(v); }
  bool number_unsigned(number_unsigned_t v) override {
    return v <= uint64_t(INT64_MAX) ? integer(int64_t(v)) : scalar("number");
  }
  bool number_float(number_float_t, const string_t&) override { return scalar("number"); }
  bool binary(binary_t&) override { return scalar("binary"); }
  bool string(string_t& v) override {
    if (depth_ == 1) {
      if (key_ == "format") format = v;
      else if (key_ == "public_key") public_key = v;
      else return scalar("string");
      return true;
    }
    if (depth_ != 2) return scalar("string");
    if (key_ == "checkpoints" && !known_) checkpoint(v);
    if (key_ == "entries" && verify_inline_ && !stopped_) entry(v);
    return true;
  }
  bool start_object(std::size_t) override { return open(true); }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(false); }
  bool end_array() override { return close(); }
  bool key(string_t& k) override {
    // Only the top-level object may hold members (any deeper object is
    // wrong already); only the format's names are kept, so a document of
    // millions of names costs no memory.
    if (depth_ != 1) return true;
    key_ = k;
    if (!kJsonBundleMembers.count(k)) note("members other than those of the format");
    else if (!members.insert(k).second) note("member \"" + k + "\" given twice");
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    syntax_error = true;
    return false;
  }

  // The verifier, made if no entry made it (an empty session).
  SessionVerifier& verifier_for(int64_t id) {
    if (!verifier) start(id);
    return *verifier;
  }
  // Checkpoints left once every entry was read.
  std::optional<uint64_t> checkpoint_beyond_end() const {
    return next_cp_ < list().size() ? std::optional(list()[next_cp_].first) : std::nullopt;
  }

 private:
  static constexpr size_t kMaxCheckpointBytes = 64 << 20;

  const Checkpoints& list() const { return known_ ? *known_ : checkpoints; }
  void start(int64_t id) {
    verified_session = id;
    verifier.emplace(id, pinned_, saved_);
    feed_checkpoints();
  }
  void feed_checkpoints() {
    while (next_cp_ < list().size() && list()[next_cp_].first == uint64_t(verifier->entries()))
      verifier->add_checkpoint(list()[next_cp_++].second);
  }
  void entry(const std::string& text) {
    if (!verifier) {
      // The session the entries must belong to: the bundle's session member
      // if it came first, else the first entry's (compared with it at the end).
      TopLevel top;
      start(session ? *session : check_canonical(text, &top).empty() ? top.integer("session").value_or(0) : 0);
    }
    if (!verifier->add_entry(text)) stopped_ = true;  // its verdict says why; the shape is still read
    else feed_checkpoints();
  }
  void note(const std::string& why) {
    if (problem.empty()) problem = why;
  }
  void wrong_type(const std::string& why) {
    if (type_problem.empty()) type_problem = why;
  }
  bool scalar(const char* what) {
    if (depth_ == 2 && key_ == "entries") wrong_type("an entry is not a string");
    else if (depth_ == 2 && key_ == "checkpoints") wrong_type("a checkpoint is not a string");
    else if (depth_ == 1) wrong_type("bundle lacks session, entries or checkpoints");  // a member of another type
    else if (depth_ == 0) note(std::string("not a JSON object but a ") + what);
    return true;
  }
  bool integer(int64_t v) {
    if (depth_ == 1 && key_ == "session") session = v;
    else if (depth_ == 1 && key_ == "format_version") format_version = v;
    else return scalar("number");
    return true;
  }
  bool open(bool object) {
    ++depth_;
    if (depth_ > kMaxDepth) note("JSON nested more than " + std::to_string(kMaxDepth) + " deep");
    if (depth_ == 2 && (object || (key_ != "entries" && key_ != "checkpoints")))
      wrong_type("bundle lacks session, entries or checkpoints");
    if (depth_ == 1 && !object) note("not a JSON object");
    if (depth_ == 2) array_at_2_ = !object;
    if (depth_ == 2 && !object && key_ == "entries") {
      verify_inline_ = known_ || checkpoints_read_;
      need_second_pass = !verify_inline_;
    }
    return true;
  }
  bool close() {
    if (depth_ == 2 && array_at_2_ && key_ == "checkpoints") checkpoints_read_ = true;
    --depth_;
    return true;
  }
  void checkpoint(const std::string& text) {
    checkpoint_bytes_ += text.size();
    if (checkpoint_bytes_ > kMaxCheckpointBytes)
      return wrong_type("more checkpoint text than any session has (over 64 MiB)");
    std::string why;
    auto n = parse_note(text, &why);
    auto cp = n ? parse_checkpoint(n->text, &why) : std::nullopt;
    if (!cp) return wrong_type("malformed checkpoint: " + why);
    if (!checkpoints.empty() && cp->size <= checkpoints.back().first)
      wrong_type("checkpoints are not in increasing tree size (at size " + std::to_string(cp->size) + ")");
    checkpoints.emplace_back(cp->size, text);
  }

  const VerifierKey* pinned_;
  const SavedCheckpoints* saved_;
  const Checkpoints* known_;
  size_t next_cp_ = 0;
  bool checkpoints_read_ = false, verify_inline_ = false, stopped_ = false;
  int depth_ = 0;
  std::string key_;           // the top-level member being read
  bool array_at_2_ = false;   // the open container at depth 2 is an array
  size_t checkpoint_bytes_ = 0;
};

// The bytes of a file, read in 1 MiB chunks, as the input iterator the
// JSON parser reads through (its istream adapter costs a virtual call per byte).
class FileBytes {
 public:
  explicit FileBytes(const std::string& path) : f_(std::fopen(path.c_str(), "rb")) {
    if (!f_) throw Error(errno_message("cannot read " + path, errno));
    fill();
  }
  ~FileBytes() { std::fclose(f_); }
  FileBytes(const FileBytes&) = delete;
  FileBytes& operator=(const FileBytes&) = delete;
  bool failed() const { return std::ferror(f_) != 0; }
  // A NUL byte in what was read: the JSON parser takes one for the end of
  // its input, so bytes after it would ride along unread.
  bool saw_nul() const { return nul_; }

  struct Iterator {
    using iterator_category = std::input_iterator_tag;
    using value_type = char;
    using difference_type = std::ptrdiff_t;
    using pointer = const char*;
    using reference = char;
    FileBytes* src = nullptr;  // nullptr: the end
    char operator*() const { return src->buf_[src->pos_]; }
    Iterator& operator++() {
      if (++src->pos_ == src->len_) src->fill();
      return *this;
    }
    bool at_end() const { return !src || src->pos_ == src->len_; }
    bool operator==(const Iterator& o) const { return at_end() == o.at_end(); }
    bool operator!=(const Iterator& o) const { return !(*this == o); }
  };
  Iterator begin() { return Iterator{this}; }
  Iterator end() { return Iterator{}; }

 private:
  void fill() {
    len_ = std::fread(buf_.data(), 1, buf_.size(), f_);
    pos_ = 0;
    nul_ = nul_ || std::memchr(buf_.data(), 0, len_);
  }
  std::FILE* f_;
  std::vector<char> buf_ = std::vector<char>(1 << 20);
  size_t pos_ = 0, len_ = 0;
  bool nul_ = false;
};

// One streaming pass of the document through `reader`; false when the file
// holds a NUL byte.
bool read_json(const std::string& path, JsonBundleReader& reader) {
  FileBytes bytes(path);
  nlohmann::json::sax_parse(bytes.begin(), bytes.end(), &reader);
  if (bytes.failed()) throw Error(errno_message("reading " + path + " failed", EIO));
  return !bytes.saw_nul();
}

BundleVerdict verify_json_bundle(const std::string& path, const VerifierKey* pinned, const SavedCheckpoints* saved) {
  BundleVerdict out;
  auto bad = [&](const std::string& why) {
    out.verdict.ok = false;
    out.verdict.reason = why;
    return out;
  };
  JsonBundleReader first(pinned, saved, nullptr);
  if (!read_json(path, first)) return bad("bundle: it holds a NUL byte");
  if (first.syntax_error || first.format != "flightrec-bundle") throw Error(path + " is not a flightrec bundle");
  if (!first.problem.empty()) return bad("bundle: " + first.problem);
  for (const auto& m : kJsonBundleMembers)
    if (!first.members.count(m)) return bad("bundle: member \"" + m + "\" missing");
  if (first.format_version != kBundleVersion) return bad("unsupported bundle version");
  if (!first.type_problem.empty()) return bad(first.type_problem);
  if (!first.session || !first.public_key) return bad("bundle lacks session, entries or checkpoints");
  if (*first.session < 1) return bad("bundle: session is not a session id (1 or more)");
  out.session = *first.session;
  JsonBundleReader second(pinned, saved, &first.checkpoints);
  JsonBundleReader& done = first.need_second_pass ? second : first;
  if (first.need_second_pass) {
    if (!read_json(path, second)) return bad("the bundle changed while it was read");
    // The file may have changed between the passes: the second read must
    // be as sound as the first.
    if (second.syntax_error || second.format != first.format || !second.problem.empty() ||
        !second.type_problem.empty() || second.session != first.session)
      return bad("the bundle changed while it was read");
  }
  SessionVerifier& v = done.verifier_for(out.session);
  if (done.verified_session != out.session)
    return bad("the bundle says session " + std::to_string(out.session) + " but its entries are of session " +
               std::to_string(done.verified_session));
  if (v.verdict().ok)
    if (auto beyond = done.checkpoint_beyond_end()) v.checkpoint_beyond_end(*beyond);
  out.verdict = v.finish();
  return check_bundle_key(out, *first.public_key);
}

}  // namespace

BundleVerdict verify_bundle_inner(const std::string& path, const VerifierKey* pinned,
                                  const SavedCheckpoints* saved) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read " + path);
  BundleVerdict out;
  auto bad = [&](const std::string& why) {
    out.verdict.ok = false;
    out.verdict.reason = why;
    return out;
  };
  // JSON parsers skip a byte order mark; the format has none.
  char bom[3] = {};
  if (in.read(bom, 3) && std::string_view(bom, 3) == "\xEF\xBB\xBF")
    return bad("bundle: it starts with a byte order mark");
  in.clear();
  in.seekg(0);
  // A JSON Lines header is one short line; a JSON document may be one line
  // of gigabytes: only a short first line is looked at.
  constexpr std::streamsize kHeaderMax = 1 << 20;
  std::string first(size_t(kHeaderMax) + 1, '\0');
  in.getline(first.data(), kHeaderMax + 1);  // at most kHeaderMax bytes and a NUL
  bool short_line = !in.fail();
  // gcount counts the newline, when there was one.
  first.resize(short_line ? size_t(in.gcount()) - (in.eof() ? 0 : 1) : 0);
  if (!short_line) return verify_json_bundle(path, pinned, saved);
  // A line of JSON Lines ends with LF alone and holds no NUL (JSON takes
  // CR for whitespace and a NUL for the end of its input).
  auto stray = [](std::string_view line) { return line.find_first_of(std::string_view("\r\0", 2)) != line.npos; };

  nlohmann::json first_loose = nlohmann::json::parse(first, nullptr, false);
  // (Compared, not value(): a "format" that is not a string must not throw.)
  if (first_loose.is_object() && first_loose.contains("format") && first_loose["format"] == "flightrec-bundle-lines") {
    if (stray(first)) return bad("bundle header: it holds a carriage return or NUL byte");
    nlohmann::json header;
    try {
      header = parse_bundle_json(first, {"format", "format_version", "public_key", "session"});
    } catch (const BadBundle& b) {
      return bad("bundle header: " + b.why);
    }
    if (!header["format_version"].is_number_integer() || header["format_version"] != kBundleVersion)
      return bad("unsupported bundle version");
    // An integer that fits int64 (get<int64_t> would wrap a larger one).
    if (!header["session"].is_number_integer() ||
        (header["session"].is_number_unsigned() && header["session"].get<uint64_t>() > uint64_t(INT64_MAX)) ||
        !header["public_key"].is_string())
      return bad("bundle header: session is not an integer or public_key not a string");
    out.session = header["session"].get<int64_t>();
    if (out.session < 1) return bad("bundle header: session is not a session id (1 or more)");
    SessionVerifier v(out.session, pinned, saved);
    std::string line;
    bool ended_with_newline = !in.eof();
    while (ended_with_newline && std::getline(in, line)) {
      if (in.eof()) {  // a line without its newline: cut short
        ended_with_newline = false;
        break;
      }
      if (stray(line)) return bad("the line after entry " + std::to_string(v.entries()) + " holds a carriage return or NUL byte");
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

  in.close();
  return verify_json_bundle(path, pinned, saved);
}

}  // namespace flightrec::ledger
