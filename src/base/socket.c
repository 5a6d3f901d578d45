/*
 * TCP helpers for the bootstrap (see socket.h): addresses, interface choice, listen,
 * connect with retry, and deadline-bounded transfers that an abort descriptor can cut short.
 */
#include "base/socket.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <limits.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "base/param.h"

#define SOCK_BACKLOG 16384
#define SOCK_WAIT_MAX 8                      /* descriptors one braid_socket_wait watches */
#define SOCK_RETRY_FIRST_NS (10 * 1000000ll) /* first sleep between refused connects */
#define SOCK_RETRY_MAX_NS (200 * 1000000ll)

/* ---- addresses ---- */

socklen_t braid_sockaddr_len(const braid_sockaddr_t *addr)
{
    return addr->sa.sa_family == AF_INET6 ? sizeof(addr->in6) : sizeof(addr->in4);
}

int braid_sockaddr_valid(const braid_sockaddr_t *addr)
{
    if (addr->sa.sa_family == AF_INET)
        return addr->in4.sin_port != 0;
    if (addr->sa.sa_family == AF_INET6)
        return addr->in6.sin6_port != 0;
    return 0;
}

const char *braid_sockaddr_str(const braid_sockaddr_t *addr, char *buf, size_t len)
{
    char host[INET6_ADDRSTRLEN] = "?", scope[IF_NAMESIZE + 1] = "";
    if (addr->sa.sa_family == AF_INET) {
        inet_ntop(AF_INET, &addr->in4.sin_addr, host, sizeof(host));
        snprintf(buf, len, "%s:%u", host, ntohs(addr->in4.sin_port));
    } else if (addr->sa.sa_family == AF_INET6) {
        inet_ntop(AF_INET6, &addr->in6.sin6_addr, host, sizeof(host));
        if (addr->in6.sin6_scope_id != 0 && if_indextoname(addr->in6.sin6_scope_id, scope + 1))
            scope[0] = '%';
        snprintf(buf, len, "[%s%s]:%u", host, scope, ntohs(addr->in6.sin6_port));
    } else {
        snprintf(buf, len, "(address family %d)", addr->sa.sa_family);
    }
    return buf;
}

/* NCCL_SOCKET_FAMILY: AF_UNSPEC when unset. */
static braid_status_t sock_family_param(int *family_p)
{
    const char *text = braid_param_str(BRAID_P_SOCKET_FAMILY);
    if (text == NULL || text[0] == '\0')
        *family_p = AF_UNSPEC;
    else if (strcasecmp(text, "AF_INET") == 0)
        *family_p = AF_INET;
    else if (strcasecmp(text, "AF_INET6") == 0)
        *family_p = AF_INET6;
    else
        return braid_err(BRAID_ERR_INVALID,
                         "NCCL_SOCKET_FAMILY=%s is neither AF_INET nor AF_INET6: set one of "
                         "those or unset it", text);
    return BRAID_OK;
}

/* Split "host:port", "[v6]:port" or "v6:port" in place. */
static int sock_split_hostport(char *buf, char **host_p, char **port_p)
{
    char *sep;
    if (buf[0] == '[') {
        char *close = strchr(buf, ']');
        if (close == NULL || close[1] != ':')
            return -1;
        *close = '\0';
        *host_p = buf + 1;
        *port_p = close + 2;
        return 0;
    }
    sep = strrchr(buf, ':');
    if (sep == NULL || sep == buf)
        return -1;
    *sep = '\0';
    *host_p = buf;
    *port_p = sep + 1;
    return 0;
}

