// Tokens per second of the SentencePiece language-model data set: the corpus encoded line by line into a token
// file (written, fsynced) that is memory-mapped and served as {input, target} windows collated into batches,
// Volt's write_token_file + TokenWindowDataset::get_batch against Python's sentencepiece + numpy memmap + torch
// (bench/tokenizer.py under /usr/bin/python3), at the same encode thread counts, alternating in one run. The model
// is trained once, by Volt, before the timed rounds; both sides load the same file. Each round times every side
// once per thread count; the median of the rounds is compared. The token files of both sides are compared too
// (the same ids, or the run fails).
//
//   tokenizer [--corpus FILE] [--max-bytes N] [--vocab-size V] [--model-type bpe|unigram] [--threads 1,2]
//             [--context C] [--stride S] [--batch-size B] [--rounds R] [--python PATH] [--no-python]
// Without --corpus: the King James Bible (bible-kjv's `bible gen1:1-rev22:21`, 4.3 MB), else the fortunes
// package's literature file.
#include <unistd.h>

#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "volt/core/error.h"
#include "volt/core/file_check.h"
#include "volt/data/text/sentencepiece_tokenizer.h"
#include "volt/data/text/token_file.h"
#include "volt/data/text/token_window_dataset.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Args {
  std::string corpus;
  int64_t max_bytes = 0;
  int64_t vocab_size = 8000;
  std::string model_type = "bpe";
  std::vector<int64_t> threads{1, 2};
  int64_t context = 256;
  int64_t stride = 0;
  int64_t batch_size = 32;
  int64_t rounds = 3;
  std::string python = "/usr/bin/python3";
  bool with_python = true;
};

std::vector<int64_t> parse_list(const std::string& s) {
  std::vector<int64_t> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) out.push_back(std::stoll(item));
  return out;
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw volt::ConfigError(k + " needs a value");
      return argv[++i];
    };
    if (k == "--corpus")
      a.corpus = next();
    else if (k == "--max-bytes")
      a.max_bytes = std::stoll(next());
    else if (k == "--vocab-size")
      a.vocab_size = std::stoll(next());
    else if (k == "--model-type")
      a.model_type = next();
    else if (k == "--threads")
      a.threads = parse_list(next());
    else if (k == "--context")
      a.context = std::stoll(next());
    else if (k == "--stride")
      a.stride = std::stoll(next());
    else if (k == "--batch-size")
      a.batch_size = std::stoll(next());
    else if (k == "--rounds")
      a.rounds = std::stoll(next());
    else if (k == "--python")
      a.python = next();
    else if (k == "--no-python")
      a.with_python = false;
    else if (k == "--help" || k == "-h") {
      std::cout << "tokenizer [--corpus FILE] [--max-bytes N] [--vocab-size V] [--model-type bpe|unigram]\n"
                   "          [--threads 1,2] [--context C] [--stride S] [--batch-size B] [--rounds R]\n"
                   "          [--python PATH] [--no-python]\n";
      std::exit(0);
    } else {
      throw volt::ConfigError("unknown argument '" + k + "'; see --help.");
    }
  }
  if (a.rounds < 1 || a.batch_size < 1 || a.context < 1 || a.stride < 0 || a.threads.empty() ||
      *std::min_element(a.threads.begin(), a.threads.end()) < 1) {
    throw volt::ConfigError("--rounds, --batch-size, --context and every --threads entry must be >= 1, --stride >= 0.");
  }
  if (a.stride == 0) a.stride = a.context;
  return a;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The corpus for this run in `dir`: the given file, the King James Bible or the literature fortunes, cut to
// max_bytes at a line end.
std::string prepare_corpus(const Args& a, const fs::path& dir) {
  const std::string out = (dir / "corpus.txt").string();
  std::string text;
  if (!a.corpus.empty()) {
    if (!fs::is_regular_file(a.corpus)) throw volt::ConfigError("--corpus '" + a.corpus + "' is not a file.");
    text = read(a.corpus);
  } else if (fs::exists("/usr/bin/bible") && fs::exists("/usr/lib/bible.data")) {
    if (std::system(("/usr/bin/bible gen1:1-rev22:21 > '" + out + "'").c_str()) != 0) {
      throw volt::Error("`bible gen1:1-rev22:21` failed");
    }
    text = read(out);
  } else if (fs::exists("/usr/share/games/fortunes/literature")) {
    text = read("/usr/share/games/fortunes/literature");
  } else {
    throw volt::ConfigError("no corpus: pass --corpus FILE, or install bible-kjv and bible-kjv-text (or fortunes).");
  }
  if (a.max_bytes > 0 && static_cast<int64_t>(text.size()) > a.max_bytes) {
    const size_t nl = text.rfind('\n', static_cast<size_t>(a.max_bytes));
    text.resize(nl == std::string::npos ? static_cast<size_t>(a.max_bytes) : nl + 1);
  }
  std::ofstream(out, std::ios::binary | std::ios::trunc) << text;
  return out;
}

struct VoltRound {
  double seconds = 0;
  double encode_seconds = 0;
  int64_t tokens = 0;
  int64_t windows = 0;
};

