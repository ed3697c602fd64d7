/* Tests for url.c: the accepted forms, their defaults, the redacted text, and
 * error messages that name the problem without showing the password. */
#include "task.h"
#include "url.h"

static struct redis_url u;
static char err[512];

static void parse_ok(const char *text) {
  err[0] = '\0';
  if (url_parse(text, &u, err, sizeof err) != 0)
    TEST_FAIL_("url_parse(\"%s\") failed: %s", text, err);
}

/* Parses text expecting a failure: the error must read
 * `redis URL "<redacted>": <reason>` (or `redis URL: <reason>` when redacted
 * is NULL), stay on one line and never hold the secret. */
static void parse_err(const char *text, const char *redacted, const char *reason,
                      const char *secret) {
  char want[512];
  if (redacted)
    snprintf(want, sizeof want, "redis URL \"%s\": %s", redacted, reason);
  else
    snprintf(want, sizeof want, "redis URL: %s", reason);
  if (url_parse(text, &u, err, sizeof err) != -1)
    TEST_FAIL_("url_parse(\"%s\") succeeded, wanted: %s", text, want);
  if (strcmp(err, want) != 0)
    TEST_FAIL_("url_parse(\"%s\"):\n  got  %s\n  want %s", text, err, want);
  if (secret && strstr(err, secret)) TEST_FAIL_("error shows the secret: %s", err);
  if (strchr(err, '\n')) TEST_FAIL_("error spans lines: %s", err);
}

TEST_IMPL(url_defaults) {
  parse_ok("redis://localhost");
  ASSERT_STR_EQ(u.host, "localhost");
  ASSERT_INT_EQ(u.port, 6379);
  ASSERT_INT_EQ(u.db, 0);
  ASSERT_STR_EQ(u.path, "");
  ASSERT_STR_EQ(u.user, "");
  ASSERT_STR_EQ(u.password, "");
  ASSERT_STR_EQ(u.redacted, "redis://localhost");
}

TEST_IMPL(url_host_port_db) {
  parse_ok("redis://10.0.0.7:6380/3");
  ASSERT_STR_EQ(u.host, "10.0.0.7");
  ASSERT_INT_EQ(u.port, 6380);
  ASSERT_INT_EQ(u.db, 3);
  ASSERT_STR_EQ(u.redacted, "redis://10.0.0.7:6380/3");

  parse_ok("redis://cache.internal_1-a.example.com:1/");
  ASSERT_STR_EQ(u.host, "cache.internal_1-a.example.com");
  ASSERT_INT_EQ(u.port, 1);
  ASSERT_INT_EQ(u.db, 0);

  parse_ok("redis://h:65535/2147483647");
  ASSERT_INT_EQ(u.port, 65535);
  ASSERT_INT_EQ(u.db, 2147483647);

  parse_ok("REDIS://h?"); /* scheme in any case; an empty query is nothing */
  ASSERT_STR_EQ(u.host, "h");
}

TEST_IMPL(url_ipv6) {
  parse_ok("redis://[::1]:7000/1");
  ASSERT_STR_EQ(u.host, "::1");
  ASSERT_INT_EQ(u.port, 7000);
  ASSERT_INT_EQ(u.db, 1);
  ASSERT_STR_EQ(u.redacted, "redis://[::1]:7000/1");

  parse_ok("redis://u:p@[::1]:6380");
  ASSERT_STR_EQ(u.host, "::1");
  ASSERT_STR_EQ(u.password, "p");
  ASSERT_STR_EQ(u.redacted, "redis://u:***@[::1]:6380");

  parse_ok("redis://[2001:db8::42]");
  ASSERT_STR_EQ(u.host, "2001:db8::42");
  ASSERT_INT_EQ(u.port, 6379);

  parse_err("redis://[::1", "redis://[::1", "missing ']' after the IPv6 address", NULL);
  parse_err("redis://[nope]:1", "redis://[nope]:1", "invalid IPv6 address in brackets", NULL);
  parse_err("redis://[]:1", "redis://[]:1", "invalid IPv6 address in brackets", NULL);
  parse_err("redis://[::1]x", "redis://[::1]x", "unexpected text after ']' (write [address]:port)",
            NULL);
  parse_err("redis://::1:6379", "redis://::1:6379",
            "an IPv6 address must be in brackets, e.g. redis://[::1]:6379", NULL);
}

