/*
 * TCP helpers for the bootstrap: address parsing, interface choice (NCCL_SOCKET_IFNAME,
 * NCCL_SOCKET_FAMILY), listening, connecting with retry, and byte transfers bounded by a
 * deadline and an abort descriptor.
 *
 * Every socket is non-blocking and close-on-exec; every wait is a poll() that also watches
 * `abort_fd` (an eventfd that becomes readable on abort; -1 for none) and ends at `deadline`
 * (braid_time_ns() clock; BRAID_DEADLINE_NONE waits for ever). EINTR is retried, sends use
 * MSG_NOSIGNAL so a dead peer never raises SIGPIPE.
 *
 * Error recording: the setup functions (parse, find_if, listen) record their errors with
 * braid_err(); the transfer functions (connect, accept, send, recv, wait) are quiet and only
 * return a status, because their caller knows which peer and which step failed:
 *   BRAID_ERR_REMOTE  the peer closed or reset the connection (errno: 0 for an orderly close,
 *                     else ECONNRESET, EPIPE, ECONNREFUSED, ...)
 *   BRAID_ERR_TIMEOUT the deadline passed
 *   BRAID_ERR_ABORTED abort_fd became readable
 *   BRAID_ERR_SYSTEM  anything else (errno says what)
 */
#ifndef BRAID_CORE_SOCKET_H
#define BRAID_CORE_SOCKET_H

#include <netinet/in.h>
#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "base/status.h"
#include "base/time.h"

typedef union braid_sockaddr {
    struct sockaddr sa;
    struct sockaddr_in in4;
    struct sockaddr_in6 in6;     /* 28 bytes: the largest member */
} braid_sockaddr_t;

#define BRAID_SOCKADDR_STRLEN 96

/* "1.2.3.4:5" or "[fe80::1%eth0]:5"; always NUL-terminated, returns buf. */
const char *braid_sockaddr_str(const braid_sockaddr_t *addr, char *buf, size_t len);
socklen_t braid_sockaddr_len(const braid_sockaddr_t *addr);
int braid_sockaddr_valid(const braid_sockaddr_t *addr);   /* AF_INET/AF_INET6 with a port */

/* Parse "host:port", "[ipv6]:port" or "ipv6:port" (last colon), resolving host names. */
braid_status_t braid_socket_parse_addr(const char *text, braid_sockaddr_t *addr_p);

/*
 * NCCL_SOCKET_IFNAME syntax: comma-separated prefixes; a leading '^' excludes them; a
 * following '=' makes them exact names. Returns 1 when `ifname` is selected by `spec`.
 */
int braid_socket_if_match(const char *spec, const char *ifname);

/*
 * Choose the address this process listens on (port 0). With NCCL_SOCKET_IFNAME set, the
 * first interface it selects (none: an error naming the list). Otherwise as NCCL: "ib*",
 * then an interface in the same subnet as `hint` (the root; may be NULL), then any but
 * docker* and lo*, then docker*, then lo. NCCL_SOCKET_FAMILY restricts the family.
 * ifname_p (IF_NAMESIZE bytes) may be NULL.
 */
braid_status_t braid_socket_find_if(const braid_sockaddr_t *hint, braid_sockaddr_t *addr_p,
                                    char *ifname_p);

/* Listen on addr (its port may be 0); addr gets the bound port. */
braid_status_t braid_socket_listen(braid_sockaddr_t *addr, int reuse_addr, int *fd_p);

/*
 * Connect. With retry_refused, a refused or unreachable connection is tried again after a
 * short sleep until the deadline (the peer's listener may not be up yet). Quiet.
 */
braid_status_t braid_socket_connect(const braid_sockaddr_t *addr, int retry_refused,
                                    int64_t deadline, int abort_fd, int *fd_p);

/* Accept one pending connection: BRAID_INPROGRESS when there is none. Quiet. */
braid_status_t braid_socket_accept(int listen_fd, int *fd_p);

/* One non-blocking pass: move what the socket takes/has, advancing *off_p. Quiet. */
braid_status_t braid_socket_send_nb(int fd, const void *buf, size_t len, size_t *off_p);
braid_status_t braid_socket_recv_nb(int fd, void *buf, size_t len, size_t *off_p);

/* Blocking transfers of exactly len bytes within the deadline. Quiet. */
braid_status_t braid_socket_send_all(int fd, const void *buf, size_t len, int64_t deadline,
                                     int abort_fd);
braid_status_t braid_socket_recv_all(int fd, void *buf, size_t len, int64_t deadline,
                                     int abort_fd);

/*
 * poll() the n entries of pfd plus abort_fd until one is ready, the deadline passes, or
 * `slice_ns` (>0) elapses (then BRAID_OK with no revents). Quiet.
 */
braid_status_t braid_socket_wait(struct pollfd *pfd, int n, int64_t deadline, int64_t slice_ns,
                                 int abort_fd);

/* Sleep up to `ns`, waking early (BRAID_ERR_ABORTED) if abort_fd becomes readable. */
braid_status_t braid_socket_sleep(int64_t ns, int abort_fd);

void braid_socket_close(int fd);   /* ignores -1 */

#endif
