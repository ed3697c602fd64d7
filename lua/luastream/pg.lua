-- luastream.pg: ls.pg, PostgreSQL for handlers (docs/handlers.md, "Calling
-- PostgreSQL").
--
--   ls.pg.query(sql, ...) -> rows ({ {col = value}, ..., affected = n }) or nil, err, sqlstate
--   ls.pg.transaction(function(tx) ... tx:query(sql, ...) ... end) -> what fn returned,
--     or nil, err, sqlstate
--     tx:exec(sql, ...) -> true or nil, err, sqlstate: a statement whose result
--     fn does not need, sent with the next tx:query or the COMMIT (one round
--     trip fewer)
--   ctx:pg_once(function(tx) ... end) -> true, what fn returned | false (done before)
--     | nil, err, sqlstate
--
-- Parameters are $1..$n, sent apart from the SQL text (never spliced in).
-- err is "SQLSTATE: message (the query's first words)" and sqlstate its first
-- five characters ("23505"): the server's code, or PostgreSQL's for what
-- happened on the client's side (08001, 08006, 57014). A transaction whose
-- function returned nil, err[, sqlstate] of its own returns those. The
-- queries run on the host's pool (luastream.core's pg_*); the handler waits,
-- other lanes run.
local has_core, core = pcall(require, "luastream.core")
if not has_core then
  local function outside() error("only available inside a running luastream host", 3) end
  core = setmetatable({}, { __index = function() return outside end })
end

local M = {}

-- NULL in rows and parameters (nil works as a parameter too).
M.null = setmetatable({}, {
  __tostring = function() return "ls.pg.null" end,
  __newindex = function() error("ls.pg.null cannot be changed", 2) end,
  __metatable = false,
})
local NULL = M.null

-- In tail position of its callers, so level 2 of core.pg_query is the
-- handler's line.
local function run(name, on_session, sql, ...)
  if type(sql) ~= "string" then error(name .. ": sql must be a string, got " .. type(sql), 3) end
  core.pg_query(name, sql, on_session, NULL, ...)
  return core.pg_result(NULL)
end

function M.query(sql, ...)
  return run("ls.pg.query", false, sql, ...)
end

-- tx: the queries of one transaction, on its own connection.
local TX = {}
TX.__index = TX

function TX:query(sql, ...)
  if getmetatable(self) ~= TX then error("tx:query: call it with a colon (tx:query(sql, ...))", 2) end
  if self.over then error("tx:query: the transaction is over", 2) end
  self.sent = true -- the first statement sent carries the session's BEGIN
  local rows, err, state = run("tx:query", true, sql, ...)
  if not rows and not self.failed then self.failed = err end
  return rows, err, state
end

function TX:exec(sql, ...)
  if getmetatable(self) ~= TX then error("tx:exec: call it with a colon (tx:exec(sql, ...))", 2) end
  if self.over then error("tx:exec: the transaction is over", 2) end
  if type(sql) ~= "string" then error("tx:exec: sql must be a string, got " .. type(sql), 2) end
  self.deferred = true
  local ok, err, state = core.pg_defer("tx:exec", sql, nil, NULL, ...)
  if not ok and not self.failed then self.failed = err end
  return ok, err, state
end

local function pack(...) return { n = select("#", ...), ... } end

