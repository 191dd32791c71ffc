// The layering of ARCHITECTURE.md, checked on the source tree: every #include of a Volt
// header from include/volt/** and src/** must point down (or into the same concern),
// connectors must not include one another, and nothing below the trainer sees it.
// No LibTorch here: this test builds in seconds and runs without the library.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>
#include "support/source_dir.h"

namespace {

/// One file of the tree: its path relative to the repository root ('/'-separated) and
/// its text.
struct SourceFile {
  std::string path;
  std::string contents;
};

/// A concern's place: its rank (only used to word messages) and the concerns it may
/// include besides itself.
struct Layer {
  int rank;
  std::set<std::string> may_include;
};

const std::map<std::string, Layer>& layers() {
  static const std::map<std::string, Layer> table = [] {
    const std::set<std::string> core{"core"};
    const std::set<std::string> strategies{"core",      "data",         "accelerators",
                                           "precision", "environments", "checkpoint_io"};
    std::set<std::string> connectors = strategies;
    connectors.insert({"strategies", "callbacks", "loggers"});
    std::set<std::string> loops = connectors;
    loops.insert({"connectors", "profilers"});
    std::set<std::string> trainer = loops;
    trainer.insert("loops");
    std::set<std::string> tuner = trainer;
    tuner.insert("trainer");
    return std::map<std::string, Layer>{
        {"core", {0, {}}},
        {"data", {1, core}},
        {"accelerators", {1, core}},
        {"precision", {1, core}},
        {"environments", {1, core}},
        {"checkpoint_io", {1, core}},
        {"callbacks", {1, core}},
        {"loggers", {1, core}},
        {"profilers", {1, {"core", "checkpoint_io"}}},
        {"strategies", {2, strategies}},
        {"connectors", {3, connectors}},
        {"loops", {4, loops}},
        {"trainer", {5, trainer}},
        {"cli", {6, {"core", "trainer"}}},
        // The tuner drives the Trainer from above, as a user does; nothing of the library uses it.
        {"tuner", {6, tuner}},
    };
  }();
  return table;
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

std::string known_concerns() {
  std::string out;
  for (const auto& [name, layer] : layers()) {
    out += (out.empty() ? "" : ", ") + name;
  }
  return out;
}

/// Blanks out // and /* */ comments (keeping newlines and string literals), so that a
/// commented-out #include is not counted.
std::string strip_comments(const std::string& text) {
  std::string out = text;
  enum { kCode, kLine, kBlock, kString, kChar } state = kCode;
  for (size_t i = 0; i < out.size(); ++i) {
    const char c = out[i];
    const char next = i + 1 < out.size() ? out[i + 1] : '\0';
    switch (state) {
      case kCode:
        if (c == '/' && next == '/') {
          state = kLine;
          out[i] = ' ';
        } else if (c == '/' && next == '*') {
          state = kBlock;
          out[i] = out[i + 1] = ' ';
          ++i;
        } else if (c == '"') {
          state = kString;
        } else if (c == '\'') {
          state = kChar;
        }
        break;
      case kLine:
        if (c == '\n')
          state = kCode;
        else
          out[i] = ' ';
        break;
      case kBlock:
        if (c == '*' && next == '/') {
          state = kCode;
          out[i] = out[i + 1] = ' ';
          ++i;
        } else if (c != '\n') {
          out[i] = ' ';
        }
        break;
      case kString:
      case kChar:
        if (c == '\\') {
          ++i;
        } else if ((state == kString && c == '"') || (state == kChar && c == '\'') || c == '\n') {
          state = kCode;
        }
        break;
    }
  }
  return out;
}

struct Include {
  std::string target;  // as written between the quotes or brackets
  bool quoted;
};

std::vector<Include> parse_includes(const std::string& contents) {
  static const std::regex kInclude(R"(^\s*#\s*include\s*(["<])([^">]+)[">])");
  std::vector<Include> out;
  std::istringstream lines(strip_comments(contents));
  std::string line;
  std::smatch m;
  while (std::getline(lines, line)) {
    if (std::regex_search(line, m, kInclude)) out.push_back({m[2].str(), m[1].str() == "\""});
  }
  return out;
}

std::string normalize(const std::string& path) {
  std::vector<std::string> parts;
  std::istringstream in(path);
  std::string part;
  while (std::getline(in, part, '/')) {
    if (part.empty() || part == ".") continue;
    if (part == ".." && !parts.empty() && parts.back() != "..") {
      parts.pop_back();
    } else {
      parts.push_back(part);
    }
  }
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : "/") + p;
  return out;
}

