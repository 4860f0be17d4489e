//===- ModelRegistryTest.cpp - Finding models by name or path -------------===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include "mlbridge/ModelRegistry.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>
#include <optional>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace mlbridge;
using namespace mlbridge::test;
using namespace llvm;

namespace {

/// The first bytes of a little-endian ELF shared object (e_type ET_DYN): all
/// findModel() reads of a .so is this header and the specs sidecar.
const char ElfSharedObjectHeader[] = "\x7f"
                                     "ELF\x02\x01\x01\0\0\0\0\0\0\0\0\0\x03\0";

/// A temporary registry folder, removed at the end of the test.
class ModelRegistryTest : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_FALSE(sys::fs::createUniqueDirectory("mlbridge-registry", Root));
  }
  void TearDown() override { sys::fs::remove_directories(Root); }

  std::string path(StringRef A, StringRef B = "", StringRef C = "") {
    SmallString<256> P(Root);
    for (StringRef Part : {A, B, C})
      if (!Part.empty())
        sys::path::append(P, Part);
    return std::string(P);
  }

  void writeFile(StringRef Path, StringRef Contents) {
    sys::fs::create_directories(sys::path::parent_path(Path));
    std::error_code EC;
    raw_fd_ostream OS(Path, EC);
    ASSERT_FALSE(EC) << Path.str() << ": " << EC.message();
    OS << Contents;
  }

  /// Registers \p Name the way `mlbridge models register` lays it out.
  /// \p TaskJSON is the "task" member's JSON value; empty: no member.
  void addModel(StringRef Name, StringRef Kind = "onnx",
                StringRef File = "model.onnx", StringRef Contents = "12345",
                StringRef TaskJSON = "") {
    writeFile(path(Name, File), Contents);
    std::string Task =
        TaskJSON.empty() ? "" : (R"("task":)" + TaskJSON + ",").str();
    writeFile(path(Name, "model.json"),
              (R"({"format":1,"name":")" + Name + R"(","kind":")" + Kind +
               R"(",)" + Task + R"("file":")" + File +
               R"(","sha256":"00","size":)" + Twine(Contents.size()) +
               R"(,"features":[{"name":"a","type":"int64_t","port":0,)"
               R"("shape":[1]},{"name":"b","type":"float","port":0,)"
               R"("shape":[-1,3]}],"advice":[{"name":"y","type":"float",)"
               R"("port":0,"shape":[1]}],"registered_at":"now"})")
                  .str());
  }

  std::string findError(StringRef NameOrPath) {
    return errorText(findModel(NameOrPath, Root));
  }

  SmallString<128> Root;
};

TEST_F(ModelRegistryTest, ReadsTheRecordedTask) {
  addModel("inliner", "onnx", "model.onnx", "12345", R"("inliner")");
  MLB_ASSERT_VALUE(Model, findModel("inliner", Root));
  EXPECT_EQ(Model.Task, "inliner");
}

TEST_F(ModelRegistryTest, ANullOrMissingTaskIsEmpty) {
  addModel("untagged", "onnx", "model.onnx", "12345", "null");
  addModel("older");
  MLB_ASSERT_VALUE(Untagged, findModel("untagged", Root));
  EXPECT_EQ(Untagged.Task, "");
  MLB_ASSERT_VALUE(Older, findModel("older", Root));
  EXPECT_EQ(Older.Task, "");
}

TEST_F(ModelRegistryTest, ATaskThatIsNotAStringIsAnError) {
  addModel("bad", "onnx", "model.onnx", "12345", "3");
  EXPECT_NE(findError("bad").find("'task' is missing or not a string or null"),
            std::string::npos)
      << findError("bad");
}

TEST_F(ModelRegistryTest, FindsARegisteredName) {
  addModel("inliner");
  MLB_ASSERT_VALUE(Model, findModel("inliner", Root));
  EXPECT_EQ(Model.Name, "inliner");
  EXPECT_EQ(Model.Kind, ModelKind::Onnx);
  EXPECT_EQ(Model.Path, path("inliner", "model.onnx"));
  EXPECT_EQ(Model.Inputs,
            (std::vector<TensorSpec>{createSpec<int64_t>("a", {1}),
                                     createSpec<float>("b", {DynamicDim, 3})}));
  EXPECT_EQ(Model.Outputs,
            (std::vector<TensorSpec>{createSpec<float>("y", {1})}));
}

