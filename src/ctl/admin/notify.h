/* SPDX-License-Identifier: MIT */
/* notify: systemd's readiness protocol (sd_notify) without libsystemd: one
 * datagram per state change to $NOTIFY_SOCKET ("READY=1", "STOPPING=1", ...)
 * when it is set; nothing otherwise. */
#ifndef SPLICER_NOTIFY_H
#define SPLICER_NOTIFY_H

/* Sends msg; returns 0, 1 when NOTIFY_SOCKET is unset, -1 on error (logged
 * once by the caller if it cares; systemd then times the unit out). */
int notify_send(const char *msg);

#endif
