/*===- capi_test.c - The C API from a strict C11 program ------------------===*\
|*                                                                            *|
|* Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.      *|
|*                                                                            *|
|* Built with -std=c11 -Wall -Werror -pedantic. Prints "N passed, 0 failed"   *|
|* and exits non-zero on any failure.                                         *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#include "mlbridge/mlbridge.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static int Passed = 0;
static int Failed = 0;

#define CHECK(Cond)                                                            \
  do {                                                                         \
    if (Cond) {                                                                \
      ++Passed;                                                                \
    } else {                                                                   \
      ++Failed;                                                                \
      fprintf(stderr, "%s:%d: check failed: %s (last error: %s)\n", __FILE__,  \
              __LINE__, #Cond, mlbridge_last_error());                         \
    }                                                                          \
  } while (0)

/* Advises 1 iff callee_basic_block_count <= 1; counts its calls. */
static int inlinerPolicy(void *UserData, const mlbridge_tensor *Features,
                         size_t NumFeatures, mlbridge_reply *Reply) {
  int *Calls = (int *)UserData;
  ++*Calls;
  if (NumFeatures != 3 || Features[0].type != MLBRIDGE_INT64 ||
      strcmp(Features[0].name, "callee_basic_block_count") != 0) {
    mlbridge_reply_set_error(Reply, "unexpected features");
    return 1;
  }
  int64_t Count = ((const int64_t *)Features[0].data)[0];
  int64_t Decision = Count <= 1;
  return mlbridge_reply_set(Reply, MLBRIDGE_INT64, NULL, 0, &Decision, 1);
}

static int failingPolicy(void *UserData, const mlbridge_tensor *Features,
                         size_t NumFeatures, mlbridge_reply *Reply) {
  (void)UserData;
  (void)Features;
  (void)NumFeatures;
  mlbridge_reply_set_error(Reply, "model is down");
  return 7;
}

static void testRunner(void) {
  const int64_t One[] = {1};
  const int64_t Three[] = {3};
  const int64_t Dynamic[] = {-1};
  mlbridge_tensor_spec Features[3] = {
      {"callee_basic_block_count", MLBRIDGE_INT64, One, 1},
      {"weights", MLBRIDGE_FLOAT, Three, 1},
      {"names", MLBRIDGE_STRING, Dynamic, 1}};
  mlbridge_tensor_spec Advice = {"inlining_decision", MLBRIDGE_INT64, One, 1};
  int Calls = 0;
  mlbridge_runner *Runner = NULL;
  CHECK(mlbridge_runner_create_callback(Features, 3, &Advice, inlinerPolicy,
                                        &Calls, &Runner) == MLBRIDGE_OK);
  if (!Runner)
    return;

  int64_t Count = 1;
  CHECK(mlbridge_runner_set_feature(Runner, "callee_basic_block_count",
                                    MLBRIDGE_INT64, &Count, 1) == MLBRIDGE_OK);
  int64_t Decision = -1;
  CHECK(mlbridge_runner_evaluate_scalar(Runner, MLBRIDGE_INT64, &Decision) ==
        MLBRIDGE_OK);
  CHECK(Decision == 1);
  Count = 13;
  CHECK(mlbridge_runner_set_feature(Runner, "callee_basic_block_count",
                                    MLBRIDGE_INT64, &Count, 1) == MLBRIDGE_OK);
  CHECK(mlbridge_runner_evaluate_scalar(Runner, MLBRIDGE_INT64, &Decision) ==
        MLBRIDGE_OK);
  CHECK(Decision == 0);
  CHECK(Calls == 2);

  int64_t Vec[4] = {0, 0, 0, 0};
  size_t N = 0;
  CHECK(mlbridge_runner_evaluate_vector(Runner, MLBRIDGE_INT64, Vec, 4, &N) ==
        MLBRIDGE_OK);
  CHECK(N == 1 && Vec[0] == 0);

  /* Type and shape checks. */
  int32_t Small = 1;
  CHECK(mlbridge_runner_set_feature(Runner, "callee_basic_block_count",
                                    MLBRIDGE_INT32, &Small,
                                    1) == MLBRIDGE_ERROR_TYPE_MISMATCH);
  CHECK(strstr(mlbridge_last_error(), "callee_basic_block_count") != NULL);
  float W[2] = {1.0f, 2.0f};
  CHECK(mlbridge_runner_set_feature(Runner, "weights", MLBRIDGE_FLOAT, W, 2) ==
        MLBRIDGE_ERROR_SHAPE_MISMATCH);
  CHECK(mlbridge_runner_set_feature(Runner, "nope", MLBRIDGE_FLOAT, W, 1) ==
        MLBRIDGE_ERROR_INVALID_ARGUMENT);
  float F = 0;
  CHECK(mlbridge_runner_evaluate_scalar(Runner, MLBRIDGE_FLOAT, &F) ==
        MLBRIDGE_ERROR_TYPE_MISMATCH);

  const char *Names[] = {"foo", "b\0r"};
  const size_t Lengths[] = {3, 3};
  CHECK(mlbridge_runner_set_feature_strings(Runner, "names", Names, Lengths,
                                            2) == MLBRIDGE_OK);
  CHECK(mlbridge_runner_set_feature_strings(Runner, "weights", Names, Lengths,
                                            2) == MLBRIDGE_ERROR_TYPE_MISMATCH);
  mlbridge_runner_destroy(Runner);

  mlbridge_runner *Failing = NULL;
  CHECK(mlbridge_runner_create_callback(NULL, 0, &Advice, failingPolicy, NULL,
                                        &Failing) == MLBRIDGE_OK);
  CHECK(mlbridge_runner_evaluate_scalar(Failing, MLBRIDGE_INT64, &Decision) ==
        MLBRIDGE_ERROR_MODEL);
  CHECK(strstr(mlbridge_last_error(), "model is down") != NULL);
  mlbridge_runner_destroy(Failing);
  mlbridge_runner_destroy(NULL);
}