TEST_IMPL(url_credentials) {
  parse_ok("redis://:s3cret@db.example:6390/4");
  ASSERT_STR_EQ(u.user, "");
  ASSERT_STR_EQ(u.password, "s3cret");
  ASSERT_STR_EQ(u.host, "db.example");
  ASSERT_INT_EQ(u.port, 6390);
  ASSERT_INT_EQ(u.db, 4);
  ASSERT_STR_EQ(u.redacted, "redis://:***@db.example:6390/4");

  parse_ok("redis://app:pw@h");
  ASSERT_STR_EQ(u.user, "app");
  ASSERT_STR_EQ(u.password, "pw");
  ASSERT_STR_EQ(u.redacted, "redis://app:***@h");

  /* Percent-decoding; the redacted text keeps the user as written. */
  parse_ok("redis://us%65r%40corp:p%40ss%3Aw%2Fd%25@h:1");
  ASSERT_STR_EQ(u.user, "user@corp");
  ASSERT_STR_EQ(u.password, "p@ss:w/d%");
  ASSERT_STR_EQ(u.redacted, "redis://us%65r%40corp:***@h:1");

  /* Unencoded '@', ':' and '/' in the password: the credentials end at the
   * last '@'. */
  parse_ok("redis://u:a@b:c/d@host:6379/2");
  ASSERT_STR_EQ(u.user, "u");
  ASSERT_STR_EQ(u.password, "a@b:c/d");
  ASSERT_STR_EQ(u.host, "host");
  ASSERT_INT_EQ(u.db, 2);
  ASSERT_STR_EQ(u.redacted, "redis://u:***@host:6379/2");

  /* Both empty: no credentials. */
  parse_ok("redis://:@h");
  ASSERT_STR_EQ(u.password, "");
  ASSERT_STR_EQ(u.redacted, "redis://:@h");
}

TEST_IMPL(url_credential_errors) {
  /* No colon: most likely a password written without it; hidden whole. */
  parse_err("redis://hunter2@h", "redis://***@h",
            "credentials must be written user:password@ or :password@", "hunter2");
  parse_err("redis://bob:@h", "redis://bob:@h", "a user needs a password (user:password@)", NULL);
  parse_err("redis://:pa%zzss@h", "redis://:***@h", "bad %-escape in the password", "pa%zz");
  parse_err("redis://:pa%4@h", "redis://:***@h", "bad %-escape in the password", NULL);
  parse_err("redis://:pa%00@h", "redis://:***@h", "bad %-escape in the password", NULL);
  parse_err("redis://b%g1:pw@h", "redis://b%g1:***@h", "bad %-escape in the user name", NULL);
}

TEST_IMPL(url_port_errors) {
  parse_err("redis://:topsecret@host:99999", "redis://:***@host:99999", "port must be 1-65535",
            "topsecret");
  parse_err("redis://host:0", "redis://host:0", "port must be 1-65535", NULL);
  parse_err("redis://host:65536", "redis://host:65536", "port must be 1-65535", NULL);
  parse_err("redis://host:12345678901234567890", "redis://host:12345678901234567890",
            "port must be 1-65535", NULL);
  parse_err("redis://host:http", "redis://host:http", "port must be 1-65535", NULL);
  parse_err("redis://host:-1", "redis://host:-1", "port must be 1-65535", NULL);
  parse_err("redis://host:", "redis://host:", "missing port after ':'", NULL);
}

TEST_IMPL(url_host_and_db_errors) {
  parse_err("redis://", "redis://", "missing host", NULL);
  parse_err("redis://:pw@:6379", "redis://:***@:6379", "missing host", "pw@");
  parse_err("redis:///3", "redis:///3", "missing host", NULL);
  parse_err("redis://ho st", "redis://ho st",
            "invalid character in host (letters, digits, '-', '.', '_')", NULL);
  /* A newline from a config file: the message stays on one line. */
  parse_err("redis://host\n", "redis://host?",
            "invalid character in host (letters, digits, '-', '.', '_')", NULL);
  parse_err("redis://h/x", "redis://h/x", "db must be a number 0 or more (redis://host:port/N)",
            NULL);
  parse_err("redis://h/-1", "redis://h/-1", "db must be a number 0 or more (redis://host:port/N)",
            NULL);
  parse_err("redis://h/99999999999", "redis://h/99999999999",
            "db must be a number 0 or more (redis://host:port/N)", NULL);
  parse_err("redis://h/1/2", "redis://h/1/2", "db must be a number 0 or more (redis://host:port/N)",
            NULL);
  parse_err("redis://h#frag", "redis://h#frag", "unexpected '#' fragment", NULL);
  /* redis-py style query: refused, and its values are hidden. */
  parse_err("redis://h:1?password=hunter2&db=2", "redis://h:1?password=***&db=2",
            "query parameters are not supported in redis:// URLs "
            "(the db goes in the path: redis://host:port/N; the tls_* parameters need "
            "rediss://)",
            "hunter2");
}

