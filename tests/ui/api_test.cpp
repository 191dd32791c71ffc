// The JSON API of `volt ui` as a function of one request: status codes, messages, limits, and that every answer
// is the generator library's own (the same files, problems and forced values as calling it directly).
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "volt/generator/generator.h"
#include "volt/generator/web/api.h"

namespace web = volt::generator::web;
namespace gen = volt::generator;
using nlohmann::json;

namespace {

web::Response post(const std::string& path, const std::string& body,
                   const std::string& content_type = "application/json") {
  return web::handle({"POST", path, content_type, body});
}
web::Response post(const std::string& path, const json& options) {
  return post(path, options.dump());
}
web::Response get(const std::string& path) {
  return web::handle({"GET", path, "", ""});
}

std::string header(const web::Response& r, const std::string& name) {
  for (const auto& [k, v] : r.headers) {
    if (k == name) return v;
  }
  return "";
}

json body_json(const web::Response& r) {
  return json::parse(r.body);
}

std::string first_template() {
  return gen::templates().at(0).at("id");
}

json problems_of(const gen::Validation& v) {
  json out = json::array();
  for (const auto& p : v.errors) out.push_back({{"option", p.option}, {"message", p.message}});
  return out;
}

}  // namespace

TEST(UiApi, ServesThePageAndItsAssetsWithAStrictContentPolicy) {
  const auto page = get("/");
  ASSERT_EQ(page.status, 200);
  EXPECT_EQ(page.content_type, "text/html; charset=utf-8");
  EXPECT_NE(page.body.find("<script src=\"/assets/app.js\""), std::string::npos);
  EXPECT_NE(header(page, "Content-Security-Policy").find("default-src 'self'"), std::string::npos);
  for (const char* asset : {"/assets/app.js", "/assets/highlight.js", "/assets/style.css"}) {
    const auto r = get(asset);
    EXPECT_EQ(r.status, 200) << asset;
    EXPECT_GT(r.body.size(), 500u) << asset;
  }
  EXPECT_EQ(get("/assets/app.js").content_type, "text/javascript; charset=utf-8");
  // Nothing outside the embedded files: no path walks out of them.
  EXPECT_EQ(get("/assets/../CMakeLists.txt").status, 404);
  EXPECT_EQ(get("/assets/missing.js").status, 404);
}

TEST(UiApi, ServesDebiansPrismAsOneAssetThatHighlightsOnlyWhenAsked) {
  const auto page = get("/");
  const size_t prism = page.body.find("<script src=\"/assets/prism.js\"");
  ASSERT_NE(prism, std::string::npos);
  EXPECT_LT(prism, page.body.find("<script src=\"/assets/highlight.js\"")) << "Prism loads before the page uses it";
  const auto r = get("/assets/prism.js");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.content_type, "text/javascript; charset=utf-8");
  EXPECT_EQ(r.body.rfind("window.Prism = { manual: true", 0), 0u) << r.body.substr(0, 80);
  for (const char* language : {"cpp", "cmake", "yaml", "bash", "python", "json", "markdown"}) {
    EXPECT_NE(r.body.find(std::string("Prism.languages.") + language + "="), std::string::npos) << language;
  }
  EXPECT_NE(r.body.find("@license MIT"), std::string::npos) << "Prism's licence header is kept";
}

TEST(UiApi, ServesAFaviconSoThatLoadingThePageHasNo404) {
  const auto page = get("/");
  EXPECT_NE(page.body.find("<link rel=\"icon\" href=\"/assets/favicon.svg\""), std::string::npos);
  const auto icon = get("/assets/favicon.svg");
  ASSERT_EQ(icon.status, 200);
  EXPECT_EQ(icon.content_type, "image/svg+xml");
  EXPECT_EQ(icon.body.rfind("<svg", 0), 0u) << icon.body;
  // Asked for by browsers on their own.
  const auto ico = get("/favicon.ico");
  EXPECT_EQ(ico.status, 200);
  EXPECT_EQ(ico.body, icon.body);
}

