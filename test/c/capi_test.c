/*===- capi_test.c - The C API from a strict C11 program ------------------===*\
|*                                                                            *|
|* Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.      *|
|*                                                                            *|
|* Built with -std=c11 -Wall -Werror -pedantic. Prints "N passed, 0 failed"   *|
|* and exits non-zero on any failure.                                         *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#define _POSIX_C_SOURCE 200809L

#include "mlbridge-c/mlbridge.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

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

  /* A callback has no model to declare anything. */
  char Value[8] = "x";
  size_t Length = 99;
  int Found = -1;
  CHECK(mlbridge_runner_model_metadata(Runner, "any", Value, sizeof(Value),
                                       &Length, &Found) == MLBRIDGE_OK);
  CHECK(Found == 0 && Length == 0 && Value[0] == '\0');

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

/* Waits at most BoundSeconds for Pid; kills it after that. Its exit code, or
   -1 if it did not exit normally. */
static int waitBounded(pid_t Pid, int BoundSeconds) {
  struct timespec Step = {0, 10 * 1000 * 1000};
  for (int I = 0; I < BoundSeconds * 100; ++I) {
    int Status = 0;
    pid_t R = waitpid(Pid, &Status, WNOHANG);
    if (R == Pid)
      return WIFEXITED(Status) ? WEXITSTATUS(Status) : -1;
    if (R < 0)
      return -1;
    nanosleep(&Step, NULL);
  }
  kill(Pid, SIGKILL);
  waitpid(Pid, NULL, 0);
  return -1;
}

/* Entries of Dir other than . and .. */
static int countEntries(const char *Dir) {
  DIR *D = opendir(Dir);
  if (!D)
    return -1;
  int N = 0;
  struct dirent *E;
  while ((E = readdir(D)) != NULL)
    if (strcmp(E->d_name, ".") != 0 && strcmp(E->d_name, "..") != 0)
      ++N;
  closedir(D);
  return N;
}

/* The pipe runner against a real model: test/unit/pipe_model.py (Python,
   mlbridge.compiler.pipe) started with posix_spawn. Every wait is bounded. */
static void testPipeRunner(const char *SerDes) {
  char Dir[] = "/tmp/mlbridge-capi-pipe-XXXXXX";
  CHECK(mkdtemp(Dir) != NULL);
  char Base[sizeof(Dir) + 16];
  snprintf(Base, sizeof(Base), "%s/channel", Dir);

  const int64_t One[] = {1};
  const int64_t Three[] = {3};
  mlbridge_tensor_spec Features[2] = {{"x", MLBRIDGE_INT64, One, 1},
                                      {"v", MLBRIDGE_FLOAT, Three, 1}};
  mlbridge_tensor_spec Advice = {"d", MLBRIDGE_INT64, One, 1};
  mlbridge_runner *R = NULL;
  CHECK(mlbridge_runner_create_pipe(Features, 2, &Advice, Base, SerDes, 20000,
                                    &R) == MLBRIDGE_OK);
  if (!R)
    return;

  /* The model: sum of every feature element. */
  char Script[4096];
  snprintf(Script, sizeof(Script), "%s/test/unit/pipe_model.py",
           MLBRIDGE_SOURCE_DIR);
  char *Argv[] = {(char *)MLBRIDGE_PYTHON, Script,        Base,
                  (char *)SerDes,          (char *)"sum", NULL};
  pid_t Pid = -1;
  CHECK(posix_spawn(&Pid, MLBRIDGE_PYTHON, NULL, NULL, Argv, environ) == 0);

  CHECK(mlbridge_runner_switch_context(R, "main") == MLBRIDGE_OK);
  for (int64_t I = 0; I < 3; ++I) {
    float V[3] = {1.0f, 2.0f, (float)I};
    int64_t D = -1;
    CHECK(mlbridge_runner_set_feature(R, "x", MLBRIDGE_INT64, &I, 1) ==
          MLBRIDGE_OK);
    CHECK(mlbridge_runner_set_feature(R, "v", MLBRIDGE_FLOAT, V, 3) ==
          MLBRIDGE_OK);
    CHECK(mlbridge_runner_evaluate_scalar(R, MLBRIDGE_INT64, &D) ==
          MLBRIDGE_OK);
    CHECK(D == 2 * I + 3);
  }
  CHECK(mlbridge_runner_finish(R) == MLBRIDGE_OK);
  CHECK(mlbridge_runner_finish(R) == MLBRIDGE_OK);
  int64_t After = 0;
  CHECK(mlbridge_runner_evaluate_scalar(R, MLBRIDGE_INT64, &After) ==
        MLBRIDGE_ERROR_MODEL);
  CHECK(strstr(mlbridge_last_error(), "finished") != NULL);
  if (Pid > 0)
    CHECK(waitBounded(Pid, 60) == 0); /* it saw the end of the session */
  mlbridge_runner_destroy(R);         /* removes the FIFOs it made */
  CHECK(countEntries(Dir) == 0);
  rmdir(Dir);
}

/* Reads all of Path (at most Size - 1 bytes) into Buf; false if it cannot. */
static bool readFile(const char *Path, char *Buf, size_t Size) {
  FILE *F = fopen(Path, "r");
  if (!F)
    return false;
  size_t N = fread(Buf, 1, Size - 1, F);
  Buf[N] = '\0';
  fclose(F);
  return true;
}

