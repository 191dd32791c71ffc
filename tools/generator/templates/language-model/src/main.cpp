// A byte-level language model with Volt: a small causal transformer over the bytes of a plain text file (by
// default the King James Bible), trained to predict the next byte; after training it samples text from a prompt.
// The text is tokenized once into a memory-mapped token file (volt::data::TokenWindowDataset), which later runs
// reuse.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <sstream>

#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/cross_entropy_loss.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/full.h>
#include <ATen/ops/multinomial.h>
#include <ATen/ops/softmax.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/modules/transformercoder.h>
#include <torch/nn/modules/transformerlayer.h>
#include <torch/utils.h>

#include "project_options.h"

namespace {

// Byte tokens (0..255, then bos/eos/pad, unused here): no vocabulary file needed, any text works.
const volt::data::ByteTokenizer kTokenizer{};
const int64_t kVocab = kTokenizer.vocab_size();

class CharTransformer : public volt::Module {
 public:
  CharTransformer(int64_t context, int64_t dim, int64_t heads, int64_t layers, double lr, std::string optimizer)
      : context_(context), lr_(lr), optimizer_(std::move(optimizer)) {
    tokens_ = register_module("tokens", torch::nn::Embedding(kVocab, dim));
    positions_ = register_module("positions", torch::nn::Embedding(context, dim));
    auto layer = torch::nn::TransformerEncoderLayer(
        torch::nn::TransformerEncoderLayerOptions(dim, heads).dim_feedforward(4 * dim).dropout(0.1));
    encoder_ = register_module("encoder", torch::nn::TransformerEncoder(torch::nn::TransformerEncoderOptions(layer,
                                                                                                           layers)));
    norm_ = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim})));
    head_ = register_module("head", torch::nn::Linear(dim, kVocab));
    save_hyperparameters({{"lr", std::to_string(lr)}, {"optimizer", optimizer_}});
  }

  /// The learning rate configure_optimizers uses (lr_find's suggestion with --tuner.lr_find true).
  void set_lr(double lr) { lr_ = lr; }

  /// x: [batch, time] byte ids -> logits [batch, time, 256]; position t sees positions <= t only.
  at::Tensor forward(const at::Tensor& x) {
    const int64_t t = x.size(1);
    auto h = tokens_->forward(x) + positions_->forward(at::arange(t, x.options()));
    auto mask = at::full({t, t}, -std::numeric_limits<float>::infinity(), h.options()).triu(1);
    h = encoder_->forward(h.transpose(0, 1), mask).transpose(0, 1);  // the encoder wants [time, batch, dim]
    return head_->forward(norm_->forward(h));
  }

  at::Tensor training_step(volt::Batch& batch, volt::StepContext& ctx) override {
    auto loss = loss_of(batch);
    ctx.log("train_loss", loss, {.prog_bar = true});
    return loss;
  }

  void validation_step(volt::Batch& batch, volt::StepContext& ctx) override {
    ctx.log("val_loss", loss_of(batch), {.prog_bar = true});
  }

  volt::OptimizerConfig configure_optimizers() override {
    return project::make_optimizer(optimizer_, parameters(), lr_);
  }

  /// Continues `prompt` by `length` bytes, drawing each from the softmax at `temperature` over the
  /// bytes in `allowed` (a [kVocab] bool mask: the bytes of the training text).
  std::string sample(const std::string& prompt, int64_t length, double temperature, const at::Tensor& allowed) {
    torch::NoGradGuard no_grad;
    eval();
    std::vector<int64_t> ids;
    for (const unsigned char c : prompt) ids.push_back(c);
    if (ids.empty()) ids.push_back('\n');
    const auto device = parameters().front().device();
    for (int64_t i = 0; i < length; ++i) {
      const int64_t start = std::max<int64_t>(0, static_cast<int64_t>(ids.size()) - context_);
      std::vector<int64_t> window(ids.begin() + start, ids.end());
      auto x = at::from_blob(window.data(), {1, static_cast<int64_t>(window.size())}, at::kLong).to(device);
      auto logits = forward(x).select(1, x.size(1) - 1).squeeze(0).to(at::kFloat).cpu();
      logits.masked_fill_(allowed.logical_not(), -std::numeric_limits<float>::infinity());
      auto probs = at::softmax(logits / temperature, 0);
      ids.push_back(at::multinomial(probs, 1).item<int64_t>());
    }
    train();
    return kTokenizer.decode(ids);
  }

 private:
  at::Tensor loss_of(volt::Batch& batch) {
    // {input, target}: [batch, context] each, the target the input shifted by one token.
    auto logits = forward(batch[0]);
    return at::cross_entropy_loss(logits.reshape({-1, kVocab}), batch[1].reshape({-1}));
  }

  int64_t context_;
  double lr_;
  std::string optimizer_;
  torch::nn::Embedding tokens_{nullptr}, positions_{nullptr};
  torch::nn::TransformerEncoder encoder_{nullptr};
  torch::nn::LayerNorm norm_{nullptr};
  torch::nn::Linear head_{nullptr};
};

