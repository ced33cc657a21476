// Credentials in command lines and the command's environment: what is
// redacted before sealing, and which host variables a policy passes.
#include <doctest/doctest.h>

#include <algorithm>

#include "events/secrets.h"
#include "sandbox/apply.h"
#include "policy/policy.h"

using flightrec::events::SecretScrubber;

namespace {

std::string argv(std::initializer_list<std::string> parts) {
  std::string out;
  for (const auto& p : parts) out += p + '\0';
  out.pop_back();
  return out;
}

}  // namespace

TEST_CASE("argv credentials: each known shape redacted, its kind named, the rest kept byte for byte") {
  SecretScrubber s;
  struct Case {
    std::string in, out;
    std::vector<std::string> kinds;
  };
  const std::vector<Case> cases = {
      {argv({"curl", "-H", "Authorization: Bearer abcdef0123456789xyz", "https://x"}),
       argv({"curl", "-H", "Authorization: Bearer [REDACTED]", "https://x"}), {"Authorization"}},
      {argv({"codex", "--key", "sk-proj-ABCDEFGHIJKLMNOPqrstuvwx"}), argv({"codex", "--key", "sk-[REDACTED]"}), {"sk-"}},
      {argv({"git", "push", "https://bob:ghp_0123456789abcdefghijKLMNOP@github.com/x.git"}),
       argv({"git", "push", "https://bob:[REDACTED]@github.com/x.git"}), {"url password"}},
      {argv({"aws", "AKIAIOSFODNN7EXAMPLE"}), argv({"aws", "AKIA[REDACTED]"}), {"AKIA"}},
      {argv({"slack", "xoxb-1234567890-abcdefghij"}), argv({"slack", "xoxb-[REDACTED]"}), {"xoxb-"}},
      {argv({"mysql", "--password=hunter2", "db"}), argv({"mysql", "--password=[REDACTED]", "db"}), {"--password"}},
      {argv({"tool", "--api-key", "plainvalue", "next"}), argv({"tool", "--api-key", "[REDACTED]", "next"}), {"--api-key"}},
      {argv({"env", "OPENAI_API_KEY=abc123", "run"}), argv({"env", "OPENAI_API_KEY=[REDACTED]", "run"}), {"OPENAI_API_KEY"}},
      {argv({"sh", "-c", "echo '-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\n-----END OPENSSH PRIVATE KEY-----'"}),
       argv({"sh", "-c", "echo '-----BEGIN OPENSSH PRIVATE KEY-----[REDACTED]-----END OPENSSH PRIVATE KEY-----'"}),
       {"private key"}},
      {argv({"curl", "-u", "bob:hunter2", "-H", "X-Api-Key: abcdef", "https://x"}),
       argv({"curl", "-u", "bob:[REDACTED]", "-H", "X-Api-Key: [REDACTED]", "https://x"}), {"-u", "X-Api-Key"}},
      {argv({"env", "MYSQL_PWD=pw1", "npm", "config", "set", "//r/:_authToken=0123-4567"}),
       argv({"env", "MYSQL_PWD=[REDACTED]", "npm", "config", "set", "//r/:_authToken=[REDACTED]"}), {"MYSQL_PWD", "_authToken"}},
      {argv({"curl", "-H", "Authorization: token_abcdefghijklmnop"}), argv({"curl", "-H", "Authorization: [REDACTED]"}),
       {"Authorization"}},
  };
  for (const auto& c : cases) {
    std::string text = c.in;
    auto kinds = s.scrub(text);
    CAPTURE(c.in);
    CHECK(text == c.out);
    CHECK(kinds == c.kinds);
  }
}

TEST_CASE("argv credentials: look-alikes are kept") {
  SecretScrubber s;
  for (const std::string& keep : {argv({"ls", "-la", "desk-top-0123456789abcdef"}), argv({"python3", "-c", "max_tokens=100"}),
                                  argv({"echo", "sk-short"}), argv({"git", "clone", "https://github.com/a/b.git"}),
                                  argv({"grep", "--token"}), argv({"echo", "Bearer", "x"})}) {
    std::string text = keep;
    CAPTURE(keep);
    CHECK(s.scrub(text).empty());
    CHECK(text == keep);
  }
}

