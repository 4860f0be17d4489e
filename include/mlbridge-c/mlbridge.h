/*===- mlbridge-c/mlbridge.h - C API of the mlbridge runtime ----*- C -*-===*\
|*                                                                            *|
|* Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.      *|
|*                                                                            *|
|*===----------------------------------------------------------------------===*|
|*                                                                            *|
|* A C11 interface to the runner and SerDes layers, for C compilers and       *|
|* foreign-function bindings. Functions return an mlbridge_status; on failure *|
|* mlbridge_last_error() describes what went wrong. Pointers given to a       *|
|* function are borrowed for the duration of the call unless said otherwise. *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef MLBRIDGE_C_MLBRIDGE_H
#define MLBRIDGE_C_MLBRIDGE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** The result of every fallible function. */
typedef enum mlbridge_status {
  MLBRIDGE_OK = 0,
  /** A null pointer, an unknown name or an out-of-range enum value. */
  MLBRIDGE_ERROR_INVALID_ARGUMENT = 1,
  /** The given element type is not the expected one. */
  MLBRIDGE_ERROR_TYPE_MISMATCH = 2,
  /** The element count or shape does not match the spec. */
  MLBRIDGE_ERROR_SHAPE_MISMATCH = 3,
  /** The caller's output buffer is too small. */
  MLBRIDGE_ERROR_BUFFER_TOO_SMALL = 4,
  /** The model (or callback) failed or replied something invalid. */
  MLBRIDGE_ERROR_MODEL = 5,
  /** Encoding or decoding failed (malformed input, limits, ...). */
  MLBRIDGE_ERROR_SERDES = 6,
  /** Decoding reached the end of the input or an end record. */
  MLBRIDGE_END_OF_STREAM = 7,
  /** This build of mlbridge lacks the feature (e.g. built without gRPC). */
  MLBRIDGE_ERROR_UNSUPPORTED = 8,
  /** Makes the enum 32 bits wide (not a value to use). */
  MLBRIDGE_STATUS_MAX_ENUM = 0x7fffffff
} mlbridge_status;

/** Element types, in the order of the C++ mlbridge::ElementType. */
typedef enum mlbridge_element_type {
  MLBRIDGE_INT8 = 0,
  MLBRIDGE_UINT8 = 1,
  MLBRIDGE_INT16 = 2,
  MLBRIDGE_UINT16 = 3,
  MLBRIDGE_INT32 = 4,
  MLBRIDGE_UINT32 = 5,
  MLBRIDGE_INT64 = 6,
  MLBRIDGE_UINT64 = 7,
  MLBRIDGE_FLOAT = 8,
  MLBRIDGE_DOUBLE = 9,
  /** One byte per element, 0 or 1 (C's bool). */
  MLBRIDGE_BOOL = 10,
  MLBRIDGE_STRING = 11,
  /** Makes the enum 32 bits wide: an out-of-range value from a caller is then
      an error, not undefined behaviour (not a value to use). */
  MLBRIDGE_ELEMENT_TYPE_MAX_ENUM = 0x7fffffff
} mlbridge_element_type;

/** Message kinds. */
typedef enum mlbridge_message_kind {
  MLBRIDGE_OBSERVATION = 0,
  MLBRIDGE_OUTCOME = 1,
  MLBRIDGE_ADVICE = 2,
  /** Makes the enum 32 bits wide (not a value to use). */
  MLBRIDGE_MESSAGE_KIND_MAX_ENUM = 0x7fffffff
} mlbridge_message_kind;

/** A tensor description. All pointers are borrowed. */
typedef struct mlbridge_tensor_spec {
  /** NUL-terminated UTF-8 name. */
  const char *name;
  mlbridge_element_type type;
  /** rank dimensions; -1 marks a dynamic dimension. */
  const int64_t *shape;
  size_t rank;
} mlbridge_tensor_spec;

/**
 * A view of a named tensor with a concrete shape. For numeric and bool types
 * `data` holds `num_elements` elements of the type; for strings, `strings`
 * and `string_lengths` hold `num_elements` byte strings (any bytes).
 */
typedef struct mlbridge_tensor {
  const char *name;
  mlbridge_element_type type;
  const int64_t *shape;
  size_t rank;
  const void *data;
  const char *const *strings;
  const size_t *string_lengths;
  size_t num_elements;
} mlbridge_tensor;