TEST_F(ModelRegistryTest, FindsATFAOTModelByName) {
  addModel("evict", "tfaot", "evict.so", ElfSharedObjectHeader);
  MLB_ASSERT_VALUE(Model, findModel("evict", Root));
  EXPECT_EQ(Model.Kind, ModelKind::TFAOT);
  EXPECT_EQ(modelKindName(Model.Kind), "tfaot");
  EXPECT_EQ(Model.Path, path("evict", "evict.so"));
}

TEST_F(ModelRegistryTest, FindsANativeModelByNameAndByPath) {
  // `mlbridge compile` (docs/native.md): kind native in model.json and in the
  // sidecar; the TF AOT runner loads it.
  addModel("native-inliner", "native", "inliner.so", ElfSharedObjectHeader);
  MLB_ASSERT_VALUE(Model, findModel("native-inliner", Root));
  EXPECT_EQ(Model.Kind, ModelKind::Native);
  EXPECT_EQ(modelKindName(Model.Kind), "native");

  std::string File = path("compiled", "policy.so");
  writeFile(File, StringRef(ElfSharedObjectHeader, 18));
  writeFile(path("compiled", "policy.specs.json"),
            R"({"name":"policy","kind":"native","features":[{"name":"x",)"
            R"("type":"float","shape":[2]}],"advice":[{"name":"z",)"
            R"("type":"int64_t","shape":[1]}]})");
  MLB_ASSERT_VALUE(ByPath, findModel(File, Root));
  EXPECT_EQ(ByPath.Kind, ModelKind::Native);
  EXPECT_EQ(ByPath.Inputs,
            (std::vector<TensorSpec>{createSpec<float>("x", {2})}));
}

TEST_F(ModelRegistryTest, TakesAnONNXPathDirectly) {
  std::string File = path("elsewhere", "policy.onnx");
  writeFile(File, "not parsed here");
  MLB_ASSERT_VALUE(Model, findModel(File, Root));
  EXPECT_EQ(Model.Kind, ModelKind::Onnx);
  EXPECT_EQ(Model.Path, File);
  EXPECT_EQ(Model.Name, File);
  EXPECT_TRUE(Model.Inputs.empty());
  EXPECT_TRUE(Model.Outputs.empty());
}

TEST_F(ModelRegistryTest, TakesASharedObjectPathWithItsSidecar) {
  std::string File = path("aot", "policy.so");
  writeFile(File, StringRef(ElfSharedObjectHeader, 18));
  writeFile(path("aot", "policy.specs.json"),
            R"({"name":"policy","kind":"tfaot","features":[{"name":"x",)"
            R"("type":"int32_t","shape":[2]}],"advice":[{"name":"z",)"
            R"("type":"int64_t","shape":[1]}]})");
  MLB_ASSERT_VALUE(Model, findModel(File, Root));
  EXPECT_EQ(Model.Kind, ModelKind::TFAOT);
  EXPECT_EQ(Model.Inputs,
            (std::vector<TensorSpec>{createSpec<int32_t>("x", {2})}));
  EXPECT_EQ(Model.Outputs,
            (std::vector<TensorSpec>{createSpec<int64_t>("z", {1})}));

  // Without a sidecar the runner reads the specs from the model itself.
  std::string Bare = path("aot", "bare.so");
  writeFile(Bare, StringRef(ElfSharedObjectHeader, 18));
  MLB_ASSERT_VALUE(BareModel, findModel(Bare, Root));
  EXPECT_EQ(BareModel.Kind, ModelKind::TFAOT);
  EXPECT_TRUE(BareModel.Inputs.empty());
}

TEST_F(ModelRegistryTest, RefusesFilesThatAreNotModels) {
  std::string Text = path("x", "notes.txt");
  writeFile(Text, "hello");
  EXPECT_NE(findError(Text).find("cannot tell which runner loads " + Text),
            std::string::npos)
      << findError(Text);
  std::string FakeSo = path("x", "fake.so");
  writeFile(FakeSo, "this is not ELF at all");
  EXPECT_NE(findError(FakeSo).find(FakeSo + " is not a TF AOT model: it is "
                                            "not an ELF shared object"),
            std::string::npos)
      << findError(FakeSo);
  std::string Missing = path("x", "missing.onnx");
  EXPECT_NE(findError(Missing).find("no model file " + Missing),
            std::string::npos)
      << findError(Missing);
}

