-- helper: what the integration specs need to drive the real luastream binary
-- against a real redis-server.
--
-- Everything here waits on conditions with deadlines (polling every ~20 ms),
-- never on fixed sleeps, and every process it starts is registered so that
-- helper.cleanup() (call it from after_each) stops it even when a spec fails.
-- Long-lived children (redis-server, hosts, MONITOR) are started under
-- `setpriv --pdeathsig KILL`, so they also die if busted itself is killed.
--
-- Load it from the repository root (busted runs there):
--   local helper = require "tests.integration.helper"
--
-- Redis access comes in two shapes:
--   srv:cli(...)   redis-cli's raw output, trimmed: a string ("PONG", "3", an id;
--                  arrays come one element per line). Good for scalars.
--   srv:call(...)  the reply decoded from `redis-cli --json` (RESP3): arrays are
--                  Lua arrays, maps (XINFO ...) are tables keyed by name, nil
--                  for a null reply; a Redis error returns nil, message.
-- plus shortcuts: srv:xlen, srv:xrange (entries as {id=, fields={}}),
-- srv:pending_ids, srv:group, srv:pipe (many commands through one redis-cli).
--
-- Host logs are logfmt lines; h:records(filter) returns them parsed (each
-- record has the fields plus _line, the raw text, and _pos, the byte offset just
-- past the line, comparable with h:mark()).
--
-- Environment: LUASTREAM_BIN (default build/luastream) is the binary under test;
-- LUASTREAM_KEEP_TMP=1 keeps the temp folders (logs, redis data) for a look.
-- LUASTREAM_REQUIRE_REDIS=1 turns the skip of a spec that needs redis-server
-- (when it is not installed) into a failure.
--
-- Pages in a browser: helper.browser_start() is a headless chromium driven
-- through chromedriver (support/webdriver.lua: b:get, b:wait_for, b:wait_text,
-- b:click, b:type, b:exec, b:screenshot, ...); it skips like redis_start when
-- chromium or chromedriver is not installed, and fails under
-- LUASTREAM_REQUIRE_REDIS.
--
-- The code lives by topic in tests/integration/support/: sys (FFI, time),
-- files, processes, ports, redis, postgres, logfmt, payments, hosts, http,
-- webdriver, and registry (what cleanup stops). This module gathers their
-- functions into one table.
local support = "tests.integration.support."
local files = require(support .. "files")
local processes = require(support .. "processes")
local redis = require(support .. "redis")
local registry = require(support .. "registry")

local helper = {}

-- What each topic module gives the specs.
local exports = {
  sys = { "now" },
  files = { "trim", "read_file", "write_file", "repo_root", "tmpdir", "handlers_dir", "line_of" },
  processes = { "spawn", "run", "wait_until", "proc_state" },
  ports = { "port_open", "free_port", "silent_server" },
  redis = { "redis_start", "require_server", "script_block", "resp" },
  postgres = { "postgres_start", "require_postgres" },
  logfmt = { "parse_logfmt", "parse_time" },
  payments = { "id_cmp", "payment", "account_of", "payment_commands", "payment_xadd" },
  hosts = { "bin", "luastream", "publish", "host_start", "assert_no_secret" },
  http = { "http", "http_get", "probe", "health_port" },
  webdriver = { "browser_start", "require_browser" },
}
for module, names in pairs(exports) do
  local m = require(support .. module)
  for _, name in ipairs(names) do
    helper[name] = assert(m[name], module .. " has no " .. name)
  end
end

-- ---- cleanup -------------------------------------------------------------

--[[ Stops every host, MONITOR and server started since the last cleanup and
removes the temp folders (kept with LUASTREAM_KEEP_TMP=1). Call it from
after_each. Errors after cleaning up everything if a host left a sanitizer
report or would not stop. ]]
function helper.cleanup()
  local errors = {}
  for _, h in ipairs(registry.hosts) do
    local ok, err = pcall(function()
      if h.proc:alive() then
        h.proc:kill("TERM")
        if not h.proc:wait(10) then
          h.proc:kill("KILL")
          h.proc:wait(5)
        end
      end
      h:_scan()
    end)
    if not ok then errors[#errors + 1] = tostring(err) end
  end
  for _, p in ipairs(registry.procs) do pcall(processes.Proc.terminate, p, 5) end
  for _, s in ipairs(registry.servers) do pcall(s.stop, s) end
  if os.getenv("LUASTREAM_KEEP_TMP") ~= "1" then
    for _, d in ipairs(registry.dirs) do
      os.execute("rm -rf " .. files.shell_quote(d))
    end
  end
  registry.reset()
  if #errors > 0 then error(table.concat(errors, "\n\n"), 0) end
end

-- Exposed for the helper's own spec.
helper._monitor_args = redis.monitor_args

return helper
