/* task.h: assertion macros for the C tests.
 *
 * Each macro evaluates its operands once and, on failure, prints both values
 * with file and line, then aborts the test (each test runs in its own process,
 * see runner.c). */
#ifndef LUASTREAM_TASK_H
#define LUASTREAM_TASK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* TEST_IMPL(name) { ... } defines a test and registers it with the runner. */
void task_register(const char *name, void (*fn)(void));
#define TEST_IMPL(name)                                            \
  static void test_##name(void);                                   \
  __attribute__((constructor)) static void register_##name(void) { \
    task_register(#name, test_##name);                             \
  }                                                                \
  static void test_##name(void)

/* A test that cannot run here (a program it needs is missing) exits with
 * this status after saying why: the runner and ctest count it as skipped. */
#define TEST_SKIP_STATUS 77
#define TEST_SKIP(...)            \
  do {                            \
    fprintf(stderr, "SKIP: ");    \
    fprintf(stderr, __VA_ARGS__); \
    fputc('\n', stderr);          \
    exit(TEST_SKIP_STATUS);       \
  } while (0)

#define TEST_FAIL_(...)                             \
  do {                                              \
    fprintf(stderr, "%s:%d: ", __FILE__, __LINE__); \
    fprintf(stderr, __VA_ARGS__);                   \
    fputc('\n', stderr);                            \
    exit(1);                                        \
  } while (0)

#define ASSERT(expr)                                        \
  do {                                                      \
    if (!(expr)) TEST_FAIL_("assertion failed: %s", #expr); \
  } while (0)

#define ASSERT_INT_EQ(a, b)                                             \
  do {                                                                  \
    long long a_ = (long long)(a), b_ = (long long)(b);                 \
    if (a_ != b_) TEST_FAIL_("%s == %s: %lld != %lld", #a, #b, a_, b_); \
  } while (0)

#define ASSERT_OK(a) ASSERT_INT_EQ(a, 0)

#define ASSERT_STR_EQ(a, b)                                                                     \
  do {                                                                                          \
    const char *a_ = (a), *b_ = (b);                                                            \
    if (a_ == NULL || b_ == NULL || strcmp(a_, b_) != 0)                                        \
      TEST_FAIL_("%s == %s: \"%s\" != \"%s\"", #a, #b, a_ ? a_ : "(null)", b_ ? b_ : "(null)"); \
  } while (0)

#define ASSERT_MEM_EQ(a, alen, b)                                                             \
  do {                                                                                        \
    const char *a_ = (a), *b_ = (b);                                                          \
    size_t alen_ = (alen);                                                                    \
    if (a_ == NULL || alen_ != strlen(b_) || memcmp(a_, b_, alen_) != 0)                      \
      TEST_FAIL_("%s == %s: \"%.*s\" != \"%s\"", #a, #b, (int)alen_, a_ ? a_ : "(null)", b_); \
  } while (0)

#define ASSERT_CONTAINS(hay, needle)                                                  \
  do {                                                                                \
    const char *h_ = (hay), *n_ = (needle);                                           \
    if (h_ == NULL || strstr(h_, n_) == NULL)                                         \
      TEST_FAIL_("%s does not contain \"%s\": \"%s\"", #hay, n_, h_ ? h_ : "(null)"); \
  } while (0)

/* LeakSanitizer checks every test process at exit (runner.c); LEAK_CHECK()
 * checks at that point of a test, before teardown that could hide a leak. */
#if defined(__SANITIZE_ADDRESS__)
#define TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TEST_ASAN 1
#endif
#endif
#if defined(TEST_ASAN)
#include <sanitizer/lsan_interface.h>
#define LEAK_CHECK() __lsan_do_leak_check()
#else
#define LEAK_CHECK() ((void)0)
#endif

#define ASSERT_NULL(a) ASSERT((a) == NULL)
#define ASSERT_NOT_NULL(a) ASSERT((a) != NULL)

#endif
