-- latency_payment: bench/latency's handler. The ack handler of
-- bench/handlers/ack_payment.lua, plus one line per payment in
-- $BENCH_LATENCY_OUT: the payment's number and when the handler got it
-- (microseconds on CLOCK_MONOTONIC, the clock bench/loadgen stamps with).
local ls = require "luastream"
local ffi = require "ffi"

ffi.cdef [[
typedef struct { long tv_sec; long tv_nsec; } bench_timespec;
int clock_gettime(int clock, bench_timespec *ts);
]]
local CLOCK_MONOTONIC = 1
local now = ffi.new("bench_timespec")
local out = assert(io.open(assert(os.getenv("BENCH_LATENCY_OUT"), "BENCH_LATENCY_OUT"), "w"))
out:setvbuf("full", 1048576)
local last = tonumber(os.getenv("BENCH_COUNT") or "0")

local total = 0

return {
  stream = os.getenv("BENCH_STREAM") or "bench",
  group = os.getenv("BENCH_GROUP") or "bench",
  batch = tonumber(os.getenv("BENCH_BATCH") or "100"),
  handle = function(payment)
    ffi.C.clock_gettime(CLOCK_MONOTONIC, now)
    total = total + payment.amount_cents
    out:write(payment.id, " ", tonumber(now.tv_sec) * 1000000 + math.floor(tonumber(now.tv_nsec) / 1000), "\n")
    if payment.id == last then out:flush() end
    return ls.ack()
  end,
}
