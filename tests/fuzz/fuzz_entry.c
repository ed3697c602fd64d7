/* fuzz_entry: an entry built from any id and fields (one per line; the
 * first byte picks the stream key): entry_get finds each name's last value,
 * and the headers luastream believes (original-id, delivery-count) are
 * read within their bounds. */
#include "entry.h"
#include "fuzz.h"

#define MAX_WORDS 65

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  int n;
  size_t *len;
  char **word = fuzz_split(data + 1, size - 1, MAX_WORDS, &n, &len);
  size_t nfields = n > 1 ? (size_t)(n - 1) : 0;
  struct entry *e = entry_new(word[0], len[0], nfields, (const char *const *)word + 1, len + 1);
  FUZZ_CHECK((e == NULL) == (nfields % 2 != 0), "entry_new with %zu fields", nfields);
  if (e) {
    e->key = data[0] & 1;
    FUZZ_CHECK(e->nfields == nfields && memcmp(e->id, word[0], len[0]) == 0, "copy");
    for (size_t i = 0; i < nfields; i += 2) {
      if (memchr(word[1 + i], '\0', len[1 + i])) continue; /* entry_get takes a C string */
      size_t vlen;
      const char *v = entry_get(e, word[1 + i], &vlen);
      size_t last = i;
      for (size_t j = i + 2; j < nfields; j += 2)
        if (len[1 + j] == len[1 + i] && memcmp(word[1 + j], word[1 + i], len[1 + i]) == 0) last = j;
      FUZZ_CHECK(v == e->field[last + 1] && vlen == len[1 + last + 1], "field %zu", i);
    }
    const char *src = entry_source_id(e);
    FUZZ_CHECK(src == e->id || e->key == ENTRY_KEY_RETRY, "original-id believed on key 0");
    long long d = entry_carried_deliveries(e);
    FUZZ_CHECK(d >= 0 && d <= 1000000000 && (d == 0 || e->key == ENTRY_KEY_RETRY), "%lld", d);
    entry_free(e);
  }
  entry_pool_trim();
  free(word[0]);
  free(word);
  free(len);
  return 0;
}