TEST_F(ModelRegistryTest, UnknownNameListsTheRegisteredNames) {
  addModel("b-model");
  addModel("a.model");
  // Staging folders of a registration in progress are not models.
  writeFile(path(".staging-c-123", "model.json"), "{}");
  EXPECT_EQ(listRegisteredModels(Root),
            (std::vector<std::string>{"a.model", "b-model"}));
  std::string Message = findError("nope");
  EXPECT_NE(Message.find("no model named 'nope' in the registry " +
                         Root.str().str() + " (it has: a.model, b-model)"),
            std::string::npos)
      << Message;
  EXPECT_NE(Message.find("mlbridge models register"), std::string::npos);
}

TEST_F(ModelRegistryTest, UnknownNameInAnEmptyRegistry) {
  std::string Message = findError("nope");
  EXPECT_NE(Message.find("(it is empty)"), std::string::npos) << Message;
  std::string Missing = path("does-not-exist");
  EXPECT_NE(errorText(findModel("nope", Missing)).find(Missing),
            std::string::npos);
}

TEST_F(ModelRegistryTest, CorruptModelJSONNamesTheFileAndTheProblem) {
  struct Case {
    const char *JSON;
    const char *Expected;
  } Cases[] = {
      {"{not json", "is not valid JSON"},
      {"[1,2]", "is not a JSON object"},
      {R"({"name":"m","file":"model.onnx","features":[],"advice":[]})",
       "'kind' is missing or not a string"},
      {R"({"name":"m","kind":"pytorch","file":"model.onnx","features":[],)"
       R"("advice":[]})",
       "unknown kind 'pytorch' (expected onnx, tfaot or native)"},
      {R"({"name":"other","kind":"onnx","file":"model.onnx","features":[],)"
       R"("advice":[]})",
       "names the model 'other', not 'm'"},
      {R"({"name":"m","kind":"onnx","file":"../../etc/passwd","features":[],)"
       R"("advice":[]})",
       "'file' must be a file name inside"},
      {R"({"name":"m","kind":"onnx","file":"model.onnx","features":[)"
       R"({"name":"a","type":"complex","shape":[1]}],"advice":[]})",
       "features[0]: invalid tensor spec: 'a'"},
      {R"({"name":"m","kind":"onnx","file":"model.onnx","features":[]})",
       "has no 'advice' list"},
      {R"({"format":7,"name":"m","kind":"onnx","file":"model.onnx",)"
       R"("features":[],"advice":[]})",
       "has format 7, newer than this mlbridge reads"},
      {R"({"name":"m","kind":"onnx","file":"gone.onnx","features":[],)"
       R"("advice":[]})",
       "is missing"},
      {R"({"name":"m","kind":"onnx","file":"model.onnx","size":99,)"
       R"("features":[],"advice":[]})",
       "has 5 bytes but was registered with 99"},
  };
  writeFile(path("m", "model.onnx"), "12345");
  for (const Case &C : Cases) {
    writeFile(path("m", "model.json"), C.JSON);
    std::string Message = findError("m");
    EXPECT_NE(Message.find(C.Expected), std::string::npos)
        << C.JSON << "\n  gave: " << Message;
    // Every message names the file it is about.
    EXPECT_NE(Message.find(path("m")), std::string::npos) << Message;
  }
}

TEST_F(ModelRegistryTest, BadNamesAreRefused) {
  for (StringRef Name : {"", ".hidden", "..", "has space", "semi;colon"}) {
    std::string Message = errorText(checkModelName(Name));
    EXPECT_NE(Message.find("invalid model name '" + Name.str() + "'"),
              std::string::npos)
        << Message;
  }
  for (StringRef Name : {"inliner", "regalloc.v2", "A_b-9"})
    EXPECT_EQ(errorText(checkModelName(Name)), "<success>");
  std::string Message = findError("has space");
  EXPECT_NE(Message.find("'has space' is not a registered model name: "
                         "invalid model name"),
            std::string::npos)
      << Message;
}

/// Changes the working folder for one scope.
class ScopedCwd {
public:
  explicit ScopedCwd(StringRef Dir) {
    sys::fs::current_path(Saved);
    EXPECT_FALSE(sys::fs::set_current_path(Dir));
  }
  ~ScopedCwd() { sys::fs::set_current_path(Saved); }

private:
  SmallString<256> Saved;
};