std::string stem(const std::string& file_name) { return file_name.substr(0, file_name.find('.')); }

/// Where a file of the tree belongs: the umbrella volt/volt.h, a concern, or neither
/// (concern empty: a file directly in src/, or outside include/volt and src).
struct Place {
  bool umbrella = false;
  std::string concern;
};

Place place_of(const std::string& path) {
  Place place;
  std::string rest;
  if (starts_with(path, "include/volt/")) {
    rest = path.substr(13);
    if (rest == "volt.h") {
      place.umbrella = true;
      return place;
    }
    if (rest.find('/') == std::string::npos) {  // include/volt/<concern>.h
      place.concern = stem(rest);
      return place;
    }
  } else if (starts_with(path, "src/")) {
    rest = path.substr(4);
    if (rest.find('/') == std::string::npos) return place;
  } else {
    return place;
  }
  place.concern = rest.substr(0, rest.find('/'));
  return place;
}

/// The tree path an #include names, when it names a file of Volt: "volt/..." is a public
/// header; a quoted "<concern>/..." is a private one (src/ is on the library's include
/// path); a quoted path next to the including file is resolved when that file exists.
std::optional<std::string> resolve(const std::string& from, const Include& inc,
                                   const std::set<std::string>& tree) {
  if (starts_with(inc.target, "volt/")) return "include/" + normalize(inc.target);
  if (!inc.quoted) return std::nullopt;
  const std::string first = inc.target.substr(0, inc.target.find('/'));
  if (inc.target.find('/') != std::string::npos && layers().count(first)) {
    return "src/" + normalize(inc.target);
  }
  const std::string sibling = normalize(from.substr(0, from.rfind('/') + 1) + inc.target);
  if (tree.count(sibling)) return sibling;
  return std::nullopt;
}

/// Which connector a file of the connectors concern belongs to: X for
/// include/volt/connectors/X.h and src/connectors/X.{h,cpp}; for src/connectors/detail/F,
/// the longest connector name F starts with, or "" for a helper that belongs to none.
/// nullopt for files outside the connectors folders (and the umbrella volt/connectors.h).
std::optional<std::string> connector_of(const std::string& path,
                                        const std::set<std::string>& connector_names) {
  for (const std::string dir : {"include/volt/connectors/", "src/connectors/"}) {
    if (!starts_with(path, dir)) continue;
    const std::string rest = path.substr(dir.size());
    if (rest.find('/') == std::string::npos) return stem(rest);
    if (dir == "src/connectors/" && starts_with(rest, "detail/")) {
      const std::string name = rest.substr(rest.rfind('/') + 1);
      std::string owner;
      for (const auto& c : connector_names) {
        if (starts_with(name, c) && c.size() > owner.size()) owner = c;
      }
      return owner;
    }
    return std::string();  // another sub-folder of src/connectors: shared
  }
  return std::nullopt;
}

std::string why(const std::string& from, const std::string& to) {
  const int a = layers().at(from).rank;
  const int b = layers().at(to).rank;
  if (b > a) return "higher layer";
  if (b == a) return "same layer: plug-ins and data see only core";
  return "not one of the layers it may use";
}