TEST_CASE("argv credentials: a policy's own prefixes, and a megabyte of hostile text in one pass") {
  SecretScrubber s({"myco_"});
  std::string text = argv({"deploy", "myco_abcdefgh12345"});
  CHECK(s.scrub(text) == std::vector<std::string>{"myco_"});
  CHECK(text == argv({"deploy", "myco_[REDACTED]"}));
  std::string big(1 << 20, '=');
  big += "password=x";
  std::string copy = big;
  CHECK(s.scrub(copy) == std::vector<std::string>{"password"});
  CHECK(copy.ends_with("password=[REDACTED]"));
}

TEST_CASE("protected paths: the policy's list, and every git directory or gitfile at any depth") {
  using flightrec::sandbox::protected_path;
  const std::vector<std::string> list = {".claude", ".vscode"};
  CHECK(protected_path("/w/.claude/settings.json", "/w", list));
  CHECK(protected_path("/w/.vscode", "/w", list));
  CHECK_FALSE(protected_path("/w/.claudex", "/w", list));
  CHECK_FALSE(protected_path("/w/src/main.c", "/w", list));
  // git reads hooks and config wherever a git directory points: any of them.
  CHECK(protected_path("/w/.git", "/w", {}));
  CHECK(protected_path("/w/.git/commondir", "/w", {}));
  CHECK(protected_path("/w/sub/.git", "/w", {}));
  CHECK(protected_path("/w/vendor/lib/.git/hooks/post-checkout", "/w", {}));
  CHECK_FALSE(protected_path("/w/.gitignore", "/w", {}));
  CHECK_FALSE(protected_path("/w/docs/.github/workflows/ci.yml", "/w", {}));
}

TEST_CASE("env: the policy's pass list, globs, and names that look like secrets") {
  using namespace flightrec::policy;
  CHECK(secret_env_name("OPENAI_API_KEY"));
  CHECK(secret_env_name("GITHUB_TOKEN"));
  CHECK(secret_env_name("DB_PASSWORD"));
  CHECK(secret_env_name("aws_secret_access_key"));
  CHECK_FALSE(secret_env_name("PATH"));
  CHECK_FALSE(secret_env_name("KEYBOARD_LAYOUT"));
  Policy p = parse("version: 1\nname: t\nenv:\n  pass: [\"LC_*\", \"*\", NAMED_TOKEN]\n  set: {HOME: /h, A: b}\n", "t.yaml");
  std::string e1 = "LC_ALL=C", e2 = "FOO=1", e3 = "X_API_KEY=s", e4 = "NAMED_TOKEN=t", e5 = "HOME=/root", e6 = "\xff=1";
  char* host[] = {e1.data(), e2.data(), e3.data(), e4.data(), e5.data(), e6.data(), nullptr};
  std::vector<std::string> passed;
  auto env = sandbox_env(p, host, &passed);
  CHECK(env == std::vector<std::string>{"LC_ALL=C", "FOO=1", "NAMED_TOKEN=t", "HOME=/h", "A=b"});
  CHECK(passed == std::vector<std::string>{"LC_ALL", "FOO", "NAMED_TOKEN"});
  CHECK_THROWS_WITH_AS(parse("version: 1\nname: t\nenv:\n  pass: [\"A-B\"]\n", "t.yaml"),
                       "t.yaml:4: env.pass: 'A-B' is not a variable name or a glob of one (A-Z a-z 0-9 _ *)", PolicyError);
  CHECK_THROWS_WITH_AS(parse("version: 1\nname: t\nfilesystem:\n  protect: [../x]\n", "t.yaml"),
                       "t.yaml:4: filesystem.protect: '../x' must be a path relative to the work directory, without '.', '..' or empty parts",
                       PolicyError);
  CHECK_THROWS_AS(parse("version: 1\nname: t\nfilesystem:\n  protect: [/abs]\n", "t.yaml"), PolicyError);
  CHECK_THROWS_AS(parse("version: 1\nname: t\nfilesystem:\n  work_dir_mode: live\n", "t.yaml"), PolicyError);
  Policy agent = load("agent");
  CHECK(agent.filesystem.work_dir_mode == WorkDirMode::Write);
  CHECK(std::find(agent.filesystem.protect.begin(), agent.filesystem.protect.end(), ".git") != agent.filesystem.protect.end());
}