braid_status_t braid_socket_parse_addr(const char *text, braid_sockaddr_t *addr_p)
{
    char buf[512], *host, *port, *end;
    struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV };
    struct addrinfo *res = NULL, *ai;
    long num;
    int rc;

    BRAID_CHECK(sock_family_param(&hints.ai_family));
    if (snprintf(buf, sizeof(buf), "%s", text) >= (int)sizeof(buf) ||
        sock_split_hostport(buf, &host, &port) != 0)
        return braid_err(BRAID_ERR_INVALID, "address '%s' is not host:port, [ipv6]:port or "
                         "ipv6:port", text);
    num = strtol(port, &end, 10);
    if (*port == '\0' || *end != '\0' || num <= 0 || num > 65535)
        return braid_err(BRAID_ERR_INVALID, "address '%s': port '%s' is not a number in "
                         "1..65535", text, port);
    rc = getaddrinfo(host, port, &hints, &res);
    if (rc != 0)
        return braid_err(BRAID_ERR_INVALID, "address '%s': cannot resolve '%s': %s", text, host,
                         gai_strerror(rc));
    for (ai = res; ai != NULL; ai = ai->ai_next) {
        if ((ai->ai_family == AF_INET || ai->ai_family == AF_INET6) &&
            ai->ai_addrlen <= sizeof(*addr_p)) {
            memset(addr_p, 0, sizeof(*addr_p));
            memcpy(addr_p, ai->ai_addr, ai->ai_addrlen);
            freeaddrinfo(res);
            return BRAID_OK;
        }
    }
    freeaddrinfo(res);
    return braid_err(BRAID_ERR_INVALID, "address '%s': '%s' has no IPv4/IPv6 address", text,
                     host);
}

/* ---- interface choice ---- */

int braid_socket_if_match(const char *spec, const char *ifname)
{
    int exclude = 0, exact = 0, found = 0;
    const char *tok, *end;
    if (*spec == '^') {
        exclude = 1;
        spec++;
    }
    if (*spec == '=') {
        exact = 1;
        spec++;
    }
    for (tok = spec; *tok != '\0' && !found; tok = *end ? end + 1 : end) {
        size_t n;
        end = strchr(tok, ',');
        if (end == NULL)
            end = tok + strlen(tok);
        n = (size_t)(end - tok);
        if (n == 0)
            continue;
        found = exact ? (strlen(ifname) == n && strncmp(ifname, tok, n) == 0)
                      : strncmp(ifname, tok, n) == 0;
    }
    return exclude ? !found : found;
}

typedef struct sock_if_query {
    const char *spec;               /* NCCL_SOCKET_IFNAME-style selection, or NULL */
    const braid_sockaddr_t *subnet; /* or: the interface's subnet holds this address */
    int family;                     /* AF_UNSPEC, AF_INET or AF_INET6 */
    int allow_link_local;           /* IPv6 fe80::/10 (only where named explicitly) */
} sock_if_query_t;

static int sock_if_usable(const struct ifaddrs *ifa, const sock_if_query_t *q)
{
    int fam;
    if (ifa->ifa_addr == NULL || !(ifa->ifa_flags & IFF_UP))
        return 0;
    fam = ifa->ifa_addr->sa_family;
    if ((fam != AF_INET && fam != AF_INET6) || (q->family != AF_UNSPEC && fam != q->family))
        return 0;
    if (fam == AF_INET6 && !q->allow_link_local &&
        IN6_IS_ADDR_LINKLOCAL(&((const struct sockaddr_in6 *)ifa->ifa_addr)->sin6_addr))
        return 0;
    return 1;
}

static int sock_if_in_subnet(const struct ifaddrs *ifa, const braid_sockaddr_t *hint)
{
    const unsigned char *a, *b, *m;
    size_t n;
    if (ifa->ifa_netmask == NULL || ifa->ifa_addr->sa_family != hint->sa.sa_family)
        return 0;
    if (hint->sa.sa_family == AF_INET) {
        a = (const unsigned char *)&((const struct sockaddr_in *)ifa->ifa_addr)->sin_addr;
        m = (const unsigned char *)&((const struct sockaddr_in *)ifa->ifa_netmask)->sin_addr;
        b = (const unsigned char *)&hint->in4.sin_addr;
        n = 4;
    } else {
        a = (const unsigned char *)&((const struct sockaddr_in6 *)ifa->ifa_addr)->sin6_addr;
        m = (const unsigned char *)&((const struct sockaddr_in6 *)ifa->ifa_netmask)->sin6_addr;
        b = (const unsigned char *)&hint->in6.sin6_addr;
        n = 16;
    }
    for (size_t i = 0; i < n; i++)
        if ((a[i] & m[i]) != (b[i] & m[i]))
            return 0;
    return 1;
}