/* Outcomes and spec changes over a real pipe: the model
   (test/unit/pipe_model.py with a report file) records every observation's
   context, id, feature names and outcome, and whether the session ended with
   an end record. */
static void testPipeOutcomesAndSpecs(const char *SerDes) {
  char Dir[] = "/tmp/mlbridge-capi-train-XXXXXX";
  CHECK(mkdtemp(Dir) != NULL);
  char Base[sizeof(Dir) + 16], Report[sizeof(Dir) + 16];
  snprintf(Base, sizeof(Base), "%s/channel", Dir);
  snprintf(Report, sizeof(Report), "%s/report", Dir);

  const int64_t One[] = {1};
  const int64_t Two[] = {2};
  const int64_t Three[] = {3};
  mlbridge_tensor_spec Features[2] = {{"x", MLBRIDGE_INT64, One, 1},
                                      {"v", MLBRIDGE_FLOAT, Three, 1}};
  mlbridge_tensor_spec Advice = {"d", MLBRIDGE_INT64, One, 1};
  mlbridge_tensor_spec Score = {"reward", MLBRIDGE_FLOAT, One, 1};
  mlbridge_runner *R = NULL;
  CHECK(mlbridge_runner_create_pipe_with_score(Features, 2, &Advice, NULL, Base,
                                               SerDes, 20000, &R) ==
        MLBRIDGE_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(mlbridge_last_error(), "score") != NULL);
  CHECK(mlbridge_runner_create_pipe_with_score(Features, 2, &Advice, &Score,
                                               Base, SerDes, 20000,
                                               &R) == MLBRIDGE_OK);
  if (!R)
    return;

  char Script[4096];
  snprintf(Script, sizeof(Script), "%s/test/unit/pipe_model.py",
           MLBRIDGE_SOURCE_DIR);
  char *Argv[] = {(char *)MLBRIDGE_PYTHON, Script, Base, (char *)SerDes,
                  (char *)"sum",           Report, NULL};
  pid_t Pid = -1;
  CHECK(posix_spawn(&Pid, MLBRIDGE_PYTHON, NULL, NULL, Argv, environ) == 0);

  CHECK(mlbridge_runner_switch_context(R, "main") == MLBRIDGE_OK);
  for (int64_t I = 0; I < 2; ++I) {
    float V[3] = {1.0f, 2.0f, (float)I};
    int64_t D = -1;
    CHECK(mlbridge_runner_set_feature(R, "x", MLBRIDGE_INT64, &I, 1) ==
          MLBRIDGE_OK);
    CHECK(mlbridge_runner_set_feature(R, "v", MLBRIDGE_FLOAT, V, 3) ==
          MLBRIDGE_OK);
    CHECK(mlbridge_runner_evaluate_scalar(R, MLBRIDGE_INT64, &D) ==
          MLBRIDGE_OK);
    CHECK(D == 2 * I + 3);
  }
  float Reward = 1.5f;
  CHECK(mlbridge_runner_send_outcome(R, 0, MLBRIDGE_FLOAT, &Reward, 1) ==
        MLBRIDGE_OK);
  /* Refused before anything is sent; the runner stays usable. */
  CHECK(mlbridge_runner_send_outcome(R, 7, MLBRIDGE_FLOAT, &Reward, 1) ==
        MLBRIDGE_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(mlbridge_last_error(), "no observation 7") != NULL);
  int64_t WrongType = 1;
  CHECK(mlbridge_runner_send_outcome(R, 0, MLBRIDGE_INT64, &WrongType, 1) ==
        MLBRIDGE_ERROR_TYPE_MISMATCH);
  CHECK(strstr(mlbridge_last_error(), "reward") != NULL);
  float TwoRewards[2] = {1.0f, 2.0f};
  CHECK(mlbridge_runner_send_outcome(R, 0, MLBRIDGE_FLOAT, TwoRewards, 2) ==
        MLBRIDGE_ERROR_SHAPE_MISMATCH);

  /* New specs: `v` goes, `w` comes, the advice becomes a float. */
  mlbridge_tensor_spec NewFeatures[2] = {{"x", MLBRIDGE_INT64, One, 1},
                                         {"w", MLBRIDGE_DOUBLE, Two, 1}};
  mlbridge_tensor_spec NewAdvice = {"f", MLBRIDGE_FLOAT, One, 1};
  CHECK(mlbridge_runner_change_specs(R, NewFeatures, 2, NULL) ==
        MLBRIDGE_ERROR_INVALID_ARGUMENT);
  CHECK(mlbridge_runner_change_specs(R, NewFeatures, 2, &NewAdvice) ==
        MLBRIDGE_OK);
  float V[3] = {0, 0, 0};
  CHECK(mlbridge_runner_set_feature(R, "v", MLBRIDGE_FLOAT, V, 3) ==
        MLBRIDGE_ERROR_INVALID_ARGUMENT);
  int64_t X = 4;
  double W[2] = {0.5, 0.25};
  CHECK(mlbridge_runner_set_feature(R, "x", MLBRIDGE_INT64, &X, 1) ==
        MLBRIDGE_OK);
  CHECK(mlbridge_runner_set_feature(R, "w", MLBRIDGE_DOUBLE, W, 2) ==
        MLBRIDGE_OK);
  float F = 0;
  CHECK(mlbridge_runner_evaluate_scalar(R, MLBRIDGE_FLOAT, &F) == MLBRIDGE_OK);
  CHECK(F == 4.75f);
  Reward = -2.0f;
  CHECK(mlbridge_runner_send_outcome(R, 2, MLBRIDGE_FLOAT, &Reward, 1) ==
        MLBRIDGE_OK);
  CHECK(mlbridge_runner_finish(R) == MLBRIDGE_OK);
  CHECK(mlbridge_runner_send_outcome(R, 2, MLBRIDGE_FLOAT, &Reward, 1) ==
        MLBRIDGE_ERROR_MODEL);
  CHECK(strstr(mlbridge_last_error(), "finished") != NULL);
  CHECK(mlbridge_runner_change_specs(R, NewFeatures, 2, &NewAdvice) ==
        MLBRIDGE_ERROR_MODEL);
  if (Pid > 0)
    CHECK(waitBounded(Pid, 60) == 0);
  mlbridge_runner_destroy(R);

  char Text[1024] = "";
  CHECK(readFile(Report, Text, sizeof(Text)));
  static const char Expected[] = "main 0 x,v 1.5\n"
                                 "main 1 x,v none\n"
                                 "main 2 x,w -2\n"
                                 "ended\n";
  bool Same = strcmp(Text, Expected) == 0;
  CHECK(Same);
  if (!Same)
    fprintf(stderr, "report of the %s model:\n%s", SerDes, Text);
  unlink(Report);
  CHECK(countEntries(Dir) == 0);
  rmdir(Dir);
}