-- Ends the transaction, then the connection goes back. A COMMIT carries the
-- deferred statements; a rollback drops them, and sends ROLLBACK only when
-- something was sent (nothing sent: no transaction began).
local function finish(tx, commit)
  local rows, err, state = true, nil, nil
  if commit and tx.failed then
    rows, err, state = nil, "25P02: the transaction was rolled back: a statement in it failed (" .. tx.failed .. ")",
      "25P02"
    commit = false
  end
  if commit and (tx.sent or tx.deferred) then
    rows, err, state = run("tx:query", true, "COMMIT")
    -- a deferred statement failed (its error is the COMMIT's answer): the
    -- transaction is still open, aborted
    if not rows then run("tx:query", true, "ROLLBACK") end
  elseif not commit then
    core.pg_discard()
    if tx.sent then run("tx:query", true, "ROLLBACK") end
  end
  tx.over = true
  core.pg_end()
  return rows, err, state
end

local function transaction(name, fn)
  if type(fn) ~= "function" then error(name .. ": expects a function(tx), got " .. type(fn), 3) end
  core.pg_begin(name)
  local ok, err, state = core.pg_begun()
  if not ok then return nil, err, state end
  local tx = setmetatable({}, TX)
  local res = pack(pcall(fn, tx))
  if not res[1] then
    finish(tx, false)
    error(res[2], 0)
  end
  if res[2] == nil and res[3] ~= nil then
    finish(tx, false)
    return nil, res[3], res[4] -- fn's own nil, err[, sqlstate]
  end
  local done
  done, err, state = finish(tx, true)
  if not done then return nil, err, state end
  return unpack(res, 2, res.n)
end

function M.transaction(fn)
  return transaction("ls.pg.transaction", fn)
end

-- ctx:pg_once's table, looked for once per handler state and made when
-- missing (a user that may not create tables can use one made for it).
-- Entries made at once each try to make it, and all but one may fail with
-- a duplicate error from the server (23505, 42P07, 42710): the table is
-- then looked for again.
local table_ready = false
local DUPLICATE = { ["23505"] = true, ["42P07"] = true, ["42710"] = true }
local function table_present(name)
  local found, why, state = run("ctx:pg_once", false, "SELECT to_regclass($1) IS NOT NULL AS present", name)
  if not found then return nil, why, state end
  return found[1].present
end

local function once_table()
  local name = core.pg_once_table()
  if table_ready then return name end
  local present, why, why_state = table_present(name)
  if present == nil then return nil, why, why_state end
  if present then
    table_ready = true
    return name
  end
  local sql = "CREATE TABLE IF NOT EXISTS " .. name .. " (stream text NOT NULL, grp text NOT NULL, "
    .. "id text NOT NULL, done_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (stream, grp, id))"
  local ok, err, state = run("ctx:pg_once", false, sql)
  if not ok and DUPLICATE[state] then
    ok = table_present(name)
  end
  if not ok then return nil, err, state end
  table_ready = true
  return name
end

local SKIPPED = {}

-- fn(record(tx)) in one transaction named what: record makes the records
-- and returns fn's arguments (tx first), SKIPPED when there is nothing to
-- do (the transaction ends, false is returned) or nil and why. fn's own
-- nil, why ends it the same way; else true and what fn returned.
local function recorded(what, fn, record)
  local res = pack(transaction(what, function(tx)
    local args = pack(record(tx))
    if args[1] == SKIPPED then return SKIPPED end
    if args[1] == nil then return nil, args[2], args[3] end
    local out = pack(fn(unpack(args, 1, args.n)))
    if out[1] == nil and out[2] ~= nil then return nil, out[2], out[3] end
    return true, unpack(out, 1, out.n)
  end))
  if res[1] == nil then return nil, res[2], res[3] end
  if res[1] == SKIPPED then return false end
  return unpack(res, 1, res.n)
end
local once_name, once_insert -- the key's INSERT, made once per table name

-- ctx:pg_once(fn): fn(tx) in a transaction that first records the entry
-- (stream, group, id on the source stream); skipped when it already is.
function M.once(stream, group, id, fn)
  if type(fn) ~= "function" then error("ctx:pg_once: expects a function(tx), got " .. type(fn), 3) end
  local name, err, state = once_table()
  if not name then return nil, err, state end
  if name ~= once_name then
    once_name = name
    once_insert = "INSERT INTO " .. name .. " (stream, grp, id) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING"
  end
  local insert = once_insert
  return recorded("ctx:pg_once", fn, function(tx)
    local rows, why, why_state = tx:query(insert, stream, group, id)
    if not rows then return nil, why, why_state end
    if rows.affected == 0 then return SKIPPED end
    return tx
  end)
end

-- A text[] literal of ids (each quoted: a source id is a header's text on
-- a retry copy, whatever it holds).
local function text_array(ids)
  local quoted = {}
  for i, id in ipairs(ids) do quoted[i] = '"' .. id:gsub('[\\"]', "\\%0") .. '"' end
  return "{" .. table.concat(quoted, ",") .. "}"
end

local once_batch_name, once_batch_insert

-- ctx:pg_once_batch(entries, fn): fn(tx, fresh) in one transaction that
-- first records every entry (ids[i] the id of entries[i] on the source
-- stream) in one INSERT; fresh lists the entries whose record it made (the
-- first of two with one id), in order. Nothing fresh: false, fn not called.
function M.once_batch(stream, group, entries, ids, fn)
  if type(fn) ~= "function" then
    error("ctx:pg_once_batch: expects a function(tx, fresh), got " .. type(fn), 3)
  end
  if #ids == 0 then return false end
  local name, err, state = once_table()
  if not name then return nil, err, state end
  if name ~= once_batch_name then
    once_batch_name = name
    once_batch_insert = "INSERT INTO " .. name .. " (stream, grp, id) SELECT $1, $2, unnest($3::text[]) "
      .. "ON CONFLICT DO NOTHING RETURNING id"
  end
  local insert = once_batch_insert
  return recorded("ctx:pg_once_batch", fn, function(tx)
    local rows, why, why_state = tx:query(insert, stream, group, text_array(ids))
    if not rows then return nil, why, why_state end
    if #rows == 0 then return SKIPPED end
    local made = {}
    for _, row in ipairs(rows) do made[row.id] = true end
    local fresh = {}
    for i, e in ipairs(entries) do
      if made[ids[i]] then
        fresh[#fresh + 1] = e
        made[ids[i]] = nil -- a second entry of the same id is not fresh
      end
    end
    return tx, fresh
  end)
end

return M
