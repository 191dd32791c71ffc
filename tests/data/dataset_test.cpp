#include "volt/data/dataset.h"

#include <ATen/ops/arange.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/zeros.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "volt/core/error.h"

namespace volt::data {
namespace {

// 10 examples: inputs row i = [3i, 3i+1, 3i+2] (float), target i = 100 + i (int64).
std::shared_ptr<TensorDataset> numbered_rows(int64_t n = 10) {
  at::Tensor inputs = at::arange(n * 3, at::kFloat).reshape({n, 3});
  at::Tensor targets = at::arange(100, 100 + n, at::kLong);
  return std::make_shared<TensorDataset>(std::vector<at::Tensor>{inputs, targets});
}

// A data set without a get_batch override, to exercise the default stacking.
class SquaresDataset : public Dataset {
 public:
  int64_t size() const override { return 5; }
  Batch get(int64_t index) const override {
    return {at::arange(2, at::kFloat).add(static_cast<double>(index * index)),
            at::arange(index, index + 1, at::kLong).reshape({})};
  }
};

template <typename Fn>
std::string thrown_message(Fn&& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no exception)";
}

TEST(TensorDataset, GetBatchEqualsManualRows) {
  auto data = numbered_rows();
  const std::vector<int64_t> indices = {7, 0, 3, 3, 9};
  Batch batch = data->get_batch(indices);
  ASSERT_EQ(batch.size(), 2u);
  std::vector<at::Tensor> inputs, targets;
  for (int64_t i : indices) {
    inputs.push_back(data->tensors()[0][i]);
    targets.push_back(data->tensors()[1][i]);
  }
  EXPECT_TRUE(batch[0].equal(at::stack(inputs)));
  EXPECT_TRUE(batch[1].equal(at::stack(targets)));
  EXPECT_EQ(batch[1].scalar_type(), at::kLong);
}

TEST(TensorDataset, GetReturnsOneRowOfEachTensor) {
  auto data = numbered_rows();
  EXPECT_EQ(data->size(), 10);
  Batch example = data->get(4);
  ASSERT_EQ(example.size(), 2u);
  EXPECT_TRUE(example[0].equal(at::arange(12, 15, at::kFloat)));
  EXPECT_EQ(example[1].item<int64_t>(), 104);
}

TEST(TensorDataset, EmptyIndexListGivesEmptyBatch) {
  Batch batch = numbered_rows()->get_batch({});
  ASSERT_EQ(batch.size(), 2u);
  EXPECT_EQ(batch[0].sizes(), (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(batch[1].size(0), 0);
}

TEST(TensorDataset, RejectsTensorsWithDifferentFirstDimension) {
  const std::string message = thrown_message([] {
    TensorDataset({at::zeros({10, 3}), at::zeros({9})});
  });
  EXPECT_NE(message.find("9"), std::string::npos) << message;
  EXPECT_NE(message.find("10"), std::string::npos) << message;
  EXPECT_THROW(TensorDataset({at::zeros({10, 3}), at::zeros({9})}), DataError);
}

TEST(TensorDataset, RejectsAnEmptyTensorList) {
  EXPECT_THROW(TensorDataset(std::vector<at::Tensor>{}), DataError);
}

TEST(TensorDataset, RejectsScalarTensors) {
  EXPECT_THROW(TensorDataset({at::zeros({})}), DataError);
}

TEST(TensorDataset, RejectsOutOfRangeIndices) {
  auto data = numbered_rows();
  EXPECT_THROW(data->get(10), Error);
  EXPECT_THROW(data->get(-1), Error);
  EXPECT_THROW(data->get_batch({0, 10}), Error);
  const std::string message = thrown_message([&] { data->get_batch({-2}); });
  EXPECT_NE(message.find("-2"), std::string::npos) << message;
}

TEST(Dataset, DefaultGetBatchStacksExamplesPositionByPosition) {
  SquaresDataset data;
  Batch batch = data.get_batch({2, 4});
  ASSERT_EQ(batch.size(), 2u);
  EXPECT_EQ(batch[0].sizes(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(batch[0][0][0].item<float>(), 4.f);
  EXPECT_EQ(batch[0][1][1].item<float>(), 17.f);
  EXPECT_EQ(batch[1].sizes(), (std::vector<int64_t>{2}));
  EXPECT_EQ(batch[1][1].item<int64_t>(), 4);
}

TEST(Subset, MapsItsIndicesToTheBaseDataSet) {
  auto data = numbered_rows();
  Subset subset(data, {8, 2, 5});
  EXPECT_EQ(subset.size(), 3);
  EXPECT_EQ(subset.get(1)[1].item<int64_t>(), 102);
  Batch batch = subset.get_batch({2, 0});
  EXPECT_TRUE(batch[1].equal(at::arange(105, 109, 3, at::kLong)));
  EXPECT_TRUE(batch[0].equal(data->get_batch({5, 8})[0]));
}

TEST(Subset, RejectsIndicesOutsideTheBaseOrItself) {
  auto data = numbered_rows();
  EXPECT_THROW(Subset(data, {3, 10}), Error);
  EXPECT_THROW(Subset(nullptr, {}), ConfigError);
  Subset subset(data, {1, 2});
  EXPECT_THROW(subset.get(2), Error);
  EXPECT_THROW(subset.get_batch({0, 2}), Error);
}

std::vector<std::vector<int64_t>> split_indices(int64_t n, const std::vector<int64_t>& lengths,
                                                uint64_t seed) {
  std::vector<std::vector<int64_t>> out;
  for (const auto& subset : random_split(numbered_rows(n), lengths, seed)) {
    out.push_back(subset->indices());
  }
  return out;
}

TEST(RandomSplit, SubsetsAreDisjointAndCoverEveryExample) {
  const auto parts = split_indices(100, {70, 20, 10}, 7);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[0].size(), 70u);
  EXPECT_EQ(parts[1].size(), 20u);
  EXPECT_EQ(parts[2].size(), 10u);
  std::vector<int64_t> all;
  for (const auto& part : parts) all.insert(all.end(), part.begin(), part.end());
  std::sort(all.begin(), all.end());
  std::vector<int64_t> expected(100);
  std::iota(expected.begin(), expected.end(), 0);
  EXPECT_EQ(all, expected);
}

TEST(RandomSplit, IsReproducibleForASeedAndDiffersAcrossSeeds) {
  EXPECT_EQ(split_indices(100, {60, 40}, 1), split_indices(100, {60, 40}, 1));
  EXPECT_NE(split_indices(100, {60, 40}, 1), split_indices(100, {60, 40}, 2));
}

TEST(RandomSplit, SubsetsReadTheBaseRows) {
  auto data = numbered_rows(20);
  auto parts = random_split(data, {15, 5}, 3);
  const int64_t base_index = parts[1]->indices()[2];
  EXPECT_EQ(parts[1]->get(2)[1].item<int64_t>(), 100 + base_index);
}

TEST(RandomSplit, RejectsLengthsThatDoNotAddUpToTheSize) {
  const std::string message = thrown_message([] { random_split(numbered_rows(10), {6, 3}, 0); });
  EXPECT_NE(message.find("9"), std::string::npos) << message;
  EXPECT_NE(message.find("10"), std::string::npos) << message;
  EXPECT_THROW(random_split(numbered_rows(10), {6, 3}, 0), ConfigError);
  EXPECT_THROW(random_split(numbered_rows(10), {12, -2}, 0), ConfigError);
  EXPECT_THROW(random_split(nullptr, {}, 0), ConfigError);
}

}  // namespace
}  // namespace volt::data
