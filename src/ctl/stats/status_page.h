/* SPDX-License-Identifier: MIT */
/* status_page: the stats endpoint's `/`, a page for people. One HTML
 * document with nothing to fetch (style, script and charts inline), that
 * reads whole with JavaScript off and, with it on, fetches itself again
 * every few seconds and swaps its <main> in place:
 *   - the process: version, host, uptime, workers, serving / lame duck /
 *     draining, the last reload; totals with a minute of rates
 *   - listeners and the routes on each (sni names, the default route)
 *   - each route: its settings, sessions, traffic, errors, admission
 *     refusals by reason, the maxconn queue, rates as sparklines, and
 *     every histogram /metrics has for it drawn as bars with quantiles
 *   - each backend: state (up, down, drain, disabled), weight, sessions
 *     against maxconn, its rate, bytes, errors, checks and the last 64
 *     check results as a strip with its last changes up or down
 *   - every other family of /metrics, listed as it comes, by route or
 *     for the process
 * The numbers come from the /metrics text (metrics_index.h), the settings
 * and health history from the config, the rates from status_rates.h.
 * Bounded: at most STATUS_BACKEND_ROWS backend rows, STATUS_MORE_PAGE_ROWS
 * rows of other samples, and STATUS_PAGE_MAX bytes (the rest is named, not
 * drawn; past the bytes, the page is refused). */
#ifndef SPLICER_STATUS_PAGE_H
#define SPLICER_STATUS_PAGE_H
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "html_buf.h"

#define STATUS_PAGE_MAX (6u << 20) /* bytes */
#define STATUS_BACKEND_ROWS 1000   /* backend rows on one page, all routes together */
#define STATUS_MORE_ROWS 200       /* a route's (or the process's) other samples listed */
#define STATUS_MORE_PAGE_ROWS 1000 /* the routes' other samples listed, all routes together */
#define STATUS_REFRESH_S 5         /* seconds: the script fetches the page again this often */

struct status_input {
	const struct config *cfg;
	char *metrics;               /* the /metrics text of cfg (rewritten in place) */
	size_t metrics_len;
	uint64_t now_ms;             /* Unix ms */
	uint64_t start_ms;           /* when the process started, Unix ms */
	const char *state;           /* "serving", "lameduck" or "draining" */
	const char *host;            /* this host's name */
	unsigned workers;
	uint64_t seq;                /* pages rendered since the start, this one included */
	const char *nonce;           /* the Content-Security-Policy nonce of <style> and <script> */
	unsigned refresh_s;          /* the script fetches the page again this often */
};

/* Renders the page into out (html_init'ed by the caller, with its
 * ceiling). Returns 0, -ENOMEM, or -EFBIG when the page passed out's
 * ceiling. */
int status_page_render(const struct status_input *in, struct html_buf *out);

#endif