/** A model runner (opaque). */
typedef struct mlbridge_runner mlbridge_runner;
/** A serializer in one wire format (opaque). */
typedef struct mlbridge_serdes mlbridge_serdes;
/** A decoded message (opaque). */
typedef struct mlbridge_message mlbridge_message;
/** Where a callback puts its advice (opaque, valid during the callback). */
typedef struct mlbridge_reply mlbridge_reply;

/**
 * Returns the message of the last failure on this thread, or "" if none.
 * The string is valid until the next mlbridge call on this thread.
 */
const char *mlbridge_last_error(void);

/** Returns the wire name of `type` ("int64_t", ...), or NULL if invalid. */
const char *mlbridge_element_type_name(mlbridge_element_type type);

/** Returns the size in bytes of one element of `type`; 0 for strings. */
size_t mlbridge_element_size(mlbridge_element_type type);

/**
 * A policy for a callback runner. It receives the features (views valid
 * during the call), and sets the advice with mlbridge_reply_set() or
 * mlbridge_reply_set_strings(). It returns 0 on success; any other value is
 * a failure, described with mlbridge_reply_set_error() if it wishes.
 * `user_data` is the pointer given at creation.
 */
typedef int (*mlbridge_callback)(void *user_data,
                                 const mlbridge_tensor *features,
                                 size_t num_features, mlbridge_reply *reply);

/**
 * Creates a runner that calls `callback`. `user_data` is borrowed: it is
 * passed to every call and must stay valid until the runner is destroyed;
 * the runner never frees it. On success `*out` owns the runner (free it with
 * mlbridge_runner_destroy()).
 */
mlbridge_status mlbridge_runner_create_callback(
    const mlbridge_tensor_spec *features, size_t num_features,
    const mlbridge_tensor_spec *advice, mlbridge_callback callback,
    void *user_data, mlbridge_runner **out);

/**
 * Creates a runner that asks a model in another process over LLVM's
 * named-pipe protocol (docs/pipe-protocol.md), e.g. a Python model using
 * mlbridge.compiler.pipe. The runner writes `<base>.out` and reads
 * `<base>.in`; it creates them (FIFOs, mode 0600) if they do not exist and
 * removes the ones it created when destroyed. `serdes` is "bitstream"
 * (LLVM's protocol: raw replies), "json" or "protobuf" (records both ways).
 * `timeout_ms` (> 0) bounds every wait: for the model to connect, for each
 * reply, for each write. Nothing connects here: the first evaluation (or
 * mlbridge_runner_switch_context()) does. A model that is gone, too slow or
 * replies something invalid makes the call fail with MLBRIDGE_ERROR_MODEL,
 * whose message names the FIFO; the runner then stays failed. On success
 * `*out` owns the runner (free it with mlbridge_runner_destroy(), which ends
 * the session).
 */
mlbridge_status mlbridge_runner_create_pipe(
    const mlbridge_tensor_spec *features, size_t num_features,
    const mlbridge_tensor_spec *advice, const char *base, const char *serdes,
    int64_t timeout_ms, mlbridge_runner **out);

/**
 * Like mlbridge_runner_create_pipe(), for a training session: `score` (not
 * NULL) is the spec of the outcome (reward) the compiler reports per
 * observation with mlbridge_runner_send_outcome(); it is sent in the header
 * (docs/pipe-protocol.md, "Outcomes").
 */
mlbridge_status mlbridge_runner_create_pipe_with_score(
    const mlbridge_tensor_spec *features, size_t num_features,
    const mlbridge_tensor_spec *advice, const mlbridge_tensor_spec *score,
    const char *base, const char *serdes, int64_t timeout_ms,
    mlbridge_runner **out);

/**
 * Reports the outcome (reward) of observation `observation_id` of the
 * current context of a pipe runner made with
 * mlbridge_runner_create_pipe_with_score(): `count` elements of `type` (the
 * score spec's type, numeric or bool) read from `data`. The model does not
 * reply. A runner without a score spec, a wrong type or count, or an id that
 * was not sent in this context is MLBRIDGE_ERROR_INVALID_ARGUMENT (or
 * TYPE/SHAPE_MISMATCH) and sends nothing; a model that is gone is
 * MLBRIDGE_ERROR_MODEL. Other runners: MLBRIDGE_ERROR_UNSUPPORTED.
 */
