/* loop: ending a command's libuv loop (loop.h). */
#include "loop.h"

#include <uv.h>

static void close_walk(uv_handle_t *handle, void *arg) {
  (void)arg;
  if (!uv_is_closing(handle)) uv_close(handle, NULL);
}

int loop_finish(uv_loop_t *loop) {
  uv_run(loop, UV_RUN_DEFAULT);
  uv_walk(loop, close_walk, NULL);
  uv_run(loop, UV_RUN_DEFAULT);
  return uv_loop_close(loop);
}
