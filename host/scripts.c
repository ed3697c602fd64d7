/* scripts: the text of the server-side scripts described in scripts.h. */
#include "scripts.h"

const char SCRIPT_CLAIM[] =
    "local key, group, consumer = KEYS[1], ARGV[1], ARGV[2]\n"
    "local min_idle, count = tonumber(ARGV[3]), tonumber(ARGV[4])\n"
    "local out, deleted = {}, {}\n"
    /* XPENDING lists by id; look at more than COUNT to find the longest idle. */
    "local idle = redis.call('XPENDING', key, group, 'IDLE', min_idle, '-', '+', count * 10)\n"
    "if #idle > 0 then\n"
    "  for i, p in ipairs(idle) do p[5] = i end\n"
    "  table.sort(idle, function(a, b)\n"
    "    if a[3] ~= b[3] then return a[3] > b[3] end\n"
    "    return a[5] < b[5]\n"
    "  end)\n"
    "  local ids, info = {}, {}\n"
    "  for i = 1, math.min(count, #idle) do ids[i] = idle[i][1]; info[ids[i]] = idle[i] end\n"
    "  local claimed = redis.call('XCLAIM', key, group, consumer, min_idle, unpack(ids))\n"
    "  local got = {}\n"
    "  for _, e in ipairs(claimed) do\n"
    "    local p = info[e[1]]\n"
    "    got[e[1]] = true\n"
    "    out[#out + 1] = {e[1], e[2], p[3], p[4]}\n"
    "  end\n"
    /* XCLAIM drops ids no longer in the stream from the PEL without a word. */
    "  for _, id in ipairs(ids) do if not got[id] then deleted[#deleted + 1] = id end end\n"
    "end\n"
    "if #out < count then\n"
    "  local r = redis.call('XREADGROUP', 'GROUP', group, consumer, 'COUNT', count - #out,\n"
    "                       'STREAMS', key, '>')\n"
    "  if r then for _, e in ipairs(r[1][2]) do out[#out + 1] = {e[1], e[2], 0, 0} end end\n"
    "end\n"
    "return {'0-0', {{key, out}}, deleted}\n";

const char SCRIPT_RECLAIM[] =
    "local key, group, consumer = KEYS[1], ARGV[1], ARGV[2]\n"
    "local min_idle, cursor, count = tonumber(ARGV[3]), ARGV[4], tonumber(ARGV[5])\n"
    /* XAUTOCLAIM examines at most COUNT*10 entries from the cursor: their idle
     * times, read first, cover every entry it can claim. */
    "local before = {}\n"
    "for _, p in ipairs(redis.call('XPENDING', key, group, 'IDLE', min_idle, cursor, '+',\n"
    "                              count * 10)) do\n"
    "  before[p[1]] = p\n"
    "end\n"
    "local r = redis.call('XAUTOCLAIM', key, group, consumer, min_idle, cursor, 'COUNT', count)\n"
    "local out = {}\n"
    "for _, e in ipairs(r[2]) do\n"
    "  local p = before[e[1]]\n"
    "  out[#out + 1] = {e[1], e[2], p and p[3] or min_idle, p and p[4] + 1 or 1}\n"
    "end\n"
    "return {r[1], {{key, out}}, r[3]}\n";