mlbridge_status mlbridge_runner_send_outcome(mlbridge_runner *runner,
                                             int64_t observation_id,
                                             mlbridge_element_type type,
                                             const void *data, size_t count);

/**
 * Replaces the feature and advice specs of a pipe runner (per-request
 * specs): the feature buffers are made anew (zero-filled) and the next
 * record is preceded by a new header, which replaces the first on the model
 * side. Not for a model host that only knows LLVM's protocol. Bad specs are
 * MLBRIDGE_ERROR_INVALID_ARGUMENT (the runner keeps its old specs); a
 * finished or failed runner is MLBRIDGE_ERROR_MODEL. Other runners:
 * MLBRIDGE_ERROR_UNSUPPORTED.
 */
mlbridge_status mlbridge_runner_change_specs(
    mlbridge_runner *runner, const mlbridge_tensor_spec *features,
    size_t num_features, const mlbridge_tensor_spec *advice);

/**
 * Creates a runner that asks a model server over gRPC (ModelService,
 * docs/grpc.md), e.g. `mlbridge serve POLICY --address HOST:PORT`: one
 * Evaluate call per evaluation, protobuf on the wire. `address` is the
 * server's `host:port`. `timeout_ms` (> 0) is the deadline of every call and
 * also bounds the connection, which is made here (reconnection back-off
 * bounded by it, at most 1 s); a server that cannot be reached in time makes
 * this fail with MLBRIDGE_ERROR_MODEL, whose message names the address.
 * Failed calls return MLBRIDGE_ERROR_MODEL naming the address and the gRPC
 * status. Always declared; a library built without gRPC
 * (MLBRIDGE_ENABLE_GRPC off) returns MLBRIDGE_ERROR_UNSUPPORTED
 * ("... built without gRPC"). On success `*out` owns the runner (free it
 * with mlbridge_runner_destroy()).
 */
mlbridge_status mlbridge_runner_create_grpc(
    const mlbridge_tensor_spec *features, size_t num_features,
    const mlbridge_tensor_spec *advice, const char *address, int64_t timeout_ms,
    mlbridge_runner **out);

/**
 * Creates a runner that runs an ONNX model in this process (ONNX Runtime,
 * docs/onnx.md). `model_path` is the .onnx file. Every model input is fed by
 * the feature of the same name (features the model does not read are not
 * fed); the advice is the model output named like `advice`, or the only
 * output. `intra_op_threads` is the number of threads ONNX Runtime may use
 * inside one evaluation: 0 for the default (1: no thread pool), else >= 1.
 * Bad specs or a negative thread count are MLBRIDGE_ERROR_INVALID_ARGUMENT.
 * A model that cannot be loaded (no such file, not an ONNX model, too old an
 * ONNX Runtime) or that does not fit the specs is MLBRIDGE_ERROR_MODEL; the
 * message names the file and lists every difference. Always declared; a
 * library built without ONNX Runtime (MLBRIDGE_ENABLE_ONNX off) returns
 * MLBRIDGE_ERROR_UNSUPPORTED ("... built without ONNX Runtime"). On success
 * `*out` owns the runner (free it with mlbridge_runner_destroy()).
 */
mlbridge_status mlbridge_runner_create_onnx(
    const mlbridge_tensor_spec *features, size_t num_features,
    const mlbridge_tensor_spec *advice, const char *model_path,
    int32_t intra_op_threads, mlbridge_runner **out);

/**
 * Creates a runner that runs a TensorFlow model compiled ahead of time by
 * `mlbridge aot` (docs/tfaot.md), loaded from its shared object
 * `shared_object_path` (`<name>.so`). Model inputs are bound to the features
 * by name, as for mlbridge_runner_create_onnx(); the advice is the model
 * output named like `advice`. Bad specs are MLBRIDGE_ERROR_INVALID_ARGUMENT.
 * A file that cannot be opened, is not an mlbridge AOT model or has another
 * ABI version, or a model that does not fit the specs, is
 * MLBRIDGE_ERROR_MODEL, whose message names the file (or the model) and lists
 * every difference. Always declared; a library built without TF AOT support
 * (MLBRIDGE_ENABLE_TF_AOT off) returns MLBRIDGE_ERROR_UNSUPPORTED ("... built
 * without TF AOT support"). On success `*out` owns the runner (free it with
 * mlbridge_runner_destroy()).
 */