TEST_IMPL(url_scheme_errors) {
  parse_err("http://h", "http://h",
            "unsupported scheme (use redis://, rediss://, unix://, redis+sentinel:// or "
            "rediss+sentinel://)",
            NULL);
  parse_err("localhost:6379", "localhost:6379",
            "missing scheme (write redis://host[:port][/db] or unix:///path/to/socket)", NULL);
  parse_err("u:pw@localhost", "u:***@localhost",
            "missing scheme (write redis://host[:port][/db] or unix:///path/to/socket)", "pw");
  parse_err("", NULL, "empty (write redis://host[:port][/db] or unix:///path/to/socket)", NULL);
  ASSERT_INT_EQ(url_parse(NULL, &u, err, sizeof err), -1);

  char big[600];
  memset(big, 'a', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  memcpy(big, "redis://", 8);
  parse_err(big, NULL, "longer than 448 bytes", NULL);
}

TEST_IMPL(url_unix) {
  parse_ok("unix:///var/run/redis/redis.sock");
  ASSERT_STR_EQ(u.path, "/var/run/redis/redis.sock");
  ASSERT_STR_EQ(u.host, "");
  ASSERT_INT_EQ(u.port, 0);
  ASSERT_INT_EQ(u.db, 0);
  ASSERT_STR_EQ(u.redacted, "unix:///var/run/redis/redis.sock");

  parse_ok("unix:///tmp/r.sock?db=5");
  ASSERT_STR_EQ(u.path, "/tmp/r.sock");
  ASSERT_INT_EQ(u.db, 5);
  ASSERT_STR_EQ(u.redacted, "unix:///tmp/r.sock?db=5");

  parse_ok("unix://app:pw@/tmp/r.sock?db=1");
  ASSERT_STR_EQ(u.user, "app");
  ASSERT_STR_EQ(u.password, "pw");
  ASSERT_STR_EQ(u.path, "/tmp/r.sock");
  ASSERT_INT_EQ(u.db, 1);
  ASSERT_STR_EQ(u.redacted, "unix://app:***@/tmp/r.sock?db=1");

  /* A path may hold '@' when no credentials come first. */
  parse_ok("unix:///tmp/a@b.sock");
  ASSERT_STR_EQ(u.path, "/tmp/a@b.sock");
}

TEST_IMPL(url_unix_errors) {
  parse_err("unix://localhost/tmp/r.sock", "unix://localhost/tmp/r.sock",
            "a unix socket URL needs an absolute path: unix:///path/to/socket", NULL);
  parse_err("unix:///", "unix:///", "missing socket path", NULL);
  parse_err("unix:///tmp/r.sock?db=x", "unix:///tmp/r.sock?db=x",
            "db must be a number 0 or more (?db=N)", NULL);
  parse_err("unix:///tmp/r.sock?password=hunter2", "unix:///tmp/r.sock?password=***",
            "unknown parameter \"password\" (only db=N is supported)", "hunter2");
  char big[200] = "unix:///";
  memset(big + 8, 'p', 120);
  big[128] = '\0';
  int rc = url_parse(big, &u, err, sizeof err);
  ASSERT_INT_EQ(rc, -1);
  ASSERT_CONTAINS(err, "socket path is longer than 107 bytes");
}

/* Errors are cut, not overflowed, when the caller's buffer is small. */
TEST_IMPL(url_small_error_buffer) {
  char small[16];
  ASSERT_INT_EQ(url_parse("redis://h:0", &u, small, sizeof small), -1);
  ASSERT_INT_EQ(strlen(small), sizeof small - 1);
  ASSERT_INT_EQ(url_parse("redis://h:0", &u, NULL, 0), -1);
}

TEST_IMPL(url_sentinel) {
  parse_ok("redis+sentinel://10.0.0.1,10.0.0.2:26380,[::1]:5000/mymaster");
  ASSERT_INT_EQ(u.nsentinels, 3);
  ASSERT_STR_EQ(u.sentinels[0].host, "10.0.0.1");
  ASSERT_INT_EQ(u.sentinels[0].port, 26379);
  ASSERT_STR_EQ(u.sentinels[1].host, "10.0.0.2");
  ASSERT_INT_EQ(u.sentinels[1].port, 26380);
  ASSERT_STR_EQ(u.sentinels[2].host, "::1");
  ASSERT_INT_EQ(u.sentinels[2].port, 5000);
  ASSERT_STR_EQ(u.service, "mymaster");
  ASSERT_STR_EQ(u.host, "");
  ASSERT_INT_EQ(u.port, 0);
  ASSERT_INT_EQ(u.db, 0);
  ASSERT_STR_EQ(u.sentinel_password, "");
  ASSERT_STR_EQ(u.redacted, "redis+sentinel://10.0.0.1,10.0.0.2:26380,[::1]:5000/mymaster");

  /* The credentials are the master's; the db follows the service. */
  parse_ok("REDIS+SENTINEL://app:s3cret@s1.example:26379/pay-ments.1/2");
  ASSERT_INT_EQ(u.nsentinels, 1);
  ASSERT_STR_EQ(u.sentinels[0].host, "s1.example");
  ASSERT_STR_EQ(u.service, "pay-ments.1");
  ASSERT_INT_EQ(u.db, 2);
  ASSERT_STR_EQ(u.user, "app");
  ASSERT_STR_EQ(u.password, "s3cret");
  ASSERT_STR_EQ(u.redacted, "REDIS+SENTINEL://app:***@s1.example:26379/pay-ments.1/2");

  /* The sentinels' own credentials, hidden like any query value. */
  parse_ok("redis+sentinel://:pw@h/m/?sentinel_user=mon&sentinel_password=t%40p");
  ASSERT_STR_EQ(u.password, "pw");
  ASSERT_STR_EQ(u.sentinel_user, "mon");
  ASSERT_STR_EQ(u.sentinel_password, "t@p");
  ASSERT_INT_EQ(u.db, 0);
  ASSERT_STR_EQ(u.redacted, "redis+sentinel://:***@h/m/?sentinel_user=***&sentinel_password=***");

  parse_ok("redis+sentinel://h/m?sentinel_password=only");
  ASSERT_STR_EQ(u.sentinel_user, "");
  ASSERT_STR_EQ(u.sentinel_password, "only");
}

TEST_IMPL(url_tls) {
  ASSERT_INT_EQ(
      url_parse("rediss://u:pw@cache.example:6380/2?tls_ca=/etc/ca%20dir&tls_cert=/c.pem"
                "&tls_key=/c.key&tls_key_password_file=/pw&tls_server_name=redis.internal",
                &u, err, sizeof err),
      0);
  ASSERT_INT_EQ(u.tls.on, 1);
  ASSERT_STR_EQ(u.host, "cache.example");
  ASSERT_INT_EQ(u.port, 6380);
  ASSERT_INT_EQ(u.db, 2);
  ASSERT_STR_EQ(u.password, "pw");
  ASSERT_STR_EQ(u.tls.ca, "/etc/ca dir");
  ASSERT_STR_EQ(u.tls.cert, "/c.pem");
  ASSERT_STR_EQ(u.tls.key, "/c.key");
  ASSERT_STR_EQ(u.tls.key_password_file, "/pw");
  ASSERT_STR_EQ(u.tls.server_name, "redis.internal");
  ASSERT_INT_EQ(u.tls.skip_verify, 0);
  /* the paths show in messages; the password does not */
  ASSERT_STR_EQ(u.redacted,
                "rediss://u:***@cache.example:6380/2?tls_ca=/etc/ca%20dir&tls_cert=/c.pem"
                "&tls_key=/c.key&tls_key_password_file=/pw&tls_server_name=redis.internal");
  ASSERT_INT_EQ(url_parse("rediss://h", &u, err, sizeof err), 0);
  ASSERT_INT_EQ(u.tls.on, 1);
  ASSERT_INT_EQ(u.port, 6379);
  ASSERT_STR_EQ(u.tls.ca, "");
  ASSERT_INT_EQ(url_parse("redis://h", &u, err, sizeof err), 0);
  ASSERT_INT_EQ(u.tls.on, 0);
  ASSERT_INT_EQ(url_parse("rediss+sentinel://s1,s2:5000/mymaster/1?sentinel_password=x&tls_ca=/ca",
                          &u, err, sizeof err),
                0);
  ASSERT_INT_EQ(u.tls.on, 1);
  ASSERT_INT_EQ(u.nsentinels, 2);
  ASSERT_STR_EQ(u.service, "mymaster");
  ASSERT_STR_EQ(u.tls.ca, "/ca");
  ASSERT_STR_EQ(u.sentinel_password, "x");
  /* no way to skip verification from a URL */
  parse_err("rediss://h?tls_skip_verify=1", "rediss://h?tls_skip_verify=1",
            "tls_skip_verify cannot be set in a URL (the --tls-skip-verify flag, for tests, is "
            "the only way)",
            NULL);
  parse_err("redis+sentinel://s/m?tls_ca=/ca", "redis+sentinel://s/m?tls_ca=/ca",
            "tls_ca needs a rediss:// URL", NULL);
  parse_err("rediss://h?sentinel_user=x", "rediss://h?sentinel_user=***",
            "unknown parameter \"sentinel_user\" (only tls_ca, tls_cert, tls_key, "
            "tls_key_password_file, tls_server_name are supported)",
            NULL);
  parse_err("rediss://h?tls_ca=%zz", "rediss://h?tls_ca=%zz", "bad %-escape in tls_ca", NULL);
}

TEST_IMPL(url_sentinel_errors) {
  parse_err("redis+sentinel:///m", "redis+sentinel:///m",
            "missing sentinel address (write "
            "redis+sentinel://host[:port][,host[:port]...]/SERVICE[/db])",
            NULL);
  parse_err("redis+sentinel://:pw@h1,,h2/m", "redis+sentinel://:***@h1,,h2/m",
            "empty sentinel address in the list", "pw");
  parse_err("redis+sentinel://h1,/m", "redis+sentinel://h1,/m",
            "empty sentinel address in the list", NULL);
  parse_err("redis+sentinel://h1:0,h2/m", "redis+sentinel://h1:0,h2/m", "port must be 1-65535",
            NULL);
  parse_err("redis+sentinel://h1,h2:x/m", "redis+sentinel://h1,h2:x/m", "port must be 1-65535",
            NULL);
  parse_err("redis+sentinel://h1:26379", "redis+sentinel://h1:26379",
            "missing service name (write "
            "redis+sentinel://host[:port][,host[:port]...]/SERVICE[/db])",
            NULL);
  parse_err("redis+sentinel://h1/", "redis+sentinel://h1/",
            "missing service name (write "
            "redis+sentinel://host[:port][,host[:port]...]/SERVICE[/db])",
            NULL);
  parse_err("redis+sentinel://h1//0", "redis+sentinel://h1//0",
            "missing service name (write "
            "redis+sentinel://host[:port][,host[:port]...]/SERVICE[/db])",
            NULL);
  parse_err("redis+sentinel://h1/m/x", "redis+sentinel://h1/m/x",
            "db must be a number 0 or more "
            "(redis+sentinel://host[:port][,host[:port]...]/SERVICE[/db])",
            NULL);
  parse_err("redis+sentinel://h1/m/1/2", "redis+sentinel://h1/m/1/2",
            "db must be a number 0 or more "
            "(redis+sentinel://host[:port][,host[:port]...]/SERVICE[/db])",
            NULL);
  parse_err("redis+sentinel://h1/m%20x", "redis+sentinel://h1/m%20x",
            "invalid character in the service name", NULL);
  parse_err("redis+sentinel://h1/m?password=hunter2", "redis+sentinel://h1/m?password=***",
            "unknown parameter \"password\" (only sentinel_user and sentinel_password "
            "are supported)",
            "hunter2");
  parse_err("redis+sentinel://h1/m?sentinel_user=u", "redis+sentinel://h1/m?sentinel_user=***",
            "sentinel_user needs a sentinel_password", NULL);
  parse_err("redis+sentinel://h1/m?sentinel_password=a%zz",
            "redis+sentinel://h1/m?sentinel_password=***", "bad %-escape in sentinel_password",
            "a%zz");
  /* a '#' in the password ends the query: what follows is hidden too */
  parse_err("redis+sentinel://h1/m?sentinel_password=ab#cd",
            "redis+sentinel://h1/m?sentinel_password=***#***", "unexpected '#' fragment", "cd");
  parse_err("redis+sentinel://a,b,c,d,e,f,g,h,i/m", "redis+sentinel://a,b,c,d,e,f,g,h,i/m",
            "more than 8 sentinels", NULL);
  parse_err("redis+sentinel://ho st/m", "redis+sentinel://ho st/m",
            "invalid character in host (letters, digits, '-', '.', '_')", NULL);
}
