/*===- capi_test.c - The C API from a strict C11 program ------------------===*\
|*                                                                            *|
|* Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.      *|
|*                                                                            *|
|* Built with -std=c11 -Wall -Werror -pedantic. Prints "N passed, 0 failed"   *|
|* and exits non-zero on any failure.                                         *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#define _POSIX_C_SOURCE 200809L

#include "mlbridge/mlbridge.h"

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