/// Every breach of ARCHITECTURE.md's layering among `files`, one message per #include
/// (and one per file outside the known concerns), in the order of `files`.
std::vector<std::string> check_layering(const std::vector<SourceFile>& files) {
  std::set<std::string> tree;
  std::set<std::string> connector_names;
  for (const auto& f : files) {
    tree.insert(f.path);
    for (const std::string dir : {"include/volt/connectors/", "src/connectors/"}) {
      if (starts_with(f.path, dir) && f.path.find('/', dir.size()) == std::string::npos) {
        connector_names.insert(stem(f.path.substr(dir.size())));
      }
    }
  }

  std::vector<std::string> violations;
  for (const auto& file : files) {
    const Place place = place_of(file.path);
    if (place.umbrella) continue;  // volt/volt.h may include anything
    if (place.concern.empty()) {
      violations.push_back(
          file.path + ": not inside a concern folder (include/volt/<concern>/ or src/<concern>/)");
      continue;
    }
    if (!layers().count(place.concern)) {
      violations.push_back(file.path + ": unknown concern " + place.concern +
                           " (ARCHITECTURE.md's are " + known_concerns() +
                           "); move the file or add the concern to the layering test");
      continue;
    }
    const auto own_connector = connector_of(file.path, connector_names);

    for (const auto& inc : parse_includes(file.contents)) {
      const auto target = resolve(file.path, inc, tree);
      if (!target) continue;
      const std::string head = file.path + " includes " + inc.target + ": ";
      const Place to = place_of(*target);
      if (to.umbrella) {
        violations.push_back(
            head +
            "only applications include the umbrella volt/volt.h; include the headers needed");
        continue;
      }
      if (to.concern.empty() || !layers().count(to.concern)) {
        violations.push_back(head + "unknown concern " +
                             (to.concern.empty() ? *target : to.concern) +
                             " (ARCHITECTURE.md's are " + known_concerns() + ")");
        continue;
      }
      if (to.concern != place.concern) {
        if (!layers().at(place.concern).may_include.count(to.concern)) {
          violations.push_back(head + place.concern + " may not include " + to.concern + " (" +
                               why(place.concern, to.concern) + ")");
        }
        continue;
      }
      if (!own_connector) continue;
      const auto other = connector_of(*target, connector_names);
      if (!other) {
        violations.push_back(
            head + "a connector may include only its own headers, not the connectors umbrella");
      } else if (other->empty() && !own_connector->empty()) {
        violations.push_back(
            head + "connector " + *own_connector +
            " may not use a detail helper shared by connectors (connectors are self-contained)");
      } else if (*other != *own_connector) {
        violations.push_back(head +
                             (own_connector->empty() ? std::string("a shared connector helper")
                                                     : "connector " + *own_connector) +
                             " may not include connector " + *other +
                             " (connectors are self-contained)");
      }
    }
  }
  return violations;
}

/// Each umbrella include/volt/<concern>.h must include every header of include/volt/<concern>/
/// (its comment says so, and applications rely on it): one message per missing header.
std::vector<std::string> check_umbrellas(const std::vector<SourceFile>& files) {
  std::map<std::string, std::set<std::string>> included;  // umbrella concern -> targets
  std::set<std::string> umbrellas;
  for (const auto& f : files) {
    if (!starts_with(f.path, "include/volt/")) continue;
    const std::string rest = f.path.substr(13);
    if (rest.find('/') != std::string::npos || rest == "volt.h") continue;
    umbrellas.insert(stem(rest));
    for (const auto& inc : parse_includes(f.contents)) included[stem(rest)].insert(normalize(inc.target));
  }
  std::vector<std::string> out;
  for (const auto& f : files) {
    if (!starts_with(f.path, "include/volt/")) continue;
    const std::string rest = f.path.substr(13);
    const auto slash = rest.find('/');
    if (slash == std::string::npos || rest.find('/', slash + 1) != std::string::npos) continue;
    const std::string concern = rest.substr(0, slash);
    if (!umbrellas.count(concern)) {
      out.push_back("include/volt/" + concern + ".h is missing: every concern folder has an umbrella header");
      umbrellas.insert(concern);  // once per concern
      continue;
    }
    if (!included[concern].count("volt/" + rest)) {
      out.push_back("include/volt/" + concern + ".h does not include volt/" + rest +
                    " (an umbrella includes every public header of its folder)");
    }
  }
  return out;
}