/* First address selected by q; 1 when found. */
static int sock_if_pick(const struct ifaddrs *list, const sock_if_query_t *q,
                        braid_sockaddr_t *addr_p, char *ifname_p)
{
    for (const struct ifaddrs *ifa = list; ifa != NULL; ifa = ifa->ifa_next) {
        if (!sock_if_usable(ifa, q))
            continue;
        if (q->spec != NULL && !braid_socket_if_match(q->spec, ifa->ifa_name))
            continue;
        if (q->subnet != NULL && !sock_if_in_subnet(ifa, q->subnet))
            continue;
        memset(addr_p, 0, sizeof(*addr_p));
        memcpy(addr_p, ifa->ifa_addr, ifa->ifa_addr->sa_family == AF_INET6
                                          ? sizeof(struct sockaddr_in6)
                                          : sizeof(struct sockaddr_in));
        if (ifname_p != NULL)
            snprintf(ifname_p, IF_NAMESIZE, "%s", ifa->ifa_name);
        return 1;
    }
    return 0;
}

/* Names of the usable interfaces, for an error message. */
static void sock_if_names(const struct ifaddrs *list, const sock_if_query_t *q, char *buf,
                          size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (const struct ifaddrs *ifa = list; ifa != NULL && used + 1 < len; ifa = ifa->ifa_next) {
        if (!sock_if_usable(ifa, q))
            continue;
        const struct ifaddrs *prev = list;
        while (prev != ifa && (!sock_if_usable(prev, q) || strcmp(prev->ifa_name, ifa->ifa_name)))
            prev = prev->ifa_next;
        if (prev == ifa) {
            int n = snprintf(buf + used, len - used, "%s%s", used ? ", " : "", ifa->ifa_name);
            used += n > 0 ? (size_t)n : 0;
        }
    }
    if (used >= len)
        buf[len - 1] = '\0';
}

/* The automatic order (NCCL's): ib, the root's subnet, not docker/lo, docker, lo. */
static int sock_if_auto(const struct ifaddrs *list, const braid_sockaddr_t *hint, int family,
                        braid_sockaddr_t *addr_p, char *ifname_p)
{
    sock_if_query_t steps[] = {
        { .spec = "ib", .family = family },
        { .spec = "^docker,lo", .subnet = hint, .family = family },
        { .spec = "^docker,lo", .family = family },
        { .spec = "docker", .family = family },
        { .spec = "lo", .family = family },
    };
    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
        if (i == 1 && hint == NULL)
            continue;
        if (sock_if_pick(list, &steps[i], addr_p, ifname_p))
            return 1;
    }
    return 0;
}

braid_status_t braid_socket_find_if(const braid_sockaddr_t *hint, braid_sockaddr_t *addr_p,
                                    char *ifname_p)
{
    const char *spec = braid_param_str(BRAID_P_SOCKET_IFNAME);
    struct ifaddrs *list = NULL;
    char names[256], name[IF_NAMESIZE] = "";
    int family = AF_UNSPEC, found;

    BRAID_CHECK(sock_family_param(&family));
    if (getifaddrs(&list) != 0)
        return braid_err(BRAID_ERR_SYSTEM, "getifaddrs failed: %s", strerror(errno));
    if (spec != NULL && spec[0] != '\0') {
        sock_if_query_t q = { .spec = spec, .family = family, .allow_link_local = 1 };
        found = sock_if_pick(list, &q, addr_p, name);
        if (!found) {
            q.spec = NULL;
            sock_if_names(list, &q, names, sizeof(names));
        }
    } else {
        sock_if_query_t q = { .family = family };
        found = sock_if_auto(list, hint, family, addr_p, name);
        if (!found)
            sock_if_names(list, &q, names, sizeof(names));
    }
    freeifaddrs(list);
    if (!found && spec != NULL && spec[0] != '\0')
        return braid_err(BRAID_ERR_INVALID, "NCCL_SOCKET_IFNAME=%s selects no interface that is "
                         "up with an address%s (usable: %s): name one of those",
                         spec, family == AF_UNSPEC ? "" : " of NCCL_SOCKET_FAMILY",
                         names[0] ? names : "none");
    if (!found)
        return braid_err(BRAID_ERR_SYSTEM, "no network interface is up with an address%s "
                         "(not even loopback): bring one up or set NCCL_SOCKET_IFNAME",
                         family == AF_UNSPEC ? "" : " of NCCL_SOCKET_FAMILY");
    if (ifname_p != NULL)
        memcpy(ifname_p, name, IF_NAMESIZE);
    return BRAID_OK;
}

/* ---- listen, connect, accept ---- */

