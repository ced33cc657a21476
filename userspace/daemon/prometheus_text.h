#pragma once
// Prometheus's text exposition format, written: metric families (HELP and
// TYPE) and their samples, label values escaped.
#include <string>

namespace flightrec::daemon {

class PrometheusText {
 public:
  void family(const char* name, const char* type, const char* help);
  // labels: `key="value",...`, each value made with label().
  void sample(const std::string& name, const std::string& labels, double value);
  // A label value: valid UTF-8, with \\, \" and \n escaped.
  static std::string label(const std::string& value);
  const std::string& text() const { return out_; }

 private:
  std::string out_;
};

}  // namespace flightrec::daemon
