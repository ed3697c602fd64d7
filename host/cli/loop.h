/* loop: ending a command's libuv loop, whatever handles are left on it. */
#ifndef LUASTREAM_LOOP_H
#define LUASTREAM_LOOP_H

struct uv_loop_s;

/* Runs loop until it has nothing left to do, closes every handle still
 * open, runs it once more for their close callbacks and closes it. Returns
 * uv_loop_close's result (0, or a libuv error when something still holds it). */
int loop_finish(struct uv_loop_s *loop);

#endif