TEST(UiApi, ServesTheDocsThePageLinksToFromTheBinaryAsText) {
  const auto page = get("/");
  for (const std::string doc : {"generator.md", "ui.md"}) {
    EXPECT_NE(page.body.find("href=\"/docs/" + doc + "\""), std::string::npos) << doc;
    const auto r = get("/docs/" + doc);
    ASSERT_EQ(r.status, 200) << doc;
    EXPECT_EQ(r.content_type, "text/plain; charset=utf-8");
    EXPECT_EQ(header(r, "X-Content-Type-Options"), "nosniff");
    std::ifstream in(std::string(VOLT_UI_DOCS_DIR) + "/" + doc, std::ios::binary);
    ASSERT_TRUE(in) << doc;
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(r.body, text) << doc << ": the embedded copy is the file of the sources";
  }
  const auto missing = get("/docs/tpu.md");
  EXPECT_EQ(missing.status, 404);
  EXPECT_NE(json::parse(missing.body)["error"].get<std::string>().find("/docs/generator.md, /docs/ui.md"),
            std::string::npos)
      << missing.body;
  EXPECT_EQ(get("/docs/../CMakeLists.txt").status, 404);
  EXPECT_EQ(post("/docs/ui.md", json::object()).status, 405);
}

TEST(UiApi, SchemaIsTheGeneratorsSchemaAndTemplates) {
  const auto r = get("/api/schema");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.content_type, "application/json");
  const json body = body_json(r);
  EXPECT_EQ(body["options"], gen::option_schema());
  EXPECT_EQ(body["templates"], gen::templates());
  EXPECT_EQ(body["version"], gen::version());
}

TEST(UiApi, RenderAnswersTheGeneratorsFilesAndCommand) {
  const json options = {{"template", first_template()}, {"name", "demo"}, {"max_epochs", 7}};
  const auto r = post("/api/render", options);
  ASSERT_EQ(r.status, 200) << r.body;
  const json body = body_json(r);
  const gen::Project project = gen::render(options);
  EXPECT_EQ(body["name"], "demo");
  EXPECT_EQ(body["files"], json(project.files));
  EXPECT_EQ(body["command"], gen::command_line(options));
  EXPECT_NE(body["command"].get<std::string>().find("--max-epochs 7"), std::string::npos);
  EXPECT_EQ(body["options"]["max_epochs"], 7);
}

TEST(UiApi, XlaTpuForcesSpawnAndOneProcessPerChipWithReasons) {
  const json options = {{"template", first_template()}, {"backend", "xla-tpu"}};
  const auto r = post("/api/validate", options);
  ASSERT_EQ(r.status, 200) << r.body;
  const json body = body_json(r);
  EXPECT_EQ(body["options"]["distributed"], "spawn");
  EXPECT_EQ(body["options"]["nproc_per_node"], 8);
  EXPECT_EQ(body["options"]["accelerator"], "tpu");
  std::map<std::string, std::string> forced;
  for (const auto& f : body["forced"]) forced[f["option"]] = f["message"];
  ASSERT_TRUE(forced.count("distributed")) << body.dump();
  ASSERT_TRUE(forced.count("nproc_per_node")) << body.dump();
  EXPECT_NE(forced["distributed"].find("backend=xla-tpu"), std::string::npos);
  // Exactly what the library says, no rule of the server's own.
  json expected_forced = json::array();
  for (const auto& p : gen::validate(options).forced)
    expected_forced.push_back({{"option", p.option}, {"message", p.message}});
  EXPECT_EQ(body["forced"], expected_forced);
}

TEST(UiApi, UnknownFieldIsAProblemNamingItAnswered200ByValidateAndRenderAnd400ByTheDownloads) {
  // The page asks /api/render on every change: a refused choice is the generator's answer, not an HTTP error
  // (which the browser would log as a console error). A download cannot be made of it.
  const json options = {{"template", first_template()}, {"colour", "red"}};
  for (const char* path : {"/api/validate", "/api/render", "/api/zip", "/api/notebook"}) {
    const bool download = std::string(path) == "/api/zip" || std::string(path) == "/api/notebook";
    const auto r = post(path, options);
    ASSERT_EQ(r.status, download ? 400 : 200) << path;
    EXPECT_EQ(r.content_type, "application/json") << path;
    const json body = body_json(r);
    ASSERT_EQ(body["problems"].size(), 1u) << body.dump();
    EXPECT_EQ(body["problems"][0]["option"], "colour");
    EXPECT_FALSE(body.contains("files")) << path;
    if (download) {
      EXPECT_NE(body["error"].get<std::string>().find("colour: unknown option"), std::string::npos) << body.dump();
    } else {
      EXPECT_FALSE(body.contains("error")) << body.dump();
      EXPECT_NE(body["problems"][0]["message"].get<std::string>().find("unknown option"), std::string::npos);
    }
  }
}