/// tools/, bench/ and examples/ use the library as a user would: public headers (volt/...)
/// only, never a private one from src/ ("strategies/detail/x.h").
std::vector<std::string> check_users(const std::vector<SourceFile>& files) {
  std::vector<std::string> out;
  for (const auto& f : files) {
    for (const auto& inc : parse_includes(f.contents)) {
      const std::string first = inc.target.substr(0, inc.target.find('/'));
      if (inc.quoted && inc.target.find('/') != std::string::npos && layers().count(first)) {
        out.push_back(f.path + " includes " + inc.target +
                      ": a private header of the library; tools, benchmarks and examples include only "
                      "public headers (volt/...)");
      }
    }
  }
  return out;
}

std::vector<SourceFile> read_tree(const std::filesystem::path& root,
                                  std::vector<std::string> dirs = {"include/volt", "src"}) {
  namespace fs = std::filesystem;
  static const std::set<std::string> kExtensions{".h", ".hpp", ".cpp", ".cc", ".cu", ".cuh"};
  std::vector<SourceFile> files;
  for (const std::string& dir : dirs) {
    const fs::path base = root / dir;
    if (!fs::is_directory(base)) continue;
    for (const auto& entry : fs::recursive_directory_iterator(base)) {
      if (!entry.is_regular_file() || !kExtensions.count(entry.path().extension().string()))
        continue;
      std::ifstream in(entry.path(), std::ios::binary);
      std::ostringstream text;
      text << in.rdbuf();
      files.push_back({fs::relative(entry.path(), root).generic_string(), text.str()});
    }
  }
  std::sort(files.begin(), files.end(),
            [](const SourceFile& a, const SourceFile& b) { return a.path < b.path; });
  return files;
}

std::string join(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += "  " + l + "\n";
  return out;
}

using Violations = std::vector<std::string>;

TEST(Layering, SourceTreeFollowsArchitecture) {
  const std::string root = volt::testing::source_dir().string();
  const auto files = read_tree(root);
  ASSERT_GE(files.size(), 10u) << "found only " << files.size() << " files under " << root
                               << "/include/volt and " << root << "/src: is VOLT_SOURCE_DIR right?";
  const auto violations = check_layering(files);
  std::cout << "checked " << files.size() << " files under " << root << "\n";
  EXPECT_TRUE(violations.empty()) << violations.size()
                                  << " breach(es) of ARCHITECTURE.md's layering:\n"
                                  << join(violations);
}

TEST(Layering, EveryUmbrellaHeaderIncludesItsWholeFolder) {
  const std::string root = volt::testing::source_dir().string();
  const auto problems = check_umbrellas(read_tree(root));
  EXPECT_TRUE(problems.empty()) << problems.size() << " incomplete umbrella header(s):\n" << join(problems);
}

TEST(Layering, ToolsBenchmarksAndExamplesIncludeOnlyPublicHeaders) {
  const std::string root = volt::testing::source_dir().string();
  const auto files = read_tree(root, {"tools", "bench", "examples"});
  ASSERT_GE(files.size(), 10u) << "found only " << files.size() << " files under tools, bench, examples";
  const auto problems = check_users(files);
  EXPECT_TRUE(problems.empty()) << join(problems);
}

TEST(Layering, ReportsAMissingUmbrellaEntryAndAPrivateIncludeFromATool) {
  const std::vector<SourceFile> tree{
      {"include/volt/precision.h", "#include \"volt/precision/precision.h\"\n"},
      {"include/volt/precision/precision.h", ""},
      {"include/volt/precision/mixed.h", ""},
      {"include/volt/profilers/profiler.h", ""},
  };
  EXPECT_EQ(check_umbrellas(tree),
            (Violations{"include/volt/precision.h does not include volt/precision/mixed.h (an umbrella includes "
                        "every public header of its folder)",
                        "include/volt/profilers.h is missing: every concern folder has an umbrella header"}));
  const std::vector<SourceFile> users{
      {"tools/volt/main.cpp", "#include \"volt/strategies/strategy.h\"\n#include \"strategies/detail/x.h\"\n"
                              "#include \"launch_command.h\"\n"},
  };
  EXPECT_EQ(check_users(users),
            (Violations{"tools/volt/main.cpp includes strategies/detail/x.h: a private header of the library; "
                        "tools, benchmarks and examples include only public headers (volt/...)"}));
}

