// The public API as an app sees it: only <kiln/...> headers, the bundled example programs
// (examples/mlp.kiln: x f32 [batch, 16] -> probs [batch, 10], batch in [1, 64];
// examples/cnn.kiln: pixels f32 [batch, 3, H, W] -> logits [batch, 10]). Builds in the
// runtime-only profile too (no exporter: the programs come from disk).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kiln/method.h"
#include "kiln/program.h"
#include "kiln/status.h"
#include "kiln/version.h"

namespace kiln {
namespace {

std::string example(const char* name) { return std::string(KILN_SOURCE_DIR) + "/examples/" + name; }

// The views a caller gets cannot change a Method's shapes: bind does.
static_assert(std::is_same_v<decltype(std::declval<Method&>().input(0)), const TensorView&>);
static_assert(std::is_same_v<decltype(std::declval<Method&>().output(0)), const TensorView&>);
static_assert(std::is_same_v<decltype(std::declval<const TensorView&>().as<float>()), const float*>);

class Api : public ::testing::Test {
 protected:
  void SetUp() override {
    auto p = Program::load(example("mlp.kiln"));
    ASSERT_TRUE(p.ok()) << p.status().message();
    program_ = std::move(*p);
    auto m = Method::create(*program_, "forward");
    ASSERT_TRUE(m.ok()) << m.status().message();
    method_ = std::move(*m);
  }
  std::unique_ptr<Program> program_;
  std::unique_ptr<Method> method_;
};

TEST(Version, HeaderLibraryAndFileAgree) {
  EXPECT_STREQ(version(), KILN_VERSION_STRING);
  EXPECT_EQ(format_version(), static_cast<uint32_t>(KILN_FORMAT_VERSION));
  const std::string v = std::to_string(KILN_VERSION_MAJOR) + "." + std::to_string(KILN_VERSION_MINOR) + "." +
                        std::to_string(KILN_VERSION_PATCH);
  EXPECT_EQ(v, KILN_VERSION_STRING);
  auto p = Program::load(example("cnn.kiln"));
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ((*p)->format_version(), static_cast<uint32_t>(KILN_FORMAT_VERSION));
}

TEST(Version, LoadRefusesAnotherFormatVersion) {
  std::ifstream f(example("mlp.kiln"), std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  ASSERT_GT(bytes.size(), 64u);
  for (uint32_t other : {uint32_t{1}, uint32_t{KILN_FORMAT_VERSION + 1}}) {
    // The header's version field sits after the 8-byte magic (little-endian).
    std::vector<char> copy = bytes;
    std::memcpy(copy.data() + 8, &other, sizeof(other));
    void* buf = std::aligned_alloc(64, (copy.size() + 63) / 64 * 64);
    std::memcpy(buf, copy.data(), copy.size());
    auto p = Program::load_buffer(buf, copy.size());
    ASSERT_FALSE(p.ok()) << "format version " << other;
    EXPECT_EQ(p.status().code(), Code::kDataLoss);
    EXPECT_NE(p.status().message().find("format version " + std::to_string(other)), std::string::npos)
        << p.status().message();
    std::free(buf);
  }
}

TEST_F(Api, InputsAndOutputsByName) {
  auto x = method_->input_index("x");
  ASSERT_TRUE(x.ok());
  EXPECT_EQ(*x, 0u);
  auto probs = method_->output_index("probs");
  ASSERT_TRUE(probs.ok());
  EXPECT_EQ(*probs, 0u);
  auto missing = method_->input_index("pixels");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), Code::kNotFound);
  EXPECT_EQ(missing.status().message(), "method 'forward' has no input named 'pixels'; its inputs are 'x'");
  auto out = method_->output_index("logits");
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().message(), "method 'forward' has no output named 'logits'; its outputs are 'probs'");
}

TEST_F(Api, IndicesOutOfRangeGiveEmptyViews) {
  ASSERT_EQ(method_->num_inputs(), 1u);
  ASSERT_EQ(method_->num_outputs(), 1u);
  for (size_t i : {size_t{1}, size_t{7}, ~size_t{0}}) {
    EXPECT_EQ(method_->input(i).rank, 0);
    EXPECT_EQ(method_->input(i).data, nullptr);
    EXPECT_EQ(method_->output(i).rank, 0);
    EXPECT_EQ(method_->output(i).data, nullptr);
    EXPECT_EQ(method_->input_data(i), nullptr);
    EXPECT_EQ(method_->input_data<float>(i), nullptr);
  }
  EXPECT_EQ(program_->method_name(1), "");
  EXPECT_EQ(program_->method_name(0), "forward");
}

TEST_F(Api, TypedInputDataChecksTheDtype) {
  EXPECT_NE(method_->input_data<float>(0), nullptr);
  EXPECT_EQ(method_->input_data<int64_t>(0), nullptr);
  EXPECT_EQ(method_->input_data<int32_t>(0), nullptr);
  EXPECT_EQ(method_->input_data<bool>(0), nullptr);
  EXPECT_EQ(method_->input_data<float>(0), method_->input(0).data);
}

