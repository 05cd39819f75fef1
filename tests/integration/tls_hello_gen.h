/* SPDX-License-Identifier: MIT */
/* ClientHellos for the tests that route by SNI (tests/integration/
 * test_tls_sni.c and the differential suite, tests/peer): made by OpenSSL
 * itself, so they are what a real client sends, and re-framed when a case
 * needs the handshake message cut across two TLS records. Both assert
 * (H_CHECK) on the test's main thread; call them before starting threads. */
#ifndef SPLICER_IT_TLS_HELLO_GEN_H
#define SPLICER_IT_TLS_HELLO_GEN_H

#include <stddef.h>
#include <stdint.h>

/* A ClientHello as OpenSSL writes it: sni (NULL: none), ALPN protocols
 * (comma-separated, NULL: none), and nprotos extra 100-byte protocols to
 * make it big (20 make it over 2,000 bytes, a post-quantum hello's size).
 * Returns its length in out (the TLS records, as sent). */
size_t tls_make_hello(const char *sni, const char *alpn, int nprotos, uint8_t *out, size_t cap);

/* The same handshake message in two TLS records, cut at `at` bytes of it
 * (2: inside the handshake header). out needs n + 5 bytes; returns that. */
size_t tls_two_records(const uint8_t *in, size_t n, size_t at, uint8_t *out);

#endif