mlbridge_status mlbridge_runner_create_tfaot(
    const mlbridge_tensor_spec *features, size_t num_features,
    const mlbridge_tensor_spec *advice, const char *shared_object_path,
    mlbridge_runner **out);

/**
 * Creates an in-process runner for a model found by registered name or by
 * path (docs/models.md): `name_or_path` with a '/' is a path; otherwise it is
 * a name registered with `mlbridge models register` in `registry_dir`
 * (NULL or "" for the default: $MLBRIDGE_MODEL_REGISTRY, else
 * $XDG_DATA_HOME/mlbridge/models, else ~/.local/share/mlbridge/models), or
 * an existing file. The model's kind
 * picks the runner: an ONNX model as mlbridge_runner_create_onnx() with
 * default options, a TF AOT shared object as mlbridge_runner_create_tfaot().
 * A name that is neither registered nor a model file (the message names the
 * registry searched and lists its models) is MLBRIDGE_ERROR_INVALID_ARGUMENT;
 * the model's own failures are those of the runner it needs, including
 * MLBRIDGE_ERROR_UNSUPPORTED when this library lacks that runner. On success
 * `*out` owns the runner (free it with mlbridge_runner_destroy()).
 */
mlbridge_status mlbridge_runner_create_model(
    const mlbridge_tensor_spec *features, size_t num_features,
    const mlbridge_tensor_spec *advice, const char *name_or_path,
    const char *registry_dir, mlbridge_runner **out);

/**
 * Tells the model what the next evaluations are about (e.g. the function
 * name): the pipe runner sends a context record, the gRPC runner sends it
 * with each following Evaluate call, other runners ignore it.
 */
mlbridge_status mlbridge_runner_switch_context(mlbridge_runner *runner,
                                               const char *name);

/**
 * Ends the session of a pipe runner: sends the end record and closes the
 * FIFOs, so the model sees the end; later evaluations fail. Idempotent, and
 * done by mlbridge_runner_destroy() too. Other runners: nothing to do.
 */
mlbridge_status mlbridge_runner_finish(mlbridge_runner *runner);

/**
 * Copies the value the runner's model declares about itself under `key` (an
 * ONNX model's metadata_props, such as "mlbridge.regalloc.message_rounds")
 * into `out`, NUL-terminated, which holds `capacity` bytes. `*out_length`
 * receives the value's length without the NUL, also when the buffer is too
 * small (MLBRIDGE_ERROR_BUFFER_TOO_SMALL). `*found` is 1 if the model
 * declares `key`, else 0 (and `*out_length` 0): the model says nothing, or
 * the runner cannot ask it (every runner but the ONNX one).
 */
mlbridge_status mlbridge_runner_model_metadata(const mlbridge_runner *runner,
                                               const char *key, char *out,
                                               size_t capacity,
                                               size_t *out_length, int *found);

/** Destroys a runner; NULL is ignored. */
void mlbridge_runner_destroy(mlbridge_runner *runner);

/**
 * Sets feature `name` to `count` elements of `type` read from `data`. The
 * type must be the feature's exactly; the count must match a static shape
 * or fills its single dynamic dimension.
 */
mlbridge_status mlbridge_runner_set_feature(mlbridge_runner *runner,
                                            const char *name,
                                            mlbridge_element_type type,
                                            const void *data, size_t count);

/**
 * Sets string feature `name` to `count` byte strings: `strings[i]` has
 * `lengths[i]` bytes.
 */
mlbridge_status mlbridge_runner_set_feature_strings(mlbridge_runner *runner,
                                                    const char *name,
                                                    const char *const *strings,
                                                    const size_t *lengths,
                                                    size_t count);

/**
 * Runs the model and stores its one-element advice, of type `type`
 * (numeric or bool), in `*out` (which must have that type's size).
 */
mlbridge_status mlbridge_runner_evaluate_scalar(mlbridge_runner *runner,
                                                mlbridge_element_type type,
                                                void *out);

