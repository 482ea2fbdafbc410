// deadlines.h — a request must arrive whole within `seconds`: the connections of the server (server.c), each with
// the time its request is due, and a thread that closes (shutdown(2): the connection's thread then sees the socket
// end and lets it go) every connection whose request is not whole when it is due. An idle timeout alone lets a
// client that trickles a byte every few seconds hold its thread forever; this bounds what a request may take to
// arrive, whatever it trickles.
//
// A connection's first request is due `seconds` after the connection opens; once whole, it has no deadline while it
// is answered (a generation takes what it takes); after the answer, the next request on the kept-alive connection
// is due `seconds` later.
#ifndef SPECDEC_SERVE_DEADLINES_H
#define SPECDEC_SERVE_DEADLINES_H

#include <pthread.h>
#include <stdbool.h>

#include "base/error.h"

typedef struct Watched Watched;  // one connection

typedef struct {
    double seconds;
    pthread_mutex_t lock;
    pthread_cond_t stop_signal;
    pthread_t thread;
    Watched *first;         // a list of the open connections
    bool stopping;
} Deadlines;

// Starts the thread that closes late connections (checking every tenth of `seconds`, at most every second).
int deadlines_start(Deadlines *d, double seconds, Err *err);
// Stops it (the connections' entries are the connections' to forget).
void deadlines_stop(Deadlines *d);

// A connection opened on socket fd: its first request is due `seconds` from now. NULL: out of memory (unwatched).
Watched *deadlines_watch(Deadlines *d, int fd);
// Its request is whole: no deadline while it is answered.
void deadlines_arrived(Deadlines *d, Watched *w);
// It was answered: the next request is due `seconds` from now.
void deadlines_rearm(Deadlines *d, Watched *w);
// It closed (w is freed; NULL is ignored).
void deadlines_forget(Deadlines *d, Watched *w);

#endif
