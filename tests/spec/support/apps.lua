-- Harness apps a spec starts on the handler folders beside it, all stopped
-- after each test:
--
--   local apps = dofile(SPEC_DIR .. "/support/apps.lua")(SPEC_DIR .. "/fixtures")
--   local app = apps.start("folder", opts)     -- testing.app(fixtures/folder, opts)
--   after_each(apps.stop_all)
local testing = require "luastream.testing"

return function(fixtures)
  local apps, running = {}, {}

  -- Keeps an app made elsewhere, to be stopped with the others.
  function apps.keep(app)
    running[#running + 1] = app
    return app
  end

  function apps.start(folder, opts) return apps.keep(testing.app(fixtures .. "/" .. folder, opts)) end

  -- Stops every app kept, newest first.
  function apps.stop_all()
    local list = running
    running = {}
    for i = #list, 1, -1 do list[i]:stop() end
  end

  -- Publishes n messages to stream, {n = i} and the fields of msg each.
  function apps.publish_n(app, stream, n, msg)
    for i = 1, n do
      local m = { n = i }
      for k, v in pairs(msg or {}) do m[k] = v end
      app:publish(stream, m)
    end
  end

  -- The newest log record with message msg, or nil.
  function apps.last(app, msg)
    local recs = app:records(msg)
    return recs[#recs]
  end

  return apps
end
