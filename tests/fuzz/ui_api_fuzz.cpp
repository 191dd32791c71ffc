// The JSON API of `volt ui` (volt::generator::web::handle), called in-process as the server does.
// Input: "METHOD\nPATH\nCONTENT-TYPE\nBODY". Every answer must be one the API documents (200, 400,
// 404, 405, 415; a 500 is an exception that escaped the generator), and a JSON answer must be JSON.
#include <algorithm>
#include <string>

#include <nlohmann/json.hpp>

#include "fuzz_target.h"
#include "volt/generator/web/api.h"

namespace {

constexpr const char* kTarget = "ui_api";

// The next line of `text` from `pos` (without its '\n'); the rest when there is no '\n'.
std::string next_line(const std::string& text, size_t& pos) {
  const size_t end = std::min(text.find('\n', pos), text.size());
  std::string line = text.substr(pos, end - pos);
  pos = end < text.size() ? end + 1 : end;
  return line;
}

}  // namespace

VOLT_FUZZ_TARGET(ui_api) {
  namespace web = volt::generator::web;
  const std::string text(reinterpret_cast<const char*>(data), size);
  size_t pos = 0;
  web::Request request;
  request.method = next_line(text, pos);
  request.path = next_line(text, pos);
  request.content_type = next_line(text, pos);
  request.body = text.substr(pos);
  web::Response r;
  try {
    r = web::handle(request);
  } catch (const std::exception& e) {
    volt::fuzz::crash(kTarget, std::string("handle() threw, which it never may: ") + e.what());
  }
  if (r.status != 200 && r.status != 400 && r.status != 404 && r.status != 405 && r.status != 415) {
    volt::fuzz::crash(kTarget, "status " + std::to_string(r.status) + " for " + request.method + " " + request.path +
                                   ": " + r.body);
  }
  if (r.content_type == "application/json" &&
      nlohmann::json::parse(r.body, nullptr, /*allow_exceptions=*/false).is_discarded()) {
    volt::fuzz::crash(kTarget, "a JSON answer that is not JSON: " + r.body.substr(0, 200));
  }
  return 0;
}