TEST(Layering, AcceptsIncludesThatPointDown) {
  const std::vector<SourceFile> files{
      {"include/volt/volt.h", "#include \"volt/trainer/trainer.h\"\n#include \"volt/cli/cli.h\"\n"},
      {"include/volt/core/module.h", "#include <vector>\n#include \"volt/core/types.h\"\n"},
      {"include/volt/data/dataset.h",
       "#include <ATen/core/Tensor.h>\n#include \"volt/core/types.h\"\n"},
      {"include/volt/strategies/ddp.h",
       "#include \"volt/accelerators/accelerator.h\"\n#include \"volt/precision/precision.h\"\n"
       "#include \"volt/environments/cluster_environment.h\"\n#include "
       "\"volt/checkpoint_io/checkpoint_io.h\"\n"
       "#include \"volt/data/dataset.h\"\n"},
      {"src/strategies/detail/bucket.h", "#include \"volt/strategies/ddp.h\"\n"},
      {"src/loops/fit_loop.cpp",
       "#include \"volt/connectors/data_connector.h\"\n#include \"volt/callbacks/callback.h\"\n"},
      {"include/volt/trainer/trainer.h",
       "#include \"volt/loops/fit_loop.h\"\n#include \"volt/strategies.h\"\n"},
      {"include/volt/strategies.h", "#include \"volt/strategies/ddp.h\"\n"},
      {"include/volt/cli/cli.h",
       "#include <volt/trainer/trainer.h>\n#include \"volt/core/error.h\"\n"},
      {"include/volt/core/version.h", ""},
  };
  EXPECT_EQ(check_layering(files), Violations{});
}

TEST(Layering, ReportsAnUpwardInclude) {
  const std::vector<SourceFile> files{
      {"src/core/module.cpp",
       "#include \"volt/core/module.h\"\n#include \"volt/strategies/strategy.h\"\n"},
      {"include/volt/accelerators/cuda.h", "#include <volt/connectors/accelerator_connector.h>\n"},
      {"include/volt/core.h",
       "#include \"volt/core/module.h\"\n#include \"volt/data/dataset.h\"\n"},
  };
  EXPECT_EQ(check_layering(files), (Violations{
                                       "src/core/module.cpp includes volt/strategies/strategy.h: "
                                       "core may not include strategies (higher layer)",
                                       "include/volt/accelerators/cuda.h includes "
                                       "volt/connectors/accelerator_connector.h: accelerators may "
                                       "not include connectors (higher layer)",
                                       "include/volt/core.h includes volt/data/dataset.h: core may "
                                       "not include data (higher layer)",
                                   }));
}

TEST(Layering, ReportsASidewaysPluginInclude) {
  const std::vector<SourceFile> files{
      {"src/accelerators/cuda.cpp",
       "#include \"volt/accelerators/cuda.h\"\n#include \"volt/precision/mixed.h\"\n"},
      {"include/volt/loggers/csv_logger.h", "#include \"volt/callbacks/callback.h\"\n"},
      {"src/strategies/ddp.cpp", "#include \"volt/loggers/logger.h\"\n"},
      {"src/cli/cli.cpp", "#include \"volt/loops/fit_loop.h\"\n"},
  };
  EXPECT_EQ(check_layering(files), (Violations{
                                       "src/accelerators/cuda.cpp includes volt/precision/mixed.h: "
                                       "accelerators may not include precision "
                                       "(same layer: plug-ins and data see only core)",
                                       "include/volt/loggers/csv_logger.h includes "
                                       "volt/callbacks/callback.h: loggers may not include "
                                       "callbacks (same layer: plug-ins and data see only core)",
                                       "src/strategies/ddp.cpp includes volt/loggers/logger.h: "
                                       "strategies may not include loggers (not one "
                                       "of the layers it may use)",
                                       "src/cli/cli.cpp includes volt/loops/fit_loop.h: cli may "
                                       "not include loops (not one of the layers it "
                                       "may use)",
                                   }));
}

