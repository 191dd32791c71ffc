#include "volt/generator/web/api.h"

#include <cctype>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedded_assets.h"
#include "volt/core/strict_json.h"
#include "volt/generator/generator.h"

namespace volt::generator::web {
namespace {

using nlohmann::json;

// The page may only load what the binary serves: no CDN, no inline script.
constexpr const char* kContentSecurityPolicy =
    "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; "
    "object-src 'none'; base-uri 'none'; frame-ancestors 'none'";

json problems_json(const std::vector<Problem>& problems) {
  json out = json::array();
  for (const auto& p : problems) out.push_back({{"option", p.option}, {"message", p.message}});
  return out;
}

Response json_response(int status, const json& body) {
  Response r;
  r.status = status;
  r.content_type = "application/json";
  // Invalid UTF-8 in a user's string becomes U+FFFD instead of an exception.
  r.body = body.dump(-1, ' ', false, json::error_handler_t::replace);
  return r;
}

std::string content_type_for(const std::string& file) {
  auto ends = [&](const std::string& suffix) {
    return file.size() >= suffix.size() && file.compare(file.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (ends(".html")) return "text/html; charset=utf-8";
  if (ends(".js")) return "text/javascript; charset=utf-8";
  if (ends(".css")) return "text/css; charset=utf-8";
  if (ends(".svg")) return "image/svg+xml";
  return "application/octet-stream";
}

// A file name for Content-Disposition: the project name with anything outside [A-Za-z0-9._-] replaced.
std::string download_name(const std::string& name, const std::string& extension) {
  std::string out;
  for (char c : name) {
    const bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    out += ok ? c : '_';
  }
  if (out.empty() || out[0] == '.') out = "project" + out;
  return out + extension;
}

bool is_json_content_type(const std::string& content_type) {
  const std::string media = content_type.substr(0, content_type.find(';'));
  std::string lower;
  for (char c : media) {
    if (c != ' ' && c != '\t') lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return lower == "application/json";
}

Response serve_asset(const std::string& file) {
  const auto& assets = detail::embedded_assets();
  const auto it = assets.find(file);
  if (it == assets.end()) return error_response(404, "no page file '" + file + "'; the page is at /");
  Response r;
  r.content_type = content_type_for(file);
  r.body = it->second;
  r.headers.emplace_back("Content-Security-Policy", kContentSecurityPolicy);
  r.headers.emplace_back("Cache-Control", "no-cache");
  return r;
}

// Volt's documentation the page links to, as plain text (Markdown reads as it is; a browser shows text/plain
// instead of downloading it).
Response serve_doc(const std::string& file) {
  const auto& docs = detail::embedded_docs();
  const auto it = docs.find(file);
  if (it == docs.end()) {
    std::string known;
    for (const auto& [name, text] : docs) known += (known.empty() ? "" : ", ") + ("/docs/" + name);
    return error_response(404, "no document '" + file + "' in volt ui; it serves " + known +
                                   " (the rest of docs/ is in the Volt sources)");
  }
  Response r;
  r.content_type = "text/plain; charset=utf-8";
  r.body = it->second;
  r.headers.emplace_back("Content-Security-Policy", kContentSecurityPolicy);
  r.headers.emplace_back("X-Content-Type-Options", "nosniff");
  r.headers.emplace_back("Cache-Control", "no-cache");
  return r;
}

// The options of a POST body, or the error response that rejects it.
struct Parsed {
  json options;
  std::optional<Response> error;
};

Parsed parse_options(const Request& request) {
  Parsed out;
  if (request.body.size() > kMaxBodyBytes) {
    out.error =
        error_response(400, "the request body has " + std::to_string(request.body.size()) + " bytes; the limit is " +
                                std::to_string(kMaxBodyBytes) + " bytes (a full set of options is well under 2 KiB)");
    return out;
  }
  if (!is_json_content_type(request.content_type)) {
    out.error = error_response(
        415, "the body must be JSON options sent with Content-Type: application/json; got " +
                 (request.content_type.empty() ? std::string("no Content-Type") : "'" + request.content_type + "'"));
    return out;
  }
  // A JSON parser keeps the last of two equal keys, and a value nested very deep overflows the stack when it
  // is printed or copied: a body that sets an option twice or nests deeper than 16 levels is refused.
  json body;
  try {
    body = parse_strict_json(request.body, 16);
  } catch (const StrictJsonError& e) {
    if (e.kind == StrictJsonError::Kind::kTooDeep) {
      out.error = error_response(400, "the body is nested deeper than " + std::to_string(e.depth) +
                                          " levels; send the options as one flat JSON object");
      return out;
    }
    const std::string key = e.key;
    out.error = json_response(
        400, {{"error", "the body sets '" + key + "' twice; send each option once"},
              {"problems", json::array({{{"option", key}, {"message", "set twice in the body; send it once"}}})}});
    return out;
  } catch (const json::exception&) {
    out.error = error_response(400,
                               "the body is not valid JSON; send the options as one JSON object, e.g. "
                               "{\"template\": \"image-classification\", \"max_epochs\": 3}");
    return out;
  }
  if (!body.is_object()) {
    out.error = error_response(
        400, std::string("the body must be a JSON object of options (key -> value); got a ") + body.type_name());
    return out;
  }
  out.options = std::move(body);
  return out;
}

// Options the generator refuses (an unknown key, a bad value, an impossible combination). /api/validate and
// /api/render answer them with 200: the request was understood and the answer is the generator's judgement,
// which the page shows next to the fields (a 4xx would be a console error for every refused choice). The
// downloads cannot make a file of them and answer 400.
Response problems_response(int status, const Validation& v) {
  json body = {{"problems", problems_json(v.errors)}, {"forced", problems_json(v.forced)}, {"options", v.options}};
  if (status != 200) {
    std::string message = v.errors.size() == 1 ? "1 problem with the options:"
                                               : std::to_string(v.errors.size()) + " problems with the options:";
    for (const auto& p : v.errors) message += "\n" + p.option + ": " + p.message;
    body["error"] = message;
  }
  return json_response(status, body);
}

Response api_post(const std::string& endpoint, const json& options) {
  const bool download = endpoint == "zip" || endpoint == "notebook";
  const int refused = download ? 400 : 200;
  const Validation v = validate(options);
  if (!v.errors.empty()) return problems_response(refused, v);
  if (endpoint == "validate") {
    return json_response(200,
                         {{"options", v.options}, {"problems", json::array()}, {"forced", problems_json(v.forced)}});
  }
  try {
    const Project project = render(options);
    if (endpoint == "render") {
      return json_response(200, {{"name", project.name},
                                 {"files", project.files},
                                 {"command", command_line(options)},
                                 {"options", v.options},
                                 {"problems", json::array()},
                                 {"forced", problems_json(v.forced)}});
    }
    Response r;
    if (endpoint == "zip") {
      r.content_type = "application/zip";
      r.body = zip_archive(project);
      r.headers.emplace_back("Content-Disposition",
                             "attachment; filename=\"" + download_name(project.name, ".zip") + "\"");
    } else {
      r.content_type = "application/x-ipynb+json";
      // The options as sent, as `volt new --notebook` passes them: the notebook's recorded command is then the
      // page's and the CLI's, without the values the generator forced (those follow from the others).
      r.body = notebook(project, options);
      r.headers.emplace_back("Content-Disposition",
                             "attachment; filename=\"" + download_name(project.name, ".ipynb") + "\"");
    }
    return r;
  } catch (const GeneratorError& e) {
    Validation again;
    again.options = v.options;
    again.errors = e.problems();
    again.forced = v.forced;
    return problems_response(refused, again);
  }
}

}  // namespace

Response error_response(int status, const std::string& message) {
  return json_response(status, {{"error", message}});
}

Response handle(const Request& request) {
  try {
    const std::string& path = request.path;
    const bool get = request.method == "GET" || request.method == "HEAD";
    auto wrong_method = [&](const char* allowed) {
      Response r = error_response(405, request.method + " is not allowed on " + path + "; use " + allowed);
      r.headers.emplace_back("Allow", allowed);
      return r;
    };
    if (path == "/" || path == "/index.html") return get ? serve_asset("index.html") : wrong_method("GET");
    if (path.rfind("/assets/", 0) == 0) return get ? serve_asset(path.substr(8)) : wrong_method("GET");
    // Browsers ask for /favicon.ico whatever the page's <link rel="icon"> says (an image opened on its own).
    if (path == "/favicon.ico") return get ? serve_asset("favicon.svg") : wrong_method("GET");
    if (path.rfind("/docs/", 0) == 0) return get ? serve_doc(path.substr(6)) : wrong_method("GET");
    if (path == "/api/schema") {
      if (!get) return wrong_method("GET");
      return json_response(200, {{"version", version()}, {"options", option_schema()}, {"templates", templates()}});
    }
    for (const char* endpoint : {"validate", "render", "zip", "notebook"}) {
      if (path == std::string("/api/") + endpoint) {
        if (request.method != "POST") return wrong_method("POST");
        Parsed parsed = parse_options(request);
        if (parsed.error) return *parsed.error;
        return api_post(endpoint, parsed.options);
      }
    }
    return error_response(404, "no such page or API: " + path +
                                   " (the page is at /; the API is GET /api/schema and POST /api/validate, "
                                   "/api/render, /api/zip, /api/notebook)");
  } catch (const std::exception& e) {
    return error_response(500, std::string("internal error in volt ui: ") + e.what());
  }
}

}  // namespace volt::generator::web