TEST_F(Api, ViewsFollowEachBind) {
  for (int64_t batch : {64, 3, 1, 17}) {
    ASSERT_TRUE(method_->bind_shapes({{batch, 16}}).ok());
    const TensorView& in = method_->input(0);
    ASSERT_EQ(in.rank, 2);
    EXPECT_EQ(in.dims[0], batch);
    EXPECT_EQ(in.nbytes(), static_cast<size_t>(batch) * 16 * 4);
    float* x = method_->input_data<float>(0);
    for (int64_t i = 0; i < batch * 16; ++i) x[i] = static_cast<float>(i % 5) - 2.f;
    ASSERT_TRUE(method_->execute().ok());
    const TensorView& y = method_->output(0);
    ASSERT_EQ(y.rank, 2);
    EXPECT_EQ(y.dims[0], batch);
    EXPECT_EQ(y.dims[1], 10);
    for (int64_t r = 0; r < batch; ++r) {  // softmax rows
      double sum = 0;
      for (int c = 0; c < 10; ++c) sum += y.as<float>()[r * 10 + c];
      EXPECT_NEAR(sum, 1.0, 1e-5) << "row " << r << " at batch " << batch;
    }
  }
}

TEST_F(Api, RefusedBindNamesTheContract) {
  Status s = method_->bind_shapes({{65, 16}});
  EXPECT_EQ(s.code(), Code::kOutOfRange);
  EXPECT_EQ(s.message().rfind("bind: input 'x' (#0) dim 0 ('batch') is 65, outside its range [1, 64]", 0), 0u)
      << s.message();
  EXPECT_FALSE(method_->is_bound());
  EXPECT_EQ(method_->execute().code(), Code::kFailedPrecondition);
}

TEST(CallerArena, SizedByTheProgramAndRefusedWhenSmaller) {
  auto p = Program::load(example("cnn.kiln"));
  ASSERT_TRUE(p.ok()) << p.status().message();
  MethodOptions options;
  auto need = Method::arena_bytes(**p, "forward", options);
  ASSERT_TRUE(need.ok());
  ASSERT_GT(*need, 0u);
  const size_t size = (static_cast<size_t>(*need) + 63) / 64 * 64;
  std::unique_ptr<void, decltype(&std::free)> arena(std::aligned_alloc(64, size), &std::free);
  auto small = Method::create(**p, "forward", options, arena.get(), static_cast<size_t>(*need) - 16);
  ASSERT_FALSE(small.ok());
  EXPECT_EQ(small.status().code(), Code::kResourceExhausted) << small.status().message();
  auto m = Method::create(**p, "forward", options, arena.get(), size);
  ASSERT_TRUE(m.ok()) << m.status().message();
  const uint8_t* lo = static_cast<const uint8_t*>(arena.get());
  for (auto shape : {std::vector<int64_t>{4, 3, 64, 64}, std::vector<int64_t>{1, 3, 9, 5}}) {
    ASSERT_TRUE((*m)->bind_shapes({shape}).ok());
    const uint8_t* in = static_cast<const uint8_t*>((*m)->input(0).data);
    EXPECT_TRUE(in >= lo && in + (*m)->input(0).nbytes() <= lo + size) << "the input lies in the caller's arena";
    std::memset((*m)->input_data(0), 0, (*m)->input(0).nbytes());
    ASSERT_TRUE((*m)->execute().ok());
    EXPECT_EQ((*m)->output(0).dims[0], shape[0]);
  }
}

TEST(Program, UnknownMethodListsTheNames) {
  auto p = Program::load(example("mlp.kiln"));
  ASSERT_TRUE(p.ok());
  auto m = Method::create(**p, "decode");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), Code::kNotFound);
  EXPECT_NE(m.status().message().find("'forward'"), std::string::npos) << m.status().message();
  auto missing = Program::load(example("no_such_file.kiln"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), Code::kIoError);
}

TEST(Status, EveryCodeHasAName) {
  const std::pair<Code, const char*> names[] = {
      {Code::kOk, "ok"},
      {Code::kInvalidArgument, "invalid argument"},
      {Code::kOutOfRange, "out of range"},
      {Code::kNotFound, "not found"},
      {Code::kDataLoss, "data loss"},
      {Code::kUnimplemented, "unimplemented"},
      {Code::kFailedPrecondition, "failed precondition"},
      {Code::kResourceExhausted, "resource exhausted"},
      {Code::kInternal, "internal"},
      {Code::kIoError, "i/o error"}};
  for (const auto& [code, name] : names) EXPECT_STREQ(code_name(code), name);
  Status ok;
  EXPECT_TRUE(ok.ok());
  EXPECT_TRUE(ok.message().empty());
}

}  // namespace
}  // namespace kiln
