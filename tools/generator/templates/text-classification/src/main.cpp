// Text classification with Volt: each file of data.dir is one category, its texts separated by
// lines holding only "%" (the fortune(6) format; a file without such lines is one text per
// paragraph). A text becomes normalised counts of hashed character trigrams; an MLP classifies it.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <ATen/ops/cross_entropy_loss.h>
#include <ATen/ops/from_blob.h>
#include <torch/nn/functional/activation.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>

#include "project_options.h"

namespace {

/// Splits "a,b,c" at commas, dropping empty parts.
std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string part;
  while (std::getline(in, part, ',')) {
    if (!part.empty()) out.push_back(part);
  }
  return out;
}

/// The texts of one file: separated by "%" lines, else by blank lines.
std::vector<std::string> read_texts(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) throw volt::ConfigError("cannot read " + file.string() + "; check data.dir and data.categories.");
  std::vector<std::string> texts;
  std::string line, text;
  const bool percent = [&] {
    std::ifstream probe(file);
    std::string l;
    while (std::getline(probe, l)) {
      if (l == "%") return true;
    }
    return false;
  }();
  auto flush = [&] {
    if (text.find_first_not_of(" \n\t") != std::string::npos) texts.push_back(text);
    text.clear();
  };
  while (std::getline(in, line)) {
    if (percent ? line == "%" : line.empty()) {
      flush();
    } else {
      text += line + "\n";
    }
  }
  flush();
  return texts;
}

/// L2-normalised counts of character trigrams hashed (FNV-1a) into `buckets`.
void featurise(const std::string& text, int64_t buckets, float* out) {
  std::fill(out, out + buckets, 0.0f);
  const std::string t = "  " + text + " ";
  for (size_t i = 0; i + 3 <= t.size(); ++i) {
    uint32_t h = 2166136261u;
    for (size_t k = i; k < i + 3; ++k) h = (h ^ static_cast<unsigned char>(t[k])) * 16777619u;
    out[h % buckets] += 1.0f;
  }
  double norm = 0;
  for (int64_t b = 0; b < buckets; ++b) norm += out[b] * out[b];
  const float scale = norm > 0 ? static_cast<float>(1.0 / std::sqrt(norm)) : 0.0f;
  for (int64_t b = 0; b < buckets; ++b) out[b] *= scale;
}

class TextClassifier : public volt::Module {
 public:
  TextClassifier(int64_t buckets, int64_t classes, double lr, std::string optimizer)
      : lr_(lr), optimizer_(std::move(optimizer)) {
    fc1_ = register_module("fc1", torch::nn::Linear(buckets, 256));
    drop_ = register_module("dropout", torch::nn::Dropout(0.3));
    fc2_ = register_module("fc2", torch::nn::Linear(256, classes));
    save_hyperparameters({{"lr", std::to_string(lr)}, {"optimizer", optimizer_}});
  }

  /// The learning rate configure_optimizers uses (lr_find's suggestion with --tuner.lr_find true).
  void set_lr(double lr) { lr_ = lr; }

  at::Tensor forward(const at::Tensor& x) {
    return fc2_->forward(drop_->forward(torch::nn::functional::relu(fc1_->forward(x))));
  }

  at::Tensor training_step(volt::Batch& batch, volt::StepContext& ctx) override {
    auto loss = at::cross_entropy_loss(forward(batch[0]), batch[1]);
    ctx.log("train_loss", loss, {.prog_bar = true});
    return loss;
  }

  void validation_step(volt::Batch& batch, volt::StepContext& ctx) override {
    auto logits = forward(batch[0]);
    ctx.log("val_loss", at::cross_entropy_loss(logits, batch[1]), {.prog_bar = true});
    ctx.log("val_acc", logits.argmax(1).eq(batch[1]).to(at::kFloat).mean(), {.prog_bar = true});
  }

  volt::OptimizerConfig configure_optimizers() override {
    return project::make_optimizer(optimizer_, parameters(), lr_);
  }

 private:
  double lr_;
  std::string optimizer_;
  torch::nn::Linear fc1_{nullptr}, fc2_{nullptr};
  torch::nn::Dropout drop_{nullptr};
};

