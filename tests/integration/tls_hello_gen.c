/* SPDX-License-Identifier: MIT */
/* ClientHellos for the SNI tests; see tls_hello_gen.h. */
#include "tls_hello_gen.h"

#include <openssl/ssl.h>
#include <string.h>

#include "harness.h"

size_t tls_make_hello(const char *sni, const char *alpn, int nprotos, uint8_t *out, size_t cap)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	SSL *ssl;
	BIO *rb = BIO_new(BIO_s_mem()), *wb = BIO_new(BIO_s_mem());
	uint8_t wire[4096];
	size_t wn = 0;
	int n;

	H_CHECK(ctx && rb && wb, "OpenSSL context");
	H_CHECK(nprotos <= 30 && (!alpn || strlen(alpn) < 512), "ALPN list too long for the buffer");
	if (alpn)
		for (const char *p = alpn; *p;) {
			size_t l = strcspn(p, ",");
			wire[wn++] = (uint8_t)l;
			memcpy(wire + wn, p, l);
			wn += l;
			p += l + (p[l] == ',');
		}
	for (int i = 0; i < nprotos; i++) {
		wire[wn++] = 100;
		memset(wire + wn, 'a' + i % 26, 100);
		wn += 100;
	}
	if (wn)
		H_CHECK(SSL_CTX_set_alpn_protos(ctx, wire, (unsigned)wn) == 0, "alpn");
	ssl = SSL_new(ctx);
	SSL_set_bio(ssl, rb, wb);
	if (sni)
		SSL_set_tlsext_host_name(ssl, sni);
	SSL_set_connect_state(ssl);
	SSL_do_handshake(ssl); /* wants to read: the hello is in wb */
	n = BIO_read(wb, out, (int)cap);
	H_CHECK(n > 0, "no ClientHello from OpenSSL");
	SSL_free(ssl);
	SSL_CTX_free(ctx);
	return (size_t)n;
}

size_t tls_two_records(const uint8_t *in, size_t n, size_t at, uint8_t *out)
{
	size_t body = n - 5;

	H_CHECK(in[0] == 22 && body == ((size_t)in[3] << 8 | in[4]) && at < body, "one record");
	memcpy(out, in, 3);
	out[3] = (uint8_t)(at >> 8), out[4] = (uint8_t)at;
	memcpy(out + 5, in + 5, at);
	memcpy(out + 5 + at, in, 3);
	out[8 + at] = (uint8_t)((body - at) >> 8), out[9 + at] = (uint8_t)(body - at);
	memcpy(out + 10 + at, in + 5 + at, body - at);
	return n + 5;
}
