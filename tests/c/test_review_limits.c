/* Review of reply_limit on the new reader: a string over bulk_max must be
 * refused however it arrives (broker.h), also when the reader's buffer has
 * grown and one socket read takes the whole reply. */
#include <stdlib.h>
#include <string.h>

#include "broker.h"
#include "broker_fixture.h"

TEST_IMPL(review_reply_limit_holds_for_a_reply_read_at_once) {
  struct state st = {0};
  setup(no_args);
  broker *b = make_broker(srv.url);
  bk_conn *c = open_up(b, "limited", &st);
  size_t mid = 60000;
  char *body = malloc(mid);
  ASSERT_NOT_NULL(body);
  memset(body, 'x', mid);
  const char *set[] = {"SET", "mid", body};
  const size_t set_len[] = {3, 3, mid};
  struct call ok = {0};
  ASSERT_OK(bk_command(b, c, 3, set, set_len, on_call, &ok));
  WAIT(ok.calls, 1, 5000);
  free(body);
  /* Unlimited, the value grows the read buffer (kept: under 4 MB). */
  struct call warm = {0};
  ASSERT_OK(cmdv(b, c, on_call, &warm, "GET", "mid", NULL));
  WAIT(warm.calls, 1, 5000);
  ASSERT_INT_EQ(warm.type, BK_STRING);

  bk_conn_reply_limit(b, c, 4096, 0);
  struct call k = {0};
  ASSERT_OK(cmdv(b, c, on_call, &k, "GET", "mid", NULL));
  bk_flush(b, c);
  uv_sleep(200); /* the whole reply waits in the socket: one read takes it */
  WAIT(k.calls, 1, 5000);
  if (k.type != 0 || !bk_error_is_too_large(k.err))
    TEST_FAIL_("a %zu-byte string passed a 4096-byte bulk limit (type %d, err \"%s\")", mid, k.type,
               k.err);
  close_and_free(b, c);
  teardown();
}