TEST(Layering, ReportsAConnectorIncludingAnother) {
  const std::vector<SourceFile> files{
      {"include/volt/connectors/data_connector.h", "#include \"volt/data/datamodule.h\"\n"},
      {"include/volt/connectors/accelerator_connector.h",
       "#include \"volt/strategies/strategy.h\"\n"},
      {"src/connectors/accelerator_connector.cpp",
       "#include \"volt/connectors/accelerator_connector.h\"\n#include "
       "\"detail/accelerator_connector_plan.h\"\n"
       "#include \"connectors/detail/accelerator_connector_parse.h\"\n"},
      {"src/connectors/detail/accelerator_connector_plan.h",
       "#include \"volt/connectors/accelerator_connector.h\"\n#include "
       "\"accelerator_connector_parse.h\"\n"},
      {"src/connectors/detail/accelerator_connector_parse.h", ""},
      {"src/connectors/detail/common.h", "#include \"volt/core/error.h\"\n"},
      {"src/connectors/data_connector.cpp",
       "#include \"volt/connectors/data_connector.h\"\n#include "
       "\"volt/connectors/accelerator_connector.h\"\n"
       "#include \"detail/common.h\"\n#include \"detail/accelerator_connector_plan.h\"\n"
       "#include \"volt/connectors.h\"\n"},
      {"include/volt/connectors.h",
       "#include \"volt/connectors/data_connector.h\"\n#include "
       "\"volt/connectors/accelerator_connector.h\"\n"},
      {"src/loops/fit_loop.cpp",
       "#include \"volt/connectors/data_connector.h\"\n"
       "#include \"volt/connectors/accelerator_connector.h\"\n"},
  };
  EXPECT_EQ(check_layering(files),
            (Violations{
                "src/connectors/data_connector.cpp includes "
                "volt/connectors/accelerator_connector.h: connector "
                "data_connector may not include connector accelerator_connector (connectors are "
                "self-contained)",
                "src/connectors/data_connector.cpp includes detail/common.h: connector "
                "data_connector may not use a "
                "detail helper shared by connectors (connectors are self-contained)",
                "src/connectors/data_connector.cpp includes detail/accelerator_connector_plan.h: "
                "connector "
                "data_connector may not include connector accelerator_connector (connectors are "
                "self-contained)",
                "src/connectors/data_connector.cpp includes volt/connectors.h: a connector may "
                "include only its own "
                "headers, not the connectors umbrella",
            }));
}

TEST(Layering, ReportsALoopIncludingTheTrainer) {
  const std::vector<SourceFile> files{
      {"src/loops/fit_loop.cpp",
       "#include \"volt/loops/fit_loop.h\"\n#include \"volt/trainer/trainer.h\"\n"},
      {"src/loops/detail/progress.h", "#  include <volt/trainer/trainer_options.h>\n"},
      {"src/callbacks/progress_bar.cpp",
       "#include \"volt/trainer.h\"\n#include \"volt/core/trainer_view.h\"\n"},
      {"src/trainer/trainer.cpp",
       "#include \"volt/trainer/trainer.h\"\n#include \"volt/volt.h\"\n"},
  };
  EXPECT_EQ(check_layering(files),
            (Violations{
                "src/loops/fit_loop.cpp includes volt/trainer/trainer.h: loops may not include "
                "trainer (higher layer)",
                "src/loops/detail/progress.h includes volt/trainer/trainer_options.h: loops may "
                "not include trainer "
                "(higher layer)",
                "src/callbacks/progress_bar.cpp includes volt/trainer.h: callbacks may not include "
                "trainer (higher "
                "layer)",
                "src/trainer/trainer.cpp includes volt/volt.h: only applications include the "
                "umbrella volt/volt.h; "
                "include the headers needed",
            }));
}