/* Outcomes and spec changes belong to the pipe runner only. */
static void testTrainingCallsNeedAPipe(void) {
  const int64_t One[] = {1};
  mlbridge_tensor_spec Advice = {"inlining_decision", MLBRIDGE_INT64, One, 1};
  mlbridge_runner *R = NULL;
  CHECK(mlbridge_runner_create_callback(NULL, 0, &Advice, failingPolicy, NULL,
                                        &R) == MLBRIDGE_OK);
  float Reward = 1.0f;
  CHECK(mlbridge_runner_send_outcome(R, 0, MLBRIDGE_FLOAT, &Reward, 1) ==
        MLBRIDGE_ERROR_UNSUPPORTED);
  CHECK(strstr(mlbridge_last_error(), "pipe runner") != NULL);
  CHECK(mlbridge_runner_change_specs(R, NULL, 0, &Advice) ==
        MLBRIDGE_ERROR_UNSUPPORTED);
  CHECK(mlbridge_runner_send_outcome(NULL, 0, MLBRIDGE_FLOAT, &Reward, 1) ==
        MLBRIDGE_ERROR_INVALID_ARGUMENT);
  mlbridge_runner_destroy(R);
}

/* No model: a bounded wait and an error naming the FIFO. */
static void testPipeRunnerWithoutModel(void) {
  char Dir[] = "/tmp/mlbridge-capi-pipe-XXXXXX";
  CHECK(mkdtemp(Dir) != NULL);
  char Base[sizeof(Dir) + 16];
  snprintf(Base, sizeof(Base), "%s/channel", Dir);
  const int64_t One[] = {1};
  mlbridge_tensor_spec Features[1] = {{"x", MLBRIDGE_INT64, One, 1}};
  mlbridge_tensor_spec Advice = {"d", MLBRIDGE_INT64, One, 1};
  mlbridge_runner *R = NULL;
  CHECK(mlbridge_runner_create_pipe(Features, 1, &Advice, Base, "yaml", 100,
                                    &R) == MLBRIDGE_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(mlbridge_last_error(), "yaml") != NULL);
  CHECK(mlbridge_runner_create_pipe(Features, 1, &Advice, Base, "json", 0,
                                    &R) == MLBRIDGE_ERROR_INVALID_ARGUMENT);
  CHECK(mlbridge_runner_create_pipe(Features, 1, &Advice, Base, "bitstream",
                                    100, &R) == MLBRIDGE_OK);
  int64_t D = 0;
  CHECK(mlbridge_runner_evaluate_scalar(R, MLBRIDGE_INT64, &D) ==
        MLBRIDGE_ERROR_MODEL);
  CHECK(strstr(mlbridge_last_error(),
               "channel.out for reading within 100 ms") != NULL);
  mlbridge_runner_destroy(R);
  CHECK(countEntries(Dir) == 0);
  rmdir(Dir);
}

#if defined(MLBRIDGE_HAVE_GRPC)
/* A server's address from its ready file (written atomically by
   `mlbridge serve --ready-file`), waiting at most BoundSeconds and giving up
   early if the server exits. Returns false if there is none. */
static bool waitReadyFile(const char *Path, pid_t Pid, int BoundSeconds,
                          char *Address, size_t Size) {
  struct timespec Step = {0, 10 * 1000 * 1000};
  for (int I = 0; I < BoundSeconds * 100; ++I) {
    FILE *F = fopen(Path, "r");
    if (F) {
      bool Ok = fgets(Address, (int)Size, F) != NULL;
      fclose(F);
      if (Ok) {
        Address[strcspn(Address, "\r\n")] = '\0';
        return Address[0] != '\0';
      }
    }
    if (waitpid(Pid, NULL, WNOHANG) == Pid)
      return false;
    nanosleep(&Step, NULL);
  }
  return false;
}
#endif

