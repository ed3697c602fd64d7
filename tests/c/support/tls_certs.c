/* tls_certs: test certificates made with the openssl command line. */
#include "tls_certs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "task.h"

/* EC P-256: quick to make, accepted everywhere. */
#define NEW_KEY "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"

static int run(const char *dir, const char *fmt, const char *a, const char *b) {
  char cmd[1024], part[900];
  snprintf(part, sizeof part, fmt, a, b);
  snprintf(cmd, sizeof cmd, "cd '%s' && %s >openssl.log 2>&1", dir, part);
  if (system(cmd) == 0) return 0;
  fprintf(stderr, "tls_certs: failed: %s (see %s/openssl.log)\n", part, dir);
  return -1;
}

static int make_ca(const char *dir, const char *name) {
  return run(dir,
             "openssl req -x509 -new " NEW_KEY
             " -keyout %s.key -out %s.pem -days 2 -subj '/CN=luastream test CA'"
             " -addext basicConstraints=critical,CA:TRUE"
             " -addext keyUsage=critical,keyCertSign,cRLSign",
             name, name);
}

/* name.pem and name.key signed by ca.pem, with the extensions in name.ext. */
static int make_leaf(const char *dir, const char *name, const char *ext) {
  char path[256];
  snprintf(path, sizeof path, "%s/%s.ext", dir, name);
  FILE *f = fopen(path, "w");
  if (f == NULL) return -1;
  fputs(ext, f);
  fclose(f);
  if (run(dir, "openssl req -new " NEW_KEY " -keyout %s.key -out %s.csr -subj /CN=localhost", name,
          name) != 0)
    return -1;
  static unsigned serial;
  char sign[300];
  snprintf(sign, sizeof sign,
           "openssl x509 -req -in %%s.csr -CA ca.pem -CAkey ca.key -set_serial %u%u"
           " -days 2 -sha256 -extfile %%s.ext -out leaf.pem",
           (unsigned)getpid(), ++serial);
  return run(dir, sign, name, name) != 0 ||
                 run(dir, "mv leaf.pem %s.pem && chmod 600 %s.key", name, name) != 0
             ? -1
             : 0;
}

int tls_certs_make(char *dir, size_t len) {
  if (system("command -v openssl >/dev/null 2>&1") != 0)
    TEST_SKIP("openssl is not on PATH: the TLS tests make their own certificates with it");
  snprintf(dir, len, "/tmp/luastream-tls-XXXXXX");
  if (mkdtemp(dir) == NULL) {
    perror("tls_certs: mkdtemp");
    return -1;
  }
  if (make_ca(dir, "ca") != 0 || make_ca(dir, "other_ca") != 0 ||
      make_leaf(dir, "server",
                "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n") != 0 ||
      make_leaf(dir, "client", "extendedKeyUsage=clientAuth\n") != 0) {
    tls_certs_remove(dir);
    return -1;
  }
  return 0;
}

void tls_certs_remove(const char *dir) {
  char cmd[300];
  if (dir[0] == '\0' || strncmp(dir, "/tmp/luastream-tls-", 19) != 0) return;
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "tls_certs: could not remove %s\n", dir);
}