TEST(Layering, ReportsUnknownConcerns) {
  const std::vector<SourceFile> files{
      {"src/widgets/knob.cpp", "#include \"volt/trainer/trainer.h\"\n"},
      {"include/volt/core/module.h", "#include \"volt/widgets/knob.h\"\n"},
      {"src/volt.cpp", "#include \"volt/core/module.h\"\n"},
  };
  const auto violations = check_layering(files);
  ASSERT_EQ(violations.size(), 3u) << join(violations);
  EXPECT_EQ(violations[0].rfind("src/widgets/knob.cpp: unknown concern widgets (", 0), 0u)
      << violations[0];
  EXPECT_EQ(
      violations[1].rfind(
          "include/volt/core/module.h includes volt/widgets/knob.h: unknown concern widgets (", 0),
      0u)
      << violations[1];
  EXPECT_EQ(
      violations[2],
      "src/volt.cpp: not inside a concern folder (include/volt/<concern>/ or src/<concern>/)");
  for (const std::string concern : {"core", "strategies", "cli"}) {
    EXPECT_NE(violations[0].find(concern), std::string::npos) << violations[0];
  }
}

TEST(Layering, IgnoresCommentsAndOtherLibraries) {
  const std::vector<SourceFile> files{
      {"src/core/module.cpp",
       "// #include \"volt/trainer/trainer.h\"\n"
       "/* an example:\n#include \"volt/loops/fit_loop.h\"\n*/\n"
       "#include <torch/nn/module.h>\n#include <c10/util/Optional.h>\n#include \"gtest/gtest.h\"\n"
       "const char* s = \"// not a comment\"; /* */\n#include \"volt/core/module.h\"  // own "
       "header\n"},
  };
  EXPECT_EQ(check_layering(files), Violations{});
}

}  // namespace

// ------------------------------------------------------------------ no exit in the library

namespace {

/// Every call that ends the process from library code (exit, _exit, _Exit, quick_exit,
/// abort), as "path:line: text", except the one allowed: `_exit(127)` in WorkerGroup's
/// forked child, which must not return into the parent's code when its exec failed.
/// Comments do not count.
std::vector<std::string> check_no_exit(const std::vector<SourceFile>& files) {
  static const std::regex kExit(R"((^|[^A-Za-z0-9_])(std\s*::\s*|::\s*)?(exit|_exit|_Exit|quick_exit|abort)\s*\()");
  // The two last resorts (STYLE.md), once each: a forked child whose exec failed, and ddp's
  // subprocess launcher ending a rank 0 still blocked after another rank died.
  static const std::map<std::string, std::regex> kAllowed{
      {"src/strategies/launchers/worker_group.cpp", std::regex(R"(^\s*::_exit\(127\);\s*$)")},
      {"src/strategies/launchers/subprocess_launcher.cpp", std::regex(R"(^\s*std::_Exit\(1\);\s*$)")},
  };
  std::vector<std::string> out;
  for (const auto& f : files) {
    std::istringstream lines(strip_comments(f.contents));
    std::string line;
    int number = 0;
    int allowed_seen = 0;
    const auto allowed = kAllowed.find(f.path);
    while (std::getline(lines, line)) {
      ++number;
      if (!std::regex_search(line, kExit)) continue;
      if (allowed != kAllowed.end() && std::regex_match(line, allowed->second) && ++allowed_seen == 1) continue;
      out.push_back(f.path + ":" + std::to_string(number) + ": " + line.substr(line.find_first_not_of(" \t")));
    }
  }
  return out;
}

}  // namespace

TEST(Layering, NoLibraryFileEndsTheProcessButTheForkedChildAndTheBlockedRankZero) {
  const std::string root = volt::testing::source_dir().string();
  const auto files = read_tree(root);
  ASSERT_GE(files.size(), 10u);
  const auto calls = check_no_exit(files);
  EXPECT_TRUE(calls.empty()) << "the library never ends the process (a failure travels back as an error the "
                                "program's main returns):\n"
                             << join(calls);
}

