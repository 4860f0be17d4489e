//===- VectorsTest.cpp - Cross-language test vectors ----------------------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// test/vectors/cases.json lists cases written by the Python implementation
// (test/vectors/generate.py); each <case>.<serdes> file holds the expected
// bytes. C++ must produce exactly those bytes and decode them back.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include "CaseJSON.h"

using namespace mlbridge;
using namespace mlbridge::test;

namespace {

TEST(CrossLanguageVectorsTest, EncodeGivesTheFilesBytesAndDecodeGivesTheCase) {
  bool Found = false;
  std::string Text = readSourceFile("test/vectors/cases.json", Found);
  ASSERT_TRUE(Found) << "test/vectors/cases.json is missing: generate it with "
                        "test/vectors/generate.py";
  llvm::Expected<llvm::json::Value> Doc = llvm::json::parse(Text);
  ASSERT_TRUE(static_cast<bool>(Doc)) << llvm::toString(Doc.takeError());
  const llvm::json::Array *Cases =
      Doc->getAsObject() ? Doc->getAsObject()->getArray("cases") : nullptr;
  ASSERT_TRUE(Cases) << "cases.json has no 'cases' array";
  ASSERT_FALSE(Cases->empty());
  size_t Checked = 0;
  for (const llvm::json::Value &C : *Cases) {
    const llvm::json::Object *O = C.getAsObject();
    ASSERT_TRUE(O);
    std::string Name = O->getString("name").value_or("").str();
    SCOPED_TRACE("case " + Name);
    const llvm::json::Value *RecordsJSON = O->get("records");
    ASSERT_TRUE(RecordsJSON);
    MLB_ASSERT_VALUE(Records, recordsFromJSON(*RecordsJSON));
    const llvm::json::Array *Kinds = O->getArray("serdes");
    ASSERT_TRUE(Kinds);
    for (const llvm::json::Value &K : *Kinds) {
      std::string KindName = K.getAsString().value_or("").str();
      SCOPED_TRACE("serdes " + KindName);
      MLB_ASSERT_VALUE(Kind, parseSerDesKind(KindName));
#ifndef MLBRIDGE_HAVE_PROTOBUF
      if (Kind == SerDesKind::Protobuf)
        continue;
#endif
      std::string File = "test/vectors/" + Name + "." + KindName;
      std::string Expected = readSourceFile(File, Found);
      ASSERT_TRUE(Found) << "missing " << File;
      MLB_ASSERT_VALUE(Bytes, encodeAll(Kind, Records));
      EXPECT_TRUE(Bytes == Expected) << File << ": C++ encoding differs";
      MLB_ASSERT_VALUE(Back, decodeBytes(Kind, Expected));
      ASSERT_EQ(Back.size(), Records.size());
      for (size_t I = 0; I < Back.size(); ++I)
        EXPECT_TRUE(Back[I] == Records[I]) << File << ": record " << I;
      ++Checked;
    }
  }
  EXPECT_GT(Checked, 0u);
}

} // namespace
