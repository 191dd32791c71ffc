// The zip archive (read back by python3's zipfile) and writing a project to disk safely.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "support/expect.h"
#include "volt/generator/generator.h"

namespace gen = volt::generator;
namespace fs = std::filesystem;
using volt::testing::contains;

namespace {

fs::path fresh_dir(const std::string& tag) {
  const fs::path d = fs::temp_directory_path() / ("volt_gen_" + tag + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  return d;
}

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string run(const std::string& cmd) {
  std::string out;
  FILE* f = ::popen(cmd.c_str(), "r");
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  EXPECT_EQ(::pclose(f), 0) << cmd << "\n" << out;
  return out;
}

gen::Project sample() { return gen::render({{"name", "zipped"}, {"template", "image-classification"}}); }

}  // namespace

TEST(GeneratorZip, PythonZipfileReadsEveryEntryBack) {
  if (std::system("command -v python3 >/dev/null 2>&1") != 0) GTEST_SKIP() << "python3 is not installed here";
  const auto p = sample();
  const fs::path dir = fresh_dir("zip");
  fs::create_directories(dir);
  { std::ofstream(dir / "p.zip", std::ios::binary) << gen::zip_archive(p); }
  const std::string listing = run("python3 -c \"import sys, zipfile, json; z = zipfile.ZipFile(sys.argv[1]); "
                                  "assert z.testzip() is None; print(json.dumps({n: z.read(n).decode() for n in "
                                  "z.namelist()}))\" " + (dir / "p.zip").string());
  const auto entries = nlohmann::json::parse(listing);
  ASSERT_EQ(entries.size(), p.files.size());
  for (const auto& [path, content] : p.files) EXPECT_EQ(entries.at("zipped/" + path), content) << path;
  fs::remove_all(dir);
}

TEST(GeneratorZip, RefusesEntriesOutsideTheProject) {
  for (const char* bad : {"../evil", "/etc/passwd", "a/../../b", "a//b", "./a", "c:\\x", "a/"}) {
    gen::Project p{"app", {{bad, "x"}}};
    EXPECT_THROW(gen::zip_archive(p), gen::GeneratorError) << bad;
    EXPECT_THROW(gen::write_project(p, fresh_dir("bad"), false), gen::GeneratorError) << bad;
  }
  EXPECT_THROW(gen::zip_archive(gen::Project{"../app", {{"a", "x"}}}), gen::GeneratorError);
  // One catch for every error Volt throws: the generator's are volt::Errors too.
  EXPECT_THROW(gen::zip_archive(gen::Project{"../app", {{"a", "x"}}}), volt::Error);
}

TEST(GeneratorWrite, WritesEveryFileWithoutTemporaries) {
  const auto p = sample();
  const fs::path dir = fresh_dir("write");
  gen::write_project(p, dir, false);
  size_t n = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    ++n;
    EXPECT_FALSE(contains(e.path().filename().string(), ".tmp")) << e.path();
  }
  EXPECT_EQ(n, p.files.size());
  for (const auto& [path, content] : p.files) EXPECT_EQ(read(dir / path), content) << path;
  fs::remove_all(dir);
}

TEST(GeneratorWrite, RefusesANonEmptyFolderWithoutForce) {
  const fs::path dir = fresh_dir("nonempty");
  fs::create_directories(dir);
  { std::ofstream(dir / "mine.txt") << "keep"; }
  const std::string msg = volt::testing::error_message<gen::GeneratorError>(
      [&] { gen::write_project(sample(), dir, false); });
  EXPECT_TRUE(contains(msg, "is not empty")) << msg;
  EXPECT_TRUE(contains(msg, "--force")) << msg;
  EXPECT_FALSE(fs::exists(dir / "README.md"));
  gen::write_project(sample(), dir, true);
  EXPECT_TRUE(fs::exists(dir / "README.md"));
  EXPECT_EQ(read(dir / "mine.txt"), "keep");
  fs::remove_all(dir);
}

TEST(GeneratorWrite, RefusesAFileAsTheFolder) {
  const fs::path dir = fresh_dir("file");
  { std::ofstream(dir) << "x"; }
  EXPECT_THROW(gen::write_project(sample(), dir, true), gen::GeneratorError);
  fs::remove(dir);
}

TEST(GeneratorWrite, NeverFollowsALinkOutOfTheFolder) {
  const fs::path dir = fresh_dir("link"), outside = fresh_dir("outside");
  fs::create_directories(dir);
  fs::create_directories(outside);
  fs::create_directory_symlink(outside, dir / "src");  // src/main.cpp would land outside
  const std::string msg = volt::testing::error_message<gen::GeneratorError>(
      [&] { gen::write_project(sample(), dir, true); });
  EXPECT_TRUE(contains(msg, "outside")) << msg;
  EXPECT_FALSE(fs::exists(outside / "main.cpp"));
  fs::remove_all(dir);
  fs::remove_all(outside);
}
