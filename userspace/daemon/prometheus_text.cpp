#include "daemon/prometheus_text.h"

#include <cstdio>

#include "common/text.h"

namespace flightrec::daemon {

void PrometheusText::family(const char* name, const char* type, const char* help) {
  out_ += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void PrometheusText::sample(const std::string& name, const std::string& labels, double value) {
  char num[64];
  snprintf(num, sizeof(num), "%.17g", value);
  out_ += name + (labels.empty() ? "" : "{" + labels + "}") + " " + num + "\n";
}

std::string PrometheusText::label(const std::string& value) {
  std::string out;
  for (char c : printable(value)) {
    if (c == '\\' || c == '"') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace flightrec::daemon
