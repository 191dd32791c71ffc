#include "loggers/detail/version_claims.h"

namespace volt::loggers::detail {

std::mutex& version_claims_mutex() {
  static std::mutex m;
  return m;
}

std::multiset<std::string>& version_claims() {
  static std::multiset<std::string> claims;
  return claims;
}

void release_version_claim(const std::string& dir) {
  std::lock_guard<std::mutex> lock(version_claims_mutex());
  auto& claims = version_claims();
  const auto it = claims.find(dir);
  if (it != claims.end()) claims.erase(it);
}

}  // namespace volt::loggers::detail
