/* SPDX-License-Identifier: MIT */
/* engine_list: the engine registry's rows, one per choice a route can make
 * (`engine = NAME`). Adding an engine is its file and a row here.
 *
 *   ENGINE_CHOICE(name, session, start, stream, turns, fallback, hidden, help)
 *     session   the engine whose session hooks the route's sessions use
 *     start     the engine a direction starts on
 *     stream    where a direction goes once it behaves as a stream (&engine_x), or NULL
 *     turns     where a whole session goes once it behaves as request/response
 *               (auto_uring_turns), or NULL; optional: where it cannot run,
 *               sessions stay where they are and nothing else changes
 *     fallback  the choice a route takes when an engine it needs cannot
 *               run here (probe or setup failed), or NULL
 *     hidden    1: for tests only (not in --help, /metrics)
 * The first row is the default. */
ENGINE_CHOICE("auto", engine_copy, engine_copy, &engine_splice, &engine_uring, "copy", 0,
	      "copy, then splice once a direction behaves as a stream, io_uring once a session "
	      "behaves as request/response (the default)")
ENGINE_CHOICE("copy", engine_copy, engine_copy, NULL, NULL, NULL, 0, "recv() into a buffer, send() out")
ENGINE_CHOICE("splice", engine_splice, engine_splice, NULL, NULL, "copy", 0,
	      "splice() through a pipe: payload pages never cross into user space")
ENGINE_CHOICE("sockmap", engine_sockmap, engine_copy, NULL, NULL, "splice", 0,
	      "experimental: an eBPF sk_skb program redirects between the paired sockets (root)")
ENGINE_CHOICE("uring", engine_uring, engine_copy, NULL, NULL, "copy", 0,
	      "experimental: io_uring recvs into provided buffers (one buffer each), one sendmsg")
ENGINE_CHOICE("test-tiny", engine_tiny, engine_tiny, NULL, NULL, "copy", 1,
	      "tests only: copies through a 7-byte buffer")