VoltRound volt_round(const Args& a, const volt::data::SentencePieceTokenizer& sp, const std::string& corpus,
                     const std::string& token_file, int64_t threads) {
  const auto start = Clock::now();
  volt::data::TokenFileOptions o;
  o.num_threads = static_cast<int>(threads);
  volt::data::write_token_file(corpus, sp, token_file, o);
  const auto encoded = Clock::now();
  volt::data::TokenWindowDataset ds(token_file, a.context, a.stride);
  std::vector<int64_t> indices;
  int64_t sum = 0;
  for (int64_t first = 0; first < ds.size(); first += a.batch_size) {
    indices.clear();
    for (int64_t i = first; i < std::min(first + a.batch_size, ds.size()); ++i) indices.push_back(i);
    const volt::Batch batch = ds.get_batch(indices);
    sum += batch[0].size(0);
  }
  VoltRound r;
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  r.encode_seconds = std::chrono::duration<double>(encoded - start).count();
  r.tokens = ds.tokens().size();
  r.windows = sum;
  return r;
}

struct PythonRound {
  double seconds = 0;
  double encode_seconds = 0;
  int64_t tokens = 0;
};

double json_number(const std::string& line, const std::string& key) {
  const std::string k = "\"" + key + "\": ";
  const size_t at = line.find(k);
  if (at == std::string::npos) throw volt::Error("no " + key + " in Python's output: " + line);
  return std::atof(line.c_str() + at + k.size());
}

PythonRound python_round(const Args& a, const std::string& script, const std::string& model, const std::string& corpus,
                         const std::string& out, int64_t threads) {
  const std::string cmd = a.python + " '" + script + "' '" + model + "' '" + corpus + "' '" + out + "' --threads " +
                          std::to_string(threads) + " --context " + std::to_string(a.context) + " --stride " +
                          std::to_string(a.stride) + " --batch-size " + std::to_string(a.batch_size) + " --rounds 1";
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (pipe == nullptr) throw volt::Error("cannot run " + cmd);
  std::string text;
  char buf[512];
  while (std::fgets(buf, sizeof(buf), pipe) != nullptr) text += buf;
  if (::pclose(pipe) != 0 || text.find("\"seconds\"") == std::string::npos) throw volt::Error(cmd + " failed: " + text);
  PythonRound r;
  r.seconds = json_number(text, "seconds");
  r.encode_seconds = json_number(text, "encode_seconds");
  r.tokens = static_cast<int64_t>(json_number(text, "tokens"));
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args a = parse(argc, argv);
    at::set_num_threads(1);
    const fs::path dir = fs::temp_directory_path() / ("volt_bench_tokenizer." + std::to_string(::getpid()));
    fs::create_directories(dir);
    struct RemoveAtExit {
      fs::path dir;
      ~RemoveAtExit() {
        std::error_code ec;
        volt::remove_tree(dir.string(), ec);
      }
    } remove_at_exit{dir};
    const std::string corpus = prepare_corpus(a, dir);
    const std::string script = (fs::path(VOLT_BENCH_DIR) / "tokenizer.py").string();
    const std::string model = (dir / "corpus.model").string();
    std::cout << "corpus: " << fs::file_size(corpus) << " bytes; training a " << a.model_type << " model of "
              << a.vocab_size << " pieces (not timed)\n";
    volt::data::SentencePieceTrainOptions t;
    t.input = corpus;
    t.model_file = model;
    t.vocab_size = a.vocab_size;
    t.model_type = a.model_type;
    t.num_threads = 2;
    const auto train_start = Clock::now();
    const auto sp = volt::data::SentencePieceTokenizer::train(t);
    std::cout << "trained in " << std::chrono::duration<double>(Clock::now() - train_start).count() << " s\n";

    std::map<int64_t, std::vector<double>> volt_s, volt_enc, py_s, py_enc;
    int64_t tokens = 0, windows = 0;
    for (int64_t r = 0; r < a.rounds; ++r) {
      for (const int64_t th : a.threads) {
        const std::string ours = (dir / "volt.tok").string();
        const VoltRound v = volt_round(a, sp, corpus, ours, th);
        volt_s[th].push_back(v.seconds);
        volt_enc[th].push_back(v.encode_seconds);
        tokens = v.tokens;
        windows = v.windows;
        if (a.with_python) {
          const std::string theirs = (dir / "python.u16").string();
          const PythonRound p = python_round(a, script, model, corpus, theirs, th);
          py_s[th].push_back(p.seconds);
          py_enc[th].push_back(p.encode_seconds);
          if (p.tokens != v.tokens || read(ours).compare(64, std::string::npos, read(theirs)) != 0) {
            throw volt::Error("the token files differ: Volt " + std::to_string(v.tokens) + " tokens, Python " +
                              std::to_string(p.tokens) + " (" + ours + ", " + theirs + ")");
          }
        }
      }
    }
    std::cout << tokens << " tokens, " << windows << " windows of " << a.context << " (stride " << a.stride
              << "), batches of " << a.batch_size << "; median of " << a.rounds << " rounds"
              << (a.with_python ? "; both sides wrote the same ids" : "") << "\n";
    std::printf("%-8s %16s %18s %8s %20s %22s\n", "threads", "Volt tokens/s", "Python tokens/s", "ratio",
                "Volt encode tok/s", "Python encode tok/s");
    for (const int64_t th : a.threads) {
      const double v = static_cast<double>(tokens) / median(volt_s[th]);
      const double ve = static_cast<double>(tokens) / median(volt_enc[th]);
      if (a.with_python) {
        const double p = static_cast<double>(tokens) / median(py_s[th]);
        const double pe = static_cast<double>(tokens) / median(py_enc[th]);
        std::printf("%-8lld %16.0f %18.0f %7.2fx %20.0f %22.0f\n", static_cast<long long>(th), v, p, v / p, ve, pe);
      } else {
        std::printf("%-8lld %16.0f %18s %8s %20.0f %22s\n", static_cast<long long>(th), v, "-", "-", ve, "-");
      }
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "tokenizer: " << e.what() << "\n";
    return 1;
  }
}
