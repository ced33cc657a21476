#include "policy/name_ask_messages.h"

#include <nlohmann/json.hpp>

#include "policy/network.h"

namespace flightrec::policy {
namespace {

using nlohmann::json;

constexpr size_t kMaxClient = 64, kMaxType = 16;

bool string_field(const json& j, const char* key, size_t max, std::string* out) {
  if (!j.contains(key) || !j[key].is_string() || j[key].get_ref<const std::string&>().size() > max) return false;
  *out = j[key].get<std::string>();
  return true;
}

bool number_field(const json& j, const char* key, uint64_t* out) {
  if (!j.contains(key) || !j[key].is_number_unsigned()) return false;
  *out = j[key].get<uint64_t>();
  return true;
}

}  // namespace

std::string encode(const NameAsk& a) {
  return json{{"tag", a.tag}, {"name", a.name}, {"qtype", a.qtype}, {"client", a.client}}.dump(
      -1, ' ', false, json::error_handler_t::replace);
}

std::string encode(const NameAnswer& a) {
  json j = {{"tag", a.tag}, {"ask", a.ask}};
  if (a.grant) j.update({{"grant", a.grant}, {"name", a.name}, {"port", a.port}, {"until_ns", a.until_ns}});
  else j["denied"] = a.denied;
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::optional<NameAsk> parse_name_ask(std::string_view msg) {
  json j = json::parse(msg, nullptr, false);
  NameAsk a;
  if (!j.is_object() || j.size() != 4 || !number_field(j, "tag", &a.tag) || !string_field(j, "name", 253, &a.name) ||
      !string_field(j, "qtype", kMaxType, &a.qtype) || !string_field(j, "client", kMaxClient, &a.client))
    return std::nullopt;
  auto name = policy::normal_host_name(a.name);
  if (!name || *name != a.name) return std::nullopt;
  return a;
}

std::optional<NameAnswer> parse_name_answer(std::string_view msg) {
  json j = json::parse(msg, nullptr, false);
  NameAnswer a;
  if (!j.is_object() || !number_field(j, "tag", &a.tag) || !number_field(j, "ask", &a.ask)) return std::nullopt;
  if (j.contains("denied")) {
    if (j.size() != 3 || !string_field(j, "denied", 1000, &a.denied)) return std::nullopt;
    return a;
  }
  uint64_t port = 0;
  if (j.size() != 6 || !number_field(j, "grant", &a.grant) || a.grant == 0 || !string_field(j, "name", 255, &a.name) ||
      !number_field(j, "port", &port) || port > 65535 || !number_field(j, "until_ns", &a.until_ns))
    return std::nullopt;
  a.port = uint16_t(port);
  auto name = policy::normal_host_name(a.name, true);
  if (!name || *name != a.name) return std::nullopt;
  return a;
}

}  // namespace flightrec::policy
