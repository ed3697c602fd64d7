/* tls_certs: a throwaway test CA and certificates, made with the openssl
 * command line, for the tests that speak TLS to a real redis-server.
 *
 * In a fresh temporary directory: ca.pem (and ca.key), server.pem and
 * server.key for IP:127.0.0.1 and DNS:localhost, client.pem and client.key
 * (mode 600) signed by the same CA, and other_ca.pem, a CA that signed
 * nothing here. Valid for 2 days. */
#ifndef LUASTREAM_TEST_TLS_CERTS_H
#define LUASTREAM_TEST_TLS_CERTS_H

#include <stddef.h>

/* Makes them into a new directory, its path in dir. Returns 0, or -1 after
 * saying why on stderr. Skips the test (TEST_SKIP) without openssl on PATH. */
int tls_certs_make(char *dir, size_t len);
/* Removes the directory and what is in it. */
void tls_certs_remove(const char *dir);

#endif
