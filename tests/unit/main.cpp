#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

namespace {

// Every failed check again, in a few lines at the very end of the run: a
// long run's output (children's stdout among it) may be seen only by its
// head and tail, and a failure in the middle must not be lost there.
class FailureDigest : public doctest::IReporter {
 public:
  explicit FailureDigest(const doctest::ContextOptions&) {}

  void log_assert(const doctest::AssertData& a) override {
    if (!a.m_failed) return;
    std::lock_guard<std::mutex> lock(mutex_);
    std::string line = std::string(a.m_file) + ":" + std::to_string(a.m_line) + ": " + a.m_expr;
    if (a.m_threw) line += " (threw: " + std::string(a.m_exception.c_str()) + ")";
    else if (a.m_decomp.size() > 0) line += " [" + std::string(a.m_decomp.c_str()) + "]";
    failures_.push_back(test_ + ": " + line);
  }
  void test_case_exception(const doctest::TestCaseException& e) override {
    std::lock_guard<std::mutex> lock(mutex_);
    failures_.push_back(test_ + ": threw " + e.error_string.c_str());
  }
  void test_case_start(const doctest::TestCaseData& t) override {
    std::lock_guard<std::mutex> lock(mutex_);  // a test's threads may be checking still
    test_ = t.m_name;
    // What the cases before printed is out before this one starts: a run
    // cut off by a time limit (ctest's, through a pipe) shows where it was.
    std::fflush(stdout);
  }
  void test_run_end(const doctest::TestRunStats&) override {
    if (failures_.empty()) return;
    std::fprintf(stdout, "\n[failure digest] %zu failed checks:\n", failures_.size());
    for (const auto& f : failures_) std::fprintf(stdout, "  %.600s\n", f.c_str());
    std::fflush(stdout);
  }

  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}

 private:
  std::mutex mutex_;
  std::string test_;
  std::vector<std::string> failures_;
};

}  // namespace

REGISTER_LISTENER("failure-digest", 1, FailureDigest);