static void testSerDes(const char *Kind) {
  mlbridge_serdes *S = NULL;
  CHECK(mlbridge_serdes_create(Kind, &S) == MLBRIDGE_OK);
  if (!S)
    return;
  const int64_t Two[] = {2};
  const int64_t Dyn[] = {-1};
  mlbridge_tensor_spec Features[2] = {{"x", MLBRIDGE_DOUBLE, Two, 1},
                                      {"s", MLBRIDGE_STRING, Dyn, 1}};
  char *Header = NULL;
  size_t HeaderSize = 0;
  CHECK(mlbridge_serdes_encode_header(S, Features, 2, NULL, NULL, &Header,
                                      &HeaderSize) == MLBRIDGE_OK);

  const double X[] = {0.5, -2.0};
  const char *Strs[] = {"ab", ""};
  const size_t Lens[] = {2, 0};
  const int64_t StrShape[] = {2};
  mlbridge_tensor Tensors[2] = {
      {"x", MLBRIDGE_DOUBLE, Two, 1, X, NULL, NULL, 2},
      {"s", MLBRIDGE_STRING, StrShape, 1, NULL, Strs, Lens, 2}};
  char *Msg = NULL;
  size_t MsgSize = 0;
  CHECK(mlbridge_serdes_encode_message(S, MLBRIDGE_OBSERVATION, 5, Tensors, 2,
                                       &Msg, &MsgSize) == MLBRIDGE_OK);
  char *End = NULL;
  size_t EndSize = 0;
  CHECK(mlbridge_serdes_encode_end(S, &End, &EndSize) == MLBRIDGE_OK);

  char Stream[4096];
  size_t Size = 0;
  if (HeaderSize + MsgSize + EndSize <= sizeof(Stream)) {
    memcpy(Stream, Header, HeaderSize);
    memcpy(Stream + HeaderSize, Msg, MsgSize);
    memcpy(Stream + HeaderSize + MsgSize, End, EndSize);
    Size = HeaderSize + MsgSize + EndSize;
  }
  mlbridge_free(Header);
  mlbridge_free(Msg);
  mlbridge_free(End);
  mlbridge_serdes_destroy(S);

  /* A fresh SerDes learns the header from the stream. */
  mlbridge_serdes *D = NULL;
  CHECK(mlbridge_serdes_create(Kind, &D) == MLBRIDGE_OK);
  if (!D)
    return;
  size_t Used = 0;
  mlbridge_message *M = NULL;
  CHECK(mlbridge_serdes_decode_message(D, Stream, Size, &Used, &M) ==
        MLBRIDGE_OK);
  if (M) {
    CHECK(mlbridge_message_get_kind(M) == MLBRIDGE_OBSERVATION);
    CHECK(mlbridge_message_get_id(M) == 5);
    CHECK(mlbridge_message_num_tensors(M) == 2);
    mlbridge_tensor T;
    CHECK(mlbridge_message_get_tensor(M, 0, &T) == MLBRIDGE_OK);
    CHECK(strcmp(T.name, "x") == 0 && T.type == MLBRIDGE_DOUBLE &&
          T.num_elements == 2 && ((const double *)T.data)[1] == -2.0);
    CHECK(mlbridge_message_get_tensor(M, 1, &T) == MLBRIDGE_OK);
    CHECK(T.type == MLBRIDGE_STRING && T.num_elements == 2 &&
          T.string_lengths[0] == 2 && memcmp(T.strings[0], "ab", 2) == 0 &&
          T.string_lengths[1] == 0);
    CHECK(mlbridge_message_get_tensor(M, 2, &T) ==
          MLBRIDGE_ERROR_INVALID_ARGUMENT);
    mlbridge_message_destroy(M);
  }
  mlbridge_message *Next = NULL;
  size_t More = 0;
  CHECK(mlbridge_serdes_decode_message(D, Stream + Used, Size - Used, &More,
                                       &Next) == MLBRIDGE_END_OF_STREAM);
  CHECK(Next == NULL);
  /* Garbage is a SerDes error, not a crash. */
  CHECK(mlbridge_serdes_decode_message(D, "\x05garbage", 8, &More, &Next) ==
        MLBRIDGE_ERROR_SERDES);
  CHECK(strlen(mlbridge_last_error()) > 0);
  mlbridge_serdes_destroy(D);
}

int main(void) {
  CHECK(strcmp(mlbridge_element_type_name(MLBRIDGE_INT64), "int64_t") == 0);
  CHECK(mlbridge_element_type_name((mlbridge_element_type)42) == NULL);
  CHECK(mlbridge_element_size(MLBRIDGE_FLOAT) == 4);
  mlbridge_serdes *Bad = NULL;
  CHECK(mlbridge_serdes_create("yaml", &Bad) ==
        MLBRIDGE_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(mlbridge_last_error(), "yaml") != NULL);
  testRunner();
  testSerDes("bitstream");
  testSerDes("json");
  mlbridge_serdes *P = NULL;
  if (mlbridge_serdes_create("protobuf", &P) == MLBRIDGE_OK) {
    mlbridge_serdes_destroy(P);
    testSerDes("protobuf");
  }
  printf("%d passed, %d failed\n", Passed, Failed);
  return Failed == 0 ? 0 : 1;
}
