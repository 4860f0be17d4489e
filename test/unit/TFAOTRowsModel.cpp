//===- TFAOTRowsModel.cpp - A model whose inputs have rows of their own ---===//
//
// Part of mlbridge, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// For TFAOTModelRunnerTest: mlbridge's AOT C ABI with set_arg_rows and
// error_message, as mlbridge.regalloc.native's agents export it, over a small
// sum: total = count + every element of values [-1, 2] + every element of
// weights [-1]. values and weights must have as many rows (else run() fails
// and error_message says why). Built with NO_SET_ARG_DATA, it lacks
// set_arg_data, which such a model needs.
//
//===----------------------------------------------------------------------===//

#include <cstdint>
#include <cstdlib>

#define API extern "C" __attribute__((visibility("default")))

struct mlbridge_aot_instance {
  const void *Data[3];
  int64_t Rows[3];
  int64_t Count;
  float Total;
  int32_t Status;
};

static const char *const Names[] = {"count", "values", "weights"};
static const int32_t Types[] = {6, 8, 8}; // Int64, Float, Float
static const int32_t Ranks[] = {1, 2, 1};
static const int64_t CountShape[] = {1}, ValuesShape[] = {-1, 2},
                     WeightsShape[] = {-1}, TotalShape[] = {1};
static const int64_t *const Shapes[] = {CountShape, ValuesShape, WeightsShape};
static const int64_t Width[] = {0, 2, 1};

static bool valid(int32_t I) { return I >= 0 && I < 3; }

API uint32_t mlbridge_aot_abi_version() { return 1; }
API const char *mlbridge_aot_model_name() { return "rows"; }
API int32_t mlbridge_aot_num_args() { return 3; }
API const char *mlbridge_aot_arg_name(int32_t I) {
  return valid(I) ? Names[I] : nullptr;
}
API int32_t mlbridge_aot_arg_type(int32_t I) {
  return valid(I) ? Types[I] : -1;
}
API int32_t mlbridge_aot_arg_rank(int32_t I) {
  return valid(I) ? Ranks[I] : -1;
}
API const int64_t *mlbridge_aot_arg_shape(int32_t I) {
  return valid(I) ? Shapes[I] : nullptr;
}
API int32_t mlbridge_aot_num_results() { return 1; }
API const char *mlbridge_aot_result_name(int32_t I) {
  return I == 0 ? "total" : nullptr;
}
API int32_t mlbridge_aot_result_type(int32_t I) { return I == 0 ? 8 : -1; }
API int32_t mlbridge_aot_result_rank(int32_t I) { return I == 0 ? 1 : -1; }
API const int64_t *mlbridge_aot_result_shape(int32_t I) {
  return I == 0 ? TotalShape : nullptr;
}
API mlbridge_aot_instance *mlbridge_aot_create() {
  auto *P = static_cast<mlbridge_aot_instance *>(
      calloc(1, sizeof(mlbridge_aot_instance)));
  if (P)
    P->Data[0] = &P->Count;
  return P;
}
API void mlbridge_aot_destroy(mlbridge_aot_instance *P) { free(P); }
API void *mlbridge_aot_arg_data(mlbridge_aot_instance *P, int32_t I) {
  return P && I == 0 ? &P->Count : nullptr;
}
API const void *mlbridge_aot_result_data(mlbridge_aot_instance *P, int32_t I) {
  return P && I == 0 ? &P->Total : nullptr;
}
#ifndef NO_SET_ARG_DATA
API int32_t mlbridge_aot_set_arg_data(mlbridge_aot_instance *P, int32_t I,
                                      const void *Data) {
  if (!P || !valid(I))
    return 1;
  P->Data[I] = Data ? Data : (I == 0 ? &P->Count : nullptr);
  return 0;
}
#endif
API int32_t mlbridge_aot_set_arg_rows(mlbridge_aot_instance *P, int32_t I,
                                      int64_t Rows) {
  if (!P || !valid(I) || !Width[I] || Rows < 0)
    return 1;
  P->Rows[I] = Rows;
  return 0;
}
API const char *mlbridge_aot_error_message(mlbridge_aot_instance *P) {
  return P && P->Status ? "values and weights have different rows" : "no error";
}
API int32_t mlbridge_aot_run(mlbridge_aot_instance *P) {
  if (P->Rows[1] != P->Rows[2])
    return P->Status = 1;
  P->Status = 0;
  float Total = static_cast<float>(*static_cast<const int64_t *>(P->Data[0]));
  const float *Values = static_cast<const float *>(P->Data[1]);
  const float *Weights = static_cast<const float *>(P->Data[2]);
  for (int64_t R = 0; R < P->Rows[1]; ++R)
    Total += Values[2 * R] + Values[2 * R + 1] + Weights[R];
  P->Total = Total;
  return 0;
}