/* The gRPC runner against a real model server:
   `python -m mlbridge serve test/unit/grpc_policies.py:affine --ready-file F`
   started with posix_spawn (its output goes to a log in the private folder).
   The policy answers 10 * x + len(v) + 1000 * id + len(context). Every wait
   is bounded; the server is stopped with SIGTERM and reaped. */
static void testGrpcRunner(void) {
  const int64_t One[] = {1};
  const int64_t Three[] = {3};
  mlbridge_tensor_spec Features[2] = {{"x", MLBRIDGE_INT64, One, 1},
                                      {"v", MLBRIDGE_FLOAT, Three, 1}};
  mlbridge_tensor_spec Advice = {"y", MLBRIDGE_INT64, One, 1};
  mlbridge_runner *R = NULL;
  CHECK(mlbridge_runner_create_grpc(Features, 2, &Advice, NULL, 100, &R) ==
        MLBRIDGE_ERROR_INVALID_ARGUMENT);
#ifndef MLBRIDGE_HAVE_GRPC
  CHECK(mlbridge_runner_create_grpc(Features, 2, &Advice, "127.0.0.1:1", 100,
                                    &R) == MLBRIDGE_ERROR_UNSUPPORTED);
  CHECK(strstr(mlbridge_last_error(), "built without gRPC") != NULL);
  CHECK(R == NULL);
#else
  CHECK(mlbridge_runner_create_grpc(Features, 2, &Advice, "127.0.0.1:1", 0,
                                    &R) == MLBRIDGE_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(mlbridge_last_error(), "timeout must be positive") != NULL);

  char Dir[] = "/tmp/mlbridge-capi-grpc-XXXXXX";
  CHECK(mkdtemp(Dir) != NULL);
  char Ready[sizeof(Dir) + 16], Log[sizeof(Dir) + 16];
  snprintf(Ready, sizeof(Ready), "%s/ready", Dir);
  snprintf(Log, sizeof(Log), "%s/serve.log", Dir);
  char Policy[4096];
  snprintf(Policy, sizeof(Policy), "%s/test/unit/grpc_policies.py:affine",
           MLBRIDGE_SOURCE_DIR);
  char *Argv[] = {(char *)MLBRIDGE_PYTHON,
                  (char *)"-m",
                  (char *)"mlbridge",
                  (char *)"serve",
                  Policy,
                  (char *)"--address",
                  (char *)"127.0.0.1:0",
                  (char *)"--ready-file",
                  Ready,
                  NULL};
  posix_spawn_file_actions_t Actions;
  CHECK(posix_spawn_file_actions_init(&Actions) == 0);
  CHECK(posix_spawn_file_actions_addopen(
            &Actions, 1, Log, O_WRONLY | O_CREAT | O_TRUNC, 0600) == 0);
  CHECK(posix_spawn_file_actions_adddup2(&Actions, 1, 2) == 0);
  pid_t Pid = -1;
  CHECK(posix_spawn(&Pid, MLBRIDGE_PYTHON, &Actions, NULL, Argv, environ) == 0);
  posix_spawn_file_actions_destroy(&Actions);

  char Address[256] = "";
  bool Up = Pid > 0 && waitReadyFile(Ready, Pid, 60, Address, sizeof(Address));
  CHECK(Up);
  if (Up) {
    CHECK(mlbridge_runner_create_grpc(Features, 2, &Advice, Address, 20000,
                                      &R) == MLBRIDGE_OK);
  }
  if (R) {
    CHECK(mlbridge_runner_switch_context(R, "main") == MLBRIDGE_OK);
    for (int64_t I = 0; I < 3; ++I) {
      float V[3] = {1.0f, 2.0f, (float)I};
      int64_t D = -1;
      CHECK(mlbridge_runner_set_feature(R, "x", MLBRIDGE_INT64, &I, 1) ==
            MLBRIDGE_OK);
      CHECK(mlbridge_runner_set_feature(R, "v", MLBRIDGE_FLOAT, V, 3) ==
            MLBRIDGE_OK);
      CHECK(mlbridge_runner_evaluate_scalar(R, MLBRIDGE_INT64, &D) ==
            MLBRIDGE_OK);
      CHECK(D == 10 * I + 3 + 1000 * I + 4);
    }
    CHECK(mlbridge_runner_finish(R) == MLBRIDGE_OK); /* nothing to end */
  }
  if (Pid > 0) {
    kill(Pid, SIGTERM);
    CHECK(waitBounded(Pid, 60) == 0); /* mlbridge serve: SIGTERM, status 0 */
  }
  if (R) {
    /* The server is gone: the next call fails at once (fail-fast), naming
       the address. */
    int64_t D = 0;
    CHECK(mlbridge_runner_evaluate_scalar(R, MLBRIDGE_INT64, &D) ==
          MLBRIDGE_ERROR_MODEL);
    CHECK(strstr(mlbridge_last_error(), Address) != NULL);
    mlbridge_runner_destroy(R);
    R = NULL;
  }
  if (Up) {
    /* No server at that address: a bounded connection wait. */
    CHECK(mlbridge_runner_create_grpc(Features, 2, &Advice, Address, 200, &R) ==
          MLBRIDGE_ERROR_MODEL);
    CHECK(strstr(mlbridge_last_error(), Address) != NULL);
    CHECK(strstr(mlbridge_last_error(), "within 200 ms") != NULL);
    CHECK(R == NULL);
  }
  unlink(Ready);
  unlink(Log);
  CHECK(countEntries(Dir) == 0);
  rmdir(Dir);
#endif
}

