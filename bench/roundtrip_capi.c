/*===- roundtrip_capi.c - Round-trip benchmark host in plain C ------------===*\
|*                                                                            *|
|* Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.      *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/
/*
 * The third host of the round-trip benchmark (the paper's was a C compiler):
 * a plain C11 program that asks the model only through the C API
 * (include/mlbridge-c/mlbridge.h). Same command line, experiment and JSON
 * output as bench/RoundTrip.cpp, so bench/roundtrip.py's model side and
 * driver serve it unchanged:
 *
 *   bitstream, json, protobuf  mlbridge_runner_create_pipe() (feature `x`,
 *                              float [-1]; advice `y`, float [1]);
 *   grpc                       mlbridge_runner_create_grpc() to --address.
 *
 * The inputs, weights and the check are those of bench/RoundTripCommon.h
 * (C++), written again here because C cannot include that header; the
 * Python side (bench/roundtrip.py: weights()) computes the same weights.
 * Every answer is checked. One JSON object on stdout; errors on stderr and
 * a non-zero exit status.
 */
#define _POSIX_C_SOURCE 200809L

#include "mlbridge-c/mlbridge.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define BIAS 0.25f
#define MAX_SIZES 1024

static float weight(uint32_t i) {
  uint32_t h = i * 2654435761u + 12345u;
  return (float)(h >> 8) / 16777216.0f * 2.0f - 1.0f;
}

static float input(uint32_t q, uint32_t i) {
  uint32_t h = (i + 0x9e3779b9u * (q + 1)) * 2246822519u + 3266489917u;
  h ^= h >> 15;
  return (float)(h >> 8) / 16777216.0f * 2.0f - 1.0f;
}

typedef struct options {
  const char *mode;
  const char *base;
  const char *address;
  uint32_t sizes[MAX_SIZES];
  size_t num_sizes;
  uint64_t repeat;
  uint64_t warmup;
  int64_t timeout_ms;
} options;