TEST(UiApi, BadValuesAreProblemsWithTheGeneratorsMessages) {
  const json options = {{"template", first_template()}, {"backend", "mpi"}, {"batch_size", 0}, {"lr", "fast"}};
  const auto r = post("/api/render", options);
  ASSERT_EQ(r.status, 200);
  const json body = body_json(r);
  EXPECT_EQ(body["problems"], problems_of(gen::validate(options)));
  std::set<std::string> keys;
  for (const auto& p : body["problems"]) keys.insert(p["option"]);
  EXPECT_EQ(keys, (std::set<std::string>{"backend", "batch_size", "lr"}));
  json expected_forced = json::array();
  for (const auto& p : gen::validate(options).forced)
    expected_forced.push_back({{"option", p.option}, {"message", p.message}});
  EXPECT_EQ(body["forced"], expected_forced);
  const auto zip = post("/api/zip", options);
  ASSERT_EQ(zip.status, 400);
  EXPECT_NE(body_json(zip)["error"].get<std::string>().find("3 problems"), std::string::npos);
  EXPECT_EQ(body_json(zip)["problems"], body["problems"]);
}

TEST(UiApi, NullOrAWrongJsonTypeIsAProblemNamingTheField) {
  struct Case {
    const char* body;
    const char* option;
    const char* phrase;
  };
  for (const Case& c :
       {Case{R"({"template": null})", "template", "got null"}, Case{R"({"name": 5})", "name", "expects text, got 5"},
        Case{R"({"max_epochs": null})", "max_epochs", "got null"},
        Case{R"({"max_epochs": "3x"})", "max_epochs", "'3x'"},
        Case{R"({"lr": [1]})", "lr", "expects a number, got [1]"},
        Case{R"({"deterministic": {}})", "deterministic", "expects true or false"}}) {
    const auto r = post("/api/render", std::string(c.body));
    ASSERT_EQ(r.status, 200) << c.body;
    const json body = body_json(r);
    ASSERT_EQ(body["problems"].size(), 1u) << body.dump();
    EXPECT_EQ(body["problems"][0]["option"], c.option) << c.body;
    EXPECT_NE(body["problems"][0]["message"].get<std::string>().find(c.phrase), std::string::npos) << body.dump();
  }
}

TEST(UiApi, OutOfRangeSeedIsReportedWithTheValueGiven) {
  // 2^64 - 1 read as int64 was -1, and 1e20 cast to int64 was -2^63: the message named a value nobody sent.
  for (const std::string given :
       {"18446744073709551615", "100000000000000000000", "4294967296", "\"99999999999999999999\""}) {
    const auto r = post("/api/render", R"({"seed": )" + given + "}");
    ASSERT_EQ(r.status, 200) << given;
    const json body = body_json(r);
    ASSERT_EQ(body["problems"].size(), 1u) << body.dump();
    const std::string message = body["problems"][0]["message"];
    EXPECT_EQ(body["problems"][0]["option"], "seed");
    const std::string shown = given == "100000000000000000000" ? "1e+20" : given.substr(given[0] == '"', 20);
    EXPECT_NE(message.find(shown), std::string::npos) << message;
    EXPECT_NE(message.find("4294967295"), std::string::npos) << message;
    EXPECT_EQ(message.find("-1 "), std::string::npos) << message;
    EXPECT_EQ(message.find("-9223372036854775808"), std::string::npos) << message;
  }
}

TEST(UiApi, OptionSetTwiceInTheBodyIs400NamingIt) {
  const auto r = post("/api/render", std::string(R"({"template": "gan", "template": "minimal"})"));
  ASSERT_EQ(r.status, 400);
  const json body = body_json(r);
  EXPECT_EQ(body["problems"][0]["option"], "template");
  EXPECT_NE(body["error"].get<std::string>().find("'template' twice"), std::string::npos) << body.dump();
}

TEST(UiApi, DeeplyNestedBodyIs400NotAStackOverflow) {
  // 30000 nested arrays fit in 64 KiB; printing one in a message recursed once per level.
  const std::string deep = R"({"template": )" + std::string(30000, '[') + std::string(30000, ']') + "}";
  const auto r = post("/api/render", deep);
  ASSERT_EQ(r.status, 400);
  EXPECT_NE(body_json(r)["error"].get<std::string>().find("nested deeper than 16 levels"), std::string::npos) << r.body;
}