TEST_F(ModelRegistryTest, ANameIsNeverAFileInTheWorkingFolder) {
  writeFile(path("cwd", "planted.so"), StringRef(ElfSharedObjectHeader, 18));
  writeFile(path("cwd", "planted.onnx"), "not parsed here");
  ScopedCwd InCwd(path("cwd"));
  for (StringRef Name : {"planted.so", "planted.onnx"}) {
    std::string Message = findError(Name);
    EXPECT_NE(Message.find("a name without '/' is never taken as a file; "
                           "pass ./" +
                           Name.str() + " to use it"),
              std::string::npos)
        << Message;
    // Named as a path, it is found.
    MLB_ASSERT_VALUE(Model, findModel(("./" + Name).str(), Root));
    EXPECT_TRUE(sys::fs::equivalent(Model.Path, path("cwd", Name)))
        << Model.Path;
  }
}

TEST_F(ModelRegistryTest, RefusesModelFilesOthersControl) {
  ASSERT_EQ(::geteuid(), 0u) << "chown needs root";
  std::string File = path("shared", "policy.onnx");
  writeFile(File, "not parsed here");
  ASSERT_EQ(::chmod(path("shared").c_str(), 0755), 0);
  struct passwd *Nobody = ::getpwnam("nobody");
  ASSERT_NE(Nobody, nullptr);
  ASSERT_EQ(::chown(File.c_str(), Nobody->pw_uid, Nobody->pw_gid), 0);
  std::string Message = findError(File);
  EXPECT_NE(Message.find("refusing to load model file " + File +
                         ": it belongs to user 'nobody'"),
            std::string::npos)
      << Message;
  ASSERT_EQ(::chown(File.c_str(), 0, 0), 0);
  ASSERT_EQ(::chmod(File.c_str(), 0666), 0);
  Message = findError(File);
  EXPECT_NE(Message.find("its group or others may write it (mode 0666); fix: "
                         "chmod go-w " +
                         File),
            std::string::npos)
      << Message;
  ASSERT_EQ(::chmod(File.c_str(), 0644), 0);
  ASSERT_EQ(::chmod(path("shared").c_str(), 0777), 0);
  Message = findError(File);
  EXPECT_NE(Message.find("its folder " + path("shared") +
                         " may be written by its group or others (mode 0777)"),
            std::string::npos)
      << Message;
  // A sticky folder (as /tmp): others cannot replace a file they do not own.
  ASSERT_EQ(::chmod(path("shared").c_str(), 01777), 0);
  MLB_ASSERT_VALUE(Model, findModel(File, Root));
  EXPECT_EQ(Model.Kind, ModelKind::Onnx);
  // The same check before ONNX Runtime or dlopen() loads a file, for the
  // vocabulary kind too.
  std::string Vocab = path("shared", "vocab.json");
  writeFile(Vocab, "{}");
  ASSERT_EQ(::chown(Vocab.c_str(), Nobody->pw_uid, Nobody->pw_gid), 0);
  Message = errorText(findModel(Vocab, Root, {ModelKind::IR2VecVocab}));
  EXPECT_NE(Message.find("belongs to user 'nobody'"), std::string::npos)
      << Message;
}

/// Sets an environment variable for one scope, restoring it afterwards.
class ScopedEnv {
public:
  ScopedEnv(const char *Name, const char *Value) : Name(Name) {
    if (const char *Old = std::getenv(Name))
      Saved = Old;
    if (Value)
      ::setenv(Name, Value, 1);
    else
      ::unsetenv(Name);
  }
  ~ScopedEnv() {
    if (Saved)
      ::setenv(Name, Saved->c_str(), 1);
    else
      ::unsetenv(Name);
  }

private:
  const char *Name;
  std::optional<std::string> Saved;
};

TEST(ModelRegistryDirTest, FollowsTheEnvironmentLikePython) {
  {
    ScopedEnv Registry(ModelRegistryEnv, "/srv/models");
    ScopedEnv Xdg("XDG_DATA_HOME", "/xdg");
    EXPECT_EQ(defaultModelRegistryDir(), "/srv/models");
  }
  {
    ScopedEnv Registry(ModelRegistryEnv, nullptr);
    ScopedEnv Xdg("XDG_DATA_HOME", "/xdg");
    EXPECT_EQ(defaultModelRegistryDir(), "/xdg/mlbridge/models");
  }
  {
    ScopedEnv Registry(ModelRegistryEnv, nullptr);
    ScopedEnv Xdg("XDG_DATA_HOME", "relative/ignored");
    ScopedEnv Home("HOME", "/home/someone");
    EXPECT_EQ(defaultModelRegistryDir(),
              "/home/someone/.local/share/mlbridge/models");
  }
}

} // namespace
