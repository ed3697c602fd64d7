/* handler_dir: listing a handler directory; the split-group rule (see
 * handler_dir.h). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "handler_dir.h"
#include "partition.h"

static int by_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

int handler_dir_list(const char *dir, const struct trust *trust, bool allow_empty, char ***paths,
                     char *err, size_t errlen) {
  DIR *d = opendir(dir);
  if (d == NULL) {
    int gone = errno == ENOENT || errno == ENOTDIR;
    snprintf(err, errlen, "%s: cannot open handler directory: %s", dir, strerror(errno));
    return gone ? -2 : -1;
  }
  if (trust_check_dir(trust, dir, err, errlen) != 0) {
    closedir(d);
    return -3;
  }
  size_t n = 0, cap = 8;
  char **list = malloc(cap * sizeof *list);
  bool oom = list == NULL;
  struct dirent *de;
  while (!oom && (de = readdir(d)) != NULL) {
    size_t len = strlen(de->d_name);
    if (len <= 4 || strcmp(de->d_name + len - 4, ".lua") != 0) continue;
    if (de->d_name[0] == '_' || de->d_name[0] == '.') continue;
    if (n + 2 > cap) {
      char **grown = realloc(list, cap * 2 * sizeof *list);
      if (grown == NULL) {
        oom = true;
        break;
      }
      list = grown;
      cap *= 2;
    }
    size_t plen = strlen(dir) + len + 2;
    if ((list[n] = malloc(plen)) == NULL) {
      oom = true;
      break;
    }
    snprintf(list[n++], plen, "%s/%s", dir, de->d_name);
  }
  closedir(d);
  /* Out of memory fails the listing: a partial one would start the host
   * without some of its handlers. */
  if (list) list[n] = NULL;
  if (oom) {
    handler_dir_free(list);
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  qsort(list, n, sizeof *list, by_name);
  if (n == 0 && !allow_empty) {
    snprintf(err, errlen, "%s: no handler files (*.lua) in this directory", dir);
    handler_dir_free(list);
    return -1;
  }
  *paths = list;
  return (int)n;
}

void handler_dir_free(char **paths) {
  if (paths == NULL) return;
  for (char **p = paths; *p; p++) free(*p);
  free(paths);
}

/* A key both a and b read, into key; false when none. A partitioned spec
 * reads "<stream>:{p}" for each of its partitions (partition.h). */
static bool shared_key(const struct handler_spec *a, const struct handler_spec *b, char *key,
                       size_t len) {
  if (a->partitions > 0 && b->partitions <= 0) return shared_key(b, a, key, len);
  if (a->partitions <= 0 && b->partitions > 0) { /* one partition of b named as a plain stream? */
    for (int p = 0; p < b->partitions; p++)
      if (partition_key_into(b->stream, p, key, len) >= 0 && strcmp(key, a->stream) == 0)
        return true;
    return false;
  }
  if (strcmp(a->stream, b->stream) != 0) return false;
  snprintf(key, len, "%s", a->stream);
  if (a->partitions > 0) partition_key_into(a->stream, 0, key, len);
  return true;
}

bool handler_dir_split_group(const struct handler_spec *a, const struct handler_spec *b, char *why,
                             size_t len) {
  char key[1100];
  if (spec_scheduled(a) || spec_scheduled(b)) {
    /* Two files of one schedule would take each other's ticks. */
    if (!spec_scheduled(a) || !spec_scheduled(b) ||
        strcmp(spec_schedule_name(a), spec_schedule_name(b)) != 0)
      return false;
    snprintf(why, len,
             "%s and %s are both the schedule %s: each tick would run in one of them; give one "
             "a `name` of its own",
             a->path, b->path, spec_schedule_name(a));
    return true;
  }
  if (strcmp(a->group, b->group) != 0 || !shared_key(a, b, key, sizeof key)) return false;
  bool pair = (a->read == READ_NEW && b->read == READ_RECLAIM) ||
              (a->read == READ_RECLAIM && b->read == READ_NEW);
  if (pair) return false;
  snprintf(why, len,
           "%s and %s both read stream %s as group %s: they would split its entries between "
           "them; use one file per group, or the pair of one read = \"new\" file and one read = "
           "\"reclaim\" file (see docs/consumer-groups-and-crash-recovery.md)",
           a->path, b->path, key, a->group);
  return true;
}