TEST(UiApi, ImpossibleCombinationIsAnswered200WithTheProblemOnTheFieldThatWasSet) {
  // The user asked for launch, xla-tpu needs spawn: an error on `distributed`, not a silent change.
  const json options = {{"template", first_template()}, {"backend", "xla-tpu"}, {"distributed", "launch"}};
  for (const char* path : {"/api/validate", "/api/render"}) {
    const auto r = post(path, options);
    ASSERT_EQ(r.status, 200) << path;
    const json body = body_json(r);
    EXPECT_EQ(body["problems"], problems_of(gen::validate(options)));
    ASSERT_FALSE(body["problems"].empty());
    EXPECT_EQ(body["problems"][0]["option"], "distributed");
    EXPECT_EQ(body["options"], gen::validate(options).options);
    EXPECT_FALSE(body.contains("files")) << path;
  }
  EXPECT_EQ(post("/api/notebook", options).status, 400);
}

TEST(UiApi, MalformedBodiesAre400) {
  auto error_of = [](const web::Response& r) { return json::parse(r.body)["error"].get<std::string>(); };
  const auto not_json = post("/api/render", std::string("{\"template\": "));
  EXPECT_EQ(not_json.status, 400);
  EXPECT_NE(error_of(not_json).find("not valid JSON"), std::string::npos);
  const auto array = post("/api/render", std::string("[1, 2]"));
  EXPECT_EQ(array.status, 400);
  EXPECT_NE(error_of(array).find("must be a JSON object"), std::string::npos);
  EXPECT_NE(error_of(array).find("array"), std::string::npos);
  const auto empty = post("/api/validate", std::string(""));
  EXPECT_EQ(empty.status, 400);
}

TEST(UiApi, BodyOverTheLimitIs400) {
  const std::string big = "{\"name\": \"" + std::string(web::kMaxBodyBytes, 'a') + "\"}";
  const auto r = post("/api/render", big);
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(json::parse(r.body)["error"].get<std::string>().find("the limit is 65536 bytes"), std::string::npos);
  // Just under the limit is read (and then judged by the generator).
  std::string under = "{\"name\": \"x\"}";
  under.append(web::kMaxBodyBytes - under.size(), ' ');
  EXPECT_EQ(post("/api/validate", under).status, 200);
}

TEST(UiApi, BodyThatIsNotJsonContentIs415) {
  const auto r = post("/api/render", std::string("{}"), "text/plain");
  EXPECT_EQ(r.status, 415);
  EXPECT_NE(json::parse(r.body)["error"].get<std::string>().find("application/json"), std::string::npos);
  EXPECT_EQ(post("/api/validate", std::string("{}"), "application/json; charset=utf-8").status, 200);
}

TEST(UiApi, UnknownPathsAre404AndWrongMethods405) {
  const auto missing = get("/api/nothing");
  EXPECT_EQ(missing.status, 404);
  EXPECT_NE(json::parse(missing.body)["error"].get<std::string>().find("/api/render"), std::string::npos);
  const auto get_render = get("/api/render");
  EXPECT_EQ(get_render.status, 405);
  EXPECT_EQ(header(get_render, "Allow"), "POST");
  const auto post_schema = post("/api/schema", json::object());
  EXPECT_EQ(post_schema.status, 405);
  EXPECT_EQ(header(post_schema, "Allow"), "GET");
  EXPECT_EQ(web::handle({"DELETE", "/", "", ""}).status, 405);
}

TEST(UiApi, ZipIsTheGeneratorsArchiveAsAnAttachment) {
  const json options = {{"template", first_template()}, {"name", "zipped"}};
  const auto r = post("/api/zip", options);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.content_type, "application/zip");
  EXPECT_EQ(r.body.compare(0, 4, "PK\x03\x04"), 0);
  EXPECT_EQ(r.body, gen::zip_archive(gen::render(options)));
  EXPECT_EQ(header(r, "Content-Disposition"), "attachment; filename=\"zipped.zip\"");
}