static double now_seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static double cpu_seconds(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

static long rss_kib(void) {
  long size = 0, resident = 0;
  FILE *f = fopen("/proc/self/statm", "r");
  if (!f)
    return -1;
  if (fscanf(f, "%ld %ld", &size, &resident) != 2)
    resident = -1;
  fclose(f);
  return resident < 0 ? -1 : resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static long peak_rss_kib(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

/* "--flag=value": the value, or NULL if arg is not that flag. */
static const char *flag_value(const char *arg, const char *flag) {
  size_t n = strlen(flag);
  if (strncmp(arg, flag, n) != 0 || arg[n] != '=')
    return NULL;
  return arg + n + 1;
}

static int parse_u64(const char *s, uint64_t *out) {
  char *end;
  unsigned long long v;
  if (!*s || *s == '-')
    return 0;
  v = strtoull(s, &end, 10);
  if (*end)
    return 0;
  *out = (uint64_t)v;
  return 1;
}

static int parse_args(int argc, char **argv, options *o) {
  int i;
  const char *v;
  memset(o, 0, sizeof(*o));
  o->repeat = 1;
  o->warmup = 3;
  o->timeout_ms = 120000;
  for (i = 1; i < argc; ++i) {
    uint64_t n;
    if ((v = flag_value(argv[i], "--mode"))) {
      o->mode = v;
    } else if ((v = flag_value(argv[i], "--base"))) {
      o->base = v;
    } else if ((v = flag_value(argv[i], "--address"))) {
      o->address = v;
    } else if ((v = flag_value(argv[i], "--sizes"))) {
      const char *p = v;
      while (*p) {
        char *end;
        unsigned long long l = strtoull(p, &end, 10);
        if (end == p || l == 0 || l > (1u << 24) || o->num_sizes == MAX_SIZES)
          return 0;
        o->sizes[o->num_sizes++] = (uint32_t)l;
        p = *end == ',' ? end + 1 : end;
        if (*end && *end != ',')
          return 0;
      }
    } else if ((v = flag_value(argv[i], "--repeat"))) {
      if (!parse_u64(v, &o->repeat) || o->repeat == 0)
        return 0;
    } else if ((v = flag_value(argv[i], "--warmup"))) {
      if (!parse_u64(v, &o->warmup))
        return 0;
    } else if ((v = flag_value(argv[i], "--timeout-ms"))) {
      if (!parse_u64(v, &n) || n == 0 || n > 86400000u)
        return 0;
      o->timeout_ms = (int64_t)n;
    } else {
      return 0;
    }
  }
  return o->mode && (o->base || o->address) && o->num_sizes > 0;
}

static mlbridge_runner *make_runner(const options *o) {
  static const int64_t dynamic_shape[1] = {-1};
  static const int64_t scalar_shape[1] = {1};
  mlbridge_tensor_spec feature = {"x", MLBRIDGE_FLOAT, dynamic_shape, 1};
  mlbridge_tensor_spec advice = {"y", MLBRIDGE_FLOAT, scalar_shape, 1};
  mlbridge_runner *r = NULL;
  mlbridge_status s;
  if (strcmp(o->mode, "grpc") == 0) {
    if (!o->address) {
      fprintf(stderr, "roundtrip-c: mode grpc needs --address\n");
      return NULL;
    }
    s = mlbridge_runner_create_grpc(&feature, 1, &advice, o->address,
                                    o->timeout_ms, &r);
  } else if (strcmp(o->mode, "bitstream") == 0 ||
             strcmp(o->mode, "json") == 0 || strcmp(o->mode, "protobuf") == 0) {
    if (!o->base) {
      fprintf(stderr, "roundtrip-c: mode %s needs --base\n", o->mode);
      return NULL;
    }
    s = mlbridge_runner_create_pipe(&feature, 1, &advice, o->base, o->mode,
                                    o->timeout_ms, &r);
  } else {
    fprintf(stderr,
            "roundtrip-c: unknown mode '%s' (bitstream, json, protobuf, "
            "grpc)\n",
            o->mode);
    return NULL;
  }
  if (s != MLBRIDGE_OK) {
    fprintf(stderr, "roundtrip-c: cannot create the %s runner: %s\n", o->mode,
            mlbridge_last_error());
    return NULL;
  }
  if (mlbridge_runner_switch_context(r, "roundtrip") != MLBRIDGE_OK) {
    fprintf(stderr, "roundtrip-c: %s\n", mlbridge_last_error());
    mlbridge_runner_destroy(r);
    return NULL;
  }
  return r;
}

typedef struct checker {
  const float *w;
  uint64_t checked;
  uint64_t mismatches;
  char first_mismatch[160];
} checker;

static void check(checker *c, const float *x, uint32_t n, float y) {
  double exact = BIAS, magnitude = 0, tolerance;
  uint32_t i;
  for (i = 0; i < n; ++i) {
    double p = (double)x[i] * (double)c->w[i];
    exact += p;
    magnitude += fabs(p);
  }
  /* The model sums in float32 in its own order: allow its rounding. */
  tolerance = 1e-5 * magnitude + 1e-4;
  ++c->checked;
  if (!(fabs((double)y - exact) <= tolerance) && c->mismatches++ == 0)
    snprintf(c->first_mismatch, sizeof(c->first_mismatch),
             "L=%u: model said %.9e, expected %.9e", (unsigned)n, (double)y,
             exact);
}

/* One query; 0 on failure (message on stderr). */
static int query(mlbridge_runner *r, const float *x, uint32_t n, float *y) {
  if (mlbridge_runner_set_feature(r, "x", MLBRIDGE_FLOAT, x, n) !=
          MLBRIDGE_OK ||
      mlbridge_runner_evaluate_scalar(r, MLBRIDGE_FLOAT, y) != MLBRIDGE_OK) {
    fprintf(stderr, "roundtrip-c: query of %u floats failed: %s\n", (unsigned)n,
            mlbridge_last_error());
    return 0;
  }
  return 1;
}

int main(int argc, char **argv) {
  options o;
  uint32_t max_len = 0;
  size_t q;
  uint64_t i, rep;
  float **inputs = NULL, *w = NULL;
  double *per_size = NULL, total = 0, cpu0, cpu;
  long rss_warm, rss_end;
  mlbridge_runner *r = NULL;
  checker c;
  int status = 1;

  if (!parse_args(argc, argv, &o)) {
    fprintf(stderr,
            "usage: %s --mode=bitstream|json|protobuf --base=PATH | "
            "--mode=grpc --address=HOST:PORT --sizes=L1,L2,... "
            "[--repeat=N] [--warmup=N] [--timeout-ms=MS]\n",
            argv[0]);
    return 2;
  }
  for (q = 0; q < o.num_sizes; ++q)
    if (o.sizes[q] > max_len)
      max_len = o.sizes[q];
  w = malloc(sizeof(float) * max_len);
  inputs = calloc(o.num_sizes, sizeof(float *));
  per_size = calloc(o.num_sizes, sizeof(double));
  if (!w || !inputs || !per_size) {
    fprintf(stderr, "roundtrip-c: out of memory\n");
    goto done;
  }
  for (i = 0; i < max_len; ++i)
    w[i] = weight((uint32_t)i);
  /* Every input is made before timing starts. */
  for (q = 0; q < o.num_sizes; ++q) {
    inputs[q] = malloc(sizeof(float) * o.sizes[q]);
    if (!inputs[q]) {
      fprintf(stderr, "roundtrip-c: out of memory\n");
      goto done;
    }
    for (i = 0; i < o.sizes[q]; ++i)
      inputs[q][i] = input((uint32_t)q, (uint32_t)i);
  }
  memset(&c, 0, sizeof(c));
  c.w = w;

  r = make_runner(&o);
  if (!r) {
    status = 2;
    goto done;
  }
  for (i = 0; i < o.warmup; ++i) {
    float y;
    size_t k = (size_t)(i % o.num_sizes);
    if (!query(r, inputs[k], o.sizes[k], &y))
      goto done;
    check(&c, inputs[k], o.sizes[k], y);
  }
  rss_warm = rss_kib();
  cpu0 = cpu_seconds();
  for (q = 0; q < o.num_sizes; ++q) {
    for (rep = 0; rep < o.repeat; ++rep) {
      float y;
      double t0 = now_seconds(), d;
      int ok = query(r, inputs[q], o.sizes[q], &y);
      d = now_seconds() - t0;
      if (!ok)
        goto done;
      total += d;
      per_size[q] += d;
      check(&c, inputs[q], o.sizes[q], y);
    }
  }
  cpu = cpu_seconds() - cpu0;
  rss_end = rss_kib();

  printf("{\"mode\":\"%s\",\"host\":\"c-api\",\"queries\":%llu,"
         "\"checked\":%llu,\"mismatches\":%llu,\"first_mismatch\":\"%s\","
         "\"total_seconds\":%.9e,\"cpu_seconds\":%.6e,"
         "\"rss_kib_after_warmup\":%ld,\"rss_kib_end\":%ld,"
         "\"peak_rss_kib\":%ld,\"per_size_seconds\":[",
         o.mode, (unsigned long long)(c.checked - o.warmup),
         (unsigned long long)c.checked, (unsigned long long)c.mismatches,
         c.first_mismatch, total, cpu, rss_warm, rss_end, peak_rss_kib());
  for (q = 0; q < o.num_sizes; ++q)
    printf("%s%.6e", q ? "," : "", per_size[q]);
  printf("]}\n");
  fflush(stdout);
  status = c.mismatches == 0 ? 0 : 1;

done:
  /* Ends a pipe session: the model sees the end record. */
  mlbridge_runner_destroy(r);
  if (inputs)
    for (q = 0; q < o.num_sizes; ++q)
      free(inputs[q]);
  free(inputs);
  free(per_size);
  free(w);
  return status;
}
