/* command_keys: key positions of Redis commands (see command_keys.h). */
#include "command_keys.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum shape {
  FIRST,          /* argv[1] (anything not in the table) */
  NONE,           /* no keys */
  SUB,            /* a subcommand, then the key: XINFO STREAM k, XGROUP CREATE k ... */
  ALL,            /* every argument: DEL, MGET, EXISTS, WATCH ... */
  ALL_BUT_LAST,   /* every argument but the timeout: BLPOP, BZPOPMIN ... */
  PAIRS,          /* key value pairs: MSET */
  TWO,            /* the first two arguments: RENAME, LMOVE, SMOVE ... */
  NUMKEYS_2,      /* numkeys at argv[2], keys after it: EVAL, FCALL */
  NUMKEYS_1,      /* numkeys at argv[1]: ZUNION, LMPOP ... */
  DEST_NUMKEYS_2, /* a destination key, then numkeys: ZUNIONSTORE */
  STREAMS,        /* after the STREAMS token, the first half: XREAD, XREADGROUP */
};

static const struct {
  const char *name;
  enum shape shape;
} TABLE[] = {
    {"PING", NONE},
    {"ECHO", NONE},
    {"INFO", NONE},
    {"TIME", NONE},
    {"SCRIPT", NONE},
    {"CLIENT", NONE},
    {"CLUSTER", NONE},
    {"COMMAND", NONE},
    {"CONFIG", NONE},
    {"DBSIZE", NONE},
    {"HELLO", NONE},
    {"AUTH", NONE},
    {"SELECT", NONE},
    {"ROLE", NONE},
    {"MULTI", NONE},
    {"EXEC", NONE},
    {"DISCARD", NONE},
    {"UNWATCH", NONE},
    {"PUBLISH", NONE},
    {"SPUBLISH", FIRST},
    {"FLUSHALL", NONE},
    {"FLUSHDB", NONE},
    {"RANDOMKEY", NONE},
    {"SCAN", NONE},
    {"KEYS", NONE},
    {"WAIT", NONE},
    {"ACL", NONE},
    {"SLOWLOG", NONE},
    {"LATENCY", NONE},
    {"FUNCTION", NONE},
    {"READONLY", NONE},
    {"READWRITE", NONE},
    {"ASKING", NONE},
    {"LASTSAVE", NONE},
    {"SENTINEL", NONE},
    {"MEMORY", SUB},
    {"OBJECT", SUB},
    {"XINFO", SUB},
    {"XGROUP", SUB},
    {"DEL", ALL},
    {"UNLINK", ALL},
    {"EXISTS", ALL},
    {"TOUCH", ALL},
    {"MGET", ALL},
    {"WATCH", ALL},
    {"SINTER", ALL},
    {"SUNION", ALL},
    {"SDIFF", ALL},
    {"SINTERSTORE", ALL},
    {"SUNIONSTORE", ALL},
    {"SDIFFSTORE", ALL},
    {"PFCOUNT", ALL},
    {"PFMERGE", ALL},
    {"BLPOP", ALL_BUT_LAST},
    {"BRPOP", ALL_BUT_LAST},
    {"BZPOPMIN", ALL_BUT_LAST},
    {"BZPOPMAX", ALL_BUT_LAST},
    {"MSET", PAIRS},
    {"MSETNX", PAIRS},
    {"RENAME", TWO},
    {"RENAMENX", TWO},
    {"SMOVE", TWO},
    {"LMOVE", TWO},
    {"BLMOVE", TWO},
    {"RPOPLPUSH", TWO},
    {"BRPOPLPUSH", TWO},
    {"COPY", TWO},
    {"EVAL", NUMKEYS_2},
    {"EVALSHA", NUMKEYS_2},
    {"EVAL_RO", NUMKEYS_2},
    {"EVALSHA_RO", NUMKEYS_2},
    {"FCALL", NUMKEYS_2},
    {"FCALL_RO", NUMKEYS_2},
    {"ZUNION", NUMKEYS_1},
    {"ZINTER", NUMKEYS_1},
    {"ZDIFF", NUMKEYS_1},
    {"LMPOP", NUMKEYS_1},
    {"ZMPOP", NUMKEYS_1},
    {"SINTERCARD", NUMKEYS_1},
    {"ZINTERCARD", NUMKEYS_1},
    {"BLMPOP", NUMKEYS_2},
    {"BZMPOP", NUMKEYS_2},
    {"ZUNIONSTORE", DEST_NUMKEYS_2},
    {"ZINTERSTORE", DEST_NUMKEYS_2},
    {"ZDIFFSTORE", DEST_NUMKEYS_2},
    {"XREAD", STREAMS},
    {"XREADGROUP", STREAMS},
};