TEST(UiApi, NotebookForXlaTpuHasTheTpuAccelerator) {
  const json options = {{"template", first_template()}, {"name", "colab"}, {"backend", "xla-tpu"}};
  const auto r = post("/api/notebook", options);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.content_type, "application/x-ipynb+json");
  EXPECT_EQ(header(r, "Content-Disposition"), "attachment; filename=\"colab.ipynb\"");
  const json nb = json::parse(r.body);
  EXPECT_EQ(nb["nbformat"], 4);
  EXPECT_EQ(nb["metadata"]["accelerator"], "TPU");
  EXPECT_EQ(r.body, gen::notebook(gen::render(options), options));
  // On CPU the notebook names no accelerator.
  const auto cpu = post("/api/notebook", json{{"template", first_template()}, {"accelerator", "cpu"}});
  ASSERT_EQ(cpu.status, 200);
  EXPECT_FALSE(json::parse(cpu.body)["metadata"].contains("accelerator"));
}

TEST(UiApi, LoggersAsTextFromThePageAnswerAsAListAndAnUnknownOneIsAProblemNamingIt) {
  // The page sends the ticked boxes as "csv,tensorboard" (or "none"); the answer's options hold the list.
  const json options = {{"template", "minimal"}, {"logger", "csv,tensorboard"}, {"profiler", "simple"}};
  const auto r = post("/api/render", options);
  ASSERT_EQ(r.status, 200) << r.body;
  const json body = body_json(r);
  EXPECT_EQ(body["options"]["logger"], json::array({"csv", "tensorboard"}));
  EXPECT_EQ(body["options"]["profiler"], "simple");
  EXPECT_EQ(body["files"], json(gen::render(options).files));
  EXPECT_NE(body["command"].get<std::string>().find("--logger csv,tensorboard --profiler simple"), std::string::npos);
  // The list the answer holds is accepted back as it is (the page's notebook and zip requests).
  EXPECT_EQ(post("/api/render", body["options"]).status, 200);
  const auto none = post("/api/validate", json{{"logger", "none"}});
  ASSERT_EQ(none.status, 200);
  EXPECT_EQ(body_json(none)["options"]["logger"], json::array());

  const json bad = {{"template", "minimal"}, {"logger", "csv,wandb"}, {"profiler", "fast"}};
  const auto refused = post("/api/render", bad);
  ASSERT_EQ(refused.status, 200);
  const json problems = body_json(refused)["problems"];
  EXPECT_EQ(problems, problems_of(gen::validate(bad)));
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_EQ(problems[0]["option"], "logger");
  EXPECT_NE(problems[0]["message"].get<std::string>().find("'wandb' is not one of: csv, tensorboard"),
            std::string::npos);
  EXPECT_EQ(problems[1]["option"], "profiler");
  EXPECT_NE(problems[1]["message"].get<std::string>().find("'fast' is not one of: none, simple, advanced, pytorch"),
            std::string::npos);
}

TEST(UiApi, NotebookRecordsThePagesCommandWithoutTheForcedValues) {
  // xla-tpu forces accelerator, distributed and nproc_per_node: the page's command leaves them out (they follow
  // from --backend), and the notebook must record that same command, as `volt new --notebook` does.
  for (const json& options : {json{{"template", first_template()}, {"name", "tpu"}, {"backend", "xla-tpu"}},
                              json{{"template", "minimal"}, {"backend", "nccl"}, {"distributed", "spawn"}},
                              json{{"template", "gan"}, {"max_epochs", 4}}}) {
    const auto page = post("/api/render", options);
    ASSERT_EQ(page.status, 200) << page.body;
    const std::string command = body_json(page)["command"];
    EXPECT_EQ(command, gen::command_line(options));
    const auto r = post("/api/notebook", options);
    ASSERT_EQ(r.status, 200) << r.body;
    const json nb = json::parse(r.body);
    EXPECT_EQ(nb["metadata"]["volt"]["command"], command) << options.dump();
    std::string intro;
    for (const auto& line : nb["cells"][0]["source"]) intro += line.get<std::string>();
    EXPECT_NE(intro.find("    " + command + "\n"), std::string::npos) << intro;
    // The zip's README records the same command.
    EXPECT_NE(body_json(page)["files"]["README.md"].get<std::string>().find(command), std::string::npos);
  }
  const auto tpu = post("/api/notebook", json{{"template", first_template()}, {"backend", "xla-tpu"}});
  const std::string recorded = json::parse(tpu.body)["metadata"]["volt"]["command"];
  EXPECT_EQ(recorded.find("--distributed"), std::string::npos) << recorded;
  EXPECT_EQ(recorded.find("--nproc-per-node"), std::string::npos) << recorded;
}