/* Runs argv (argv[0] is searched in PATH) and waits at most BoundSeconds;
   its exit code, or -1. */
static int runBounded(char *const *Argv, int BoundSeconds) {
  pid_t Pid = -1;
  if (posix_spawnp(&Pid, Argv[0], NULL, NULL, Argv, environ) != 0)
    return -1;
  return waitBounded(Pid, BoundSeconds);
}

/* multi_input.onnx (test/unit/Inputs/onnx/make_models.py):
   score = a + 10*b[0] + 100*b[1] + 1000*c, inputs declared as (c, a, b). The
   features come in another order, with one the model does not read. */
static const int64_t ScalarShape[] = {1};
static const int64_t PairShape[] = {2};
static const mlbridge_tensor_spec MultiFeatures[4] = {
    {"a", MLBRIDGE_INT64, ScalarShape, 1},
    {"unused", MLBRIDGE_INT32, ScalarShape, 1},
    {"b", MLBRIDGE_FLOAT, PairShape, 1},
    {"c", MLBRIDGE_DOUBLE, ScalarShape, 1}};
static const mlbridge_tensor_spec MultiAdvice = {"score", MLBRIDGE_FLOAT,
                                                 ScalarShape, 1};

#if defined(MLBRIDGE_HAVE_ONNX)
/* Evaluates the multi_input model for a few inputs; the number of exact
   answers. */
static int checkMultiInput(mlbridge_runner *R) {
  int Right = 0;
  for (int64_t I = 0; I < 3; ++I) {
    int64_t A = I + 1;
    int32_t Unused = 77;
    float B[2] = {2.0f, (float)I};
    double C = 0.5 * (double)I;
    float Score = -1.0f;
    if (mlbridge_runner_set_feature(R, "a", MLBRIDGE_INT64, &A, 1) ||
        mlbridge_runner_set_feature(R, "unused", MLBRIDGE_INT32, &Unused, 1) ||
        mlbridge_runner_set_feature(R, "b", MLBRIDGE_FLOAT, B, 2) ||
        mlbridge_runner_set_feature(R, "c", MLBRIDGE_DOUBLE, &C, 1) ||
        mlbridge_runner_evaluate_scalar(R, MLBRIDGE_FLOAT, &Score))
      return Right;
    Right += Score == (float)(A + 20 + 100 * I + 500 * I);
  }
  return Right;
}
#endif