/// The King James Bible as Debian's bible-kjv prints it from bible-kjv-text (whose /usr/lib/bible.data is a
/// compressed format, not text), written to `path` unless it exists.
void write_king_james_bible(const std::string& path) {
  if (std::filesystem::exists(path)) return;
  if (!std::filesystem::exists("/usr/bin/bible") || !std::filesystem::exists("/usr/lib/bible.data")) {
    throw volt::ConfigError("data.file='" + path + "' does not exist yet; a file named kjv.txt is written with the "
                            "King James Bible, but it is not installed: `sudo apt-get install bible-kjv "
                            "bible-kjv-text`, or give another plain text file with --data.file.");
  }
  std::string text;
  FILE* pipe = ::popen("/usr/bin/bible gen1:1-rev22:21", "r");
  if (pipe == nullptr) throw volt::Error("cannot run /usr/bin/bible");
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), pipe)) > 0) text.append(buf, n);
  if (::pclose(pipe) != 0 || text.empty()) throw volt::Error("`/usr/bin/bible gen1:1-rev22:21` failed");
  // Every rank may get here: each writes its own temporary file and renames it, so readers see a whole file.
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out.flush()) throw volt::Error("cannot write " + tmp);
  }
  std::filesystem::rename(tmp, path);
}

/// Windows of data.context bytes over the text (memory-mapped token file, tokenized once); the last val_fraction
/// of them for validation.
class TextFileData : public volt::data::DataModule {
 public:
  TextFileData(std::string file, std::string token_file, int64_t context, double val_fraction, int64_t batch_size,
               uint64_t seed)
      : file_(std::move(file)), token_file_(std::move(token_file)), context_(context), val_fraction_(val_fraction),
        batch_size_(batch_size), seed_(seed) {}

  void setup(volt::Stage) override {
    if (train_) return;
    for (const auto& path : {token_file_, file_}) {
      const std::filesystem::path folder = std::filesystem::path(path).parent_path();
      if (!folder.empty()) std::filesystem::create_directories(folder);
    }
    const std::string& corpus = file_;
    if (std::filesystem::path(corpus).filename() == "kjv.txt") write_king_james_bible(corpus);
    volt::data::TokenWindowOptions o;
    o.context = context_;
    auto windows = volt::data::TokenWindowDataset::from_corpus(corpus, kTokenizer, token_file_, o);
    const int64_t n = windows->size();
    if (n < 4) {
      throw volt::ConfigError("data.file='" + corpus + "' gives " + std::to_string(n) + " windows of data.context=" +
                              std::to_string(context_) + " bytes; at least 4 are needed. Use a longer text or a "
                              "smaller data.context.");
    }
    const auto& tokens = windows->tokens();
    std::vector<uint8_t> seen(kVocab, 0);
    for (int64_t i = 0; i < tokens.size(); ++i) seen[tokens[i]] = 1;
    seen_ = at::from_blob(seen.data(), {kVocab}, at::kByte).to(at::kBool);
    const int64_t val = std::max<int64_t>(1, static_cast<int64_t>(n * val_fraction_));
    std::vector<int64_t> train_ids(n - val), val_ids(val);
    for (int64_t i = 0; i < n - val; ++i) train_ids[i] = i;
    for (int64_t i = 0; i < val; ++i) val_ids[i] = n - val + i;
    train_ = std::make_shared<volt::data::Subset>(windows, std::move(train_ids));
    val_ = std::make_shared<volt::data::Subset>(windows, std::move(val_ids));
    std::cout << tokens.size() << " tokens of " << corpus << " (" << token_file_
              << (windows->tokenized() ? ", written now" : ", reused") << "): " << n - val << " train and " << val
              << " val windows of " << context_ << "\n";
  }

