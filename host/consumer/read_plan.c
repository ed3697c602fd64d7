/* read_plan: which read comes next and its arguments (see read_plan.h). */
#include <stdint.h>
#include <string.h>

#include "read_plan.h"
#include "scripts.h"

void plan_init(struct read_plan *p, const struct handler_spec *spec, const char *retry_key) {
  memset(p, 0, sizeof *p);
  p->spec = spec;
  p->retry_key = retry_key;
  plan_group_new(p);
  for (int k = 0; k < PLAN_NKEYS; k++) strcpy(p->own_cursor[k], "0-0");
}

void plan_set_spec(struct read_plan *p, const struct handler_spec *spec) { p->spec = spec; }

void plan_set_native_claim(struct read_plan *p, bool native) { p->native_claim = native; }

void plan_group_new(struct read_plan *p) {
  for (int k = 0; k < PLAN_NKEYS; k++) strcpy(p->cursor[k], "0-0");
  p->block_next = false;
}

void plan_recover_own(struct read_plan *p) {
  if (p->spec->read != READ_NEW) return;
  p->recover = true;
  for (int k = 0; k < PLAN_NKEYS; k++) strcpy(p->own_cursor[k], "0-0");
}

enum read_kind plan_next(const struct read_plan *p) {
  switch (p->spec->read) {
    case READ_CLAIMING:
      if (p->native_claim && !p->native_refused) return READ_CLAIM_NATIVE;
      return p->block_next ? READ_PLAIN : READ_CLAIM_SCRIPT;
    case READ_RECLAIM: return READ_RECLAIM_SCRIPT;
    case READ_NEW:
      if (p->recover) return READ_OWN;
      if (p->cut) return READ_FRESH;
      break;
  }
  return READ_PLAIN;
}

bool plan_is_script(enum read_kind kind) {
  return kind == READ_OWN || kind == READ_FRESH || kind == READ_CLAIM_SCRIPT ||
         kind == READ_RECLAIM_SCRIPT;
}

bool plan_replies_claimed(enum read_kind kind) {
  return plan_is_script(kind) && kind != READ_FRESH;
}

bool plan_reads_ahead(const struct read_plan *p, enum read_kind kind) {
  return (kind == READ_PLAIN || kind == READ_FRESH) && p->spec->read == READ_NEW;
}

void plan_too_large(struct read_plan *p) {
  p->cut = true;
  if (p->spec->read == READ_CLAIMING && p->native_claim) p->native_refused = true;
  p->block_next = false;
  plan_recover_own(p);
}

void plan_cut_seen(struct read_plan *p, enum read_kind kind, size_t ncut) {
  if (ncut == 0 && (kind == READ_FRESH || kind == READ_CLAIM_SCRIPT)) p->cut = false;
}

void plan_reply_limits(const struct read_plan *p, enum read_kind kind, long long count,
                       size_t *bulk_max, size_t *reply_max) {
  uint64_t entry = entry_max_size(p->spec->max_body);
  *bulk_max = entry > SIZE_MAX ? SIZE_MAX : (size_t)entry;
  *reply_max = 0;
  if (plan_is_script(kind)) return; /* their replies are cut already */
  /* Every key's count entries at twice the entry limit each: the reply's
   * objects (about 50 bytes per name or value) on top of the bytes. */
  uint64_t n = (uint64_t)(count > 0 ? count : 1) * PLAN_NKEYS * 2;
  *reply_max = entry > SIZE_MAX / n ? SIZE_MAX : (size_t)(entry * n);
}

bool plan_reads_new_only(const struct read_plan *p, enum read_kind kind) {
  return kind == READ_PLAIN && p->spec->read == READ_CLAIMING;
}

uint64_t plan_recovery_wait_ms(const struct read_plan *p) {
  uint64_t ms = (uint64_t)p->spec->min_idle_ms / 2;
  if (ms > PLAN_RECOVERY_WAIT_MAX_MS) ms = PLAN_RECOVERY_WAIT_MAX_MS;
  if (ms < PLAN_RECOVERY_WAIT_MIN_MS) ms = PLAN_RECOVERY_WAIT_MIN_MS;
  return ms;
}