TEST(Layering, ReportsExitAbortAndQuickExitAndASecondForkedChildExit) {
  const std::vector<SourceFile> files{
      {"src/a.cpp", "void f() {\n  std::exit(1);\n}\n"},
      {"src/b.cpp", "void g() { ::abort(); }\n// exit(2) in a comment\nvoid h() { quick_exit(0); }\n"},
      {"src/c.cpp", "int on_exit_code(int);\nvoid k() { my_exit(3); at_exit(); }\n"},
      {"src/strategies/launchers/worker_group.cpp", "  ::_exit(127);\n  ::_exit(127);\n  _exit(1);\n"},
      {"src/strategies/launchers/subprocess_launcher.cpp", "  std::_Exit(1);\n  std::_Exit(2);\n"},
      {"src/strategies/ddp_strategy.cpp", "  std::_Exit(1);\n"},
  };
  EXPECT_EQ(check_no_exit(files), (Violations{"src/a.cpp:2: std::exit(1);", "src/b.cpp:1: void g() { ::abort(); }",
                                              "src/b.cpp:3: void h() { quick_exit(0); }",
                                              "src/strategies/launchers/worker_group.cpp:2: ::_exit(127);",
                                              "src/strategies/launchers/worker_group.cpp:3: _exit(1);",
                                              "src/strategies/launchers/subprocess_launcher.cpp:2: std::_Exit(2);",
                                              "src/strategies/ddp_strategy.cpp:1: std::_Exit(1);"}));
}

namespace {

/// Test folders that are not one concern of src/: end-to-end runs, real launchers and
/// clients, bad input, fuzzing, the generator's tools, shared helpers.
const std::set<std::string> kCrossCuttingTestFolders{
    "conformance", "consumer", "cuda", "distributed", "faults", "fuzz",  "generator", "hostile", "launchers",
    "layering",    "plot",     "support",     "tpu_runtime", "trainer", "ui"};

/// Tests mirror the code: every test folder holding C++ is named after a concern of src/ (or
/// is one of the cross-cutting folders), and every concern of src/ has its test folder.
std::vector<std::string> check_test_folders(const std::set<std::string>& src_concerns,
                                            const std::set<std::string>& test_folders_with_code) {
  std::vector<std::string> problems;
  for (const auto& t : test_folders_with_code) {
    if (src_concerns.count(t) == 0 && kCrossCuttingTestFolders.count(t) == 0) {
      problems.push_back("tests/" + t + " is not a concern of src/: tests of src/<concern> go in tests/<concern>");
    }
  }
  for (const auto& c : src_concerns) {
    if (test_folders_with_code.count(c) == 0) problems.push_back("src/" + c + " has no tests/" + c);
  }
  return problems;
}

std::set<std::string> folders_of(const std::filesystem::path& dir, bool with_cpp_only) {
  std::set<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (!e.is_directory()) continue;
    bool has = !with_cpp_only;
    for (const auto& f : std::filesystem::directory_iterator(e.path())) {
      if (f.path().extension() == ".cpp") has = true;
    }
    if (has) out.insert(e.path().filename().string());
  }
  return out;
}

}  // namespace

TEST(Layering, TestFoldersMirrorTheConcernsOfSrc) {
  const std::string root = volt::testing::source_dir().string();
  const auto src = folders_of(std::filesystem::path(root) / "src", /*with_cpp_only=*/false);
  ASSERT_GE(src.size(), 10u) << "found only " << src.size() << " concerns under " << root << "/src";
  const auto problems = check_test_folders(src, folders_of(std::filesystem::path(root) / "tests", true));
  EXPECT_TRUE(problems.empty()) << join(problems);
}

TEST(Layering, ReportsATestFolderOfSeveralConcernsAndAConcernWithoutTests) {
  EXPECT_EQ(check_test_folders({"loops", "loggers"}, {"plugins", "loggers", "trainer"}),
            (Violations{"tests/plugins is not a concern of src/: tests of src/<concern> go in tests/<concern>",
                        "src/loops has no tests/loops"}));
}
