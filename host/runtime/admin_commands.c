/* admin_commands: the server's administration (see admin_commands.h). */
#include "admin_commands.h"

#include <string.h>
#include <strings.h>

const char *const admin_commands[] = {
    /* ACL CAT admin, Redis 7.0.15 */
    "acl|deluser", "acl|dryrun", "acl|getuser", "acl|list", "acl|load", "acl|log", "acl|save",
    "acl|setuser", "acl|users", "bgrewriteaof", "bgsave", "client|kill", "client|list",
    "client|no-evict", "client|pause", "client|unblock", "client|unpause", "cluster|addslots",
    "cluster|addslotsrange", "cluster|bumpepoch", "cluster|count-failure-reports",
    "cluster|delslots", "cluster|delslotsrange", "cluster|failover", "cluster|flushslots",
    "cluster|forget", "cluster|meet", "cluster|replicas", "cluster|replicate", "cluster|reset",
    "cluster|saveconfig", "cluster|set-config-epoch", "cluster|setslot", "cluster|slaves",
    "config|get", "config|resetstat", "config|rewrite", "config|set", "debug", "failover",
    "lastsave", "latency|doctor", "latency|graph", "latency|histogram", "latency|history",
    "latency|latest", "latency|reset", "module|list", "module|load", "module|loadex",
    "module|unload", "monitor", "pfdebug", "pfselftest", "psync", "replconf", "replicaof", "role",
    "save", "shutdown", "slaveof", "slowlog|get", "slowlog|len", "slowlog|reset", "sync",
    /* whole databases emptied, swapped or overwritten; keys moved away */
    "flushall", "flushdb", "swapdb", "restore", "restore-asking", "migrate", "script|flush",
    "function|flush", "function|delete", "function|restore", NULL};

const size_t admin_commands_acl = 65;

const char *admin_command(const char *cmd, size_t len, const char *sub, size_t sublen) {
  for (const char *const *e = admin_commands; *e; e++) {
    const char *bar = strchr(*e, '|');
    size_t n = bar ? (size_t)(bar - *e) : strlen(*e);
    if (n != len || strncasecmp(*e, cmd, len) != 0) continue;
    if (bar == NULL) return *e;
    if (sub && strlen(bar + 1) == sublen && strncasecmp(bar + 1, sub, sublen) == 0) return *e;
  }
  return NULL;
}
