/* fuzz_traceparent: trace_id_of and trace_child on any header value: they
 * agree on what is valid, and a child is itself valid with the same trace
 * id and flags. */
#include "fuzz.h"
#include "trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *v = fuzz_copy(data, size);
  char id[TRACE_ID_LEN + 1], child[TRACEPARENT_LEN + 1], child_id[TRACE_ID_LEN + 1];
  bool valid = trace_id_of(v, size, id);
  FUZZ_CHECK(trace_child(v, size, child) == valid, "trace_id_of and trace_child disagree");
  if (valid) {
    FUZZ_CHECK(size == TRACEPARENT_LEN && strlen(id) == TRACE_ID_LEN, "id %s", id);
    FUZZ_CHECK(trace_id_of(child, strlen(child), child_id), "child %s not valid", child);
    FUZZ_CHECK(strcmp(id, child_id) == 0, "child %s changed the trace id %s", child, id);
    FUZZ_CHECK(memcmp(child + 53, v + 53, 2) == 0, "child %s changed the flags", child);
  }
  free(v);
  return 0;
}
