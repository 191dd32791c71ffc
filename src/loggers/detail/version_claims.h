#pragma once
// Version folders chosen by the loggers of this process and not created yet, shared by every
// logger kind: two loggers never choose the same version_N by themselves, while a logger that
// follows another (Logger::follow_version) claims the same folder once more.
#include <mutex>
#include <set>
#include <string>

namespace volt::loggers::detail {

std::mutex& version_claims_mutex();
/// Under version_claims_mutex().
std::multiset<std::string>& version_claims();
/// Drops one claim of `dir` (locks).
void release_version_claim(const std::string& dir);

}  // namespace volt::loggers::detail