static void sock_nodelay(int fd)
{
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

braid_status_t braid_socket_listen(braid_sockaddr_t *addr, int reuse_addr, int *fd_p)
{
    char str[BRAID_SOCKADDR_STRLEN];
    socklen_t len = braid_sockaddr_len(addr);
    int one = 1, fd = socket(addr->sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return braid_err(BRAID_ERR_SYSTEM, "cannot create a socket for %s: %s",
                         braid_sockaddr_str(addr, str, sizeof(str)), strerror(errno));
    if (reuse_addr)
        (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, &addr->sa, len) != 0 || listen(fd, SOCK_BACKLOG) != 0) {
        int err = errno;
        close(fd);
        return braid_err(BRAID_ERR_SYSTEM, "cannot listen on %s: %s%s",
                         braid_sockaddr_str(addr, str, sizeof(str)), strerror(err),
                         err == EADDRINUSE ? " (another process holds that port)" : "");
    }
    if (getsockname(fd, &addr->sa, &len) != 0) {
        int err = errno;
        close(fd);
        return braid_err(BRAID_ERR_SYSTEM, "getsockname on %s failed: %s",
                         braid_sockaddr_str(addr, str, sizeof(str)), strerror(err));
    }
    *fd_p = fd;
    return BRAID_OK;
}

/* One connection attempt; returns 0 or the errno that ended it (ETIMEDOUT, ECANCELED). */
static int sock_connect_once(const braid_sockaddr_t *addr, int64_t deadline, int abort_fd,
                             int *fd_p)
{
    int err = 0, fd = socket(addr->sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return errno;
    if (connect(fd, &addr->sa, braid_sockaddr_len(addr)) != 0) {
        err = errno;
        if (err == EINPROGRESS || err == EINTR) {
            struct pollfd pfd = { .fd = fd, .events = POLLOUT };
            socklen_t len = sizeof(err);
            braid_status_t st = braid_socket_wait(&pfd, 1, deadline, 0, abort_fd);
            if (st == BRAID_ERR_ABORTED)
                err = ECANCELED;
            else if (st == BRAID_ERR_TIMEOUT)
                err = ETIMEDOUT;
            else if (st < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
                err = errno ? errno : EIO;
        }
    }
    if (err != 0) {
        close(fd);
        return err;
    }
    sock_nodelay(fd);
    *fd_p = fd;
    return 0;
}

static int sock_err_retryable(int err)
{
    return err == ECONNREFUSED || err == EHOSTUNREACH || err == ENETUNREACH ||
           err == ECONNRESET || err == EAGAIN || err == ECONNABORTED;
}

braid_status_t braid_socket_connect(const braid_sockaddr_t *addr, int retry_refused,
                                    int64_t deadline, int abort_fd, int *fd_p)
{
    int64_t sleep_ns = SOCK_RETRY_FIRST_NS;
    for (;;) {
        int err = sock_connect_once(addr, deadline, abort_fd, fd_p);
        if (err == 0)
            return BRAID_OK;
        if (err == ECANCELED)
            return BRAID_ERR_ABORTED;
        if (err == ETIMEDOUT && braid_time_ns() >= deadline)
            return BRAID_ERR_TIMEOUT;
        if (!sock_err_retryable(err)) {
            errno = err;
            return BRAID_ERR_SYSTEM;
        }
        if (!retry_refused) {
            errno = err;
            return BRAID_ERR_REMOTE;
        }
        if (braid_time_ns() + sleep_ns >= deadline) {
            errno = err;
            return BRAID_ERR_TIMEOUT;
        }
        BRAID_CHECK(braid_socket_sleep(sleep_ns, abort_fd));
        sleep_ns = sleep_ns * 2 < SOCK_RETRY_MAX_NS ? sleep_ns * 2 : SOCK_RETRY_MAX_NS;
    }
}

braid_status_t braid_socket_accept(int listen_fd, int *fd_p)
{
    for (;;) {
        int fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
            sock_nodelay(fd);
            *fd_p = fd;
            return BRAID_OK;
        }
        if (errno == EINTR || errno == ECONNABORTED)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return BRAID_INPROGRESS;
        return BRAID_ERR_SYSTEM;
    }
}

/* ---- transfers ---- */

static braid_status_t sock_io_error(int err)
{
    errno = err;
    if (err == EPIPE || err == ECONNRESET || err == ENOTCONN || err == ETIMEDOUT ||
        err == EHOSTUNREACH || err == ECONNABORTED)
        return BRAID_ERR_REMOTE;
    return BRAID_ERR_SYSTEM;
}

braid_status_t braid_socket_send_nb(int fd, const void *buf, size_t len, size_t *off_p)
{
    while (*off_p < len) {
        ssize_t n = send(fd, (const char *)buf + *off_p, len - *off_p,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            *off_p += (size_t)n;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            return BRAID_OK;
        } else {
            return sock_io_error(n < 0 ? errno : EPIPE);
        }
    }
    return BRAID_OK;
}

braid_status_t braid_socket_recv_nb(int fd, void *buf, size_t len, size_t *off_p)
{
    while (*off_p < len) {
        ssize_t n = recv(fd, (char *)buf + *off_p, len - *off_p, MSG_DONTWAIT);
        if (n > 0) {
            *off_p += (size_t)n;
        } else if (n == 0) {
            errno = 0;               /* orderly close */
            return BRAID_ERR_REMOTE;
        } else if (errno == EINTR) {
            continue;
        } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
            return BRAID_OK;
        } else {
            return sock_io_error(errno);
        }
    }
    return BRAID_OK;
}

braid_status_t braid_socket_send_all(int fd, const void *buf, size_t len, int64_t deadline,
                                     int abort_fd)
{
    size_t off = 0;
    for (;;) {
        struct pollfd pfd = { .fd = fd, .events = POLLOUT };
        BRAID_CHECK(braid_socket_send_nb(fd, buf, len, &off));
        if (off == len)
            return BRAID_OK;
        BRAID_CHECK(braid_socket_wait(&pfd, 1, deadline, 0, abort_fd));
    }
}

braid_status_t braid_socket_recv_all(int fd, void *buf, size_t len, int64_t deadline,
                                     int abort_fd)
{
    size_t off = 0;
    for (;;) {
        struct pollfd pfd = { .fd = fd, .events = POLLIN };
        BRAID_CHECK(braid_socket_recv_nb(fd, buf, len, &off));
        if (off == len)
            return BRAID_OK;
        BRAID_CHECK(braid_socket_wait(&pfd, 1, deadline, 0, abort_fd));
    }
}

/* Milliseconds for poll(): up to the deadline or the slice, whichever is first. */
static int sock_wait_ms(int64_t deadline, int64_t slice_ns, int *slice_first_p)
{
    int64_t left = deadline == BRAID_DEADLINE_NONE ? INT64_MAX : deadline - braid_time_ns();
    *slice_first_p = slice_ns > 0 && slice_ns < left;
    if (*slice_first_p)
        left = slice_ns;
    if (left <= 0)
        return 0;
    if (left == INT64_MAX)
        return -1;
    left = (left + 999999) / 1000000;
    return left > INT_MAX ? INT_MAX : (int)left;
}

braid_status_t braid_socket_wait(struct pollfd *pfd, int n, int64_t deadline, int64_t slice_ns,
                                 int abort_fd)
{
    struct pollfd all[SOCK_WAIT_MAX + 1];
    int slice_first, rc;
    if (n > SOCK_WAIT_MAX)
        return braid_err(BRAID_ERR_INTERNAL, "socket wait on %d descriptors (max %d)", n,
                         SOCK_WAIT_MAX);
    for (;;) {
        int ms = sock_wait_ms(deadline, slice_ns, &slice_first);
        if (n > 0)
            memcpy(all, pfd, sizeof(*pfd) * (size_t)n);
        all[n] = (struct pollfd){ .fd = abort_fd, .events = POLLIN };
        rc = poll(all, (nfds_t)n + 1, ms);
        if (rc < 0 && errno == EINTR)
            continue;
        if (rc < 0)
            return BRAID_ERR_SYSTEM;
        if (abort_fd >= 0 && all[n].revents != 0)
            return BRAID_ERR_ABORTED;
        for (int i = 0; i < n; i++)
            pfd[i].revents = all[i].revents;
        if (rc > 0 || slice_first)
            return BRAID_OK;
        if (ms >= 0 && braid_time_ns() >= deadline)
            return BRAID_ERR_TIMEOUT;
    }
}

braid_status_t braid_socket_sleep(int64_t ns, int abort_fd)
{
    braid_status_t st = braid_socket_wait(NULL, 0, braid_time_ns() + ns, 0, abort_fd);
    return st == BRAID_ERR_TIMEOUT ? BRAID_OK : st;
}

void braid_socket_close(int fd)
{
    if (fd >= 0)
        close(fd);
}
