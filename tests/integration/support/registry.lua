-- registry: what the integration helper started and must clean up: hosts,
-- processes (MONITOR), redis-servers and temp folders. helper.cleanup() empties
-- it; the tables are cleared in place, so every support module sees the same ones.
local registry = { hosts = {}, servers = {}, procs = {}, dirs = {} }

--- Forgets everything (after it has been stopped and removed).
function registry.reset()
  for _, k in ipairs { "hosts", "servers", "procs", "dirs" } do
    for i = #registry[k], 1, -1 do registry[k][i] = nil end
  end
end

return registry
