/* Tests for vclock.c, the virtual clock: timers fire only when time is moved,
 * in (due, arming order) order, each at its own due time; timers armed by
 * callbacks fire inside the same advance; settle runs 0-ms chains and stops a
 * runaway one; stop, re-arm and free from inside the own callback; a host's
 * view of the clock, stalled while the others run. */
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock_virtual.h"
#include "clock.h"
#include "task.h"

static lclock *clk;
static char order[64];  /* one letter per firing */
static uint64_t at[64]; /* now_ms at each firing */
static int nfired;

static void record(ltimer *t, void *data) {
  (void)t;
  order[nfired] = *(const char *)data;
  at[nfired++] = clock_now(clk);
}

TEST_IMPL(vclock_fires_in_due_then_arming_order) {
  clk = clock_virtual_new(1700000000000ULL);
  ASSERT_NOT_NULL(clk);
  static const char a = 'a', b = 'b', c = 'c', d = 'd';
  ltimer *ta = timer_new(clk, record, (void *)&a), *tb = timer_new(clk, record, (void *)&b);
  ltimer *tc = timer_new(clk, record, (void *)&c), *td = timer_new(clk, record, (void *)&d);
  timer_start(ta, 30);
  timer_start(tb, 10);
  timer_start(tc, 20);
  timer_start(td, 10); /* same due as b, armed later: fires after b */
  ASSERT_INT_EQ(clock_now(clk), 0);
  clock_virtual_settle(clk);
  ASSERT_INT_EQ(nfired, 0); /* time stands still */
  ASSERT_INT_EQ(clock_virtual_advance(clk, 25), 25);
  ASSERT_INT_EQ(nfired, 3);
  ASSERT_STR_EQ(order, "bdc");
  ASSERT_INT_EQ(at[0], 10);
  ASSERT_INT_EQ(at[1], 10);
  ASSERT_INT_EQ(at[2], 20);
  ASSERT_INT_EQ(clock_now(clk), 25);
  ASSERT_INT_EQ(clock_wall(clk), 1700000000025ULL);
  clock_virtual_advance(clk, 5);
  ASSERT_STR_EQ(order, "bdca");
  ASSERT_INT_EQ(at[3], 30);
  timer_free(ta);
  timer_free(tb);
  timer_free(tc);
  timer_free(td);
  clk->ops->free(clk);
}

static ltimer *chained;

static void arm_next(ltimer *t, void *data) {
  (void)t;
  record(t, data);
  timer_start(chained, 5); /* due inside the same advance window */
}

TEST_IMPL(vclock_timers_armed_by_callbacks_fire_in_the_window) {
  clk = clock_virtual_new(0);
  static const char a = 'a', b = 'b', c = 'c';
  ltimer *ta = timer_new(clk, arm_next, (void *)&a);
  ltimer *tc = timer_new(clk, record, (void *)&c);
  chained = timer_new(clk, record, (void *)&b);
  timer_start(ta, 10);
  timer_start(tc, 17);
  clock_virtual_advance(clk, 16);
  ASSERT_STR_EQ(order, "ab"); /* b at 15, before c at 17 */
  ASSERT_INT_EQ(at[1], 15);
  clock_virtual_advance(clk, 1);
  ASSERT_STR_EQ(order, "abc");
  ASSERT_INT_EQ(at[2], 17);
  timer_free(ta);
  timer_free(tc);
  timer_free(chained);
  clk->ops->free(clk);
}

static int zero_left;

static void zero_chain(ltimer *t, void *data) {
  record(t, data);
  if (--zero_left > 0) timer_start(t, 0);
}

TEST_IMPL(vclock_settle_runs_zero_ms_chains_only) {
  clk = clock_virtual_new(0);
  static const char z = 'z', l = 'l';
  ltimer *tz = timer_new(clk, zero_chain, (void *)&z), *tl = timer_new(clk, record, (void *)&l);
  clock_virtual_advance(clk, 100);
  zero_left = 3;
  timer_start(tz, 0);
  timer_start(tl, 1);
  clock_virtual_settle(clk);
  ASSERT_STR_EQ(order, "zzz");
  ASSERT_INT_EQ(clock_now(clk), 100);
  clock_virtual_advance(clk, 1);
  ASSERT_STR_EQ(order, "zzzl");
  timer_free(tz);
  timer_free(tl);
  clk->ops->free(clk);
}

static void rearm_forever(ltimer *t, void *data) {
  (void)data;
  timer_start(t, 0);
}

TEST_IMPL(vclock_settle_aborts_a_zero_ms_loop) {
  fflush(stderr);
  pid_t pid = fork();
  ASSERT(pid >= 0);
  if (pid == 0) {
    close(2); /* the abort message is expected */
    clk = clock_virtual_new(0);
    ltimer *t = timer_new(clk, rearm_forever, NULL);
    timer_start(t, 0);
    clock_virtual_settle(clk);
    _exit(0); /* not reached */
  }
  int status;
  ASSERT_INT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT(WIFSIGNALED(status));
  ASSERT_INT_EQ(WTERMSIG(status), SIGABRT);
}