  std::shared_ptr<volt::data::DataLoader> train_dataloader() override { return loader(train_, true); }
  std::shared_ptr<volt::data::DataLoader> val_dataloader() override { return loader(val_, false); }
  /// [kVocab] bool: which bytes occur in the text (after setup).
  const at::Tensor& seen_bytes() const { return seen_; }

 private:
  std::shared_ptr<volt::data::DataLoader> loader(std::shared_ptr<const volt::data::Dataset> ds, bool train) const {
    volt::data::DataLoaderOptions o;
    o.batch_size = batch_size_;
    o.shuffle = train;
    o.seed = seed_;
    return std::make_shared<volt::data::DataLoader>(std::move(ds), o);
  }

  at::Tensor seen_;
  std::string file_;
  std::string token_file_;
  int64_t context_;
  double val_fraction_;
  int64_t batch_size_;
  uint64_t seed_;
  std::shared_ptr<const volt::data::Dataset> train_, val_;
};

}  // namespace

int main(int argc, char** argv) {
  const std::string name = project::program_name(argv[0]);
  return project::run(name, [&] {
    volt::cli::Cli cli(name, "A byte-level transformer language model with Volt.");
    project::add_common_options(cli);
    cli.add_option("data.file", "data/kjv.txt",
                   "plain text file to learn from; one named kjv.txt that does not exist is written with the King "
                   "James Bible (bible-kjv) first")
        .add_option("data.token_file", "data/corpus.tok", "where the tokenized text goes (reused while it matches)")
        .add_option("data.context", int64_t{64}, "bytes the model sees")
        .add_option("data.val_fraction", 0.1, "share of the windows held out for validation")
        .add_option("model.dim", int64_t{128}, "embedding width")
        .add_option("model.heads", int64_t{4}, "attention heads (must divide model.dim)")
        .add_option("model.layers", int64_t{2}, "transformer layers")
        .add_option("sample.prompt", "The ", "text that sampling continues")
        .add_option("sample.length", int64_t{200}, "bytes to sample after training; 0: none")
        .add_option("sample.temperature", 0.8, "softmax temperature for sampling");
    if (!cli.parse(argc, argv)) return 0;
    const int64_t context = project::count(cli, "data.context", 1, 65536);
    const int64_t dim = project::count(cli, "model.dim", 1, 65536);
    const int64_t heads = project::count(cli, "model.heads", 1, 1024);
    const int64_t layers = project::count(cli, "model.layers", 1, 1024);
    const double val_fraction = project::number(cli, "data.val_fraction", 0.0, 1.0, /*low_open=*/true);
    const int64_t sample_length = project::count(cli, "sample.length", 0, int64_t{1} << 24);
    const double temperature = project::number(cli, "sample.temperature", 0.0, 100.0, /*low_open=*/true);
    if (dim % heads != 0) {
      throw volt::ConfigError("model.heads=" + std::to_string(heads) + " must divide model.dim=" +
                              std::to_string(dim) + ".");
    }
    auto trainer = project::make_trainer(cli);
    CharTransformer model(context, dim, heads, layers, project::learning_rate(cli), cli.get_string("model.optimizer"));
    TextFileData data(cli.get_string("data.file"), cli.get_string("data.token_file"), context, val_fraction,
                      project::batch_size(cli), trainer->options().seed.value_or(0));
    project::tune(*trainer, model, data);  // tuner.lr_find: the learning rate found before fit
    trainer->fit(model, data, cli.get_string("fit.ckpt_path"));
    if (const int code = project::exit_code(*trainer)) return code;
    if (sample_length > 0) {
      std::cout << "\nsample:\n"
                << model.sample(cli.get_string("sample.prompt"), sample_length, temperature, data.seen_bytes())
                << "\n";
    }
    return 0;
  });
}
