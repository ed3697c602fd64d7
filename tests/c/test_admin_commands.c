/* Tests for admin_commands.c: the list handlers may not send is the real
 * server's @admin category (ACL CAT admin) plus luastream's additions. */
#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "admin_commands.h"
#include "redis_server.h"
#include "task.h"

static const char *const additions[] = {
    "flushall", "flushdb",      "swapdb",         "restore",         "restore-asking",
    "migrate",  "script|flush", "function|flush", "function|delete", "function|restore",
    NULL};

static bool in_list(const char *const *list, const char *name) {
  for (; *list; list++)
    if (strcmp(*list, name) == 0) return true;
  return false;
}

TEST_IMPL(admin_commands_are_the_servers) {
  struct redis_server s = {0};
  ASSERT_OK(redis_server_start(&s, NULL));
  redisContext *c = redisConnect("127.0.0.1", s.port);
  ASSERT(c != NULL && c->err == 0);
  redisReply *r = redisCommand(c, "ACL CAT admin");
  ASSERT(r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements > 0);
  const char *server[256];
  ASSERT(r->elements < 256);
  for (size_t i = 0; i < r->elements; i++) server[i] = r->element[i]->str;
  server[r->elements] = NULL;
  char missing[4096] = "", extra[4096] = "";
  for (size_t i = 0; server[i]; i++)
    if (!in_list(admin_commands, server[i]))
      snprintf(missing + strlen(missing), sizeof missing - strlen(missing), " %s", server[i]);
  for (size_t i = 0; admin_commands[i]; i++)
    if (!in_list(server, admin_commands[i]) && !in_list(additions, admin_commands[i]))
      snprintf(extra + strlen(extra), sizeof extra - strlen(extra), " %s", admin_commands[i]);
  if (missing[0]) TEST_FAIL_("the server's @admin commands not refused:%s", missing);
  if (extra[0]) TEST_FAIL_("refused, neither @admin nor an addition:%s", extra);
  size_t n = 0;
  while (admin_commands[n]) n++;
  ASSERT_INT_EQ(n - admin_commands_acl, sizeof additions / sizeof additions[0] - 1);
  freeReplyObject(r);
  redisFree(c);
  redis_server_stop(&s);
}

TEST_IMPL(admin_commands_match) {
  ASSERT_STR_EQ(admin_command("FLUSHALL", 8, NULL, 0), "flushall");
  ASSERT_STR_EQ(admin_command("config", 6, "SET", 3), "config|set");
  ASSERT_STR_EQ(admin_command("Debug", 5, "sleep", 5), "debug");
  ASSERT_STR_EQ(admin_command("SCRIPT", 6, "flush", 5), "script|flush");
  ASSERT_NULL(admin_command("SCRIPT", 6, "LOAD", 4));
  ASSERT_NULL(admin_command("CONFIG", 6, NULL, 0));
  ASSERT_NULL(admin_command("ACL", 3, "WHOAMI", 6));
  ASSERT_NULL(admin_command("CLUSTER", 7, "SLOTS", 5));
  ASSERT_NULL(admin_command("FLUSHALLX", 9, NULL, 0));
  ASSERT_NULL(admin_command("GET", 3, "k", 1));
}