static enum shape shape_of(const char *name, size_t len) {
  for (size_t i = 0; i < sizeof TABLE / sizeof TABLE[0]; i++)
    if (strlen(TABLE[i].name) == len && strncasecmp(TABLE[i].name, name, len) == 0)
      return TABLE[i].shape;
  return FIRST;
}

/* A non-negative count in argv[i], else -1. */
static long count_at(int argc, const char *const *argv, const size_t *argvlen, int i) {
  if (i >= argc || argvlen[i] == 0 || argvlen[i] > 9) return -1;
  long n = 0;
  for (size_t j = 0; j < argvlen[i]; j++) {
    if (argv[i][j] < '0' || argv[i][j] > '9') return -1;
    n = n * 10 + (argv[i][j] - '0');
  }
  return n;
}

/* Keys at from, from + step, ... before end. */
static int span(int from, int end, int step, int *keys, int max) {
  int n = 0;
  for (int i = from; i < end; i += step, n++)
    if (n < max) keys[n] = i;
  return n;
}

int command_keys(int argc, const char *const *argv, const size_t *argvlen, int *keys, int max) {
  if (argc < 1) return 0;
  long numkeys;
  switch (shape_of(argv[0], argvlen[0])) {
    case NONE: return 0;
    case FIRST: return span(1, argc < 2 ? 1 : 2, 1, keys, max);
    case SUB: return span(2, argc < 3 ? 2 : 3, 1, keys, max);
    case ALL: return span(1, argc, 1, keys, max);
    case ALL_BUT_LAST: return span(1, argc - 1, 1, keys, max);
    case PAIRS: return span(1, argc, 2, keys, max);
    case TWO: return span(1, argc < 3 ? argc : 3, 1, keys, max);
    case NUMKEYS_2:
      if ((numkeys = count_at(argc, argv, argvlen, 2)) < 0) return 0;
      return span(3, 3 + numkeys < argc ? 3 + (int)numkeys : argc, 1, keys, max);
    case NUMKEYS_1:
      if ((numkeys = count_at(argc, argv, argvlen, 1)) < 0) return 0;
      return span(2, 2 + numkeys < argc ? 2 + (int)numkeys : argc, 1, keys, max);
    case DEST_NUMKEYS_2: {
      int n = span(1, argc < 2 ? 1 : 2, 1, keys, max);
      if ((numkeys = count_at(argc, argv, argvlen, 2)) < 0) return n;
      int end = 3 + numkeys < argc ? 3 + (int)numkeys : argc;
      return n + span(3, end, 1, keys + (n < max ? n : max), max > n ? max - n : 0);
    }
    case STREAMS:
      /* after XREADGROUP's GROUP group consumer: a group named "streams" is no token */
      for (int i = argvlen[0] == 10 ? 4 : 1; i < argc; i++)
        if (argvlen[i] == 7 && strncasecmp(argv[i], "STREAMS", 7) == 0)
          return span(i + 1, i + 1 + (argc - i - 1) / 2, 1, keys, max);
      return 0;
  }
  return 0;
}
