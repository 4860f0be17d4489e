/* Two threads, each with its own runner over one natively compiled model
 * (`mlbridge compile`, docs/native.md), loaded through the C API by the TF AOT
 * runner: every answer must be the model's formula, trip_count % 4 == 0 ? 4 : 2
 * (Python's %, so -4 gives 4 and -1 gives 2), whatever the other thread does.
 *   native_threads MODEL.so QUERIES */
#include "mlbridge-c/mlbridge.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static const char *Model;
static long Queries;

struct job {
  int64_t seed;
  long wrong;
  long done;
  int failed;
};

static void *work(void *arg) {
  struct job *job = arg;
  static const int64_t one[] = {1};
  mlbridge_tensor_spec feature = {"trip_count", MLBRIDGE_INT64, one, 1};
  mlbridge_tensor_spec advice = {"unroll_factor", MLBRIDGE_INT64, one, 1};
  mlbridge_runner *runner = NULL;
  if (mlbridge_runner_create_tfaot(&feature, 1, &advice, Model, &runner) !=
      MLBRIDGE_OK) {
    fprintf(stderr, "create: %s\n", mlbridge_last_error());
    job->failed = 1;
    return NULL;
  }
  uint64_t state = (uint64_t)job->seed;
  for (long i = 0; i < Queries; ++i) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    int64_t trip = (int64_t)(state >> 40) - (1 << 23);
    int64_t factor = 0;
    if (mlbridge_runner_set_feature(runner, "trip_count", MLBRIDGE_INT64, &trip,
                                    1) != MLBRIDGE_OK ||
        mlbridge_runner_evaluate_scalar(runner, MLBRIDGE_INT64, &factor) !=
            MLBRIDGE_OK) {
      fprintf(stderr, "evaluate: %s\n", mlbridge_last_error());
      job->failed = 1;
      break;
    }
    int64_t rem = ((trip % 4) + 4) % 4;
    job->wrong += factor != (rem == 0 ? 4 : 2);
    ++job->done;
  }
  mlbridge_runner_destroy(runner);
  return NULL;
}

int main(int argc, char **argv) {
  if (argc != 3)
    return 2;
  Model = argv[1];
  Queries = atol(argv[2]);
  struct job jobs[2] = {{1, 0, 0, 0}, {2, 0, 0, 0}};
  pthread_t threads[2];
  for (int t = 0; t < 2; ++t)
    pthread_create(&threads[t], NULL, work, &jobs[t]);
  for (int t = 0; t < 2; ++t)
    pthread_join(threads[t], NULL);
  for (int t = 0; t < 2; ++t) {
    printf("thread %d: %ld answers, %ld wrong%s\n", t, jobs[t].done,
           jobs[t].wrong, jobs[t].failed ? ", failed" : "");
    if (jobs[t].failed || jobs[t].wrong)
      return 1;
  }
  return 0;
}