class TextData : public volt::data::DataModule {
 public:
  TextData(std::string dir, std::vector<std::string> categories, int64_t buckets, double val_fraction,
           int64_t batch_size, uint64_t seed)
      : dir_(std::move(dir)), categories_(std::move(categories)), buckets_(buckets), val_fraction_(val_fraction),
        batch_size_(batch_size), seed_(seed) {
    if (categories_.size() < 2) {
      throw volt::ConfigError("data.categories needs at least two file names of data.dir, comma-separated "
                              "(e.g. \"food,science\").");
    }
    if (!(val_fraction_ > 0 && val_fraction_ < 1)) {
      throw volt::ConfigError("data.val_fraction=" + std::to_string(val_fraction_) + " must be between 0 and 1.");
    }
    for (const auto& c : categories_) {
      if (!std::filesystem::is_regular_file(std::filesystem::path(dir_) / c)) {
        throw volt::ConfigError("data.categories names '" + c + "' but " + dir_ + "/" + c +
                                " is not a file; on Debian install the data with `apt-get install fortunes`.");
      }
    }
  }

  int64_t classes() const { return static_cast<int64_t>(categories_.size()); }

  void setup(volt::Stage) override {
    if (train_) return;
    std::vector<float> features;
    std::vector<int64_t> labels;
    for (size_t c = 0; c < categories_.size(); ++c) {
      for (const auto& text : read_texts(std::filesystem::path(dir_) / categories_[c])) {
        features.resize(features.size() + buckets_);
        featurise(text, buckets_, features.data() + features.size() - buckets_);
        labels.push_back(static_cast<int64_t>(c));
      }
    }
    const int64_t n = static_cast<int64_t>(labels.size());
    auto x = at::from_blob(features.data(), {n, buckets_}, at::kFloat).clone();
    auto y = at::from_blob(labels.data(), {n}, at::kLong).clone();
    auto full = std::make_shared<volt::data::TensorDataset>(std::vector<at::Tensor>{x, y});
    const int64_t val = std::max<int64_t>(1, static_cast<int64_t>(n * val_fraction_));
    auto parts = volt::data::random_split(full, {n - val, val}, seed_);
    train_ = parts[0];
    val_ = parts[1];
    std::cout << n << " texts in " << categories_.size() << " categories: " << n - val << " train, " << val
              << " val\n";
  }

  std::shared_ptr<volt::data::DataLoader> train_dataloader() override { return loader(train_, true); }
  std::shared_ptr<volt::data::DataLoader> val_dataloader() override { return loader(val_, false); }

 private:
  std::shared_ptr<volt::data::DataLoader> loader(std::shared_ptr<const volt::data::Dataset> ds, bool train) const {
    volt::data::DataLoaderOptions o;
    o.batch_size = batch_size_;
    o.shuffle = train;
    o.seed = seed_;
    return std::make_shared<volt::data::DataLoader>(std::move(ds), o);
  }

  std::string dir_;
  std::vector<std::string> categories_;
  int64_t buckets_;
  double val_fraction_;
  int64_t batch_size_;
  uint64_t seed_;
  std::shared_ptr<const volt::data::Dataset> train_, val_;
};

}  // namespace

int main(int argc, char** argv) {
  const std::string name = project::program_name(argv[0]);
  return project::run(name, [&] {
    volt::cli::Cli cli(name, "Text classification with Volt: one category per file of data.dir.");
    project::add_common_options(cli);
    cli.add_option("data.dir", "/usr/share/games/fortunes", "folder with one text file per category")
        .add_option("data.categories", "computers,food,law,linux,love,medicine,politics,science,sports",
                    "file names of data.dir to use as categories, comma-separated")
        .add_option("data.buckets", int64_t{2048}, "hashed trigram features per text")
        .add_option("data.val_fraction", 0.1, "share of the texts held out for validation");
    if (!cli.parse(argc, argv)) return 0;
    const int64_t buckets = project::count(cli, "data.buckets", 1, int64_t{1} << 24);
    const double val_fraction = project::number(cli, "data.val_fraction", 0.0, 1.0, /*low_open=*/true);
    auto trainer = project::make_trainer(cli);
    TextData data(cli.get_string("data.dir"), split(cli.get_string("data.categories")), buckets, val_fraction, project::batch_size(cli), trainer->options().seed.value_or(0));
    TextClassifier model(buckets, data.classes(), project::learning_rate(cli),
                         cli.get_string("model.optimizer"));
    project::tune(*trainer, model, data);  // tuner.lr_find: the learning rate found before fit
    trainer->fit(model, data, cli.get_string("fit.ckpt_path"));
    return project::exit_code(*trainer);
  });
}
