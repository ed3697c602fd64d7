-- sys: the C functions (LuaJIT FFI) and constants the integration helper
-- needs, monotonic time, a sleep, and loopback socket addresses.
local ffi = require "ffi"
local bit = require "bit"

local sys = {}

-- Anonymous typedefs only: busted reloads this module for every spec file, and
-- LuaJIT refuses to redefine a named struct but accepts these repeated.
for _, decl in ipairs {
  "typedef struct { long tv_sec; long tv_nsec; } ls_timespec;",
  "int clock_gettime(int clk, ls_timespec *ts);",
  "int poll(void *fds, unsigned long nfds, int timeout);",
  "int kill(int pid, int sig);",
  "int waitpid(int pid, int *status, int options);",
  "int getpid(void);",
  "int chmod(const char *path, unsigned int mode);",
  "unsigned int umask(unsigned int mask);",
  "int access(const char *path, int mode);",
  "char *mkdtemp(char *template);",
  "char *strerror(int errnum);",
  -- glibc's posix_spawn_file_actions_t is 80 bytes; leave it room.
  "typedef struct { uint64_t opaque[32]; } ls_spawn_actions;",
  "int posix_spawn_file_actions_init(ls_spawn_actions *fa);",
  "int posix_spawn_file_actions_destroy(ls_spawn_actions *fa);",
  "int posix_spawn_file_actions_addopen(ls_spawn_actions *fa, int fd, const char *path, int oflag, unsigned int mode);",
  "int posix_spawn_file_actions_adddup2(ls_spawn_actions *fa, int fd, int newfd);",
  "int posix_spawnp(int *pid, const char *file, const ls_spawn_actions *fa, const void *attr, char *const argv[], char *const envp[]);",
  "extern char **environ;",
  "typedef struct { uint16_t family; uint16_t port; uint32_t addr; uint8_t zero[8]; } ls_sockaddr_in;",
  "int socket(int domain, int type, int protocol);",
  "int setsockopt(int fd, int level, int name, const void *val, unsigned int len);",
  "int bind(int fd, const void *addr, unsigned int len);",
  "int connect(int fd, const void *addr, unsigned int len);",
  "int listen(int fd, int backlog);",
  "int accept(int fd, void *addr, void *len);",
  "int close(int fd);",
  "typedef struct { uint16_t family; uint16_t port; uint32_t flowinfo; uint8_t addr[16]; uint32_t scope; } ls_sockaddr_in6;",
  "typedef struct { int fd; short events; short revents; } ls_pollfd;",
  "long write(int fd, const void *buf, unsigned long n);",
  "long read(int fd, void *buf, unsigned long n);",
} do
  pcall(ffi.cdef, decl)
end
sys.C = ffi.C
local C = sys.C
-- Files and folders the specs make are the tester's alone (0644, 0755)
-- whatever umask the suite was started with: luastream refuses handler code
-- that other users can change.
C.umask(tonumber("022", 8))

sys.CLOCK_MONOTONIC = 1
sys.WNOHANG = 1
sys.O_RDONLY, sys.O_WRONLY, sys.O_CREAT, sys.O_TRUNC = 0, 1, 64, 512
sys.AF_INET, sys.AF_INET6, sys.SOCK_STREAM, sys.SOL_SOCKET, sys.SO_REUSEADDR = 2, 10, 1, 1, 2
sys.POLLIN = 1
sys.SIGNALS = { HUP = 1, INT = 2, QUIT = 3, KILL = 9, USR1 = 10, USR2 = 12, TERM = 15, CONT = 18, STOP = 19 }

sys.POLL_MS = 20


--- Monotonic time in seconds (fractional).
function sys.now()
  local ts = ffi.new("ls_timespec")
  C.clock_gettime(sys.CLOCK_MONOTONIC, ts)
  return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) / 1e9
end

function sys.pause(ms) C.poll(nil, 0, ms) end

-- The path of the executable `name` in the first folder of $PATH holding one, else nil.
function sys.on_path(name)
  for dir in (os.getenv("PATH") or ""):gmatch("[^:]+") do
    if C.access(dir .. "/" .. name, 1) == 0 then return dir .. "/" .. name end -- X_OK
  end
  return nil
end

-- ---- loopback addresses ----

function sys.htons(port) return bit.bor(bit.lshift(bit.band(port, 0xff), 8), bit.rshift(port, 8)) end

function sys.sockaddr(port)
  local sa = ffi.new("ls_sockaddr_in")
  sa.family = sys.AF_INET
  sa.port = sys.htons(port)
  sa.addr = 0x0100007f -- 127.0.0.1
  return sa
end

--[[ A program a spec needs is missing (why says which and how to install
it): the running spec is skipped, said on stderr and marked pending (busted's
skip), neither passed nor failed. With LUASTREAM_REQUIRE_REDIS set (./dev test,
where every test must run) it is an error instead, and outside busted too,
raised two calls above the require_... function that called this one (at the
spec's line when a helper such as redis_start called that function). ]]
function sys.skip_missing(why)
  local required = os.getenv("LUASTREAM_REQUIRE_REDIS")
  local core = package.loaded["busted.core"]
  if (required and required ~= "" and required ~= "0") or not core then
    error(why .. (core and " and LUASTREAM_REQUIRE_REDIS is set" or ""), 4)
  end
  io.stderr:write("SKIP: ", why, "\n")
  -- busted.core's pending() throws the object busted counts as a skip; a new
  -- instance shares the type with the one running the specs.
  core().pending(why)
end

return sys