static void testOnnxRunner(void) {
  mlbridge_runner *R = NULL;
  CHECK(mlbridge_runner_create_onnx(MultiFeatures, 4, &MultiAdvice, NULL, 0,
                                    &R) == MLBRIDGE_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(mlbridge_last_error(), "mlbridge_runner_create_onnx") != NULL);
#ifndef MLBRIDGE_HAVE_ONNX
  CHECK(mlbridge_runner_create_onnx(MultiFeatures, 4, &MultiAdvice,
                                    "model.onnx", 0,
                                    &R) == MLBRIDGE_ERROR_UNSUPPORTED);
  CHECK(strstr(mlbridge_last_error(), "built without ONNX Runtime") != NULL);
  CHECK(R == NULL);
#else
  char Path[4096];
  snprintf(Path, sizeof(Path), "%s/multi_input.onnx",
           MLBRIDGE_ONNX_TEST_MODELS);
  CHECK(mlbridge_runner_create_onnx(MultiFeatures, 4, &MultiAdvice, Path, -1,
                                    &R) == MLBRIDGE_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(mlbridge_last_error(), "intra_op_threads") != NULL);
  CHECK(R == NULL);

  /* 0 threads: the default; 2: a thread pool. Same answers. */
  for (int32_t Threads = 0; Threads <= 2; Threads += 2) {
    CHECK(mlbridge_runner_create_onnx(MultiFeatures, 4, &MultiAdvice, Path,
                                      Threads, &R) == MLBRIDGE_OK);
    if (!R)
      continue;
    CHECK(checkMultiInput(R) == 3);
    int64_t Wrong = 0;
    CHECK(mlbridge_runner_evaluate_scalar(R, MLBRIDGE_INT64, &Wrong) ==
          MLBRIDGE_ERROR_TYPE_MISMATCH);
    CHECK(mlbridge_runner_finish(R) == MLBRIDGE_OK); /* nothing to end */
    CHECK(mlbridge_runner_switch_context(R, "f") == MLBRIDGE_OK);
    mlbridge_runner_destroy(R);
    R = NULL;
  }

  /* The model's metadata_props, by key. */
  CHECK(mlbridge_runner_create_onnx(MultiFeatures, 4, &MultiAdvice, Path, 0,
                                    &R) == MLBRIDGE_OK);
  if (R) {
    char Value[32];
    size_t Length = 99;
    int Found = -1;
    CHECK(mlbridge_runner_model_metadata(R, "test.weights", Value,
                                         sizeof(Value), &Length,
                                         &Found) == MLBRIDGE_OK);
    CHECK(Found == 1 && Length == 13 && strcmp(Value, "1 10 100 1000") == 0);
    CHECK(mlbridge_runner_model_metadata(R, "test.empty", Value, sizeof(Value),
                                         &Length, &Found) == MLBRIDGE_OK);
    CHECK(Found == 1 && Length == 0 && Value[0] == '\0');
    CHECK(mlbridge_runner_model_metadata(R, "test.absent", Value, sizeof(Value),
                                         &Length, &Found) == MLBRIDGE_OK);
    CHECK(Found == 0 && Length == 0 && Value[0] == '\0');
    /* The length is given, also when the buffer is too small (no room for
       the NUL). */
    CHECK(mlbridge_runner_model_metadata(R, "test.weights", Value, 13, &Length,
                                         &Found) ==
          MLBRIDGE_ERROR_BUFFER_TOO_SMALL);
    CHECK(Found == 1 && Length == 13);
    CHECK(strstr(mlbridge_last_error(), "buffer holds 13") != NULL);
    CHECK(mlbridge_runner_model_metadata(R, NULL, Value, sizeof(Value), &Length,
                                         &Found) ==
          MLBRIDGE_ERROR_INVALID_ARGUMENT);
    mlbridge_runner_destroy(R);
    R = NULL;
  }

  /* A dynamic dimension: y = 2x over [n]; the count sets n. */
  const int64_t Dynamic[] = {-1};
  mlbridge_tensor_spec X = {"x", MLBRIDGE_FLOAT, Dynamic, 1};
  mlbridge_tensor_spec Y = {"y", MLBRIDGE_FLOAT, Dynamic, 1};
  char Scale[4096];
  snprintf(Scale, sizeof(Scale), "%s/dynamic_scale.onnx",
           MLBRIDGE_ONNX_TEST_MODELS);
  CHECK(mlbridge_runner_create_onnx(&X, 1, &Y, Scale, 1, &R) == MLBRIDGE_OK);
  if (R) {
    float In[5] = {1.0f, -2.0f, 0.25f, 8.0f, 3.0f};
    float Out[8] = {0};
    size_t N = 0;
    CHECK(mlbridge_runner_set_feature(R, "x", MLBRIDGE_FLOAT, In, 5) ==
          MLBRIDGE_OK);
    CHECK(mlbridge_runner_evaluate_vector(R, MLBRIDGE_FLOAT, Out, 8, &N) ==
          MLBRIDGE_OK);
    CHECK(N == 5 && Out[0] == 2.0f && Out[1] == -4.0f && Out[2] == 0.5f &&
          Out[3] == 16.0f && Out[4] == 6.0f);
    CHECK(mlbridge_runner_evaluate_vector(R, MLBRIDGE_FLOAT, Out, 2, &N) ==
          MLBRIDGE_ERROR_BUFFER_TOO_SMALL);
    CHECK(N == 5);
    mlbridge_runner_destroy(R);
    R = NULL;
  }

  /* No such file: the message names it. */
  CHECK(mlbridge_runner_create_onnx(MultiFeatures, 4, &MultiAdvice,
                                    "/nonexistent/mlbridge-capi.onnx", 0,
                                    &R) == MLBRIDGE_ERROR_MODEL);
  CHECK(strstr(mlbridge_last_error(), "/nonexistent/mlbridge-capi.onnx") !=
        NULL);
  CHECK(R == NULL);

  /* Features that do not fit: 'c' missing, 'a' of another type; every
     difference is listed. */
  mlbridge_tensor_spec Mismatched[2] = {{"a", MLBRIDGE_INT32, ScalarShape, 1},
                                        {"b", MLBRIDGE_FLOAT, PairShape, 1}};
  CHECK(mlbridge_runner_create_onnx(Mismatched, 2, &MultiAdvice, Path, 0, &R) ==
        MLBRIDGE_ERROR_MODEL);
  CHECK(strstr(mlbridge_last_error(), "2 differences") != NULL);
  CHECK(strstr(mlbridge_last_error(),
               "input 'c' is not a feature the compiler sends") != NULL);
  CHECK(strstr(mlbridge_last_error(),
               "input 'a' is int64_t but the compiler sends int32_t") != NULL);
  CHECK(R == NULL);
#endif
}

/* mixed.so (mlbridge.aot.testmodels): x float[1,4], count int64[1], flags
   int32[2]; score = x.(0.5,-1.25,2,0.75) + count/8 - sum(flags)/2 + 3 and
   doubled = 2*count + sum(flags). */
static const int64_t RowShape[] = {1, 4};
static const mlbridge_tensor_spec MixedFeatures[4] = {
    {"flags", MLBRIDGE_INT32, PairShape, 1},
    {"extra", MLBRIDGE_INT64, ScalarShape, 1},
    {"count", MLBRIDGE_INT64, ScalarShape, 1},
    {"x", MLBRIDGE_FLOAT, RowShape, 2}};
static const mlbridge_tensor_spec MixedScore = {"score", MLBRIDGE_FLOAT,
                                                ScalarShape, 1};
#if defined(MLBRIDGE_HAVE_TF_AOT)
static const mlbridge_tensor_spec MixedDoubled = {"doubled", MLBRIDGE_INT64,
                                                  ScalarShape, 1};

/* Sets the mixed model's features for case I. */
static bool setMixed(mlbridge_runner *R, int64_t I) {
  float X[4] = {1.0f, 2.0f, 3.0f, 4.0f + (float)I};
  int64_t Count = 8 * I;
  int64_t Extra = 1234;
  int32_t Flags[2] = {1, 3 + (int32_t)I};
  return !mlbridge_runner_set_feature(R, "x", MLBRIDGE_FLOAT, X, 4) &&
         !mlbridge_runner_set_feature(R, "count", MLBRIDGE_INT64, &Count, 1) &&
         !mlbridge_runner_set_feature(R, "extra", MLBRIDGE_INT64, &Extra, 1) &&
         !mlbridge_runner_set_feature(R, "flags", MLBRIDGE_INT32, Flags, 2);
}