uint64_t plan_read_wait_ms(const struct read_plan *p) {
  return p->spec->read == READ_NEW ? PLAN_BLOCK_MS : plan_recovery_wait_ms(p);
}

/* What every script read gets last: the limits past which it sends an entry
 * cut (entry.h). */
static void add_limits(struct bk_args *a, const struct handler_spec *spec) {
  bk_args_num(a, (long long)spec->max_body);
  bk_args_num(a, (long long)entry_max_size(spec->max_body));
  bk_args_num(a, ENTRY_CUT_KEEP);
  bk_args_num(a, ENTRY_CUT_PAIRS);
}

void plan_add_args(const struct read_plan *p, struct bk_args *a, enum read_kind kind,
                   long long count) {
  const struct handler_spec *spec = p->spec;
  if (plan_is_script(kind)) {
    bk_args_str(a, "EVAL");
    bk_args_str(a, kind == READ_OWN            ? SCRIPT_OWN
                   : kind == READ_FRESH        ? SCRIPT_READ
                   : kind == READ_CLAIM_SCRIPT ? SCRIPT_CLAIM
                                               : SCRIPT_RECLAIM);
    bk_args_str(a, "2");
    bk_args_str(a, spec->stream);
    bk_args_str(a, p->retry_key);
    bk_args_str(a, spec->group);
    bk_args_str(a, spec->consumer);
    if (kind == READ_FRESH) {
      bk_args_num(a, count);
      add_limits(a, spec);
      return;
    }
    if (kind != READ_OWN) bk_args_num(a, spec->min_idle_ms);
    bk_args_num(a, count);
    if (kind != READ_CLAIM_SCRIPT)
      for (int k = 0; k < PLAN_NKEYS; k++)
        bk_args_str(a, kind == READ_OWN ? p->own_cursor[k] : p->cursor[k]);
    add_limits(a, spec);
    return;
  }
  bk_args_str(a, "XREADGROUP");
  bk_args_str(a, "GROUP");
  bk_args_str(a, spec->group);
  bk_args_str(a, spec->consumer);
  bk_args_str(a, "COUNT");
  bk_args_num(a, count);
  bk_args_str(a, "BLOCK");
  /* Before 8.4 a blocked read does not wake when a pending entry turns
   * claimable; on 8.4 how soon it wakes is not documented: cap both. */
  bk_args_num(a, (long long)plan_read_wait_ms(p));
  if (kind == READ_CLAIM_NATIVE) {
    bk_args_str(a, "CLAIM");
    bk_args_num(a, spec->min_idle_ms);
  }
  /* Both keys in one read, COUNT per key: the stream and the retry stream. */
  bk_args_str(a, "STREAMS");
  bk_args_str(a, spec->stream);
  bk_args_str(a, p->retry_key);
  bk_args_str(a, ">");
  bk_args_str(a, ">");
}

bool plan_read_done(struct read_plan *p, enum read_kind kind, size_t count,
                    char cursor[PLAN_NKEYS][PLAN_ID_MAX]) {
  if (kind == READ_CLAIM_SCRIPT) p->block_next = count == 0;
  if (plan_reads_new_only(p, kind)) p->block_next = false;
  if (kind == READ_OWN) {
    bool moved = false;
    for (int k = 0; k < PLAN_NKEYS; k++) moved |= strcmp(cursor[k], p->own_cursor[k]) != 0;
    memcpy(p->own_cursor, cursor, sizeof p->own_cursor);
    if (!moved) p->recover = false; /* the own pending list is read: on to `>` */
  }
  if (kind == READ_RECLAIM_SCRIPT) {
    memcpy(p->cursor, cursor, sizeof p->cursor);
    /* A full pass of both keys found nothing claimable: wait instead of spinning. */
    return count == 0 && strcmp(cursor[PLAN_KEY_STREAM], "0-0") == 0 &&
           strcmp(cursor[PLAN_KEY_RETRY], "0-0") == 0;
  }
  return false;
}
