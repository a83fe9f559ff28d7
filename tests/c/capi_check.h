/* Helpers of the C API tests (plain C11): checks that stop the rank with the
 * library's message, and typed element access for every comm_dtype_t so that
 * each test computes its expected values itself. */
#ifndef COMM_TESTS_CAPI_CHECK_H
#define COMM_TESTS_CAPI_CHECK_H

#include <comm/comm.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern int g_rank; /* for messages */

/* A call that must succeed. */
#define CHECK_OK(call)                                                                                    \
  do {                                                                                                    \
    comm_status_t check_status_ = (call);                                                                 \
    if (check_status_ != COMM_OK) {                                                                       \
      fprintf(stderr, "rank %d: %s:%d: %s returned %s: %s\n", g_rank, __FILE__, __LINE__, #call,        \
              comm_status_name(check_status_), comm_last_error());                                        \
      exit(1);                                                                                            \
    }                                                                                                     \
  } while (0)

/* A condition that must hold. */
#define CHECK(cond, ...)                                                                                  \
  do {                                                                                                    \
    if (!(cond)) {                                                                                        \
      fprintf(stderr, "rank %d: %s:%d: check failed: %s: ", g_rank, __FILE__, __LINE__, #cond);          \
      fprintf(stderr, __VA_ARGS__);                                                                       \
      fprintf(stderr, "\n");                                                                              \
      exit(1);                                                                                            \
    }                                                                                                     \
  } while (0)

/* A call that must fail with `want` and a last-error message containing `needle`. */
#define CHECK_FAILS(call, want, needle)                                                                   \
  do {                                                                                                    \
    comm_status_t check_status_ = (call);                                                                 \
    CHECK(check_status_ == (want), "%s returned %s, expected %s (%s)", #call,                            \
          comm_status_name(check_status_), comm_status_name(want), comm_last_error());                   \
    CHECK(strstr(comm_last_error(), (needle)) != NULL, "%s: message '%s' does not mention '%s'", #call,  \
          comm_last_error(), (needle));                                                                   \
  } while (0)

static inline uint16_t capi_f32_to_bf16(float f) {
  uint32_t x;
  memcpy(&x, &f, sizeof x);
  return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16); /* round to nearest even */
}

static inline float capi_bf16_to_f32(uint16_t h) {
  uint32_t x = (uint32_t)h << 16;
  float f;
  memcpy(&f, &x, sizeof f);
  return f;
}

/* Normal numbers and zero only: the tests' values are small integers and their averages. */
static inline uint16_t capi_f32_to_f16(float f) {
  uint32_t x;
  memcpy(&x, &f, sizeof x);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
  int exp = (int)((x >> 23) & 0xffu) - 127 + 15;
  uint32_t mant = (x & 0x7fffffu) >> 13, rem = x & 0x1fffu;
  if (f == 0.0f || exp <= 0) return sign;
  if (rem > 0x1000u || (rem == 0x1000u && (mant & 1u))) ++mant;
  if (mant == 0x400u) {
    mant = 0;
    ++exp;
  }
  if (exp >= 31) return (uint16_t)(sign | 0x7c00u);
  return (uint16_t)(sign | ((uint32_t)exp << 10) | mant);
}

static inline float capi_f16_to_f32(uint16_t h) {
  int exp = (h >> 10) & 0x1f;
  float mag = exp == 0 ? ldexpf((float)(h & 0x3ff), -24) : ldexpf((float)(0x400 | (h & 0x3ff)), exp - 25);
  return (h & 0x8000) ? -mag : mag;
}

/* Element i of a buffer of `dtype`, as a double. */
static inline double capi_get(comm_dtype_t dtype, const void* buf, size_t i) {
  switch (dtype) {
    case COMM_F32: return ((const float*)buf)[i];
    case COMM_F64: return ((const double*)buf)[i];
    case COMM_F16: return capi_f16_to_f32(((const uint16_t*)buf)[i]);
    case COMM_BF16: return capi_bf16_to_f32(((const uint16_t*)buf)[i]);
    case COMM_I8: return ((const int8_t*)buf)[i];
    case COMM_U8: return ((const uint8_t*)buf)[i];
    case COMM_I32: return ((const int32_t*)buf)[i];
    case COMM_I64: return (double)((const int64_t*)buf)[i];
    case COMM_DTYPE_FORCE_INT32: break;
  }
  return NAN;
}

/* Stores v (rounded as the dtype does) as element i. */
static inline void capi_set(comm_dtype_t dtype, void* buf, size_t i, double v) {
  switch (dtype) {
    case COMM_F32: ((float*)buf)[i] = (float)v; return;
    case COMM_F64: ((double*)buf)[i] = v; return;
    case COMM_F16: ((uint16_t*)buf)[i] = capi_f32_to_f16((float)v); return;
    case COMM_BF16: ((uint16_t*)buf)[i] = capi_f32_to_bf16((float)v); return;
    case COMM_I8: ((int8_t*)buf)[i] = (int8_t)v; return;
    case COMM_U8: ((uint8_t*)buf)[i] = (uint8_t)v; return;
    case COMM_I32: ((int32_t*)buf)[i] = (int32_t)v; return;
    case COMM_I64: ((int64_t*)buf)[i] = (int64_t)v; return;
    case COMM_DTYPE_FORCE_INT32: return;
  }
}

/* v as the dtype represents it. */
static inline double capi_round(comm_dtype_t dtype, double v) {
  uint64_t slot = 0;
  capi_set(dtype, &slot, 0, v);
  return capi_get(dtype, &slot, 0);
}

static inline const char* capi_dtype_name(comm_dtype_t d) {
  static const char* const names[] = {"f32", "f64", "f16", "bf16", "i8", "u8", "i32", "i64"};
  return (unsigned)d < 8 ? names[d] : "?";
}

static inline int capi_is_float(comm_dtype_t d) {
  return d == COMM_F32 || d == COMM_F64 || d == COMM_F16 || d == COMM_BF16;
}

/* A zeroed buffer of n elements; never NULL (exits). */
static inline void* capi_alloc(comm_dtype_t dtype, size_t n) {
  void* p = calloc(n ? n : 1, comm_dtype_size(dtype));
  if (!p) {
    fprintf(stderr, "rank %d: out of memory\n", g_rank);
    exit(1);
  }
  return p;
}

#endif /* COMM_TESTS_CAPI_CHECK_H */