/* Evaluates both outputs of the mixed model (one runner each) for a few
   inputs; the number of exact answers. */
static int checkMixed(mlbridge_runner *Score, mlbridge_runner *Doubled) {
  int Right = 0;
  for (int64_t I = 0; I < 3; ++I) {
    float S = -1.0f;
    int64_t D = -1;
    if (!setMixed(Score, I) || !setMixed(Doubled, I) ||
        mlbridge_runner_evaluate_scalar(Score, MLBRIDGE_FLOAT, &S) ||
        mlbridge_runner_evaluate_scalar(Doubled, MLBRIDGE_INT64, &D))
      return Right;
    /* x.w = 7 + 0.75*I, count/8 = I, -sum(flags)/2, +3: exact in float. */
    float WantScore =
        7.0f + 0.75f * (float)I + (float)I - 0.5f * (float)(4 + I) + 3.0f;
    Right += S == WantScore;
    Right += D == 16 * I + 4 + I;
  }
  return Right;
}
#endif

static void testTFAOTRunner(void) {
  mlbridge_runner *R = NULL;
  CHECK(mlbridge_runner_create_tfaot(MixedFeatures, 4, NULL, "mixed.so", &R) ==
        MLBRIDGE_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(mlbridge_last_error(), "mlbridge_runner_create_tfaot") != NULL);
#ifndef MLBRIDGE_HAVE_TF_AOT
  CHECK(mlbridge_runner_create_tfaot(MixedFeatures, 4, &MixedScore, "mixed.so",
                                     &R) == MLBRIDGE_ERROR_UNSUPPORTED);
  CHECK(strstr(mlbridge_last_error(), "built without TF AOT support") != NULL);
  CHECK(R == NULL);
#else
  /* Two runners over one shared object at once, one per output. */
  mlbridge_runner *D = NULL;
  CHECK(mlbridge_runner_create_tfaot(MixedFeatures, 4, &MixedScore,
                                     MLBRIDGE_AOT_MIXED_SO, &R) == MLBRIDGE_OK);
  CHECK(mlbridge_runner_create_tfaot(MixedFeatures, 4, &MixedDoubled,
                                     MLBRIDGE_AOT_MIXED_SO, &D) == MLBRIDGE_OK);
  if (R && D)
    CHECK(checkMixed(R, D) == 6);
  if (R) {
    int64_t Wrong = 0;
    CHECK(mlbridge_runner_evaluate_scalar(R, MLBRIDGE_INT64, &Wrong) ==
          MLBRIDGE_ERROR_TYPE_MISMATCH);
  }
  mlbridge_runner_destroy(R);
  mlbridge_runner_destroy(D);
  R = NULL;

  /* No such file, and a file that is not an mlbridge AOT model. */
  CHECK(mlbridge_runner_create_tfaot(MixedFeatures, 4, &MixedScore,
                                     "/nonexistent/mlbridge-capi.so",
                                     &R) == MLBRIDGE_ERROR_MODEL);
  CHECK(strstr(mlbridge_last_error(), "/nonexistent/mlbridge-capi.so") != NULL);
  CHECK(R == NULL);
  char Source[4096];
  snprintf(Source, sizeof(Source), "%s/test/c/capi_test.c",
           MLBRIDGE_SOURCE_DIR);
  CHECK(mlbridge_runner_create_tfaot(MixedFeatures, 4, &MixedScore, Source,
                                     &R) == MLBRIDGE_ERROR_MODEL);
  CHECK(strstr(mlbridge_last_error(), "cannot load") != NULL);
  CHECK(R == NULL);

  /* Features that do not fit: 'count' missing, 'x' of another size ([1,4]
     and [4] would fit: the same elements). */
  mlbridge_tensor_spec Mismatched[2] = {{"flags", MLBRIDGE_INT32, PairShape, 1},
                                        {"x", MLBRIDGE_FLOAT, PairShape, 1}};
  CHECK(mlbridge_runner_create_tfaot(Mismatched, 2, &MixedScore,
                                     MLBRIDGE_AOT_MIXED_SO,
                                     &R) == MLBRIDGE_ERROR_MODEL);
  CHECK(strstr(mlbridge_last_error(), "'mixed' does not fit") != NULL);
  CHECK(strstr(mlbridge_last_error(), "2 differences") != NULL);
  CHECK(strstr(mlbridge_last_error(),
               "input 'count' is not a feature the compiler sends") != NULL);
  CHECK(strstr(mlbridge_last_error(),
               "input 'x' has shape [1,4] but the compiler sends shape [2]") !=
        NULL);
  CHECK(R == NULL);

  /* An advice the model does not answer: its outputs are listed. */
  mlbridge_tensor_spec Nope = {"nope", MLBRIDGE_FLOAT, ScalarShape, 1};
  CHECK(mlbridge_runner_create_tfaot(MixedFeatures, 4, &Nope,
                                     MLBRIDGE_AOT_MIXED_SO,
                                     &R) == MLBRIDGE_ERROR_MODEL);
  CHECK(strstr(mlbridge_last_error(), "no output named 'nope'") != NULL);
  CHECK(strstr(mlbridge_last_error(), "doubled") != NULL);
  CHECK(R == NULL);
#endif
}