/**
 * Runs the model and stores its advice elements, of type `type` (numeric or
 * bool), in `out`, which holds `capacity` elements. `*out_count` receives the
 * number of elements, also when the buffer is too small.
 */
mlbridge_status mlbridge_runner_evaluate_vector(mlbridge_runner *runner,
                                                mlbridge_element_type type,
                                                void *out, size_t capacity,
                                                size_t *out_count);

/**
 * In a callback: sets the advice to `count` elements of `type` from `data`
 * with shape `shape` (`rank` dimensions; NULL and 0 for shape [count]).
 */
mlbridge_status mlbridge_reply_set(mlbridge_reply *reply,
                                   mlbridge_element_type type,
                                   const int64_t *shape, size_t rank,
                                   const void *data, size_t count);

/** In a callback: sets the advice to `count` strings, shape [count]. */
mlbridge_status mlbridge_reply_set_strings(mlbridge_reply *reply,
                                           const char *const *strings,
                                           const size_t *lengths, size_t count);

/** In a callback: describes why it fails (copied). */
void mlbridge_reply_set_error(mlbridge_reply *reply, const char *message);

/**
 * Creates a SerDes: `kind` is "bitstream", "json" or "protobuf". On success
 * `*out` owns it (free it with mlbridge_serdes_destroy()).
 */
mlbridge_status mlbridge_serdes_create(const char *kind, mlbridge_serdes **out);

/** Destroys a SerDes; NULL is ignored. */
void mlbridge_serdes_destroy(mlbridge_serdes *serdes);

/**
 * Encodes a header record (`advice` and `score` may be NULL) into a new
 * buffer: `*out_data` (free it with mlbridge_free()) of `*out_size` bytes.
 * It becomes the SerDes's current header.
 */
mlbridge_status mlbridge_serdes_encode_header(
    mlbridge_serdes *serdes, const mlbridge_tensor_spec *features,
    size_t num_features, const mlbridge_tensor_spec *advice,
    const mlbridge_tensor_spec *score, char **out_data, size_t *out_size);

/** Encodes a context record into a new buffer (see encode_header). */
mlbridge_status mlbridge_serdes_encode_context(mlbridge_serdes *serdes,
                                               const char *context,
                                               char **out_data,
                                               size_t *out_size);

/** Encodes a message record into a new buffer (see encode_header). */
mlbridge_status mlbridge_serdes_encode_message(
    mlbridge_serdes *serdes, mlbridge_message_kind kind, int64_t id,
    const mlbridge_tensor *tensors, size_t num_tensors, char **out_data,
    size_t *out_size);

/** Encodes an end record into a new buffer (see encode_header). */
mlbridge_status mlbridge_serdes_encode_end(mlbridge_serdes *serdes,
                                           char **out_data, size_t *out_size);

/** Frees a buffer returned by an encode function; NULL is ignored. */
void mlbridge_free(char *data);

/**
 * Decodes records from `data` (`size` bytes) up to and including the first
 * message, which `*out` then owns (free it with mlbridge_message_destroy()).
 * Header records become the current header; context records are skipped.
 * `*consumed` receives the bytes used, so that the next call can continue.
 * Returns MLBRIDGE_END_OF_STREAM if the data ends, or reaches an end record,
 * before a message.
 */
mlbridge_status mlbridge_serdes_decode_message(mlbridge_serdes *serdes,
                                               const char *data, size_t size,
                                               size_t *consumed,
                                               mlbridge_message **out);

/** Destroys a decoded message; NULL is ignored. */
void mlbridge_message_destroy(mlbridge_message *message);

/** Returns the kind of `message`. */
mlbridge_message_kind
mlbridge_message_get_kind(const mlbridge_message *message);

/** Returns the id of `message`. */
int64_t mlbridge_message_get_id(const mlbridge_message *message);

/** Returns the number of tensors of `message`. */
size_t mlbridge_message_num_tensors(const mlbridge_message *message);

/**
 * Fills `*out` with a view of tensor `index` of `message`, valid until the
 * message is destroyed.
 */
mlbridge_status mlbridge_message_get_tensor(const mlbridge_message *message,
                                            size_t index, mlbridge_tensor *out);

#ifdef __cplusplus
}
#endif

#endif /* MLBRIDGE_C_MLBRIDGE_H */
