#pragma once
// The rule ids violation entries name (policies/README.md, "Rule ids"), so
// a reader's --rule can be checked before a record is searched for it.
#include <string>
#include <vector>

namespace flightrec::policy {

// The fixed ids, each family ("network") included.
const std::vector<std::string>& known_rule_ids();

// Whether `id` is a fixed id or family, or one of the made ones:
// seccomp.deny.NAME / seccomp.allow.NAME (NAME a syscall), oci.syscalls[N],
// on_violation:RULE. Ids a policy names itself (`id:`) are not known here.
bool is_known_rule_id(const std::string& id);

}  // namespace flightrec::policy