#if defined(MLBRIDGE_HAVE_ONNX) || defined(MLBRIDGE_HAVE_TF_AOT)
/* Registers File as Name in Registry with `mlbridge models register`. */
static bool registerModel(const char *Registry, const char *Name,
                          const char *File) {
  char *Argv[] = {(char *)MLBRIDGE_PYTHON,
                  (char *)"-m",
                  (char *)"mlbridge",
                  (char *)"models",
                  (char *)"register",
                  (char *)"--registry",
                  (char *)Registry,
                  (char *)Name,
                  (char *)File,
                  NULL};
  return runBounded(Argv, 120) == 0;
}
#endif

/* mlbridge_runner_create_model(): models registered by the real
   `mlbridge models register`, found by name (in a given or the default
   registry) or by path; the model's kind picks the runner. */
static void testModelRunner(void) {
  char Registry[] = "/tmp/mlbridge-capi-registry-XXXXXX";
  CHECK(mkdtemp(Registry) != NULL);
  mlbridge_runner *R = NULL;
  CHECK(mlbridge_runner_create_model(MultiFeatures, 4, &MultiAdvice, NULL,
                                     Registry,
                                     &R) == MLBRIDGE_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(mlbridge_last_error(), "mlbridge_runner_create_model") != NULL);
#ifdef MLBRIDGE_HAVE_ONNX
  char Onnx[4096];
  snprintf(Onnx, sizeof(Onnx), "%s/multi_input.onnx",
           MLBRIDGE_ONNX_TEST_MODELS);
  CHECK(registerModel(Registry, "multi", Onnx));
  CHECK(mlbridge_runner_create_model(MultiFeatures, 4, &MultiAdvice, "multi",
                                     Registry, &R) == MLBRIDGE_OK);
  if (R)
    CHECK(checkMultiInput(R) == 3);
  mlbridge_runner_destroy(R);
  R = NULL;
  /* NULL registry: $MLBRIDGE_MODEL_REGISTRY. */
  CHECK(setenv("MLBRIDGE_MODEL_REGISTRY", Registry, 1) == 0);
  CHECK(mlbridge_runner_create_model(MultiFeatures, 4, &MultiAdvice, "multi",
                                     NULL, &R) == MLBRIDGE_OK);
  CHECK(unsetenv("MLBRIDGE_MODEL_REGISTRY") == 0);
  if (R)
    CHECK(checkMultiInput(R) == 3);
  mlbridge_runner_destroy(R);
  R = NULL;
#endif
#ifdef MLBRIDGE_HAVE_TF_AOT
  CHECK(registerModel(Registry, "mixed-aot", MLBRIDGE_AOT_MIXED_SO));
  mlbridge_runner *D = NULL;
  CHECK(mlbridge_runner_create_model(MixedFeatures, 4, &MixedScore, "mixed-aot",
                                     Registry, &R) == MLBRIDGE_OK);
  /* By path (it has a '/'): no registry involved. */
  CHECK(mlbridge_runner_create_model(MixedFeatures, 4, &MixedDoubled,
                                     MLBRIDGE_AOT_MIXED_SO, NULL,
                                     &D) == MLBRIDGE_OK);
  if (R && D)
    CHECK(checkMixed(R, D) == 6);
  mlbridge_runner_destroy(R);
  mlbridge_runner_destroy(D);
  R = NULL;
  /* The model's own failures are its runner's. */
  CHECK(mlbridge_runner_create_model(MultiFeatures, 4, &MultiAdvice,
                                     "mixed-aot", Registry,
                                     &R) == MLBRIDGE_ERROR_MODEL);
  CHECK(strstr(mlbridge_last_error(), "does not fit") != NULL);
  CHECK(R == NULL);
#endif
  /* An unknown name: the registry searched and its models are named. */
  CHECK(mlbridge_runner_create_model(MultiFeatures, 4, &MultiAdvice,
                                     "no-such-model", Registry,
                                     &R) == MLBRIDGE_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(mlbridge_last_error(), "no model named 'no-such-model'") !=
        NULL);
  CHECK(strstr(mlbridge_last_error(), Registry) != NULL);
#ifdef MLBRIDGE_HAVE_ONNX
  CHECK(strstr(mlbridge_last_error(), "multi") != NULL);
#endif
  CHECK(R == NULL);
  /* A path that is not a model file. */
  CHECK(mlbridge_runner_create_model(MultiFeatures, 4, &MultiAdvice,
                                     "/nonexistent/model.onnx", Registry,
                                     &R) == MLBRIDGE_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(mlbridge_last_error(), "/nonexistent/model.onnx") != NULL);
  CHECK(R == NULL);
  char *Remove[] = {(char *)"rm", (char *)"-rf", Registry, NULL};
  CHECK(runBounded(Remove, 60) == 0);
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
  testPipeRunner("bitstream");
  testPipeRunner("json");
  testPipeRunnerWithoutModel();
  testPipeOutcomesAndSpecs("bitstream");
  testPipeOutcomesAndSpecs("json");
  testTrainingCallsNeedAPipe();
  testGrpcRunner();
  testOnnxRunner();
  testTFAOTRunner();
  testModelRunner();
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
