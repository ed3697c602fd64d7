/* Tests for reply_arena.c: a hiredis reader with the arena's functions, fed
 * RESP bytes directly, builds the same trees as hiredis' own; freeing a
 * reply empties the arena and the next reply reuses its memory; replies
 * larger than the block, protocol errors and a reader freed with a half-read
 * reply leave nothing behind (ASan). */
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reply_arena.h"
#include "task.h"

struct reader {
  redisReader *r;
  struct reply_arena *a;
};

static struct reader reader_new(void) {
  struct reader rd = {redisReaderCreate(), reply_arena_new()};
  ASSERT_NOT_NULL(rd.r);
  ASSERT_NOT_NULL(rd.a);
  reply_arena_attach(rd.a, rd.r);
  return rd;
}

static void reader_free(struct reader *rd) {
  redisReaderFree(rd->r); /* frees a half-read reply through the arena */
  reply_arena_free(rd->a);
}

/* Feeds bytes and returns the reply they complete (NULL: not complete yet). */
static redisReply *feed(struct reader *rd, const char *bytes, size_t len) {
  ASSERT_INT_EQ(redisReaderFeed(rd->r, bytes, len), REDIS_OK);
  void *reply = NULL;
  ASSERT_INT_EQ(redisReaderGetReply(rd->r, &reply), REDIS_OK);
  return reply;
}

#define FEED(rd, lit) feed((rd), (lit), sizeof(lit) - 1)

/* What hiredis does with a reply once its callback has returned. */
static void release(struct reader *rd, redisReply *reply) { rd->r->fn->freeObject(reply); }

TEST_IMPL(reply_arena_builds_hiredis_trees) {
  struct reader rd = reader_new();
  /* An XREADGROUP-shaped reply: [[stream, [[id, [f, v]]]]], a nil and an integer. */
  redisReply *r = FEED(&rd,
                       "*3\r\n*2\r\n$8\r\npayments\r\n*1\r\n*2\r\n$3\r\n1-1\r\n*2\r\n$4\r\ndata\r\n"
                       "$2\r\n{}\r\n$-1\r\n:42\r\n");
  ASSERT_NOT_NULL(r);
  ASSERT_INT_EQ(r->type, REDIS_REPLY_ARRAY);
  ASSERT_INT_EQ(r->elements, 3);
  redisReply *stream = r->element[0];
  ASSERT_INT_EQ(stream->elements, 2);
  ASSERT_STR_EQ(stream->element[0]->str, "payments");
  redisReply *entry = stream->element[1]->element[0];
  ASSERT_STR_EQ(entry->element[0]->str, "1-1");
  ASSERT_INT_EQ(entry->element[1]->elements, 2);
  ASSERT_STR_EQ(entry->element[1]->element[0]->str, "data");
  ASSERT_INT_EQ(entry->element[1]->element[1]->len, 2);
  ASSERT_STR_EQ(entry->element[1]->element[1]->str, "{}");
  ASSERT_INT_EQ(r->element[1]->type, REDIS_REPLY_NIL);
  ASSERT_INT_EQ(r->element[2]->type, REDIS_REPLY_INTEGER);
  ASSERT_INT_EQ(r->element[2]->integer, 42);
  release(&rd, r);

  r = FEED(&rd, "-NOGROUP No such key\r\n");
  ASSERT_INT_EQ(r->type, REDIS_REPLY_ERROR);
  ASSERT_STR_EQ(r->str, "NOGROUP No such key");
  release(&rd, r);
  r = FEED(&rd, "+OK\r\n");
  ASSERT_INT_EQ(r->type, REDIS_REPLY_STATUS);
  ASSERT_STR_EQ(r->str, "OK");
  release(&rd, r);
  r = FEED(&rd, "*0\r\n");
  ASSERT_INT_EQ(r->type, REDIS_REPLY_ARRAY);
  ASSERT_INT_EQ(r->elements, 0);
  release(&rd, r);
  reader_free(&rd);
  LEAK_CHECK();
}

TEST_IMPL(reply_arena_reuses_its_block) {
  struct reader rd = reader_new();
  redisReader *plain = redisReaderCreate();
  ASSERT(rd.r->fn != plain->fn); /* the arena's functions, not hiredis' own */
  redisReaderFree(plain);
  redisReply *first = FEED(&rd, "*2\r\n$1\r\na\r\n$1\r\nb\r\n");
  release(&rd, first);
  for (int i = 0; i < 100; i++) {
    redisReply *r = FEED(&rd, "*2\r\n$1\r\nc\r\n$1\r\nd\r\n");
    ASSERT(r == first); /* the same bytes of the same block, reply after reply */
    ASSERT_STR_EQ(r->element[1]->str, "d");
    release(&rd, r);
  }
  reader_free(&rd);
  LEAK_CHECK();
}

TEST_IMPL(reply_arena_larger_than_its_block) {
  struct reader rd = reader_new();
  /* 2,000 strings of 100 bytes: far more than the first block. */
  size_t n = 2000, cap = 16 + n * 120;
  char *resp = malloc(cap), value[101];
  ASSERT_NOT_NULL(resp);
  memset(value, 'x', 100);
  value[100] = '\0';
  size_t len = (size_t)snprintf(resp, cap, "*%zu\r\n", n);
  for (size_t i = 0; i < n; i++)
    len += (size_t)snprintf(resp + len, cap - len, "$100\r\n%s\r\n", value);
  for (int round = 0; round < 3; round++) { /* grown once, then reused */
    redisReply *r = feed(&rd, resp, len);
    ASSERT_NOT_NULL(r);
    ASSERT_INT_EQ(r->elements, n);
    for (size_t i = 0; i < n; i++) ASSERT_STR_EQ(r->element[i]->str, value);
    release(&rd, r);
  }
  free(resp);
  reader_free(&rd);
  LEAK_CHECK();
}

TEST_IMPL(reply_arena_half_read_and_protocol_errors) {
  struct reader rd = reader_new();
  /* Half a reply when the reader goes: freed with it. */
  ASSERT_NULL(FEED(&rd, "*3\r\n$3\r\nfoo\r\n:1\r\n"));
  reader_free(&rd);

  rd = reader_new();
  ASSERT_NULL(FEED(&rd, "*2\r\n$3\r\nfoo\r\n"));
  ASSERT_INT_EQ(redisReaderFeed(rd.r, "?bad\r\n", 6), REDIS_OK);
  void *reply = NULL;
  ASSERT_INT_EQ(redisReaderGetReply(rd.r, &reply), REDIS_ERR);
  ASSERT_NULL(reply);
  reader_free(&rd);
  LEAK_CHECK();
}
