-- luacheck configuration for ./dev lint (luacheck, Debian package lua-check):
-- the Lua library (lua/), the example handlers (handlers/), the server-side
-- Redis scripts (host/broker/scripts/), the tests (tests/) and the
-- benchmarks' handlers (bench/). Zero findings:
-- a new one is fixed, or suppressed where it is with a comment saying why.

-- Everything runs on LuaJIT (luajit2, Lua 5.1 with LuaJIT's bit, ffi, jit and
-- table.new/clear), with no globals of the host's: a handler and the library
-- reach luastream through require "luastream", so any other global a handler
-- sets or reads is a bug (an accidental global is shared by every message a
-- worker runs).
std = "luajit"

-- Lines are not limited: the long lines are test names, expected log and
-- error messages and handler sources in strings, which are easier to grep
-- for whole than split. Layout is the formatter's and .editorconfig's, not a
-- defect for the linter to report.
max_line_length = false

-- A method that does not use its implicit self (Cluster:slot_owners(n)) is
-- still called as a method, with the others of its object: not a finding.
self = false

-- busted specs: describe, it, before_each, finally, ... and busted's
-- assert/spy/stub/mock (assert.are.same, assert.has_error, ...).
files["tests/**/*_spec.lua"] = { std = "+busted" }

-- Scripts that Redis runs (EVAL): Lua 5.1 with the globals the server gives
-- a script, nothing of LuaJIT.
files["host/broker/scripts/*.lua"] = {
  std = "lua51",
  read_globals = { "KEYS", "ARGV", "redis", "cjson", "bit", "cmsgpack", "struct" },
}