static void free_self(ltimer *t, void *data) {
  record(t, data);
  timer_free(t); /* memory goes after the callback returns */
}

TEST_IMPL(vclock_stop_restart_and_free_inside_callback) {
  clk = clock_virtual_new(0);
  static const char f = 'f', s = 's', r = 'r';
  ltimer *tf = timer_new(clk, free_self, (void *)&f);
  ltimer *ts = timer_new(clk, record, (void *)&s);
  ltimer *tr = timer_new(clk, record, (void *)&r);
  timer_start(tf, 5);
  timer_start(ts, 5);
  timer_stop(ts);
  timer_stop(ts); /* idempotent */
  timer_start(tr, 1);
  timer_start(tr, 8); /* re-arming moves it */
  clock_virtual_advance(clk, 10);
  ASSERT_STR_EQ(order, "fr");
  ASSERT_INT_EQ(at[1], 8);
  timer_free(ts);
  timer_free(tr);
  clk->ops->free(clk); /* LeakSanitizer: f's memory was released */
}

TEST_IMPL(vclock_jump_fires_nothing_then_late_in_order) {
  clk = clock_virtual_new(1700000000000ULL);
  ASSERT_NOT_NULL(clk);
  nfired = 0;
  memset(order, 0, sizeof order);
  static const char a = 'a', b = 'b';
  ltimer *ta = timer_new(clk, record, (void *)&a), *tb = timer_new(clk, record, (void *)&b);
  timer_start(ta, 5000);
  timer_start(tb, 1000);
  clock_virtual_jump(clk, 20000); /* the process stopped: nothing runs */
  ASSERT_INT_EQ(nfired, 0);
  ASSERT_INT_EQ(clock_now(clk), 20000);
  ASSERT_INT_EQ(clock_fresh(clk), 20000);
  clock_virtual_settle(clk); /* resumed: both late, in due order, at the new now */
  ASSERT_INT_EQ(nfired, 2);
  ASSERT_STR_EQ(order, "ba");
  ASSERT_INT_EQ(at[0], 20000);
  ASSERT_INT_EQ(at[1], 20000);
  timer_free(ta);
  timer_free(tb);
  clk->ops->free(clk);
}

/* A view (one host of several on the clock): the same time; while it is
 * stalled its timers that fall due wait and the others fire; once it
 * resumes they fire at the next settle, in the order they fell due; a late
 * timer stopped or freed meanwhile never fires; views go with the clock. */
TEST_IMPL(vclock_view_stalls_its_own_timers_only) {
  clk = clock_virtual_new(1700000000000ULL);
  ASSERT_NOT_NULL(clk);
  nfired = 0;
  memset(order, 0, sizeof order);
  lclock *host = clock_virtual_view(clk);
  ASSERT_NOT_NULL(host);
  static const char a = 'a', b = 'b', c = 'c', o = 'o', x = 'x';
  ltimer *ta = timer_new(host, record, (void *)&a), *tb = timer_new(host, record, (void *)&b);
  ltimer *tc = timer_new(host, record, (void *)&c), *tx = timer_new(host, record, (void *)&x);
  ltimer *to = timer_new(clk, record, (void *)&o);
  timer_start(ta, 3000);
  timer_start(tb, 1000);
  timer_start(tc, 10);
  timer_start(tx, 2000);
  timer_start(to, 1500);
  clock_virtual_advance(clk, 100);
  ASSERT_STR_EQ(order, "c"); /* a view's timer fires as any other */
  ASSERT_INT_EQ(clock_now(host), 100);
  clock_virtual_stall(host, true);
  clock_virtual_advance(clk, 4900);
  ASSERT_STR_EQ(order, "co"); /* only the other host's */
  ASSERT_INT_EQ(clock_now(host), 5000);
  timer_stop(tx); /* fell due at 2000, stopped while late */
  clock_virtual_stall(host, false);
  ASSERT_INT_EQ(nfired, 2); /* at the next settle */
  clock_virtual_settle(clk);
  ASSERT_STR_EQ(order, "coba");
  ASSERT_INT_EQ(at[2], 5000);
  ASSERT_INT_EQ(at[3], 5000);
  timer_start(ta, 10); /* and on as before */
  clock_virtual_advance(clk, 10);
  ASSERT_STR_EQ(order, "cobaa");
  clock_virtual_stall(host, true);
  timer_start(tb, 10);
  clock_virtual_advance(clk, 10);
  timer_free(tb); /* late, freed: never fires */
  clock_virtual_stall(host, false);
  clock_virtual_settle(clk);
  ASSERT_STR_EQ(order, "cobaa");
  host->ops->free(host); /* nothing: the clock frees it */
  timer_free(ta);
  timer_free(tc);
  timer_free(tx);
  timer_free(to);
  clk->ops->free(clk);
}
