//===- ModelSpecsTest.cpp - The model/feature compatibility rule ----------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include "mlbridge/ModelSpecs.h"

using namespace mlbridge;
using namespace mlbridge::test;
using namespace llvm;

namespace {

std::vector<TensorSpec> compilerFeatures() {
  return {createSpec<int64_t>("a", {1}), createSpec<float>("b", {2, 3}),
          createSpec<int32_t>("c", {DynamicDim}),
          createSpec<double>("extra", {4})};
}

TEST(ModelSpecsTest, BindsInputsByNameInModelOrder) {
  std::vector<TensorSpec> Inputs = {createSpec<int32_t>("c", {DynamicDim}),
                                    createSpec<int64_t>("a", {1})};
  MLB_ASSERT_VALUE(Binding, bindModelInputs(compilerFeatures(), Inputs, "m"));
  EXPECT_EQ(Binding, (std::vector<size_t>{2, 0}));
}

TEST(ModelSpecsTest, ExtraCompilerFeaturesAreNotFed) {
  std::vector<TensorSpec> Inputs = {createSpec<float>("b", {2, 3})};
  MLB_ASSERT_VALUE(Binding, bindModelInputs(compilerFeatures(), Inputs, "m"));
  EXPECT_EQ(Binding, (std::vector<size_t>{1}));
}

TEST(ModelSpecsTest, EveryDifferenceIsListed) {
  std::vector<TensorSpec> Inputs = {
      createSpec<int64_t>("missing", {1}), createSpec<float>("a", {1}),
      createSpec<float>("b", {3, 3}), createSpec<int32_t>("c", {DynamicDim})};
  std::string Message =
      errorText(bindModelInputs(compilerFeatures(), Inputs, "inliner-v2"));
  EXPECT_NE(Message.find("model 'inliner-v2' does not fit"), std::string::npos)
      << Message;
  EXPECT_NE(Message.find("(3 differences)"), std::string::npos) << Message;
  EXPECT_NE(Message.find("input 'missing' is not a feature the compiler sends"),
            std::string::npos)
      << Message;
  EXPECT_NE(Message.find("input 'a' is float but the compiler sends int64_t"),
            std::string::npos)
      << Message;
  EXPECT_NE(Message.find("input 'b' has shape [3,3] but the compiler sends "
                         "shape [2,3]"),
            std::string::npos)
      << Message;
  EXPECT_NE(Message.find("the compiler sends: a:int64_t[1]"), std::string::npos)
      << Message;
}

TEST(ModelSpecsTest, DuplicateModelInputIsADifference) {
  std::vector<TensorSpec> Inputs = {createSpec<int64_t>("a", {1}),
                                    createSpec<int64_t>("a", {1})};
  std::vector<std::string> Differences =
      listInputDifferences(compilerFeatures(), Inputs);
  ASSERT_EQ(Differences.size(), 1u);
  EXPECT_EQ(Differences[0], "input 'a' is declared more than once");
}

TEST(ModelSpecsTest, ShapeCompatibility) {
  EXPECT_TRUE(areShapesCompatible({1}, {1}));
  EXPECT_TRUE(areShapesCompatible({DynamicDim}, {7}));
  EXPECT_TRUE(areShapesCompatible({2, DynamicDim}, {2, 5}));
  // A leading batch dimension of 1: the same row-major bytes.
  EXPECT_TRUE(areShapesCompatible({4}, {1, 4}));
  EXPECT_TRUE(areShapesCompatible({}, {1}));
  EXPECT_FALSE(areShapesCompatible({4}, {1, 5}));
  EXPECT_FALSE(areShapesCompatible({2, DynamicDim}, {3, 5}));
  EXPECT_FALSE(areShapesCompatible({DynamicDim}, {1, 4}));
}

TEST(ModelSpecsTest, OutputOfTheAdviceTypeIsAccepted) {
  MLB_ASSERT_OK(checkModelOutput(createSpec<int64_t>("advice", {1}),
                                 createSpec<int64_t>("logits", {1, 1}), "m"));
}

TEST(ModelSpecsTest, OutputOfAnotherTypeIsRefused) {
  Error E = checkModelOutput(createSpec<int64_t>("advice", {1}),
                             createSpec<float>("logits", {1, 2}), "m");
  std::string Message = errorText(std::move(E));
  EXPECT_EQ(Message, "model 'm' output 'logits' cannot answer as advice "
                     "'advice': it is float but the advice is int64_t; it has "
                     "shape [1,2] but the advice has shape [1]");
}

} // namespace
