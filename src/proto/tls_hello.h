/* SPDX-License-Identifier: MIT */
/* tls_hello: reads a TLS ClientHello from the bytes peeked so far, to route
 * a TLS connection by its server name (SNI) and ALPN without terminating it.
 *
 * The bytes are one contiguous buffer: what MSG_PEEK returned, from the
 * first byte of the connection. The ClientHello may come in any number of
 * TCP segments and in any number of TLS records (type 22, each at most
 * 2^14 bytes): a post-quantum hello (X25519MLKEM768) is 1.7-2.1 KB, and a
 * client may cut even the 4-byte handshake header across records. The
 * reader reassembles the handshake message across records without copying
 * it (a cursor hops over the record headers) and allocates nothing.
 *
 * Use:
 *	struct tls_hello h;
 *	tls_hello_init(&h);
 *	for each peek (the same bytes, with more appended):
 *		switch (tls_hello_parse(&h, buf, n, max)) {
 *		case TLS_HELLO_NEED_MORE: peek again once n >= h.need (or time out)
 *		case TLS_HELLO_DONE:      route on h.sni / ALPN; forward the
 *		                          h.consumed bytes (and any after) untouched
 *		case TLS_HELLO_NOT_TLS:   the listener's default route
 *		case TLS_HELLO_TOO_BIG:   over max: close (or default), h.why says
 *		case TLS_HELLO_BAD:       malformed: close, h.why says
 *		}
 * Calls are incremental: h remembers which records it has already walked,
 * so a hello arriving one byte per segment costs O(n) in all, not O(n^2).
 * The buffer must begin with the same bytes at every call (peek
 * guarantees it); call tls_hello_init() again to start over. Once a call
 * returns anything but NEED_MORE, further calls return the same answer.
 *
 * Strictness: every length is checked against the one that encloses it
 * (record, handshake message, session id, cipher suites, compression
 * methods, extensions block, each extension, the server_name list and each
 * name, the ALPN list and each protocol, supported_versions); a length that
 * overruns or leaves bytes unaccounted for is BAD, as are a duplicate
 * extension, a second host_name, an empty name or protocol, a host name
 * that is not a DNS name, a record type other than handshake before the
 * hello is whole, and bytes after the ClientHello in its last record (a
 * client sends nothing more until the server answers). GREASE values
 * (RFC 8701: 0x?A?A) are ignored as extension types, in supported_versions
 * and as ALPN protocols. An SSLv2-compatible hello (first byte with the top
 * bit set) is NOT_TLS: it carries no SNI, and no TLS 1.0+ client sends one
 * by default. */
#ifndef SPLICER_TLS_HELLO_H
#define SPLICER_TLS_HELLO_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TLS_HELLO_MAX_DEFAULT (16 * 1024) /* tls_hello_max */
#define TLS_RECORD_MAX        (1 << 14)   /* a record's plaintext length at most */
#define TLS_HOST_NAME_MAX     253         /* a DNS name, without a trailing dot */
#define TLS_ALPN_KEEP         512         /* bytes of the ALPN list kept (wire form) */

enum tls_hello_status {
	TLS_HELLO_NEED_MORE,
	TLS_HELLO_DONE,
	TLS_HELLO_NOT_TLS,
	TLS_HELLO_TOO_BIG,
	TLS_HELLO_BAD,
};

struct tls_hello {
	/* Results, valid after DONE (why also after NOT_TLS, TOO_BIG, BAD). */
	size_t consumed;            /* bytes of the records that hold the ClientHello */
	size_t need;                /* NEED_MORE: the hello cannot be whole before the
				       buffer holds this many bytes (a lower bound; a
				       malformed start may be told sooner) */
	const char *why;            /* a short reason for anything but DONE/NEED_MORE */
	uint16_t record_version;    /* of the first record (0x0301 from most clients) */
	uint16_t legacy_version;    /* ClientHello.legacy_version (0x0303 for TLS 1.2, 1.3) */
	uint16_t version;           /* highest in supported_versions (GREASE ignored), else
				       legacy_version: 0x0304 means the client offers TLS 1.3 */
	bool has_sni;               /* a server_name extension with a host_name */
	char sni[TLS_HOST_NAME_MAX + 1]; /* its first host_name, lower-cased, NUL-ended */
	size_t sni_len;
	bool has_alpn;              /* an ALPN extension (it may list only GREASE) */
	unsigned alpn_count;        /* protocols offered, GREASE not counted */
	bool alpn_truncated;        /* more than TLS_ALPN_KEEP bytes: alpn holds the first */
	size_t alpn_len;            /* bytes used in alpn */
	uint8_t alpn[TLS_ALPN_KEEP]; /* the protocols in wire form: length byte, name */

	/* The reader's own state between calls (tls_hello_init() clears it). */
	enum tls_hello_status state;
	size_t scan;                /* next record header to read */
	size_t hs_have;             /* handshake bytes in the records before scan */
	size_t hs_len;              /* the whole message: 4 + body length, once known */
	uint8_t hs_hdr[4];          /* the handshake header, which may span records */
};

void tls_hello_init(struct tls_hello *h);

/* Reads buf[0..n) as the start of a connection; max is tls_hello_max: the
 * records that hold the ClientHello must end within the first max bytes.
 * Returns the status (also kept in h->state). */
enum tls_hello_status tls_hello_parse(struct tls_hello *h, const uint8_t *buf, size_t n,
				      size_t max);

/* Walks the ALPN protocols kept in h (after DONE): start with *off = 0;
 * each call sets *name and *len to the next and returns true, false at the
 * end. */
bool tls_hello_alpn_next(const struct tls_hello *h, size_t *off, const uint8_t **name,
			 size_t *len);

/* Whether the client offered protocol proto (len bytes, compared exactly as
 * RFC 7301 says: byte for byte). */
bool tls_hello_offers_alpn(const struct tls_hello *h, const char *proto, size_t len);

/* Whether s[0..len) is a host name as SNI may carry it: 1..253 bytes, dot-
 * separated labels of 1..63 letters, digits, '-' or '_' (seen in real
 * names), no empty label and no trailing dot (RFC 6066). */
bool tls_host_name_valid(const char *s, size_t len);

/* Human-readable status name ("need more", "done", ...). */
const char *tls_hello_status_name(enum tls_hello_status st);

#endif
