//===- OnnxRuntimeTest.cpp - The real ONNX Runtime library links ----------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//

#include "onnxruntime_c_api.h"

#include "gtest/gtest.h"

#include <cstdio>
#include <string>

namespace {

TEST(OnnxRuntimeTest, LibraryVersionIsAtLeastTheHeaders) {
  const OrtApiBase *Base = OrtGetApiBase();
  ASSERT_NE(Base, nullptr);
  std::string Version = Base->GetVersionString();
  // "1.N.M": the minor version is the C API version.
  unsigned Major = 0, Minor = 0;
  ASSERT_EQ(std::sscanf(Version.c_str(), "%u.%u", &Major, &Minor), 2)
      << Version;
  EXPECT_EQ(Major, 1u) << Version;
  EXPECT_GE(Minor, static_cast<unsigned>(ORT_API_VERSION)) << Version;
  EXPECT_NE(Base->GetApi(ORT_API_VERSION), nullptr);
}

} // namespace
