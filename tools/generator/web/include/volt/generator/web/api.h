// volt::generator::web — the JSON API and page of `volt ui`, as a pure function of one request, so that it is
// tested without sockets. The API calls only volt::generator's public functions: no rule lives here.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace volt::generator::web {

/// Largest request body the API reads (64 KiB): a full set of options is under 2 KiB.
constexpr std::size_t kMaxBodyBytes = 64 * 1024;

/// One HTTP request, reduced to what the API looks at.
struct Request {
  std::string method;        ///< "GET", "POST", ...
  std::string path;          ///< "/api/render", without the query string
  std::string content_type;  ///< the Content-Type header, "" when absent
  std::string body;          ///< the request body
};

/// One HTTP response.
struct Response {
  int status = 200;
  std::string content_type;
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  ///< extra headers (Content-Disposition, Allow, ...)
};

/// Answers one request. GET / and GET /assets/<file> serve the embedded page; GET /api/schema gives
/// {version, options: option_schema(), templates: templates()}; POST /api/validate, /api/render, /api/zip and
/// /api/notebook take the options as a JSON object (Content-Type: application/json) and answer with
/// validate(), render() + command_line(), zip_archive() or notebook(). Errors are JSON {error, problems?}:
/// 400 for a body that is not a JSON object or options the generator rejects (its problems, one per option),
/// 404 for an unknown path, 405 for a wrong method, 400 for a body over kMaxBodyBytes (as for every refused body), 415 for a body that is
/// not application/json. Never writes to disk.
Response handle(const Request& request);

/// The JSON error body {"error": message} with the status, as every failure of the API answers.
Response error_response(int status, const std::string& message);

}  // namespace volt::generator::web
